package kv

import (
	"errors"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"github.com/cairn-db/cairn/internal/keys"
	"github.com/cairn-db/cairn/internal/mvcc"
	"github.com/cairn-db/cairn/internal/rangedesc"
	"github.com/cairn-db/cairn/internal/replica"
	"github.com/cairn-db/cairn/internal/storage"
)

// ErrWrongRange is the result of a command whose key is outside the
// range's bounds: the range split and the key moved to another range.
// Nothing was written; the proposer resolves the key's range again.
var ErrWrongRange = errors.New("kv: key outside the range (it split)")

// ErrPreconditionFailed is the result of a PutCmd whose IfMatch, IfNoneMatch
// or IfAbsent condition did not hold at apply time. Nothing was written.
var ErrPreconditionFailed = errors.New("kv: precondition failed")

// Result is what a successful command returns to its proposer.
type Result struct {
	// Rec is the version written (with Parent filled in) or removed.
	Rec *mvcc.Record
	// Pruned lists versions the retention policy removed in the same step;
	// their chunks are no longer referenced by them.
	Pruned []*mvcc.Record
	// Recs are the versions a CommitCmd or OnePhaseCmd wrote, one per key
	// in the command's order (nil for a read lock).
	Recs []*mvcc.Record
	// Status is the transaction's state after a RollbackCmd, CheckTxnCmd
	// or HeartbeatCmd.
	Status mvcc.TxnStatus
	// Next is where an IndexCmd fill stopped (nil: at its end).
	Next []byte
}

// StateMachine applies kv commands to one range. Its state is in the batch
// it is handed; besides that it keeps Cache coherent (see Cache).
type StateMachine struct {
	// Cache, if not nil, is the node's latest-record cache.
	Cache *Cache

	// bounds are the range's (SetBounds); a StateMachine never given
	// bounds takes every key.
	bounds rangedesc.Range

	// written lists the cache updates of the uncommitted apply batch;
	// inBatch indexes it by object (the last update of each).
	written []cacheUpdate
	inBatch map[string]int

	// locks answers the apply step's reads of locks (absent ones, and
	// the values of small ones) without a read of pebble.
	locks lockSet

	// held is the buffers of the last transaction command's held writes,
	// for the next (applyTxn; apply runs on one goroutine).
	held struct {
		writes []deferredWrite
		arena  []byte
	}

	// ix writes the index entries of the versions the commands write.
	ix indexer
	// scratch is where BatchRW.SetRecord encodes a record for the batch,
	// which copies it (apply runs on one goroutine).
	scratch []byte
	// decls are the range's field index declarations, when declsKnown
	// (fieldDecls).
	decls      []FieldDecl
	declsKnown bool
}

type cacheUpdate struct {
	obj    []byte
	latest *mvcc.Record
}

// Committed implements replica.Committer: the batch holding every command
// applied since the last call is now visible in pebble.
func (m *StateMachine) Committed() {
	m.locks.committed()
	for i, u := range m.written {
		m.Cache.end(u.obj, u.latest)
		m.written[i] = cacheUpdate{}
	}
	m.written = m.written[:0]
	clear(m.inBatch)
}

// Spans implements replica.Spanner (see Spans).
func (m *StateMachine) Spans(d rangedesc.Range) []replica.Span { return Spans(d) }

// Spans returns the spans of the node's keyspace holding a range's state:
// the locks, the children index entries and the versions of its object
// keys, and its tag index entries (under its id: IDSpans).
func Spans(d rangedesc.Range) []replica.Span {
	vlo, vhi := keys.VersionSpan(d.Start, d.End)
	llo, lhi := keys.LockSpan(d.Start, d.End)
	plo, phi := keys.ChildSpan(d.Start, d.End)
	ilo, ihi := keys.IndexSpan(d.ID)
	return []replica.Span{{Start: llo, End: lhi}, {Start: plo, End: phi}, {Start: ilo, End: ihi}, {Start: vlo, End: vhi}}
}

// Restored implements replica.Restorer: a range's state was replaced, so
// cached records of its keys may be stale. The cache is the node's, shared
// by every range: only this range's keys are dropped.
func (m *StateMachine) Restored(d rangedesc.Range) {
	m.declsKnown = false
	m.Cache.ClearRange(d.Start, d.End)
	m.locks.reset(m.bounds)
}

// SetBounds implements replica.Bounder.
func (m *StateMachine) SetBounds(d rangedesc.Range) {
	m.bounds, m.declsKnown = d, false
	m.locks.reset(d)
}

func (m *StateMachine) wrote(obj []byte, latest *mvcc.Record) {
	if m.Cache == nil {
		return
	}
	m.Cache.begin(obj)
	// obj may alias the command, which is only valid during Apply.
	u := cacheUpdate{obj: slices.Clone(obj), latest: latest}
	if m.inBatch == nil {
		m.inBatch = make(map[string]int)
	}
	m.inBatch[string(u.obj)] = len(m.written)
	m.written = append(m.written, u)
}

// latest returns obj's latest record as of the commands applied so far, if
// it is known without reading pebble (nil otherwise): from an earlier
// command of this batch, or from the cache (which holds committed state;
// while a batch is being applied, only this batch has pending writes to this
// range's keys). Absence is never cached.
func (m *StateMachine) latest(obj []byte) *mvcc.Record {
	if m.Cache == nil {
		return nil
	}
	if i, ok := m.inBatch[string(obj)]; ok {
		return m.written[i].latest
	}
	rec, _ := m.Cache.Get(obj)
	return rec
}

// Apply implements replica.StateMachine. It returns a *Result or an error;
// on error it has written nothing to b.
func (m *StateMachine) Apply(b *pebble.Batch, cmd []byte) any {
	c, err := decode(cmd)
	if err != nil {
		return err
	}
	if ic, ok := c.(*IndexCmd); ok {
		return m.applyIndex(b, ic)
	}
	decls, err := m.fieldDecls(b)
	if err != nil {
		return err
	}
	m.ix.rangeID, m.ix.decls = m.bounds.ID, decls
	rw := BatchRW{B: b, locks: &m.locks, ix: &m.ix, scratch: &m.scratch}
	switch c := c.(type) {
	case *PutCmd:
		if !m.bounds.ContainsKey(c.Obj) {
			return ErrWrongRange
		}
		// The latest version is needed for the conditions and, under KeepAll,
		// is all mvcc needs: known from this batch or the cache, the write
		// reads nothing from pebble.
		latest := m.latest(c.Obj)
		if latest == nil {
			// A known latest version means no lock (the cache holds no key
			// with one); otherwise a transaction's lock makes the write wait.
			if err := mvcc.CheckUnlocked(rw, c.Obj); err != nil {
				return err
			}
		}
		if c.IfMatch != 0 || c.IfNoneMatch || c.IfAbsent || c.IfNoVersion {
			if latest == nil {
				var err error
				latest, err = mvcc.Latest(rw, c.Obj)
				if err != nil && !errors.Is(err, mvcc.ErrNotFound) {
					return err
				}
			}
			live := latest != nil && !latest.DeleteMarker
			if c.IfMatch != 0 && (!live || latest.Version != c.IfMatch) {
				return ErrPreconditionFailed
			}
			if (c.IfNoneMatch || (c.IfAbsent && c.IfMatch == 0)) && live {
				return ErrPreconditionFailed
			}
			if c.IfNoVersion && latest != nil {
				return ErrPreconditionFailed
			}
		}
		// The version must become the newest: its timestamp was taken before
		// the write was ordered, and a version must never appear below one
		// that a reader has already seen as the latest (ErrStaleVersion: the
		// proposer retries with a new timestamp).
		var newest uint64 // 0: not known, mvcc reads it
		if latest != nil {
			newest = latest.Version
		}
		pruned, err := mvcc.PutNewestOver(rw, c.Obj, c.Rec, newest, c.Retention, c.Rec.Version)
		if err != nil {
			return err
		}
		m.wrote(c.Obj, c.Rec)
		return &Result{Rec: c.Rec, Pruned: pruned}
	case *DeleteVersionCmd:
		if !m.bounds.ContainsKey(c.Obj) {
			return ErrWrongRange
		}
		rec, err := mvcc.DeleteVersion(rw, c.Obj, c.Version)
		if err != nil {
			return err
		}
		m.wrote(c.Obj, nil) // the latest version may have gone: unknown
		return &Result{Rec: rec}
	case *PruneCmd:
		if !m.bounds.ContainsKey(c.Obj) {
			return ErrWrongRange
		}
		pruned, err := mvcc.Prune(rw, c.Obj, c.Retention, c.Now, c.SafePoint)
		if err != nil {
			return err
		}
		// Only older versions go: the latest (and the cache's) stays.
		return &Result{Pruned: pruned}
	case *SetTagsCmd:
		if !m.bounds.ContainsKey(c.Obj) {
			return ErrWrongRange
		}
		rec, err := mvcc.SetTags(rw, c.Obj, c.Version, c.Tags)
		if err != nil {
			return err
		}
		m.wrote(c.Obj, nil) // the latest version may have changed: unknown
		return &Result{Rec: rec}
	case *TrimFeedCmd:
		return m.trimFeed(b, c.Before)
	case *ChildCmd:
		if !m.bounds.ContainsKey(c.Obj) {
			return ErrWrongRange
		}
		if _, _, _, err := keys.DecodeObject(c.Child); err != nil || c.Version == 0 {
			return fmt.Errorf("%w: child entry for %q", ErrBadCommand, c.Child)
		}
		if err := rw.Set(keys.Child(c.Obj, c.Version, c.Child), nil); err != nil {
			return err
		}
		return &Result{}
	case *PrewriteCmd, *CommitCmd, *RollbackCmd, *CheckTxnCmd, *HeartbeatCmd, *OnePhaseCmd, *ResolveCmd:
		return m.applyTxn(rw, c)
	}
	return fmt.Errorf("%w: unknown command %T", ErrBadCommand, c)
}

// BatchRW adapts a pebble indexed batch to mvcc.ReadWriter. Given the
// range's lock set (the apply step's), it answers the reads of locks the
// set knows (absent, or small enough to keep) from it and keeps the set
// current with its writes.
type BatchRW struct {
	B     *pebble.Batch
	locks *lockSet
	// ix, if set, keeps the range's index entries (IndexVersion).
	ix *indexer
	// scratch, if set, is reused by SetRecord for each encoding.
	scratch *[]byte
}

// NewIter implements mvcc.Reader; reads see the batch's own writes.
func (rw BatchRW) NewIter(lower, upper []byte) (mvcc.Iterator, error) {
	return newIter(rw.B, lower, upper)
}

// Get implements mvcc.PointReader; it sees the batch's own writes.
func (rw BatchRW) Get(k []byte) ([]byte, bool, error) {
	if rw.locks != nil && keys.IsLock(k) {
		if v, found, known, err := rw.locks.get(rw.B, k); err != nil || known {
			return v, found, err
		}
	}
	return get(rw.B, k)
}

// Set implements mvcc.Writer.
func (rw BatchRW) Set(k, v []byte) error {
	if rw.locks != nil {
		rw.locks.wrote(k, v, false)
	}
	return rw.B.Set(k, v, nil)
}

// SetRecord implements mvcc.RecordSetter: rec is encoded into the
// scratch buffer, which Set's consumers copy (the batch, the lock set),
// instead of into a new allocation a version.
func (rw BatchRW) SetRecord(k []byte, rec *mvcc.Record) error {
	if rw.scratch == nil {
		return rw.Set(k, rec.Marshal())
	}
	b := rec.AppendMarshal((*rw.scratch)[:0])
	err := rw.Set(k, b)
	if cap(b) > maxScratch {
		b = nil // a large manifest: not kept for the next record
	}
	*rw.scratch = b
	return err
}

// maxScratch bounds the encoding buffer a StateMachine keeps.
const maxScratch = 64 << 10

// Delete implements mvcc.Writer.
func (rw BatchRW) Delete(k []byte) error {
	if rw.locks != nil {
		rw.locks.wrote(k, nil, true)
	}
	return rw.B.Delete(k, nil)
}

// Reader adapts any pebble reader (the DB, a snapshot) to mvcc.Reader.
type Reader struct{ R pebble.Reader }

// NewIter implements mvcc.Reader.
func (r Reader) NewIter(lower, upper []byte) (mvcc.Iterator, error) {
	return newIter(r.R, lower, upper)
}

// NewIterSince implements mvcc.SinceReader: the iterator skips the blocks
// and tables that hold no version newer than since.
func (r Reader) NewIterSince(lower, upper []byte, since uint64) (mvcc.Iterator, error) {
	it, err := r.R.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper, UseL6Filters: true,
		PointKeyFilters: []pebble.BlockPropertyFilter{storage.SinceFilter(since)}})
	if err != nil {
		return nil, err
	}
	return it, nil
}

// Get implements mvcc.PointReader.
func (r Reader) Get(k []byte) ([]byte, bool, error) { return get(r.R, k) }

// get reads one key with a prefix seek rather than pebble's Get, which
// skips the bloom filters of the last level, where most tables are: the
// keys read this way (locks, mostly) are usually absent, and the filters
// spare reading a data block of every table for each.
func get(r pebble.Reader, k []byte) (_ []byte, _ bool, err error) {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: k, UpperBound: append(k[:len(k):len(k)], 0), UseL6Filters: true})
	if err != nil {
		return nil, false, err
	}
	defer func() {
		if cerr := it.Close(); err == nil {
			err = cerr
		}
	}()
	if !it.SeekPrefixGE(k) {
		return nil, false, it.Error()
	}
	out := slices.Clone(it.Value())
	if out == nil {
		out = []byte{}
	}
	return out, true, nil
}

// newIter returns an iterator over [lower, upper). Its prefix seeks
// (mvcc's seeks among one object's versions) consult the bloom filters of
// every level: they mostly look for objects a table does not hold.
func newIter(r pebble.Reader, lower, upper []byte) (mvcc.Iterator, error) {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper, UseL6Filters: true})
	if err != nil {
		return nil, err // an untyped nil, not a nil *pebble.Iterator
	}
	return it, nil
}
