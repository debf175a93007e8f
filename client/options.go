package client

import (
	"github.com/cairn-db/cairn/internal/object"
)

// PutOption modifies a write (Put, PutStream, batch puts).
type PutOption interface{ applyPut(*object.PutRequest) }

// GetOption selects what a read returns (Get, GetStream, ReadRange, Stat,
// batch gets and stats).
type GetOption interface{ applyGet(*object.GetRequest) }

// DeleteOption modifies a Delete.
type DeleteOption interface{ applyDelete(*object.DeleteRequest) }

type putOpt func(*object.PutRequest)

func (f putOpt) applyPut(r *object.PutRequest) { f(r) }

type getOpt func(*object.GetRequest)

func (f getOpt) applyGet(r *object.GetRequest) { f(r) }

// VersionOption selects one exact version; it is both a GetOption and a
// DeleteOption (deleting one version instead of writing a delete marker).
type VersionOption uint64

func (v VersionOption) applyGet(r *object.GetRequest)       { r.Version = uint64(v) }
func (v VersionOption) applyDelete(r *object.DeleteRequest) { r.Version = uint64(v) }

// WithVersion selects version v (a commit timestamp from ObjectInfo.Version).
func WithVersion(v uint64) VersionOption { return VersionOption(v) }

// WithAsOf reads the newest version at or before timestamp ts.
func WithAsOf(ts uint64) GetOption { return getOpt(func(r *object.GetRequest) { r.AsOf = ts }) }

// WithContentType sets the stored content type.
func WithContentType(ct string) PutOption {
	return putOpt(func(r *object.PutRequest) { r.ContentType = ct })
}

// WithMeta sets user metadata. The map is not copied; do not change it
// until the call returns.
func WithMeta(m map[string]string) PutOption {
	return putOpt(func(r *object.PutRequest) { r.Meta = m })
}

// WithTags sets tags. The map is not copied; do not change it until the
// call returns.
func WithTags(m map[string]string) PutOption {
	return putOpt(func(r *object.PutRequest) { r.Tags = m })
}

// IfMatch writes only if the current latest version is exactly v; otherwise
// the write fails with ErrPreconditionFailed and changes nothing.
func IfMatch(v uint64) PutOption { return putOpt(func(r *object.PutRequest) { r.IfMatch = v }) }

// IfNoneMatch writes only if the key has no live version (create-only).
func IfNoneMatch() PutOption { return putOpt(func(r *object.PutRequest) { r.IfNoneMatch = true }) }

// ListOptions select a page of keys.
type ListOptions struct {
	Prefix     string // only keys with this prefix
	StartAfter string // only keys after this one (ListResult.Next of the previous page)
	Limit      uint32 // page size; 0 = server default (1000)
	AsOf       uint64 // list as of this timestamp; 0 = latest
	// AllVersions lists every version, delete markers included: keys in
	// order, each key's versions newest first.
	AllVersions bool
	// AfterVersion resumes an AllVersions listing inside StartAfter's
	// history (ListResult.NextVersion of the previous page).
	AfterVersion uint64
}

// VersionsOptions select a page of versions.
type VersionsOptions struct {
	Before uint64 // only versions older than this; 0 = from the newest
	Limit  uint32 // page size; 0 = server default (1000)
}

func putRequest(space, key string, size int64, opts []PutOption) object.PutRequest {
	r := object.PutRequest{Space: space, Key: key, Size: size}
	for _, o := range opts {
		o.applyPut(&r)
	}
	return r
}

func getRequest(space, key string, opts []GetOption) object.GetRequest {
	r := object.GetRequest{Space: space, Key: key, Length: -1}
	for _, o := range opts {
		o.applyGet(&r)
	}
	return r
}

func deleteRequest(space, key string, opts []DeleteOption) object.DeleteRequest {
	r := object.DeleteRequest{Space: space, Key: key}
	for _, o := range opts {
		o.applyDelete(&r)
	}
	return r
}

// WithRange reads length bytes from offset off (length -1: to the end).
// It applies to Get, GetStream and Stat-free reads; ReadRange is shorthand.
func WithRange(off, length int64) GetOption {
	return getOpt(func(r *object.GetRequest) { r.Offset, r.Length = off, length })
}
