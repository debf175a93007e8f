package tso

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// TestCallUnlessMoved: a call to a leader that does not answer ends as
// soon as the meta service names another leader; a call to a leader that
// stays named runs to its own end.
func TestCallUnlessMoved(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var reads atomic.Int32
	moved := func(context.Context) (uint64, error) {
		if reads.Add(1) < 3 {
			return 7, nil
		}
		return 8, nil
	}
	hang := func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
	if err := callUnlessMoved(ctx, 7, moved, hang); !errors.Is(err, errMoved) {
		t.Fatalf("call to a frozen leader after another took over: %v, want errMoved", err)
	}
	if reads.Load() < 3 {
		t.Fatalf("given up after %d reads of the leader, before it moved", reads.Load())
	}

	stays := func(context.Context) (uint64, error) { return 7, nil }
	slow := func(ctx context.Context) error {
		select {
		case <-time.After(3 * recheck):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err := callUnlessMoved(ctx, 7, stays, slow); err != nil {
		t.Fatalf("slow call to the named leader: %v", err)
	}
	fast := func(context.Context) error { return nil }
	reads.Store(0)
	if err := callUnlessMoved(ctx, 7, moved, fast); err != nil || reads.Load() != 0 {
		t.Fatalf("fast call: %v, %d leader reads", err, reads.Load())
	}
}
