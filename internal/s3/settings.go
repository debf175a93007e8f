package s3

import (
	"encoding/xml"
	"net/http"
)

// Bucket settings Cairn does not keep. Clients read them (s3cmd info,
// rclone, infrastructure tools) and expect what S3 answers for a bucket
// that has none: the "not found" error of each, or an empty document.
// Writing one answers NotImplemented and changes nothing.
// (ACLs are in acl.go, policies in authz.go, CORS in cors.go.)

// missingSettings are the bucket settings whose absence S3 reports as an
// error, by subresource.
var missingSettings = map[string]*apiError{
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
var deletable = map[string]bool{"website": true, "replication": true}

// bucketSetting answers a request for one of the settings above and
// reports whether it did.
func (h *Handler) bucketSetting(q *request) bool {
	name := ""
	for k := range q.query {
		if k == "requestPayment" || missingSettings[k] != nil || emptySettings[k] != "" {
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
	case "requestPayment":
		writeXML(q.w, http.StatusOK, struct {
			XMLName xml.Name `xml:"RequestPaymentConfiguration"`
			NS      string   `xml:"xmlns,attr"`
			Payer   string   `xml:"Payer"`
		}{NS: s3NS, Payer: "BucketOwner"})
	}
}
