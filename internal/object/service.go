package object

import (
	"context"
	"io"
)

// Service is the object service: spaces, and the versioned objects in
// them. Every protocol serves one (the native protocol's server decodes
// frames into calls on it; the S3 API, requests). Every method may be
// called concurrently. Errors are *Error values (errors.go) or wrap one;
// anything else is an internal failure.
type Service interface {
	// CreateSpace creates a space. ErrSpaceExists if it exists,
	// ErrBadSpaceName if the name is invalid.
	CreateSpace(ctx context.Context, name string, s SpaceSettings) (SpaceInfo, error)
	// ListSpaces lists spaces in name order.
	ListSpaces(ctx context.Context) ([]SpaceInfo, error)
	// DeleteSpace deletes an empty space. ErrSpaceNotEmpty if it holds any
	// live object, ErrSpaceNotFound if it does not exist.
	DeleteSpace(ctx context.Context, name string) error

	// Put writes a new version from body. body yields exactly req.Size bytes
	// when req.Size >= 0; a body that ends early is ErrTruncated and writes
	// nothing. With req.Mode WriteAt or Append the new version shares every
	// untouched chunk with its parent.
	Put(ctx context.Context, req *PutRequest, body io.Reader) (Info, error)
	// Get reads a version (latest, exact, or as of a time) and a byte range of
	// it. The caller must Close the returned reader. Bytes are verified
	// against their hashes as they are read; a mismatch surfaces as a read
	// error with ErrCorrupt, never as wrong bytes.
	Get(ctx context.Context, req *GetRequest) (Info, io.ReadCloser, error)
	// Stat is Get without the body.
	Stat(ctx context.Context, req *GetRequest) (Info, error)
	// Delete writes a delete marker (or, with Version set, removes that one
	// version) and returns the marker's info.
	Delete(ctx context.Context, req *DeleteRequest) (Info, error)
	// List lists live objects in key order.
	List(ctx context.Context, req *ListRequest) (ListResult, error)
	// Versions lists the versions of one key, newest first, delete markers
	// included.
	Versions(ctx context.Context, req *VersionsRequest) (VersionsResult, error)
}

// Composer is implemented by a Service that can make a version out
// of the bodies of other versions without copying their data: the new
// version's manifest lists their chunks (S3's multipart uploads and
// copies).
type Composer interface {
	// Compose writes a new version of req.Space/req.Key whose body is the
	// concatenation of the sources, with the metadata of req (its Size,
	// Mode and Offset are ignored). etag, if set, is the version's ETag;
	// otherwise it is the MD5 of the content. A source that does not
	// exist is ErrNotFound; one whose range is not within it,
	// ErrInvalidRange.
	Compose(ctx context.Context, req *PutRequest, etag string, sources []ComposeSource) (Info, error)
}

// Tagger changes the tags of a version in place: the one part of a
// version that may change once it is written (S3's object tagging). It is
// not a native protocol operation yet.
type Tagger interface {
	// SetTags replaces the tags of req.Version of req.Key (0: the latest)
	// with req.Tags (none: remove them) and returns the version. A delete
	// marker is ErrDeleted.
	SetTags(ctx context.Context, req *TagRequest) (Info, error)
}

// MarkedDeleter writes a delete marker that carries headers (S3 marks
// the null version of a bucket whose versioning is suspended with one).
type MarkedDeleter interface {
	// DeleteMarked is Delete without a Version, whose marker keeps
	// headers (validated as PutRequest.Headers).
	DeleteMarked(ctx context.Context, req *DeleteRequest, headers map[string]string) (Info, error)
}

// RetentionSetter changes a space's history policy after its creation
// (S3 lifecycle rules for noncurrent versions map onto it). It is not a
// native protocol operation yet.
type RetentionSetter interface {
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
