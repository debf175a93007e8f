package node

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
	hang := func(ctx context.Context) ([]byte, error) { <-ctx.Done(); return nil, ctx.Err() }
	if _, err := callUnlessMoved(ctx, 7, moved, hang); !errors.Is(err, errOracleMoved) {
		t.Fatalf("call to a frozen leader after another took over: %v, want errOracleMoved", err)
	}
	if reads.Load() < 3 {
		t.Fatalf("given up after %d reads of the leader, before it moved", reads.Load())
	}

	stays := func(context.Context) (uint64, error) { return 7, nil }
	slow := func(ctx context.Context) ([]byte, error) {
		select {
		case <-time.After(3 * oracleRecheck):
			return []byte("ok"), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if b, err := callUnlessMoved(ctx, 7, stays, slow); err != nil || string(b) != "ok" {
		t.Fatalf("slow call to the named leader: %q, %v", b, err)
	}
	fast := func(context.Context) ([]byte, error) { return []byte("ok"), nil }
	reads.Store(0)
	if b, err := callUnlessMoved(ctx, 7, moved, fast); err != nil || string(b) != "ok" || reads.Load() != 0 {
		t.Fatalf("fast call: %q, %v, %d leader reads", b, err, reads.Load())
	}
}
