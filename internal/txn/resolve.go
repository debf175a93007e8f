// Package txn coordinates multi-object transactions over the ranges
// (Percolator, see mvcc's package doc for the rules each range applies):
// a transaction reads at its start timestamp, buffers its writes, and to
// commit locks them (prewrite), takes a commit timestamp, commits its
// primary lock and then resolves the others in the background; one range
// commits in one step. It also resolves the locks that readers and
// writers outside the transaction meet: the primary says whether the
// transaction committed, and a transaction whose coordinator went silent
// is rolled back once its primary lock expires. Any node can do that, so a
// transaction never stays half-done after a crash.
package txn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cairn-db/cairn/internal/clock"
	"github.com/cairn-db/cairn/internal/keys"
	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/mvcc"
	"github.com/cairn-db/cairn/internal/rangeclient"
	"github.com/cairn-db/cairn/internal/tstamp"
)

// Config configures a Manager. Every field is required unless it says.
type Config struct {
	// Ranges routes commands and reads to leaseholders.
	Ranges *rangeclient.Client
	// Table returns the range table of space id (a transaction's primary
	// may be in another space than the lock being resolved).
	Table func(ctx context.Context, space uint32) (*rangeclient.Table, error)
	// Timestamps hands out start and commit timestamps.
	Timestamps interface {
		Next(ctx context.Context) (uint64, error)
	}
	// TTL is how long a lock outlives its coordinator's last heartbeat
	// (default 10 s); the heartbeat runs every TTL/3.
	TTL time.Duration
	// MaxHold bounds how long an open transaction holds the safe point
	// (Floor; default DefaultMaxHold): one open longer, forgotten or not,
	// no longer keeps the collector from pruning what it may read, and
	// its reads of what was pruned fail as too old.
	MaxHold time.Duration
	// Clock defaults to time.Now.
	Clock func() time.Time
	// Logger defaults to slog.Default.
	Logger *slog.Logger
}

// Manager begins transactions and resolves the locks of others.
type Manager struct {
	cfg Config
	// open holds the start timestamps of the transactions begun here
	// (Begin) and not yet ended: the collector's safe point (Floor) stays
	// at or below them.
	open struct {
		mu     sync.Mutex
		starts map[uint64]int // start timestamp -> transactions
		// pending holds, for each Begin waiting for its timestamp, the
		// newest timestamp the manager had seen when it asked (last): the
		// one it gets is newer.
		pending map[uint64]int
		last    uint64
	}
	// bg bounds the background resolution of secondaries.
	bg chan struct{}
	wg sync.WaitGroup
	// bgMu orders background's wg.Add before Close's Wait: a commit still
	// running when the node closes starts nothing once closed is set.
	bgMu   sync.Mutex
	closed bool
	ctx    context.Context
	cancel context.CancelFunc
	res    *resolver
}

// DefaultTTL is a lock's lifetime without a heartbeat.
const DefaultTTL = 10 * time.Second

// DefaultMaxHold is how long an open transaction holds the safe point.
const DefaultMaxHold = time.Hour

// New returns a manager; Close stops its background work.
func New(cfg Config) *Manager {
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.MaxHold <= 0 {
		cfg.MaxHold = DefaultMaxHold
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{cfg: cfg, bg: make(chan struct{}, 64), ctx: ctx, cancel: cancel}
	m.startResolver()
	return m
}

// Close stops the background resolution and waits for it.
func (m *Manager) Close() {
	m.bgMu.Lock()
	m.closed = true
	m.bgMu.Unlock()
	m.cancel()
	m.wg.Wait()
}

// background runs f unless too much background work is queued (a lock
// left for later is resolved by the next reader that meets it).
func (m *Manager) background(f func(ctx context.Context)) {
	m.bgMu.Lock()
	defer m.bgMu.Unlock()
	if m.closed {
		return // the node is closing: the next reader resolves what is left
	}
	select {
	case m.bg <- struct{}{}:
	default:
		return
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer func() { <-m.bg }()
		ctx, cancel := context.WithTimeout(m.ctx, rangeclient.Patience)
		defer cancel()
		f(ctx)
	}()
}

func (m *Manager) nowMS() int64 { return m.cfg.Clock().UnixMilli() }

// table returns the table of obj's space.
func (m *Manager) table(ctx context.Context, obj []byte) (*rangeclient.Table, error) {
	space, _, _, err := keys.DecodeObject(obj)
	if err != nil {
		return nil, fmt.Errorf("txn: object key %x: %w", obj, err)
	}
	return m.cfg.Table(ctx, space)
}

// propose runs cmd on the range of obj.
func (m *Manager) propose(ctx context.Context, obj, cmd []byte) (*kv.Result, error) {
	t, err := m.table(ctx, obj)
	if err != nil {
		return nil, err
	}
	return m.cfg.Ranges.Propose(ctx, t, obj, cmd)
}

// check asks the primary of l's transaction for its state. A lock whose
// own expiry passed lets the check roll back a transaction the primary has
// no trace of (its prewrite never arrived); an expired primary lock is
// rolled back.
func (m *Manager) check(ctx context.Context, l *mvcc.Lock) (mvcc.TxnStatus, error) {
	now := m.nowMS()
	// A read first: most locks a reader meets belong to transactions
	// that are deciding, or decided; only a rollback is a command.
	t, err := m.table(ctx, l.Primary)
	if err != nil {
		return mvcc.TxnStatus{}, err
	}
	st, err := m.cfg.Ranges.TxnStatus(ctx, t, l.Primary, l.StartTS)
	if err != nil {
		return mvcc.TxnStatus{}, err
	}
	switch {
	case st.State == mvcc.TxnCommitted, st.State == mvcc.TxnRolledBack:
		return st, nil
	case st.State == mvcc.TxnPending && now < st.Expires:
		return st, nil
	case st.State == mvcc.TxnMissing && now < l.Expires:
		return st, nil
	}
	c := &kv.CheckTxnCmd{Primary: l.Primary, StartTS: l.StartTS, Policy: mvcc.CheckPolicy{
		Now: now, RollbackExpired: true, RollbackMissing: now >= l.Expires,
	}}
	res, err := m.propose(ctx, l.Primary, c.Encode())
	if err != nil {
		return mvcc.TxnStatus{}, err
	}
	return res.Status, nil
}

// resolve commits or rolls back obj's lock l as its transaction's status
// says (which must be decided).
func (m *Manager) resolve(ctx context.Context, obj []byte, l *mvcc.Lock, st mvcc.TxnStatus) error {
	var cmd []byte
	switch st.State {
	case mvcc.TxnCommitted:
		cmd = (&kv.CommitCmd{StartTS: l.StartTS, CommitTS: st.CommitTS, Objs: [][]byte{obj}}).Encode()
	case mvcc.TxnRolledBack:
		cmd = (&kv.RollbackCmd{StartTS: l.StartTS, Objs: [][]byte{obj}, Primary: l.IsPrimary(obj)}).Encode()
	default:
		return fmt.Errorf("txn: resolve a %v transaction", st.State)
	}
	_, err := m.propose(ctx, obj, cmd)
	if errors.Is(err, rangeclient.ErrTxnAborted) {
		return nil // resolved meanwhile (rolled back by another reader)
	}
	return err
}

// ReadPast decides a read of one key at readTS (0: the latest) that met a
// lock (le, from rangeclient.Read). It returns the version to read (nil:
// none; a delete marker as it is), or wait: the lock's transaction may
// still commit at or before readTS; wait a moment (Backoff) and read
// again. A decided lock is resolved in the background.
func (m *Manager) ReadPast(ctx context.Context, le *rangeclient.LockedError, readTS uint64) (rec *mvcc.Record, wait bool, err error) {
	if len(le.Locks) != 1 || !le.Read {
		return nil, false, fmt.Errorf("txn: a read met %d locks", len(le.Locks))
	}
	obj, l := le.Locks[0].Obj, le.Locks[0].Lock
	st, err := m.check(ctx, l)
	if err != nil {
		return nil, false, err
	}
	switch st.State {
	case mvcc.TxnCommitted:
		m.background(func(ctx context.Context) { m.logResolve(m.resolve(ctx, obj, l, st)) })
		if readTS != 0 && st.CommitTS > readTS {
			return le.Under, false, nil
		}
		rec := l.Rec
		rec.Version, rec.StartTS = st.CommitTS, l.StartTS
		if le.Under != nil {
			rec.Parent = le.Under.Version
		}
		return rec, false, nil
	case mvcc.TxnRolledBack:
		m.background(func(ctx context.Context) { m.logResolve(m.resolve(ctx, obj, l, st)) })
		return le.Under, false, nil
	}
	// Pending (or its primary not locked yet). A read of the latest
	// version orders itself before the commit; a read at a timestamp must
	// know whether the commit lands at or before it.
	if readTS == 0 {
		return le.Under, false, nil
	}
	return nil, true, nil
}

// Settle resolves the locks that stopped a request (a listing, a write):
// each whose transaction is decided is resolved now; if any is still
// pending it waits a moment (Backoff(attempt)). The caller then tries
// again.
func (m *Manager) Settle(ctx context.Context, locks []mvcc.LockEntry, attempt int) error {
	pending := false
	for _, e := range locks {
		decided, err := m.settleOne(ctx, e)
		if err != nil {
			return err
		}
		pending = pending || !decided
	}
	if pending {
		return clock.Sleep(ctx, Backoff(attempt))
	}
	return nil
}

// SettleDecided resolves the locks whose transactions are decided and
// returns the smallest start timestamp of those still pending (0: none),
// without waiting: a reader that can read below it (a watch) need not
// wait for them, since their versions will all be committed after it.
func (m *Manager) SettleDecided(ctx context.Context, locks []mvcc.LockEntry) (pendingMin uint64, err error) {
	for _, e := range locks {
		decided, err := m.settleOne(ctx, e)
		if err != nil {
			return 0, err
		}
		if !decided && (pendingMin == 0 || e.Lock.StartTS < pendingMin) {
			pendingMin = e.Lock.StartTS
		}
	}
	return pendingMin, nil
}

// settleOne asks e's primary about its transaction and, if it is decided,
// resolves e as it says; decided false is a transaction still pending.
func (m *Manager) settleOne(ctx context.Context, e mvcc.LockEntry) (decided bool, err error) {
	st, err := m.check(ctx, e.Lock)
	if err != nil {
		return false, err
	}
	if st.State != mvcc.TxnCommitted && st.State != mvcc.TxnRolledBack {
		return false, nil
	}
	return true, m.resolve(ctx, e.Obj, e.Lock, st)
}

// Backoff is the wait before the next look at a pending transaction.
func Backoff(attempt int) time.Duration {
	d := time.Millisecond << min(attempt, 7)
	return min(d, 100*time.Millisecond)
}

func (m *Manager) logResolve(err error) {
	if err != nil && !errors.Is(err, context.Canceled) {
		m.cfg.Logger.Debug("resolving a lock failed; the next reader will", "err", err)
	}
}

// fmtTS is for messages.
func fmtTS(ts uint64) string { return tstamp.String(ts) }

// ResolveExpired resolves locks whose own expiry passed (a sweeper's
// finds): each whose transaction is decided, or whose primary expired too
// (rolled back here), is committed or removed; one whose primary is still
// alive (a long commit, heartbeating) is left.
func (m *Manager) ResolveExpired(ctx context.Context, locks []mvcc.LockEntry) error {
	var errs []error
	for _, e := range locks {
		_, err := m.settleOne(ctx, e)
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
