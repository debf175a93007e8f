package replica

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/cairn-db/cairn/internal/rangedesc"
)

// gatedFS holds every WAL sync while its gate is shut, and says when one
// is waiting.
type gatedFS struct {
	vfs.FS
	mu      sync.Mutex
	shut    chan struct{} // closed: the gate is open
	waiting chan struct{} // gets a value when a sync waits at the gate
}

func newGatedFS(fs vfs.FS) *gatedFS {
	open := make(chan struct{})
	close(open)
	return &gatedFS{FS: fs, shut: open, waiting: make(chan struct{}, 1)}
}

func (g *gatedFS) close() {
	g.mu.Lock()
	g.shut = make(chan struct{})
	g.mu.Unlock()
}

func (g *gatedFS) open() {
	g.mu.Lock()
	close(g.shut)
	g.mu.Unlock()
}

func (g *gatedFS) pass() {
	g.mu.Lock()
	gate := g.shut
	g.mu.Unlock()
	select {
	case <-gate:
		return
	default:
	}
	select {
	case g.waiting <- struct{}{}:
	default:
	}
	<-gate
}

func (g *gatedFS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil || !strings.HasSuffix(name, ".log") {
		return f, err
	}
	return &gatedFile{File: f, g: g}, nil
}

func (g *gatedFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := g.FS.Create(name, c)
	return g.wrap(name, f, err)
}

func (g *gatedFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := g.FS.ReuseForWrite(oldname, newname, c)
	return g.wrap(newname, f, err)
}

type gatedFile struct {
	vfs.File
	g *gatedFS
}

func (f *gatedFile) Sync() error {
	f.g.pass()
	return f.File.Sync()
}

func (f *gatedFile) SyncData() error {
	f.g.pass()
	return f.File.SyncData()
}

func (f *gatedFile) SyncTo(length int64) (bool, error) {
	f.g.pass()
	return f.File.SyncTo(length)
}

// TestLoopRunsWhileLogWrites: while a log batch waits for its sync, the
// loop keeps running (asynchronous storage writes, persist.go), and the
// proposal behind that batch is answered once the sync is done.
func TestLoopRunsWhileLogWrites(t *testing.T) {
	g := newGatedFS(vfs.NewMem())
	e := openEngine(t, g)
	defer e.Close()
	s := newStore(t, testOptions(1, e))
	defer s.Close()
	r, err := s.AddReplica(rangedesc.Range{ID: 1, Replicas: []uint64{1}}, &counterSM{rangeID: 1})
	if err != nil {
		t.Fatal(err)
	}
	waitLeader(t, r)
	proposeSeq(t, r, 1, 1)

	g.close()
	done := make(chan error, 1)
	go func() {
		_, err := r.Propose(context.Background(), seqCmd(2))
		done <- err
	}()
	select {
	case <-g.waiting:
	case <-time.After(5 * time.Second):
		g.open()
		t.Fatal("no log sync reached the gate")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	err = s.onLoop(ctx, func() error { return nil })
	cancel()
	select {
	case err := <-done:
		g.open()
		t.Fatalf("the proposal was answered while its log write was held: %v", err)
	default:
	}
	g.open()
	if err != nil {
		t.Fatalf("the loop did not run while a log sync was held: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("proposal after the sync: %v", err)
	}
}
