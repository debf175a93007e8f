package replica

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/cairn-db/cairn/internal/keys"
	"github.com/cairn-db/cairn/internal/rangedesc"
)

// maxInbound bounds the inbound message queue between two loop cycles.
const maxInbound = 64 << 10

// Store holds every replica of one node and drives all of them from one loop
// goroutine (see doc.go). Its methods are safe for concurrent use.
type Store struct {
	opts   Options
	db     *pebble.DB // the state store
	logDB  *pebble.DB // the raft logs' entries (Engine.LogDB)
	log    *slog.Logger
	nextID atomic.Uint64 // proposal ids; random start so ids of earlier runs are not reused

	wake      chan struct{} // capacity 1: "there is work"
	done      chan struct{} // closed when the loop has exited
	closeOnce sync.Once
	ctx       context.Context // cancelled by Close: work off the loop (snapshots)
	cancel    context.CancelFunc
	bg        sync.WaitGroup // goroutines sending snapshots

	// afterIngest, if set (tests), runs on the loop right after a
	// snapshot's ingestion, before anything else of its install.
	afterIngest func()

	stats loopStats
	p     persister // the log writer (persist.go)
	hold  holder    // commit-only appends waiting to go (hold.go); loop-owned

	// Owned by the loop goroutine.
	ticks uint64            // ticks since the Store started
	heard map[uint64]uint64 // node id -> the tick a message from it last came in

	mu struct {
		sync.Mutex
		closed   bool
		err      error               // why the loop stopped, if it failed
		replicas map[uint64]*Replica // copy-on-write: the loop reads a snapshot
		order    []*Replica          // replicas by range id, also copy-on-write
		props    []*proposal
		msgs     []Message
		ops      []func()                // run on the loop at the next cycle (see do)
		snaps    map[uint64]*pendingSnap // received snapshots by token
	}
}

// NewStore validates o and starts the Store's loop.
func NewStore(o Options) (*Store, error) {
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	s := &Store{
		opts:  o,
		db:    o.Engine.DB(),
		logDB: o.Engine.LogDB(),
		log:   o.Logger.With("node", o.NodeID),
		wake:  make(chan struct{}, 1),
		done:  make(chan struct{}),
		heard: map[uint64]uint64{},
		p:     newPersister(),
		hold:  newHolder(),
	}
	var seed [8]byte
	_, _ = rand.Read(seed[:])
	s.nextID.Store(binary.BigEndian.Uint64(seed[:]))
	s.mu.replicas = map[uint64]*Replica{}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	// Snapshots received before a crash were never installed.
	if err := o.Engine.FS().RemoveAll(o.Engine.FS().PathJoin(o.Engine.Dir(), snapshotDir)); err != nil {
		return nil, fmt.Errorf("replica: clear %s: %w", snapshotDir, err)
	}
	if err := s.moveLogs(); err != nil {
		return nil, err
	}
	if err := s.sweepLogs(); err != nil {
		return nil, err
	}
	go s.writer()
	go s.run()
	return s, nil
}

// Close stops the loop and waits for it. Proposers still waiting get
// ErrClosed (their commands may still apply, here or on other replicas).
// It is idempotent and returns the error that stopped the loop, if any.
// It does not close the Engine.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.mu.closed = true
		s.mu.Unlock()
		s.cancel()
	})
	<-s.done
	s.bg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.err
}

// Replica returns the replica of rangeID, or nil if this Store has none (or
// it is still replaying its log in AddReplica).
func (s *Store) Replica(rangeID uint64) *Replica {
	s.mu.Lock()
	r := s.mu.replicas[rangeID]
	s.mu.Unlock()
	if r == nil || !r.isInitialized() {
		return nil
	}
	return r
}

// Step queues an inbound raft message from the transport for the loop.
// It does not block on the loop. Snapshots are refused with
// ErrSnapshotUnsupported: they arrive through ReceiveSnapshot.
func (s *Store) Step(ctx context.Context, m Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if m.Msg == nil {
		return errors.New("replica: Step of a nil message")
	}
	if m.Msg.GetType() == raftpb.MsgSnap {
		return ErrSnapshotUnsupported
	}
	s.mu.Lock()
	switch {
	case s.mu.closed:
		s.mu.Unlock()
		return ErrClosed
	case m.RangeID == 0 && m.Msg.GetType() != raftpb.MsgHeartbeat:
		s.mu.Unlock()
		return fmt.Errorf("replica: a message of type %v for range 0 (only store heartbeats are)", m.Msg.GetType())
	case m.RangeID != 0 && s.mu.replicas[m.RangeID] == nil:
		s.mu.Unlock()
		return fmt.Errorf("%w: range %d on node %d", ErrRangeNotFound, m.RangeID, s.opts.NodeID)
	case len(s.mu.msgs) >= maxInbound:
		s.mu.Unlock()
		return ErrInboxFull
	}
	s.mu.msgs = append(s.mu.msgs, m)
	s.mu.Unlock()
	s.signal()
	return nil
}

// AddReplica starts the replica of d.RangeID on this node. With no raft
// state on disk it bootstraps a new group whose voters are d.Peers (every
// replica of the range must be bootstrapped from the same d.Peers), or, if
// d.Peers is empty, starts an uninitialized replica: one with no state that
// waits for the leader to add it to the group and send it a snapshot.
// With raft state on disk it restarts from it and d.Peers is ignored.
// Before it returns, committed entries that were not applied yet are
// applied through sm, exactly once.
func (s *Store) AddReplica(d rangedesc.Range, sm StateMachine) (*Replica, error) {
	if sm == nil {
		return nil, errors.New("replica: AddReplica needs a StateMachine")
	}
	if d.ID == 0 {
		return nil, errors.New("replica: range id 0 is reserved (store heartbeats)")
	}
	s.mu.Lock()
	exists, closed := s.mu.replicas[d.ID] != nil, s.mu.closed
	s.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	if exists {
		return nil, fmt.Errorf("%w: range %d", ErrReplicaExists, d.ID)
	}
	st, found, err := loadRaftStorage(s.db, s.logDB, d.ID)
	if err != nil {
		return nil, fmt.Errorf("replica: load range %d: %w", d.ID, err)
	}
	if st.tombstone {
		return nil, fmt.Errorf("%w: range %d on node %d", ErrRangeMerged, d.ID, s.opts.NodeID)
	}
	fresh := !found
	if st.hasBounds {
		d.Start, d.End = st.start, st.end // the range's own record beats the caller's
	}
	if fresh && len(d.Replicas) == 0 {
		st.hs = &raftpb.HardState{}
	} else if fresh {
		if !slices.Contains(d.Replicas, s.opts.NodeID) {
			return nil, fmt.Errorf("replica: bootstrap range %d: node %d is not in Peers %v", d.ID, s.opts.NodeID, d.Replicas)
		}
		// No entry of an earlier replica of the range may read as
		// this one's (dropLog after a removal normally took them).
		err := s.dropLog(d.ID)
		b := s.db.NewBatch()
		if err == nil {
			err = st.bootstrap(b, d.Replicas, d.Start, d.End, nil)
		}
		if err == nil {
			err = b.Commit(pebble.Sync)
		}
		_ = b.Close()
		if err != nil {
			return nil, fmt.Errorf("replica: bootstrap range %d: %w", d.ID, err)
		}
	}
	r, err := newReplica(s, d, sm, st, fresh)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	if s.mu.replicas[d.ID] != nil {
		s.mu.Unlock()
		return nil, fmt.Errorf("%w: range %d", ErrReplicaExists, d.ID)
	}
	s.insertLocked(r)
	s.mu.Unlock()
	s.signal()
	select {
	case <-r.initDone:
		return r, nil
	case <-s.done:
		if err := s.loopErr(); err != nil {
			return nil, err
		}
		return nil, ErrClosed
	}
}

// insertLocked adds r to the replicas the loop drives (copy-on-write).
// s.mu must be held.
func (s *Store) insertLocked(r *Replica) {
	m := maps.Clone(s.mu.replicas)
	m[r.rangeID] = r
	s.mu.replicas = m
	order := append(slices.Clone(s.mu.order), r)
	slices.SortFunc(order, func(a, b *Replica) int { return cmp.Compare(a.rangeID, b.rangeID) })
	s.mu.order = order
}

// RemoveReplica stops the replica of rangeID and deletes its raft state
// and, if its StateMachine is a Spanner, the range's data on this node, in
// one synced batch. Call it once the group no longer has this node as a
// member: a replica removed while still a member comes back empty on the
// leader's next snapshot. Its waiting proposers get ErrClosed (their
// commands may still apply elsewhere); later ones ErrRangeNotFound.
func (s *Store) RemoveReplica(ctx context.Context, rangeID uint64) error {
	return s.onLoop(ctx, func() error { return s.removeReplica(rangeID) })
}

// onLoop runs f on the loop and returns its error, or ctx's, or why the
// loop stopped.
func (s *Store) onLoop(ctx context.Context, f func() error) error {
	res := make(chan error, 1)
	s.do(func() { res <- f() })
	select {
	case err := <-res:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-s.done:
		if err := s.loopErr(); err != nil {
			return err
		}
		return ErrClosed
	}
}

// unlink takes the replica of rangeID out of the loop's replicas (copy
// on write), marks it removed and fails its waiting proposers with
// err; nil if there is none. Loop-owned.
func (s *Store) unlink(rangeID uint64, err error) *Replica {
	s.mu.Lock()
	r := s.mu.replicas[rangeID]
	if r == nil {
		s.mu.Unlock()
		return nil
	}
	m := maps.Clone(s.mu.replicas)
	delete(m, rangeID)
	s.mu.replicas = m
	s.mu.order = slices.DeleteFunc(slices.Clone(s.mu.order), func(x *Replica) bool { return x == r })
	s.mu.Unlock()
	r.removed = true
	for id, p := range r.waiters {
		p.finish(nil, err)
		delete(r.waiters, id)
	}
	return r
}

// removeReplica runs on the loop.
func (s *Store) removeReplica(rangeID uint64) error {
	if err := s.flush(); err != nil {
		return err
	}
	// A waiting entry may still commit on the other replicas.
	r := s.unlink(rangeID, fmt.Errorf("%w: range %d was removed from node %d while the command was in flight", ErrClosed, rangeID, s.opts.NodeID))
	if r == nil {
		return fmt.Errorf("%w: range %d on node %d", ErrRangeNotFound, rangeID, s.opts.NodeID)
	}
	b := s.db.NewBatch()
	defer b.Close()
	err := b.DeleteRange(r.st.prefix, keys.PrefixEnd(r.st.prefix), nil)
	if sp, ok := r.sm.(Spanner); ok && r.hasState() {
		// (An uninitialized replica owns no data: its bounds come from
		// the caller and may cover keys another replica here holds.)
		for _, x := range sp.Spans(r.Descriptor()) {
			err = errors.Join(err, b.DeleteRange(x.Start, x.End, nil))
		}
	}
	if err == nil {
		err = b.Commit(pebble.Sync)
	}
	if err != nil {
		return fmt.Errorf("replica: remove range %d: %w", rangeID, err)
	}
	// The range may come back under the same id in this process, before
	// sweepLogs could see its old entries.
	if err := s.dropLog(rangeID); err != nil {
		return fmt.Errorf("replica: remove range %d: drop its raft log: %w", rangeID, err)
	}
	if rs, ok := r.sm.(Restorer); ok {
		rs.Restored(r.Descriptor())
	}
	s.log.Info("removed a replica", "range", rangeID)
	return nil
}

// do runs f on the loop at the start of its next cycle; it is dropped if
// the loop has stopped.
func (s *Store) do(f func()) {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return
	}
	s.mu.ops = append(s.mu.ops, f)
	s.mu.Unlock()
	s.signal()
}

func (s *Store) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *Store) enqueue(p *proposal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.err != nil {
		return s.mu.err
	}
	if s.mu.closed {
		return ErrClosed
	}
	s.mu.props = append(s.mu.props, p)
	if len(s.mu.props) == 1 {
		s.signal()
	}
	return nil
}

func (s *Store) loopErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.err
}

// run is the loop: it owns every RawNode and every raftStorage.
func (s *Store) run() {
	defer close(s.done)
	defer s.stopWriter()
	defer s.hold.timer.Stop()
	ticks := s.opts.ticks
	if ticks == nil {
		ticker := time.NewTicker(s.opts.TickInterval)
		defer ticker.Stop()
		ticks = ticker.C
	}
	for {
		tick := false
		var err error
		select {
		case <-s.ctx.Done():
			s.shutdown(ErrClosed)
			return
		case <-ticks:
			tick = true
		case <-s.wake:
		case j := <-s.p.done:
			err = s.finishPersist(j)
		case <-s.hold.timer.C:
			s.releaseHeld()
			continue
		}
		if err == nil {
			err = s.cycle(tick)
		}
		if err != nil {
			s.log.Error("replica loop stopped", "err", err)
			s.mu.Lock()
			s.mu.err = err
			s.mu.closed = true
			s.mu.Unlock()
			s.shutdown(err)
			return
		}
	}
}

// shutdown fails every queued and waiting proposal with err.
func (s *Store) shutdown(err error) {
	s.mu.Lock()
	s.mu.closed = true
	props := s.mu.props
	s.mu.props, s.mu.msgs, s.mu.ops = nil, nil, nil
	reps, snaps := s.mu.replicas, s.mu.snaps
	s.mu.snaps = nil
	s.mu.Unlock()
	for _, p := range snaps {
		p.done <- err
	}
	for _, p := range props {
		p.finish(nil, err)
	}
	for _, r := range reps {
		for id, p := range r.waiters {
			p.finish(nil, err)
			delete(r.waiters, id)
		}
	}
}

// LoopStats are running totals of the loop's work, for metrics: how often
// it persisted and applied, how much, and how long that took.
type LoopStats struct {
	Cycles       uint64        // loop turns that had at least one Ready
	Syncs        uint64        // log writer batches synced to disk
	Appended     uint64        // log entries persisted
	Applied      uint64        // committed entries applied
	PersistTime  time.Duration // in the log writer, off the loop (writing and syncing raft state)
	ApplyTime    time.Duration // in applying committed entries
	CycleTime    time.Duration // in cycles that had a Ready, all steps
	MessagesSent uint64        // raft messages handed to the transport
	// CommitsSkipped counts commit-only appends not sent: a later append
	// to the same follower carried the commit index (hold.go).
	CommitsSkipped uint64
}

type loopStats struct {
	cycles, syncs, appended, applied, sent, skipped atomic.Uint64
	persistNs, applyNs, cycleNs                     atomic.Int64
}

// Stats returns the loop's running totals.
func (s *Store) Stats() LoopStats {
	t := &s.stats
	return LoopStats{
		Cycles: t.cycles.Load(), Syncs: t.syncs.Load(), Appended: t.appended.Load(),
		Applied: t.applied.Load(), MessagesSent: t.sent.Load(), CommitsSkipped: t.skipped.Load(),
		PersistTime: time.Duration(t.persistNs.Load()), ApplyTime: time.Duration(t.applyNs.Load()),
		CycleTime: time.Duration(t.cycleNs.Load()),
	}
}

// ready is one replica's Ready in a cycle, and the RawNode it came from
// (a split may re-initialize the replica with a new one in the same cycle).
type ready struct {
	r  *Replica
	rn *raft.RawNode
	rd raft.Ready
}

// cycle is one turn of the loop: step inbound messages, tick, propose, then
// for every replica with a Ready persist (one synced batch for all), send,
// apply, and advance.
func (s *Store) cycle(tick bool) error {
	s.mu.Lock()
	ops := s.mu.ops
	s.mu.ops = nil
	s.mu.Unlock()
	for _, f := range ops {
		f()
	}
	if s.p.err != nil {
		return s.p.err // a write failed in an op's flush
	}

	s.mu.Lock()
	props, msgs, reps, order := s.mu.props, s.mu.msgs, s.mu.replicas, s.mu.order
	s.mu.props, s.mu.msgs = nil, nil
	s.mu.Unlock()
	for _, r := range order {
		r.start()
	}
	var snaps []uint64 // tokens of the snapshots stepped in this cycle
	var accepted []*pendingSnap
	for _, m := range msgs {
		if m.Msg.GetType() == raftpb.MsgSnap {
			token := binary.BigEndian.Uint64(m.Msg.GetSnapshot().GetData())
			s.mu.Lock()
			p := s.mu.snaps[token]
			s.mu.Unlock()
			if p != nil {
				if err := s.snapshotFits(reps, p, accepted); err != nil {
					s.failSnapshot(token, err)
					continue
				}
				accepted = append(accepted, p)
			}
			snaps = append(snaps, token)
		}
		s.heard[m.Msg.GetFrom()] = s.ticks
		if r := reps[m.RangeID]; r != nil {
			// Neither a quiesce heartbeat nor a heartbeat response (a
			// slow follower's late ack) needs the replica awake.
			quiesce := isQuiesceMsg(m.Msg)
			if !quiesce && m.Msg.GetType() != raftpb.MsgHeartbeatResp {
				r.wake()
			}
			r.step(m.Msg)
			if quiesce && m.Msg.GetType() == raftpb.MsgHeartbeat {
				r.maybeQuiesceFollower(m.Msg)
			}
		}
	}
	// Whatever raft took is installed in the persist step below.
	defer s.declineSnapshots(snaps)
	if tick {
		s.ticks++
		var out []Message
		for _, r := range order {
			if r.quiesced {
				r.checkQuiesced()
				continue
			}
			if q := r.maybeQuiesce(); q != nil {
				out = append(out, q...)
				continue
			}
			r.tick()
		}
		out = append(out, s.storeHeartbeats(order)...)
		if len(out) > 0 {
			s.opts.Transport.Send(out)
		}
	}
	for _, r := range order {
		if !r.quiesced {
			r.maybeRenewLease(s.opts.Clock, tick)
		}
	}
	for _, p := range props {
		p.r.wake()
		p.r.propose(p)
	}

	var rds []ready
	for _, r := range order {
		if r.rn.HasReady() {
			rds = append(rds, ready{r: r, rn: r.rn, rd: r.rn.Ready()})
		}
	}
	if len(rds) == 0 {
		return s.startPersist()
	}
	start := startWatch()
	defer func() { s.stats.cycleNs.Add(start.ns()) }()
	s.stats.cycles.Add(1)

	// Install received snapshots first: the rest of the same Ready
	// follows them. What raft handed over before is written first.
	for _, x := range rds {
		if snap := x.rd.Snapshot; !raft.IsEmptySnap(snap) && x.live() {
			if err := s.flush(); err != nil {
				return err
			}
			if err := s.installSnapshot(x.r, snap, x.rd.HardState); err != nil {
				return err
			}
		}
	}

	// Send. With asynchronous storage writes raft keeps what must wait for
	// the log write (append and vote responses: a node must not vouch for
	// entries or a vote it could lose in a crash) inside the
	// MsgStorageAppend, so everything else goes now: a leader's appends
	// leave while it writes its own log (Raft thesis 10.2.1).
	var out []Message
	var snapFailed map[*Replica][]uint64
	for _, x := range rds {
		if !x.live() {
			continue
		}
		for _, m := range x.rd.Messages {
			switch {
			case m.GetTo() == raft.LocalAppendThread || m.GetTo() == raft.LocalApplyThread:
			case m.GetType() == raftpb.MsgSnap:
				// A follower is behind the truncated log (or new): send it
				// the range's state. If that cannot be done, tell raft the
				// snapshot failed: it probes the follower again later.
				if !s.startSnapshot(x.r, m) {
					if snapFailed == nil {
						snapFailed = map[*Replica][]uint64{}
					}
					snapFailed[x.r] = append(snapFailed[x.r], m.GetTo())
				}
			default:
				out = s.outbound(out, x.r.rangeID, m)
			}
		}
	}
	if len(out) > 0 {
		s.opts.Transport.Send(out)
		s.stats.sent.Add(uint64(len(out)))
	}

	// Queue the log writes and start writing them, then apply what is
	// committed (and durable here): the writer's fsync overlaps the apply.
	// (A split, merge or removal the apply meets flushes the write first.)
	for _, x := range rds {
		if !x.live() {
			continue // merged away or re-initialized earlier in this cycle
		}
		x.r.noteReady(x.rd)
		for _, m := range x.rd.Messages {
			if m.GetTo() == raft.LocalAppendThread {
				s.queueAppend(x.r, x.rn, &x.rd, m)
			}
		}
	}
	if err := s.startPersist(); err != nil {
		return err
	}
	for _, x := range rds {
		if !x.live() {
			continue // merged away or re-initialized earlier in this cycle
		}
		for _, m := range x.rd.Messages {
			if m.GetTo() != raft.LocalApplyThread {
				continue
			}
			t := startWatch()
			if err := x.r.apply(m.GetEntries()); err != nil {
				return fmt.Errorf("replica: range %d: apply: %w", x.r.rangeID, err)
			}
			s.stats.applyNs.Add(t.ns())
			s.stats.applied.Add(uint64(len(m.GetEntries())))
			if x.live() {
				for _, resp := range m.GetResponses() {
					x.r.step(resp)
				}
			}
		}
		x.r.handleReadStates(x.rd.ReadStates)
	}
	if err := s.startPersist(); err != nil {
		return err
	}

	again := false
	for _, x := range rds {
		if !x.live() {
			continue
		}
		for _, to := range snapFailed[x.r] {
			x.r.rn.ReportSnapshot(to, raft.SnapshotFailure)
		}
		x.r.publish()
		again = again || x.r.rn.HasReady()
	}
	if again {
		s.signal()
	}
	return nil
}

// live reports whether x's replica is still driven by the RawNode the
// Ready came from.
func (x *ready) live() bool { return !x.r.removed && x.r.rn == x.rn }
