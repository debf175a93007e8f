package meta

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// manualClock is a clock tests move by hand.
type manualClock struct {
	mu sync.Mutex
	t  time.Time
}

func newManualClock() *manualClock {
	return &manualClock{t: time.UnixMilli(1_790_000_000_000)}
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *manualClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// testStoreContract checks the Store contract shared by every implementation.
// Keys go under a per-call prefix so one store can run it more than once.
func testStoreContract(t *testing.T, s Store, prefix string) {
	ctx := context.Background()
	k := func(name string) string { return prefix + name }

	if _, err := s.Get(ctx, k("a")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get of a missing key: %v, want ErrNotFound", err)
	}
	r1, err := s.Put(ctx, k("a"), []byte("1"), 0)
	if err != nil {
		t.Fatalf("Put must-not-exist: %v", err)
	}
	if _, err := s.Put(ctx, k("a"), []byte("x"), 0); !errors.Is(err, ErrConflict) {
		t.Fatalf("Put must-not-exist over an existing key: %v, want ErrConflict", err)
	}
	if _, err := s.Put(ctx, k("a"), []byte("x"), r1+100); !errors.Is(err, ErrConflict) {
		t.Fatalf("Put at a wrong revision: %v, want ErrConflict", err)
	}
	if _, err := s.Put(ctx, k("new"), []byte("x"), 5); !errors.Is(err, ErrConflict) {
		t.Fatalf("Put at a revision on a missing key: %v, want ErrConflict", err)
	}
	r2, err := s.Put(ctx, k("a"), []byte("2"), r1)
	if err != nil || r2 <= r1 {
		t.Fatalf("Put at the right revision: rev %d (was %d), %v", r2, r1, err)
	}
	kv, err := s.Get(ctx, k("a"))
	if err != nil || string(kv.Value) != "2" || kv.Rev != r2 || kv.Key != k("a") {
		t.Fatalf("Get = %+v, %v; want value 2 at revision %d", kv, err, r2)
	}
	r3, err := s.Put(ctx, k("a"), []byte("3"), AnyRev)
	if err != nil || r3 <= r2 {
		t.Fatalf("unconditional Put: rev %d, %v", r3, err)
	}
	for _, name := range []string{"c", "b/2", "b/1", "b"} {
		if _, err := s.Put(ctx, k(name), []byte(name), AnyRev); err != nil {
			t.Fatal(err)
		}
	}
	kvs, err := s.List(ctx, k("b"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, kv := range kvs {
		got = append(got, kv.Key[len(prefix):]+"="+string(kv.Value))
	}
	if want := "[b=b b/1=b/1 b/2=b/2]"; fmt.Sprint(got) != want {
		t.Fatalf("List = %v, want %s", got, want)
	}
	if kvs, _ := s.List(ctx, k("zz")); len(kvs) != 0 {
		t.Fatalf("List of an empty prefix = %v", kvs)
	}

	if err := s.Delete(ctx, k("a"), r2); !errors.Is(err, ErrConflict) {
		t.Fatalf("Delete at a stale revision: %v, want ErrConflict", err)
	}
	if err := s.Delete(ctx, k("a"), r3); err != nil {
		t.Fatalf("Delete at the right revision: %v", err)
	}
	if err := s.Delete(ctx, k("a"), r3); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Delete of a deleted key: %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx, k("a"), AnyRev); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unconditional Delete of a missing key: %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx, k("c"), AnyRev); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, k("b"), 0); err == nil {
		t.Fatal("Delete with expect 0 succeeded")
	}
	// A deleted key can be created again.
	if _, err := s.Put(ctx, k("a"), []byte("again"), 0); err != nil {
		t.Fatalf("re-create after delete: %v", err)
	}

	// Leadership: one holder at a time; a resign lets the next one in.
	name := prefix + "leader"
	l1, err := s.Campaign(ctx, name, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !time.Now().Before(l1.ValidUntil()) {
		t.Fatalf("fresh leadership not valid: ValidUntil %v", l1.ValidUntil())
	}
	second := make(chan Leadership)
	go func() {
		l, err := s.Campaign(ctx, name, 5*time.Second)
		if err != nil {
			t.Error(err)
		}
		second <- l
	}()
	// No campaign can win while l1 holds; one whose context ends gives up.
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	if l, err := s.Campaign(cctx, name, 5*time.Second); err == nil {
		t.Fatalf("Campaign won while held: %v", l)
	}
	cancel()
	select {
	case <-l1.Done():
		t.Fatal("leadership done before resigning")
	default:
	}
	if err := l1.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	<-l1.Done()
	if !l1.ValidUntil().IsZero() {
		t.Fatal("resigned leadership still has a deadline")
	}
	l2 := <-second
	if l2 == nil {
		t.Fatal("second campaign failed")
	}
	if err := l2.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l2.Resign(ctx); err != nil {
		t.Fatalf("second Resign: %v", err)
	}
}

func TestMemStore(t *testing.T) {
	s := NewMemStore(nil)
	testStoreContract(t, s, "/cairn/test/")

	// Simulated lease loss ends the leadership; the name is free again.
	ctx := context.Background()
	l, err := s.Campaign(ctx, "x", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !s.ExpireLease("x") {
		t.Fatal("ExpireLease found no holder")
	}
	<-l.Done()
	if !l.ValidUntil().IsZero() {
		t.Fatal("expired leadership still has a deadline")
	}
	if s.ExpireLease("x") {
		t.Fatal("ExpireLease expired a leadership twice")
	}
	l2, err := s.Campaign(ctx, "x", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// Values handed out and taken in are copies.
	buf := []byte("abc")
	if _, err := s.Put(ctx, "/cairn/copy", buf, AnyRev); err != nil {
		t.Fatal(err)
	}
	buf[0] = 'X'
	kv, _ := s.Get(ctx, "/cairn/copy")
	kv.Value[1] = 'Y'
	if kv2, _ := s.Get(ctx, "/cairn/copy"); string(kv2.Value) != "abc" {
		t.Fatalf("stored value aliased: %q", kv2.Value)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	<-l2.Done()
	if _, err := s.Get(ctx, "/cairn/copy"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Get after Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}
