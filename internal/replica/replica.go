package replica

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
	"google.golang.org/protobuf/proto"

	"github.com/cairn-db/cairn/internal/rangedesc"
)

// StateMachine is a range's replicated state. The Store calls it from its
// loop goroutine only, one command at a time, in log order.
type StateMachine interface {
	// Apply applies one committed command. b is a pebble indexed batch
	// (reads through b see earlier writes of the same apply batch). The
	// replica commits b atomically together with the new applied index.
	// Apply must be deterministic (it runs on every replica). The returned
	// value is handed to the Propose call that proposed cmd (only on the
	// proposing node); returning an error value is fine and means "command
	// rejected" — the StateMachine must then not have written to b. cmd is
	// only valid during the call.
	Apply(b *pebble.Batch, cmd []byte) any
}

// Committer is implemented by a StateMachine that keeps state outside the
// batch (a cache, say). Committed is called after the batch holding every
// command applied since the last call has committed, and before any of
// their proposers is answered. It is not called if the commit failed.
type Committer interface {
	Committed()
}

// Status is a snapshot of a replica's raft state.
type Status struct {
	RangeID  uint64
	Leader   uint64 // raft node id of the leader as this replica knows it; 0 if none
	IsLeader bool
	Term     uint64
	Commit   uint64
	Applied  uint64
	// LeaseExpiration is when this replica's leader lease expires; zero if
	// it holds none (see ReadReady).
	LeaseExpiration time.Time
	// Voters and Learners are the group's configuration as of Applied
	// (incoming voters while Joint); Joint is true while a joint change has
	// not been left. An uninitialized replica has none. Shared: do not
	// modify.
	Voters, Learners []uint64
	Joint            bool
	// Quiesced: the group is idle and this replica is not ticked
	// (quiesce.go).
	Quiesced bool
	// Match is, on the leader while the group has learners or is joint,
	// the highest log index known to be on each member; nil otherwise.
	Match map[uint64]uint64
}

// Replica is one range's replica on this node. Its methods are safe for
// concurrent use; all raft work happens on the Store's loop.
type Replica struct {
	s       *Store
	rangeID uint64
	sm      StateMachine

	// Owned by the loop goroutine.
	rn            *raft.RawNode
	st            *raftStorage
	waiters       map[uint64]*proposal // proposal id -> waiter, proposed on this node
	proposed      []*proposal          // proposed in the current cycle
	leader        uint64
	isLeader      bool
	term          uint64
	commit        uint64 // raft's commit index as of the last Ready
	unstable      int    // appends queued or being written (persist.go)
	appliedInTerm bool   // an entry of the current term has been applied (leader only)
	lease         lease
	renewSent     time.Time // when the pending lease renewal was sent; zero if none
	voteGrace     int       // ticks left during which vote requests are dropped
	started       bool
	campaign      bool // campaign on start (fresh group or single voter)
	// recampaign counts down the ticks after a campaign on start during
	// which the replica, while it knows no leader, campaigns again every
	// other tick: the other replicas of a new group (bootstrapped, or
	// made by a split) may not exist yet when the first campaign reaches
	// them, and waiting out an election timeout would leave the range
	// without a leader that long.
	recampaign  int
	singleVoter bool // AddReplica also waits for leadership and a lease
	initTarget  uint64
	initDone    chan struct{} // closed once entries up to initTarget are applied
	removed     bool          // by RemoveReplica or a merge: takes no more proposals
	// freezing is set on a leader that proposed a freeze (merge.go) until
	// a freeze or thaw applies or its term ends: membership changes
	// proposed meanwhile would land after the freeze.
	freezing bool
	// quiesced: the group is idle and this replica is not ticked; idle
	// counts a leader's idle ticks, quietSince is the Store tick it
	// quiesced at (quiesce.go).
	quiesced   bool
	idle       int
	quietSince uint64
	// active is set by every read served and cleared by the leader's idle
	// check: a range being read is not idle.
	active      atomic.Bool
	wokeAt      atomic.Int64 // unix ns of the last wake of a leader
	pubCS       *raftpb.ConfState
	pubVoters   []uint64
	pubLearners []uint64

	mu struct {
		sync.Mutex
		status        Status
		desc          rangedesc.Range
		lastSplit     rangedesc.Range // see LastSplit
		merge         MergeState      // see MergeState
		lease         lease
		appliedInTerm bool
	}
}

func newReplica(s *Store, d rangedesc.Range, sm StateMachine, st *raftStorage, fresh bool) (*Replica, error) {
	voters := st.cs.GetVoters()
	single := soleVoter(st.cs, s.opts.NodeID)
	// A fresh group campaigns at once from its lowest voter instead of
	// waiting out an election timeout; a restarted replica may have promised
	// a lease to a leader it no longer remembers, so it refuses votes for an
	// election timeout (see lease.go).
	campaign := single || (fresh && len(voters) > 0 && slices.Min(voters) == s.opts.NodeID)
	return newReplicaWith(s, d, sm, st, campaign, !fresh && !single)
}

// newReplicaWith is newReplica with the campaign and vote grace decided.
func newReplicaWith(s *Store, d rangedesc.Range, sm StateMachine, st *raftStorage, campaign, voteGrace bool) (*Replica, error) {
	r := &Replica{
		s:        s,
		rangeID:  d.ID,
		sm:       sm,
		waiters:  map[uint64]*proposal{},
		initDone: make(chan struct{}),
	}
	if err := r.initRaft(d, st, campaign, voteGrace); err != nil {
		return nil, err
	}
	if r.initReady() {
		close(r.initDone)
	}
	return r, nil
}

// soleVoter reports whether node id is the only voter of cs.
func soleVoter(cs *raftpb.ConfState, id uint64) bool {
	v := cs.GetVoters()
	return len(v) == 1 && v[0] == id && len(cs.GetVotersOutgoing()) == 0
}

// initRaft (re)starts the replica's raft state machine over st: at
// creation, and when a split turns an uninitialized replica into one of
// the new range (split.go). Loop-owned state, or before the loop knows r.
func (r *Replica) initRaft(d rangedesc.Range, st *raftStorage, campaign, voteGrace bool) error {
	s := r.s
	rn, err := raft.NewRawNode(&raft.Config{
		ID:                        s.opts.NodeID,
		ElectionTick:              s.opts.ElectionTicks,
		HeartbeatTick:             s.opts.HeartbeatTicks,
		Storage:                   st,
		Applied:                   st.applied,
		MaxSizePerMsg:             1 << 20,
		MaxCommittedSizePerReady:  16 << 20,
		MaxUncommittedEntriesSize: 64 << 20,
		MaxInflightMsgs:           256,
		CheckQuorum:               true,
		PreVote:                   true,
		ReadOnlyOption:            raft.ReadOnlySafe,
		DisableProposalForwarding: true,
		AsyncStorageWrites:        true, // persist.go
		Logger:                    raftLogger{s.log.With("range", d.ID)},
	})
	if err != nil {
		return fmt.Errorf("replica: range %d: %w", d.ID, err)
	}
	voters := st.cs.GetVoters()
	r.rn, r.st = rn, st
	r.initTarget = st.hs.GetCommit()
	r.commit, r.unstable = st.hs.GetCommit(), 0
	r.leader, r.isLeader, r.appliedInTerm = 0, false, false
	r.lease, r.renewSent = lease{}, time.Time{}
	r.started, r.campaign = false, campaign
	r.singleVoter = soleVoter(st.cs, s.opts.NodeID)
	r.voteGrace = 0
	if voteGrace {
		r.voteGrace = s.opts.ElectionTicks
	}
	r.pubCS = nil
	d = d.Clone()
	if len(voters) > 0 {
		d.Replicas = slices.Clone(voters)
	}
	if b, ok := r.sm.(Bounder); ok {
		b.SetBounds(d)
	}
	bs := rn.BasicStatus()
	r.term = bs.GetTerm()
	r.mu.Lock()
	r.mu.desc = d
	r.mu.status = Status{RangeID: d.ID, Term: bs.GetTerm(), Commit: st.hs.GetCommit(), Applied: st.applied}
	r.mu.lease, r.mu.appliedInTerm = lease{}, false
	r.mu.lastSplit = st.lastSplit
	r.mu.merge = st.merge
	r.mu.Unlock()
	return nil
}

func (r *Replica) isInitialized() bool {
	select {
	case <-r.initDone:
		return true
	default:
		return false
	}
}

// Propose proposes cmd to the range and blocks until it is applied, then
// returns what StateMachine.Apply returned for it. It returns ErrNotLeader
// if this replica is not the leader or raft dropped the command (it was not
// applied), ErrClosed if the Store closed first, and ctx.Err() if ctx is
// done first; in those last two cases the command may still apply.
// cmd may be reused by the caller once Propose returns.
func (r *Replica) Propose(ctx context.Context, cmd []byte) (any, error) {
	return r.proposeKind(ctx, cmdVersion, cmd, nil)
}

// ProposeTracked is Propose that also calls finished once the command's
// fate is settled — applied, or certain never to apply (refused, dropped,
// replaced by another leader's entry, the replica removed or closed) —
// even when ctx ends first and Propose has returned. finished runs once,
// possibly on the loop goroutine: it must not block.
func (r *Replica) ProposeTracked(ctx context.Context, cmd []byte, finished func()) (any, error) {
	return r.proposeKind(ctx, cmdVersion, cmd, finished)
}

// proposeKind is Propose for an entry of the given kind (keys.go).
func (r *Replica) proposeKind(ctx context.Context, kind byte, cmd []byte, finished func()) (any, error) {
	if err := ctx.Err(); err != nil {
		if finished != nil {
			finished()
		}
		return nil, err
	}
	r.mu.Lock()
	st := r.mu.status
	r.mu.Unlock()
	if !st.IsLeader {
		if finished != nil {
			finished()
		}
		return nil, fmt.Errorf("%w: range %d, leader %d", ErrNotLeader, r.rangeID, st.Leader)
	}
	id := r.s.nextID.Add(1)
	p := &proposal{r: r, id: id, data: encodeKind(kind, id, cmd), done: make(chan proposalResult, 1), finished: finished}
	if err := r.s.enqueue(p); err != nil {
		if finished != nil {
			finished()
		}
		return nil, err
	}
	select {
	case res := <-p.done:
		return res.val, res.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// TransferLeadership asks this replica, if it leads, to hand leadership to
// voter to. It returns at once; raft makes the transfer (or gives up after
// an election timeout) in the background: watch Status. Raft takes no
// proposals while a transfer is under way, so the transfer starts only if
// to is caught up and its node was heard from in the last two ticks (a
// node just killed is still in every other node's map as up for seconds);
// otherwise the call does nothing and may be made again.
func (r *Replica) TransferLeadership(to uint64) {
	r.s.do(func() {
		if !r.isLeader || r.removed {
			return
		}
		s := r.s
		if heard, ok := s.heard[to]; !ok || s.ticks-heard > 2 {
			return
		}
		var replicating bool
		r.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
			if id == to {
				replicating = pr.State == tracker.StateReplicate
			}
		})
		if !replicating {
			return
		}
		r.wake()
		r.rn.TransferLeader(to)
		if r.rn.BasicStatus().LeadTransferee == to {
			r.dropLease()
		}
	})
}

// dropLease gives up the lease at once: the target of a leadership
// transfer campaigns with MsgTimeoutNow, which makes the other voters
// grant their votes even inside the lease (raft's forced campaign), so the
// lease's promise no longer holds from the moment the transfer starts. No
// renewal extends it while the transfer is under way (handleReadStates).
func (r *Replica) dropLease() {
	r.lease, r.renewSent = lease{}, time.Time{}
	r.mu.Lock()
	r.mu.lease = lease{}
	r.mu.status.LeaseExpiration = time.Time{}
	r.mu.Unlock()
}

// ReadReady returns nil if this replica may serve a linearizable read from
// its applied state now: it is the leader, an entry of its term has been
// applied (so everything committed by earlier leaders is applied), and its
// lease is valid at the Store's clock (see lease.go for the timing).
// Otherwise it returns an error wrapping ErrNotLeader.
func (r *Replica) ReadReady() error {
	r.mu.Lock()
	st, l, ait := r.mu.status, r.mu.lease, r.mu.appliedInTerm
	r.mu.Unlock()
	o := &r.s.opts
	switch {
	case !st.IsLeader:
		return fmt.Errorf("%w: range %d, leader %d", ErrNotLeader, r.rangeID, st.Leader)
	case !ait:
		return fmt.Errorf("%w: range %d: term %d has not applied an entry yet", ErrNotLeader, r.rangeID, st.Term)
	case !l.valid(o.Clock(), st.Term, o.MaxClockOffset, o.electionTimeout()):
		return fmt.Errorf("%w: range %d: %w (term %d, expiration %v)", ErrNotLeader, r.rangeID, errNoLease, st.Term,
			l.expiration(o.MaxClockOffset, o.electionTimeout()))
	case st.Applied < st.Commit:
		// Committed entries wait to apply (a leader applies an entry
		// once it is in its own log on disk, which may come after a
		// quorum of followers has it); one may be a split that moves
		// keys away (split.go): serve only a current state.
		return fmt.Errorf("%w: range %d: %w: applied %d is behind commit %d", ErrNotLeader, r.rangeID, errApplying, st.Applied, st.Commit)
	}
	return nil
}

// Leads reports whether this replica leads its group with a valid lease,
// or leads a quiesced group (whose lease lapses while nothing happens: see
// AwaitRead). It is the test for "this node coordinates the range" (splits,
// merges, repair, rebalancing), not for serving a read.
func (r *Replica) Leads() bool {
	err := r.ReadReady()
	return err == nil || errors.Is(err, errApplying) || errors.Is(err, errNoLease) && r.Status().Quiesced
}

var (
	errNoLease  = errors.New("no valid lease")
	errApplying = errors.New("committed entries are applying")
)

// AwaitRead is ReadReady for a caller about to serve a read, which counts
// as activity (a group being read does not quiesce). When this replica
// leads but its lease lapsed (its group was quiesced, quiesce.go), it
// wakes the group, which renews the lease in one heartbeat round, and
// waits for that; when it leads with a lease but committed entries are
// still applying, it waits for them. Either wait lasts up to an election
// timeout or until ctx ends. Any other reason not to read is returned at
// once, as by ReadReady.
func (r *Replica) AwaitRead(ctx context.Context) error {
	err := r.ReadReady()
	if err != nil && !errors.Is(err, errNoLease) && !errors.Is(err, errApplying) {
		return err
	}
	r.active.Store(true)
	if err == nil {
		return nil
	}
	if errors.Is(err, errNoLease) {
		if !r.Status().Quiesced && r.s.opts.Clock().Sub(time.Unix(0, r.wokeAt.Load())) > r.s.opts.electionTimeout() {
			return err // not for want of a renewal: the lease lapsed awake
		}
		r.s.do(func() { r.wake() })
	}
	deadline := r.s.opts.Clock().Add(r.s.opts.electionTimeout())
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		err = r.ReadReady()
		if err == nil || !errors.Is(err, errNoLease) && !errors.Is(err, errApplying) || r.s.opts.Clock().After(deadline) {
			return err
		}
	}
}

// Status returns the replica's raft state as of the last loop cycle.
func (r *Replica) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.status
}

// rangedesc.Range returns the range's descriptor; Peers are the current voters.
func (r *Replica) Descriptor() rangedesc.Range {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.desc.Clone()
}

// proposal is one Propose call waiting for its command to apply.
type proposal struct {
	r           *Replica
	id          uint64
	data        []byte               // encoded command, or
	cc          *raftpb.ConfChangeV2 // a membership change
	index, term uint64               // where the entry was appended; 0 until then
	done        chan proposalResult
	finished    func() // ProposeTracked's, or nil
}

type proposalResult struct {
	val any
	err error
}

// finish delivers the result. done has room for one; the loop finishes
// each proposal once, and must never block if that were violated.
func (p *proposal) finish(val any, err error) {
	select {
	case p.done <- proposalResult{val: val, err: err}:
		if p.finished != nil {
			p.finished()
		}
	default:
	}
}

// The methods below run on the loop goroutine only.

func (r *Replica) start() {
	if r.started {
		return
	}
	r.started = true
	if r.campaign {
		r.recampaign = r.s.opts.ElectionTicks
		if err := r.rn.Campaign(); err != nil {
			r.s.log.Debug("campaign", "range", r.rangeID, "err", err)
		}
	}
}

func (r *Replica) step(m *raftpb.Message) {
	if r.voteGrace > 0 && (m.GetType() == raftpb.MsgVote || m.GetType() == raftpb.MsgPreVote) {
		return
	}
	if c := len(m.GetContext()); m.GetType() == raftpb.MsgHeartbeatResp && c != 0 && c != 8 {
		// raft reads a heartbeat response's context as an 8-byte
		// read-index position: a response to a quiesce heartbeat
		// (quiesce.go) is dropped here.
		return
	}
	if err := r.rn.Step(m); err != nil {
		r.s.log.Debug("step", "range", r.rangeID, "type", m.GetType(), "from", m.GetFrom(), "err", err)
	}
}

func (r *Replica) tick() {
	r.rn.Tick()
	if r.recampaign > 0 {
		r.recampaign--
		if r.leader != 0 {
			r.recampaign = 0
		} else if r.recampaign%2 == 0 {
			_ = r.rn.Campaign()
		}
	}
	if r.voteGrace > 0 {
		r.voteGrace--
	}
}

// maybeRenewLease asks a quorum to acknowledge a heartbeat round stamped
// with the current time: on every tick, or at once when the lease is of an
// older term; at most one renewal is pending at a time.
func (r *Replica) maybeRenewLease(clock func() time.Time, tick bool) {
	if !r.isLeader {
		return
	}
	if !tick && (r.lease.term == r.term || !r.renewSent.IsZero()) {
		return
	}
	now := clock()
	if !r.renewSent.IsZero() && now.Sub(r.renewSent) < r.s.opts.electionTimeout() {
		return
	}
	if r.rn.BasicStatus().LeadTransferee != 0 {
		return // see dropLease
	}
	r.renewSent = now
	r.rn.ReadIndex(encodeLeaseCtx(r.term, now))
}

func (r *Replica) handleReadStates(rss []raft.ReadState) {
	for _, rs := range rss {
		term, t, ok := decodeLeaseCtx(rs.RequestCtx)
		if !ok || !r.isLeader || term != r.term || r.rn.BasicStatus().LeadTransferee != 0 {
			continue
		}
		r.lease = r.lease.extend(term, t)
		if !t.Before(r.renewSent) {
			r.renewSent = time.Time{}
		}
	}
}

func (r *Replica) propose(p *proposal) {
	if r.removed {
		p.finish(nil, fmt.Errorf("%w: range %d was removed from node %d", ErrRangeNotFound, r.rangeID, r.s.opts.NodeID))
		return
	}
	if !r.isLeader {
		p.finish(nil, fmt.Errorf("%w: range %d, leader %d", ErrNotLeader, r.rangeID, r.leader))
		return
	}
	isMerge := p.cc == nil && p.data[0] == cmdMerge
	if r.st.merge.Frozen() && !isMerge || p.cc != nil && r.freezing {
		p.finish(nil, fmt.Errorf("%w: range %d (for range %d)", ErrRangeFrozen, r.rangeID, r.st.merge.FrozenFor))
		return
	}
	if p.cc != nil {
		if err := checkConfChange(r.st.cs, r.st.lastIndex, p.cc); err != nil {
			p.finish(nil, fmt.Errorf("%w: range %d: %v", ErrConfChangeRefused, r.rangeID, err))
			return
		}
		if err := r.rn.ProposeConfChange(p.cc); err != nil {
			p.finish(nil, fmt.Errorf("%w: range %d: %v", ErrNotLeader, r.rangeID, err))
			return
		}
	} else if err := r.rn.Propose(p.data); err != nil {
		p.finish(nil, fmt.Errorf("%w: range %d: %v", ErrNotLeader, r.rangeID, err))
		return
	} else if isMerge && len(p.data) > cmdHeader && p.data[cmdHeader] == mergeFreeze {
		r.freezing = true
	}
	r.waiters[p.id] = p
	r.proposed = append(r.proposed, p)
}

// noteReady records role, term and commit changes and where this cycle's
// proposals were appended (to the unstable log: raft has them, the disk
// may not yet). A new leader holds no lease and serves nothing until an
// entry of its term applies, which happens only once that entry, and so
// the term, is durable here.
func (r *Replica) noteReady(rd raft.Ready) {
	wasLeader, prevTerm := r.isLeader, r.term
	if rd.SoftState != nil {
		r.leader = rd.SoftState.Lead
		r.isLeader = rd.SoftState.RaftState == raft.StateLeader
	}
	if !raft.IsEmptyHardState(rd.HardState) {
		r.term, r.commit = rd.HardState.GetTerm(), rd.HardState.GetCommit()
	}
	if r.isLeader != wasLeader || r.term != prevTerm {
		// A new role or term: leases and the "applied in term" mark are
		// per leadership term.
		r.appliedInTerm = false
		r.renewSent = time.Time{}
		r.lease = lease{}
		r.freezing = false
	}
	if !r.isLeader && len(rd.Entries) > 0 && len(r.waiters) > 0 {
		// Entries from another leader replace the log from their first
		// index on; a proposal appended there is gone unless the entry at
		// its index is the same (same term).
		first, last := rd.Entries[0].GetIndex(), rd.Entries[len(rd.Entries)-1].GetIndex()
		for id, p := range r.waiters {
			if p.index == 0 || p.index < first {
				continue
			}
			if p.index > last || rd.Entries[p.index-first].GetTerm() != p.term {
				delete(r.waiters, id)
				p.finish(nil, fmt.Errorf("%w: range %d: entry %d was replaced by another leader", ErrNotLeader, r.rangeID, p.index))
			}
		}
	}
	for _, e := range rd.Entries {
		id, ok := entryID(e)
		if !ok {
			continue
		}
		if p := r.waiters[id]; p != nil && p.index == 0 {
			p.index, p.term = e.GetIndex(), e.GetTerm()
		}
	}
	for _, p := range r.proposed {
		if p.index != 0 {
			continue
		}
		// raft accepted the proposal but did not append it: dropped, or
		// for a conf change, replaced by an empty entry.
		delete(r.waiters, p.id)
		r.freezing = false // it may have been the freeze
		if p.cc != nil {
			p.finish(nil, fmt.Errorf("%w: range %d: raft refused it (another change pending, or leadership changed)", ErrConfChangeRefused, r.rangeID))
		} else {
			p.finish(nil, fmt.Errorf("%w: range %d: proposal dropped", ErrNotLeader, r.rangeID))
		}
	}
	clear(r.proposed)
	r.proposed = r.proposed[:0]
}

// noChange is a membership change that changes nothing (raft skips a
// change of node 0): what a refused change applies as.
var noChange = &raftpb.ConfChangeV2{Changes: []*raftpb.ConfChangeSingle{{Type: raftpb.ConfChangeAddNode.Enum(), NodeId: new(uint64(0))}}}

// entryID returns the proposal id an entry carries, if any.
func entryID(e *raftpb.Entry) (uint64, bool) {
	if e.GetType() != raftpb.EntryNormal {
		return confChangeID(e)
	}
	if len(e.GetData()) == 0 {
		return 0, false
	}
	id, _, err := decodeCommand(e.GetData())
	return id, err == nil
}

// apply applies committed entries in one indexed batch together with the
// applied index (and ConfState, and log truncation), commits it without
// sync (the log is durable, a lost apply is replayed), then answers waiters.
func (r *Replica) apply(ents []*raftpb.Entry) error {
	if len(ents) == 0 {
		return nil
	}
	type delivery struct {
		p   *proposal
		val any
		err error
	}
	var out []delivery
	b := r.s.db.NewIndexedBatch()
	defer b.Close()
	confChanged, mustSync, mergeChanged := false, false, false
	var splits []*pendingSplit
	var merges []*pendingMerge
	for _, e := range ents {
		switch e.GetType() {
		case raftpb.EntryNormal:
			if len(e.GetData()) == 0 {
				break // a new leader's empty entry
			}
			kind, id, cmd, err := decodeKind(e.GetData())
			if err != nil {
				return fmt.Errorf("entry %d: %w", e.GetIndex(), err)
			}
			var val any
			switch {
			case kind == cmdMerge:
				// Synced: the coordinator acts on a freeze once every
				// replica reports it, and a crash must not undo it.
				mustSync, mergeChanged = true, true
				val, err = r.applyMerge(b, cmd, &merges)
				r.freezing = false // a freeze applied (or was refused) by now
			case r.st.merge.Frozen():
				val = fmt.Errorf("%w: range %d (for range %d)", ErrRangeFrozen, r.rangeID, r.st.merge.FrozenFor)
			case kind == cmdSplit:
				// Synced: the new range's entries go to the log's own
				// store, synced, and must not outlive the state that
				// makes the range (sweepLogs would drop them).
				mustSync = true
				val, err = r.applySplit(b, cmd, &splits)
			default:
				val = r.sm.Apply(b, cmd)
			}
			if err != nil {
				return fmt.Errorf("entry %d: %w", e.GetIndex(), err)
			}
			if p := r.waiters[id]; p != nil && p.index == e.GetIndex() && p.term == e.GetTerm() {
				out = append(out, delivery{p: p, val: val})
				delete(r.waiters, id)
			}
		case raftpb.EntryConfChange, raftpb.EntryConfChangeV2:
			var cc raftpb.ConfChangeI
			if e.GetType() == raftpb.EntryConfChange {
				cc = &raftpb.ConfChange{}
			} else {
				cc = &raftpb.ConfChangeV2{}
			}
			if err := proto.Unmarshal(e.GetData(), cc.(proto.Message)); err != nil {
				return fmt.Errorf("%w: entry %d: conf change: %v", ErrCorrupt, e.GetIndex(), err)
			}
			var refused error
			if r.st.merge.Frozen() {
				// A frozen range's membership is final (merge.go): a
				// change that reached the log after the freeze (proposed
				// by a new leader that had not applied it yet) applies as
				// no change, the same on every replica.
				cc = noChange
				refused = fmt.Errorf("%w: range %d (for range %d)", ErrRangeFrozen, r.rangeID, r.st.merge.FrozenFor)
			} else {
				confChanged = true
			}
			r.st.cs = r.rn.ApplyConfChange(cc)
			if id, ok := confChangeID(e); ok {
				if p := r.waiters[id]; p != nil && p.index == e.GetIndex() && p.term == e.GetTerm() {
					out = append(out, delivery{p: p, err: refused})
					delete(r.waiters, id)
				}
			}
		}
		if r.isLeader && e.GetTerm() == r.term {
			r.appliedInTerm = true
		}
	}
	applied := ents[len(ents)-1].GetIndex()
	if err := b.Set(stateKey(r.st.prefix, suffixApplied), encodeUint64s(applied), nil); err != nil {
		return err
	}
	if confChanged {
		if err := r.st.setProto(b, suffixConfState, r.st.cs); err != nil {
			return err
		}
	}
	truncIndex, truncTerm := r.truncation(applied), uint64(0)
	if truncIndex > 0 {
		var err error
		if truncTerm, err = r.st.truncate(b, truncIndex); err != nil {
			return err
		}
	}
	commitOpt := pebble.NoSync
	if mustSync || truncIndex > 0 {
		// A truncation is synced before its entries leave the log: a
		// crash must not take the applied index back below it.
		commitOpt = pebble.Sync
	}
	if err := b.Commit(commitOpt); err != nil {
		return err
	}
	if mergeChanged {
		r.mu.Lock()
		r.mu.merge = r.st.merge
		r.mu.Unlock()
	}
	if c, ok := r.sm.(Committer); ok {
		c.Committed()
	}
	r.st.applied = applied
	if truncIndex > 0 {
		if err := r.st.truncated(truncIndex, truncTerm); err != nil {
			return err
		}
	}
	if confChanged {
		r.mu.Lock()
		r.mu.desc.Replicas = slices.Clone(r.st.cs.GetVoters())
		r.mu.Unlock()
	}
	for _, sp := range splits {
		if err := r.s.finishSplit(r, sp); err != nil {
			return err
		}
	}
	for _, m := range merges {
		r.s.finishMerge(m)
	}
	for _, d := range out {
		d.p.finish(d.val, d.err)
	}
	// A waiter whose index is now applied under another entry lost its
	// entry to a new leader's log.
	for id, p := range r.waiters {
		if p.index != 0 && p.index <= applied {
			delete(r.waiters, id)
			p.finish(nil, fmt.Errorf("%w: range %d: entry %d was replaced by another leader", ErrNotLeader, r.rangeID, p.index))
		}
	}
	return nil
}

// truncation returns the index up to which the log should be truncated now,
// or 0. A leader keeps what recently active followers still need.
func (r *Replica) truncation(applied uint64) uint64 {
	o := &r.s.opts
	if applied-r.st.truncIndex <= o.TruncateEvery {
		return 0
	}
	target := applied - o.LogKeep
	if r.isLeader {
		r.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
			if id != o.NodeID && pr.RecentActive && pr.Match < target {
				target = pr.Match
			}
		})
	}
	if target <= r.st.truncIndex {
		return 0
	}
	return target
}

// publish copies the loop's view into the fields other goroutines read.
func (r *Replica) publish() {
	o := &r.s.opts
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mu.status = Status{
		RangeID:  r.rangeID,
		Leader:   r.leader,
		IsLeader: r.isLeader,
		Term:     r.term,
		Commit:   r.commit,
		Applied:  r.st.applied,
		Quiesced: r.quiesced,
	}
	if r.isLeader && r.lease.term == r.term {
		r.mu.status.LeaseExpiration = r.lease.expiration(o.MaxClockOffset, o.electionTimeout())
	}
	if cs := r.st.cs; cs != r.pubCS {
		r.pubCS = cs
		r.pubVoters = slices.Clone(cs.GetVoters())
		r.pubLearners = append(slices.Clone(cs.GetLearners()), cs.GetLearnersNext()...)
	}
	st := &r.mu.status
	st.Voters, st.Learners, st.Joint = r.pubVoters, r.pubLearners, len(r.pubCS.GetVotersOutgoing()) > 0
	if r.isLeader && (st.Joint || len(st.Learners) > 0) {
		st.Match = map[uint64]uint64{}
		r.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) { st.Match[id] = pr.Match })
	}
	r.mu.lease = r.lease
	r.mu.appliedInTerm = r.appliedInTerm
	if !r.isInitialized() && r.initReady() {
		close(r.initDone) // after the status above, so AddReplica's caller sees it
	}
}

// initReady reports whether AddReplica may return: the replay of
// committed entries is done and, for a single voter, which needs nobody
// else to elect it, it leads with a lease, so Propose and ReadReady work
// as soon as AddReplica returns. Loop-owned state (or before the loop knows r).
func (r *Replica) initReady() bool {
	if r.st.applied < r.initTarget {
		return false
	}
	return !r.singleVoter || (r.isLeader && r.appliedInTerm && r.lease.term == r.term)
}
