package meta

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/testenv"
	"github.com/cairn-db/cairn/internal/tstamp"
)

func storedHigh(t *testing.T, s Store) uint64 {
	t.Helper()
	kv, err := s.Get(context.Background(), keyTSO)
	if err != nil {
		t.Fatalf("read %s: %v", keyTSO, err)
	}
	h, err := decodeTSO(kv.Value)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func startOracle(t *testing.T, s Store, o OracleOptions) *Oracle {
	t.Helper()
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	or := NewOracle(s, o)
	if err := or.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	return or
}

func TestOracleConcurrentStrictlyIncreasing(t *testing.T) {
	s := NewMemStore(nil)
	// A small window forces many renewals, some with callers waiting.
	or := startOracle(t, s, OracleOptions{Window: 5 * time.Millisecond})
	defer or.Close()
	const workers, each = 8, 2000
	results := make([][]uint64, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			ctx := context.Background()
			for i := range each {
				n := 1 + i%3
				first, err := or.NextN(ctx, n)
				if err != nil {
					t.Error(err)
					return
				}
				for j := range n {
					results[w] = append(results[w], first+uint64(j))
				}
			}
		})
	}
	wg.Wait()
	var all []uint64
	for w, r := range results {
		for i := 1; i < len(r); i++ {
			if r[i] <= r[i-1] {
				t.Fatalf("worker %d: %s after %s", w, fmtTS(r[i]), fmtTS(r[i-1]))
			}
		}
		all = append(all, r...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			t.Fatalf("timestamp %s handed out twice", fmtTS(all[i]))
		}
	}
	if h := storedHigh(t, s); all[len(all)-1] >= h {
		t.Fatalf("handed out %s, not below the stored high-water mark %s", fmtTS(all[len(all)-1]), fmtTS(h))
	}
}

// TestOracleRestartsWithClockGoingBackwards reuses one store across oracle
// instances while the clock jumps back and forth.
func TestOracleRestartsWithClockGoingBackwards(t *testing.T) {
	seed := int64(testenv.Seed(t))
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	clock := newManualClock()
	s := NewMemStore(clock.Now)
	ctx := context.Background()
	var last uint64
	for round := range 20 {
		or := startOracle(t, s, OracleOptions{Clock: clock.Now, Window: time.Second})
		for range 50 {
			ts, err := or.Next(ctx)
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			if ts <= last {
				t.Fatalf("round %d: %s after %s", round, fmtTS(ts), fmtTS(last))
			}
			last = ts
			if h := storedHigh(t, s); ts >= h {
				t.Fatalf("round %d: %s handed out at or above the stored H %s", round, fmtTS(ts), fmtTS(h))
			}
			// Mostly small steps, sometimes a jump of up to an hour either way.
			d := time.Duration(rng.IntN(5)) * time.Millisecond
			if rng.IntN(10) == 0 {
				d = time.Duration(rng.Int64N(int64(2*time.Hour))) - time.Hour
			}
			clock.Add(d)
		}
		if round%2 == 0 {
			or.Close()
		} else {
			// A crash: the lease runs out without a resign.
			s.ExpireLease("tso")
		}
	}
}

func TestOracleRefusesAfterLeaseLoss(t *testing.T) {
	clock := newManualClock()
	s := NewMemStore(clock.Now)
	ctx := context.Background()
	or := startOracle(t, s, OracleOptions{Clock: clock.Now})
	defer or.Close()
	before, err := or.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.ExpireLease("tso")
	// ValidUntil is zero from the moment the lease is gone, before the
	// background goroutine notices: Next refuses at once.
	for range 3 {
		if _, err := or.Next(ctx); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("Next after lease loss: %v, want ErrNotLeader", err)
		}
	}
	// Meanwhile another oracle takes over and moves H up.
	other := startOracle(t, s, OracleOptions{Clock: clock.Now, Window: time.Hour})
	ts2, err := other.Next(ctx)
	if err != nil || ts2 <= before {
		t.Fatalf("new leader: %s, %v (old leader's last %s)", fmtTS(ts2), err, fmtTS(before))
	}
	high := storedHigh(t, s)
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	// The old oracle re-campaigns and must re-load H: above everything the
	// other one could have handed out, although its own clock did not move.
	if err := or.Start(ctx); err != nil {
		t.Fatal(err)
	}
	ts3, err := or.Next(ctx)
	if err != nil || ts3 < high {
		t.Fatalf("after re-campaign: %s, %v; want >= the H %s left by the other leader", fmtTS(ts3), err, fmtTS(high))
	}
}

// gateStore delays Puts to /cairn/tso until released, and checks that every
// stored high-water mark only grows.
type gateStore struct {
	Store
	mu   sync.Mutex
	gate chan struct{} // nil: open
	puts int
}

func (g *gateStore) Put(ctx context.Context, key string, value []byte, expect int64) (int64, error) {
	if key == keyTSO {
		g.mu.Lock()
		gate := g.gate
		g.puts++
		g.mu.Unlock()
		if gate != nil {
			select {
			case <-gate:
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		}
	}
	return g.Store.Put(ctx, key, value, expect)
}

func (g *gateStore) close() { g.mu.Lock(); g.gate = make(chan struct{}); g.mu.Unlock() }

func (g *gateStore) open() {
	g.mu.Lock()
	if g.gate != nil {
		close(g.gate)
		g.gate = nil
	}
	g.mu.Unlock()
}

func TestOracleWindowPersistedBeforeUse(t *testing.T) {
	clock := newManualClock()
	mem := NewMemStore(clock.Now)
	s := &gateStore{Store: mem}
	ctx := context.Background()
	or := startOracle(t, s, OracleOptions{Clock: clock.Now, Window: 3 * time.Second})
	defer or.Close()

	h0 := storedHigh(t, mem)
	if want := tstamp.Make(clock.Now().UnixMilli()+3000, 0); h0 != want {
		t.Fatalf("first window: stored H %s, want now+3s = %s", fmtTS(h0), fmtTS(want))
	}
	ts, err := or.Next(ctx)
	if err != nil || ts >= h0 || tstamp.Physical(ts) != clock.Now().UnixMilli() {
		t.Fatalf("Next = %s, %v; want now, below %s", fmtTS(ts), err, fmtTS(h0))
	}

	// Hold renewals: within the window Next still serves without waiting.
	s.close()
	clock.Add(1500 * time.Millisecond) // half the window used: a renewal starts
	ts, err = or.Next(ctx)
	if err != nil || ts >= h0 {
		t.Fatalf("Next with a renewal pending = %s, %v", fmtTS(ts), err)
	}
	// Past the window nothing is served until the renewal is stored.
	clock.Add(2 * time.Second)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if ts, err := or.Next(cctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next past the persisted window = %s, %v; want it to wait", fmtTS(ts), err)
	}
	done := make(chan uint64)
	go func() {
		ts, err := or.Next(ctx)
		if err != nil {
			t.Error(err)
		}
		done <- ts
	}()
	s.open()
	ts = <-done
	h1 := storedHigh(t, mem)
	if h1 <= h0 || ts >= h1 || tstamp.Physical(ts) != clock.Now().UnixMilli() {
		t.Fatalf("after renewal: ts %s, H %s (was %s)", fmtTS(ts), fmtTS(h1), fmtTS(h0))
	}
}

func TestOracleNotStarted(t *testing.T) {
	or := NewOracle(NewMemStore(nil), OracleOptions{})
	if _, err := or.Next(context.Background()); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("Next before Start: %v", err)
	}
	if _, err := or.NextN(context.Background(), 0); err == nil {
		t.Fatal("NextN(0) succeeded")
	}
	if err := or.Close(); err != nil {
		t.Fatal(err)
	}
	if err := or.Start(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Start after Close: %v", err)
	}
	bad := NewOracle(NewMemStore(nil), OracleOptions{Window: time.Microsecond, LeaseTTL: time.Millisecond})
	if err := bad.Start(context.Background()); err == nil {
		t.Fatal("Start with invalid options succeeded")
	}
}

// TestOracleSuperseded: a write to /cairn/tso by someone else (a newer
// leader) fences this oracle off at its next renewal.
func TestOracleSuperseded(t *testing.T) {
	clock := newManualClock()
	s := NewMemStore(clock.Now)
	ctx := context.Background()
	or := startOracle(t, s, OracleOptions{Clock: clock.Now})
	defer or.Close()
	if _, err := s.Put(ctx, keyTSO, encodeTSO(tstamp.Make(clock.Now().UnixMilli()+time.Hour.Milliseconds(), 0)), AnyRev); err != nil {
		t.Fatal(err)
	}
	clock.Add(10 * time.Second) // past the window: Next needs a renewal, which conflicts
	if _, err := or.Next(ctx); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("Next after being superseded: %v, want ErrNotLeader", err)
	}
}

func BenchmarkOracleNext(b *testing.B) {
	b.Run("serial", func(b *testing.B) {
		or := NewOracle(NewMemStore(nil), OracleOptions{Logger: slog.New(slog.DiscardHandler)})
		if err := or.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
		defer or.Close()
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			if _, err := or.Next(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		or := NewOracle(NewMemStore(nil), OracleOptions{Logger: slog.New(slog.DiscardHandler)})
		if err := or.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
		defer or.Close()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			ctx := context.Background()
			for pb.Next() {
				if _, err := or.Next(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}

// TestOracleCloseInterruptsStart: a Start waiting for another member's term
// returns when the oracle is closed.
func TestOracleCloseInterruptsStart(t *testing.T) {
	s := NewMemStore(nil)
	ctx := context.Background()
	holder, err := s.Campaign(ctx, "tso", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Resign(ctx)
	or := NewOracle(s, OracleOptions{Logger: slog.New(slog.DiscardHandler)})
	res := make(chan error)
	go func() { res <- or.Start(ctx) }()
	if err := or.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-res; err == nil {
		t.Fatal("Start won while another member held the leadership")
	}
	if _, err := or.Next(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Next after Close: %v", err)
	}
}

// failStore fails the next n writes to /cairn/tso.
type failStore struct {
	Store
	mu   sync.Mutex
	fail int
}

var errInjected = errors.New("injected write failure")

func (f *failStore) Put(ctx context.Context, key string, value []byte, expect int64) (int64, error) {
	f.mu.Lock()
	fail := key == keyTSO && f.fail > 0
	if fail {
		f.fail--
	}
	f.mu.Unlock()
	if fail {
		return 0, errInjected
	}
	return f.Store.Put(ctx, key, value, expect)
}

// TestOracleRenewalRetries: failed window writes are retried in the
// background; callers see the failure at most, never a wrong timestamp.
func TestOracleRenewalRetries(t *testing.T) {
	clock := newManualClock()
	mem := NewMemStore(clock.Now)
	s := &failStore{Store: mem}
	ctx := context.Background()
	or := startOracle(t, s, OracleOptions{Clock: clock.Now})
	defer or.Close()
	first, err := or.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.fail = 3
	s.mu.Unlock()
	clock.Add(time.Minute) // past the window: Next needs the renewal
	var ts uint64
	for failures := 0; ; failures++ {
		ts, err = or.Next(ctx)
		if err == nil {
			break
		}
		if !errors.Is(err, errInjected) || failures > 3 {
			t.Fatalf("Next while renewals fail: %v (after %d failures)", err, failures)
		}
	}
	if ts <= first || ts >= storedHigh(t, mem) {
		t.Fatalf("after retried renewal: %s (first %s, H %s)", fmtTS(ts), fmtTS(first), fmtTS(storedHigh(t, mem)))
	}
}

// hangingStore's Puts of keyTSO hang until their context ends, as a write
// proposed through a meta leader that froze does; apply says whether the
// hung write applied first.
type hangingStore struct {
	Store
	mu    sync.Mutex
	hangs int
	apply bool
}

func (h *hangingStore) Put(ctx context.Context, key string, value []byte, expect int64) (int64, error) {
	h.mu.Lock()
	hang := key == keyTSO && h.hangs > 0
	if hang {
		h.hangs--
	}
	h.mu.Unlock()
	if !hang {
		return h.Store.Put(ctx, key, value, expect)
	}
	if h.apply {
		if _, err := h.Store.Put(context.Background(), key, value, expect); err != nil {
			return 0, err
		}
	}
	<-ctx.Done()
	return 0, ctx.Err()
}

// TestWindowWriteOfUnknownOutcome: a window write that hangs is given up
// after windowAttempt and settled by a read: written again if it did not
// apply, taken as done if it did, and a conflict if another leader's
// window is there.
func TestWindowWriteOfUnknownOutcome(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, c := range []struct {
		name    string
		applied bool // the hung write applied
		other   bool // another leader writes its window meanwhile
	}{{"not applied", false, false}, {"applied", true, false}, {"another leader's", false, true}} {
		mem := NewMemStore(time.Now)
		rev, err := mem.Put(ctx, keyTSO, encodeTSO(100), 0)
		if err != nil {
			t.Fatal(err)
		}
		h := &hangingStore{Store: mem, hangs: 1, apply: c.applied}
		o := NewOracle(h, OracleOptions{Logger: slog.New(slog.DiscardHandler)})
		if c.other {
			go func() {
				time.Sleep(10 * time.Millisecond)
				mem.Put(ctx, keyTSO, encodeTSO(300), rev)
			}()
		}
		got, err := o.putWindow(ctx, 200, rev)
		if c.other {
			if !errors.Is(err, ErrConflict) {
				t.Fatalf("window written over by another leader: %v, want ErrConflict", err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		kv, err := mem.Get(ctx, keyTSO)
		if err != nil || kv.Rev != got {
			t.Fatalf("%s: revision %d returned, %d stored (%v)", c.name, got, kv.Rev, err)
		}
		if high, _ := decodeTSO(kv.Value); high != 200 {
			t.Fatalf("%s: stored high %d, want 200", c.name, high)
		}
	}
}
