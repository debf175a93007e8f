package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/history"
	"github.com/cairn-db/cairn/internal/object"
)

// TestTxnListAppend runs list-append transactions (history.CheckListAppend,
// after Elle) from clients on every node of a three-node cluster while a
// nemesis isolates a node (as a pause looks to the others), cuts a link,
// and stops and restarts a node; keys spread over four ranges. Snapshot
// isolation must show no G0, G1a, G1b, G1c nor G-single; serializable
// transactions, no G2 either.
func TestTxnListAppend(t *testing.T) {
	if testing.Short() {
		t.Skip("fault test")
	}
	ctx := context.Background()
	nw := &netCuts{}
	nodes := threeNodes(t, func(c *Config) { c.HeartbeatTTL, c.TxnTTL, c.Link = time.Second, 2*time.Second, nw.link })
	for _, iso := range []struct {
		name         string
		serializable bool
		forbidden    []string
	}{
		{"snapshot", false, []string{"G0", "G1a", "G1b", "G1c", "G-single", "incompatible-order", "duplicate", "unknown-value"}},
		{"serializable", true, []string{"G0", "G1a", "G1b", "G1c", "G-single", "G2", "incompatible-order", "duplicate", "unknown-value"}},
	} {
		t.Run(iso.name, func(t *testing.T) {
			space := "la-" + iso.name
			if _, err := nodes[0].CreateSpace(ctx, space, object.SpaceSettings{Ranges: 4}); err != nil {
				t.Fatal(err)
			}
			var ks []string
			for i := range 8 {
				ks = append(ks, fmt.Sprintf("%c%d", "!5Lz"[i%4], i))
			}
			up := newUpSet(nodes)
			log := &history.TxnLog{}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for c := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rnd := rand.New(rand.NewPCG(uint64(c), 5))
					for seq := 0; ; seq++ {
						select {
						case <-stop:
							return
						default:
						}
						n := up.pick(rnd)
						mops, outcome := runListAppend(ctx, n, space, ks, rnd, fmt.Sprintf("%d-%d", c, seq), iso.serializable)
						log.Add(mops, outcome)
					}
				}()
			}
			faults := listAppendNemesis(t, nw, up, 7*time.Second)
			close(stop)
			wg.Wait()
			// A final read of every key, in one transaction, after healing.
			nw.heal()
			deadline := time.Now().Add(30 * time.Second)
			for {
				mops, outcome := readAllLists(ctx, up.pick(rand.New(rand.NewPCG(1, 1))), space, ks)
				if outcome == history.Committed {
					log.Add(mops, outcome)
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("no final read after healing")
				}
				time.Sleep(100 * time.Millisecond)
			}
			rep := history.CheckListAppend(log.Txns())
			for _, k := range iso.forbidden {
				if rep.Count(k) > 0 {
					t.Fatalf("%s: %v", k, rep)
				}
			}
			if rep.Committed < 50 {
				t.Fatalf("only %d transactions committed: %v", rep.Committed, rep)
			}
			t.Logf("%v; faults %v", rep, faults)
		})
	}
}

// upSet is the nodes that are up, for clients to pick from.
type upSet struct {
	mu    sync.RWMutex
	nodes []*Node
}

func newUpSet(nodes []*Node) *upSet { return &upSet{nodes: append([]*Node(nil), nodes...)} }

func (u *upSet) pick(rnd *rand.Rand) *Node {
	u.mu.RLock()
	defer u.mu.RUnlock()
	for {
		if n := u.nodes[rnd.IntN(len(u.nodes))]; n != nil {
			return n
		}
	}
}

// listAppendNemesis isolates a node, cuts a link, or stops and restarts a
// node, in turn, for d.
func listAppendNemesis(t *testing.T, nw *netCuts, up *upSet, d time.Duration) map[string]int {
	rnd := rand.New(rand.NewPCG(9, 9))
	faults := map[string]int{}
	for deadline := time.Now().Add(d); time.Now().Before(deadline); {
		time.Sleep(time.Duration(500+rnd.IntN(700)) * time.Millisecond)
		up.mu.RLock()
		i := rnd.IntN(len(up.nodes))
		a, b := up.nodes[i], up.nodes[(i+1)%len(up.nodes)]
		others := []*Node{up.nodes[(i+1)%3], up.nodes[(i+2)%3]}
		up.mu.RUnlock()
		switch faults["isolate"] + faults["cut"] + faults["restart"] {
		case 0, 3, 6:
			for _, o := range others {
				nw.set(a.NodeID(), o.NodeID(), true)
				nw.set(o.NodeID(), a.NodeID(), true)
			}
			faults["isolate"]++
			time.Sleep(time.Duration(700+rnd.IntN(800)) * time.Millisecond)
			nw.heal()
		case 1, 4, 7:
			nw.set(a.NodeID(), b.NodeID(), true)
			nw.set(b.NodeID(), a.NodeID(), true)
			faults["cut"]++
			time.Sleep(time.Duration(700+rnd.IntN(800)) * time.Millisecond)
			nw.heal()
		default:
			up.mu.Lock()
			up.nodes[i] = nil
			up.mu.Unlock()
			cfg := restartConfig(a)
			a.Close()
			time.Sleep(time.Duration(300+rnd.IntN(700)) * time.Millisecond)
			again, err := openStarted(context.Background(), cfg)
			if err != nil {
				t.Fatalf("restart node %d: %v", a.NodeID(), err)
			}
			again.Serve()
			t.Cleanup(func() { again.Close() })
			up.mu.Lock()
			up.nodes[i] = again
			up.mu.Unlock()
			faults["restart"]++
		}
	}
	return faults
}

// runListAppend runs one transaction of 1-4 micro-operations on distinct
// keys: reads of a key's list, and appends of a unique value (a read of
// the list and a write of it with the value added).
func runListAppend(ctx context.Context, n *Node, space string, ks []string, rnd *rand.Rand, id string, serializable bool) ([]history.Mop, history.Outcome) {
	ctx, cancel := context.WithTimeout(ctx, 4*time.Second)
	defer cancel()
	var mops []history.Mop
	tx, err := n.Begin(ctx, object.TxnOptions{Serializable: serializable})
	if err != nil {
		return nil, history.Failed
	}
	perm := rnd.Perm(len(ks))[:1+rnd.IntN(4)]
	for i, p := range perm {
		k := ks[p]
		list, err := readList(ctx, tx, space, k)
		if err != nil {
			tx.Rollback()
			return mops, history.Failed
		}
		if rnd.IntN(2) == 0 {
			mops = append(mops, history.Mop{Kind: history.Read, Key: k, List: list})
			continue
		}
		v := fmt.Sprintf("%s.%d", id, i)
		body := strings.Join(append(list, v), ",")
		if _, err := tx.Put(ctx, &object.PutRequest{Space: space, Key: k, Size: int64(len(body))}, strings.NewReader(body)); err != nil {
			tx.Rollback()
			return mops, history.Failed
		}
		mops = append(mops, history.Mop{Kind: history.Append, Key: k, Value: v})
	}
	_, err = tx.Commit(ctx)
	return mops, commitOutcome(err)
}

// commitOutcome classes a commit's error: nil committed; an error that
// proves nothing was written failed; anything else unknown.
func commitOutcome(err error) history.Outcome {
	switch {
	case err == nil:
		return history.Committed
	case object.ClassOf(err) == object.ClassTxn, errors.Is(err, object.ErrPreconditionFailed),
		object.ClassOf(err) == object.ClassRetryable:
		return history.Failed
	}
	return history.Unknown
}

func readList(ctx context.Context, tx *object.Txn, space, key string) ([]string, error) {
	_, rc, err := tx.Get(ctx, &object.GetRequest{Space: space, Key: key, Length: -1})
	if errors.Is(err, object.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil || len(b) == 0 {
		return nil, err
	}
	return strings.Split(string(b), ","), nil
}

func readAllLists(ctx context.Context, n *Node, space string, ks []string) ([]history.Mop, history.Outcome) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	tx, err := n.Begin(ctx, object.TxnOptions{})
	if err != nil {
		return nil, history.Failed
	}
	var mops []history.Mop
	for _, k := range ks {
		list, err := readList(ctx, tx, space, k)
		if err != nil {
			return nil, history.Failed
		}
		mops = append(mops, history.Mop{Kind: history.Read, Key: k, List: list})
	}
	return mops, history.Committed
}
