package object

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

// Info describes one version of an object.
type Info struct {
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
	// Origin is the version this one was cloned from (Clone), nil if it
	// was written. Its Space is "" if that space has been deleted.
	Origin *VersionRef
}

// VersionRef names one version of an object.
type VersionRef struct {
	Space, Key string
	Version    uint64

	spaceID uint32 // an origin's, until Store.name fills in Space
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
	// Headers are as Info.Headers. Put takes them once it has read
	// body to its end, so a caller may add one that only the end of the
	// body carries (a checksum sent as a trailer).
	Headers map[string]string
	// ETag, when set, is the new version's ETag instead of the MD5 of
	// body (PutReplace only): the S3 API stores some bodies encrypted and
	// keeps the plaintext's MD5. Put takes it, as Headers, once it has
	// read body to its end.
	ETag string
	// CallerETag says the caller sets ETag by the body's end: Put then
	// computes no MD5 of the body.
	CallerETag bool
	// IfMatch, when non-zero, requires the current latest version to be
	// exactly this one; IfNoneMatch requires that no live version exist.
	// Either failing is ErrPreconditionFailed and writes nothing.
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
	// Snapshot, with AsOf, is a transaction's listing: a key whose
	// version at AsOf was pruned since fails it as TxnAborted ("snapshot
	// too old") rather than being left out. Not on the wire.
	Snapshot bool
}

// ListResult is one page of a listing.
type ListResult struct {
	Objects   []Info
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
	Versions  []Info
	Truncated bool
}

// EncryptedHeader is the Info.Headers entry of a version the S3 API
// stored encrypted (server-side encryption: internal/s3's sse.go). Its
// body at rest is ciphertext, which only the S3 API decrypts.
const EncryptedHeader = "cairn-sse"

// CheckPlain returns an InvalidArgument error for a version whose body is
// stored encrypted: readers other than the S3 API refuse to hand out its
// ciphertext as if it were the object.
func CheckPlain(info *Info) error {
	if info.Headers[EncryptedHeader] == "" {
		return nil
	}
	return Errorf(InvalidArgument, "%s/%s is stored with S3 server-side encryption (%s): read it through the S3 API, which decrypts it",
		info.Space, info.Key, info.Headers[EncryptedHeader])
}
