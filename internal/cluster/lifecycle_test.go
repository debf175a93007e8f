package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/cairn-db/cairn/internal/meta"
)

// TestStartStop: Stop ends the loops Start (and Go) started and returns
// only once they have exited; it is idempotent, and Close after it works.
func TestStartStop(t *testing.T) {
	ctx := context.Background()
	n, err := Open(ctx, testConfig(vfs.NewMem(), meta.NewMemStore(time.Now)))
	if err != nil {
		t.Fatal(err)
	}
	n.Start()
	exited := make(chan struct{})
	n.Go(func(ctx context.Context) {
		<-ctx.Done()
		time.Sleep(50 * time.Millisecond) // a loop finishing its step
		close(exited)
	})
	n.Stop()
	select {
	case <-exited:
	default:
		t.Fatal("Stop returned before a loop had exited")
	}
	n.Stop()
	if err := n.Close(); err != nil {
		t.Fatalf("Close after Stop: %v", err)
	}
	if err := n.Close(); err != nil {
		t.Fatalf("Close again: %v", err)
	}
}

// TestStopBeforeStart: loops started after Stop exit at once, so Close
// does not wait on them forever.
func TestStopBeforeStart(t *testing.T) {
	n, err := Open(context.Background(), testConfig(vfs.NewMem(), meta.NewMemStore(time.Now)))
	if err != nil {
		t.Fatal(err)
	}
	n.Stop()
	n.Start()
	closed := make(chan error, 1)
	go func() { closed <- n.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Close hung on loops started after Stop")
	}
}
