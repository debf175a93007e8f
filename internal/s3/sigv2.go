package s3

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Signature Version 2: "Authorization: AWS KEY:SIGNATURE", or a presigned
// URL with AWSAccessKeyId, Expires and Signature. Tools still send it
// (boto3 before 1.36 presigns with it by default; s3cmd and minio-go can
// sign with it). The signature is base64 HMAC-SHA1 of
//
//	METHOD \n Content-MD5 \n Content-Type \n Date (or Expires) \n
//	x-amz-* headers, lower-cased, sorted, "name:value\n" each
//	/BUCKET/KEY as sent, and the subresources ?a&b=v, sorted
//
// The body is not signed: a SigV2 request is checked as an unsigned
// payload (Content-MD5, when sent, is signed and checked). Clients differ
// in which query parameters they count as subresources, so each known
// list is tried.

// sigV2Subresources are the query parameters that are part of the signed
// resource, by client family: botocore's and minio-go's lists.
var sigV2Subresources = [][]string{
	{"accelerate", "acl", "cors", "defaultObjectAcl", "location", "logging", "partNumber", "policy", "requestPayment", "torrent",
		"versioning", "versionId", "versions", "website", "uploads", "uploadId", "response-content-type", "response-content-language",
		"response-expires", "response-cache-control", "response-content-disposition", "response-content-encoding", "delete",
		"lifecycle", "tagging", "restore", "storageClass", "notification", "replication", "analytics", "metrics", "inventory",
		"select", "select-type", "object-lock"},
	{"acl", "cors", "delete", "encryption", "legal-hold", "lifecycle", "location", "logging", "notification", "partNumber", "policy",
		"requestPayment", "response-cache-control", "response-content-disposition", "response-content-encoding", "response-content-language",
		"response-content-type", "response-expires", "retention", "select", "select-type", "tagging", "torrent", "uploadId", "uploads",
		"versionId", "versioning", "versions", "website"},
}

// authV2 verifies a SigV2 request (header, or query when presigned).
func (h *Handler) authV2(q *request, header string) (*auth, *apiError) {
	r := q.r
	now := h.cfg.Now()
	var access, sig, date string
	if header != "" {
		var ok bool
		access, sig, ok = strings.Cut(strings.TrimPrefix(header, "AWS "), ":")
		if !ok || access == "" || sig == "" {
			return nil, errAuthHeaderMalformed.with("A Signature Version 2 header is \"AWS ACCESSKEY:SIGNATURE\".")
		}
		// The signed date is Date's, or empty when x-amz-date (signed
		// among the x-amz-* headers) gives the time.
		t := r.Header.Get("X-Amz-Date")
		if t == "" {
			t = r.Header.Get("Date")
			date = t
		}
		when, err := http.ParseTime(t)
		if err != nil {
			return nil, errAccessDenied.with("A Signature Version 2 request needs a Date or x-amz-date header.")
		}
		if d := now.Sub(when); d > maxSkew || d < -maxSkew {
			return nil, errTimeTooSkewed
		}
	} else {
		access, sig, date = q.query.Get("AWSAccessKeyId"), q.query.Get("Signature"), q.query.Get("Expires")
		exp, err := strconv.ParseInt(date, 10, 64)
		if access == "" || sig == "" || err != nil {
			return nil, errAccessDenied.with("A Signature Version 2 URL needs AWSAccessKeyId, Expires and Signature.")
		}
		if now.After(time.Unix(exp, 0)) {
			return nil, errRequestExpired
		}
	}
	secret, ok := h.cfg.Credentials.Secret(access)
	if !ok {
		return nil, errInvalidAccessKey
	}
	got, err := base64.StdEncoding.DecodeString(sig)
	if err != nil {
		return nil, errSignatureMismatch
	}
	// Candidates: each client family's subresources; a bucket's resource
	// as /BUCKET or /BUCKET/; Content-MD5 signed or not (botocore adds it
	// to some requests after signing them; the body is unsigned anyway).
	for _, subs := range sigV2Subresources {
		for _, slash := range []bool{false, true} {
			for _, md5 := range []bool{true, false} {
				if (slash && q.key != "") || (!md5 && r.Header.Get("Content-Md5") == "") {
					continue
				}
				m := hmac.New(sha1.New, []byte(secret))
				m.Write([]byte(stringToSignV2(q, date, subs, slash, md5)))
				if subtle.ConstantTimeCompare(m.Sum(nil), got) == 1 {
					return &auth{accessKey: access, payload: unsignedPayload}, nil
				}
			}
		}
	}
	return nil, errSignatureMismatch
}

func stringToSignV2(q *request, date string, subs []string, slash, withMD5 bool) string {
	r := q.r
	md5 := ""
	if withMD5 {
		md5 = r.Header.Get("Content-Md5")
	}
	var b strings.Builder
	b.WriteString(r.Method + "\n" + md5 + "\n" + r.Header.Get("Content-Type") + "\n" + date + "\n")
	var amz []string
	for k := range r.Header {
		if lk := strings.ToLower(k); strings.HasPrefix(lk, "x-amz-") {
			amz = append(amz, lk)
		}
	}
	sort.Strings(amz)
	for _, k := range amz {
		vs := r.Header.Values(k)
		for i := range vs {
			vs[i] = strings.TrimSpace(vs[i])
		}
		b.WriteString(k + ":" + strings.Join(vs, ",") + "\n")
	}
	// The resource: the path as sent, with the bucket for virtual hosts.
	path := r.URL.EscapedPath()
	if p := strings.TrimPrefix(r.URL.Path, "/"); q.bucket != "" && p != q.bucket && !strings.HasPrefix(p, q.bucket+"/") {
		path = "/" + q.bucket + path // virtual-host style
	}
	if slash && !strings.HasSuffix(path, "/") {
		path += "/"
	}
	b.WriteString(path)
	var params []string
	for _, s := range subs {
		if vs, ok := q.query[s]; ok {
			if len(vs) > 0 && vs[0] != "" {
				params = append(params, s+"="+vs[0])
			} else {
				params = append(params, s)
			}
		}
	}
	sort.Strings(params)
	if len(params) > 0 {
		b.WriteString("?" + strings.Join(params, "&"))
	}
	return b.String()
}
