package s3

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Browser uploads: POST to a bucket with a multipart/form-data body
// (S3's POST Object). The form's fields say the key and what S3 headers
// would (Content-Type, x-amz-meta-*, acl, tagging, x-amz-server-side-
// encryption*, ...); the "file" field is the object's body and the last
// field read (later fields are ignored, as S3 ignores them). A signed
// form carries a base64 policy document, which expires and whose
// conditions every other field must meet, signed with SigV4
// (x-amz-algorithm, x-amz-credential, x-amz-date, x-amz-signature) or
// SigV2 (AWSAccessKeyId, signature: base64 HMAC-SHA1 of the policy). An
// unsigned form is an anonymous request: only a bucket policy or ACL can
// let it write. Either way the write is then authorized, encrypted,
// owned and given its ACL as a PUT with those headers would be.

const maxPostFields = 64 << 10 // the form's fields before the file

var errPostPolicy = func(why string) *apiError {
	return &apiError{"AccessDenied", http.StatusForbidden, "Invalid according to Policy: " + why}
}

// postForm is a parsed form: its fields (lower-case names) and the file.
type postForm struct {
	fields   map[string]string
	names    map[string]string // lower-case name -> as sent
	file     io.Reader
	filename string
}

// readPostForm reads the form's fields up to the file part.
func readPostForm(r *http.Request) (*postForm, *apiError) {
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		return nil, errInvalidArgument.with("A POST to a bucket is a browser upload: its body is multipart/form-data.")
	}
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, errMalformedPOST
	}
	f := &postForm{fields: map[string]string{}, names: map[string]string{}}
	budget := int64(maxPostFields)
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			return nil, errInvalidArgument.with("POST requires exactly one file upload per request.")
		}
		if err != nil {
			return nil, errMalformedPOST
		}
		name := p.FormName()
		if name == "" {
			return nil, errMalformedPOST.with("A part of the form has no field name.")
		}
		if strings.EqualFold(name, "file") {
			f.file, f.filename = p, p.FileName()
			return f, nil
		}
		b, err := io.ReadAll(io.LimitReader(p, budget+1))
		if err != nil {
			return nil, errMalformedPOST
		}
		if budget -= int64(len(b)); budget < 0 {
			return nil, errMalformedPOST.with("The form's fields are over 64 KiB.")
		}
		ln := strings.ToLower(name)
		f.fields[ln], f.names[ln] = string(b), name
	}
}

var errMalformedPOST = &apiError{"MalformedPOSTRequest", http.StatusBadRequest, "The body of your POST request is not well-formed multipart/form-data."}

// postPolicy is a parsed policy document.
type postPolicy struct {
	expiration time.Time
	conds      []postCond
	min, max   int64 // content-length-range; max -1: none
}

type postCond struct {
	op, field, value string // op: eq or starts-with; field lower case, without $
}

func parsePostPolicy(b64 string, now time.Time) (*postPolicy, *apiError) {
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, errInvalidPolicyDocument.with("The policy is not base64.")
	}
	// The document's own names are case-sensitive (json's struct
	// decoding is not): read them from a map.
	var top map[string]json.RawMessage
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&top); err != nil {
		return nil, errInvalidPolicyDocument.with("The policy is not a JSON object.")
	}
	var expiration string
	if json.Unmarshal(top["expiration"], &expiration) != nil || expiration == "" {
		return nil, errInvalidPolicyDocument.with("The policy has no expiration.")
	}
	exp, err := time.Parse(time.RFC3339, expiration)
	if err != nil {
		return nil, errInvalidPolicyDocument.with("The policy's expiration is not an ISO 8601 time.")
	}
	var doc struct{ Conditions []json.RawMessage }
	if json.Unmarshal(top["conditions"], &doc.Conditions) != nil || doc.Conditions == nil {
		return nil, errInvalidPolicyDocument.with("The policy has no conditions.")
	}
	if now.After(exp) {
		return nil, errPostPolicy("Policy expired.")
	}
	p := &postPolicy{expiration: exp, max: -1}
	for _, c := range doc.Conditions {
		var m map[string]string
		if json.Unmarshal(c, &m) == nil {
			if len(m) == 0 {
				return nil, errInvalidPolicyDocument.with("A condition is empty.")
			}
			for k, v := range m {
				p.conds = append(p.conds, postCond{"eq", strings.ToLower(strings.TrimPrefix(k, "$")), v})
			}
			continue
		}
		var l []json.RawMessage
		if json.Unmarshal(c, &l) != nil || len(l) != 3 {
			return nil, errInvalidPolicyDocument.with("A condition is {\"field\": \"value\"} or a list of three.")
		}
		var op string
		if json.Unmarshal(l[0], &op) != nil {
			return nil, errInvalidPolicyDocument.with("A condition's operator is a string.")
		}
		switch op = strings.ToLower(op); op {
		case "content-length-range":
			lo, err1 := strconv.ParseInt(strings.Trim(string(l[1]), `"`), 10, 64)
			hi, err2 := strconv.ParseInt(strings.Trim(string(l[2]), `"`), 10, 64)
			if err1 != nil || err2 != nil || lo < 0 || hi < lo {
				return nil, errInvalidPolicyDocument.with("content-length-range takes two byte counts, the least first.")
			}
			p.min, p.max = lo, hi
		case "eq", "starts-with":
			var field, val string
			if json.Unmarshal(l[1], &field) != nil || json.Unmarshal(l[2], &val) != nil || !strings.HasPrefix(field, "$") {
				return nil, errInvalidPolicyDocument.with("A condition names a field as \"$name\" and a string value.")
			}
			p.conds = append(p.conds, postCond{op, strings.ToLower(field[1:]), val})
		default:
			return nil, errInvalidPolicyDocument.with("Unknown condition operator " + strconv.Quote(op) + ".")
		}
	}
	return p, nil
}

var errInvalidPolicyDocument = &apiError{"InvalidPolicyDocument", http.StatusBadRequest, "The policy document is not valid."}

// check tests the form against the policy: every condition holds, and
// every field is covered by one (but those S3 exempts).
func (p *postPolicy) check(f *postForm, bucket string) *apiError {
	vals := map[string]string{}
	for k, v := range f.fields {
		vals[k] = v
	}
	vals["bucket"] = bucket // the one posted to, whatever a field says
	covered := map[string]bool{}
	for _, c := range p.conds {
		v, ok := vals[c.field]
		switch {
		case c.op == "eq" && (!ok || v != c.value):
			return errPostPolicy("Policy Condition failed: [eq, $" + c.field + ", " + c.value + "]")
		case c.op == "starts-with" && !ok && c.value != "":
			return errPostPolicy("Policy Condition failed: [starts-with, $" + c.field + ", " + c.value + "]")
		case c.op == "starts-with" && c.field == "content-type":
			// Each of a comma-separated list must start so.
			for _, t := range strings.Split(v, ",") {
				if !strings.HasPrefix(strings.TrimSpace(t), c.value) {
					return errPostPolicy("Policy Condition failed: [starts-with, $content-type, " + c.value + "]")
				}
			}
		case c.op == "starts-with" && !strings.HasPrefix(v, c.value):
			return errPostPolicy("Policy Condition failed: [starts-with, $" + c.field + ", " + c.value + "]")
		}
		covered[c.field] = true
	}
	for k := range f.fields {
		switch {
		case covered[k], k == "policy", k == "signature", k == "awsaccesskeyid", k == "x-amz-signature", k == "file",
			strings.HasPrefix(k, "x-ignore-"), strings.HasPrefix(k, checksumPrefix):
		default:
			return errPostPolicy("Extra input fields: " + f.names[k])
		}
	}
	return nil
}

// postAuth verifies the form's signature and returns the key that signed
// it ("" for an unsigned form) and its policy (nil for an unsigned form).
func (h *Handler) postAuth(f *postForm) (string, *postPolicy, *apiError) {
	fd := f.fields
	now := h.cfg.Now()
	pol := fd["policy"]
	switch {
	case fd["x-amz-signature"] != "" || fd["x-amz-credential"] != "" || fd["x-amz-algorithm"] != "":
		if fd["x-amz-algorithm"] != sigAlgorithm {
			return "", nil, errInvalidArgument.with("x-amz-algorithm must be " + sigAlgorithm + ".")
		}
		sc, e := parseCredential(fd["x-amz-credential"])
		if e != nil {
			return "", nil, errInvalidArgument.with(e.Message)
		}
		if why := wrongRegion(sc, h.cfg.Region, url.Values{}); why != "" {
			return "", nil, errInvalidArgument.with("x-amz-credential: " + why + ".")
		}
		if pol == "" || fd["x-amz-signature"] == "" {
			return "", nil, errInvalidArgument.with("A signed form needs policy and x-amz-signature fields.")
		}
		secret, ok := h.cfg.Credentials.Secret(sc.accessKey)
		if !ok {
			return "", nil, errInvalidAccessKey
		}
		want := hex.EncodeToString(hmacSHA256(signingKey(secret, sc), pol))
		if subtle.ConstantTimeCompare([]byte(want), []byte(fd["x-amz-signature"])) != 1 {
			return "", nil, errSignatureMismatch
		}
		p, e := parsePostPolicy(pol, now)
		return sc.accessKey, p, e
	case fd["awsaccesskeyid"] != "":
		if pol == "" || fd["signature"] == "" {
			return "", nil, errInvalidArgument.with("A signed form needs policy and signature fields.")
		}
		secret, ok := h.cfg.Credentials.Secret(fd["awsaccesskeyid"])
		if !ok {
			return "", nil, errInvalidAccessKey
		}
		m := hmac.New(sha1.New, []byte(secret))
		m.Write([]byte(pol))
		want := base64.StdEncoding.EncodeToString(m.Sum(nil))
		if subtle.ConstantTimeCompare([]byte(want), []byte(fd["signature"])) != 1 {
			return "", nil, errSignatureMismatch
		}
		p, e := parsePostPolicy(pol, now)
		return fd["awsaccesskeyid"], p, e
	case pol != "" || fd["signature"] != "":
		return "", nil, errInvalidArgument.with("A form with a policy must be signed: AWSAccessKeyId and signature, or the x-amz-* SigV4 fields.")
	}
	return "", nil, nil
}

// countingReader counts a body and fails it outside [min, max].
type countingReader struct {
	r        io.Reader
	n        int64
	min, max int64
	err      *apiError
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.max >= 0 && c.n > c.max {
		c.err = &apiError{"EntityTooLarge", http.StatusBadRequest, fmt.Sprintf("Your proposed upload exceeds the maximum allowed size of %d bytes.", c.max)}
		return n, errors.New("s3: POST file over content-length-range")
	}
	if err == io.EOF && c.n < c.min {
		c.err = &apiError{"EntityTooSmall", http.StatusBadRequest, fmt.Sprintf("Your proposed upload is smaller than the minimum allowed size of %d bytes.", c.min)}
		return n, errors.New("s3: POST file under content-length-range")
	}
	return n, err
}

// postObject serves a browser upload.
func (h *Handler) postObject(q *request) {
	f, e := readPostForm(q.r)
	if e != nil {
		q.fail(e)
		return
	}
	access, pol, e := h.postAuth(f)
	if e != nil {
		q.fail(e)
		return
	}
	key := f.fields["key"]
	if key == "" {
		q.fail(errInvalidArgument.with("Bucket POST must contain a field named 'key'. If it is specified, please check the order of the fields."))
		return
	}
	key = strings.ReplaceAll(key, "${filename}", f.filename)
	f.fields["key"] = key // the policy holds the key as it will be
	if pol != nil {
		if e := pol.check(f, q.bucket); e != nil {
			q.fail(e)
			return
		}
	}
	// From here the upload is the PUT its fields describe.
	hd := http.Header{}
	for k, v := range f.fields {
		switch k {
		case "acl":
			hd.Set("X-Amz-Acl", v)
		case "content-type", "cache-control", "content-disposition", "content-encoding", "expires":
			hd.Set(k, v)
		default:
			if strings.HasPrefix(k, "x-amz-") && k != "x-amz-signature" && k != "x-amz-credential" && k != "x-amz-algorithm" && k != "x-amz-date" {
				hd.Set(k, v)
			}
		}
	}
	pq := *q
	pq.r = q.r.Clone(q.r.Context())
	pq.r.Header = hd
	pq.key = key
	pq.auth = &auth{accessKey: access, payload: unsignedPayload}
	pq.query = url.Values{}
	if !utf8.ValidString(key) {
		q.fail(errInvalidArgument.with("Object keys must be valid UTF-8."))
		return
	}
	if !h.authorize(&pq, q.bucket, key, "s3:PutObject", PermWrite) {
		return
	}
	req, e := objectRequest(&pq, key)
	if e != nil {
		q.fail(e)
		return
	}
	if t := f.fields["tagging"]; t != "" {
		var doc tagging
		if err := xml.Unmarshal([]byte(t), &doc); err != nil {
			q.fail(errMalformedXML.with("The tagging field is not a Tagging document."))
			return
		}
		if req.Tags, e = checkTags(doc.TagSet, maxObjectTags); e != nil {
			q.fail(e)
			return
		}
	}
	seal, e := h.writeSealing(&pq)
	if e != nil {
		q.fail(e)
		return
	}
	a, e := h.ownObject(&pq, req)
	if e != nil {
		q.fail(e)
		return
	}
	lock, e := h.writeLock(&pq)
	if e != nil {
		q.fail(e)
		return
	}
	if e := h.markNull(&pq, req); e != nil {
		q.fail(e)
		return
	}
	lock.stamp(req)
	min, max := int64(0), int64(-1)
	if pol != nil {
		min, max = pol.min, pol.max
	}
	cr := &countingReader{r: f.file, min: min, max: max}
	req.Size = -1
	var body io.Reader = cr
	sum, hasSum, e := parseChecksum(hd, false)
	if e != nil {
		q.fail(e)
		return
	}
	if hasSum {
		// The file is checked against the form's x-amz-checksum-* field
		// when it ends; a mismatch fails the write.
		body = &hashTail{r: body, h: sum.alg.new(), end: func(d []byte) error {
			if !bytes.Equal(d, sum.want) {
				cr.err = sum.alg.mismatch()
				return errors.New("s3: POST file checksum mismatch")
			}
			return nil
		}}
		if req.Headers == nil {
			req.Headers = map[string]string{}
		}
		req.Headers[sum.alg.header()] = base64.StdEncoding.EncodeToString(sum.want)
	}
	if seal != nil {
		body = seal.encryptBody(req, body)
	}
	info, err := h.cfg.Service.Put(q.r.Context(), req, body)
	if err != nil {
		if cr.err != nil {
			q.fail(cr.err)
		} else {
			h.serviceError(q, err)
		}
		return
	}
	if a != nil && !h.keepObjectACL(&pq, info, a) {
		return
	}
	if lock != nil {
		if err := h.saveLock(q.r.Context(), q.bucket, key, info.Version, lock); err != nil {
			h.serviceError(q, err)
			return
		}
	}
	w := q.w.Header()
	w.Set("ETag", `"`+info.ETag+`"`)
	h.setVersionID(q.r.Context(), w, q.bucket, &info)
	setChecksumHeaders(w, info.Headers)
	loc := postLocation(q.r, q.bucket, key)
	w.Set("Location", loc)
	if seal != nil {
		setEncryptionHeaders(w, seal.enc)
	}
	if redirect := f.fields["success_action_redirect"]; redirect != "" {
		if u, err := url.Parse(redirect); err == nil && (u.Scheme == "http" || u.Scheme == "https") {
			// In S3's order: bucket, key, etag.
			add := "bucket=" + url.QueryEscape(q.bucket) + "&key=" + url.QueryEscape(key) + "&etag=" + url.QueryEscape(`"`+info.ETag+`"`)
			if u.RawQuery != "" {
				add = u.RawQuery + "&" + add
			}
			u.RawQuery = add
			w.Set("Location", u.String())
			q.w.WriteHeader(http.StatusSeeOther)
			return
		}
	}
	switch f.fields["success_action_status"] {
	case "200":
		q.w.WriteHeader(http.StatusOK)
	case "201":
		writeXML(q.w, http.StatusCreated, struct {
			XMLName  xml.Name `xml:"PostResponse"`
			Location string
			Bucket   string
			Key      string
			ETag     string
		}{Location: loc, Bucket: q.bucket, Key: key, ETag: `"` + info.ETag + `"`})
	default:
		q.w.WriteHeader(http.StatusNoContent)
	}
}

// postLocation is the URL of an object a POST upload made, as S3 gives
// it: absolute, path style or virtual-host style as the request was.
func postLocation(r *http.Request, bucket, key string) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	path := "/" + strings.ReplaceAll(url.PathEscape(key), "%2F", "/")
	if r.URL.Path == "/"+bucket || strings.HasPrefix(r.URL.Path, "/"+bucket+"/") {
		path = "/" + bucket + path
	}
	return scheme + "://" + r.Host + path
}
