package rangeclient

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestGuard: a write at or below a served read's timestamp is refused; a
// read waits for admitted writes at or below it; a new term takes a fresh
// timestamp before admitting anything.
func TestGuard(t *testing.T) {
	ctx := context.Background()
	oracle := uint64(100)
	now := func(context.Context) (uint64, error) { oracle++; return oracle, nil }
	g := &tsGuard{pending: map[uint64]int{}}

	if err := g.admit(ctx, 1, 50, now); !errors.Is(err, ErrConflict) {
		t.Fatalf("a write below the term's fresh timestamp: %v", err)
	}
	if err := g.admit(ctx, 1, 200, now); err != nil {
		t.Fatal(err)
	}
	if err := g.read(ctx, 1, 150); err != nil {
		t.Fatalf("a read below the write in flight waits for nothing: %v", err)
	}
	if err := g.admit(ctx, 1, 140, now); !errors.Is(err, ErrConflict) {
		t.Fatalf("a write below a served read: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- g.read(ctx, 1, 250) }()
	select {
	case err := <-done:
		t.Fatalf("a read above a write in flight returned at once: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	g.settle(200)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := g.admit(ctx, 1, 250, now); !errors.Is(err, ErrConflict) {
		t.Fatalf("a write at a served read's timestamp: %v", err)
	}
	// A new term forgets the reads but takes a fresh timestamp (above
	// every read of the old term) first.
	oracle = 300
	if err := g.admit(ctx, 2, 260, now); !errors.Is(err, ErrConflict) {
		t.Fatalf("a write below the new term's fresh timestamp: %v", err)
	}
	if err := g.admit(ctx, 2, 400, now); err != nil {
		t.Fatal(err)
	}
	if err := g.admit(ctx, 1, 500, now); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("a write of an old term: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := g.read(cctx, 2, 450); !errors.Is(err, context.Canceled) {
		t.Fatalf("a canceled read waiting on a write: %v", err)
	}
}

// TestMethodNames: every method the peer server registers is one the
// client serves, and the other way round.
func TestMethodNames(t *testing.T) {
	ms := (&Client{}).Methods()
	if len(ms) != len(MethodNames) {
		t.Fatalf("%d methods served, %d named", len(ms), len(MethodNames))
	}
	for _, n := range MethodNames {
		if ms[n] == nil {
			t.Fatalf("method %s is named but not served", n)
		}
	}
}
