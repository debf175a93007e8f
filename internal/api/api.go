// Package api serves Cairn's own HTTP JSON endpoints under /_cairn/v1/,
// beside the S3 API on the same port and signed like it (AWS Signature
// Version 4, service "s3", the node's S3 region; the payload signed too).
//
// The transaction endpoints are what an optimistic client needs — the
// Python SDK, a browser, curl: begin (a snapshot timestamp), a batched
// read of many keys at a timestamp, and a commit of a write set together
// with the read set (the versions seen) for validation. The server keeps
// no state between them. See docs/api.md.
package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/cairn-db/cairn/internal/auth"
	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/tstamp"
)

// Prefix is where the endpoints live.
const Prefix = "/_cairn/v1/"

// Limits of the JSON endpoints.
const (
	// MaxBody bounds a request's JSON body.
	MaxBody = 64 << 20
	// MaxReadData bounds the body of one object a read returns inline;
	// larger ones are read with S3's GET (?versionId= the version the
	// read names) or the native protocol.
	MaxReadData = 16 << 20
	// MaxReadObjects bounds the keys of one read.
	MaxReadObjects = 1000
	// MaxWrites bounds the writes of one commit (a bigger transaction
	// goes through the native protocol, whose writes are not bounded).
	MaxWrites = 10000
)

// Config configures a Handler.
type Config struct {
	// Service runs the transactions (it must be an object.Transactor).
	Service object.Service
	// Keys authorizes each space a request touches.
	Keys *auth.Keyring
	// Authenticate checks a request's SigV4 signature and returns its
	// access key (the S3 API's check).
	Authenticate func(r *http.Request) (string, error)
	// Logger defaults to slog.Default.
	Logger *slog.Logger
}

// Handler serves the endpoints.
type Handler struct {
	cfg Config
	tr  object.Transactor
	vs  object.Versioner
}

// New returns a handler.
func New(cfg Config) *Handler {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	tr, _ := cfg.Service.(object.Transactor)
	vs, _ := cfg.Service.(object.Versioner)
	return &Handler{cfg: cfg, tr: tr, vs: vs}
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		writeError(w, &ErrorBody{Status: http.StatusMethodNotAllowed, Code: "MethodNotAllowed", Message: "the endpoints take POST with a JSON body"})
		return
	}
	body, access, e := h.authenticate(r)
	if e != nil {
		writeError(w, e)
		return
	}
	if h.tr == nil || h.vs == nil {
		writeError(w, &ErrorBody{Status: http.StatusNotImplemented, Code: "NotImplemented", Message: "this server runs no transactions or version operations"})
		return
	}
	q := &call{h: h, ctx: r.Context(), access: access}
	var out any
	switch strings.TrimPrefix(r.URL.Path, Prefix) {
	case "txn/begin":
		var req BeginRequest
		if e = decode(body, &req); e == nil {
			out, e = q.begin(&req)
		}
	case "txn/read":
		var req ReadRequest
		if e = decode(body, &req); e == nil {
			out, e = q.read(&req)
		}
	case "txn/commit":
		var req CommitRequest
		if e = decode(body, &req); e == nil {
			out, e = q.commit(&req)
		}
	case "clone":
		var req CloneRequest
		if e = decode(body, &req); e == nil {
			out, e = q.clone(&req)
		}
	case "lineage":
		var req LineageRequest
		if e = decode(body, &req); e == nil {
			out, e = q.lineage(&req)
		}
	case "diff":
		var req DiffRequest
		if e = decode(body, &req); e == nil {
			out, e = q.diff(&req)
		}
	case "snapshot/create", "snapshot/list", "snapshot/delete":
		var req SnapshotRequest
		if e = decode(body, &req); e == nil {
			out, e = q.snapshot(strings.TrimPrefix(r.URL.Path, Prefix+"snapshot/"), &req)
		}
	case "follow":
		var req FollowRequest
		if e = decode(body, &req); e == nil {
			out, e = q.follow(&req)
		}
	case "index/add", "index/drop", "index/list":
		var req IndexRequest
		if e = decode(body, &req); e == nil {
			out, e = q.index(strings.TrimPrefix(r.URL.Path, Prefix+"index/"), &req)
		}
	case "sql":
		var req SQLRequest
		if e = decode(body, &req); e == nil {
			out, e = q.sql(&req)
		}
	case "query":
		var req QueryRequest
		if e = decode(body, &req); e == nil {
			out, e = q.query(&req)
		}
	case "diff/spaces":
		var req SpaceDiffRequest
		if e = decode(body, &req); e == nil {
			out, e = q.diffSpaces(&req)
		}
	case "branch/create", "branch/list", "branch/delete", "branch/merge":
		var req BranchRequest
		if e = decode(body, &req); e == nil {
			out, e = q.branch(strings.TrimPrefix(r.URL.Path, Prefix+"branch/"), &req)
		}
	case "watch":
		var req WatchRequest
		if e = decode(body, &req); e == nil {
			out, e = q.watch(&req)
		}
	default:
		e = &ErrorBody{Status: http.StatusNotFound, Code: "NoSuchEndpoint", Message: fmt.Sprintf("no endpoint %s (see docs/api.md)", r.URL.Path)}
	}
	if e != nil {
		writeError(w, e)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_ = json.NewEncoder(w).Encode(out)
}

// authenticate reads the body, checks that the signature covers it, and
// checks the signature.
func (h *Handler) authenticate(r *http.Request) ([]byte, string, *ErrorBody) {
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxBody+1))
	if err != nil {
		return nil, "", &ErrorBody{Status: http.StatusBadRequest, Code: "IncompleteBody", Message: "reading the body: " + err.Error()}
	}
	if len(body) > MaxBody {
		return nil, "", &ErrorBody{Status: http.StatusRequestEntityTooLarge, Code: "TooLarge", Message: fmt.Sprintf("the body is over %d bytes", MaxBody)}
	}
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	switch got := r.Header.Get("X-Amz-Content-Sha256"); got {
	case "", hash:
	case "UNSIGNED-PAYLOAD":
		return nil, "", &ErrorBody{Status: http.StatusForbidden, Code: "AccessDenied", Message: "sign the payload: UNSIGNED-PAYLOAD is not accepted here"}
	default:
		return nil, "", &ErrorBody{Status: http.StatusBadRequest, Code: "XAmzContentSHA256Mismatch", Message: "the body's SHA-256 is not x-amz-content-sha256"}
	}
	// The signature is checked over the body's hash, signed header or not.
	r2 := r.Clone(r.Context())
	r2.Header.Set("X-Amz-Content-Sha256", hash)
	r2.ContentLength = int64(len(body))
	access, err := h.cfg.Authenticate(r2)
	if err != nil {
		return nil, "", &ErrorBody{Status: http.StatusForbidden, Code: "AccessDenied", Message: "sign the request with AWS Signature Version 4 (service s3) and an access key: " + err.Error()}
	}
	return body, access, nil
}

func decode(body []byte, v any) *ErrorBody {
	d := json.NewDecoder(bytes.NewReader(body))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return &ErrorBody{Status: http.StatusBadRequest, Code: "MalformedJSON", Message: err.Error()}
	}
	if d.More() {
		return &ErrorBody{Status: http.StatusBadRequest, Code: "MalformedJSON", Message: "more than one JSON value"}
	}
	return nil
}

// call is one request.
type call struct {
	h      *Handler
	ctx    context.Context
	access string
}

func (q *call) allow(space, need string) *ErrorBody {
	if q.h.cfg.Keys.Allowed(q.access, space, need) {
		return nil
	}
	return &ErrorBody{Status: http.StatusForbidden, Code: "AccessDenied",
		Message: fmt.Sprintf("access key %s may not %s space %q (it needs the %s grant)", q.access, need, space, need)}
}

// Ref names an object.
type Ref struct {
	Space string `json:"space"`
	Key   string `json:"key"`
}

// BeginRequest starts a transaction: it only takes a snapshot timestamp.
type BeginRequest struct{}

// BeginResponse is the snapshot: read at it, commit with it.
type BeginResponse struct {
	Start string `json:"start"`
}

func (q *call) begin(*BeginRequest) (any, *ErrorBody) {
	tx, err := q.h.tr.Begin(q.ctx, object.TxnOptions{})
	if err != nil {
		return nil, serviceError(err)
	}
	tx.Rollback()
	return BeginResponse{Start: tstamp.String(tx.StartTS())}, nil
}

// ReadRequest reads keys as of one timestamp.
type ReadRequest struct {
	// At is the snapshot (begin's start).
	At      string `json:"at"`
	Objects []Ref  `json:"objects"`
	// NoData leaves the bodies out.
	NoData bool `json:"no_data,omitempty"`
}

// ReadResponse answers a ReadRequest, one result per object in order.
type ReadResponse struct {
	At      string       `json:"at"`
	Objects []ReadResult `json:"objects"`
}

// ReadResult is one object as of the read's timestamp.
type ReadResult struct {
	Ref
	// Found is false when the key had no live version then; Version
	// is then "" (what a commit's read set says of it).
	Found       bool              `json:"found"`
	Version     string            `json:"version,omitempty"`
	Size        int64             `json:"size,omitempty"`
	ETag        string            `json:"etag,omitempty"`
	ContentType string            `json:"content_type,omitempty"`
	Modified    string            `json:"modified,omitempty"`
	Meta        map[string]string `json:"meta,omitempty"`
	Tags        map[string]string `json:"tags,omitempty"`
	// Data is the body (base64 in JSON) unless NoData, or the body is
	// over MaxReadData (then Error says so).
	Data  []byte     `json:"data,omitempty"`
	Error *ErrorBody `json:"error,omitempty"`
}

func parseTS(field, s string) (uint64, *ErrorBody) {
	ts, err := tstamp.Parse(s)
	if err != nil || ts == 0 {
		return 0, &ErrorBody{Status: http.StatusBadRequest, Code: "InvalidArgument", Message: fmt.Sprintf("%s %q is not a version id (16 hex digits, from begin)", field, s)}
	}
	return ts, nil
}

func (q *call) read(req *ReadRequest) (any, *ErrorBody) {
	at, e := parseTS("at", req.At)
	if e != nil {
		return nil, e
	}
	if len(req.Objects) == 0 || len(req.Objects) > MaxReadObjects {
		return nil, &ErrorBody{Status: http.StatusBadRequest, Code: "InvalidArgument", Message: fmt.Sprintf("a read names 1 to %d objects, not %d", MaxReadObjects, len(req.Objects))}
	}
	for _, o := range req.Objects {
		if e := q.allow(o.Space, auth.Read); e != nil {
			return nil, e
		}
	}
	// One transaction begun at the snapshot reads every key: the same
	// lock resolution and guard as any read at a timestamp.
	tx, err := q.h.tr.BeginAt(at, object.TxnOptions{})
	if err != nil {
		return nil, serviceError(err)
	}
	defer tx.Rollback()
	out := ReadResponse{At: req.At, Objects: make([]ReadResult, len(req.Objects))}
	for i, o := range req.Objects {
		res := &out.Objects[i]
		res.Ref = o
		info, rc, err := tx.Get(q.ctx, &object.GetRequest{Space: o.Space, Key: o.Key, Length: -1})
		if object.KindOf(err) == object.NotFound {
			continue
		}
		if err != nil {
			return nil, serviceError(err)
		}
		res.Found, res.Version, res.Size, res.ETag, res.ContentType = true, tstamp.String(info.Version), info.Size, info.ETag, info.ContentType
		res.Modified = time.Unix(0, info.Modified).UTC().Format(time.RFC3339Nano)
		res.Meta, res.Tags = info.Meta, info.Tags
		switch {
		case req.NoData:
		case info.Size > MaxReadData:
			res.Error = &ErrorBody{Code: "TooLarge", Message: fmt.Sprintf("a body over %d bytes is not sent inline: GET it with S3 (versionId %s) or the native protocol", MaxReadData, res.Version)}
		default:
			if res.Data, err = io.ReadAll(rc); err != nil {
				rc.Close()
				return nil, serviceError(err)
			}
			if res.Data == nil {
				res.Data = []byte{}
			}
		}
		rc.Close()
	}
	return out, nil
}

// CommitRequest commits a write set read at Start, validating the read
// set.
type CommitRequest struct {
	Start string `json:"start"`
	// Reads are the versions the client saw ("" for none): the commit
	// fails with TxnConflict if any changed since.
	// A client that wants the transaction serializable sends every read
	// it made.
	Reads  []ReadSeen `json:"reads,omitempty"`
	Writes []Write    `json:"writes"`
}

// ReadSeen is a key the client read and the version it saw.
type ReadSeen struct {
	Ref
	Version string `json:"version"`
}

// Write is one write of a commit: a body (base64 in JSON) or a delete.
type Write struct {
	Ref
	Delete      bool              `json:"delete,omitempty"`
	Data        []byte            `json:"data,omitempty"`
	ContentType string            `json:"content_type,omitempty"`
	Meta        map[string]string `json:"meta,omitempty"`
	Tags        map[string]string `json:"tags,omitempty"`
	// IfMatch is the version the key must have at Start; IfNoneMatch,
	// that it has none (a failed condition is PreconditionFailed).
	IfMatch     string `json:"if_match,omitempty"`
	IfNoneMatch bool   `json:"if_none_match,omitempty"`
}

// CommitResponse is the commit's timestamp: the version of every write.
type CommitResponse struct {
	Committed string `json:"committed"`
}

func (q *call) commit(req *CommitRequest) (any, *ErrorBody) {
	start, e := parseTS("start", req.Start)
	if e != nil {
		return nil, e
	}
	if len(req.Writes) == 0 && len(req.Reads) == 0 {
		return nil, &ErrorBody{Status: http.StatusBadRequest, Code: "InvalidArgument", Message: "a commit has writes or reads to validate"}
	}
	if len(req.Writes) > MaxWrites {
		return nil, &ErrorBody{Status: http.StatusBadRequest, Code: "TooLarge", Message: fmt.Sprintf("%d writes; the JSON API takes %d per commit (the native protocol, any number)", len(req.Writes), MaxWrites)}
	}
	for _, r := range req.Reads {
		if e := q.allow(r.Space, auth.Read); e != nil {
			return nil, e
		}
	}
	for _, w := range req.Writes {
		if e := q.allow(w.Space, auth.Write); e != nil {
			return nil, e
		}
	}
	tx, err := q.h.tr.BeginAt(start, object.TxnOptions{Serializable: len(req.Reads) > 0})
	if err != nil {
		return nil, serviceError(err)
	}
	for _, r := range req.Reads {
		var v uint64
		if r.Version != "" {
			if v, e = parseTS("read version", r.Version); e != nil {
				tx.Rollback()
				return nil, e
			}
		}
		if err := tx.Saw(q.ctx, r.Space, r.Key, v); err != nil {
			tx.Rollback()
			return nil, serviceError(err)
		}
	}
	for _, w := range req.Writes {
		var err error
		if w.Delete {
			err = tx.Delete(q.ctx, &object.DeleteRequest{Space: w.Space, Key: w.Key})
		} else {
			pr := &object.PutRequest{Space: w.Space, Key: w.Key, Size: int64(len(w.Data)), ContentType: w.ContentType,
				Meta: w.Meta, Tags: w.Tags, IfNoneMatch: w.IfNoneMatch}
			if w.IfMatch != "" {
				if pr.IfMatch, e = parseTS("if_match", w.IfMatch); e != nil {
					tx.Rollback()
					return nil, e
				}
			}
			_, err = tx.Put(q.ctx, pr, bytes.NewReader(w.Data))
		}
		if err != nil {
			tx.Rollback()
			return nil, serviceError(err)
		}
	}
	ts, err := tx.Commit(q.ctx)
	if err != nil {
		return nil, serviceError(err)
	}
	return CommitResponse{Committed: tstamp.String(ts)}, nil
}

// ErrorBody is an error: an answer's {"error": {...}}, or one object's
// in a read.
type ErrorBody struct {
	Status    int    `json:"-"`
	Code      string `json:"code"`
	Message   string `json:"message"`
	Retryable bool   `json:"retryable,omitempty"`
	// Conflicts name the keys a transaction lost on.
	Conflicts []Ref `json:"conflicts,omitempty"`
}

func writeError(w http.ResponseWriter, e *ErrorBody) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	_ = json.NewEncoder(w).Encode(struct {
		Error *ErrorBody `json:"error"`
	}{e})
}

// statusOf maps the object service's kinds to HTTP.
var statusOf = map[object.Kind]int{
	object.InvalidArgument: http.StatusBadRequest, object.Malformed: http.StatusBadRequest,
	object.TooLarge: http.StatusRequestEntityTooLarge, object.BadSpaceName: http.StatusBadRequest,
	object.KeyTooLong: http.StatusBadRequest, object.NotFound: http.StatusNotFound,
	object.SpaceNotFound: http.StatusNotFound, object.PreconditionFailed: http.StatusPreconditionFailed,
	object.Truncated: http.StatusBadRequest, object.Corrupt: http.StatusInternalServerError,
	object.NotLeader: http.StatusServiceUnavailable, object.Unavailable: http.StatusServiceUnavailable,
	object.RangeMoved: http.StatusServiceUnavailable, object.Canceled: http.StatusRequestTimeout,
	object.OutcomeUnknown: http.StatusGatewayTimeout, object.AccessDenied: http.StatusForbidden,
	object.TxnConflict: http.StatusConflict, object.TxnAborted: http.StatusConflict, object.CursorExpired: http.StatusGone,
}

// codeOf names the kinds in error bodies.
var codeOf = map[object.Kind]string{
	object.InvalidArgument: "InvalidArgument", object.Malformed: "Malformed", object.TooLarge: "TooLarge",
	object.BadSpaceName: "BadSpaceName", object.KeyTooLong: "KeyTooLong", object.NotFound: "NotFound",
	object.SpaceNotFound: "SpaceNotFound", object.PreconditionFailed: "PreconditionFailed",
	object.Truncated: "Truncated", object.Corrupt: "Corrupt", object.NotLeader: "Unavailable",
	object.Unavailable: "Unavailable", object.RangeMoved: "Unavailable", object.Canceled: "Canceled",
	object.OutcomeUnknown: "OutcomeUnknown", object.AccessDenied: "AccessDenied",
	object.TxnConflict: "TxnConflict", object.TxnAborted: "TxnAborted", object.CursorExpired: "CursorExpired",
}

func serviceError(err error) *ErrorBody {
	k := object.KindOf(err)
	e := &ErrorBody{Status: http.StatusInternalServerError, Code: "InternalError", Message: err.Error()}
	if s, ok := statusOf[k]; ok {
		e.Status, e.Code = s, codeOf[k]
	}
	var oe *object.Error
	if errors.As(err, &oe) {
		e.Message = oe.Message
	}
	var ce *object.ConflictError
	if errors.As(err, &ce) {
		e.Message = ce.Message
		e.Conflicts = []Ref{{Space: ce.Space, Key: ce.Key}}
	}
	e.Retryable = k.Class() == object.ClassTxn || k.Class() == object.ClassRetryable
	return e
}
