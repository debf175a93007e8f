package s3

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"net/http"
	"strings"

	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/policy"
	"github.com/cairn-db/cairn/internal/tstamp"
)

// ACLs.
//
// Buckets and objects carry S3 access control lists: canned (private,
// public-read, public-read-write, authenticated-read, bucket-owner-read,
// bucket-owner-full-control, log-delivery-write) or grants to access keys
// (an access key id is its canonical user id) and to the AllUsers and
// AuthenticatedUsers groups. ACLs are not a second authorization system:
// a list is turned into policy statements (package policy) and evaluated
// as a bucket policy's are, after the key's grants and the bucket's
// policy, whose explicit deny wins over it.
//
// A bucket's owner is the key that created it through S3 (kept as the
// bucket document "owner"); an object's owner is the bucket's, unless a
// key other than the bucket's owner wrote it in a bucket whose ownership
// is ObjectWriter (the default of a bucket without ownership controls):
// then the writer, kept in the version's cairn-owner header. With
// ownership BucketOwnerEnforced, ACLs are disabled as on S3: only ACLs
// that grant the owner alone are accepted. A bucket's ACL is the bucket
// document "acl"; an object version's, when it is not its owner's full
// control alone, the system key oaclPrefix+HASH(key)/VERSION: an ACL
// belongs to one version, so a new version starts private.
//
// GetBucketPolicyStatus counts a public ACL as public; the public access
// block refuses public ACLs (BlockPublicAcls) or ignores them
// (IgnorePublicAcls).

const (
	aclConfig        = "acl"
	ownerConfig      = "owner"
	ownershipConfig  = "ownershipControls"
	objectOwnerHdr   = "cairn-owner"
	oaclPrefix       = object.SystemKeyPrefix + "oacl/"
	uploadACLHeader  = "cairn-upload-acl"
	groupAllUsers    = "http://acs.amazonaws.com/groups/global/AllUsers"
	groupAuthUsers   = "http://acs.amazonaws.com/groups/global/AuthenticatedUsers"
	groupLogDelivery = "http://acs.amazonaws.com/groups/s3/LogDelivery"
	xsiNS            = "http://www.w3.org/2001/XMLSchema-instance"

	ownershipEnforced  = "BucketOwnerEnforced"
	ownershipPreferred = "BucketOwnerPreferred"
	ownershipWriter    = "ObjectWriter"
)

var errACLNotSupported = &apiError{"AccessControlListNotSupported", http.StatusBadRequest, "The bucket does not allow ACLs (its object ownership is BucketOwnerEnforced): grant access with a bucket policy or access keys."}

// aclGrant is one grant: to an access key (ID) or a group (URI).
type aclGrant struct {
	ID         string `json:"id,omitempty"`
	URI        string `json:"uri,omitempty"`
	Permission string `json:"p"`
}

// acl is an access control list.
type acl struct {
	Owner  string     `json:"owner"`
	Grants []aclGrant `json:"grants"`
}

var aclPermissions = map[string]bool{"READ": true, "WRITE": true, "READ_ACP": true, "WRITE_ACP": true, "FULL_CONTROL": true}

// cannedACL is the list a canned ACL names, for a resource owned by owner
// in a bucket owned by bucketOwner.
func cannedACL(name, owner, bucketOwner string) (acl, *apiError) {
	a := acl{Owner: owner}
	own := aclGrant{ID: owner, Permission: "FULL_CONTROL"}
	switch name {
	case "", "private":
		a.Grants = []aclGrant{own}
	case "public-read":
		a.Grants = []aclGrant{{URI: groupAllUsers, Permission: "READ"}, own}
	case "public-read-write":
		a.Grants = []aclGrant{{URI: groupAllUsers, Permission: "READ"}, {URI: groupAllUsers, Permission: "WRITE"}, own}
	case "authenticated-read":
		a.Grants = []aclGrant{{URI: groupAuthUsers, Permission: "READ"}, own}
	case "bucket-owner-read":
		a.Grants = []aclGrant{own}
		if bucketOwner != "" && bucketOwner != owner {
			a.Grants = append(a.Grants, aclGrant{ID: bucketOwner, Permission: "READ"})
		}
	case "bucket-owner-full-control":
		a.Grants = []aclGrant{own}
		if bucketOwner != "" && bucketOwner != owner {
			a.Grants = append(a.Grants, aclGrant{ID: bucketOwner, Permission: "FULL_CONTROL"})
		}
	case "log-delivery-write":
		a.Grants = []aclGrant{{URI: groupLogDelivery, Permission: "WRITE"}, {URI: groupLogDelivery, Permission: "READ_ACP"}, own}
	default:
		return a, errInvalidArgument.with("The canned ACL " + name + " is not one of private, public-read, public-read-write, authenticated-read, bucket-owner-read, bucket-owner-full-control, log-delivery-write.")
	}
	return a, nil
}

// grantHeaders are the grant headers and their permissions, in the order
// the grants are listed.
var grantHeaders = [][2]string{
	{"X-Amz-Grant-Read", "READ"}, {"X-Amz-Grant-Write", "WRITE"}, {"X-Amz-Grant-Read-Acp", "READ_ACP"},
	{"X-Amz-Grant-Write-Acp", "WRITE_ACP"}, {"X-Amz-Grant-Full-Control", "FULL_CONTROL"},
}

// headerACL is the list a write's x-amz-acl or x-amz-grant-* headers
// name, or nil if they name none.
func (h *Handler) headerACL(hd http.Header, owner, bucketOwner string) (*acl, *apiError) {
	canned := hd.Get("X-Amz-Acl")
	var grants []aclGrant
	for _, gh := range grantHeaders {
		name, perm := gh[0], gh[1]
		v := hd.Get(name)
		if v == "" {
			continue
		}
		for _, g := range strings.Split(v, ",") {
			k, val, ok := strings.Cut(strings.TrimSpace(g), "=")
			val = strings.Trim(strings.TrimSpace(val), `"`)
			switch k = strings.ToLower(strings.TrimSpace(k)); {
			case !ok || val == "":
				return nil, errInvalidArgument.with("A grant header lists grantees as id=\"...\", uri=\"...\" or emailAddress=\"...\".")
			case k == "id":
				if e := h.knownGrantee(val); e != nil {
					return nil, e
				}
				grants = append(grants, aclGrant{ID: val, Permission: perm})
			case k == "uri":
				if val != groupAllUsers && val != groupAuthUsers && val != groupLogDelivery {
					return nil, errInvalidArgument.with("The group " + val + " is not AllUsers, AuthenticatedUsers or LogDelivery.")
				}
				grants = append(grants, aclGrant{URI: val, Permission: perm})
			case k == "emailaddress":
				return nil, errUnresolvableEmail
			default:
				return nil, errInvalidArgument.with("Unknown grantee type " + k + ".")
			}
		}
	}
	switch {
	case canned != "" && grants != nil:
		return nil, errInvalidRequest.with("Specifying both Canned ACLs and Header Grants is not allowed.")
	case grants != nil:
		return &acl{Owner: owner, Grants: grants}, nil
	case canned != "":
		a, e := cannedACL(canned, owner, bucketOwner)
		return &a, e
	}
	return nil, nil
}

var errUnresolvableEmail = &apiError{"UnresolvableGrantByEmailAddress", http.StatusBadRequest, "The e-mail address you provided does not match any account on record: grant to access key ids."}

// knownGrantee checks that a canonical user id names an access key.
func (h *Handler) knownGrantee(id string) *apiError {
	if _, ok := h.cfg.Credentials.Secret(id); !ok {
		return errInvalidArgument.with("Invalid id: " + id + " is no access key.")
	}
	return nil
}

type aclGranteeXML struct {
	XMLNSXSI    string `xml:"xmlns:xsi,attr"`
	Type        string `xml:"xsi:type,attr"`
	ID          string `xml:"ID,omitempty"`
	DisplayName string `xml:"DisplayName,omitempty"`
	URI         string `xml:"URI,omitempty"`
}

type aclGrantXML struct {
	Grantee    aclGranteeXML `xml:"Grantee"`
	Permission string        `xml:"Permission"`
}

type accessControlPolicy struct {
	XMLName xml.Name      `xml:"AccessControlPolicy"`
	NS      string        `xml:"xmlns,attr"`
	Owner   owner         `xml:"Owner"`
	Grants  []aclGrantXML `xml:"AccessControlList>Grant"`
}

func (a acl) document() accessControlPolicy {
	d := accessControlPolicy{NS: s3NS, Owner: owner{ID: a.Owner, DisplayName: a.Owner}, Grants: []aclGrantXML{}}
	for _, g := range a.Grants {
		x := aclGrantXML{Permission: g.Permission, Grantee: aclGranteeXML{XMLNSXSI: xsiNS}}
		if g.URI != "" {
			x.Grantee.Type, x.Grantee.URI = "Group", g.URI
		} else {
			x.Grantee.Type, x.Grantee.ID, x.Grantee.DisplayName = "CanonicalUser", g.ID, g.ID
		}
		d.Grants = append(d.Grants, x)
	}
	return d
}

// parseACLDocument reads a PutBucketAcl or PutObjectAcl body.
func (h *Handler) parseACLDocument(body []byte, owner string) (*acl, *apiError) {
	var doc struct {
		XMLName xml.Name `xml:"AccessControlPolicy"`
		Owner   struct {
			ID string `xml:"ID"`
		} `xml:"Owner"`
		Grants []struct {
			Grantee struct {
				Type  string `xml:"type,attr"`
				ID    string `xml:"ID"`
				URI   string `xml:"URI"`
				Email string `xml:"EmailAddress"`
			} `xml:"Grantee"`
			Permission string `xml:"Permission"`
		} `xml:"AccessControlList>Grant"`
	}
	if err := xml.Unmarshal(body, &doc); err != nil || doc.XMLName.Local != "AccessControlPolicy" {
		return nil, errMalformedACL
	}
	if doc.Owner.ID != "" && doc.Owner.ID != owner {
		return nil, &apiError{"AccessDenied", http.StatusForbidden, "The ACL names another owner than the resource's: ownership cannot be changed with an ACL."}
	}
	a := &acl{Owner: owner, Grants: []aclGrant{}}
	for _, g := range doc.Grants {
		if !aclPermissions[g.Permission] {
			return nil, errMalformedACL.with("Permission " + g.Permission + " is not READ, WRITE, READ_ACP, WRITE_ACP or FULL_CONTROL.")
		}
		switch {
		case g.Grantee.Email != "" || g.Grantee.Type == "AmazonCustomerByEmail":
			return nil, errUnresolvableEmail
		case g.Grantee.URI != "":
			if g.Grantee.URI != groupAllUsers && g.Grantee.URI != groupAuthUsers && g.Grantee.URI != groupLogDelivery {
				return nil, errMalformedACL.with("The group " + g.Grantee.URI + " is not AllUsers, AuthenticatedUsers or LogDelivery.")
			}
			a.Grants = append(a.Grants, aclGrant{URI: g.Grantee.URI, Permission: g.Permission})
		case g.Grantee.ID != "":
			if e := h.knownGrantee(g.Grantee.ID); e != nil {
				return nil, e
			}
			a.Grants = append(a.Grants, aclGrant{ID: g.Grantee.ID, Permission: g.Permission})
		default:
			return nil, errMalformedACL.with("A grantee needs an ID or a URI.")
		}
	}
	return a, nil
}

var errMalformedACL = &apiError{"MalformedACLError", http.StatusBadRequest, "The XML you provided was not well-formed or did not validate against our published schema."}

// ownerOnly reports whether a list grants nothing beyond its owner's
// full control (what BucketOwnerEnforced allows).
func (a *acl) ownerOnly(bucketOwner string) bool {
	for _, g := range a.Grants {
		if g.URI != "" || g.Permission != "FULL_CONTROL" || (g.ID != a.Owner && g.ID != bucketOwner) {
			return false
		}
	}
	return true
}

// public reports whether a list grants to a group of everyone.
func (a *acl) public() bool {
	for _, g := range a.Grants {
		if g.URI == groupAllUsers || g.URI == groupAuthUsers {
			return true
		}
	}
	return false
}

// Actions each permission allows, on a bucket and on an object.
var (
	bucketACLActions = map[string][]string{
		"READ":      {"s3:ListBucket", "s3:ListBucketVersions", "s3:ListBucketMultipartUploads"},
		"WRITE":     {"s3:PutObject", "s3:DeleteObject", "s3:DeleteObjectVersion", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"},
		"READ_ACP":  {"s3:GetBucketAcl"},
		"WRITE_ACP": {"s3:PutBucketAcl"},
	}
	objectACLActions = map[string][]string{
		"READ":      {"s3:GetObject", "s3:GetObjectVersion", "s3:GetObjectAttributes", "s3:GetObjectVersionAttributes"},
		"READ_ACP":  {"s3:GetObjectAcl", "s3:GetObjectVersionAcl"},
		"WRITE_ACP": {"s3:PutObjectAcl", "s3:PutObjectVersionAcl"},
	}
)

// policyOf is the list as a policy over resource (a bucket's ARN, or an
// object's), leaving out grants to groups when ignorePublic is set.
func (a *acl) policyOf(res string, actions map[string][]string, ignorePublic bool) *policy.Policy {
	p := &policy.Policy{Version: "2012-10-17"}
	for _, g := range a.Grants {
		var acts []string
		if g.Permission == "FULL_CONTROL" {
			for _, l := range actions {
				acts = append(acts, l...)
			}
		} else {
			acts = actions[g.Permission]
		}
		if len(acts) == 0 {
			continue
		}
		s := policy.Statement{Effect: policy.Allow, Action: acts, Resource: []string{res, res + "/*"}}
		switch g.URI {
		case "":
			s.Principal = []string{g.ID}
		case groupAllUsers:
			s.Principal = []string{"*"}
		case groupAuthUsers:
			s.Principal = []string{"*"}
			s.Conditions = []policy.Condition{{Op: "StringEquals", Key: "aws:PrincipalType", Values: []string{"User"}}}
		default:
			continue // LogDelivery: no key is in it
		}
		if g.URI != "" && ignorePublic {
			continue
		}
		p.Statements = append(p.Statements, s)
	}
	return p
}

// aclAllows reports whether the ACLs of the bucket (or of the object's
// version) allow the request.
func (h *Handler) aclAllows(q *request, bucket, key, versionID, act string, keys map[string][]string) (bool, error) {
	ctx := q.r.Context()
	// BucketOwnerEnforced turns every ACL off, those set before too.
	if own, err := h.ownership(ctx, bucket); err != nil || own == ownershipEnforced {
		return false, err
	}
	pab, err := h.publicAccessBlock(ctx, bucket)
	if err != nil {
		return false, err
	}
	r := &policy.Request{Principal: q.auth.accessKey, Action: act, Resource: resource(bucket, key), Context: keys}
	if key == "" || !isObjectACLAction(act) {
		ba, err := h.bucketACL(ctx, bucket)
		if err != nil || ba == nil {
			return false, err
		}
		return ba.policyOf(resource(bucket, ""), bucketACLActions, pab.IgnorePublicAcls).Evaluate(r) == policy.Allow, nil
	}
	oa, _, err := h.objectACL(ctx, bucket, key, versionID)
	if err != nil || oa == nil {
		return false, err
	}
	return oa.policyOf(resource(bucket, key), objectACLActions, pab.IgnorePublicAcls).Evaluate(r) == policy.Allow, nil
}

func isObjectACLAction(act string) bool {
	for _, l := range objectACLActions {
		for _, a := range l {
			if a == act {
				return true
			}
		}
	}
	return false
}

// bucketOwner is the key that owns the bucket ("" if it was not made
// through S3).
func (h *Handler) bucketOwner(ctx context.Context, bucket string) (string, error) {
	doc, err := h.config(ctx, bucket, ownerConfig)
	return string(doc), err
}

// bucketACL is the bucket's list (its owner's full control if none was
// set), or nil for a bucket that has no owner.
func (h *Handler) bucketACL(ctx context.Context, bucket string) (*acl, error) {
	doc, err := h.config(ctx, bucket, aclConfig)
	if err != nil {
		return nil, err
	}
	if doc != nil {
		var a acl
		if err := json.Unmarshal(doc, &a); err != nil {
			return nil, object.Errorf(object.Internal, "the ACL of bucket %s does not parse: %v", bucket, err)
		}
		return &a, nil
	}
	o, err := h.bucketOwner(ctx, bucket)
	if err != nil || o == "" {
		return nil, err
	}
	a, _ := cannedACL("private", o, o)
	return &a, nil
}

// versionDocKey is the system key under prefix of a document about one
// version of key (its ACL, its lock): named by a hash of the key, so any
// key fits.
func versionDocKey(prefix, key string, version uint64) string {
	h := sha256.Sum256([]byte(key))
	return prefix + hex.EncodeToString(h[:16]) + "/" + tstamp.String(version)
}

// objectOwner is the owner of a version.
func (h *Handler) objectOwner(ctx context.Context, bucket string, info *object.Info) (string, error) {
	if o := info.Headers[objectOwnerHdr]; o != "" {
		return o, nil
	}
	return h.bucketOwner(ctx, bucket)
}

// objectACL is the list of a version of key (versionID "": the latest),
// and the version's info.
func (h *Handler) objectACL(ctx context.Context, bucket, key, versionID string) (*acl, object.Info, error) {
	v, e := h.parseVersionID(ctx, bucket, key, versionID)
	if e != nil {
		return nil, object.Info{}, object.Errorf(object.NotFound, "%s", e.Message)
	}
	info, err := h.cfg.Service.Stat(ctx, &object.GetRequest{Space: bucket, Key: key, Version: v, Length: -1})
	if err != nil {
		return nil, info, err
	}
	doc, err := h.readSystemDoc(ctx, bucket, versionDocKey(oaclPrefix, key, info.Version))
	if err != nil {
		return nil, info, err
	}
	if doc != nil {
		var a acl
		if err := json.Unmarshal(doc, &a); err != nil {
			return nil, info, object.Errorf(object.Internal, "the ACL of %s/%s does not parse: %v", bucket, key, err)
		}
		return &a, info, nil
	}
	o, err := h.objectOwner(ctx, bucket, &info)
	if err != nil || o == "" {
		return nil, info, err
	}
	a, _ := cannedACL("private", o, o)
	return &a, info, nil
}

// ownership is the bucket's object ownership ("" if it has no ownership
// controls: ObjectWriter's rules, ACLs enabled).
func (h *Handler) ownership(ctx context.Context, bucket string) (string, error) {
	doc, err := h.config(ctx, bucket, ownershipConfig)
	if err != nil || doc == nil {
		return "", err
	}
	var c ownershipControls
	if err := xml.Unmarshal(doc, &c); err != nil {
		return "", object.Errorf(object.Internal, "the ownership controls of %s do not parse: %v", bucket, err)
	}
	return c.Ownership, nil
}

type ownershipControls struct {
	XMLName   xml.Name `xml:"OwnershipControls"`
	NS        string   `xml:"xmlns,attr,omitempty"`
	Ownership string   `xml:"Rule>ObjectOwnership"`
}

// checkACL checks that an ACL may be set on the bucket: its ownership
// allows ACLs (or the list grants the owners alone) and its public access
// block does not refuse a public one.
func (h *Handler) checkACL(ctx context.Context, bucket string, a *acl, bucketOwner string) *apiError {
	own, err := h.ownership(ctx, bucket)
	if err != nil {
		return fromService(err)
	}
	if own == ownershipEnforced && !a.ownerOnly(bucketOwner) {
		return errACLNotSupported
	}
	if a.public() {
		pab, err := h.publicAccessBlock(ctx, bucket)
		if err != nil {
			return fromService(err)
		}
		if pab.BlockPublicAcls {
			return errAccessDenied.with("The bucket's public access block (BlockPublicAcls) refuses a public ACL.")
		}
	}
	return nil
}

// writeACL is the ACL and owner a write of an object by the request's key
// is to get: the owner is the writer unless the bucket's ownership gives
// it to the bucket's owner; the list is nil when it is the owner's full
// control alone.
func (h *Handler) writeACL(q *request) (a *acl, writer string, e *apiError) {
	ctx := q.r.Context()
	bo, err := h.bucketOwner(ctx, q.bucket)
	if err != nil {
		return nil, "", fromService(err)
	}
	own, err := h.ownership(ctx, q.bucket)
	if err != nil {
		return nil, "", fromService(err)
	}
	owner := q.auth.accessKey
	canned := q.r.Header.Get("X-Amz-Acl")
	if bo != "" && (own == ownershipEnforced || (own == ownershipPreferred && canned == "bucket-owner-full-control")) {
		owner = bo
	}
	if owner == "" {
		owner = bo
	}
	a, e = h.headerACL(q.r.Header, owner, bo)
	if e != nil {
		return nil, "", e
	}
	if a != nil {
		if e := h.checkACL(ctx, q.bucket, a, bo); e != nil {
			return nil, "", e
		}
		if canned == "private" || (a.ownerOnly(bo) && len(a.Grants) == 1 && a.Grants[0].ID == owner) {
			a = nil
		}
	}
	if bo != "" && owner != bo && owner != "" {
		writer = owner // buckets made outside S3 have no owner, and their objects none of their own
	}
	return a, writer, nil
}

// saveObjectACL keeps a version's ACL (nil: removes it).
func (h *Handler) saveObjectACL(ctx context.Context, bucket, key string, version uint64, a *acl) error {
	var doc []byte
	if a != nil {
		doc, _ = json.Marshal(a)
	}
	return h.writeSystemDoc(ctx, bucket, versionDocKey(oaclPrefix, key, version), doc)
}

// bucketACLOp serves GET and PUT ?acl on a bucket.
func (h *Handler) bucketACLOp(q *request) {
	if !h.exists(q) {
		return
	}
	ctx := q.r.Context()
	bo, err := h.bucketOwner(ctx, q.bucket)
	if err != nil {
		h.serviceError(q, err)
		return
	}
	switch q.r.Method {
	case http.MethodGet:
		a, err := h.bucketACL(ctx, q.bucket)
		if err != nil {
			h.serviceError(q, err)
			return
		}
		if a == nil { // a bucket made outside S3: the requester's own
			d, _ := cannedACL("private", q.auth.accessKey, "")
			a = &d
		}
		writeXML(q.w, http.StatusOK, a.document())
	case http.MethodPut:
		owner := cmp.Or(bo, q.auth.accessKey)
		a, e := h.aclOfPut(q, owner, bo)
		if e != nil {
			q.fail(e)
			return
		}
		if e := h.checkACL(ctx, q.bucket, a, bo); e != nil {
			q.fail(e)
			return
		}
		doc, _ := json.Marshal(a)
		if err := h.putConfig(ctx, q.bucket, aclConfig, doc); err != nil {
			h.serviceError(q, err)
			return
		}
		q.w.WriteHeader(http.StatusOK)
	default:
		q.fail(errMethodNotAllowed)
	}
}

// aclOfPut is the ACL a PUT ?acl sets: from its headers or its body.
func (h *Handler) aclOfPut(q *request, owner, bucketOwner string) (*acl, *apiError) {
	a, e := h.headerACL(q.r.Header, owner, bucketOwner)
	if e != nil || a != nil {
		return a, e
	}
	body, e := readXMLBytes(q, maxXMLBody)
	if e != nil {
		return nil, e
	}
	if len(body) == 0 {
		return nil, errMalformedACL.with("Give the ACL in x-amz-acl, x-amz-grant-* or an AccessControlPolicy document.")
	}
	return h.parseACLDocument(body, owner)
}

// objectACLOp serves GET and PUT ?acl on an object.
func (h *Handler) objectACLOp(q *request) {
	ctx := q.r.Context()
	a, info, err := h.objectACL(ctx, q.bucket, q.key, q.query.Get("versionId"))
	if err != nil {
		v, _ := h.version(q)
		h.objectError(q, v, err)
		return
	}
	h.setVersionID(q.r.Context(), q.w.Header(), q.bucket, &info)
	switch q.r.Method {
	case http.MethodGet:
		if a == nil {
			d, _ := cannedACL("private", q.auth.accessKey, "")
			a = &d
		}
		writeXML(q.w, http.StatusOK, a.document())
	case http.MethodPut:
		bo, err := h.bucketOwner(ctx, q.bucket)
		if err != nil {
			h.serviceError(q, err)
			return
		}
		owner := cmp.Or(info.Headers[objectOwnerHdr], bo, q.auth.accessKey)
		na, e := h.aclOfPut(q, owner, bo)
		if e != nil {
			q.fail(e)
			return
		}
		if e := h.checkACL(ctx, q.bucket, na, bo); e != nil {
			q.fail(e)
			return
		}
		if err := h.saveObjectACL(ctx, q.bucket, q.key, info.Version, na); err != nil {
			h.serviceError(q, err)
			return
		}
		q.w.WriteHeader(http.StatusOK)
	default:
		q.fail(errMethodNotAllowed)
	}
}

// bucketOwnershipOp serves GET, PUT and DELETE ?ownershipControls.
func (h *Handler) bucketOwnershipOp(q *request) {
	missing := &apiError{"OwnershipControlsNotFoundError", http.StatusNotFound, "The bucket ownership controls were not found."}
	if q.r.Method == http.MethodPut {
		if !h.exists(q) {
			return
		}
		body, e := readXMLBytes(q, maxXMLBody)
		if e != nil {
			q.fail(e)
			return
		}
		var c ownershipControls
		if err := xml.Unmarshal(body, &c); err != nil || (c.Ownership != ownershipEnforced && c.Ownership != ownershipPreferred && c.Ownership != ownershipWriter) {
			q.fail(errMalformedXML.with("ObjectOwnership is BucketOwnerEnforced, BucketOwnerPreferred or ObjectWriter."))
			return
		}
		if e := h.setOwnership(q.r.Context(), q.bucket, c.Ownership); e != nil {
			q.fail(e)
			return
		}
		q.w.WriteHeader(http.StatusOK)
		return
	}
	h.configDoc(q, ownershipConfig, missing, nil)
}

// setOwnership sets a bucket's object ownership; BucketOwnerEnforced
// needs a bucket ACL that grants the owner alone.
func (h *Handler) setOwnership(ctx context.Context, bucket, own string) *apiError {
	if own == ownershipEnforced {
		a, err := h.bucketACL(ctx, bucket)
		if err != nil {
			return fromService(err)
		}
		bo, _ := h.bucketOwner(ctx, bucket)
		if a != nil && !a.ownerOnly(bo) {
			return &apiError{"InvalidBucketAclWithObjectOwnership", http.StatusBadRequest, "Bucket cannot have ACLs set with ObjectOwnership's BucketOwnerEnforced setting."}
		}
	}
	doc, _ := xml.Marshal(ownershipControls{NS: s3NS, Ownership: own})
	if err := h.putConfig(ctx, bucket, ownershipConfig, doc); err != nil {
		return fromService(err)
	}
	return nil
}

// ownObject settles a write's owner and ACL: the owner goes into the
// version's headers when it is not the bucket's; the ACL, if any, is
// returned to be kept once the version exists (keepObjectACL).
func (h *Handler) ownObject(q *request, req *object.PutRequest) (*acl, *apiError) {
	a, writer, e := h.writeACL(q)
	if e != nil {
		return nil, e
	}
	if q.auth.accessKey == "" && hasACLHeaders(q.r.Header) {
		// A key's write makes it the object's owner, who may set its ACL.
		// An anonymous write may where the bucket's own ACL grants
		// everyone WRITE (S3's ACL model); a bucket opened to anonymous
		// writes by a policy does not also let them publish what they
		// write: that needs s3:PutObjectAcl.
		ok, err := h.aclAllows(q, q.bucket, "", "", "s3:PutObject", map[string][]string{"aws:principaltype": {"Anonymous"}})
		if err != nil {
			return nil, fromService(err)
		}
		if !ok {
			if e := h.authorization(q, q.bucket, q.key, "", "s3:PutObjectAcl", PermWrite); e != nil {
				return nil, e
			}
		}
	}
	if writer != "" {
		if req.Headers == nil {
			req.Headers = map[string]string{}
		}
		req.Headers[objectOwnerHdr] = writer
	}
	return a, nil
}

// keepObjectACL keeps the ACL of a version just written; it answers a
// failure itself.
func (h *Handler) keepObjectACL(q *request, info object.Info, a *acl) bool {
	if err := h.saveObjectACL(q.r.Context(), q.bucket, q.key, info.Version, a); err != nil {
		h.serviceError(q, err)
		return false
	}
	return true
}

// hasACLHeaders reports whether a request sets an ACL in its headers.
func hasACLHeaders(hd http.Header) bool {
	if hd.Get("X-Amz-Acl") != "" {
		return true
	}
	for _, gh := range grantHeaders {
		if hd.Get(gh[0]) != "" {
			return true
		}
	}
	return false
}
