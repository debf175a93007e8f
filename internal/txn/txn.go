package txn

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/cairn-db/cairn/internal/clock"
	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/mvcc"
	"github.com/cairn-db/cairn/internal/rangeclient"
	"github.com/cairn-db/cairn/internal/tstamp"
)

// Options are a transaction's.
type Options struct {
	// Serializable validates at commit that every key read is unchanged
	// (read locks): the transaction is serializable, not only snapshot
	// isolated.
	Serializable bool
}

// Txn is one transaction. Its methods are safe for concurrent use; once
// Commit or Rollback has been called, it is done.
type Txn struct {
	m    *Manager
	opts Options
	// StartTS is the snapshot every read sees; the transaction's id.
	StartTS uint64

	mu     sync.Mutex
	writes map[string]*write
	reads  map[string]uint64 // object key -> version seen (0: none)
	done   bool
	// open: StartTS is registered with the manager until the end.
	open bool
}

type write struct {
	obj []byte
	rec *mvcc.Record // a delete marker for a delete
	ret mvcc.Retention
	// expect, when set, is the condition on the key's newest version at
	// the start (a conditional write).
	hasExpect bool
	expect    uint64
}

// Errors a transaction returns (beside the range client's).
var (
	// ErrDone: the transaction has committed or rolled back.
	ErrDone = errors.New("txn: the transaction is over")
)

// ConflictError says the transaction lost a conflict and did nothing; it
// may run again from the start (Retryable).
type ConflictError struct {
	Obj    []byte // the key
	Reason string
}

func (e *ConflictError) Error() string { return "txn: conflict: " + e.Reason }

// Retryable reports whether err means the transaction did nothing and
// may run again from its start: a conflict, a rollback by a reader while
// its coordinator was too slow, a refused timestamp.
func Retryable(err error) bool {
	var ce *ConflictError
	return errors.As(err, &ce) || errors.Is(err, rangeclient.ErrTxnAborted) || errors.Is(err, rangeclient.ErrTxnConflict)
}

// Begin starts a transaction at a fresh timestamp. Until it commits or
// rolls back, Floor stays at or below its snapshot: the collector prunes
// no version it may read.
func (m *Manager) Begin(ctx context.Context, opts Options) (*Txn, error) {
	// Until its timestamp comes, the transaction is counted at the
	// newest timestamp seen so far, which is older: a Floor whose own
	// timestamp comes after this one's therefore sees it.
	m.open.mu.Lock()
	if m.open.starts == nil {
		m.open.starts, m.open.pending = map[uint64]int{}, map[uint64]int{}
	}
	hold := m.open.last
	m.open.pending[hold]++
	m.open.mu.Unlock()
	ts, err := m.cfg.Timestamps.Next(ctx)
	m.open.mu.Lock()
	defer m.open.mu.Unlock()
	if m.open.pending[hold]--; m.open.pending[hold] <= 0 {
		delete(m.open.pending, hold)
	}
	if err != nil {
		return nil, err
	}
	m.open.last = max(m.open.last, ts)
	m.open.starts[ts]++
	tx := m.BeginAt(ts, opts)
	tx.open = true
	return tx, nil
}

// ended unregisters a transaction Begin registered; tx.mu is held and
// tx.done was just set.
func (tx *Txn) ended() {
	if !tx.open {
		return
	}
	tx.open = false
	m := tx.m
	m.open.mu.Lock()
	defer m.open.mu.Unlock()
	if m.open.starts[tx.StartTS]--; m.open.starts[tx.StartTS] <= 0 {
		delete(m.open.starts, tx.StartTS)
	}
}

// Floor returns a timestamp at or below the snapshot of every transaction
// begun here that has not ended, and of every one begun after Floor
// returns: a fresh timestamp, or the oldest open snapshot if older (held
// is then true). A version that a newer one replaced at or before the
// floor is read by no transaction of this node, now or later. Not
// counted: transactions open longer than MaxHold, and those begun with
// BeginAt; their reads of a version pruned since learn that their
// snapshot is too old.
//
// The timestamps come from one oracle: one handed out after another was
// received is newer. A Begin whose timestamp is older than Floor's asked
// for it before Floor's came back, and registered itself (pending) before
// it asked; one that asks later gets a newer timestamp.
func (m *Manager) Floor(ctx context.Context) (floor uint64, held bool, err error) {
	now, err := m.cfg.Timestamps.Next(ctx)
	if err != nil {
		return 0, false, err
	}
	m.open.mu.Lock()
	defer m.open.mu.Unlock()
	m.open.last = max(m.open.last, now)
	floor = now
	for ts := range m.open.pending {
		if ts < floor {
			floor, held = ts, true // a transaction beginning
		}
	}
	oldest := tstamp.Physical(now) - m.cfg.MaxHold.Milliseconds()
	for ts := range m.open.starts {
		if ts < floor && tstamp.Physical(ts) >= oldest {
			floor, held = ts, true
		}
	}
	return floor, held, nil
}

// BeginAt starts a transaction whose snapshot is startTS, a timestamp the
// oracle handed out (a client's optimistic transaction).
func (m *Manager) BeginAt(startTS uint64, opts Options) *Txn {
	return &Txn{m: m, opts: opts, StartTS: startTS, writes: map[string]*write{}, reads: map[string]uint64{}}
}

// Read returns obj's version visible to the transaction: its own write,
// else the newest committed at StartTS (nil, with no error, if there is
// none or it is a delete marker). t is obj's space's table.
func (tx *Txn) Read(ctx context.Context, t *rangeclient.Table, obj []byte) (*mvcc.Record, bool, error) {
	tx.mu.Lock()
	if tx.done {
		tx.mu.Unlock()
		return nil, false, ErrDone
	}
	if w, ok := tx.writes[string(obj)]; ok {
		tx.mu.Unlock()
		if w.rec.DeleteMarker {
			return nil, true, nil
		}
		return w.rec, true, nil
	}
	tx.mu.Unlock()
	rec, err := tx.m.ReadAt(ctx, t, obj, tx.StartTS)
	if err != nil {
		return nil, false, err
	}
	seen := uint64(0)
	if rec != nil && !rec.DeleteMarker {
		seen = rec.Version
	} else {
		rec = nil
	}
	tx.mu.Lock()
	if _, ok := tx.reads[string(obj)]; !ok {
		tx.reads[string(obj)] = seen
	}
	tx.mu.Unlock()
	return rec, false, nil
}

// ReadAt reads obj's newest version at ts (nil: none, or a delete
// marker), resolving the locks it meets.
func (m *Manager) ReadAt(ctx context.Context, t *rangeclient.Table, obj []byte, ts uint64) (*mvcc.Record, error) {
	for attempt := 0; ; attempt++ {
		rec, err := m.cfg.Ranges.Read(ctx, t, obj, 0, ts)
		var le *rangeclient.LockedError
		switch {
		case err == nil:
			return rec, nil
		case errors.Is(err, rangeclient.ErrHistoryPruned):
			// What the snapshot saw is gone: reading on would see a
			// different history. The transaction runs again, from a
			// snapshot that still has it.
			var e *rangeclient.Error
			errors.As(err, &e)
			return nil, &rangeclient.Error{Code: rangeclient.CodeTxnAborted, Msg: "snapshot too old: " + e.Msg}
		case errors.Is(err, rangeclient.ErrNotFound):
			return nil, nil
		case errors.As(err, &le):
			rec, wait, err := m.ReadPast(ctx, le, ts)
			if err != nil {
				return nil, err
			}
			if !wait {
				if rec != nil && rec.DeleteMarker {
					rec = nil
				}
				return rec, nil
			}
			if err := clock.Sleep(ctx, Backoff(attempt)); err != nil {
				return nil, err
			}
		default:
			return nil, err
		}
	}
}

// Saw records in the read set that the transaction saw version v of obj
// (0: none) outside Read (a listing).
func (tx *Txn) Saw(obj []byte, v uint64) {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if _, ok := tx.reads[string(obj)]; !ok {
		tx.reads[string(obj)] = v
	}
}

// Write buffers a write of obj (rec's Version is set at commit; a delete
// marker deletes) under retention ret.
func (tx *Txn) Write(obj []byte, rec *mvcc.Record, ret mvcc.Retention) error {
	return tx.write(&write{obj: slices.Clone(obj), rec: rec, ret: ret})
}

// WriteIf is Write on condition that obj's newest committed version at
// the transaction's start is expect (0: none, or a delete marker).
func (tx *Txn) WriteIf(obj []byte, rec *mvcc.Record, ret mvcc.Retention, expect uint64) error {
	return tx.write(&write{obj: slices.Clone(obj), rec: rec, ret: ret, hasExpect: true, expect: expect})
}

func (tx *Txn) write(w *write) error {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if tx.done {
		return ErrDone
	}
	tx.writes[string(w.obj)] = w
	return nil
}

// Retain replaces the retention of every buffered write with f's answer
// (a committer that takes its spaces' policies at the commit, not when
// the writes were buffered).
func (tx *Txn) Retain(f func(obj []byte, ret mvcc.Retention) mvcc.Retention) {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	for _, w := range tx.writes {
		w.ret = f(w.obj, w.ret)
	}
}

// Writes returns the buffered writes in key order, for a listing that
// must show them: the object key and the record (a delete marker for a
// delete).
func (tx *Txn) Writes() []mvcc.Entry {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	out := make([]mvcc.Entry, 0, len(tx.writes))
	for _, w := range tx.writes {
		out = append(out, mvcc.Entry{Obj: w.obj, Rec: w.rec})
	}
	slices.SortFunc(out, func(a, b mvcc.Entry) int { return bytes.Compare(a.Obj, b.Obj) })
	return out
}

// Rollback ends the transaction without writing anything (nothing is
// locked before Commit).
func (tx *Txn) Rollback() {
	tx.mu.Lock()
	tx.done = true
	tx.ended()
	tx.mu.Unlock()
}

// Limits of one command of a commit; a larger commit is split.
const (
	maxCmdKeys  = kv.MaxTxnKeys
	maxCmdBytes = 1 << 20
)

// Commit commits the transaction and returns its commit timestamp (for a
// read-only transaction, its start). On failure nothing was written; a
// Retryable error says the transaction may run again from the start.
// ErrOutcomeUnknown (from the range client) says it may have committed.
func (tx *Txn) Commit(ctx context.Context) (uint64, error) {
	tx.mu.Lock()
	if tx.done {
		tx.mu.Unlock()
		return 0, ErrDone
	}
	tx.done = true
	tx.ended()
	muts := tx.mutations()
	tx.mu.Unlock()
	if len(muts) == 0 || !hasWrite(muts) {
		// Read-only: its snapshot is consistent, and serializable too (the
		// writers it may have overlapped validated their own reads).
		return tx.StartTS, nil
	}
	ts, err := tx.m.commit(ctx, tx.StartTS, muts)
	if errors.Is(err, rangeclient.ErrPrecondition) && !conditional(muts, tx.writes) {
		// No write had a condition of its own: the failed expectation is
		// the read set's. A version the client saw is not the newest at
		// the start: it read at an earlier snapshot (a cache) than the
		// one it commits from, and runs again from a new start.
		return 0, &ConflictError{Reason: "a version the transaction read is not the newest at its start (it was read earlier, and replaced since)"}
	}
	return ts, err
}

// conditional reports whether a write of muts carries a condition of its
// own (WriteIf), not one its read set gave it.
func conditional(muts []mvcc.Mutation, writes map[string]*write) bool {
	for _, m := range muts {
		if w := writes[string(m.Obj)]; w != nil && w.hasExpect {
			return true
		}
	}
	return false
}

// mutations lists the writes and, when serializable, the reads to
// validate, in key order.
func (tx *Txn) mutations() []mvcc.Mutation {
	var muts []mvcc.Mutation
	for _, w := range tx.writes {
		m := mvcc.Mutation{Obj: w.obj, Kind: mvcc.LockWrite, Rec: w.rec, Retention: w.ret, HasExpect: w.hasExpect, Expect: w.expect}
		if seen, ok := tx.reads[string(w.obj)]; ok && !m.HasExpect && tx.opts.Serializable {
			m.HasExpect, m.Expect = true, seen
		}
		muts = append(muts, m)
	}
	if tx.opts.Serializable {
		for k, seen := range tx.reads {
			if _, ok := tx.writes[k]; !ok {
				muts = append(muts, mvcc.Mutation{Obj: []byte(k), Kind: mvcc.LockRead, HasExpect: true, Expect: seen})
			}
		}
	}
	slices.SortFunc(muts, func(a, b mvcc.Mutation) int { return bytes.Compare(a.Obj, b.Obj) })
	return muts
}

func hasWrite(muts []mvcc.Mutation) bool {
	for _, m := range muts {
		if m.Kind == mvcc.LockWrite {
			return true
		}
	}
	return false
}

// group is the mutations of one range, split into commands.
type group struct {
	r    *rangeclient.Range
	muts []mvcc.Mutation
}

// groups routes muts (in key order) to their ranges, in the ranges' key
// order, each split into pieces that fit one command.
func (m *Manager) groups(ctx context.Context, muts []mvcc.Mutation) ([]group, error) {
	var out []group
	var size int
	for _, mu := range muts {
		t, err := m.table(ctx, mu.Obj)
		if err != nil {
			return nil, err
		}
		r := t.Route(mu.Obj)
		n := len(mu.Obj) + 64
		if mu.Rec != nil {
			n += len(mu.Rec.Inline) + len(mu.Rec.Manifest) + 256
		}
		if len(out) == 0 || out[len(out)-1].r != r || len(out[len(out)-1].muts) == maxCmdKeys || size+n > maxCmdBytes {
			out = append(out, group{r: r})
			size = 0
		}
		g := &out[len(out)-1]
		g.muts = append(g.muts, mu)
		size += n
	}
	return out, nil
}

// commit runs the commit protocol over muts (sorted, with a write).
func (m *Manager) commit(ctx context.Context, startTS uint64, muts []mvcc.Mutation) (uint64, error) {
	for attempt := 0; ; attempt++ {
		gs, err := m.groups(ctx, muts)
		if err != nil {
			return 0, err
		}
		var ts uint64
		if len(gs) == 1 {
			ts, err = m.commitOnePhase(ctx, startTS, gs[0])
		} else {
			ts, err = m.commitTwoPhase(ctx, startTS, muts, gs)
		}
		if errors.Is(err, rangeclient.ErrRangeMoved) && attempt < 16 {
			continue // a range split or merged under the commit: group again
		}
		return ts, err
	}
}

// lockWait decides what a commit does about a lock it met: a pending
// lock of an older transaction makes this one give way (wait-die: no
// deadlock), a younger one's is waited for; a decided one is resolved.
//
// A one-phase commit holds no lock, so it cannot close a cycle: it
// waits for any (dies false).
func (m *Manager) lockWait(ctx context.Context, startTS uint64, le *rangeclient.LockedError, attempt int, dies bool) error {
	for _, e := range le.Locks {
		decided, err := m.settleOne(ctx, e)
		if err != nil {
			return err
		}
		if decided {
			continue
		}
		if dies && e.Lock.StartTS < startTS {
			return &ConflictError{Obj: e.Obj, Reason: fmt.Sprintf("object %x is locked by an older transaction (started %s)", e.Obj, fmtTS(e.Lock.StartTS))}
		}
		if attempt > 200 {
			return &ConflictError{Obj: e.Obj, Reason: fmt.Sprintf("object %x stayed locked by the transaction started %s", e.Obj, fmtTS(e.Lock.StartTS))}
		}
		return clock.Sleep(ctx, Backoff(attempt))
	}
	return nil
}

func conflict(err error) error {
	var ce *rangeclient.ConflictError
	if errors.As(err, &ce) {
		return &ConflictError{Obj: ce.Obj, Reason: fmt.Sprintf("object %x has version %s, committed after the transaction started", ce.Obj, fmtTS(ce.Version))}
	}
	return err
}

// commitOnePhase commits a transaction whose keys are all in one range
// in one command, at a commit timestamp taken just before it (the
// leaseholder's guard refuses one a later read overtook: take another).
func (m *Manager) commitOnePhase(ctx context.Context, startTS uint64, g group) (uint64, error) {
	for attempt := 0; ; attempt++ {
		commitTS, err := m.cfg.Timestamps.Next(ctx)
		if err != nil {
			return 0, err
		}
		cmd := (&kv.OnePhaseCmd{StartTS: startTS, CommitTS: commitTS, Muts: g.muts}).Encode()
		_, err = m.cfg.Ranges.ProposeAt(ctx, g.r, cmd)
		var le *rangeclient.LockedError
		switch {
		case err == nil:
			return commitTS, nil
		case errors.Is(err, rangeclient.ErrConflict) && attempt < 64:
			continue
		case errors.As(err, &le):
			if err := m.lockWait(ctx, startTS, le, attempt, false); err != nil {
				return 0, err
			}
			continue
		}
		return 0, conflict(err)
	}
}

// commitTwoPhase locks every key (every range in parallel), takes the
// commit timestamp, commits the primary's range, and resolves the rest in
// the background.
//
// A secondary lock may land before its primary: a reader that meets it
// finds the primary without a trace of the transaction (TxnMissing), which
// it treats as pending until the secondary lock expires; only then is the
// transaction rolled back, and the record that rollback leaves on the
// primary refuses a prewrite that comes later (mvcc.Prewrite).
func (m *Manager) commitTwoPhase(ctx context.Context, startTS uint64, muts []mvcc.Mutation, gs []group) (uint64, error) {
	primary := muts[0].Obj
	for _, mu := range muts {
		if mu.Kind == mvcc.LockWrite {
			primary = mu.Obj // a read lock commits no version to tell
			break
		}
	}
	// The primary's group is gs[0]: its commit is the commit point.
	pi := slices.IndexFunc(gs, func(g group) bool {
		return slices.ContainsFunc(g.muts, func(mu mvcc.Mutation) bool { return bytes.Equal(mu.Obj, primary) })
	})
	gs[0], gs[pi] = gs[pi], gs[0]

	hb := m.heartbeat(primary, startTS)
	defer hb.stop()
	// rollback removes the locks before the refusal is answered, so a
	// client retrying at once does not meet them: younger than they are,
	// it would give way to a transaction already over. Every group is
	// rolled back, not only those whose prewrite succeeded: a group that
	// failed may have locked some of its keys (one by one after a range
	// moved), and a prewrite whose caller gave up may still apply; a
	// rollback removes only this transaction's locks. It outlives the
	// caller's context (the locks must go even if the client left) but
	// not the node's.
	rollback := func() {
		rctx, cancel := context.WithTimeout(m.ctx, rangeclient.Patience)
		defer cancel()
		m.rollbackGroups(rctx, startTS, primary, gs)
	}
	errs := make([]error, len(gs))
	var wg sync.WaitGroup
	for i := range gs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = m.prewrite(ctx, startTS, primary, gs[i])
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		rollback()
		for _, e := range errs {
			if e != nil {
				return 0, e
			}
		}
	}
	commitTS, err := m.cfg.Timestamps.Next(ctx)
	if err != nil {
		rollback()
		return 0, err
	}
	if hb.lost() {
		rollback()
		return 0, fmt.Errorf("txn: %w: its locks expired before the commit", rangeclient.ErrTxnAborted)
	}
	// The commit point: the primary's range, the primary first.
	first := objsOf(gs[0].muts)
	i := slices.IndexFunc(first, func(o []byte) bool { return bytes.Equal(o, primary) })
	first[0], first[i] = first[i], first[0]
	left, err := m.commitPrimary(ctx, startTS, commitTS, first)
	if err != nil {
		if !errors.Is(err, rangeclient.ErrOutcomeUnknown) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			// Not committed: free the keys now rather than at expiry (a
			// rollback never undoes a commit, should one have landed).
			rollback()
		}
		return 0, err
	}
	hb.stop()
	rest := left
	for _, g := range gs[1:] {
		rest = append(rest, objsOf(g.muts)...)
	}
	m.resolveSecondaries(primary, startTS, commitTS, rest)
	return commitTS, nil
}

// prewrite locks one group, waiting out (or giving way to) other
// transactions' locks.
func (m *Manager) prewrite(ctx context.Context, startTS uint64, primary []byte, g group) error {
	expires := m.cfg.Clock().Add(m.cfg.TTL).UnixMilli()
	cmd := (&kv.PrewriteCmd{StartTS: startTS, Primary: primary, Expires: expires, Muts: g.muts}).Encode()
	for attempt := 0; ; attempt++ {
		_, err := m.cfg.Ranges.ProposeAt(ctx, g.r, cmd)
		var le *rangeclient.LockedError
		if errors.As(err, &le) {
			if err := m.lockWait(ctx, startTS, le, attempt, true); err != nil {
				return err
			}
			continue
		}
		if errors.Is(err, rangeclient.ErrRangeMoved) {
			// The range split or merged: lock the keys one by one, each
			// routed anew (rare, so simple).
			for _, mu := range g.muts {
				one := (&kv.PrewriteCmd{StartTS: startTS, Primary: primary, Expires: expires, Muts: []mvcc.Mutation{mu}}).Encode()
				if err := m.prewriteOne(ctx, startTS, mu.Obj, one); err != nil {
					return err
				}
			}
			return nil
		}
		return conflict(err)
	}
}

func (m *Manager) prewriteOne(ctx context.Context, startTS uint64, obj, cmd []byte) error {
	for attempt := 0; ; attempt++ {
		_, err := m.propose(ctx, obj, cmd)
		var le *rangeclient.LockedError
		if !errors.As(err, &le) {
			return conflict(err)
		}
		if err := m.lockWait(ctx, startTS, le, attempt, true); err != nil {
			return err
		}
	}
}

// commitPrimary commits the primary's range's keys (objs[0] the primary)
// with the transaction's record, and returns those of objs it left to be
// resolved as secondaries (when the range split under the commit). An
// answer lost on the way is asked of the primary.
func (m *Manager) commitPrimary(ctx context.Context, startTS, commitTS uint64, objs [][]byte) ([][]byte, error) {
	cmd := (&kv.CommitCmd{StartTS: startTS, CommitTS: commitTS, Objs: objs, Record: true}).Encode()
	_, err := m.propose(ctx, objs[0], cmd)
	var left [][]byte
	if errors.Is(err, rangeclient.ErrRangeMoved) {
		// The primary's range split: commit the primary alone; the others
		// are secondaries like any.
		cmd = (&kv.CommitCmd{StartTS: startTS, CommitTS: commitTS, Objs: objs[:1], Record: true}).Encode()
		_, err = m.propose(ctx, objs[0], cmd)
		left = objs[1:]
	}
	if errors.Is(err, rangeclient.ErrOutcomeUnknown) {
		res, cerr := m.propose(ctx, objs[0], (&kv.CheckTxnCmd{Primary: objs[0], StartTS: startTS}).Encode())
		if cerr != nil {
			return nil, err
		}
		switch res.Status.State {
		case mvcc.TxnCommitted:
			// Whichever command committed it, resolving the others again
			// is harmless.
			return objs[1:], nil
		case mvcc.TxnRolledBack:
			return nil, fmt.Errorf("txn: %w", rangeclient.ErrTxnAborted)
		}
		return m.commitPrimary(ctx, startTS, commitTS, objs)
	}
	return left, err
}

// rollbackGroups removes a failed commit's locks, the primary's with its
// record.
func (m *Manager) rollbackGroups(ctx context.Context, startTS uint64, primary []byte, gs []group) {
	for _, g := range gs {
		objs := objsOf(g.muts)
		isPrimary := false
		if i := slices.IndexFunc(objs, func(o []byte) bool { return bytes.Equal(o, primary) }); i >= 0 {
			objs[0], objs[i] = objs[i], objs[0]
			isPrimary = true
		}
		_, err := m.cfg.Ranges.ProposeAt(ctx, g.r, (&kv.RollbackCmd{StartTS: startTS, Objs: objs, Primary: isPrimary}).Encode())
		if err != nil {
			for i, o := range objs {
				_, err := m.propose(ctx, o, (&kv.RollbackCmd{StartTS: startTS, Objs: [][]byte{o}, Primary: isPrimary && i == 0}).Encode())
				m.logResolve(err)
			}
		}
	}
}

func objsOf(muts []mvcc.Mutation) [][]byte {
	out := make([][]byte, len(muts))
	for i := range muts {
		out[i] = muts[i].Obj
	}
	return out
}

// heartbeater extends the primary lock while the commit runs.
type heartbeater struct {
	cancel  context.CancelFunc
	done    chan struct{}
	aborted chan struct{}
	once    sync.Once
}

func (m *Manager) heartbeat(primary []byte, startTS uint64) *heartbeater {
	ctx, cancel := context.WithCancel(m.ctx)
	h := &heartbeater{cancel: cancel, done: make(chan struct{}), aborted: make(chan struct{})}
	go func() {
		defer close(h.done)
		for {
			if err := clock.Sleep(ctx, m.cfg.TTL/3); err != nil {
				return
			}
			expires := m.cfg.Clock().Add(m.cfg.TTL).UnixMilli()
			res, err := m.propose(ctx, primary, (&kv.HeartbeatCmd{Primary: primary, StartTS: startTS, Expires: expires}).Encode())
			if err == nil && res.Status.State == mvcc.TxnRolledBack {
				close(h.aborted)
				return
			}
		}
	}()
	return h
}

func (h *heartbeater) stop() {
	h.once.Do(func() {
		h.cancel()
		<-h.done
	})
}

func (h *heartbeater) lost() bool {
	select {
	case <-h.aborted:
		return true
	default:
		return false
	}
}
