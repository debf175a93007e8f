package replica

import (
	"errors"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/cairn-db/cairn/internal/rangedesc"
)

// Bootstrap position of a new group: every replica of a range bootstrapped
// from the same rangedesc.Range starts with the same truncated log ending at
// (bootstrapIndex, bootstrapTerm), so the group needs no initial entries.
const (
	bootstrapIndex = 5
	bootstrapTerm  = 5
)

// raftStorage is raft.Storage over the node's pebble instances for one
// range: its log entries in the raft log's (Engine.LogDB), the rest of its
// raft state (hard state, ConfState, applied index, truncation) in the
// state store beside what it applied. pebble is the source of truth; the
// fields below mirror what is durable (or committed to pebble) so raft's
// frequent Term/LastIndex calls stay in memory.
//
// The two instances are written apart, so what each holds after a crash
// is reconciled by order, not by one batch: entries are synced before the
// hard state that commits them is written; a truncation is synced in the
// state store before its entries leave the log (the applied index then
// never falls below it); a split is synced before the new range's entries
// can reach the log (they must not outlive the state that makes the
// range); a snapshot's install first drops the log's
// entries past its index (synced), then ingests its state; a removed
// range's entries go (synced) before RemoveReplica returns, a group
// bootstrapped fresh (AddReplica, a split) first drops any its id left,
// and entries of a range whose state is gone are swept at open
// (sweepLogs). A load refuses a log that does not go on from the
// truncation without a gap.
//
// Only the Store's loop goroutine touches a raftStorage after AddReplica has
// handed it to the loop.
type raftStorage struct {
	db     *pebble.DB // the state store
	log    *pebble.DB // the raft log (entries only)
	prefix []byte

	hs         *raftpb.HardState
	cs         *raftpb.ConfState // as of applied
	truncIndex uint64            // last entry removed from the log (0: none)
	truncTerm  uint64
	lastIndex  uint64 // truncIndex when the log is empty; durable entries only
	applied    uint64
	// written is the last index written or in a batch handed to the
	// writer (persist.go): where a conflicting append's old tail ends.
	written uint64

	// As loaded, for AddReplica: the range's key bounds if persisted (at
	// bootstrap, by a split, or with a snapshot), and its last split. The
	// Replica's descriptor is the live copy.
	hasBounds  bool
	start, end []byte
	lastSplit  rangedesc.Range
	// merge is the range's merge state (loop-owned after AddReplica).
	merge MergeState
	// tombstone: the range has no state but was merged into another here.
	tombstone bool

	cache entryCache

	// scratch holds setProto's key and value until the batch copies them
	// (the loop owns the raftStorage, so one buffer serves every write).
	scratch []byte
}

// maxScratch bounds the buffer a raftStorage keeps between writes.
const maxScratch = 64 << 10

var _ raft.Storage = (*raftStorage)(nil)

// loadRaftStorage reads a range's persisted raft state. found is false when
// the range has no hard state yet (it was never bootstrapped).
// It reads one consistent snapshot of each instance: the state first, then
// the log (whose entries at or below the truncation are ignored: their
// removal follows it).
func loadRaftStorage(db, log *pebble.DB, rangeID uint64) (s *raftStorage, found bool, err error) {
	snap := db.NewSnapshot()
	defer snap.Close()
	s = &raftStorage{db: db, log: log, prefix: rangePrefix(rangeID), cs: &raftpb.ConfState{}, cache: entryCache{maxEnts: 1024, maxBytes: 8 << 20}}
	// A tombstone wins over any state: the range was merged away here.
	if _, s.tombstone, err = s.getUint64s(snap, suffixTombstone, 1); err != nil || s.tombstone {
		return s, false, err
	}
	hs := &raftpb.HardState{}
	if found, err = s.getProto(snap, suffixHardState, hs); err != nil || !found {
		return s, false, err
	}
	s.hs = hs
	if _, err := s.getProto(snap, suffixConfState, s.cs); err != nil {
		return nil, false, err
	}
	if xs, ok, err := s.getUint64s(snap, suffixTruncated, 2); err != nil {
		return nil, false, err
	} else if ok {
		s.truncIndex, s.truncTerm = xs[0], xs[1]
	}
	if xs, ok, err := s.getUint64s(snap, suffixApplied, 1); err != nil {
		return nil, false, err
	} else if ok {
		s.applied = xs[0]
	}
	err = errors.Join(
		s.getOptional(snap, suffixBounds, "bounds", func(v []byte) (err error) {
			s.start, s.end, err = decodeBounds(v)
			s.hasBounds = err == nil
			return err
		}),
		s.getOptional(snap, suffixSplit, "last split", func(v []byte) (err error) {
			s.lastSplit, err = decodeSplit(v)
			return err
		}),
		s.getOptional(snap, suffixMerge, "merge state", func(v []byte) (err error) {
			s.merge, err = decodeMerge(v)
			return err
		}),
	)
	if err != nil {
		return nil, false, err
	}
	s.lastIndex = s.truncIndex
	it, err := log.NewIter(&pebble.IterOptions{LowerBound: logKey(s.prefix, s.truncIndex+1), UpperBound: stateKey(s.prefix, suffixLog+1)})
	if err != nil {
		return nil, false, err
	}
	if it.First() {
		// The log goes on from the truncation without a gap.
		if idx, ok := logIndex(s.prefix, it.Key()); !ok || idx != s.truncIndex+1 {
			_ = it.Close()
			return nil, false, fmt.Errorf("%w: range %x: first log entry %x after the truncation at %d", ErrCorrupt, s.prefix, it.Key(), s.truncIndex)
		}
	}
	if it.Last() {
		idx, ok := logIndex(s.prefix, it.Key())
		if !ok {
			_ = it.Close()
			return nil, false, fmt.Errorf("%w: bad log key %x", ErrCorrupt, it.Key())
		}
		s.lastIndex = idx
	}
	if err := it.Close(); err != nil {
		return nil, false, err
	}
	s.written = s.lastIndex
	if s.applied > s.hs.GetCommit() {
		// The hard state and the applied index are written apart (the
		// log by the writer, applies by the loop, persist.go): an apply
		// batch may reach the disk before the hard state with the commit
		// index it applied up to. An applied entry is committed.
		s.hs.Commit = new(s.applied)
	}
	if s.lastIndex < s.truncIndex || s.applied < s.truncIndex || s.hs.GetCommit() > s.lastIndex {
		return nil, false, fmt.Errorf("%w: range %x: truncated %d, applied %d, commit %d, last %d",
			ErrCorrupt, s.prefix, s.truncIndex, s.applied, s.hs.GetCommit(), s.lastIndex)
	}
	return s, true, nil
}

// bootstrap writes the initial state of a new group with the given voters
// and key bounds into b: an empty log truncated at (bootstrapIndex,
// bootstrapTerm), which is also the commit and applied index. A range made
// by a split starts the same way on every replica of its parent; hs, if
// not nil, is the hard state of an uninitialized replica already here
// (its term and vote are kept if newer).
func (s *raftStorage) bootstrap(b *pebble.Batch, voters []uint64, start, end []byte, hs *raftpb.HardState) error {
	s.hs = &raftpb.HardState{Term: new(uint64(bootstrapTerm)), Commit: new(uint64(bootstrapIndex))}
	if hs.GetTerm() > bootstrapTerm {
		s.hs.Term, s.hs.Vote = new(hs.GetTerm()), new(hs.GetVote())
	}
	s.cs = &raftpb.ConfState{Voters: append([]uint64(nil), voters...)}
	s.truncIndex, s.truncTerm = bootstrapIndex, bootstrapTerm
	s.lastIndex, s.applied, s.written = bootstrapIndex, bootstrapIndex, bootstrapIndex
	if start != nil || end != nil {
		if err := b.Set(stateKey(s.prefix, suffixBounds), encodeBounds(start, end), nil); err != nil {
			return err
		}
	}
	if err := s.setProto(b, suffixHardState, s.hs); err != nil {
		return err
	}
	if err := s.setProto(b, suffixConfState, s.cs); err != nil {
		return err
	}
	if err := b.Set(stateKey(s.prefix, suffixTruncated), encodeUint64s(s.truncIndex, s.truncTerm), nil); err != nil {
		return err
	}
	return b.Set(stateKey(s.prefix, suffixApplied), encodeUint64s(s.applied), nil)
}

// InitialState implements raft.Storage.
func (s *raftStorage) InitialState() (*raftpb.HardState, *raftpb.ConfState, error) {
	return proto.CloneOf(s.hs), proto.CloneOf(s.cs), nil
}

// Entries implements raft.Storage.
func (s *raftStorage) Entries(lo, hi, maxSize uint64) ([]*raftpb.Entry, error) {
	if lo <= s.truncIndex {
		return nil, raft.ErrCompacted
	}
	if hi > s.lastIndex+1 || lo > hi {
		return nil, raft.ErrUnavailable
	}
	if lo == hi {
		return nil, nil
	}
	if ents, ok := s.cache.get(lo, hi); ok {
		return limitSize(ents, maxSize), nil
	}
	it, err := s.log.NewIter(&pebble.IterOptions{LowerBound: logKey(s.prefix, lo), UpperBound: logKey(s.prefix, hi)})
	if err != nil {
		return nil, err
	}
	var ents []*raftpb.Entry
	var size uint64
	want := lo
	for ok := it.First(); ok; ok = it.Next() {
		e, err := decodeEntry(it.Value())
		if err != nil {
			_ = it.Close()
			return nil, err
		}
		if e.GetIndex() != want {
			_ = it.Close()
			return nil, fmt.Errorf("%w: log entry %d where %d was expected", ErrCorrupt, e.GetIndex(), want)
		}
		size += uint64(proto.Size(e))
		if len(ents) > 0 && size > maxSize {
			break
		}
		ents = append(ents, e)
		want++
	}
	if err := it.Close(); err != nil {
		return nil, err
	}
	if len(ents) == 0 {
		return nil, raft.ErrUnavailable
	}
	return ents, nil
}

func limitSize(ents []*raftpb.Entry, maxSize uint64) []*raftpb.Entry {
	var size uint64
	for i, e := range ents {
		size += uint64(proto.Size(e))
		if i > 0 && size > maxSize {
			return ents[:i:i]
		}
	}
	return ents[:len(ents):len(ents)]
}

// Term implements raft.Storage.
func (s *raftStorage) Term(i uint64) (uint64, error) {
	switch {
	case i == s.truncIndex:
		return s.truncTerm, nil
	case i < s.truncIndex:
		return 0, raft.ErrCompacted
	case i > s.lastIndex:
		return 0, raft.ErrUnavailable
	}
	if t, ok := s.cache.term(i); ok {
		return t, nil
	}
	v, closer, err := s.log.Get(logKey(s.prefix, i))
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, fmt.Errorf("%w: log entry %d missing", ErrCorrupt, i)
	} else if err != nil {
		return 0, err
	}
	defer closer.Close()
	e, err := decodeEntry(v)
	if err != nil {
		return 0, err
	}
	return e.GetTerm(), nil
}

// LastIndex implements raft.Storage.
func (s *raftStorage) LastIndex() (uint64, error) { return s.lastIndex, nil }

// FirstIndex implements raft.Storage.
func (s *raftStorage) FirstIndex() (uint64, error) { return s.truncIndex + 1, nil }

// Snapshot implements raft.Storage. It returns the metadata of the applied
// state (index, term and ConfState as of the applied index) with empty Data:
// range state is not streamed yet, so the Store never sends it (see doc.go).
func (s *raftStorage) Snapshot() (*raftpb.Snapshot, error) {
	term, err := s.Term(s.applied)
	if err != nil {
		return nil, raft.ErrSnapshotTemporarilyUnavailable
	}
	return &raftpb.Snapshot{Metadata: &raftpb.SnapshotMetadata{
		Index:     new(s.applied),
		Term:      new(term),
		ConfState: proto.CloneOf(s.cs),
	}}, nil
}

// append writes ents (consecutive, from raft) into b, a batch of the raft
// log's instance, removing any old tail they replace (written so far, or
// earlier in b). Call appended after b commits.
func (s *raftStorage) append(b *pebble.Batch, ents []*raftpb.Entry) error {
	if len(ents) == 0 {
		return nil
	}
	for _, e := range ents {
		if err := s.setProto(b, suffixLog, e); err != nil {
			return err
		}
	}
	last, written := ents[len(ents)-1].GetIndex(), s.written
	s.written = last
	if last < written {
		return b.DeleteRange(logKey(s.prefix, last+1), logKey(s.prefix, written+1), nil)
	}
	return nil
}

func (s *raftStorage) appended(ents []*raftpb.Entry) {
	if len(ents) == 0 {
		return
	}
	s.lastIndex = ents[len(ents)-1].GetIndex()
	s.cache.append(ents)
}

func (s *raftStorage) setHardState(b *pebble.Batch, hs *raftpb.HardState) error {
	s.hs = proto.CloneOf(hs)
	return s.setProto(b, suffixHardState, hs)
}

// truncate writes into b, a batch of the state store, the new truncated
// state: the log is truncated up to and including index. The batch must
// be synced (the applied index it carries must never read below the
// truncation after a crash); call truncated after it commits.
func (s *raftStorage) truncate(b *pebble.Batch, index uint64) (term uint64, err error) {
	term, err = s.Term(index)
	if err != nil {
		return 0, err
	}
	return term, b.Set(stateKey(s.prefix, suffixTruncated), encodeUint64s(index, term), nil)
}

// truncated removes the entries up to index from the log (unsynced: on
// load, entries at or below the truncation are ignored) and from memory.
func (s *raftStorage) truncated(index, term uint64) error {
	s.truncIndex, s.truncTerm = index, term
	s.cache.dropBelow(index + 1)
	return s.log.DeleteRange(logKey(s.prefix, 0), logKey(s.prefix, index+1), pebble.NoSync)
}

func (s *raftStorage) setProto(b *pebble.Batch, suffix byte, m proto.Message) error {
	// The key, then the value as encodeValue frames it, in one buffer.
	var buf []byte
	if e, ok := m.(*raftpb.Entry); ok {
		buf = appendLogKey(s.scratch[:0], s.prefix, e.GetIndex())
	} else {
		buf = appendStateKey(s.scratch[:0], s.prefix, suffix)
	}
	klen := len(buf)
	buf, err := proto.MarshalOptions{}.MarshalAppend(appendValueHeader(buf), m)
	if err != nil {
		return err
	}
	buf = sealValue(buf, klen)
	if cap(buf) <= maxScratch {
		s.scratch = buf // (a large entry's buffer is not kept for every range)
	}
	return b.Set(buf[:klen], buf[klen:], nil)
}

func (s *raftStorage) getProto(rd pebble.Reader, suffix byte, m proto.Message) (bool, error) {
	v, closer, err := rd.Get(stateKey(s.prefix, suffix))
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	defer closer.Close()
	p, err := decodeValue(v)
	if err != nil {
		return false, fmt.Errorf("key %x: %w", stateKey(s.prefix, suffix), err)
	}
	if err := proto.Unmarshal(p, m); err != nil {
		return false, fmt.Errorf("%w: key %x: %v", ErrCorrupt, stateKey(s.prefix, suffix), err)
	}
	return true, nil
}

// getOptional decodes the value under suffix, if there is one, with
// decode (what names it in errors).
func (s *raftStorage) getOptional(rd pebble.Reader, suffix byte, what string, decode func(v []byte) error) error {
	v, closer, err := rd.Get(stateKey(s.prefix, suffix))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil
	} else if err != nil {
		return err
	}
	defer closer.Close()
	if err := decode(v); err != nil {
		return fmt.Errorf("range %x %s: %w", s.prefix, what, err)
	}
	return nil
}

func (s *raftStorage) getUint64s(rd pebble.Reader, suffix byte, n int) ([]uint64, bool, error) {
	v, closer, err := rd.Get(stateKey(s.prefix, suffix))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	} else if err != nil {
		return nil, false, err
	}
	defer closer.Close()
	xs, err := decodeUint64s(v, n)
	if err != nil {
		return nil, false, fmt.Errorf("key %x: %w", stateKey(s.prefix, suffix), err)
	}
	return xs, true, nil
}

// decodeEntry decodes a log value. The result does not alias v.
func decodeEntry(v []byte) (*raftpb.Entry, error) {
	p, err := decodeValue(v)
	if err != nil {
		return nil, err
	}
	e := &raftpb.Entry{}
	if err := proto.Unmarshal(p, e); err != nil {
		return nil, fmt.Errorf("%w: log entry: %v", ErrCorrupt, err)
	}
	return e, nil
}

// entryCache holds the most recent log entries (consecutive indexes), so
// followers' acks and the apply of just-written entries do not read pebble.
type entryCache struct {
	maxEnts  int
	maxBytes int
	first    uint64
	ents     []*raftpb.Entry
	bytes    int
}

func (c *entryCache) append(ents []*raftpb.Entry) {
	lo := ents[0].GetIndex()
	switch {
	case len(c.ents) == 0 || lo < c.first || lo > c.first+uint64(len(c.ents)):
		c.ents, c.bytes, c.first = nil, 0, lo
	case lo < c.first+uint64(len(c.ents)):
		for _, e := range c.ents[lo-c.first:] {
			c.bytes -= proto.Size(e)
		}
		c.ents = c.ents[:lo-c.first]
	}
	for _, e := range ents {
		c.ents = append(c.ents, e)
		c.bytes += proto.Size(e)
	}
	for len(c.ents) > 1 && (len(c.ents) > c.maxEnts || c.bytes > c.maxBytes) {
		c.bytes -= proto.Size(c.ents[0])
		c.ents[0] = nil
		c.ents = c.ents[1:]
		c.first++
	}
}

// get returns entries [lo, hi) if the cache holds them all. The slice is
// a copy: raft hands it on in messages that the transport encodes on its
// own goroutine, while append truncates, overwrites and evicts the
// cache's own slots (the entries themselves are never modified).
func (c *entryCache) get(lo, hi uint64) ([]*raftpb.Entry, bool) {
	if len(c.ents) == 0 || lo < c.first || hi > c.first+uint64(len(c.ents)) {
		return nil, false
	}
	return slices.Clone(c.ents[lo-c.first : hi-c.first]), true
}

func (c *entryCache) term(i uint64) (uint64, bool) {
	if len(c.ents) == 0 || i < c.first || i >= c.first+uint64(len(c.ents)) {
		return 0, false
	}
	return c.ents[i-c.first].GetTerm(), true
}

func (c *entryCache) dropBelow(i uint64) {
	for len(c.ents) > 0 && c.first < i {
		c.bytes -= proto.Size(c.ents[0])
		c.ents[0] = nil
		c.ents = c.ents[1:]
		c.first++
	}
}
