package s3

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/policy"
)

// Authorization.
//
// A request is allowed when its access key's grants allow it (cairn key
// create --grant; the root key may do everything) or the bucket's policy
// allows it, unless the policy explicitly denies it: an explicit deny
// wins over every allow, the root key's too, except that a key with admin
// on the bucket may always read, replace and delete the policy (so no
// policy locks its bucket for good). A request signed by no key is
// anonymous: only a policy can allow it (Principal "*").
//
// Each request is an S3 action on a resource (arn:aws:s3:::BUCKET or
// arn:aws:s3:::BUCKET/KEY), with the condition keys of package policy:
// aws:SourceIp, aws:SecureTransport, aws:Referer, aws:UserAgent,
// aws:CurrentTime, aws:EpochTime, aws:username and aws:userid (the access
// key), aws:PrincipalType, s3:prefix, s3:delimiter, s3:max-keys,
// s3:x-amz-server-side-encryption(-aws-kms-key-id), s3:x-amz-acl,
// s3:x-amz-copy-source, s3:x-amz-metadata-directive, s3:x-amz-storage-class,
// s3:x-amz-content-sha256, s3:VersionId, s3:RequestObjectTag/KEY,
// s3:RequestObjectTagKeys, s3:ExistingObjectTag/KEY, s3:signatureversion
// and s3:authType.

const policyConfig = "policy"

// action is the S3 action a request on a bucket (or an object in it) is.
func action(q *request) string {
	m, qs := q.r.Method, q.query
	has := qs.Has
	if q.key == "" {
		sub := map[string]string{
			"acl": "BucketAcl", "policy": "BucketPolicy", "versioning": "BucketVersioning", "tagging": "BucketTagging",
			"lifecycle": "LifecycleConfiguration", "encryption": "EncryptionConfiguration", "object-lock": "BucketObjectLockConfiguration",
			"publicAccessBlock": "BucketPublicAccessBlock", "ownershipControls": "BucketOwnershipControls", "cors": "BucketCORS",
			"website": "BucketWebsite", "logging": "BucketLogging", "notification": "BucketNotification",
			"replication": "ReplicationConfiguration", "requestPayment": "BucketRequestPayment", "accelerate": "AccelerateConfiguration",
		}
		switch m {
		case http.MethodGet, http.MethodHead:
			switch {
			case has("location"):
				return "s3:GetBucketLocation"
			case has("policyStatus"):
				return "s3:GetBucketPolicyStatus"
			case has("versions"):
				return "s3:ListBucketVersions"
			case has("uploads"):
				return "s3:ListBucketMultipartUploads"
			}
			for k, a := range sub {
				if has(k) {
					return "s3:Get" + a
				}
			}
			return "s3:ListBucket"
		case http.MethodPut, http.MethodDelete:
			if m == http.MethodDelete && has("policy") {
				return "s3:DeleteBucketPolicy"
			}
			for k, a := range sub {
				if has(k) {
					return "s3:Put" + a
				}
			}
			if m == http.MethodDelete {
				return "s3:DeleteBucket"
			}
			return "s3:CreateBucket"
		case http.MethodPost:
			if has("delete") {
				return "s3:DeleteObject"
			}
			return "s3:PutObject" // a browser POST upload
		}
		return "s3:ListBucket"
	}
	switch m {
	case http.MethodGet, http.MethodHead:
		switch {
		case has("acl"):
			return "s3:GetObject" + versioned(qs) + "Acl"
		case has("tagging"):
			return "s3:GetObject" + versioned(qs) + "Tagging"
		case has("retention"):
			return "s3:GetObjectRetention"
		case has("legal-hold"):
			return "s3:GetObjectLegalHold"
		case has("attributes"):
			return "s3:GetObject" + versioned(qs) + "Attributes"
		case has("uploadId"):
			return "s3:ListMultipartUploadParts"
		}
		return "s3:GetObject" + versioned(qs)
	case http.MethodPut:
		switch {
		case has("acl"):
			return "s3:PutObject" + versioned(qs) + "Acl"
		case has("tagging"):
			return "s3:PutObject" + versioned(qs) + "Tagging"
		case has("retention"):
			return "s3:PutObjectRetention"
		case has("legal-hold"):
			return "s3:PutObjectLegalHold"
		}
		return "s3:PutObject"
	case http.MethodDelete:
		switch {
		case has("tagging"):
			return "s3:DeleteObject" + versioned(qs) + "Tagging"
		case has("uploadId"):
			return "s3:AbortMultipartUpload"
		}
		return "s3:DeleteObject" + versioned(qs)
	case http.MethodPost:
		if has("restore") {
			return "s3:RestoreObject"
		}
		return "s3:PutObject"
	}
	return "s3:GetObject"
}

func versioned(qs url.Values) string {
	if qs.Get("versionId") != "" {
		return "Version"
	}
	return ""
}

// resource is the ARN of a bucket or of an object in it.
func resource(bucket, key string) string {
	if key == "" {
		return "arn:aws:s3:::" + bucket
	}
	return "arn:aws:s3:::" + bucket + "/" + key
}

// authorize checks that the request may do act on bucket (and key), whose
// grant-based permission is need. It answers a refusal itself.
func (h *Handler) authorize(q *request, bucket, key, act, need string) bool {
	if e := h.authorization(q, bucket, key, q.query.Get("versionId"), act, need); e != nil {
		q.fail(e)
		return false
	}
	return true
}

// authorization is authorize's decision, for the version versionID of key
// ("" the latest), without answering.
func (h *Handler) authorization(q *request, bucket, key, versionID, act, need string) *apiError {
	ctx := q.r.Context()
	p, err := h.bucketPolicy(ctx, bucket)
	if err != nil {
		return fromService(err)
	}
	access := q.auth.accessKey
	granted := access != "" && h.allowed(q, bucket, need)
	if granted && p == nil {
		return nil
	}
	keys := h.conditionKeys(ctx, q, p, bucket, key)
	d := policy.NoOpinion
	if p != nil {
		d = p.Evaluate(&policy.Request{Principal: access, Action: act, Resource: resource(bucket, key), Context: keys})
	}
	switch {
	case d == policy.Deny && granted && h.allowed(q, bucket, PermAdmin) && strings.HasSuffix(act, "BucketPolicy"):
		return nil // an admin may always mend the policy
	case d == policy.Deny:
		return errAccessDenied
	case granted:
		return nil
	case d == policy.Allow && access == "" && p.Public():
		// A public policy's grants to anonymous requests hold unless the
		// bucket's public access block restricts them.
		pab, err := h.publicAccessBlock(ctx, bucket)
		if err != nil {
			return fromService(err)
		}
		if !pab.RestrictPublicBuckets {
			return nil
		}
	case d == policy.Allow:
		return nil
	}
	// Last, the ACLs, as a policy of their own.
	ok, err := h.aclAllows(q, bucket, key, versionID, act, keys)
	switch k := object.KindOf(err); {
	case ok:
		return nil
	case k == object.SpaceNotFound:
		return errNoSuchBucket // as S3 tells anyone
	case (k == object.NotFound || k == object.Deleted) && act == "s3:GetObject" && h.authorization(q, bucket, "", "", "s3:ListBucket", PermRead) == nil:
		return errNoSuchKey // to those who may list the bucket, as S3
	case err != nil && k != object.NotFound && k != object.Deleted && k != object.BadSpaceName:
		return fromService(err)
	}
	// A bucket that is gone is NoSuchBucket to anyone, as in S3 (the
	// documents read above may be a cached view of it).
	if _, err := h.cfg.Service.List(ctx, &object.ListRequest{Space: bucket, Limit: 1}); object.KindOf(err) == object.SpaceNotFound {
		return errNoSuchBucket
	}
	return errAccessDenied
}

// bucketPolicy returns the bucket's policy, or nil.
func (h *Handler) bucketPolicy(ctx context.Context, bucket string) (*policy.Policy, error) {
	doc, err := h.config(ctx, bucket, policyConfig)
	if k := object.KindOf(err); k == object.SpaceNotFound || k == object.BadSpaceName {
		return nil, nil // the request finds out on its own
	}
	if err != nil || doc == nil {
		return nil, err
	}
	p, err := policy.Parse(doc, bucket)
	if err != nil { // it parsed when it was set
		return nil, object.Errorf(object.Internal, "the bucket policy of %s does not parse: %v", bucket, err)
	}
	return p, nil
}

// conditionKeys are the request's condition keys, by lower-case name.
func (h *Handler) conditionKeys(ctx context.Context, q *request, p *policy.Policy, bucket, key string) map[string][]string {
	r, hd := q.r, q.r.Header
	c := map[string][]string{}
	set := func(k, v string) {
		if v != "" {
			c[k] = []string{v}
		}
	}
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		set("aws:sourceip", host)
	}
	set("aws:securetransport", strconv.FormatBool(r.TLS != nil))
	set("aws:referer", hd.Get("Referer"))
	set("aws:useragent", hd.Get("User-Agent"))
	now := h.cfg.Now().UTC()
	set("aws:currenttime", now.Format(time.RFC3339))
	set("aws:epochtime", strconv.FormatInt(now.Unix(), 10))
	if a := q.auth.accessKey; a != "" {
		set("aws:username", a)
		set("aws:userid", a)
		set("aws:principaltype", "User")
		set("s3:signatureversion", sigAlgorithm)
		if r.Header.Get("Authorization") != "" {
			set("s3:authtype", "REST-HEADER")
		} else {
			set("s3:authtype", "REST-QUERY-STRING")
		}
		set("s3:x-amz-content-sha256", q.auth.payload)
	} else {
		set("aws:principaltype", "Anonymous")
	}
	qs := q.query
	if key == "" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		if qs.Has("prefix") {
			c["s3:prefix"] = []string{qs.Get("prefix")}
		}
		set("s3:delimiter", qs.Get("delimiter"))
		set("s3:max-keys", qs.Get("max-keys"))
	}
	set("s3:versionid", qs.Get("versionId"))
	for _, h := range []string{"x-amz-server-side-encryption", "x-amz-server-side-encryption-aws-kms-key-id", "x-amz-acl",
		"x-amz-copy-source", "x-amz-metadata-directive", "x-amz-storage-class", "x-amz-server-side-encryption-customer-algorithm"} {
		set("s3:"+h, hd.Get(h))
	}
	if t := hd.Get("X-Amz-Tagging"); t != "" {
		if tags, err := url.ParseQuery(t); err == nil {
			var keys []string
			for k, v := range tags {
				keys = append(keys, k)
				c["s3:requestobjecttag/"+strings.ToLower(k)] = v
			}
			c["s3:requestobjecttagkeys"] = keys
		}
	}
	if key != "" && p != nil && p.Mentions("s3:ExistingObjectTag/") {
		// Read only when the policy asks: the object's current tags.
		info, err := h.cfg.Service.Stat(ctx, &object.GetRequest{Space: bucket, Key: key, Length: -1})
		if err == nil {
			for k, v := range info.Tags {
				c["s3:existingobjecttag/"+strings.ToLower(k)] = []string{v}
			}
		}
	}
	return c
}

var (
	errNoSuchBucketPolicy = &apiError{"NoSuchBucketPolicy", http.StatusNotFound, "The bucket policy does not exist."}
	errMalformedPolicy    = &apiError{"MalformedPolicy", http.StatusBadRequest, "The policy is not valid."}
)

// bucketPolicyOp serves GET, PUT and DELETE ?policy and GET ?policyStatus.
func (h *Handler) bucketPolicyOp(q *request) {
	if !h.exists(q) {
		return
	}
	ctx := q.r.Context()
	if q.query.Has("policyStatus") {
		if q.r.Method != http.MethodGet {
			q.fail(errMethodNotAllowed)
			return
		}
		// Public if the policy or the bucket's ACL grants to everyone
		// (S3 answers NoSuchBucketPolicy without a policy; this answers
		// whether the bucket is public, which is the question asked).
		p, err := h.bucketPolicy(ctx, q.bucket)
		if err != nil {
			h.serviceError(q, err)
			return
		}
		a, err := h.bucketACL(ctx, q.bucket)
		if err != nil {
			h.serviceError(q, err)
			return
		}
		writeXML(q.w, http.StatusOK, struct {
			XMLName  struct{} `xml:"PolicyStatus"`
			NS       string   `xml:"xmlns,attr"`
			IsPublic bool
		}{NS: s3NS, IsPublic: (p != nil && p.Public()) || (a != nil && a.public())})
		return
	}
	switch q.r.Method {
	case http.MethodGet:
		doc, err := h.config(ctx, q.bucket, policyConfig)
		if err != nil {
			h.serviceError(q, err)
			return
		}
		if doc == nil {
			q.fail(errNoSuchBucketPolicy)
			return
		}
		q.w.Header().Set("Content-Type", "application/json")
		q.w.WriteHeader(http.StatusOK)
		_, _ = q.w.Write(doc)
	case http.MethodPut:
		doc, e := readXMLBytes(q, 20<<10) // S3's limit on a bucket policy
		if e != nil {
			if e.Code == errMalformedXML.Code {
				e = errMalformedPolicy.with("The policy is over 20 KiB.")
			}
			q.fail(e)
			return
		}
		p, err := policy.Parse(doc, q.bucket)
		if err != nil {
			q.fail(errMalformedPolicy.with(strings.TrimPrefix(err.Error(), policy.ErrMalformed.Error()+": ")))
			return
		}
		if e := h.checkPublicPolicy(q, p); e != nil {
			q.fail(e)
			return
		}
		if !json.Valid(doc) {
			q.fail(errMalformedPolicy)
			return
		}
		if err := h.putConfig(ctx, q.bucket, policyConfig, doc); err != nil {
			h.serviceError(q, err)
			return
		}
		q.w.WriteHeader(http.StatusNoContent)
	case http.MethodDelete:
		if err := h.putConfig(ctx, q.bucket, policyConfig, nil); err != nil {
			h.serviceError(q, err)
			return
		}
		q.w.WriteHeader(http.StatusNoContent)
	default:
		q.fail(errMethodNotAllowed)
	}
}

// checkPublicPolicy refuses a public policy where the bucket's public
// access block says to (BlockPublicPolicy).
func (h *Handler) checkPublicPolicy(q *request, p *policy.Policy) *apiError {
	if !p.Public() {
		return nil
	}
	pab, err := h.publicAccessBlock(q.r.Context(), q.bucket)
	if err != nil {
		return fromService(err)
	}
	if pab.BlockPublicPolicy {
		return errAccessDenied.with("The bucket's public access block (BlockPublicPolicy) refuses a policy that grants public access.")
	}
	return nil
}

// Public access block (PUT ?publicAccessBlock).

const publicAccessBlockConfig = "publicAccessBlock"

type publicAccessBlockConfiguration struct {
	XMLName               xml.Name `xml:"PublicAccessBlockConfiguration"`
	NS                    string   `xml:"xmlns,attr,omitempty"`
	BlockPublicAcls       bool
	IgnorePublicAcls      bool
	BlockPublicPolicy     bool
	RestrictPublicBuckets bool
}

var errNoPublicAccessBlock = &apiError{"NoSuchPublicAccessBlockConfiguration", http.StatusNotFound, "The public access block configuration was not found."}

// publicAccessBlock is the bucket's public access block (all false when
// it has none).
func (h *Handler) publicAccessBlock(ctx context.Context, bucket string) (publicAccessBlockConfiguration, error) {
	var c publicAccessBlockConfiguration
	doc, err := h.config(ctx, bucket, publicAccessBlockConfig)
	if err != nil || doc == nil {
		return c, err
	}
	if err := xml.Unmarshal(doc, &c); err != nil {
		return c, object.Errorf(object.Internal, "the public access block of %s does not parse: %v", bucket, err)
	}
	return c, nil
}

// bucketPublicAccessBlock serves GET, PUT and DELETE ?publicAccessBlock.
func (h *Handler) bucketPublicAccessBlock(q *request) {
	h.configDoc(q, publicAccessBlockConfig, errNoPublicAccessBlock, func(body []byte) ([]byte, *apiError) {
		var c publicAccessBlockConfiguration
		if err := xml.Unmarshal(body, &c); err != nil || c.XMLName.Local != "PublicAccessBlockConfiguration" {
			return nil, errMalformedXML
		}
		c.NS = s3NS
		out, _ := xml.Marshal(c)
		return out, nil
	})
}
