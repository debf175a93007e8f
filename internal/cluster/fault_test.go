package cluster

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/cairn-db/cairn/client"
	"github.com/cairn-db/cairn/internal/history"
	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/wire"
)

// restartConfig is the config that reopens n as itself: its data
// directory and the ports it had bound.
func restartConfig(n *Node) Config {
	cfg := n.cfg
	for _, p := range []struct {
		port *int
		addr string
	}{{&cfg.PeerPort, n.PeerAddr()}} {
		_, port, _ := net.SplitHostPort(p.addr)
		*p.port, _ = strconv.Atoi(port)
	}
	return cfg
}

// TestFaultsInProcess runs concurrent clients against a three-node cluster
// in one process while a nemesis stops and restarts nodes, each request
// going to a random node that is up. A low load threshold makes the ranges
// split under the clients and the faults, and the clients slow down every
// other round, so that the ranges merge again. Every key's history must be
// linearizable, including the final reads after the cluster heals (so no
// acknowledged write is lost), and the healed cluster must take writes
// again.
func TestFaultsInProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("fault test")
	}
	ctx := context.Background()
	nodes := threeNodes(t, func(c *Config) { c.HeartbeatTTL, c.SplitLoad, c.MergeAfter = time.Second, 40, time.Second })
	var keys []string
	for i := range 8 {
		keys = append(keys, fmt.Sprintf("k%d", i))
	}
	fc := startFaultLoad(t, nodes, "faults", keys)
	// Busy for 9s (a load split takes 5 checks over the threshold on one
	// leaseholder), quiet for 6s, busy again.
	const run, busy, quiet = 21 * time.Second, 9 * time.Second, 6 * time.Second
	mu := &fc.mu

	// The nemesis: stop a random node, keep it down a while, restart it.
	rnd := rand.New(rand.NewPCG(7, 7))
	deadline := time.Now().Add(run)
	restarts := 0
	ops := map[string]float64{}
	countOps := func(n *Node) {
		for _, op := range []string{"split", "merge", "merge_aborted"} {
			m := &dto.Metric{}
			_ = n.metrics.rangeOps.WithLabelValues(op).Write(m)
			ops[op] += m.GetCounter().GetValue()
		}
	}
	start := time.Now()
	for time.Now().Before(deadline) {
		// Busy phases split the keys' range by load; quiet ones (about
		// 10 requests/s in all, under a quarter of 40 per range) merge them.
		pace := time.Duration(0)
		if e := time.Since(start); e >= busy && e < busy+quiet {
			pace = 400 * time.Millisecond
		}
		fc.pace.Store(int64(pace))
		up := time.Duration(1000+rnd.IntN(1000)) * time.Millisecond
		if pace != 0 {
			up += 2 * time.Second // a merge needs every replica up
		}
		time.Sleep(up)
		i := rnd.IntN(len(fc.nodes))
		mu.Lock()
		victim := fc.nodes[i]
		fc.nodes[i] = nil
		mu.Unlock()
		cfg := restartConfig(victim)
		countOps(victim)
		victim.Close()
		time.Sleep(time.Duration(500+rnd.IntN(1500)) * time.Millisecond)
		again, err := openStarted(ctx, cfg)
		if err != nil {
			t.Fatalf("restart node %d: %v", victim.NodeID(), err)
		}
		again.Serve()
		t.Cleanup(func() { again.Close() })
		mu.Lock()
		fc.nodes[i] = again
		mu.Unlock()
		restarts++
	}
	fc.stop()

	// Healed: how soon does the cluster take a write, and what does
	// every key hold?
	t.Logf("healed cluster took a write %v after the last restart", fc.writeAfterHeal(t, nodes))
	res := fc.checkAfterHeal(t, nodes)
	fc.mu.RLock()
	for _, n := range fc.nodes {
		countOps(n)
	}
	fc.mu.RUnlock()
	t.Logf("%d restarts; %d operations: %d puts (%d unknown), %d gets; %d ranges at the end; %v", restarts, res.Ops, res.Puts, res.Pending, res.Gets, len(rangesOf(t, nodes[0], "faults")), ops)
}

// writeAfterHeal writes a key of its own through nodes and returns how
// long the healed cluster took to acknowledge it.
func (fc *faultCluster) writeAfterHeal(t *testing.T, nodes []*Node) time.Duration {
	t.Helper()
	healed := time.Now()
	writeAny(t, nodes, fc.space, "after-heal", "y")
	return time.Since(healed).Round(time.Millisecond)
}

// checkAfterHeal stops the clients if they still run, reads every key
// through nodes once the cluster has healed (so a lost acknowledged write
// shows) and checks every key's history.
func (fc *faultCluster) checkAfterHeal(t *testing.T, nodes []*Node) history.Result {
	t.Helper()
	fc.stop()
	for _, key := range fc.keys {
		call := fc.rec.Now()
		v := readAnyOrAbsent(t, nodes, fc.space, key)
		fc.rec.Get(99, key, v, call)
	}
	res := history.Check(fc.rec.Ops(), time.Minute)
	if err := res.Verdict(20); err != nil {
		t.Fatal(err)
	}
	return res
}

// faultCluster is a fault test's space, its keys, and the clients that put
// and get them through the nodes, recording every operation.
type faultCluster struct {
	mu    sync.RWMutex // guards nodes; held shared for each request
	nodes []*Node      // the nodes the clients pick from; nil: down

	space string
	keys  []string
	rec   *history.Recorder
	stopc chan struct{}
	once  sync.Once
	wg    sync.WaitGroup
	// pace, if not zero, is how long each client waits between requests
	// (a quiet phase, in which ranges merge); else 0-3ms.
	pace atomic.Int64
}

// startFaultLoad creates space (two ranges) on nodes, writes to it once,
// and starts four clients on keys (see startClients). The clients pick
// from nodes itself: the nemesis's changes to fc.nodes show there.
func startFaultLoad(t *testing.T, nodes []*Node, space string, keys []string) *faultCluster {
	t.Helper()
	if _, err := nodes[0].CreateSpace(context.Background(), space, object.SpaceSettings{Ranges: 2}); err != nil {
		t.Fatal(err)
	}
	writeAny(t, nodes, space, "warmup", "x")
	fc := &faultCluster{nodes: nodes, space: space, keys: keys, rec: history.NewRecorder(), stopc: make(chan struct{})}
	fc.startClients()
	return fc
}

// stop stops the clients and waits for them.
func (fc *faultCluster) stop() {
	fc.once.Do(func() { close(fc.stopc) })
	fc.wg.Wait()
}

// startClients starts four clients that put and get the keys through
// random nodes that are up, recording every operation, until stop.
func (fc *faultCluster) startClients() {
	ctx, space, keys, rec, stop := context.Background(), fc.space, fc.keys, fc.rec, fc.stopc
	for c := range 4 {
		fc.wg.Add(1)
		go func() {
			defer fc.wg.Done()
			rnd := rand.New(rand.NewPCG(uint64(c), 99))
			for seq := 0; ; seq++ {
				select {
				case <-stop:
					return
				default:
				}
				fc.mu.RLock()
				n := fc.nodes[rnd.IntN(len(fc.nodes))]
				if n == nil {
					fc.mu.RUnlock()
					time.Sleep(10 * time.Millisecond)
					continue
				}
				key := keys[rnd.IntN(len(keys))]
				octx, cancel := context.WithTimeout(ctx, 3*time.Second)
				call := rec.Now()
				if rnd.IntN(2) == 0 {
					val := fmt.Sprintf("c%d-%d", c, seq)
					_, err := n.Put(octx, &object.PutRequest{Space: space, Key: key, Size: int64(len(val))}, strings.NewReader(val))
					// The codes that promise the write had no effect (the
					// client retries them elsewhere) are the client's; the
					// checker holds the server to them.
					rec.Put(c, key, val, call, err, client.NotApplied(err))
				} else {
					b, _, err := getCtx(octx, n, object.GetRequest{Space: space, Key: key})
					if err == nil || wire.CodeOf(err) == wire.CodeNotFound {
						rec.Get(c, key, string(b), call)
					}
				}
				cancel()
				fc.mu.RUnlock()
				if p := fc.pace.Load(); p != 0 {
					time.Sleep(time.Duration(p))
				} else {
					time.Sleep(time.Duration(rnd.IntN(4)) * time.Millisecond)
				}
			}
		}()
	}
}

// TestMembershipUnderLoad runs the fault test's clients against four nodes
// while the membership changes under them: a node stays stopped past the
// down timeout (its range replicas are rebuilt elsewhere by snapshot),
// comes back (replicas move back by rebalancing), and another node is
// drained and removed. Every key's history must be linearizable, with no
// acknowledged write lost.
func TestMembershipUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("fault test")
	}
	ctx := context.Background()
	nodes := clusterOf(t, 4, func(c *Config) {
		c.HeartbeatTTL, c.DownAfter, c.RepairCheck, c.RebalanceAfter = time.Second, time.Second, 200*time.Millisecond, 2*time.Second
	})
	admin := nodes[0]
	var keys []string
	for i := range 8 {
		keys = append(keys, fmt.Sprintf("k%d", i))
	}
	fc := startFaultLoad(t, nodes, "members", keys)

	// A node down long enough to be replaced, then back.
	time.Sleep(time.Second)
	fc.mu.Lock()
	victim := fc.nodes[1]
	fc.nodes[1] = nil
	fc.mu.Unlock()
	cfg := restartConfig(victim)
	victim.Close()
	waitRanges(t, []*Node{nodes[0], nodes[2], nodes[3]}, "members", 3, "replicas rebuilt while node 2 is down")
	again, err := openStarted(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	again.Serve()
	t.Cleanup(func() { again.Close() })
	fc.mu.Lock()
	fc.nodes[1] = again
	fc.mu.Unlock()
	time.Sleep(4 * time.Second) // rebalancing may move replicas back

	// Another node drained and removed.
	out := fc.nodes[3]
	if err := admin.NodeAdmin(ctx, wire.NodeDrain, out.NodeID()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		err := admin.NodeAdmin(ctx, wire.NodeRemove, out.NodeID())
		if err == nil {
			break
		}
		if wire.CodeOf(err) != wire.CodeNotDrained || time.Now().After(deadline) {
			var held []uint64
			if ranges, lerr := admin.catalog.ListRanges(ctx); lerr == nil {
				held = heldRanges(ranges, out.NodeID())
			}
			fc.mu.RLock()
			state := describeRanges(slices.DeleteFunc(slices.Clone(fc.nodes), func(n *Node) bool { return n == nil }), held)
			fc.mu.RUnlock()
			t.Fatalf("remove node %d: %v%s", out.NodeID(), err, state)
		}
		time.Sleep(200 * time.Millisecond)
	}
	fc.mu.Lock()
	fc.nodes = fc.nodes[:3]
	fc.mu.Unlock()
	out.Close()
	time.Sleep(time.Second)
	fc.stop()

	rest := []*Node{admin, again, fc.nodes[2]}
	waitRanges(t, rest, "members", 3, "three replicas on the three nodes left")
	res := fc.checkAfterHeal(t, rest)
	t.Logf("%d operations: %d puts (%d unknown), %d gets", res.Ops, res.Puts, res.Pending, res.Gets)
}

// netCuts is an injected network between in-process nodes: a set of cut
// directed links (Config.Link).
type netCuts struct {
	mu      sync.Mutex
	cut     map[[2]uint64]bool
	dropped int // sends and calls the cuts stopped
}

func (c *netCuts) link(from, to uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cut[[2]uint64{from, to}] {
		c.dropped++
		return false
	}
	return true
}

func (c *netCuts) set(from, to uint64, cut bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cut == nil {
		c.cut = map[[2]uint64]bool{}
	}
	c.cut[[2]uint64{from, to}] = cut
}

func (c *netCuts) heal() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.cut)
}

// TestPartitionsInProcess runs the fault test's clients against three
// nodes in one process whose node-to-node traffic (raft, snapshots, peer
// calls) goes through an injected network, while a nemesis cuts it: one
// node isolated, one link cut both ways (the third node sees both ends),
// and one link cut one way only. Clients reach every node throughout (as
// clients outside the partition would). Every key's history must be
// linearizable with no acknowledged write lost, and the healed cluster
// must take writes again.
func TestPartitionsInProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("fault test")
	}
	nw := &netCuts{}
	nodes := threeNodes(t, func(c *Config) { c.HeartbeatTTL, c.Link = time.Second, nw.link })
	var keys []string
	for i := range 8 {
		keys = append(keys, fmt.Sprintf("%c%d", "!5Lz"[i%4], i))
	}
	fc := startFaultLoad(t, nodes, "parts", keys)

	rnd := rand.New(rand.NewPCG(11, 11))
	ids := []uint64{nodes[0].NodeID(), nodes[1].NodeID(), nodes[2].NodeID()}
	deadline := time.Now().Add(15 * time.Second)
	faults := map[string]int{}
	for time.Now().Before(deadline) {
		a := ids[rnd.IntN(3)]
		b := ids[rnd.IntN(3)]
		for b == a {
			b = ids[rnd.IntN(3)]
		}
		switch kind := rnd.IntN(3); kind {
		case 0:
			for _, o := range ids {
				if o != a {
					nw.set(a, o, true)
					nw.set(o, a, true)
				}
			}
			faults["isolate one"]++
		case 1:
			nw.set(a, b, true)
			nw.set(b, a, true)
			faults["cut one link"]++
		case 2:
			nw.set(a, b, true)
			faults["cut one way"]++
		}
		time.Sleep(time.Duration(1000+rnd.IntN(1500)) * time.Millisecond)
		nw.heal()
		time.Sleep(time.Duration(500+rnd.IntN(1000)) * time.Millisecond)
	}
	fc.stop()
	t.Logf("healed cluster took a write %v after the last heal", fc.writeAfterHeal(t, nodes))
	res := fc.checkAfterHeal(t, nodes)
	nw.mu.Lock()
	dropped := nw.dropped
	nw.mu.Unlock()
	if dropped == 0 {
		t.Fatal("the injected network cut nothing")
	}
	t.Logf("faults %v (%d sends and calls dropped); %d operations: %d puts (%d unknown), %d gets", faults, dropped, res.Ops, res.Puts, res.Pending, res.Gets)
}
