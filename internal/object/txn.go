package object

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cairn-db/cairn/internal/chunk"
	"github.com/cairn-db/cairn/internal/keys"
	"github.com/cairn-db/cairn/internal/mvcc"
	"github.com/cairn-db/cairn/internal/tstamp"
	"github.com/cairn-db/cairn/internal/txn"
)

// TxnOptions are a transaction's options.
type TxnOptions struct {
	// Serializable validates every read at commit: no key the
	// transaction read (by Get, Stat or in a listing) changed before the
	// commit. Without it the transaction is snapshot isolated.
	Serializable bool
}

// Transactor is implemented by a Service that runs multi-object
// transactions.
type Transactor interface {
	// Begin starts a transaction at a fresh snapshot.
	Begin(ctx context.Context, opts TxnOptions) (*Txn, error)
	// BeginAt starts a transaction whose snapshot is startTS, a timestamp
	// the server handed out (Begin's, to a client that keeps its own
	// write set and commits it in one request).
	BeginAt(startTS uint64, opts TxnOptions) (*Txn, error)
}

// Txn is a multi-object transaction: reads see one snapshot (and the
// transaction's own writes), writes are buffered — bodies are stored as
// they are written, records at commit — and Commit applies every write or
// none. Methods are safe for concurrent use.
type Txn struct {
	st *Store
	tx *txn.Txn
	// began is when it began: a long one touches its bodies' chunks at
	// commit (Store.keepIfSlow).
	began time.Time

	mu     sync.Mutex
	spaces map[uint32]string // the spaces it touched, by id (naming conflicts)
	// unsummed are the records of byte-range writes whose hashes Commit
	// computes, by object key (the newest write of each key).
	unsummed map[string]unsummed
	// committing is set once Commit has begun: writes are refused.
	committing bool
	// rangeMu makes each byte-range write's read of its parent and its
	// write one step (two at once on a key would build on one parent).
	rangeMu sync.Mutex
	// staged are the pieces its byte-range writes stored, by hash, and
	// puts their stores: a write answers without waiting for its pieces
	// to be durable (Commit waits for all of them, once), and a later
	// write reads the pieces it overlaps from here.
	staged map[chunk.Hash][]byte
	puts   []ChunkPut
}

type unsummed struct {
	rec      *mvcc.Record   // its Manifest is not set until the commit (see encoded)
	m        chunk.Manifest // its content: the next write to the key starts from it
	replicas int
}

// ConflictError is a transaction's conflict on one key (kind TxnConflict).
type ConflictError struct {
	Space, Key string
	Message    string
}

func (e *ConflictError) Error() string { return "cairn: transaction conflict: " + e.Message }

// ObjectKind implements Kinded.
func (e *ConflictError) ObjectKind() Kind { return TxnConflict }

// Is matches ErrTxnConflict (and any error of its kind).
func (e *ConflictError) Is(target error) bool {
	t, ok := target.(Kinded)
	return ok && t.ObjectKind() == TxnConflict
}

// touched notes that the transaction used space s.
func (t *Txn) touched(s OpenSpace, name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.spaces == nil {
		t.spaces = map[uint32]string{}
	}
	t.spaces[s.ID()] = name
}

// Saw adds to the read set that the transaction's client saw version v of
// key (0: none): a client that read outside the transaction (at its start
// timestamp) and wants the read validated at commit.
func (t *Txn) Saw(ctx context.Context, space, key string, v uint64) error {
	s, obj, release, err := t.st.target(ctx, space, key)
	if err != nil {
		return err
	}
	defer release()
	t.touched(s, space)
	_, point := s.Base()
	t.tx.Saw(obj, ownVersion(point, v))
	if v == 0 {
		return t.readUnplaced(ctx, s, key)
	}
	return nil
}

// readUnplaced puts the directory entry of key in the read set when a tag
// space has never placed key: a key created meanwhile is placed by a
// value the read did not look under, and its directory entry is what
// changes.
func (t *Txn) readUnplaced(ctx context.Context, s OpenSpace, key string) error {
	if s.PlacementTag() == "" {
		return nil
	}
	if _, ok, err := t.st.placed(ctx, s, key); err != nil || ok {
		return err
	}
	_, _, err := t.tx.Read(ctx, s.Table(), dirObj(s, key))
	return err
}

// ownVersion is the version of a key a transaction saw in a space, as its
// read set records it: a branch's key showing its base's version (at or
// below the branch point) has no version of the branch's own, 0 (the
// base's side never changes; the branch's may, and the commit checks it).
func ownVersion(point, v uint64) uint64 {
	if point != 0 && v <= point {
		return 0
	}
	return v
}

// Begin implements Transactor.
func (st *Store) Begin(ctx context.Context, opts TxnOptions) (*Txn, error) {
	tx, err := st.cfg.Txns.Begin(ctx, txn.Options{Serializable: opts.Serializable})
	if err != nil {
		return nil, Unreachable("timestamp oracle", err)
	}
	return &Txn{st: st, tx: tx, began: st.cfg.Clock()}, nil
}

// BeginAt implements Transactor.
func (st *Store) BeginAt(startTS uint64, opts TxnOptions) (*Txn, error) {
	if startTS == 0 || tstamp.Physical(startTS) > st.cfg.Clock().Add(futureSlack).UnixMilli() {
		return nil, Errorf(InvalidArgument, "start %s is not a timestamp the server handed out (begin a transaction for one)", tstamp.String(startTS))
	}
	return &Txn{st: st, tx: st.cfg.Txns.BeginAt(startTS, txn.Options{Serializable: opts.Serializable}), began: st.cfg.Clock()}, nil
}

// StartTS is the transaction's snapshot: reads see what committed at or
// before it.
func (t *Txn) StartTS() uint64 { return t.tx.StartTS }

// Stat returns the info of req.Key's version the transaction sees (req
// selects no version nor time: the transaction's snapshot does); a key it
// wrote has Version 0 until the commit.
func (t *Txn) Stat(ctx context.Context, req *GetRequest) (Info, error) {
	info, _, _, release, err := t.read(ctx, req)
	if err == nil {
		release()
	}
	return info, err
}

// Get returns the version of req.Key the transaction sees, with the byte
// range req asks of its body.
func (t *Txn) Get(ctx context.Context, req *GetRequest) (Info, io.ReadCloser, error) {
	info, s, rec, release, err := t.read(ctx, req)
	if err != nil {
		return Info{}, nil, err
	}
	defer release()
	// Its own range writes' pieces are read from the chunk store: they
	// must be stored first.
	if err := t.piecesStored(ctx); err != nil {
		return Info{}, nil, err
	}
	body, err := t.st.body(ctx, s, rec, req.Offset, req.Length)
	return info, body, err
}

// piecesStored waits for the pieces its byte-range writes stored so far
// (they stay listed: a later call waits again, at once, and sees a
// failure).
func (t *Txn) piecesStored(ctx context.Context) error {
	t.mu.Lock()
	puts := slices.Clone(t.puts)
	t.mu.Unlock()
	for _, p := range puts {
		if err := p.Wait(ctx); err != nil {
			return err
		}
	}
	return nil
}

func (t *Txn) read(ctx context.Context, req *GetRequest) (Info, OpenSpace, *mvcc.Record, func(), error) {
	if req.Version != 0 || req.AsOf != 0 {
		return Info{}, nil, nil, nil, Errorf(InvalidArgument, "a transaction reads its snapshot: no version, no other time")
	}
	s, obj, release, err := t.st.target(ctx, req.Space, req.Key)
	if err != nil {
		return Info{}, nil, nil, nil, err
	}
	t.touched(s, req.Space)
	var rec *mvcc.Record
	if at := s.ReadAt(); at != 0 {
		// A snapshot never changes: it is read as it shows, outside the
		// transaction's read set.
		rec, err = t.st.readRecord(ctx, s, obj, 0, at)
		if KindOf(err) == NotFound {
			rec, err = nil, nil
		}
		if err != nil {
			release()
			return Info{}, nil, nil, nil, err
		}
	} else {
		var mine bool
		rec, mine, err = t.tx.Read(ctx, s.Table(), obj)
		if err == nil && rec == nil && !mine {
			rec, err = t.baseShows(ctx, s, obj)
		}
		if err == nil && rec == nil && !mine {
			err = t.readUnplaced(ctx, s, req.Key)
		}
		if err == nil && mine && rec != nil {
			rec = t.encoded(obj, rec)
		}
	}
	if err == nil && rec == nil {
		err = Errorf(NotFound, "%s/%s does not exist at the transaction's snapshot", req.Space, req.Key)
	}
	if err != nil {
		release()
		return Info{}, nil, nil, nil, FromRange(err)
	}
	return objectInfo(req.Space, req.Key, rec), s, rec, release, nil
}

// Put stores body now and writes it as key's new version at commit.
// req.Mode must be PutReplace; IfMatch and IfNoneMatch are checked at
// commit against the newest version at the transaction's start.
func (t *Txn) Put(ctx context.Context, req *PutRequest, body io.Reader) (Info, error) {
	if req.Mode != PutReplace && req.Mode != PutWriteAt && req.Mode != PutAppend {
		return Info{}, Errorf(InvalidArgument, "unknown put mode %d", req.Mode)
	}
	if err := validMeta(req.Meta, req.Tags, req.Headers); err != nil {
		return Info{}, err
	}
	s, obj, release, err := t.st.writeTarget(ctx, req.Space, req.Key, placing{tags: req.Tags, keep: req.Mode != PutReplace, create: true})
	if err != nil {
		return Info{}, err
	}
	defer release()
	t.touched(s, req.Space)
	if req.Size > t.st.cfg.MaxObjectSize {
		return Info{}, Errorf(TooLarge, "object of %d bytes is over the %d byte limit", req.Size, t.st.cfg.MaxObjectSize)
	}
	// The body is durable before the commit locks anything: the
	// transaction carries its manifest.
	if err := t.writable(); err != nil {
		return Info{}, err
	}
	var rec *mvcc.Record
	if req.Mode == PutReplace {
		rec, err = t.st.writeBody(ctx, body, req.Size, s.Replicas(), !req.CallerETag)
		if err == nil {
			rec.ContentType, rec.Meta, rec.Tags, rec.Headers = req.ContentType, req.Meta, req.Tags, req.Headers
			if req.ETag != "" {
				rec.ETag = req.ETag
			}
		}
	} else {
		t.rangeMu.Lock() // until the write is in the write set
		defer t.rangeMu.Unlock()
		rec, err = t.rangeWrite(ctx, s, obj, req, body)
	}
	if err != nil {
		return Info{}, err
	}
	if req.Mode == PutReplace {
		t.mu.Lock()
		delete(t.unsummed, string(obj)) // a whole write replaces the key's range writes
		t.mu.Unlock()
	}
	switch b, at := s.Base(); {
	case b != nil && (req.IfNoneMatch || (req.IfMatch != 0 && req.IfMatch <= at)):
		// A condition on what the branch's base shows: checked here (the
		// base's side never changes), and the branch must have had no
		// live version of the key at the transaction's start.
		if err := t.baseCondition(ctx, s, obj, req); err != nil {
			return Info{}, err
		}
		err = t.tx.WriteIf(obj, rec, s.Retention(), 0)
	case req.IfMatch != 0:
		err = t.tx.WriteIf(obj, rec, s.Retention(), req.IfMatch)
	case req.IfNoneMatch:
		err = t.tx.WriteIf(obj, rec, s.Retention(), 0)
	default:
		err = t.tx.Write(obj, rec, s.Retention())
	}
	if err != nil {
		return Info{}, FromRange(err)
	}
	return objectInfo(req.Space, req.Key, rec), nil
}

// encoded is rec, the transaction's write of obj, as a reader needs it:
// a key built by byte-range writes has its manifest only decoded until
// the commit (unsummed.m), so the reader gets a copy of the record with
// it encoded.
func (t *Txn) encoded(obj []byte, rec *mvcc.Record) *mvcc.Record {
	t.mu.Lock()
	u, ok := t.unsummed[string(obj)]
	t.mu.Unlock()
	if !ok || u.rec != rec {
		return rec
	}
	c := *rec
	c.Manifest = u.m.Marshal()
	return &c
}

// baseShows is what branch s shows of obj, which the transaction sees
// no version of in the branch itself: the base's version at the branch
// point, unless the branch deleted the key (nil then, and for a space
// that is no branch).
func (t *Txn) baseShows(ctx context.Context, s OpenSpace, obj []byte) (*mvcc.Record, error) {
	b, at := s.Base()
	if b == nil {
		return nil, nil
	}
	if own, err := t.st.hasOwn(ctx, s, obj, t.tx.StartTS); err != nil || own {
		return nil, err
	}
	rec, err := t.st.readOwn(ctx, b, rebase(obj, b.ID()), 0, min(at, t.tx.StartTS))
	if KindOf(err) == NotFound {
		return nil, nil
	}
	return rec, err
}

// baseCondition checks req's IfMatch (a version of the base) or
// IfNoneMatch against what branch s shows of obj at the transaction's
// start.
func (t *Txn) baseCondition(ctx context.Context, s OpenSpace, obj []byte, req *PutRequest) error {
	own, err := t.st.hasOwn(ctx, s, obj, t.tx.StartTS)
	if err != nil {
		return err
	}
	if own {
		if req.IfMatch != 0 {
			return Errorf(PreconditionFailed, "the branch has its own version of %q, not %s", req.Key, tstamp.String(req.IfMatch))
		}
		return nil // IfNoneMatch: the branch's version decides (WriteIf)
	}
	rec, err := t.baseShows(ctx, s, obj)
	if err != nil {
		return err
	}
	if req.IfMatch != 0 && (rec == nil || rec.Version != req.IfMatch) {
		return Errorf(PreconditionFailed, "%q is not at version %s", req.Key, tstamp.String(req.IfMatch))
	}
	if req.IfNoneMatch && rec != nil {
		return Errorf(PreconditionFailed, "%q exists (in the branch's base)", req.Key)
	}
	return nil
}

// writable refuses a write once Commit has begun.
func (t *Txn) writable() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.committing {
		return FromRange(txn.ErrDone)
	}
	return nil
}

// rangeWrite is a byte-range write or append inside the transaction: its
// parent is the key as the transaction sees it (its own earlier write, or
// the version at its snapshot; absent is empty), so many writes to one
// key make one version at commit (VOSD's set of many ranges at once). A
// commit after another transaction wrote the key fails as any write
// conflict does.
func (t *Txn) rangeWrite(ctx context.Context, s OpenSpace, obj []byte, req *PutRequest, body io.Reader) (*mvcc.Record, error) {
	data, err := t.st.rangeData(req, body)
	if err != nil {
		return nil, err
	}
	parent, mine, err := t.tx.Read(ctx, s.Table(), obj)
	if err == nil && parent == nil && !mine {
		parent, err = t.baseShows(ctx, s, obj)
	}
	if err != nil {
		return nil, FromRange(err)
	}
	if parent != nil && parent.DeleteMarker {
		parent = nil
	}
	var pm chunk.Manifest
	t.mu.Lock()
	u, ok := t.unsummed[string(obj)]
	t.mu.Unlock()
	switch {
	case ok && mine && parent == u.rec:
		pm = u.m // this transaction's last write to the key: decoded already
	case parent != nil:
		if pm, err = t.st.manifestOf(ctx, parent, s.Replicas()); err != nil {
			return nil, err
		}
	}
	rec, nm, err := t.st.applyRange(ctx, s, req, pm, parent, data, t.loadPiece(ctx, s.Replicas()), t.stagePiece(ctx, s.Replicas()), false)
	if t.builtOnRemoved(ctx, s, obj, err) {
		return nil, Errorf(TxnConflict, "the version of %s the write builds on was removed meanwhile; run the transaction again", req.Key)
	}
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	if t.unsummed == nil {
		t.unsummed = map[string]unsummed{}
	}
	t.unsummed[string(obj)] = unsummed{rec: rec, m: nm, replicas: s.Replicas()}
	t.mu.Unlock()
	return rec, nil
}

// builtOnRemoved reports whether err, from a byte-range write to obj, is a
// chunk gone because another commit to obj (after this transaction's
// snapshot) removed the version the write builds on and the collector
// took its chunks: a conflict, not a loss.
func (t *Txn) builtOnRemoved(ctx context.Context, s OpenSpace, obj []byte, err error) bool {
	var cm chunkMissing
	if !errors.As(err, &cm) {
		return false
	}
	latest, rerr := t.st.cfg.Ranges.Read(ctx, s.Table(), obj, 0, 0)
	if KindOf(FromRange(rerr)) == NotFound {
		return true
	}
	return rerr == nil && latest.Version > t.tx.StartTS
}

// loadPiece reads a piece for a byte-range write: one this transaction
// staged, or a stored chunk.
func (t *Txn) loadPiece(ctx context.Context, replicas int) loadFunc {
	return func(ref chunk.Ref, dst []byte) ([]byte, error) {
		t.mu.Lock()
		b, ok := t.staged[ref.Hash]
		t.mu.Unlock()
		if ok {
			return b, nil
		}
		return t.st.cfg.Chunks.GetChunk(ctx, ref.Hash, dst, replicas)
	}
}

// stagePiece starts storing a piece of a byte-range write; Commit waits
// for it. The store outlives the write's request (its context's end
// does not cancel it).
func (t *Txn) stagePiece(ctx context.Context, replicas int) func([]byte) (chunk.Ref, error) {
	ctx = context.WithoutCancel(ctx)
	return func(b []byte) (chunk.Ref, error) {
		h, p := t.st.cfg.Chunks.PutChunk(ctx, b, replicas)
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.staged == nil {
			t.staged = map[chunk.Hash][]byte{}
		}
		t.staged[h] = b // WriteAt does not reuse b
		t.puts = append(t.puts, p)
		return chunk.Ref{Hash: h, Size: uint32(len(b))}, nil
	}
}

// Delete deletes key at commit (a delete marker). req.Version must be 0.
func (t *Txn) Delete(ctx context.Context, req *DeleteRequest) error {
	return t.DeleteMarked(ctx, req, nil)
}

// DeleteMarked is Delete whose marker keeps headers (as
// MarkedDeleter.DeleteMarked).
func (t *Txn) DeleteMarked(ctx context.Context, req *DeleteRequest, headers map[string]string) error {
	if req.Version != 0 {
		return Errorf(InvalidArgument, "a transaction deletes keys, not versions")
	}
	if err := validMeta(nil, nil, headers); err != nil {
		return err
	}
	s, obj, release, err := t.st.writeTarget(ctx, req.Space, req.Key, placing{keep: true})
	if errors.Is(err, errUnplaced) {
		return nil // a key a tag space never placed: nothing to delete
	}
	if err != nil {
		return err
	}
	defer release()
	t.touched(s, req.Space)
	if err := t.writable(); err != nil {
		return err
	}
	t.mu.Lock()
	delete(t.unsummed, string(obj))
	t.mu.Unlock()
	return FromRange(t.tx.Write(obj, &mvcc.Record{DeleteMarker: true, Headers: headers}, s.Retention()))
}

// List lists the live keys the transaction sees: the snapshot's, with the
// transaction's own writes in place (their Version is 0). A serializable
// transaction validates the keys listed at commit (a key created in the
// listed span by another transaction meanwhile is not detected).
func (t *Txn) List(ctx context.Context, req *ListRequest) (ListResult, error) {
	if req.AllVersions || req.AsOf != 0 {
		return ListResult{}, Errorf(InvalidArgument, "a transaction lists its snapshot: no version listing, no other time")
	}
	r := *req
	r.AsOf, r.Snapshot = t.tx.StartTS, true
	// (No space is held across List, which holds its own.)
	s, release, err := t.st.cfg.Spaces.Acquire(ctx, req.Space)
	if err != nil {
		return ListResult{}, err
	}
	at := s.ReadAt()
	release()
	if at != 0 {
		r.AsOf = at // a snapshot lists as it shows, outside the read set
		return t.st.List(ctx, &r)
	}
	res, err := t.st.List(ctx, &r)
	if err != nil {
		return ListResult{}, err
	}
	s, release, err = t.st.cfg.Spaces.Acquire(ctx, req.Space)
	if err != nil {
		return ListResult{}, err
	}
	defer release()
	t.touched(s, req.Space)
	_, point := s.Base()
	for _, o := range res.Objects {
		obj, err := t.st.readPlace(ctx, s, o.Key)
		if err != nil {
			return ListResult{}, err
		}
		t.tx.Saw(obj, ownVersion(point, o.Version))
	}
	return t.mergeWrites(s, req, res), nil
}

// mergeWrites puts the transaction's writes of req's span into a page of
// its snapshot's listing.
func (t *Txn) mergeWrites(s OpenSpace, req *ListRequest, res ListResult) ListResult {
	var mine []Info
	for _, w := range t.tx.Writes() {
		id, _, k, err := keys.DecodeObject(w.Obj)
		key := string(k)
		if err != nil || id != s.ID() || !strings.HasPrefix(key, req.Prefix) || key <= req.StartAfter || strings.HasPrefix(key, SystemKeyPrefix) {
			continue
		}
		if res.Truncated && key > res.Next {
			continue // on a later page
		}
		mine = append(mine, objectInfo(req.Space, key, w.Rec))
	}
	if len(mine) == 0 {
		return res
	}
	// (In key order: a hash space's object keys are in bucket order.)
	slices.SortStableFunc(mine, func(a, b Info) int { return strings.Compare(a.Key, b.Key) })
	merged := make([]Info, 0, len(res.Objects)+len(mine))
	i := 0
	for _, m := range mine {
		for i < len(res.Objects) && res.Objects[i].Key < m.Key {
			merged = append(merged, res.Objects[i])
			i++
		}
		if i < len(res.Objects) && res.Objects[i].Key == m.Key {
			i++ // replaced by the transaction's write
		}
		if !m.DeleteMarker {
			merged = append(merged, m)
		}
	}
	merged = append(merged, res.Objects[i:]...)
	if limit := pageLimit(req.Limit); len(merged) > limit {
		merged = merged[:limit]
		res.Truncated = true
	}
	if res.Truncated && len(merged) > 0 {
		res.Next = merged[len(merged)-1].Key
	}
	res.Objects = slices.Clip(merged)
	return res
}

// Commit applies every write of the transaction, or none, and returns its
// commit timestamp (the version of each object it wrote; for a read-only
// transaction, its start). A TxnConflict or TxnAborted failure means the
// transaction did nothing and may run again from its start.
func (t *Txn) Commit(ctx context.Context) (uint64, error) {
	t.rangeMu.Lock() // no byte-range write is half done
	t.mu.Lock()
	if t.committing {
		t.mu.Unlock()
		t.rangeMu.Unlock()
		return 0, FromRange(txn.ErrDone)
	}
	t.committing = true
	pending := t.unsummed
	t.unsummed = nil
	spaces := maps.Clone(t.spaces)
	t.mu.Unlock()
	t.rangeMu.Unlock()
	// The spaces written are held through the commit and their retention
	// taken now: a snapshot made meanwhile either waits for the commit or
	// is seen by it (its mark makes the policy keep-all), so the commit
	// prunes nothing a snapshot shows.
	held := map[uint32]OpenSpace{}
	for _, id := range slices.Sorted(maps.Keys(spaces)) { // one order for every commit
		name := spaces[id]
		s, release, err := t.st.cfg.Spaces.Acquire(ctx, name)
		if err != nil {
			t.tx.Rollback()
			return 0, err
		}
		defer release()
		held[id] = s
	}
	t.tx.Retain(func(obj []byte, ret mvcc.Retention) mvcc.Retention {
		if id, _, _, err := keys.DecodeObject(obj); err == nil && held[id] != nil {
			return held[id].Retention()
		}
		return ret
	})
	// The pieces byte-range writes stored, durable before anything names
	// them.
	if err := t.piecesStored(ctx); err != nil {
		t.tx.Rollback()
		return 0, err
	}
	// The hashes of keys built by byte-range writes, once each.
	for key, u := range pending {
		// Unlike a plain byte-range write, which commits only over the
		// version it started from, the version a transaction's writes
		// share chunks with may have been removed since its snapshot
		// (another commit to the key pruned it): the shared chunks are
		// touched, and one already collected is that conflict.
		err := t.st.summarizeInto(u.rec, u.m, t.loadPiece(ctx, u.replicas))
		if err == nil && u.rec.Manifest != nil {
			err = t.st.touchShared(ctx, u.m)
		}
		var cm chunkMissing
		if errors.As(err, &cm) || KindOf(err) == NotFound {
			_, _, k, _ := keys.DecodeObject([]byte(key))
			err = Errorf(TxnConflict, "the version the writes to %q build on was removed meanwhile; run the transaction again", k)
		}
		if err != nil {
			t.tx.Rollback()
			return 0, err
		}
	}
	// A long transaction's bodies were stored long ago: touched again.
	for _, w := range t.tx.Writes() {
		if _, ranged := pending[string(w.Obj)]; ranged || w.Rec == nil {
			continue // touched above
		}
		if err := t.st.keepIfSlow(ctx, t.began, w.Rec); err != nil {
			t.tx.Rollback()
			return 0, err
		}
	}
	ts, err := t.tx.Commit(ctx)
	if err != nil {
		return 0, t.named(err)
	}
	return ts, nil
}

// named is err, a commit's failure, with the key of a conflict named.
func (t *Txn) named(err error) error {
	var ce *txn.ConflictError
	if !errors.As(err, &ce) {
		return FromRange(err)
	}
	id, _, key, derr := keys.DecodeObject(ce.Obj)
	t.mu.Lock()
	space := t.spaces[id]
	t.mu.Unlock()
	if derr != nil || space == "" {
		return FromRange(err)
	}
	msg := strings.ReplaceAll(ce.Reason, fmt.Sprintf("object %x", ce.Obj), fmt.Sprintf("%s/%s", space, key))
	return &ConflictError{Space: space, Key: string(key), Message: msg}
}

// Rollback ends the transaction without a write. The bodies it stored are
// garbage for the collector.
func (t *Txn) Rollback() { t.tx.Rollback() }

// body opens the byte range [off, off+length) of rec's content (length -1:
// to the end).
func (st *Store) body(ctx context.Context, s OpenSpace, rec *mvcc.Record, off, length int64) (io.ReadCloser, error) {
	if off < 0 || off > rec.Size {
		return nil, Errorf(InvalidRange, "offset %d is outside the object's %d bytes", off, rec.Size)
	}
	if length < 0 || length > rec.Size-off { // no off+length: it may overflow
		length = rec.Size - off
	}
	if rec.Manifest == nil {
		return io.NopCloser(bytes.NewReader(rec.Inline[off : off+length])), nil
	}
	m, err := chunk.UnmarshalManifest(rec.Manifest)
	if err != nil {
		return nil, Errorf(Corrupt, "manifest of version %s: %v", tstamp.String(rec.Version), err)
	}
	return newChunkReader(ctx, st, m.Span(off, length), s.Replicas()), nil
}
