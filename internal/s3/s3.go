// Package s3 serves the S3 API over a node's object service: spaces are
// buckets, every request is signed (SigV4 in the Authorization header or a
// presigned URL), and errors are S3's XML documents.
package s3

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	cairnauth "github.com/cairn-db/cairn/internal/auth"
	"github.com/cairn-db/cairn/internal/object"
)

// Config configures a Handler.
type Config struct {
	// Service is the object store the API runs on.
	Service object.Service
	// Credentials verifies signatures.
	Credentials Credentials
	// Region is what GetBucketLocation reports and the region a request's
	// credential scope must name (as S3 checks it; GetBucketLocation may
	// also be signed for us-east-1, as S3's global endpoint allows, since
	// clients ask it before they know the region). Default: us-east-1.
	Region string
	// Domains are the host names under which virtual-host-style requests
	// name their bucket (BUCKET.DOMAIN). Path-style always works.
	Domains []string
	// Now is the clock signatures are checked against. Default: time.Now.
	Now func() time.Time
	// Logger receives failures that are the server's. Default: slog.Default().
	Logger *slog.Logger
	// KMS holds the keys SSE-S3 and SSE-KMS wrap data keys under; nil:
	// those are refused (SSE-C needs none).
	KMS KMS
}

// Handler is the S3 API.
type Handler struct {
	cfg    Config
	vcache versioningCache
	// configs caches bucket documents (config.go).
	configs configCache
	keys    keyCache
}

// New returns a Handler for cfg.
func New(cfg Config) *Handler {
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Handler{cfg: cfg}
}

// request is one S3 call in progress.
type request struct {
	w      http.ResponseWriter
	r      *http.Request
	auth   *auth
	bucket string
	key    string
	// query is the request's query string, parsed once.
	query url.Values
}

func (q *request) fail(e *apiError) { writeError(q.w, q.r, e) }

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("x-amz-request-id", requestID())
	w.Header().Set("Server", "Cairn")
	if r.ContentLength == 0 && strings.EqualFold(r.Header.Get("Expect"), "100-continue") {
		// net/http sends 100 Continue when a handler first reads the body,
		// and for an empty body never does; some clients (botocore) then
		// misread the next response on the connection.
		w.WriteHeader(http.StatusContinue)
	}
	q := &request{w: w, r: r, query: r.URL.Query()}
	q.bucket, q.key = h.route(r)
	if q.bucket != "" {
		// Browsers' cross-origin requests (cors.go): a preflight needs no
		// signature; any request from an origin gets its CORS headers,
		// whatever its outcome.
		if r.Method == http.MethodOptions {
			h.preflight(q)
			return
		}
		if r.Header.Get("Origin") != "" {
			h.corsResponse(q)
		}
	}
	a, e := h.authenticate(q)
	if e != nil {
		q.fail(e)
		return
	}
	q.auth = a
	if n := dispatching(q.query); n > 1 {
		// Authorization names one action per request: a request naming
		// two subresources would be checked as one and served as another.
		q.fail(errInvalidRequest.with("A request names one subresource (acl, policy, tagging, ...), not several."))
		return
	}
	if q.bucket != "" && q.key == "" && r.Method == http.MethodPost && !q.query.Has("delete") && a.accessKey == "" {
		h.postObject(q) // a browser upload: the form is signed, not the request
		return
	}
	switch {
	case q.bucket == "" && a.accessKey == "":
		q.fail(errAccessDenied.with("Anonymous access is not allowed here: sign requests with an access key."))
		return
	case q.bucket != "" && !h.authorize(q, q.bucket, q.key, action(q), needed(q)):
		return
	}
	if q.bucket == "" {
		if r.Method != http.MethodGet {
			q.fail(errMethodNotAllowed)
			return
		}
		h.listBuckets(q)
		return
	}
	if q.key == "" {
		h.bucketOp(q)
		return
	}
	// Checked here, not only by the service: multipart and copy calls
	// reach the service in a context that allows system keys, which are
	// not UTF-8.
	if !utf8.ValidString(q.key) {
		q.fail(errInvalidArgument.with("Object keys must be valid UTF-8."))
		return
	}
	h.objectOp(q)
}

// Permissions, when the Credentials implement it too, limits what each
// key may do on each bucket; without it every key may do everything.
type Permissions interface {
	// Allowed reports whether accessKey may do need (PermRead, PermWrite
	// or PermAdmin) on bucket.
	Allowed(accessKey, bucket, need string) bool
}

// The permissions a request needs (package auth's); each includes the
// ones before it.
const (
	PermRead  = cairnauth.Read  // GET and HEAD of objects and bucket settings, listings
	PermWrite = cairnauth.Write // writes and deletes of objects, multipart, object tags
	PermAdmin = cairnauth.Admin // creating, deleting and configuring the bucket
)

// needed is the permission a request on a bucket (or on an object in it)
// needs.
func needed(q *request) string {
	switch m := q.r.Method; {
	case m == http.MethodGet || m == http.MethodHead:
		return PermRead
	case q.key != "" || (m == http.MethodPost && q.query.Has("delete")):
		return PermWrite
	}
	return PermAdmin
}

// allowed reports whether the request's key's grants allow need on
// bucket (an anonymous request has none). authorize adds the bucket's
// policy.
func (h *Handler) allowed(q *request, bucket, need string) bool {
	if q.auth.accessKey == "" {
		return false
	}
	p, ok := h.cfg.Credentials.(Permissions)
	return !ok || p.Allowed(q.auth.accessKey, bucket, need)
}

// route finds the bucket and key: from the host (BUCKET.DOMAIN) and the
// path, or from the path alone (/BUCKET/KEY).
func (h *Handler) route(r *http.Request) (bucket, key string) {
	host := r.Host
	if i := strings.LastIndexByte(host, ':'); i >= 0 && !strings.Contains(host[i:], "]") {
		host = host[:i]
	}
	path := strings.TrimPrefix(r.URL.Path, "/")
	for _, d := range h.cfg.Domains {
		if b, ok := strings.CutSuffix(host, "."+d); ok && b != "" {
			return b, path
		}
	}
	bucket, key, _ = strings.Cut(path, "/")
	return bucket, key
}

// requestID is a fresh id for x-amz-request-id.
func requestID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return strings.ToUpper(hex.EncodeToString(b[:]))
}

// notImplemented answers a subresource or header this server does not
// implement, naming it.
func notImplemented(q *request, what string) {
	q.fail(errNotImplemented.with(what + " is not implemented."))
}

// unsupportedQuery returns the first query parameter of q that names a
// subresource (another API than the plain one on a bucket or object)
// other than those allowed, or "".
func unsupportedQuery(q *request, allowed ...string) string {
	for k := range q.query {
		if subresources[k] && !slices.Contains(allowed, k) {
			return k
		}
	}
	return ""
}

// subresources are S3's query parameters that select another API than
// the plain one on a bucket or object.
var subresources = map[string]bool{
	"accelerate": true, "acl": true, "analytics": true, "attributes": true, "cors": true,
	"delete": true, "encryption": true, "intelligent-tiering": true, "inventory": true,
	"legal-hold": true, "lifecycle": true, "location": true, "logging": true, "metrics": true,
	"notification": true, "object-lock": true, "ownershipControls": true, "partNumber": true,
	"policy": true, "policyStatus": true, "publicAccessBlock": true, "replication": true,
	"requestPayment": true, "restore": true, "retention": true, "select": true, "tagging": true,
	"torrent": true, "uploadId": true, "uploads": true, "versioning": true, "versions": true,
	"website": true,
}

// dispatching counts the subresources of a query that choose the
// operation (partNumber goes with uploadId, and is no operation of its
// own).
func dispatching(qs url.Values) int {
	n := 0
	for k := range qs {
		if subresources[k] && k != "partNumber" {
			n++
		}
	}
	return n
}
