package wire

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// Service is what a node offers over the native protocol. The server decodes
// frames into calls on a Service; the node implements it. Every method may be
// called concurrently.
type Service interface {
	// CreateSpace creates a space. CodeSpaceExists if it exists,
	// CodeBadSpaceName if the name is invalid.
	CreateSpace(ctx context.Context, name string, s SpaceSettings) (SpaceInfo, error)
	// ListSpaces lists spaces in name order.
	ListSpaces(ctx context.Context) ([]SpaceInfo, error)
	// DeleteSpace deletes an empty space. CodeSpaceNotEmpty if it holds any
	// live object, CodeSpaceNotFound if it does not exist.
	DeleteSpace(ctx context.Context, name string) error

	// Put writes a new version from body. body yields exactly req.Size bytes
	// when req.Size >= 0; a body that ends early is CodeTruncated and writes
	// nothing. With req.Mode WriteAt or Append the new version shares every
	// untouched chunk with its parent.
	Put(ctx context.Context, req *PutRequest, body io.Reader) (ObjectInfo, error)
	// Get reads a version (latest, exact, or as of a time) and a byte range of
	// it. The caller must Close the returned reader. Bytes are verified
	// against their hashes as they are read; a mismatch surfaces as a read
	// error with CodeCorrupt, never as wrong bytes.
	Get(ctx context.Context, req *GetRequest) (ObjectInfo, io.ReadCloser, error)
	// Stat is Get without the body.
	Stat(ctx context.Context, req *GetRequest) (ObjectInfo, error)
	// Delete writes a delete marker (or, with Version set, removes that one
	// version) and returns the marker's info.
	Delete(ctx context.Context, req *DeleteRequest) (ObjectInfo, error)
	// List lists live objects in key order.
	List(ctx context.Context, req *ListRequest) (ListResult, error)
	// Versions lists the versions of one key, newest first, delete markers
	// included.
	Versions(ctx context.Context, req *VersionsRequest) (VersionsResult, error)
}

// ComposeService is implemented by a Service that can make a version out
// of the bodies of other versions without copying their data: the new
// version's manifest lists their chunks (S3's multipart uploads and
// copies). It is not a native protocol operation yet.
type ComposeService interface {
	// Compose writes a new version of req.Space/req.Key whose body is the
	// concatenation of the sources, with the metadata of req (its Size,
	// Mode and Offset are ignored). etag, if set, is the version's ETag;
	// otherwise it is the MD5 of the content. A source that does not
	// exist is CodeNotFound; one whose range is not within it,
	// CodeInvalidRange.
	Compose(ctx context.Context, req *PutRequest, etag string, sources []ComposeSource) (ObjectInfo, error)
}

// TagService changes the tags of a version in place: the one part of a
// version that may change once it is written (S3's object tagging). It is
// not a native protocol operation yet.
type TagService interface {
	// SetTags replaces the tags of req.Version of req.Key (0: the latest)
	// with req.Tags (none: remove them) and returns the version. A delete
	// marker is CodeDeleted.
	SetTags(ctx context.Context, req *TagRequest) (ObjectInfo, error)
}

// MarkerService writes a delete marker that carries headers (S3 marks
// the null version of a bucket whose versioning is suspended with one).
// It is not a native protocol operation yet.
type MarkerService interface {
	// DeleteMarked is Delete without a Version, whose marker keeps
	// headers (validated as PutRequest.Headers).
	DeleteMarked(ctx context.Context, req *DeleteRequest, headers map[string]string) (ObjectInfo, error)
}

// RetentionService changes a space's history policy after its creation
// (S3 lifecycle rules for noncurrent versions map onto it). It is not a
// native protocol operation yet.
type RetentionService interface {
	// SetRetention sets the Retention, KeepLast and KeepForSeconds of
	// space name's settings (the others are ignored) and returns the
	// space. Writes take the new policy from then on; versions already
	// pruned stay pruned.
	SetRetention(ctx context.Context, name string, settings SpaceSettings) (SpaceInfo, error)
}

// TagRequest names a version and its new tags.
type TagRequest struct {
	Space, Key string
	Version    uint64
	Tags       map[string]string
}

// ComposeSource is a byte range of one version.
type ComposeSource struct {
	Space, Key string
	Version    uint64 // exact version; 0 = the latest
	Offset     int64
	Length     int64 // -1 = to the end
}

// SystemKeyPrefix starts the keys an in-process caller keeps its own state
// under (the S3 API's multipart uploads). It is not valid UTF-8, so no
// client key can start with it; a Service accepts such keys only in a
// context made by WithSystemKeys, and lists them only when the listing's
// prefix starts with it.
const SystemKeyPrefix = "\xff"

type systemKeysCtx struct{}

// WithSystemKeys returns a context in which a Service accepts system keys.
func WithSystemKeys(ctx context.Context) context.Context {
	return context.WithValue(ctx, systemKeysCtx{}, true)
}

// SystemKeys reports whether ctx allows system keys.
func SystemKeys(ctx context.Context) bool {
	v, _ := ctx.Value(systemKeysCtx{}).(bool)
	return v
}

// ClusterService is implemented by a Service that reports the state of its
// cluster (the CLUSTER op). The report is a JSON document whose fields
// docs/protocol.md describes; a Service without it answers CodeUnknownOp.
type ClusterService interface {
	ClusterStatus(ctx context.Context) ([]byte, error)
}

// NodeAction is what a NODE request asks of a node of the cluster.
type NodeAction uint8

const (
	// NodeDrain marks the node draining: its range replicas, leases and
	// chunk copies move to other nodes.
	NodeDrain NodeAction = 1
	// NodeRemove takes a drained (or down) node out of the cluster for
	// good, with its meta service member. It fails with CodeNotDrained
	// while the node still holds data other nodes lack.
	NodeRemove NodeAction = 2
	// NodeUndrain takes a draining node back: it may hold new chunks and
	// range replicas again (what already moved off it stays where it is
	// until the rebalancer moves it).
	NodeUndrain NodeAction = 3
)

// NodeService is implemented by a Service that can change the cluster's
// membership (the NODE op); a Service without it answers CodeUnknownOp.
type NodeService interface {
	NodeAdmin(ctx context.Context, action NodeAction, nodeID uint64) error
}

// KeyAction is what a KEYS request asks.
type KeyAction uint8

const (
	KeyCreate KeyAction = 1 // body: a KeySpec; answer: the key made, with its secret
	KeyList   KeyAction = 2 // no body; answer: every key, secrets left out
	KeyDelete KeyAction = 3 // body: the access key id; answer: empty
	// KeyRotateRoot replaces the root key: no body; answer: the new root
	// key, with its secret (KeyRotator).
	KeyRotateRoot KeyAction = 4
	// KeyRotateCluster makes a new cluster key, hands it to every node
	// and seals every secret under it: no body; answer: a JSON
	// ClusterKeyRotation (KeyRotator).
	KeyRotateCluster KeyAction = 5
)

// ClusterKeyRotation is the answer to KeyRotateCluster.
type ClusterKeyRotation struct {
	KeyID    uint32 `json:"key_id"`   // the cluster key that seals from now on
	Nodes    int    `json:"nodes"`    // the nodes that hold it
	Resealed int    `json:"resealed"` // the secrets sealed again under it
}

// KeyRotator is implemented by a KeyService that can rotate the root key
// and the cluster key; without it those KEYS actions answer CodeUnknownOp.
type KeyRotator interface {
	RotateRootKey(ctx context.Context) (KeySpec, error)
	RotateClusterKey(ctx context.Context) (ClusterKeyRotation, error)
}

// KeySpec is an access key as the KEYS op carries it (JSON).
type KeySpec struct {
	Access string `json:"access"`
	Secret string `json:"secret,omitempty"`
	// Grants are permissions ("read", "write", "admin") by space name;
	// "*" names every space.
	Grants map[string]string `json:"grants"`
	// ClusterAdmin allows managing keys, join tokens and nodes.
	ClusterAdmin bool  `json:"cluster_admin,omitempty"`
	Created      int64 `json:"created,omitempty"` // Unix nanoseconds
}

// KeyService is implemented by a Service that manages S3 access keys (the
// KEYS op); a Service without it answers CodeUnknownOp.
type KeyService interface {
	// CreateKey saves a new key; an empty Access or Secret is made up.
	CreateKey(ctx context.Context, k KeySpec) (KeySpec, error)
	ListKeys(ctx context.Context) ([]KeySpec, error)
	DeleteKey(ctx context.Context, access string) error
}

// PutMode says how a Put's body relates to the parent version.
type PutMode uint8

const (
	// PutReplace makes the body the whole new content.
	PutReplace PutMode = 0
	// PutWriteAt overwrites [Offset, Offset+len(body)) of the parent's content,
	// growing it if needed (a gap past the end reads as zeros).
	PutWriteAt PutMode = 1
	// PutAppend appends the body to the parent's content.
	PutAppend PutMode = 2
)

// SpaceSettings are per-space options. Zero values mean the node's defaults.
type SpaceSettings struct {
	// Retention is "all" (default), "last" (keep KeepLast versions) or
	// "duration" (keep noncurrent versions for KeepForSeconds).
	Retention      string
	KeepLast       uint32
	KeepForSeconds uint64
	// Ranges is how many ranges the space starts with.
	Ranges uint32
	// Placement is "ordered" (default) or "hash".
	Placement string
	// Replicas is how many nodes hold each range and chunk of the space
	// (0: the default, 3), capped by the number of nodes that are up.
	Replicas uint32
}

// SpaceInfo describes a space.
type SpaceInfo struct {
	ID       uint32
	Name     string
	Created  int64 // Unix nanoseconds
	Settings SpaceSettings
}

// ObjectInfo describes one version of an object.
type ObjectInfo struct {
	Space        string
	Key          string
	Version      uint64 // commit timestamp; see package tstamp
	Parent       uint64 // 0 when the key had no earlier version
	Size         int64
	ETag         string   // S3 ETag, quoted-free hex MD5 (or "-N" form)
	Hash         [32]byte // BLAKE3-256 of the content
	ContentType  string
	Modified     int64 // Unix nanoseconds of the commit
	DeleteMarker bool
	Meta         map[string]string
	Tags         map[string]string
	// Headers are the content headers and checksums stored with the
	// version, by lower-case HTTP name: cache-control,
	// content-disposition, content-encoding, content-language, expires,
	// and x-amz-checksum-ALGORITHM (base64, verified when written).
	Headers map[string]string
}

// PutRequest asks for a new version.
type PutRequest struct {
	Space, Key  string
	Mode        PutMode
	Offset      int64 // PutWriteAt only
	Size        int64 // body length, or -1 if unknown (streamed to its end)
	ContentType string
	Meta        map[string]string
	Tags        map[string]string
	// Headers are as ObjectInfo.Headers. Put takes them once it has read
	// body to its end, so a caller may add one that only the end of the
	// body carries (a checksum sent as a trailer).
	Headers map[string]string
	// IfMatch, when non-zero, requires the current latest version to be
	// exactly this one; IfNoneMatch requires that no live version exist.
	// Either failing is CodePreconditionFailed and writes nothing.
	IfMatch     uint64
	IfNoneMatch bool
}

// GetRequest selects a version and a byte range.
type GetRequest struct {
	Space, Key string
	Version    uint64 // exact version; 0 = not set
	AsOf       uint64 // newest version at or before this timestamp; 0 = latest
	Offset     int64
	Length     int64 // -1 = to the end
}

// DeleteRequest deletes a key (writes a delete marker) or one version.
type DeleteRequest struct {
	Space, Key string
	Version    uint64 // 0 = write a delete marker
}

// ListRequest lists keys.
type ListRequest struct {
	Space      string
	Prefix     string
	StartAfter string
	Limit      uint32 // 0 = server default (1000)
	AsOf       uint64 // 0 = latest
	// AllVersions lists every version, delete markers too, rather than
	// each key's live one: keys in order, each one's versions newest
	// first, Limit counting versions.
	AllVersions bool
	// AfterVersion, with AllVersions, resumes inside StartAfter's
	// history at its versions older than AfterVersion (ListResult's
	// NextVersion); 0 starts after StartAfter's whole history.
	AfterVersion uint64
}

// ListResult is one page of a listing.
type ListResult struct {
	Objects   []ObjectInfo
	Truncated bool   // more keys follow
	Next      string // pass as StartAfter for the next page
	// NextVersion, for an AllVersions listing, is the version Next ended
	// at: pass it as AfterVersion.
	NextVersion uint64
}

// VersionsRequest lists the versions of one key.
type VersionsRequest struct {
	Space, Key string
	Before     uint64 // only versions older than this; 0 = from the newest
	Limit      uint32 // 0 = server default (1000)
}

// VersionsResult is one page of versions, newest first.
type VersionsResult struct {
	Versions  []ObjectInfo
	Truncated bool
}

// Code is a numbered error code of the protocol. Codes never change meaning.
type Code uint16

// The error table. Clients map codes to errors with errors.Is(err, wire.ErrX).
const (
	CodeOK                 Code = 0
	CodeInternal           Code = 1  // a server bug or an unexpected I/O failure
	CodeMalformed          Code = 2  // a frame or message could not be decoded
	CodeUnknownOp          Code = 3  // the opcode is not known to this server
	CodeTooLarge           Code = 4  // a frame, key or body exceeds a limit
	CodeInvalidArgument    Code = 5  // a field has an invalid value
	CodeBadSpaceName       Code = 6  // a space name breaks the naming rules
	CodeKeyTooLong         Code = 7  // an object key is over 1024 bytes
	CodeNotFound           Code = 8  // no such object or version
	CodeSpaceNotFound      Code = 9  // no such space
	CodeSpaceExists        Code = 10 // a space with that name exists
	CodeSpaceNotEmpty      Code = 11 // the space still holds live objects
	CodePreconditionFailed Code = 12 // IfMatch / IfNoneMatch did not hold
	CodeTruncated          Code = 13 // a body ended before its declared size
	CodeCorrupt            Code = 14 // stored bytes failed their checksum
	CodeNotLeader          Code = 15 // retry elsewhere; the message may name the leader
	CodeUnavailable        Code = 16 // temporarily unable to serve; retry
	CodeCanceled           Code = 17 // the request was canceled
	CodeDeleted            Code = 18 // the selected version is a delete marker
	CodeInvalidRange       Code = 19 // a byte range lies outside the object
	CodeOutcomeUnknown     Code = 20 // a write may or may not have taken effect; read before retrying
	CodeNotDrained         Code = 21 // the node still holds data others lack; wait for its drain
	CodeRangeMoved         Code = 22 // the key left the range the request was sent to (a split, or a merge under way); nothing was done, retry
	CodeUnauthenticated    Code = 23 // the connection has not authenticated, or authentication failed
	CodeAccessDenied       Code = 24 // the connection's key lacks the grant the request needs
	CodeTLSRequired        Code = 25 // the port serves TLS and the client spoke plain TCP
)

var codeNames = map[Code]string{
	CodeOK: "ok", CodeInternal: "internal", CodeMalformed: "malformed",
	CodeUnknownOp: "unknown op", CodeTooLarge: "too large",
	CodeInvalidArgument: "invalid argument", CodeBadSpaceName: "bad space name",
	CodeKeyTooLong: "key too long", CodeNotFound: "not found",
	CodeSpaceNotFound: "space not found", CodeSpaceExists: "space exists",
	CodeSpaceNotEmpty: "space not empty", CodePreconditionFailed: "precondition failed",
	CodeTruncated: "truncated body", CodeCorrupt: "corrupt data",
	CodeNotLeader: "not leader", CodeUnavailable: "unavailable",
	CodeCanceled: "canceled", CodeDeleted: "delete marker",
	CodeInvalidRange: "invalid range", CodeOutcomeUnknown: "outcome unknown", CodeNotDrained: "not drained",
	CodeRangeMoved: "range moved", CodeUnauthenticated: "unauthenticated",
	CodeAccessDenied: "access denied", CodeTLSRequired: "TLS required",
}

func (c Code) String() string {
	if s, ok := codeNames[c]; ok {
		return s
	}
	return fmt.Sprintf("code %d", uint16(c))
}

// Retryable reports whether an operation that failed with c may be retried
// unchanged (it had no effect, or it is idempotent).
func (c Code) Retryable() bool { return c == CodeNotLeader || c == CodeUnavailable }

// Error is an error with a protocol code. Two Errors match under errors.Is
// when their codes are equal, so errors.Is(err, wire.ErrNotFound) works.
type Error struct {
	Code    Code
	Message string
}

func (e *Error) Error() string {
	if e.Message == "" {
		return "cairn: " + e.Code.String()
	}
	return "cairn: " + e.Code.String() + ": " + e.Message
}

// Is matches on the code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Errorf builds an *Error.
func Errorf(c Code, format string, args ...any) *Error {
	return &Error{Code: c, Message: fmt.Sprintf(format, args...)}
}

// Sentinels for errors.Is.
var (
	ErrInternal           = &Error{Code: CodeInternal}
	ErrMalformed          = &Error{Code: CodeMalformed}
	ErrTooLarge           = &Error{Code: CodeTooLarge}
	ErrInvalidArgument    = &Error{Code: CodeInvalidArgument}
	ErrBadSpaceName       = &Error{Code: CodeBadSpaceName}
	ErrKeyTooLong         = &Error{Code: CodeKeyTooLong}
	ErrNotFound           = &Error{Code: CodeNotFound}
	ErrSpaceNotFound      = &Error{Code: CodeSpaceNotFound}
	ErrSpaceExists        = &Error{Code: CodeSpaceExists}
	ErrSpaceNotEmpty      = &Error{Code: CodeSpaceNotEmpty}
	ErrPreconditionFailed = &Error{Code: CodePreconditionFailed}
	ErrTruncated          = &Error{Code: CodeTruncated}
	ErrCorrupt            = &Error{Code: CodeCorrupt}
	ErrNotLeader          = &Error{Code: CodeNotLeader}
	ErrUnavailable        = &Error{Code: CodeUnavailable}
	ErrCanceled           = &Error{Code: CodeCanceled}
	ErrDeleted            = &Error{Code: CodeDeleted}
	ErrInvalidRange       = &Error{Code: CodeInvalidRange}
	ErrOutcomeUnknown     = &Error{Code: CodeOutcomeUnknown}
	ErrNotDrained         = &Error{Code: CodeNotDrained}
	ErrUnauthenticated    = &Error{Code: CodeUnauthenticated}
	ErrAccessDenied       = &Error{Code: CodeAccessDenied}
	ErrTLSRequired        = &Error{Code: CodeTLSRequired}
)

// CodeOf returns the protocol code for err: the code of an *Error in its
// chain, CodeCanceled for context errors, CodeInternal otherwise.
func CodeOf(err error) Code {
	if err == nil {
		return CodeOK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return CodeCanceled
	}
	return CodeInternal
}
