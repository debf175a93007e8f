package meta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cairn-db/cairn/internal/tstamp"
)

// OracleOptions configure an Oracle. The zero value of each field means its
// default.
type OracleOptions struct {
	// Clock gives the physical part of timestamps and is compared with the
	// lease deadline (Leadership.ValidUntil), so it must be the clock the
	// Store's leases are measured on. Default: time.Now (EtcdStore's clock).
	Clock func() time.Time
	// Window is how far ahead of the clock the high-water mark is persisted.
	// Default: 3s.
	Window time.Duration
	// LeaseTTL is the TTL of the "tso" leadership lease: how long the
	// oracle may go without a leader after its leader dies without
	// resigning (killed, cut off, paused). Default: 2s, the shortest lease
	// etcd grants with its default 1s election timeout.
	LeaseTTL time.Duration
	// Logger receives renewal failures and leadership changes.
	// Default: slog.Default().
	Logger *slog.Logger
}

// EnsureDefaults fills in zero fields.
func (o *OracleOptions) EnsureDefaults() {
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Window == 0 {
		o.Window = 3 * time.Second
	}
	if o.LeaseTTL == 0 {
		o.LeaseTTL = 2 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Validate reports every problem with o at once.
func (o *OracleOptions) Validate() error {
	var errs []error
	if o.Window < 3*time.Millisecond {
		errs = append(errs, fmt.Errorf("Window %v is below 3ms", o.Window))
	}
	if o.LeaseTTL < time.Second {
		errs = append(errs, fmt.Errorf("LeaseTTL %v is below 1s", o.LeaseTTL))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("meta: oracle options: %w", err)
	}
	return nil
}

// Oracle is the timestamp oracle (PD-style). While it holds the "tso"
// leadership it hands out strictly increasing timestamps, all below a
// high-water mark it persisted beforehand, and all above every timestamp
// handed out before by any oracle on the same store. See doc.go for the
// timing argument. Next and NextN may be called concurrently; Start and Close
// are serialized with each other.
type Oracle struct {
	store   Store
	opts    OracleOptions
	optsErr error         // reported by Start
	kick    chan struct{} // asks the term goroutine to persist a new window

	closeCh   chan struct{} // closed by Close; interrupts a Start that waits to win
	closeOnce sync.Once

	startMu sync.Mutex         // serializes Start and Close
	stop    context.CancelFunc // ends the current term's goroutine
	term    Leadership         // the current term's leadership, lost or not
	wg      sync.WaitGroup     // the term goroutine

	mu struct {
		sync.Mutex
		w        window
		lead     Leadership // nil: not serving
		rev      int64      // revision of /cairn/tso as this term last wrote it
		want     int        // batch size a blocked NextN needs the window to cover
		renewErr error      // the last renewal failure, nil after a success
		renewed  chan struct{}
		closed   bool
		termDone chan struct{} // closed when the current term's goroutine ends
	}
}

// TermDone returns a channel that is closed once the oracle stops serving
// its current term (leadership lost, superseded, or Close); it is closed
// already when the oracle is not serving. Start again to re-campaign.
func (o *Oracle) TermDone() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.mu.termDone == nil {
		done := make(chan struct{})
		close(done)
		return done
	}
	return o.mu.termDone
}

// Leader returns the member name holding the oracle's leadership in s
// (ErrNotFound if none): where a node that is not the leader asks for
// timestamps.
func Leader(ctx context.Context, s Store, name string) (string, error) {
	kv, err := s.Get(ctx, leaderKey(name))
	if err != nil {
		return "", err
	}
	return string(kv.Value), nil
}

// NewOracle returns a stopped Oracle on s; call Start to serve.
func NewOracle(s Store, o OracleOptions) *Oracle {
	o.EnsureDefaults()
	or := &Oracle{store: s, opts: o, optsErr: o.Validate(), kick: make(chan struct{}, 1),
		closeCh: make(chan struct{})}
	or.mu.w.span = o.Window.Milliseconds()
	or.mu.renewed = make(chan struct{})
	return or
}

// tsoRecord is the value under /cairn/tso.
type tsoRecord struct {
	V int `json:"v"`
	// High is the persisted high-water mark: every timestamp ever handed
	// out is below it.
	High uint64 `json:"high,string"`
	// Time is High's physical part, for people reading the store.
	Time string `json:"time,omitempty"`
}

func encodeTSO(high uint64) []byte {
	b, _ := json.Marshal(tsoRecord{V: formatVersionOne, High: high,
		Time: tstamp.Time(high).UTC().Format(time.RFC3339Nano)})
	return b
}

func decodeTSO(b []byte) (uint64, error) {
	var r tsoRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return 0, fmt.Errorf("meta: decode %s: %w", keyTSO, err)
	}
	if r.V != formatVersionOne {
		return 0, fmt.Errorf("meta: %s has format version %d, want %d", keyTSO, r.V, formatVersionOne)
	}
	return r.High, nil
}

// startAttempts bounds how often Start re-reads the high-water mark when a
// previous leader's last write races with ours.
const startAttempts = 5

// Start campaigns for the "tso" leadership (blocking until it is won or ctx
// ends), loads the persisted high-water mark H, persists a window above
// max(now, H) and only then begins serving. Call it again after Next returns
// ErrNotLeader to re-campaign: the new term re-loads H.
func (o *Oracle) Start(ctx context.Context) error {
	if o.optsErr != nil {
		return o.optsErr
	}
	o.startMu.Lock()
	defer o.startMu.Unlock()
	o.mu.Lock()
	closed := o.mu.closed
	o.mu.Unlock()
	if closed {
		return ErrClosed
	}
	o.endTermLocked()

	// Close cancels the campaign, which may wait for another member's term.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	started := make(chan struct{})
	defer close(started)
	go func() {
		select {
		case <-o.closeCh:
			cancel()
		case <-started:
		}
	}()
	lead, err := o.store.Campaign(ctx, "tso", o.opts.LeaseTTL)
	if err != nil {
		return fmt.Errorf("meta: oracle campaign: %w", err)
	}
	for attempt := 1; ; attempt++ {
		err = o.beginTerm(ctx, lead)
		if err == nil {
			break
		}
		if !errors.Is(err, ErrConflict) || attempt == startAttempts {
			rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_ = lead.Resign(rctx)
			cancel()
			return err
		}
	}
	termCtx, stopTerm := context.WithCancel(context.Background())
	o.stop = stopTerm
	o.term = lead
	termDone := make(chan struct{})
	o.mu.Lock()
	o.mu.termDone = termDone
	o.mu.Unlock()
	o.wg.Add(1)
	go func() {
		defer close(termDone)
		o.run(termCtx, lead)
	}()
	o.opts.Logger.Info("meta: timestamp oracle serving")
	return nil
}

// beginTerm loads H and persists the first window of a term.
func (o *Oracle) beginTerm(ctx context.Context, lead Leadership) error {
	var high uint64
	kv, err := o.store.Get(ctx, keyTSO)
	switch {
	case errors.Is(err, ErrNotFound):
	case err != nil:
		return fmt.Errorf("meta: oracle load high-water mark: %w", err)
	default:
		if high, err = decodeTSO(kv.Value); err != nil {
			return err
		}
	}
	o.mu.Lock()
	o.mu.w.load(high)
	target := o.mu.w.target(o.opts.Clock().UnixMilli(), 1)
	o.mu.Unlock()
	rev, err := o.store.Put(ctx, keyTSO, encodeTSO(target), kv.Rev)
	if err != nil {
		return fmt.Errorf("meta: oracle persist window: %w", err)
	}
	o.mu.Lock()
	o.mu.w.persisted(target)
	o.mu.rev = rev
	o.mu.want = 0
	o.mu.renewErr = nil
	o.mu.lead = lead
	o.broadcastLocked()
	o.mu.Unlock()
	return nil
}

// endTermLocked stops the current term's goroutine and resigns its
// leadership. Requires startMu.
func (o *Oracle) endTermLocked() {
	if o.stop != nil {
		o.stop()
		o.wg.Wait()
		o.stop = nil
	}
	o.mu.Lock()
	o.mu.lead = nil
	o.mu.w.limit = 0
	o.broadcastLocked()
	o.mu.Unlock()
	if lead := o.term; lead != nil {
		o.term = nil
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if err := lead.Resign(ctx); err != nil {
			o.opts.Logger.Warn("meta: oracle resign", "err", err)
		}
		cancel()
	}
}

// Close stops serving, stops the background renewal and resigns the
// leadership. Idempotent.
func (o *Oracle) Close() error {
	o.closeOnce.Do(func() { close(o.closeCh) })
	o.startMu.Lock()
	defer o.startMu.Unlock()
	o.endTermLocked()
	o.mu.Lock()
	o.mu.closed = true
	o.broadcastLocked()
	o.mu.Unlock()
	return nil
}

// Next returns a timestamp above every timestamp handed out before.
func (o *Oracle) Next(ctx context.Context) (uint64, error) { return o.NextN(ctx, 1) }

// NextN reserves n consecutive timestamps (1 <= n <= 2^18) and returns the
// first. It blocks only while the persisted window is exhausted; it returns
// ErrNotLeader when the leadership is not held or its lease may have expired.
func (o *Oracle) NextN(ctx context.Context, n int) (uint64, error) {
	if n < 1 || n > maxBatch {
		return 0, fmt.Errorf("meta: NextN(%d): batch must be in [1, %d]", n, maxBatch)
	}
	o.mu.Lock()
	for {
		lead := o.mu.lead
		if lead == nil {
			closed := o.mu.closed
			o.mu.Unlock()
			if closed {
				return 0, ErrClosed
			}
			return 0, ErrNotLeader
		}
		now := o.opts.Clock()
		if !now.Before(lead.ValidUntil()) {
			o.mu.Unlock()
			return 0, ErrNotLeader
		}
		nowMs := now.UnixMilli()
		if first, ok := o.mu.w.alloc(nowMs, n); ok {
			if o.mu.w.needRenew(nowMs) {
				o.kickLocked()
			}
			o.mu.Unlock()
			return first, nil
		}
		// The window is used up: wait for the renewal.
		if renewErr := o.mu.renewErr; renewErr != nil {
			o.mu.renewErr = nil // report each failure once; the next wait retries
			o.mu.Unlock()
			return 0, renewErr
		}
		o.mu.want = max(o.mu.want, n)
		o.kickLocked()
		renewed := o.mu.renewed
		o.mu.Unlock()
		select {
		case <-renewed:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		o.mu.Lock()
	}
}

func (o *Oracle) kickLocked() {
	select {
	case o.kick <- struct{}{}:
	default:
	}
}

// broadcastLocked wakes every NextN waiting for a renewal.
func (o *Oracle) broadcastLocked() {
	close(o.mu.renewed)
	o.mu.renewed = make(chan struct{})
}

// run is a term's goroutine: it persists windows ahead of use and ends the
// term when the leadership is lost or a newer writer took /cairn/tso.
func (o *Oracle) run(ctx context.Context, lead Leadership) {
	defer o.wg.Done()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	backoff := 10 * time.Millisecond
	for {
		select {
		case <-ctx.Done():
			return
		case <-lead.Done():
			o.opts.Logger.Warn("meta: timestamp oracle lost its leadership")
			o.lose(lead)
			return
		case <-o.kick:
		case <-retry.C:
		}
		switch err := o.renew(ctx, lead); {
		case err == nil:
			backoff = 10 * time.Millisecond
		case errors.Is(err, ErrConflict):
			o.opts.Logger.Warn("meta: timestamp oracle superseded", "err", err)
			o.lose(lead)
			return
		case ctx.Err() != nil:
			return
		default:
			o.opts.Logger.Warn("meta: timestamp oracle renewal failed", "err", err, "retry", backoff)
			retry.Reset(backoff)
			backoff = min(2*backoff, time.Second)
		}
	}
}

// lose stops serving for lead's term.
func (o *Oracle) lose(lead Leadership) {
	o.mu.Lock()
	if o.mu.lead == lead {
		o.mu.lead = nil
		o.mu.w.limit = 0
	}
	o.broadcastLocked()
	o.mu.Unlock()
}

// windowAttempt bounds one write of a new window, and one read of what a
// write of unknown outcome left. A write proposed through a meta leader
// that then froze or died is not sent again to the next leader: etcd
// answers it only at its request timeout (7 s with a 1 s election), long
// after a new leader could have taken it, and meanwhile the oracle may
// run out of window.
const windowAttempt = time.Second

// putWindow persists target as the window's upper bound over revision rev
// and returns the new revision. A write that times out is settled by a
// read: the old revision means it did not apply (it is written again), our
// target means it did, anything else is a newer leader's (ErrConflict).
// It tries until ctx ends or the outcome is known.
func (o *Oracle) putWindow(ctx context.Context, target uint64, rev int64) (int64, error) {
	for {
		actx, cancel := context.WithTimeout(ctx, windowAttempt)
		newRev, err := o.store.Put(actx, keyTSO, encodeTSO(target), rev)
		cancel()
		if err == nil || ctx.Err() != nil || !(errors.Is(err, context.DeadlineExceeded) || unsettled(err)) {
			return newRev, err
		}
		o.opts.Logger.Info("meta: oracle window write of unknown outcome; reading what it left", "err", err)
		for {
			actx, cancel := context.WithTimeout(ctx, windowAttempt)
			kv, rerr := o.store.Get(actx, keyTSO)
			cancel()
			if ctx.Err() != nil {
				return 0, err
			}
			if rerr != nil {
				select {
				case <-ctx.Done():
					return 0, err
				case <-time.After(50 * time.Millisecond):
				}
				continue
			}
			if kv.Rev == rev {
				break // not applied: write it again
			}
			if high, derr := decodeTSO(kv.Value); derr == nil && high == target {
				return kv.Rev, nil
			}
			return 0, fmt.Errorf("%s changed from revision %d to %d: %w", keyTSO, rev, kv.Rev, ErrConflict)
		}
	}
}

// renew persists a new window if one is needed. The store write happens
// outside the mutex; NextN keeps serving from the old window meanwhile.
func (o *Oracle) renew(ctx context.Context, lead Leadership) error {
	o.mu.Lock()
	if o.mu.lead != lead {
		o.mu.Unlock()
		return nil
	}
	nowMs := o.opts.Clock().UnixMilli()
	want := o.mu.want
	if want == 0 && !o.mu.w.needRenew(nowMs) {
		o.mu.Unlock()
		return nil
	}
	target := o.mu.w.target(nowMs, want)
	rev := o.mu.rev
	o.mu.Unlock()

	newRev, err := o.putWindow(ctx, target, rev)

	o.mu.Lock()
	defer o.mu.Unlock()
	defer o.broadcastLocked()
	if err != nil {
		err = fmt.Errorf("meta: oracle persist window: %w", err)
		o.mu.renewErr = err
		if errors.Is(err, ErrConflict) && o.mu.lead == lead {
			// Someone else wrote /cairn/tso: a newer leader. Stop at once,
			// before any waiter wakes up.
			o.mu.lead = nil
			o.mu.w.limit = 0
		}
		return err
	}
	if o.mu.lead == lead {
		o.mu.w.persisted(target)
		o.mu.rev = newRev
		o.mu.renewErr = nil
		if o.mu.want <= want {
			o.mu.want = 0
		}
	}
	return nil
}
