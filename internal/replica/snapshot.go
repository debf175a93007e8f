package replica

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/cairn-db/cairn/internal/keys"
	"github.com/cairn-db/cairn/internal/rangedesc"
)

// Span is [Start, End) of the node's keyspace. End is never nil.
type Span struct{ Start, End []byte }

// Spanner is implemented by a StateMachine whose state can be sent to
// another replica: Spans returns the spans of the node's keyspace that hold
// all of the range's replicated state, sorted and not overlapping. A range
// whose StateMachine is not a Spanner never sends snapshots.
type Spanner interface {
	Spans(d rangedesc.Range) []Span
}

// Restorer is implemented by a StateMachine that keeps state outside
// pebble (a cache, say). Restored is called on the loop, with the range's
// descriptor, after a snapshot replaced the range's state or after the
// replica was removed.
type Restorer interface {
	Restored(d rangedesc.Range)
}

// SnapshotTransport is implemented by a Transport that can stream
// snapshots; the Store sends none over a Transport that is not one.
type SnapshotTransport interface {
	// SendSnapshot sends m, a MsgSnap whose Snapshot carries the metadata
	// but no Data, and the SSTs holding the range's state (one per span of
	// the range, in order) to node m.Msg.To, and returns once the receiver
	// has called Store.ReceiveSnapshot and it returned. It is called off
	// the loop, one call per (range, peer) at a time (raft sends a peer no
	// other snapshot until this one is reported).
	SendSnapshot(ctx context.Context, m Message, ssts []SnapshotSST) error
}

// SnapshotSST is one SST of an outgoing snapshot. It is built into a file
// on the sender's disk, not in memory, so sending a big range costs a
// stream's buffers: Size is its length in bytes, and Open reads it from
// the start (the caller closes the reader). The file goes once
// SendSnapshot has returned.
type SnapshotSST struct {
	Size int64
	Open func() (io.ReadCloser, error)
}

// MaxSnapshotBytes bounds the SSTs of one incoming snapshot.
const MaxSnapshotBytes = 16 << 30

// ErrSnapshotDeclined is returned by ReceiveSnapshot when raft did not take
// the snapshot: the replica already has that state, or the message is from
// an old term. Nothing was changed.
var ErrSnapshotDeclined = errors.New("replica: snapshot declined")

// snapshotDir holds incoming snapshot files under the engine's directory
// until they are ingested; NewStore empties it.
const snapshotDir = "snapshots"

// pendingSnap is a received snapshot waiting for the loop to install it.
type pendingSnap struct {
	rangeID uint64
	paths   []string
	done    chan error // capacity 1
	// The range's bounds as of the snapshot (none: both nil), and its
	// merge state.
	start, end []byte
	merge      MergeState
}

func (p *pendingSnap) bounded() bool { return p.start != nil || p.end != nil }

// The sending side. Raft asks for a snapshot by emitting a MsgSnap built
// from raftStorage.Snapshot (metadata only). The loop answers it in the
// send step of the cycle, before the cycle's apply: pebble then holds
// exactly the state at r.st.applied, so a pebble snapshot taken there
// matches metadata rewritten to (applied, its term, the ConfState as of
// applied). That index may be above the one raft asked for, which raft
// accepts (the follower's progress moves to it). The SSTs are built and
// sent off the loop; the result goes back to raft as ReportSnapshot.
func (s *Store) startSnapshot(r *Replica, m *raftpb.Message) bool {
	tr, ok := s.opts.Transport.(SnapshotTransport)
	sp, ok2 := r.sm.(Spanner)
	if !ok || !ok2 {
		return false
	}
	// Raft sends a peer no other snapshot until this one is reported
	// (the peer's progress is paused in StateSnapshot).
	to := m.GetTo()
	term, err := r.st.Term(r.st.applied)
	if err != nil {
		s.log.Warn("snapshot: no term for the applied index", "range", r.rangeID, "err", err)
		return false
	}
	out := proto.CloneOf(m)
	d := r.Descriptor()
	out.Snapshot = &raftpb.Snapshot{Metadata: &raftpb.SnapshotMetadata{
		Index: new(r.st.applied), Term: new(term), ConfState: proto.CloneOf(r.st.cs),
	}}
	// The bounds and the merge state travel as the snapshot's data:
	// they are part of the range's state and change by splits and merges.
	out.Snapshot.Data = encodeSnapData(d, r.st.merge)
	spans := sp.Spans(d)
	snap := s.db.NewSnapshot()
	wo := s.opts.Engine.WriterOptions()
	token := s.nextID.Add(1)
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		var paths []string
		for i := range spans {
			paths = append(paths, s.outSnapPath(r.rangeID, token, i))
		}
		defer s.removeFiles(paths)
		ssts, err := s.buildSSTs(snap, spans, paths, wo)
		_ = snap.Close()
		if err == nil {
			err = tr.SendSnapshot(s.ctx, Message{RangeID: r.rangeID, Msg: out}, ssts)
		}
		if err != nil && !errors.Is(err, context.Canceled) {
			s.log.Info("snapshot not delivered", "range", r.rangeID, "to", to, "index", out.Snapshot.GetMetadata().GetIndex(), "err", err)
		}
		s.do(func() {
			status := raft.SnapshotFinish
			if err != nil {
				status = raft.SnapshotFailure
			}
			r.rn.ReportSnapshot(to, status)
		})
	}()
	return true
}

// buildSSTs writes one SST per span into the file at the same index of
// paths: a range deletion of the whole span (the receiver's old state
// there goes) and every key in it as of rd.
func (s *Store) buildSSTs(rd pebble.Reader, spans []Span, paths []string, wo sstable.WriterOptions) ([]SnapshotSST, error) {
	fs := s.opts.Engine.FS()
	if len(paths) > 0 {
		if err := fs.MkdirAll(fs.PathDir(paths[0]), 0o755); err != nil {
			return nil, err
		}
	}
	out := make([]SnapshotSST, 0, len(spans))
	for i, sp := range spans {
		f, err := fs.Create(paths[i], "")
		if err != nil {
			return nil, err
		}
		// The writer owns f from here: Close finishes (syncs and closes)
		// it, or aborts it on an error.
		sw := sstable.NewWriter(objstorageprovider.NewFileWritable(f), wo)
		err = sw.DeleteRange(sp.Start, sp.End)
		if err == nil {
			err = copySpan(rd, sp, sw)
		}
		if cerr := sw.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("replica: build snapshot SST of [%x, %x): %w", sp.Start, sp.End, err)
		}
		st, err := fs.Stat(paths[i])
		if err != nil {
			return nil, err
		}
		path := paths[i]
		out = append(out, SnapshotSST{Size: st.Size(), Open: func() (io.ReadCloser, error) { return fs.Open(path) }})
	}
	return out, nil
}

func copySpan(rd pebble.Reader, sp Span, w *sstable.Writer) error {
	it, err := rd.NewIter(&pebble.IterOptions{LowerBound: sp.Start, UpperBound: sp.End})
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return err
		}
		if err := w.Set(it.Key(), v); err != nil {
			_ = it.Close()
			return err
		}
	}
	return it.Close()
}

// The receiving side.

// ReceiveSnapshot installs a snapshot of range m.RangeID sent by its
// leader: m is the MsgSnap (metadata, no Data) and src yields the SSTs,
// len(sizes) of them, sizes[i] bytes each, one per span of the range. It
// writes them to files, checks them (block checksums, and every key inside
// its span), hands the message to raft and waits until the loop has
// ingested them together with the new raft state, atomically. It returns
// ErrSnapshotDeclined if raft did not want the snapshot, ErrRangeNotFound
// if the range has no replica here.
func (s *Store) ReceiveSnapshot(ctx context.Context, m Message, sizes []int64, src io.Reader) error {
	if m.Msg.GetType() != raftpb.MsgSnap || m.Msg.GetSnapshot().GetMetadata().GetIndex() == 0 {
		return errors.New("replica: ReceiveSnapshot of a message that is not a snapshot")
	}
	s.mu.Lock()
	r, closed := s.mu.replicas[m.RangeID], s.mu.closed
	s.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if r == nil {
		return fmt.Errorf("%w: range %d on node %d", ErrRangeNotFound, m.RangeID, s.opts.NodeID)
	}
	sp, ok := r.sm.(Spanner)
	if !ok {
		return fmt.Errorf("replica: range %d cannot take snapshots (its state machine has no spans)", m.RangeID)
	}
	d := r.Descriptor()
	p := &pendingSnap{rangeID: m.RangeID, done: make(chan error, 1)}
	if data := m.Msg.GetSnapshot().GetData(); len(data) > 0 {
		start, end, hasBounds, ms, err := decodeSnapData(data)
		if err != nil {
			return fmt.Errorf("replica: snapshot of range %d: %w", m.RangeID, err)
		}
		if hasBounds {
			d.Start, d.End = start, end
		}
		p.merge = ms
	}
	p.start, p.end = d.Start, d.End
	spans := sp.Spans(d)
	if len(sizes) != len(spans) {
		return fmt.Errorf("replica: snapshot of range %d has %d SSTs, want %d", m.RangeID, len(sizes), len(spans))
	}
	var total int64
	for _, n := range sizes {
		if n <= 0 || n > MaxSnapshotBytes-total {
			return fmt.Errorf("replica: snapshot of range %d: bad SST sizes %v (at most %d bytes in all)", m.RangeID, sizes, int64(MaxSnapshotBytes))
		}
		total += n
	}
	token := s.nextID.Add(1)
	defer func() { s.removeFiles(p.paths) }() // ingest links them; the originals go
	for i, n := range sizes {
		path := s.snapPath(m.RangeID, token, i)
		p.paths = append(p.paths, path)
		if err := s.writeFile(path, io.LimitReader(src, n), n); err != nil {
			return fmt.Errorf("replica: snapshot of range %d: receive SST %d: %w", m.RangeID, i, err)
		}
		if err := s.checkSST(ctx, path, spans[i]); err != nil {
			return fmt.Errorf("replica: snapshot of range %d: SST %d: %w", m.RangeID, i, err)
		}
	}
	msg := proto.CloneOf(m.Msg)
	msg.Snapshot.Data = binary.BigEndian.AppendUint64(nil, token)
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	if s.mu.snaps == nil {
		s.mu.snaps = map[uint64]*pendingSnap{}
	}
	s.mu.snaps[token] = p
	s.mu.msgs = append(s.mu.msgs, Message{RangeID: m.RangeID, Msg: msg})
	s.mu.Unlock()
	s.signal()
	select {
	case err := <-p.done:
		return err
	case <-s.done:
		s.mu.Lock()
		delete(s.mu.snaps, token)
		s.mu.Unlock()
		return ErrClosed
	}
}

// outSnapPath is where SST i of an outgoing snapshot of range rangeID is
// built; NewStore empties the directory of any left by a crash.
func (s *Store) outSnapPath(rangeID, token uint64, i int) string {
	fs := s.opts.Engine.FS()
	return fs.PathJoin(s.opts.Engine.Dir(), snapshotDir, fmt.Sprintf("out-r%d-%016x-%d.sst", rangeID, token, i))
}

func (s *Store) snapPath(rangeID, token uint64, i int) string {
	fs := s.opts.Engine.FS()
	return fs.PathJoin(s.opts.Engine.Dir(), snapshotDir, fmt.Sprintf("r%d-%016x-%d.sst", rangeID, token, i))
}

// writeFile writes exactly n bytes of src to path and syncs it.
func (s *Store) writeFile(path string, src io.Reader, n int64) error {
	fs := s.opts.Engine.FS()
	if err := fs.MkdirAll(fs.PathDir(path), 0o755); err != nil {
		return err
	}
	f, err := fs.Create(path, "")
	if err != nil {
		return err
	}
	got, err := io.Copy(f, src)
	if err == nil && got != n {
		err = fmt.Errorf("stream ended after %d of %d bytes", got, n)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (s *Store) removeFiles(paths []string) {
	fs := s.opts.Engine.FS()
	for _, p := range paths {
		_ = fs.Remove(p)
	}
}

// checkSST reads the whole SST at path, which verifies its block checksums,
// and checks that it holds only point sets and range deletions inside sp.
func (s *Store) checkSST(ctx context.Context, path string, sp Span) error {
	f, err := s.opts.Engine.FS().Open(path)
	if err != nil {
		return err
	}
	readable, err := sstable.NewSimpleReadable(f)
	if err != nil {
		_ = f.Close()
		return err
	}
	rd, err := sstable.NewReader(ctx, readable, s.opts.Engine.ReaderOptions())
	if err != nil {
		_ = readable.Close()
		return err
	}
	defer rd.Close()
	in := func(k []byte) bool { return bytes.Compare(k, sp.Start) >= 0 && bytes.Compare(k, sp.End) < 0 }
	it, err := rd.NewIter(sstable.NoTransforms, nil, nil, sstable.AssertNoBlobHandles)
	if err != nil {
		return err
	}
	for kv := it.First(); kv != nil; kv = it.Next() {
		if kv.Kind() != pebble.InternalKeyKindSet || !in(kv.K.UserKey) {
			_ = it.Close()
			return fmt.Errorf("%w: key %x (kind %v) outside [%x, %x) or not a set", ErrCorrupt, kv.K.UserKey, kv.Kind(), sp.Start, sp.End)
		}
		if _, _, err := kv.Value(nil); err != nil {
			_ = it.Close()
			return err
		}
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return err
	}
	dels, err := rd.NewRawRangeDelIter(ctx, sstable.NoFragmentTransforms, sstable.NoReadEnv)
	if err != nil {
		return err
	}
	if dels != nil {
		defer dels.Close()
		span, err := dels.First()
		for ; span != nil && err == nil; span, err = dels.Next() {
			if !in(span.Start) || bytes.Compare(span.End, sp.End) > 0 {
				return fmt.Errorf("%w: range deletion [%x, %x) outside [%x, %x)", ErrCorrupt, span.Start, span.End, sp.Start, sp.End)
			}
		}
		if err != nil {
			return err
		}
	}
	keys, err := rd.NewRawRangeKeyIter(ctx, sstable.NoFragmentTransforms, sstable.NoReadEnv)
	if err != nil {
		return err
	}
	if keys != nil {
		keys.Close()
		return fmt.Errorf("%w: range keys in a snapshot", ErrCorrupt)
	}
	return nil
}

// installSnapshot runs on the loop for a Ready carrying a snapshot: it
// ingests the received SSTs and one more holding the range's new raft
// state (truncated at the snapshot, applied and committed up to it; the
// old log goes) in one atomic ingestion, then updates the in-memory mirror.
func (s *Store) installSnapshot(r *Replica, snap *raftpb.Snapshot, hs *raftpb.HardState) error {
	if len(snap.GetData()) != 8 {
		return fmt.Errorf("%w: snapshot data of %d bytes", ErrCorrupt, len(snap.GetData()))
	}
	token := binary.BigEndian.Uint64(snap.GetData())
	s.mu.Lock()
	p := s.mu.snaps[token]
	delete(s.mu.snaps, token)
	s.mu.Unlock()
	if p == nil || p.rangeID != r.rangeID {
		return fmt.Errorf("replica: range %d: raft took snapshot %x, which was not received", r.rangeID, token)
	}
	md := snap.GetMetadata()
	idx, term := md.GetIndex(), md.GetTerm()
	if raft.IsEmptyHardState(hs) {
		hs = proto.CloneOf(r.st.hs)
		hs.Commit = new(max(hs.GetCommit(), idx))
	}
	wo := s.opts.Engine.WriterOptions()
	// The frozen replicas here that the snapshot's bounds cover go in the
	// same ingestion as the snapshot (their raft state deleted, a
	// tombstone left): a crash between the two would leave a replica
	// frozen for a merge that is done.
	var gone []uint64
	if p.bounded() {
		gone = s.subsumable(r.rangeID, p.start, p.end)
	}
	var ssts [][]byte
	// The hard state saved with the snapshot commits no further than it:
	// raft may already have matched a later append against the snapshot
	// (its commit past idx), whose entries are not on disk until the
	// writer persists them, with that hard state after them.
	saved := proto.CloneOf(hs)
	saved.Commit = new(min(hs.GetCommit(), idx))
	state, err := r.st.stateSST(saved, md.GetConfState(), idx, term, p, wo)
	ssts = append(ssts, state)
	for _, id := range gone {
		if err != nil {
			break
		}
		var more [][]byte
		more, err = s.subsumeSSTs(id, r.rangeID, wo)
		ssts = append(ssts, more...)
	}
	if err == nil {
		var paths []string
		for i, sst := range ssts {
			path := s.snapPath(r.rangeID, token, len(p.paths)+i)
			paths = append(paths, path)
			if err = s.writeFile(path, bytes.NewReader(sst), int64(len(sst))); err != nil {
				break
			}
		}
		if err == nil {
			// The log's entries past the snapshot go first, synced: they
			// are of another history (raft installs a snapshot only where
			// the log does not hold its index and term), and must not
			// outlive the state that replaces them. Those up to its index
			// go after: a load ignores entries at or below the truncation.
			err = s.logDB.DeleteRange(logKey(r.st.prefix, idx+1), stateKey(r.st.prefix, suffixLog+1), pebble.Sync)
		}
		if err == nil {
			err = s.db.Ingest(s.ctx, append(paths, p.paths...))
		}
		if err == nil {
			err = s.logDB.DeleteRange(logKey(r.st.prefix, 0), logKey(r.st.prefix, idx+1), pebble.NoSync)
		}
		s.removeFiles(paths)
	}
	if err == nil && s.afterIngest != nil {
		s.afterIngest() // tests: a crash here
	}
	if err != nil {
		err = fmt.Errorf("replica: range %d: install snapshot at %d: %w", r.rangeID, idx, err)
		p.done <- err
		return err
	}
	r.st.installed(hs, md.GetConfState(), idx, term)
	r.commit = max(r.commit, hs.GetCommit())
	r.st.merge = p.merge
	old := r.Descriptor()
	r.mu.Lock()
	r.mu.desc.Replicas = append([]uint64(nil), md.GetConfState().GetVoters()...)
	if p.bounded() {
		r.mu.desc.Start, r.mu.desc.End = p.start, p.end
	}
	d := r.mu.desc.Clone()
	r.mu.lastSplit = rangedesc.Range{} // the snapshot replaced the range's state
	r.mu.merge = p.merge
	r.mu.Unlock()
	if bd, ok := r.sm.(Bounder); ok {
		bd.SetBounds(d)
	}
	if rs, ok := r.sm.(Restorer); ok {
		rs.Restored(old)
		if !bytes.Equal(old.Start, d.Start) || !bytes.Equal(old.End, d.End) {
			rs.Restored(d)
		}
	}
	s.log.Info("installed a snapshot", "range", r.rangeID, "index", idx, "term", term)
	s.subsumed(r.rangeID, p.start, p.end, gone)
	p.done <- nil
	return nil
}

// declineSnapshots answers the snapshots stepped in this cycle that raft
// did not take.
func (s *Store) declineSnapshots(tokens []uint64) {
	for _, t := range tokens {
		s.failSnapshot(t, ErrSnapshotDeclined)
	}
}

// failSnapshot answers a received snapshot that will not be installed.
func (s *Store) failSnapshot(token uint64, err error) {
	s.mu.Lock()
	p := s.mu.snaps[token]
	delete(s.mu.snaps, token)
	s.mu.Unlock()
	if p != nil {
		p.done <- err
	}
}

// memWritable is an objstorage.Writable into memory, for the raft-state
// SST of an installed snapshot (a handful of keys).
type memWritable struct{ buf []byte }

func (w *memWritable) Write(p []byte) error { w.buf = append(w.buf, p...); return nil }
func (w *memWritable) Finish() error        { return nil }
func (w *memWritable) Abort()               {}

// stateSST is an SST that replaces all of the range's raft state with a
// log truncated at (idx, term), applied up to idx.
func (st *raftStorage) stateSST(hs *raftpb.HardState, cs *raftpb.ConfState, idx, term uint64, p *pendingSnap, wo sstable.WriterOptions) ([]byte, error) {
	w := &memWritable{}
	sw := sstable.NewWriter(w, wo)
	enc := func(m proto.Message) []byte {
		p, err := proto.Marshal(m)
		if err != nil {
			panic(err) // a raftpb message always marshals
		}
		return encodeValue(p)
	}
	// Keys in order: 'a' < 'b' < 'c' < 'h' < 'm' < 't'.
	errs := []error{
		sw.DeleteRange(st.prefix, keys.PrefixEnd(st.prefix)),
		sw.Set(stateKey(st.prefix, suffixApplied), encodeUint64s(idx)),
	}
	if p.bounded() {
		errs = append(errs, sw.Set(stateKey(st.prefix, suffixBounds), encodeBounds(p.start, p.end)))
	}
	errs = append(errs,
		sw.Set(stateKey(st.prefix, suffixConfState), enc(cs)),
		sw.Set(stateKey(st.prefix, suffixHardState), enc(hs)),
	)
	if !p.merge.isZero() {
		errs = append(errs, sw.Set(stateKey(st.prefix, suffixMerge), encodeMerge(p.merge)))
	}
	errs = append(errs,
		sw.Set(stateKey(st.prefix, suffixTruncated), encodeUint64s(idx, term)),
		sw.Close(),
	)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return w.buf, nil
}

// installed mirrors a snapshot's state once it is ingested.
func (st *raftStorage) installed(hs *raftpb.HardState, cs *raftpb.ConfState, idx, term uint64) {
	st.hs = proto.CloneOf(hs)
	st.cs = proto.CloneOf(cs)
	st.truncIndex, st.truncTerm = idx, term
	st.lastIndex, st.applied, st.written = idx, idx, idx
	st.cache = entryCache{maxEnts: st.cache.maxEnts, maxBytes: st.cache.maxBytes}
}
