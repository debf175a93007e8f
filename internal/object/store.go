package object

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"hash"
	"io"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cairn-db/cairn/internal/chunk"
	"github.com/cairn-db/cairn/internal/keys"
	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/md5lanes"
	"github.com/cairn-db/cairn/internal/mvcc"
	"github.com/cairn-db/cairn/internal/rangeclient"
	"github.com/cairn-db/cairn/internal/tstamp"
	"github.com/cairn-db/cairn/internal/txn"
)

// Limits on object metadata, as S3 has them.
const (
	maxMetaBytes = 8 << 10 // user metadata keys + values
	maxTags      = 50
	maxTagKey    = 128
	maxTagValue  = 256
	listDefault  = 1000
	listMax      = 10000
	// maxPlanRetries bounds how often a byte-range write re-plans after a
	// concurrent write changed its parent.
	maxPlanRetries = 16
)

// Store is the object service: objects of open spaces (Spaces) whose
// version records live in the ranges (reached through the range client)
// and whose bodies live inline in the records or in chunks (Chunks).
type Store struct {
	cfg StoreConfig
	dir dirCache // tag spaces' directory entries (place.go)
}

// StoreConfig configures a Store. Every field is required unless it says.
type StoreConfig struct {
	// Spaces opens the spaces objects are in.
	Spaces Spaces
	// Ranges routes the records' commands and reads to leaseholders.
	Ranges *rangeclient.Client
	// Timestamps stamps new versions.
	Timestamps interface {
		Next(ctx context.Context) (uint64, error)
	}
	// Chunks stores and fetches bodies' chunks on the cluster's nodes.
	Chunks Chunks
	// InlineThreshold: bodies up to this many bytes live in the record.
	InlineThreshold int
	// MaxObjectSize bounds one object; MaxRangeWrite one byte-range
	// write or append (held in memory while its chunks are re-cut).
	MaxObjectSize, MaxRangeWrite int64
	// Chunking cuts bodies into content-defined chunks.
	Chunking chunk.Options
	// ChunkBytes, if set, counts the bytes of bodies stored as chunks.
	ChunkBytes prometheus.Counter
	// Txns runs transactions and resolves the locks reads and writes
	// meet.
	Txns *txn.Manager
	// Clock defaults to time.Now.
	Clock func() time.Time
	// GCGrace is the chunk collector's grace (cluster.Config.GCGrace): a
	// write that took more than half of it between storing its first
	// chunk and committing touches its chunks again first. 0: never.
	GCGrace time.Duration
	// TestingAfterTouch, a testing knob, runs after a clone, a copy or a
	// transaction touched the chunks it shares and before it commits.
	TestingAfterTouch func()
}

// Spaces opens spaces for the object service.
type Spaces interface {
	// Acquire returns the open space name, held until release is called
	// (a space being deleted waits for its holders), or a SpaceNotFound
	// error.
	Acquire(ctx context.Context, name string) (s OpenSpace, release func(), err error)
	// Name returns the name of the space with id, "" if there is none
	// (it was deleted).
	Name(ctx context.Context, id uint32) (string, error)
	// MergePoint is the timestamp the last merge of branch name read it
	// at (0: never merged); SetMergePoint records a merge's.
	MergePoint(ctx context.Context, name string) (uint64, error)
	SetMergePoint(ctx context.Context, name string, id uint32, at uint64) error
	// Branches lists the branches of space (as Brancher.Branches).
	Branches(ctx context.Context, space string) ([]BranchInfo, error)
}

// OpenSpace is a space as the object service uses it.
type OpenSpace interface {
	// ID is the space's id (the first part of its object keys).
	ID() uint32
	// Replicas is how many nodes keep each of its chunks.
	Replicas() int
	// Retention is the space's history policy now.
	Retention() mvcc.Retention
	// Table is the space's range table.
	Table() *rangeclient.Table
	// ReadAt is non-zero for a snapshot: the space is read-only, and
	// shows its keys as of that timestamp.
	ReadAt() uint64
	// Base is, for a branch, the space it branches from and the branch
	// point: a key the branch has no version of reads as the base's did
	// then (branch.go). Nil and 0 for any other space.
	Base() (OpenSpace, uint64)
	// Held is the newest timestamp a snapshot of the space shows
	// (HeldPending while one is being made; 0: none): no version at or
	// below it may be removed.
	Held() uint64
	// Hashed reports whether the space's placement is "hash": its keys
	// spread over keys.HashBuckets buckets (keys.HashPrefix).
	Hashed() bool
	// PlacementTag is NAME when the space's placement is "tag:NAME" (its
	// objects placed by that tag's value: place.go), else "".
	PlacementTag() string
}

// objKey is the object key of key in space s: in a hash space, under its
// bucket. (A tag space's keys are placed by its directory: readPlace.)
func objKey(s OpenSpace, key []byte) []byte {
	return keys.Object(s.ID(), placePrefix(s.Hashed(), key), key)
}

// placePrefix is the placement prefix of key in a space hashed or not.
func placePrefix(hashed bool, key []byte) []byte {
	if hashed {
		return keys.HashPrefix(key)
	}
	return nil
}

// HeldPending is OpenSpace.Held while a snapshot of the space is being
// made.
const HeldPending = ^uint64(0)

// Chunks stores and fetches chunks on the nodes of the cluster.
type Chunks interface {
	// PutChunk starts storing data on the nodes that should hold it (r
	// copies) and returns its hash; data is not retained after it
	// returns. The put's Wait returns once every copy is durable.
	PutChunk(ctx context.Context, data []byte, r int) (chunk.Hash, ChunkPut)
	// GetChunk returns the chunk with hash h, verified, read into dst if
	// it fits; r is the space's replication factor, a hint of where
	// copies are.
	GetChunk(ctx context.Context, h chunk.Hash, dst []byte, r int) ([]byte, error)
	// ViewChunk is GetChunk for a reader that does not modify the bytes:
	// they may be shared (a cache's), and stay valid until the caller
	// releases the pin that comes with them (nil for memory of its own).
	ViewChunk(ctx context.Context, h chunk.Hash, r int) ([]byte, *chunk.Pin, error)
	// TouchChunks tells the nodes holding hs that a version is about to
	// reference them without writing them (ChunkPlane.TouchChunks); an
	// error means the version must not be committed.
	TouchChunks(ctx context.Context, hs []chunk.Hash) error
}

// ChunkPut is a chunk being stored.
type ChunkPut interface {
	Wait(ctx context.Context) error
}

// NewStore returns the object service over cfg.
func NewStore(cfg StoreConfig) *Store {
	if cfg.ChunkBytes == nil {
		cfg.ChunkBytes = prometheus.NewCounter(prometheus.CounterOpts{Name: "unregistered"})
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	return &Store{cfg: cfg}
}

// validKey checks a key: UTF-8, or a system key when ctx allows them.
func validKey(ctx context.Context, key string) error {
	switch {
	case strings.HasPrefix(key, SystemKeyPrefix) && SystemKeys(ctx) && len(key) <= keys.MaxKeyLen:
		return nil
	case key == "":
		return Errorf(InvalidArgument, "object key is empty")
	case len(key) > keys.MaxKeyLen:
		return Errorf(KeyTooLong, "object key is %d bytes; the limit is %d", len(key), keys.MaxKeyLen)
	case !utf8.ValidString(key):
		return Errorf(InvalidArgument, "object key is not valid UTF-8")
	}
	return nil
}

// validMeta checks user metadata, tags and content headers. Metadata and
// headers share one size limit (S3 limits the request's headers).
func validMeta(m, tags, headers map[string]string) error {
	size := 0
	for _, mm := range []map[string]string{m, headers} {
		for k, v := range mm {
			if k == "" {
				return Errorf(InvalidArgument, "metadata or header name is empty")
			}
			size += len(k) + len(v)
		}
	}
	if size > maxMetaBytes {
		return Errorf(TooLarge, "user metadata and content headers are %d bytes; the limit is %d", size, maxMetaBytes)
	}
	if len(tags) > maxTags {
		return Errorf(TooLarge, "%d tags; the limit is %d", len(tags), maxTags)
	}
	for k, v := range tags {
		if k == "" || len(k) > maxTagKey || len(v) > maxTagValue {
			return Errorf(InvalidArgument, "tag %q: keys are 1-%d bytes and values up to %d", k, maxTagKey, maxTagValue)
		}
	}
	return nil
}

// target resolves space and key to the object key. The
// space is held (see acquire) until release is called.
func (st *Store) target(ctx context.Context, spaceName, key string) (s OpenSpace, obj []byte, release func(), err error) {
	if err := validKey(ctx, key); err != nil {
		return nil, nil, nil, err
	}
	s, release, err = st.cfg.Spaces.Acquire(ctx, spaceName)
	if err != nil {
		return nil, nil, nil, err
	}
	if obj, err = st.readPlace(ctx, s, key); err != nil {
		release()
		return nil, nil, nil, err
	}
	return s, obj, release, nil
}

// writeTarget is target for a write (a snapshot refuses it), which places
// the key in a tag space as p says (place.go).
func (st *Store) writeTarget(ctx context.Context, spaceName, key string, p placing) (OpenSpace, []byte, func(), error) {
	if err := validKey(ctx, key); err != nil {
		return nil, nil, nil, err
	}
	s, release, err := st.cfg.Spaces.Acquire(ctx, spaceName)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := readOnly(s, spaceName); err != nil {
		release()
		return nil, nil, nil, err
	}
	obj, err := st.writePlace(ctx, s, key, p)
	if err != nil {
		release()
		return nil, nil, nil, err
	}
	return s, obj, release, nil
}

// Put implements Service.
func (st *Store) Put(ctx context.Context, req *PutRequest, body io.Reader) (Info, error) {
	if err := validMeta(req.Meta, req.Tags, req.Headers); err != nil {
		return Info{}, err
	}
	if req.Size > st.cfg.MaxObjectSize {
		return Info{}, Errorf(TooLarge, "object of %d bytes is over the %d byte limit", req.Size, st.cfg.MaxObjectSize)
	}
	s, obj, release, err := st.writeTarget(ctx, req.Space, req.Key, placing{tags: req.Tags, keep: req.Mode != PutReplace, create: true})
	if err != nil {
		return Info{}, err
	}
	defer release()
	switch req.Mode {
	case PutReplace:
		started := st.cfg.Clock()
		rec, err := st.writeBody(ctx, body, req.Size, s.Replicas(), !req.CallerETag)
		if err != nil {
			return Info{}, err
		}
		if err := st.keepIfSlow(ctx, started, rec); err != nil {
			return Info{}, err
		}
		rec.ContentType, rec.Meta, rec.Tags, rec.Headers = req.ContentType, req.Meta, req.Tags, req.Headers
		if req.ETag != "" {
			rec.ETag = req.ETag
		}
		return st.commit(ctx, s, obj, req.Space, req.Key, &kv.PutCmd{Rec: rec, IfMatch: req.IfMatch, IfNoneMatch: req.IfNoneMatch})
	case PutWriteAt, PutAppend:
		return st.rangeWrite(ctx, s, obj, req, body)
	}
	return Info{}, Errorf(InvalidArgument, "unknown put mode %d", req.Mode)
}

// commit stamps the version with a fresh timestamp and proposes it. If a
// concurrent write with a later timestamp was applied first, the version
// would land below the latest one; the apply step refuses that, and commit
// retries with a new timestamp (the body is already stored).
func (st *Store) commit(ctx context.Context, s OpenSpace, obj []byte, spaceName, key string, c *kv.PutCmd) (Info, error) {
	if err := st.branchConditions(ctx, s, obj, c); err != nil {
		return Info{}, err
	}
	for attempt := 0; ; attempt++ {
		ts, err := st.cfg.Timestamps.Next(ctx)
		if err != nil {
			return Info{}, Unreachable("timestamp oracle", err)
		}
		c.Obj, c.Rec.Version, c.Rec.StartTS, c.Retention = obj, ts, ts, s.Retention()
		res, err := st.cfg.Ranges.Propose(ctx, s.Table(), obj, c.Encode())
		if again, serr := st.settle(ctx, err, attempt); serr != nil || again {
			if serr != nil {
				return Info{}, serr
			}
			continue // a transaction's lock was in the way
		}
		err = FromRange(err)
		if errors.Is(err, rangeclient.ErrConflict) {
			if attempt < maxPlanRetries {
				continue
			}
			return Info{}, Errorf(Unavailable, "concurrent writes to %q kept winning; retry", key)
		}
		if err != nil {
			return Info{}, err
		}
		return objectInfo(spaceName, key, res.Rec), nil
	}
}

// Unreachable classes err, a failure to reach what a request needs
// (what), as Unavailable; the caller's own cancellation stays itself.
func Unreachable(what string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return Errorf(Unavailable, "%s: %v", what, err)
}

// writeBody stores a body: inline if it fits the threshold, otherwise as
// content-defined chunks in the segment store. The returned record has Size,
// Hash, ETag and Inline or Manifest set. size < 0 means "until EOF"; a body
// that ends before size bytes is CodeTruncated.
// withMD5 false leaves the ETag empty: the caller gives its own.
func (st *Store) writeBody(ctx context.Context, body io.Reader, size int64, replicas int, withMD5 bool) (*mvcc.Record, error) {
	if body == nil {
		body = bytes.NewReader(nil)
	}
	src := body
	if size >= 0 {
		src = &exactReader{r: body, left: size}
	} else {
		src = io.LimitReader(body, st.cfg.MaxObjectSize+1)
	}
	// Read up to the threshold + 1: if the body ends within it, it is inline.
	// A body of known small size allocates only its own length.
	headLen := st.cfg.InlineThreshold + 1
	if size >= 0 && size <= int64(st.cfg.InlineThreshold) {
		headLen = int(size)
	}
	head := make([]byte, headLen)
	hn, err := io.ReadFull(src, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, bodyErr(err)
	}
	head = head[:hn]
	if hn <= st.cfg.InlineThreshold {
		if size >= 0 && int64(hn) != size {
			return nil, Errorf(Truncated, "body ended after %d of %d bytes", hn, size)
		}
		rec := &mvcc.Record{Size: int64(hn), Hash: chunk.Sum(head), Inline: head}
		if withMD5 {
			sum := md5.Sum(head)
			rec.ETag = hex.EncodeToString(sum[:])
		}
		return rec, nil
	}
	return st.writeChunks(ctx, io.MultiReader(bytes.NewReader(head), src), size, replicas, withMD5)
}

// writeChunks cuts r into content-defined chunks and stores them; at most a
// few chunks are in flight, so memory stays bounded whatever the size.
func (st *Store) writeChunks(ctx context.Context, r io.Reader, size int64, replicas int, withMD5 bool) (*mvcc.Record, error) {
	const inflight = 4
	md := md5lanes.New()
	bh := chunk.NewHasher()
	ch := chunk.NewChunker(io.TeeReader(r, bh), st.cfg.Chunking)
	// Every chunk is copied (segment record, ETag hasher, peer frame)
	// before the next is cut, so the buffer is free on return.
	defer ch.Close()
	var (
		m       chunk.Manifest
		pending []ChunkPut
		total   int64
	)
	wait := func(keep int) error {
		for len(pending) > keep {
			if err := pending[0].Wait(ctx); err != nil {
				return err
			}
			pending = pending[1:]
		}
		return nil
	}
	// The ETag's MD5 of a chunk runs while the chunk is hashed and
	// copied (md5lanes.Digest.Start), and is waited for before the
	// chunker reuses its buffer.
	lanes, _ := md.(*md5lanes.Digest)
	if lanes != nil {
		defer lanes.Wait() // (before ch.Close gives the buffer back)
	}
	for {
		if lanes != nil {
			lanes.Wait()
		}
		c, err := ch.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, bodyErr(err)
		}
		total += int64(len(c))
		// The ETag's MD5 takes whole chunks (the stream's bytes, in order)
		// rather than the reads the tee sees.
		switch {
		case withMD5 && lanes != nil:
			lanes.Start(c)
		case withMD5:
			md.Write(c)
		}
		if total > st.cfg.MaxObjectSize {
			return nil, Errorf(TooLarge, "object is over the %d byte limit", st.cfg.MaxObjectSize)
		}
		h, p := st.cfg.Chunks.PutChunk(ctx, c, replicas)
		m.Chunks = append(m.Chunks, chunk.Ref{Hash: h, Size: uint32(len(c))})
		pending = append(pending, p)
		if err := wait(inflight); err != nil {
			return nil, err
		}
	}
	if err := wait(0); err != nil {
		return nil, err
	}
	if size >= 0 && total != size {
		return nil, Errorf(Truncated, "body ended after %d of %d bytes", total, size)
	}
	st.cfg.ChunkBytes.Add(float64(total))
	rec := &mvcc.Record{Size: total, Hash: bh.Sum(), Manifest: m.Marshal()}
	if withMD5 {
		rec.ETag = hex.EncodeToString(md.Sum(nil))
	}
	return rec, nil
}

// exactReader yields at most left bytes and reports a body that ends early.
type exactReader struct {
	r    io.Reader
	left int64
}

func (e *exactReader) Read(p []byte) (int, error) {
	if e.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > e.left {
		p = p[:e.left]
	}
	n, err := e.r.Read(p)
	e.left -= int64(n)
	if errors.Is(err, io.EOF) && e.left > 0 {
		return n, io.ErrUnexpectedEOF
	}
	if err == nil && e.left == 0 {
		err = io.EOF
	}
	return n, err
}

func bodyErr(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return Errorf(Truncated, "the body ended before its declared size")
	}
	var k Kinded // a protocol's own failure of the body stream
	if errors.As(err, &k) {
		return err
	}
	return Errorf(Truncated, "reading the body: %v", err)
}

// rangeWrite writes a byte range into (or appends to) the latest version,
// producing a new version that shares every untouched chunk. It plans
// against the current latest version and commits with IfMatch on it, so a
// concurrent writer makes it re-plan rather than lose an update.
func (st *Store) rangeWrite(ctx context.Context, s OpenSpace, obj []byte, req *PutRequest, body io.Reader) (Info, error) {
	data, err := st.rangeData(req, body)
	if err != nil {
		return Info{}, err
	}
	for attempt := 0; ; attempt++ {
		parent, err := st.readRecord(ctx, s, obj, 0, 0)
		if err != nil && KindOf(err) != NotFound {
			return Info{}, err
		}
		var pm chunk.Manifest
		var pver uint64
		if err == nil {
			pver = parent.Version
			if req.IfMatch != 0 && req.IfMatch != pver {
				return Info{}, Errorf(PreconditionFailed, "latest version is %s, not %s", tstamp.String(pver), tstamp.String(req.IfMatch))
			}
			if pm, err = st.manifestOf(ctx, parent, s.Replicas()); err != nil {
				return Info{}, err
			}
		} else if req.IfMatch != 0 {
			return Info{}, Errorf(PreconditionFailed, "the object does not exist")
		}
		if req.IfNoneMatch && parent != nil {
			return Info{}, Errorf(PreconditionFailed, "the object exists")
		}
		rec, _, err := st.applyRange(ctx, s, req, pm, parent, data, st.loadChunk(ctx, s.Replicas()), st.storeChunk(ctx, s.Replicas()), true)
		if st.removedWhileRead(ctx, s, obj, parent, err) && attempt < maxPlanRetries {
			continue // the parent went (and its chunks with it): plan again
		}
		if err != nil {
			return Info{}, err
		}
		info, err := st.commit(ctx, s, obj, req.Space, req.Key, &kv.PutCmd{Rec: rec, IfMatch: pver, IfAbsent: pver == 0})
		if KindOf(err) == PreconditionFailed && req.IfMatch == 0 && attempt < maxPlanRetries {
			continue // a concurrent write changed the parent: plan again
		}
		return info, err
	}
}

// rangeData checks a byte-range write or append and reads its bytes.
func (st *Store) rangeData(req *PutRequest, body io.Reader) ([]byte, error) {
	if req.Size < 0 {
		return nil, Errorf(InvalidArgument, "a byte-range write or append needs a declared size")
	}
	if req.Size > st.cfg.MaxRangeWrite {
		return nil, Errorf(TooLarge, "a byte-range write or append of %d bytes is over the %d byte limit; split it", req.Size, st.cfg.MaxRangeWrite)
	}
	if req.Mode == PutWriteAt && req.Offset < 0 {
		return nil, Errorf(InvalidRange, "negative offset %d", req.Offset)
	}
	if mb, ok := body.(*memBody); ok && int64(mb.Len()) == req.Size && int64(len(mb.b)) == req.Size {
		return mb.b, nil // in memory already: not copied
	}
	data := make([]byte, req.Size)
	if _, err := io.ReadFull(body, data); err != nil {
		return nil, bodyErr(err)
	}
	return data, nil
}

// memBody is a request body held in memory (MemBody).
type memBody struct {
	*bytes.Reader
	b []byte
}

// MemBody returns a reader of b for a request whose body is in memory
// already (an item of a batch, in its frame): a byte-range write takes
// b itself rather than a copy, and may keep it until its transaction
// commits, so b must not change after.
func MemBody(b []byte) io.Reader { return &memBody{Reader: bytes.NewReader(b), b: b} }

// applyRange writes data into pm, the content of parent (nil: none), at
// req's offset (or its end, for an append), storing the pieces it
// rewrites, and returns the new version's record: metadata from req, or
// the parent's where req has none. load and store read and store the
// pieces. Without sum, the record has only its size, and the new
// manifest, which applyRange also returns, is not encoded into it: a
// transaction keeps it decoded for its next write to the key, encodes it
// for a read of the key, and sums it (summarizeInto) once at commit,
// however many writes built it.
func (st *Store) applyRange(ctx context.Context, s OpenSpace, req *PutRequest, pm chunk.Manifest, parent *mvcc.Record, data []byte,
	load loadFunc, store func([]byte) (chunk.Ref, error), sum bool) (*mvcc.Record, chunk.Manifest, error) {
	off := req.Offset
	if req.Mode == PutAppend {
		off = pm.Size()
	}
	// A write may leave a hole (read as zeros) of at most MaxRangeWrite
	// past the end; the checks avoid off+len, which may overflow.
	if off > pm.Size() && off-pm.Size() > st.cfg.MaxRangeWrite {
		return nil, chunk.Manifest{}, Errorf(InvalidRange, "offset %d is more than %d bytes past the end (%d)", off, st.cfg.MaxRangeWrite, pm.Size())
	}
	if off > st.cfg.MaxObjectSize-int64(len(data)) {
		return nil, chunk.Manifest{}, Errorf(TooLarge, "the object would be over the %d byte limit", st.cfg.MaxObjectSize)
	}
	var fresh map[chunk.Hash][]byte // the pieces this write stored, to sum without reading them back
	if sum {
		fresh = map[chunk.Hash][]byte{}
		inner := store
		store = func(b []byte) (chunk.Ref, error) {
			ref, err := inner(b)
			if err == nil {
				fresh[ref.Hash] = b // WriteAt does not reuse b
			}
			return ref, err
		}
	}
	nm, err := chunk.WriteAt(pm, off, data, rangePiece(len(data)), load.whole, store)
	if err != nil {
		return nil, chunk.Manifest{}, err
	}
	rec := &mvcc.Record{Size: nm.Size()} // with sum, summarizeRange's; else the caller encodes nm when it needs to
	if sum {
		read := func(ref chunk.Ref, dst []byte) ([]byte, error) {
			if b, ok := fresh[ref.Hash]; ok {
				return b, nil
			}
			return load(ref, dst)
		}
		if rec, err = st.summarizeRange(nm, read); err != nil {
			return nil, chunk.Manifest{}, err
		}
	}
	rec.ContentType, rec.Meta, rec.Tags, rec.Headers = req.ContentType, req.Meta, req.Tags, req.Headers
	if parent != nil {
		if rec.ContentType == "" {
			rec.ContentType = parent.ContentType
		}
		if rec.Meta == nil {
			rec.Meta = parent.Meta
		}
		if rec.Tags == nil {
			rec.Tags = parent.Tags
		}
		if rec.Headers == nil {
			rec.Headers = parent.Headers
		}
	}
	return rec, nm, nil
}

// Piece sizes of byte-range writes (rangePiece).
const (
	minRangePiece = 16 << 10
	maxRangePiece = chunk.DefaultFixedSize
)

// rangePiece is the size of the pieces a byte-range write of n bytes cuts
// the region it rewrites into: n rounded up to a power of two, between 16
// KiB and 1 MiB. The chunks a write touches are re-cut whole, so after the
// first write to a region later ones of the same size rewrite about two
// pieces: a small write stores about what it changes (VOSD's 16 KiB
// modifications store ~32 KiB each, not the ~1 MiB content-defined chunk
// around them), and a large one keeps chunks large for reads.
func rangePiece(n int) int {
	p := minRangePiece
	for p < n && p < maxRangePiece {
		p <<= 1
	}
	return p
}

// touchShared touches the chunks of manifest (a record's encoded
// manifest, nil for an inline body) that a new version is about to
// share: a clone, a copy, a composition or a transaction's byte-range
// writes reference chunks they did not write, and the chunk collector
// must not take them meanwhile (see cluster/gc.go).
func (st *Store) touchShared(ctx context.Context, m chunk.Manifest) error {
	seen := make(map[chunk.Hash]bool, len(m.Chunks))
	hs := make([]chunk.Hash, 0, len(m.Chunks))
	for _, r := range m.Chunks {
		if !seen[r.Hash] {
			seen[r.Hash] = true
			hs = append(hs, r.Hash)
		}
	}
	if err := st.cfg.Chunks.TouchChunks(ctx, hs); err != nil {
		return err
	}
	if st.cfg.TestingAfterTouch != nil {
		st.cfg.TestingAfterTouch()
	}
	return nil
}

// removedWhileRead reports whether err, from reading version rec of obj
// (nil: none), is a chunk gone because the version was removed and
// collected meanwhile: the read is moot rather than the data lost.
func (st *Store) removedWhileRead(ctx context.Context, s OpenSpace, obj []byte, rec *mvcc.Record, err error) bool {
	var cm chunkMissing
	if rec == nil || !errors.As(err, &cm) {
		return false
	}
	_, rerr := st.cfg.Ranges.Read(ctx, s.Table(), obj, rec.Version, 0)
	return KindOf(FromRange(rerr)) == NotFound
}

// keepIfSlow touches the chunks of rec, a version about to commit whose
// chunks were stored from started on, when that took more than half the
// collector's grace: its first chunks may be old enough to look like
// garbage (a slow upload, a long transaction). It fails if one is gone.
func (st *Store) keepIfSlow(ctx context.Context, started time.Time, rec *mvcc.Record) error {
	if rec.Manifest == nil || st.cfg.GCGrace <= 0 || st.cfg.Clock().Sub(started) <= st.cfg.GCGrace/2 {
		return nil
	}
	m, err := chunk.UnmarshalManifest(rec.Manifest)
	if err != nil {
		return Errorf(Corrupt, "manifest: %v", err)
	}
	if err := st.touchShared(ctx, m); KindOf(err) == NotFound {
		return Errorf(Unavailable, "the write took %v, longer than the chunk collector's grace (--gc-grace %v), and its first chunks were collected; nothing was written: write it again, faster or in parts",
			st.cfg.Clock().Sub(started).Round(time.Millisecond), st.cfg.GCGrace)
	} else if err != nil {
		return err
	}
	return nil
}

// manifestOf returns rec's content as a manifest, moving inline bytes into a
// chunk when needed.
func (st *Store) manifestOf(ctx context.Context, rec *mvcc.Record, replicas int) (chunk.Manifest, error) {
	if rec.Manifest != nil {
		m, err := chunk.UnmarshalManifest(rec.Manifest)
		if err != nil {
			return m, Errorf(Corrupt, "manifest of version %s: %v", tstamp.String(rec.Version), err)
		}
		return m, nil
	}
	if len(rec.Inline) == 0 {
		return chunk.Manifest{}, nil
	}
	ref, err := st.storeChunk(ctx, replicas)(rec.Inline)
	return chunk.Manifest{Chunks: []chunk.Ref{ref}}, err
}

// loadFunc reads the chunk an entry names, whole (verified), into dst's
// storage if it suits; the result may also be memory the loader keeps (a
// piece just stored), which the caller must not modify.
type loadFunc func(ref chunk.Ref, dst []byte) ([]byte, error)

// whole adapts l to chunk.WriteAt's load.
func (l loadFunc) whole(ref chunk.Ref) ([]byte, error) { return l(ref, nil) }

func (st *Store) loadChunk(ctx context.Context, replicas int) loadFunc {
	return func(ref chunk.Ref, dst []byte) ([]byte, error) {
		return st.cfg.Chunks.GetChunk(ctx, ref.Hash, dst, replicas)
	}
}

func (st *Store) storeChunk(ctx context.Context, replicas int) func([]byte) (chunk.Ref, error) {
	return func(b []byte) (chunk.Ref, error) {
		h, p := st.cfg.Chunks.PutChunk(ctx, b, replicas)
		if err := p.Wait(ctx); err != nil {
			return chunk.Ref{}, err
		}
		return chunk.Ref{Hash: h, Size: uint32(len(b))}, nil
	}
}

// summarize computes a record for the content m describes: size, BLAKE3
// and MD5 of the whole content (read back through verified chunks), and
// the manifest itself; small content is stored inline instead.
func (st *Store) summarize(ctx context.Context, m chunk.Manifest, replicas int) (*mvcc.Record, error) {
	return st.sum(m, st.loadChunk(ctx, replicas), true)
}

// summarizeRange is summarize for a version made by byte-range writes
// or appends, reading its pieces with load: its hash is its content's
// BLAKE3, as every version's, but its ETag is derived from that hash
// (rangeETag) rather than an MD5 of the content, which would cost a
// second pass over the whole object for every small write — as an S3
// multipart upload's ETag is no MD5 of its content either.
//
// A version larger than a tree block gets its hash from the chaining
// values of its blocks (chunk.TreeSum): those its manifest kept from its
// parent's, and those of the blocks the writes changed, computed from
// their bytes. So a small write into a large object reads what it
// touched, not the whole object; the manifest keeps the values for the
// next version. (The first byte-range write of a version that has none,
// an object PUT whole, computes them all.)
func (st *Store) summarizeRange(m chunk.Manifest, load loadFunc) (*mvcc.Record, error) {
	size := m.Size()
	if size <= int64(st.cfg.InlineThreshold) || size <= chunk.TreeBlock {
		return st.sum(m, load, false)
	}
	cvs := make([]chunk.CV, size/chunk.TreeBlock)
	copy(cvs, m.Tree)
	r := pieceReader{load: load}
	var block []byte
	for i := range cvs {
		if cvs[i] != (chunk.CV{}) {
			continue
		}
		var err error
		if block, err = r.read(m, int64(i)*chunk.TreeBlock, chunk.TreeBlock, block[:0]); err != nil {
			return nil, err
		}
		cvs[i] = chunk.BlockCV(int64(i), block)
	}
	end := int64(len(cvs)) * chunk.TreeBlock
	tail, err := r.read(m, end, size-end, block[:0])
	if err != nil {
		return nil, err
	}
	m.Tree = cvs
	rec := &mvcc.Record{Size: size, Hash: chunk.TreeSum(size, cvs, tail), Manifest: m.Marshal()}
	rec.ETag = rangeETag(rec.Hash)
	return rec, nil
}

// pieceReader reads a manifest's content piece by piece through one
// reused buffer, loading a chunk once however many pieces in a row need
// it (a piece that straddles two tree blocks is read as two).
type pieceReader struct {
	load loadFunc
	last chunk.Hash // the chunk in cur
	cur  []byte     // its bytes: in buf, or the loader's memory
	buf  []byte
}

// piece returns the bytes of p, valid until the next call.
func (r *pieceReader) piece(p chunk.Piece) ([]byte, error) {
	if r.cur == nil || p.Hash != r.last {
		if need := int(p.Off + p.Len); cap(r.buf) < need {
			r.buf = make([]byte, 0, max(need, 2*cap(r.buf), 64<<10))
		}
		c, err := r.load(p.Ref, r.buf[:0])
		if err != nil {
			return nil, err
		}
		r.cur, r.last = c, p.Hash
	}
	b, err := p.Of(r.cur)
	if err != nil {
		return nil, Errorf(Corrupt, "%v", err)
	}
	return b, nil
}

// read appends m's content in [off, off+n) to dst.
func (r *pieceReader) read(m chunk.Manifest, off, n int64, dst []byte) ([]byte, error) {
	for _, p := range m.Span(off, n) {
		b, err := r.piece(p)
		if err != nil {
			return nil, err
		}
		dst = append(dst, b...)
	}
	return dst, nil
}

// sum reads m's content with load and makes its record: its BLAKE3 hash,
// its ETag (the content's MD5 with withMD5, else rangeETag), and the
// content inline if it is small, else the manifest.
func (st *Store) sum(m chunk.Manifest, load loadFunc, withMD5 bool) (*mvcc.Record, error) {
	var md hash.Hash
	if withMD5 {
		md = md5lanes.New()
	}
	bh := chunk.NewHasher()
	var inline []byte
	small := m.Size() <= int64(st.cfg.InlineThreshold)
	r := pieceReader{load: load}
	for _, p := range m.Span(0, m.Size()) {
		b, err := r.piece(p)
		if err != nil {
			return nil, err
		}
		if md != nil {
			md.Write(b)
		}
		bh.Write(b)
		if small {
			inline = append(inline, b...)
		}
	}
	rec := &mvcc.Record{Size: m.Size(), Hash: bh.Sum()}
	if md != nil {
		rec.ETag = hex.EncodeToString(md.Sum(nil))
	} else {
		rec.ETag = rangeETag(rec.Hash)
	}
	if small {
		if inline == nil {
			inline = []byte{}
		}
		rec.Inline = inline
	} else {
		rec.Manifest = m.Marshal()
	}
	return rec, nil
}

// rangeETag is the ETag of a version made by byte-range writes: the first
// 16 bytes of its content's BLAKE3 hash in hex, and "-1". The hyphen
// tells S3 clients, as a multipart upload's does, that it is no MD5 of
// the content; equal content has equal ETags.
func rangeETag(h [32]byte) string { return hex.EncodeToString(h[:16]) + "-1" }

// summarizeInto fills in the hashes of rec, a transaction's version made
// by byte-range writes whose content is m (rec's manifest, decoded),
// reading its pieces with load, and moves a small content inline.
func (st *Store) summarizeInto(rec *mvcc.Record, m chunk.Manifest, load loadFunc) error {
	sum, err := st.summarizeRange(m, load)
	if err != nil {
		return err
	}
	rec.Size, rec.Hash, rec.ETag, rec.Inline, rec.Manifest = sum.Size, sum.Hash, sum.ETag, sum.Inline, sum.Manifest
	return nil
}

func objectInfo(spaceName, key string, rec *mvcc.Record) Info {
	info := Info{
		Space: spaceName, Key: key, Version: rec.Version, Parent: rec.Parent,
		Size: rec.Size, ETag: rec.ETag, Hash: rec.Hash, ContentType: rec.ContentType,
		Modified: tstamp.Time(rec.Version).UnixNano(), DeleteMarker: rec.DeleteMarker,
		Meta: rec.Meta, Tags: rec.Tags, Headers: rec.Headers,
	}
	if o := rec.Origin; o != nil {
		// The record names the space by id; Store.name names it.
		info.Origin = &VersionRef{Key: o.Key, Version: o.Version, spaceID: o.SpaceID}
	}
	return info
}

// Stat implements Service.
func (st *Store) Stat(ctx context.Context, req *GetRequest) (Info, error) {
	s, obj, release, err := st.target(ctx, req.Space, req.Key)
	if err != nil {
		return Info{}, err
	}
	defer release()
	rec, err := st.readRecord(ctx, s, obj, req.Version, req.AsOf)
	if err != nil {
		if rec != nil {
			return objectInfo(req.Space, req.Key, rec), err
		}
		return Info{}, err
	}
	info := objectInfo(req.Space, req.Key, rec)
	st.name(ctx, &info)
	return info, nil
}

// Get implements Service.
func (st *Store) Get(ctx context.Context, req *GetRequest) (Info, io.ReadCloser, error) {
	s, obj, release, err := st.target(ctx, req.Space, req.Key)
	if err != nil {
		return Info{}, nil, err
	}
	defer release()
	rec, err := st.readRecord(ctx, s, obj, req.Version, req.AsOf)
	if err != nil {
		if rec != nil {
			return objectInfo(req.Space, req.Key, rec), nil, err
		}
		return Info{}, nil, err
	}
	body, err := st.body(ctx, s, rec, req.Offset, req.Length)
	info := objectInfo(req.Space, req.Key, rec)
	st.name(ctx, &info)
	return info, body, err
}

// Viewer is implemented by a body (Service.Get's) that can hand out its
// bytes as read-only views, sparing a copy: View returns the next of them,
// at most max bytes, or io.EOF after the last. A view must not be
// modified; it stays valid after the next View and Close (the caller may
// hold it, as a queued frame does) until the caller releases the pin
// that comes with it, which it must, once (see chunk.Pin).
type Viewer interface {
	View(max int) ([]byte, *chunk.Pin, error)
}

// chunkReader streams pieces of chunks, each verified by the segment store,
// fetching the next ones while the current one is consumed: up to
// readAheadBytes of them (at least one, at most readAheadPieces), so that
// a version made of many small pieces scattered over the segments (a
// byte-range-written one's history) waits for their reads together, not
// one after another. Chunks come as read-only views (Chunks.ViewChunk):
// from the node's cache of verified chunks when they are hot, without a
// copy; Read copies out of them, and WriteTo hands them to the writer
// as they are. The reader holds each chunk's pin until it moves past the
// chunk; a view it hands out holds one more.
type chunkReader struct {
	ctx    context.Context
	cancel context.CancelFunc // ends the fetches ahead when the reader stops early
	st     *Store
	pieces []chunk.Piece
	r      int // the space's replication factor
	cur    []byte
	pin    *chunk.Pin // cur's
	ahead  []pending
	bytes  int64 // the sizes of the chunks ahead
	err    error
}

// pending is a chunk being fetched ahead.
type pending struct {
	ch   chan fetched
	size int64
}

type fetched struct {
	b   []byte
	pin *chunk.Pin
	err error
}

// Read-ahead bounds of a chunkReader: a version made by byte-range
// writes is ~512 slices of ~8 KiB for 4 MiB (VOSD's), each reading its
// 16 KiB chunk; fetched 256 at a time, an old version whose chunks left
// the page cache long ago waits for the disk about twice, not eight
// times. A slice's chunk may be twice its size, so a reader holds up to
// about 4 MiB of chunks it has not sent yet.
const (
	readAheadBytes  = 2 << 20
	readAheadPieces = 256
)

func newChunkReader(ctx context.Context, st *Store, pieces []chunk.Piece, r int) *chunkReader {
	cr := &chunkReader{st: st, pieces: pieces, r: r}
	cr.ctx, cr.cancel = context.WithCancel(ctx)
	cr.prefetch()
	return cr
}

// prefetch starts fetching the next pieces, up to the read-ahead bounds.
func (cr *chunkReader) prefetch() {
	for len(cr.pieces) > 0 {
		p := cr.pieces[0]
		if len(cr.ahead) > 0 && (len(cr.ahead) == readAheadPieces || cr.bytes+int64(p.Size) > readAheadBytes) {
			return
		}
		cr.pieces = cr.pieces[1:]
		ch := make(chan fetched, 1)
		cr.ahead = append(cr.ahead, pending{ch: ch, size: int64(p.Size)})
		cr.bytes += int64(p.Size)
		go func() {
			b, pin, err := cr.st.cfg.Chunks.ViewChunk(cr.ctx, p.Hash, cr.r)
			if err == nil {
				if b, err = p.Of(b); err != nil {
					pin.Release()
					pin, err = nil, Errorf(Corrupt, "%v", err)
				}
			}
			ch <- fetched{b, pin, err}
		}()
	}
}

// nextFetched waits for the oldest chunk ahead.
func (cr *chunkReader) nextFetched() fetched {
	p := cr.ahead[0]
	cr.ahead = cr.ahead[1:]
	cr.bytes -= p.size
	return <-p.ch
}

// next makes the next fetched piece current, once the current one is
// used up; it returns io.EOF after the last.
func (cr *chunkReader) next() error {
	for len(cr.cur) == 0 {
		cr.pin.Release()
		cr.pin = nil
		if cr.err != nil {
			return cr.err
		}
		if len(cr.ahead) == 0 {
			return io.EOF
		}
		f := cr.nextFetched()
		if f.err != nil {
			cr.err = f.err
			cr.drain()
			return f.err
		}
		cr.cur, cr.pin = f.b, f.pin
		cr.prefetch()
	}
	return nil
}

func (cr *chunkReader) Read(p []byte) (int, error) {
	if err := cr.next(); err != nil {
		return 0, err
	}
	k := copy(p, cr.cur)
	cr.cur = cr.cur[k:]
	return k, nil
}

// WriteTo writes the rest of the pieces to w as they come, from the
// chunks' own bytes, without a copy through a buffer of io.Copy's (which
// prefers it to Read). Each Write is at most writeToMax bytes: an HTTP
// response's idle deadline moves between writes, so a slow client must
// not be handed a whole chunk (up to MaxChunkSize) in one.
func (cr *chunkReader) WriteTo(w io.Writer) (int64, error) {
	var n int64
	for {
		b, pin, err := cr.View(writeToMax)
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return n, err
		}
		k, err := w.Write(b) // (a Writer does not keep b)
		pin.Release()
		n += int64(k)
		if err != nil {
			return n, err
		}
	}
}

var _ Viewer = (*chunkReader)(nil)

// View implements Viewer.
func (cr *chunkReader) View(max int) ([]byte, *chunk.Pin, error) {
	if err := cr.next(); err != nil {
		return nil, nil, err
	}
	k := min(max, len(cr.cur))
	b := cr.cur[:k:k]
	cr.cur = cr.cur[k:]
	cr.pin.Retain()
	return b, cr.pin, nil
}

// writeToMax bounds one Write of chunkReader.WriteTo.
const writeToMax = 512 << 10

// drain waits for the fetches ahead, so no goroutine outlives the reader.
func (cr *chunkReader) drain() {
	if len(cr.ahead) > 0 || len(cr.pieces) > 0 {
		cr.cancel() // stopped early: what is still being fetched is not wanted
	}
	for len(cr.ahead) > 0 {
		cr.nextFetched().pin.Release()
	}
	cr.pieces = nil
}

// Close waits for the fetches ahead. Read and Close must not run
// concurrently.
func (cr *chunkReader) Close() error {
	cr.drain()
	cr.cancel()
	cr.pin.Release()
	cr.cur, cr.pin = nil, nil
	cr.err = errors.New("read after close")
	return nil
}

// Delete implements Service.
func (st *Store) Delete(ctx context.Context, req *DeleteRequest) (Info, error) {
	s, obj, release, err := st.writeTarget(ctx, req.Space, req.Key, placing{keep: true})
	if err != nil {
		return unplacedDelete(req, err)
	}
	defer release()
	if req.Version != 0 {
		if err := heldError(s, req.Version); err != nil {
			return Info{}, err
		}
		if err := baseVersion(s, req.Version); err != nil {
			return Info{}, err
		}
		res, err := st.propose(ctx, s, obj, (&kv.DeleteVersionCmd{Obj: obj, Version: req.Version}).Encode())
		if err != nil {
			return Info{}, err
		}
		return objectInfo(req.Space, req.Key, res.Rec), nil
	}
	return st.commit(ctx, s, obj, req.Space, req.Key, &kv.PutCmd{Rec: &mvcc.Record{DeleteMarker: true}})
}

// DeleteMarked implements MarkedDeleter.
func (st *Store) DeleteMarked(ctx context.Context, req *DeleteRequest, headers map[string]string) (Info, error) {
	if req.Version != 0 {
		return Info{}, Errorf(InvalidArgument, "a marked delete writes a delete marker: no version")
	}
	if err := validMeta(nil, nil, headers); err != nil {
		return Info{}, err
	}
	s, obj, release, err := st.writeTarget(ctx, req.Space, req.Key, placing{keep: true})
	if err != nil {
		return unplacedDelete(req, err)
	}
	defer release()
	return st.commit(ctx, s, obj, req.Space, req.Key, &kv.PutCmd{Rec: &mvcc.Record{DeleteMarker: true, Headers: headers}})
}

// unplacedDelete answers a delete that failed with err: a key a tag space
// never placed has nothing to delete, and gets no delete marker (one
// would place the key with no tag for good).
func unplacedDelete(req *DeleteRequest, err error) (Info, error) {
	switch {
	case !errors.Is(err, errUnplaced):
		return Info{}, err
	case req.Version != 0:
		return Info{}, Errorf(NotFound, "%q has no version %s", req.Key, tstamp.String(req.Version))
	}
	return Info{Space: req.Space, Key: req.Key}, nil
}

// SetTags implements Tagger.
func (st *Store) SetTags(ctx context.Context, req *TagRequest) (Info, error) {
	if err := validMeta(nil, req.Tags, nil); err != nil {
		return Info{}, err
	}
	s, obj, release, err := st.writeTarget(ctx, req.Space, req.Key, placing{tags: req.Tags})
	if errors.Is(err, errUnplaced) {
		return Info{}, Errorf(NotFound, "%q does not exist", req.Key)
	}
	if err != nil {
		return Info{}, err
	}
	defer release()
	v := req.Version
	for attempt := 0; v == 0; attempt++ {
		rec, err := st.readRecord(ctx, s, obj, 0, 0)
		if err != nil {
			return Info{}, err
		}
		if rec.DeleteMarker {
			return Info{}, Errorf(NotFound, "%q is deleted", req.Key)
		}
		if b, at := s.Base(); b != nil && rec.Version <= at {
			// The base's version, shown by a branch: the branch gets a
			// version of its own with the new tags (sharing the content),
			// unless the branch wrote the key meanwhile: then again.
			c := *rec
			c.Tags, c.Origin, c.Parent = req.Tags, nil, 0
			info, err := st.commit(ctx, s, obj, req.Space, req.Key, &kv.PutCmd{Rec: &c, IfNoVersion: true})
			if KindOf(err) == PreconditionFailed && attempt < maxPlanRetries {
				continue
			}
			return info, err
		}
		v = rec.Version
	}
	if err := baseVersion(s, v); err != nil {
		return Info{}, err
	}
	// Tags change in place: a version a snapshot shows keeps its tags.
	if err := heldError(s, v); err != nil {
		return Info{}, err
	}
	res, err := st.propose(ctx, s, obj, (&kv.SetTagsCmd{Obj: obj, Version: v, Tags: req.Tags}).Encode())
	if err != nil {
		return Info{}, err
	}
	return objectInfo(req.Space, req.Key, res.Rec), nil
}

// List implements Service.
func (st *Store) List(ctx context.Context, req *ListRequest) (ListResult, error) {
	s, release, err := st.cfg.Spaces.Acquire(ctx, req.Space)
	if err != nil {
		return ListResult{}, err
	}
	defer release()
	limit := pageLimit(req.Limit)
	if len(req.Prefix) > keys.MaxKeyLen || len(req.StartAfter) > keys.MaxKeyLen {
		return ListResult{}, Errorf(KeyTooLong, "prefix or start-after is over %d bytes", keys.MaxKeyLen)
	}
	lower, upper := listBounds(ctx, s.ID(), req.Prefix)
	var after []byte
	if req.StartAfter != "" {
		after = keys.Object(s.ID(), nil, []byte(req.StartAfter))
	}
	if at := s.ReadAt(); at != 0 && (req.AsOf == 0 || req.AsOf > at) {
		snap := *req // a snapshot lists its space as of its timestamp
		snap.AsOf = at
		req = &snap
	}
	// A range that split under the listing: read the table again.
	if r, err := st.clampAsOf(ctx, req.AsOf); err != nil {
		return ListResult{}, err
	} else if r != req.AsOf {
		clamped := *req
		clamped.AsOf = r
		req = &clamped
	}
	var out ListResult
	for attempt := 0; ; attempt++ {
		err = st.cfg.Ranges.RetryMoved(ctx, func() (err error) {
			out, err = st.listOnce(ctx, s, req, lower, upper, after, limit)
			return err
		}, func() bool { return true })
		// Keys locked by transactions that may cover the listing: resolve
		// them (waiting for those still pending) and list again.
		if again, serr := st.settle(ctx, err, attempt); serr != nil || !again {
			if serr != nil {
				return ListResult{}, serr
			}
			if req.Snapshot && errors.Is(err, rangeclient.ErrHistoryPruned) {
				var e *rangeclient.Error
				errors.As(err, &e)
				return ListResult{}, &Error{Kind: TxnAborted, Message: "snapshot too old: " + e.Msg}
			}
			return out, FromRange(err)
		}
	}
}

// pageLimit is a listing's page size: the request's, or listDefault,
// at most listMax.
func pageLimit(n uint32) int {
	if n == 0 {
		return listDefault
	}
	return min(int(n), listMax)
}

// listOnce lists [lower, upper) after after, range by range in key order
// (a scan of one range at a time: a page never reads past its limit).
func (st *Store) listOnce(ctx context.Context, s OpenSpace, req *ListRequest, lower, upper, after []byte, limit int) (ListResult, error) {
	if b, at := s.Base(); b != nil {
		return st.listBranch(ctx, s, b, at, req, limit)
	}
	o := listOptions(req, lower, upper, after, limit)
	if o.AsOf == 0 && (len(s.Table().Ranges()) > 1 || s.Hashed() || s.PlacementTag() != "") {
		// A listing of the latest over several ranges reads them all at
		// one fresh timestamp: a snapshot, in which a transaction's writes
		// show in every range or in none.
		ts, err := st.cfg.Timestamps.Next(ctx)
		if err != nil {
			return ListResult{}, Unreachable("timestamp oracle", err)
		}
		o.AsOf = ts
	}
	if s.PlacementTag() != "" {
		return st.listTagged(ctx, s, req, o)
	}
	var ents []mvcc.Entry
	var more bool
	var err error
	if s.Hashed() {
		ents, more, err = st.scanBuckets(ctx, s, req.Prefix, req.StartAfter, o)
	} else {
		ents, more, err = st.cfg.Ranges.Scan(ctx, s.Table(), o, 1)
	}
	if err != nil {
		return ListResult{}, err // a range client failure: List classes it
	}
	out := ListResult{Objects: make([]Info, 0, len(ents)), Truncated: more}
	name := st.namer()
	for _, e := range ents {
		_, _, key, err := keys.DecodeObject(e.Obj)
		if err != nil {
			return ListResult{}, Errorf(Corrupt, "object key: %v", err)
		}
		out.Objects = append(out.Objects, objectInfo(req.Space, string(key), e.Rec))
		name(ctx, &out.Objects[len(out.Objects)-1])
	}
	if out.Truncated && len(out.Objects) > 0 {
		last := out.Objects[len(out.Objects)-1]
		out.Next = last.Key
		if req.AllVersions {
			out.NextVersion = last.Version
		}
	}
	return out, nil
}

// scanBuckets is a listing of hash space s (o's span is ignored: each
// bucket's is prefix's): a scan of each bucket, at once, merged in key
// order. A bucket whose page was cut bounds the merged page: keys past
// its last one may still lie in it.
func (st *Store) scanBuckets(ctx context.Context, s OpenSpace, prefix, startAfter string, o mvcc.ListOptions) ([]mvcc.Entry, bool, error) {
	type page struct {
		ents []mvcc.Entry
		keys []string
		more bool
		err  error
	}
	pages := make([]page, keys.HashBuckets)
	var wg sync.WaitGroup
	for b := range pages {
		wg.Go(func() {
			bo := o
			bucket := []byte{byte(b)}
			bo.Lower = keys.ObjectPrefix(s.ID(), bucket, []byte(prefix))
			bo.Upper = keys.PrefixEnd(bo.Lower)
			if !strings.HasPrefix(prefix, SystemKeyPrefix) || !SystemKeys(ctx) {
				bo.Upper = minBytes(bo.Upper, keys.ObjectPrefix(s.ID(), bucket, []byte(SystemKeyPrefix)))
			}
			bo.StartAfter = nil
			if startAfter != "" {
				bo.StartAfter = keys.Object(s.ID(), bucket, []byte(startAfter))
			}
			p := &pages[b]
			if p.ents, p.more, p.err = st.cfg.Ranges.Scan(ctx, s.Table(), bo, 1); p.err != nil {
				return
			}
			for _, e := range p.ents {
				_, _, k, err := keys.DecodeObject(e.Obj)
				if err != nil {
					p.err = Errorf(Corrupt, "object key: %v", err)
					return
				}
				p.keys = append(p.keys, string(k))
			}
		})
	}
	wg.Wait()
	type entry struct {
		key string
		e   mvcc.Entry
	}
	var all []entry
	bound, bounded := "", false
	for _, p := range pages {
		if p.err != nil {
			return nil, false, p.err
		}
		for i, e := range p.ents {
			all = append(all, entry{p.keys[i], e})
		}
		if p.more && len(p.keys) > 0 {
			if last := p.keys[len(p.keys)-1]; !bounded || last < bound {
				bound, bounded = last, true
			}
		}
	}
	// A key lives in one bucket: a stable sort keeps its versions' order.
	slices.SortStableFunc(all, func(a, b entry) int { return strings.Compare(a.key, b.key) })
	more := false
	if bounded {
		n := len(all)
		for n > 0 && all[n-1].key > bound {
			n--
		}
		more = true
		all = all[:n]
	}
	if o.Limit > 0 && len(all) > o.Limit {
		all, more = all[:o.Limit], true
	}
	out := make([]mvcc.Entry, len(all))
	for i, e := range all {
		out[i] = e.e
	}
	return out, more, nil
}

// listOptions is one range's part of a listing.
func listOptions(req *ListRequest, lower, upper, after []byte, limit int) mvcc.ListOptions {
	return mvcc.ListOptions{Lower: lower, Upper: upper, StartAfter: after, Limit: limit, AsOf: req.AsOf,
		AllVersions: req.AllVersions, AfterVersion: req.AfterVersion, Snapshot: req.Snapshot && req.AsOf != 0}
}

// Versions implements Service.
func (st *Store) Versions(ctx context.Context, req *VersionsRequest) (VersionsResult, error) {
	s, obj, release, err := st.target(ctx, req.Space, req.Key)
	if err != nil {
		return VersionsResult{}, err
	}
	defer release()
	limit := pageLimit(req.Limit)
	recs, more, err := st.versions(ctx, s, obj, req.Before, limit)
	if err != nil {
		return VersionsResult{}, err
	}
	out := VersionsResult{Truncated: more}
	name := st.namer()
	for _, rec := range recs {
		out.Versions = append(out.Versions, objectInfo(req.Space, req.Key, rec))
		name(ctx, &out.Versions[len(out.Versions)-1])
	}
	return out, nil
}

// minBytes treats nil as +infinity.
func minBytes(a, b []byte) []byte {
	if a == nil {
		return b
	}
	if b == nil || bytes.Compare(a, b) <= 0 {
		return a
	}
	return b
}
