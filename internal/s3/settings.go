package s3

import (
	"encoding/xml"
	"net/http"
	"strings"

	"github.com/cairn-db/cairn/internal/object"
)

// Bucket settings Cairn does not keep. Clients read them (s3cmd info,
// rclone, infrastructure tools) and expect what S3 answers for a bucket
// that has none: the "not found" error of each, or an empty document.
// Writing one answers NotImplemented and changes nothing.
//
// ACLs are disabled, as on an S3 bucket whose object ownership is
// BucketOwnerEnforced (S3's default): access is granted per access key
// (`cairn key create --grant`), every bucket and object reads as owned by
// the requester with full control, and a request that sets an ACL other
// than "private" or "bucket-owner-full-control" fails with
// AccessControlListNotSupported.

var errACLNotSupported = &apiError{"AccessControlListNotSupported", http.StatusBadRequest, "The bucket does not allow ACLs: grant access with access keys (cairn key create --grant BUCKET=read|write|admin)."}

// missingSettings are the bucket settings whose absence S3 reports as an
// error, by subresource.
var missingSettings = map[string]*apiError{
	"cors":        {"NoSuchCORSConfiguration", http.StatusNotFound, "The CORS configuration does not exist."},
	"object-lock": {"ObjectLockConfigurationNotFoundError", http.StatusNotFound, "Object Lock configuration does not exist for this bucket."},
	"website":     {"NoSuchWebsiteConfiguration", http.StatusNotFound, "The specified bucket does not have a website configuration."},
	"replication": {"ReplicationConfigurationNotFoundError", http.StatusNotFound, "The replication configuration was not found."},
}

// emptySettings are the bucket settings S3 reports as an empty document
// when none is set, by subresource: the document's element.
var emptySettings = map[string]string{
	"logging":      "BucketLoggingStatus",
	"notification": "NotificationConfiguration",
	"accelerate":   "AccelerateConfiguration",
}

// deletable are the settings whose DELETE leaves the bucket with none,
// which it already has.
var deletable = map[string]bool{"cors": true, "website": true, "replication": true}

// bucketSetting answers a request for one of the settings above and
// reports whether it did.
func (h *Handler) bucketSetting(q *request) bool {
	name := ""
	for k := range q.query {
		if k == "acl" || k == "requestPayment" || k == "ownershipControls" || missingSettings[k] != nil || emptySettings[k] != "" {
			name = k
		}
	}
	if name == "" {
		return false
	}
	switch q.r.Method {
	case http.MethodGet:
		if !h.exists(q) {
			return true
		}
		h.getSetting(q, name)
	case http.MethodPut:
		if name == "acl" {
			h.putACL(q)
			return true
		}
		notImplemented(q, "PUT ?"+name)
	case http.MethodDelete:
		if !deletable[name] {
			notImplemented(q, "DELETE ?"+name)
			return true
		}
		if !h.exists(q) {
			return true
		}
		q.w.WriteHeader(http.StatusNoContent)
	default:
		q.fail(errMethodNotAllowed)
	}
	return true
}

func (h *Handler) getSetting(q *request, name string) {
	if e := missingSettings[name]; e != nil {
		q.fail(e)
		return
	}
	if el := emptySettings[name]; el != "" {
		writeXML(q.w, http.StatusOK, struct {
			XMLName xml.Name
			NS      string `xml:"xmlns,attr"`
		}{xml.Name{Local: el}, s3NS})
		return
	}
	switch name {
	case "acl":
		writeXML(q.w, http.StatusOK, ownerACL(q))
	case "requestPayment":
		writeXML(q.w, http.StatusOK, struct {
			XMLName xml.Name `xml:"RequestPaymentConfiguration"`
			NS      string   `xml:"xmlns,attr"`
			Payer   string   `xml:"Payer"`
		}{NS: s3NS, Payer: "BucketOwner"})
	case "ownershipControls":
		writeXML(q.w, http.StatusOK, struct {
			XMLName   xml.Name `xml:"OwnershipControls"`
			NS        string   `xml:"xmlns,attr"`
			Ownership string   `xml:"Rule>ObjectOwnership"`
		}{NS: s3NS, Ownership: "BucketOwnerEnforced"})
	}
}

type grantee struct {
	XMLNSXSI    string `xml:"xmlns:xsi,attr"`
	Type        string `xml:"xsi:type,attr"`
	ID          string `xml:"ID"`
	DisplayName string `xml:"DisplayName"`
}

type grant struct {
	Grantee    grantee `xml:"Grantee"`
	Permission string  `xml:"Permission"`
}

type accessControlPolicy struct {
	XMLName xml.Name `xml:"AccessControlPolicy"`
	NS      string   `xml:"xmlns,attr"`
	Owner   owner    `xml:"Owner"`
	Grants  []grant  `xml:"AccessControlList>Grant"`
}

// ownerACL is the ACL of every bucket and object: the requester owns it
// with full control.
func ownerACL(q *request) accessControlPolicy {
	o := q.owner()
	return accessControlPolicy{NS: s3NS, Owner: o, Grants: []grant{{
		Grantee:    grantee{XMLNSXSI: "http://www.w3.org/2001/XMLSchema-instance", Type: "CanonicalUser", ID: o.ID, DisplayName: o.DisplayName},
		Permission: "FULL_CONTROL",
	}}}
}

// aclHeadersError checks the ACL headers of a request that writes: only
// the canned ACLs that grant nothing beyond the owner's full control pass.
func aclHeadersError(hd http.Header) *apiError {
	switch strings.ToLower(hd.Get("X-Amz-Acl")) {
	case "", "private", "bucket-owner-full-control":
	default:
		return errACLNotSupported
	}
	const grant = "x-amz-grant-"
	for k := range hd { // every PUT's headers: no allocation per name
		if len(k) >= len(grant) && strings.EqualFold(k[:len(grant)], grant) {
			return errACLNotSupported
		}
	}
	return nil
}

// putACL accepts an ACL that grants only the owner's full control (a
// canned private ACL, or a document with that one grant) and refuses any
// other.
func (h *Handler) putACL(q *request) {
	// ServeHTTP has already refused ACL headers other than the owner's.
	var doc struct {
		XMLName xml.Name `xml:"AccessControlPolicy"`
		Grants  []struct {
			Grantee struct {
				ID  string `xml:"ID"`
				URI string `xml:"URI"`
			} `xml:"Grantee"`
			Permission string `xml:"Permission"`
		} `xml:"AccessControlList>Grant"`
	}
	if e := readXML(q, &doc, maxXMLBody); e != nil {
		q.fail(e)
		return
	}
	if g := doc.Grants; len(g) > 1 || len(g) == 1 && (g[0].Permission != "FULL_CONTROL" || g[0].Grantee.URI != "") {
		q.fail(errACLNotSupported)
		return
	}
	if q.key != "" {
		if _, err := h.cfg.Service.Stat(q.r.Context(), &object.GetRequest{Space: q.bucket, Key: q.key, Length: -1}); err != nil {
			h.serviceError(q, err)
			return
		}
	} else if !h.exists(q) {
		return
	}
	q.w.WriteHeader(http.StatusOK)
}

// objectACL answers GET and PUT ?acl on an object.
func (h *Handler) objectACL(q *request) {
	switch q.r.Method {
	case http.MethodGet:
		v, e := h.version(q)
		if e != nil {
			q.fail(e)
			return
		}
		if _, err := h.cfg.Service.Stat(q.r.Context(), &object.GetRequest{Space: q.bucket, Key: q.key, Version: v, Length: -1}); err != nil {
			h.objectError(q, v, err)
			return
		}
		writeXML(q.w, http.StatusOK, ownerACL(q))
	case http.MethodPut:
		h.putACL(q)
	default:
		q.fail(errMethodNotAllowed)
	}
}
