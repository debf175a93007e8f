package cluster

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/meta"
	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/testenv"
)

// TestWatchIsGapFree runs writers (plain puts, deletes and two-key
// transactions) against a space that splits under them while a watcher
// reads its changes page by page, and checks the history: every version
// acknowledged appears exactly once, in (timestamp, key) order, no
// version that was not written appears, and every page's closed
// timestamp holds (no version at or before it arrives in a later page).
func TestWatchIsGapFree(t *testing.T) {
	seed := testenv.Seed(t)
	ctx := context.Background()
	cfg := testConfig(vfs.NewMem(), meta.NewMemStore(time.Now))
	cfg.SplitSize, cfg.SplitLoad = 16<<10, -1
	n, err := openStarted(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if _, err := n.CreateSpace(ctx, "feed", object.SpaceSettings{Ranges: 2}); err != nil {
		t.Fatal(err)
	}
	first, err := n.Watch(ctx, &object.WatchRequest{Space: "feed"})
	if err != nil {
		t.Fatal(err)
	}

	type ver struct {
		key     string
		version uint64
	}
	var mu sync.Mutex
	acked := map[ver]bool{}
	ack := func(k string, v uint64) { mu.Lock(); acked[ver{k, v}] = true; mu.Unlock() }
	body := strings.Repeat("x", 900)
	// The writers run until the space has split twice under them (and a
	// little after), flushing so that the ranges' sizes show.
	stop := make(chan struct{})
	go func() {
		deadline := time.Now().Add(60 * time.Second)
		for len(rangesOf(t, n, "feed")) < 4 && time.Now().Before(deadline) {
			_ = n.eng.DB().Flush()
			time.Sleep(50 * time.Millisecond)
		}
		time.Sleep(100 * time.Millisecond)
		close(stop)
	}()
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return false
		}
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for i := 0; !stopped(); i++ {
				key := fmt.Sprintf("%c-%d-%03d", "!5Lz"[rng.IntN(4)], w, rng.IntN(40))
				switch rng.IntN(4) {
				case 0:
					tx, err := n.Begin(ctx, object.TxnOptions{})
					if err != nil {
						t.Error(err)
						return
					}
					other := fmt.Sprintf("%c-%d-t%03d", "!5Lz"[rng.IntN(4)], w, i%100)
					_, err1 := tx.Put(ctx, &object.PutRequest{Space: "feed", Key: key, Size: int64(len(body))}, strings.NewReader(body))
					_, err2 := tx.Put(ctx, &object.PutRequest{Space: "feed", Key: other, Size: 1}, strings.NewReader("y"))
					if err1 != nil || err2 != nil {
						tx.Rollback()
						continue
					}
					ts, err := tx.Commit(ctx)
					if err == nil {
						ack(key, ts)
						ack(other, ts)
					}
				case 1:
					info, err := n.Delete(ctx, &object.DeleteRequest{Space: "feed", Key: key})
					if err == nil && info.Version != 0 {
						ack(key, info.Version)
					}
				default:
					info, err := n.Put(ctx, &object.PutRequest{Space: "feed", Key: key, Size: int64(len(body))}, strings.NewReader(body))
					if err != nil {
						t.Error(err)
						return
					}
					ack(key, info.Version)
				}
			}
		})
	}

	// The watcher: pages of at most 7, until the writers are done and a
	// page closes after the last acknowledged version.
	var seen []ver
	var closedAt []uint64 // closed of the page that delivered seen[i]'s predecessors
	cursor := first.Next
	var lastClosed uint64
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	finished := false
	for {
		res, err := n.Watch(ctx, &object.WatchRequest{Space: "feed", Cursor: cursor, Limit: 7})
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range res.Events {
			if ev.Version <= lastClosed {
				t.Fatalf("%s@%d arrived after a page closed at %d", ev.Key, ev.Version, lastClosed)
			}
			seen = append(seen, ver{ev.Key, ev.Version})
			closedAt = append(closedAt, lastClosed)
		}
		if res.Closed < lastClosed {
			t.Fatalf("closed went back from %d to %d", lastClosed, res.Closed)
		}
		lastClosed, cursor = res.Closed, res.Next
		if finished && !res.More {
			break
		}
		select {
		case <-done:
			finished = true // one more page after the writers stopped
		default:
		}
	}
	s, release, err := n.acquire(ctx, "feed")
	if err != nil {
		t.Fatal(err)
	}
	ranges := len(s.Table().Ranges())
	release()
	if ranges < 3 {
		t.Errorf("the space did not split under the watch (%d ranges)", ranges)
	}
	got := map[ver]bool{}
	for i, v := range seen {
		if got[v] {
			t.Fatalf("%s@%d delivered twice", v.key, v.version)
		}
		got[v] = true
		if i > 0 {
			p := seen[i-1]
			if p.version > v.version || p.version == v.version && bytes.Compare([]byte(p.key), []byte(v.key)) > 0 {
				t.Fatalf("out of order: %s@%d before %s@%d", p.key, p.version, v.key, v.version)
			}
		}
		if !acked[v] {
			// A write whose answer was lost would be here; none is.
			t.Errorf("%s@%d was delivered but never acknowledged", v.key, v.version)
		}
	}
	for v := range acked {
		if !got[v] {
			t.Errorf("%s@%d was acknowledged but never delivered", v.key, v.version)
		}
	}
	t.Logf("%d versions over %d ranges, delivered in order", len(seen), ranges)
}

// TestWatchRefusals: a snapshot never changes; a cursor must be one a
// watch of the space returned.
func TestWatchRefusals(t *testing.T) {
	ctx := context.Background()
	n := openTestNode(t)
	for _, sp := range []string{"wone", "wtwo"} {
		if _, err := n.CreateSpace(ctx, sp, object.SpaceSettings{}); err != nil {
			t.Fatal(err)
		}
	}
	putTagged(t, n, "wone", "k", 1, nil)
	res, err := n.Watch(ctx, &object.WatchRequest{Space: "wone", From: 1})
	if err != nil || len(res.Events) != 1 {
		t.Fatalf("from the start: %+v %v", res, err)
	}
	small, err := n.Watch(ctx, &object.WatchRequest{Space: "wone", From: 1, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	// A cursor inside a page (it names an object) is the space's own.
	inner := small.Next
	if !strings.Contains(inner, ".") {
		putTagged(t, n, "wone", "k2", 1, nil)
		if small, err = n.Watch(ctx, &object.WatchRequest{Space: "wone", From: 1, Limit: 1}); err != nil {
			t.Fatal(err)
		}
		inner = small.Next
	}
	for _, c := range []struct {
		req  object.WatchRequest
		want object.Kind
	}{
		{object.WatchRequest{Space: "wone", Cursor: "zz"}, object.InvalidArgument},
		{object.WatchRequest{Space: "wtwo", Cursor: inner}, object.InvalidArgument},
		{object.WatchRequest{Space: "nope"}, object.SpaceNotFound},
	} {
		if _, err := n.Watch(ctx, &c.req); object.KindOf(err) != c.want {
			t.Errorf("%+v: %v, want %v", c.req, err, c.want)
		}
	}
	if _, err := n.CreateSnapshot(ctx, "wone", "wone-snap"); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Watch(ctx, &object.WatchRequest{Space: "wone-snap"}); object.KindOf(err) != object.InvalidArgument {
		t.Errorf("a snapshot: %v", err)
	}
}

// TestWatchCursorExpires: a range's feed trimmed below a time tells a
// watch from before it that its cursor expired (it must start again),
// and serves one from after it.
func TestWatchCursorExpires(t *testing.T) {
	ctx := context.Background()
	n := openTestNode(t)
	if _, err := n.CreateSpace(ctx, "trim", object.SpaceSettings{Ranges: 2}); err != nil {
		t.Fatal(err)
	}
	v1 := putTagged(t, n, "trim", "a", 1, nil).Version
	v2 := putTagged(t, n, "trim", "b", 1, nil).Version
	v3 := putTagged(t, n, "trim", "zz", 1, nil).Version
	trim := func(before uint64) {
		t.Helper()
		s, release, err := n.acquire(ctx, "trim")
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		for _, r := range s.Table().Ranges() {
			obj := r.Desc().Start
			if _, err := n.rc.Propose(ctx, s.Table(), obj, (&kv.TrimFeedCmd{Obj: obj, Before: before}).Encode()); err != nil {
				t.Fatal(err)
			}
		}
	}
	trim(v2)
	trim(v1) // a lower trim changes nothing
	if _, err := n.Watch(ctx, &object.WatchRequest{Space: "trim", From: v1 - 1}); object.KindOf(err) != object.CursorExpired {
		t.Fatalf("a watch from before the trim: %v, want cursor expired", err)
	}
	res, err := n.Watch(ctx, &object.WatchRequest{Space: "trim", From: v2 - 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Events) != 2 || res.Events[0].Version != v2 || res.Events[1].Version != v3 {
		t.Fatalf("a watch from just before the horizon: %+v", res.Events)
	}
}
