package txn

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/tstamp"
)

// oracle hands out increasing timestamps at a physical time the test
// sets; a call may be held (gate) after its timestamp is drawn, to model
// a Begin whose timestamp is on its way while a Floor takes a newer one.
type oracle struct {
	mu      sync.Mutex
	ms      int64
	logical uint32
	gate    chan struct{} // when set, the next call waits on it
	asked   chan struct{} // closed when a held call has arrived
}

func (o *oracle) Next(context.Context) (uint64, error) {
	o.mu.Lock()
	gate, asked := o.gate, o.asked
	o.gate = nil
	o.logical++
	ts := tstamp.Make(o.ms, o.logical)
	o.mu.Unlock()
	if gate != nil {
		close(asked)
		<-gate
	}
	return ts, nil
}

// TestFloor: the floor is at or below every open transaction's snapshot,
// including one still waiting for its timestamp, and above what ended;
// a transaction open longer than MaxHold no longer holds it.
func TestFloor(t *testing.T) {
	ctx := context.Background()
	o := &oracle{ms: 1_000_000}
	m := New(Config{Timestamps: o, MaxHold: time.Minute})
	defer m.Close()
	floor := func() (uint64, bool) {
		t.Helper()
		f, held, err := m.Floor(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return f, held
	}

	f0, held := floor()
	if held {
		t.Fatal("held with no transaction")
	}
	a, err := m.Begin(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if a.StartTS <= f0 {
		t.Fatalf("a transaction begun after a floor starts at %d, at or below it (%d)", a.StartTS, f0)
	}
	b, _ := m.Begin(ctx, Options{})
	if f, held := floor(); f != a.StartTS || !held {
		t.Fatalf("floor %d (held %v) with transactions at %d and %d", f, held, a.StartTS, b.StartTS)
	}
	a.Rollback()
	if f, _ := floor(); f != b.StartTS {
		t.Fatalf("floor %d after the older ended; the other began at %d", f, b.StartTS)
	}
	if _, err := b.Commit(ctx); err != nil { // read-only: nothing to write
		t.Fatal(err)
	}
	f1, held := floor()
	if held || f1 <= b.StartTS {
		t.Fatalf("floor %d (held %v) after every transaction ended", f1, held)
	}

	// A Begin whose timestamp is on its way when the floor is taken: the
	// floor is at or below the timestamp it gets.
	o.mu.Lock()
	o.gate, o.asked = make(chan struct{}), make(chan struct{})
	gate, asked := o.gate, o.asked
	o.mu.Unlock()
	begun := make(chan *Txn)
	go func() {
		tx, err := m.Begin(ctx, Options{})
		if err != nil {
			t.Error(err)
		}
		begun <- tx
	}()
	<-asked
	f2, _ := floor() // its timestamp is newer than the held one's
	close(gate)
	c := <-begun
	if c.StartTS < f2 {
		t.Fatalf("a transaction that was waiting for its timestamp started at %d, below the floor %d", c.StartTS, f2)
	}
	if f2 > f1 {
		t.Fatalf("floor %d, above the newest timestamp seen when the transaction asked (%d)", f2, f1)
	}

	// Open past MaxHold: it no longer holds the floor.
	if f, held := floor(); f != c.StartTS || !held {
		t.Fatalf("floor %d (held %v), transaction at %d", f, held, c.StartTS)
	}
	o.mu.Lock()
	o.ms += time.Minute.Milliseconds() + 1
	o.mu.Unlock()
	if f, held := floor(); held || f <= c.StartTS {
		t.Fatalf("floor %d (held %v) with the only transaction open past MaxHold", f, held)
	}
	c.Rollback()
}

// TestCloseWhileBackground: work handed to the background while the
// manager closes (a commit still running as its node shuts down) is
// refused once Close began, never added to what Close waits for.
func TestCloseWhileBackground(t *testing.T) {
	for range 50 {
		m := New(Config{Timestamps: &oracle{ms: 1}})
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
						m.background(func(ctx context.Context) { <-ctx.Done() })
					}
				}
			}()
		}
		time.Sleep(time.Millisecond)
		m.Close()
		close(stop)
		wg.Wait()
	}
}
