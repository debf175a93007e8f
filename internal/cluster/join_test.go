package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/meta"
	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/testenv"
	"github.com/cairn-db/cairn/internal/wire"
)

// clusterConfig is a test node's config; its log is discarded unless
// CAIRN_TEST_LOG is set (then it goes to stderr).
// testToken is the join token of the tests' clusters: the first node
// registers it (a bootstrap token) and the others join with it.
const testToken = "cjt1.testtokn.abcdefghijklmnopqrstuvwxyz234567"

func clusterConfig(t testing.TB, join string) Config {
	w := testLog(t)
	bootstrap, token := testToken, ""
	if join != "" {
		bootstrap, token = "", testToken
	}
	return Config{
		BootstrapToken: bootstrap, JoinToken: token,
		DataDir: t.TempDir(), Listen: "127.0.0.1",
		// The ports a restarted node must get back are chosen here, below
		// the ephemeral range: one the kernel handed out could be taken by
		// another test's outgoing connection while the node is down.
		NativeAddr: fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t)), HTTPAddr: fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t)),
		PeerPort: testenv.FreePort(t), PeerCodes: wire.PeerCodes{}, Forwarded: wire.MarkForwarded,
		MetaPort: testenv.FreePort(t), MetaClientPort: testenv.FreePort(t),
		Join:   join,
		Logger: slog.New(slog.NewTextHandler(w, nil)),
	}
}

// testLog is where a test node logs: stderr with CAIRN_TEST_LOG set;
// otherwise a buffer whose last logTail bytes the test prints if it fails.
func testLog(t testing.TB) io.Writer {
	if os.Getenv("CAIRN_TEST_LOG") != "" {
		return os.Stderr
	}
	b := &tailBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			b.mu.Lock()
			defer b.mu.Unlock()
			t.Logf("a node's log (its last %d KiB at most):\n%s", logTail>>10, b.buf)
		}
	})
	return b
}

// logTail is how much of a node's log a failed test prints.
const logTail = 256 << 10

// tailBuffer keeps the last logTail bytes (or up to twice that) written.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > 2*logTail {
		b.buf = append(b.buf[:0], b.buf[len(b.buf)-logTail:]...)
	}
	return len(p), nil
}

func openNode(t testing.TB, cfg Config) *Node {
	t.Helper()
	n, err := openStarted(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	n.Serve()
	t.Cleanup(func() { n.Close() })
	return n
}

// TestJoinGrowsMeta starts a node, joins two more through it, and checks
// that every node is in the cluster map under its own id, that the meta
// service grows to three voters, and that a node that joined writes to the
// meta service. A joined node restarts as the same node.
func TestJoinGrowsMeta(t *testing.T) {
	ctx := context.Background()
	first := openNode(t, clusterConfig(t, ""))
	second := openNode(t, clusterConfig(t, first.PeerAddr()))
	thirdCfg := clusterConfig(t, second.PeerAddr())
	third := openNode(t, thirdCfg) // any node admits

	if ids := []uint64{first.NodeID(), second.NodeID(), third.NodeID()}; ids[0] != 1 || ids[1] == ids[0] || ids[2] == ids[1] || ids[2] == ids[0] {
		t.Fatalf("node ids %v", ids)
	}
	nodes, err := third.catalog.Nodes(ctx)
	if err != nil || len(nodes) != 3 {
		t.Fatalf("cluster map seen from the third node: %+v, %v", nodes, err)
	}
	waitThreeVoters(t, first)
	doc, err := third.ClusterStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var rep wire.ClusterReport
	if err := json.Unmarshal(doc, &rep); err != nil || len(rep.Nodes) != 3 || len(rep.Meta) != 3 || rep.Node != third.NodeID() || rep.Epoch == 0 {
		t.Fatalf("cluster report from the third node: %s (%v)", doc, err)
	}
	for _, m := range rep.Meta {
		if !m.Voter {
			t.Fatalf("cluster report shows a learner: %s", doc)
		}
	}
	if _, err := third.catalog.CreateSpace(ctx, "joined", meta.SpaceSettings{Ranges: 1}); err != nil {
		t.Fatalf("create a space from a joined node: %v", err)
	}
	if _, err := first.catalog.GetSpace(ctx, "joined"); err != nil {
		t.Fatalf("the first node does not see it: %v", err)
	}

	// Objects are written through a joined node's request: the space's
	// range has a replica on every node, and whichever holds its lease
	// takes timestamps from the oracle's leader over the peer service.
	if _, err := third.CreateSpace(ctx, "objects", object.SpaceSettings{Ranges: 1}); err != nil {
		t.Fatal(err)
	}
	v1 := writeAny(t, []*Node{third, second, first}, "objects", "k", "one")
	if b := readAny(t, []*Node{third, second, first}, "objects", "k"); b != "one" {
		t.Fatalf("read back: %q", b)
	}

	// Restart the second node on its data directory: same id, no new join.
	// A restarted node comes back on the ports it had (the meta service's
	// members know each other by peer URL).
	id := second.NodeID()
	cfg := restartConfig(second)
	second.Close()
	again := openNode(t, cfg)
	if again.NodeID() != id {
		t.Fatalf("restarted as node %d, was %d", again.NodeID(), id)
	}
	if got, _ := first.catalog.Nodes(ctx); len(got) != 3 {
		t.Fatalf("cluster map after restart has %d nodes", len(got))
	}

	// The oracle's leader stops (and resigns): another node takes the oracle
	// over, and writes go on above every earlier timestamp.
	all := []*Node{first, again, third}
	var gone *Node
	deadline := time.Now().Add(30 * time.Second)
	for gone == nil {
		name, err := meta.Leader(ctx, third.meta, "tso")
		for _, nd := range all {
			if err == nil && name == memberName(nd.NodeID()) {
				gone = nd
			}
		}
		if gone == nil && time.Now().After(deadline) {
			t.Fatalf("no oracle leader: %q, %v", name, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	gone.Close()
	stopped := time.Now()
	var rest []*Node
	for _, nd := range all {
		if nd != gone {
			rest = append(rest, nd)
		}
	}
	v2 := writeAny(t, rest, "objects", "k", "two")
	if v2.Version <= v1.Version {
		t.Fatalf("version %x after the oracle moved is not above %x", v2.Version, v1.Version)
	}
	t.Logf("writes resumed %v after the oracle's leader (node %d) stopped", time.Since(stopped).Round(time.Millisecond), gone.NodeID())
}

// writeAny writes key through whichever of the nodes holds its range's
// lease, retrying while leadership settles.
func writeAny(t testing.TB, among []*Node, space, key, body string) object.Info {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var last error
		for _, nd := range among {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			info, err := nd.Put(ctx, &object.PutRequest{Space: space, Key: key, Size: int64(len(body))}, strings.NewReader(body))
			cancel()
			if err == nil {
				return info
			}
			last = err
		}
		if time.Now().After(deadline) {
			t.Fatalf("no node took the write of %s/%s: %v", space, key, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// readAny reads key through whichever of the nodes answers first,
// retrying (a missing object too) while leadership settles.
func readAny(t *testing.T, among []*Node, space, key string) string {
	t.Helper()
	return readUntil(t, among, space, key, false)
}

// readAnyOrAbsent is readAny that takes a missing object for "".
func readAnyOrAbsent(t *testing.T, among []*Node, space, key string) string {
	t.Helper()
	return readUntil(t, among, space, key, true)
}

func readUntil(t *testing.T, among []*Node, space, key string, absentOK bool) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var last error
		for _, nd := range among {
			b, _, err := get(t, nd, object.GetRequest{Space: space, Key: key})
			if err == nil {
				return string(b)
			}
			if absentOK && wire.CodeOf(err) == wire.CodeNotFound {
				return ""
			}
			last = err
		}
		if time.Now().After(deadline) {
			t.Fatalf("no node served the read of %s/%s: %v", space, key, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestReplicatedRange creates a space on a three-node cluster: its range
// gets a replica on every node, a write through the leaseholder is applied
// by all three, and after the leaseholder's node stops another replica
// takes the lease and serves the data and new writes.
func TestReplicatedRange(t *testing.T) {
	ctx := context.Background()
	first := openNode(t, clusterConfig(t, ""))
	nodes := []*Node{first, openNode(t, clusterConfig(t, first.PeerAddr())), openNode(t, clusterConfig(t, first.PeerAddr()))}
	if _, err := first.CreateSpace(ctx, "replicated", object.SpaceSettings{Ranges: 1}); err != nil {
		t.Fatal(err)
	}
	sp, err := first.catalog.GetSpace(ctx, "replicated")
	if err != nil {
		t.Fatal(err)
	}
	descs, err := first.catalog.SpaceRanges(ctx, sp.ID)
	if err != nil || len(descs) != 1 || len(descs[0].Replicas) != 3 {
		t.Fatalf("ranges of the space: %+v, %v", descs, err)
	}
	rangeID := descs[0].ID
	leaseholder := func(among []*Node) *Node {
		deadline := time.Now().Add(60 * time.Second)
		for {
			for _, n := range among {
				if r := n.ranges.Replica(rangeID); r != nil && r.Leads() {
					return n
				}
			}
			if time.Now().After(deadline) {
				t.Fatal("no replica of the range holds its lease")
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	lh := leaseholder(nodes)
	v := put(t, lh, "replicated", "k", []byte("replicated body"))
	applied := lh.ranges.Replica(rangeID).Status().Applied
	for _, n := range nodes {
		waitFor := time.Now().Add(30 * time.Second)
		for {
			r := n.ranges.Replica(rangeID)
			if r != nil && r.Status().Applied >= applied {
				break
			}
			if time.Now().After(waitFor) {
				t.Fatalf("node %d did not apply the write", n.NodeID())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// A follower serves the read through the leaseholder, never from its
	// own (possibly stale) state.
	for _, n := range nodes {
		if n != lh {
			n.mu.RLock()
			sp := n.mu.spaces["replicated"]
			n.mu.RUnlock()
			if sp == nil {
				t.Fatalf("follower %d has not opened the space", n.NodeID())
			}
			r := sp.tab.Ranges()[0]
			r.SetHint(0) // set again only by a read forwarded to the leaseholder
			b, info, err := get(t, n, object.GetRequest{Space: "replicated", Key: "k"})
			if err != nil || string(b) != "replicated body" || info.Version != v.Version {
				t.Fatalf("read through follower %d: %q %+v %v", n.NodeID(), b, info, err)
			}
			if r.Leads() || r.Hint() != lh.NodeID() {
				t.Fatalf("follower %d did not read through the leaseholder %d (lease here %v, hint %d)", n.NodeID(), lh.NodeID(), r.Leads(), r.Hint())
			}
		}
	}

	// The meta service survives the stop: three voters, and every node's
	// meta client pointed at all of them (each node follows the member
	// list every 500 ms; a node that joined through the stopped one knew
	// only it until then).
	waitThreeVoters(t, first)
	for _, n := range nodes {
		es, ok := n.meta.(*meta.EtcdStore)
		deadline := time.Now().Add(30 * time.Second)
		for ok && !es.Embedded() && len(es.Endpoints()) < 3 {
			if time.Now().After(deadline) {
				t.Fatalf("node %d's meta client knows only %v", n.NodeID(), es.Endpoints())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	lh.Close()
	var rest []*Node
	for _, n := range nodes {
		if n != lh {
			rest = append(rest, n)
		}
	}
	stopped := time.Now()
	next := leaseholder(rest)
	t.Logf("node %d holds the lease %v after node %d stopped", next.NodeID(), time.Since(stopped).Round(time.Millisecond), lh.NodeID())
	b, info, err := get(t, next, object.GetRequest{Space: "replicated", Key: "k"})
	if err != nil || string(b) != "replicated body" || info.Version != v.Version {
		t.Fatalf("read on the new leaseholder: %q %+v %v", b, info, err)
	}
	// The stopped node may have led the oracle too: retry while it moves.
	if v2 := writeAny(t, rest, "replicated", "k", "after failover"); v2.Parent != v.Version {
		t.Fatalf("write after failover has parent %x, want %x", v2.Parent, v.Version)
	}
}

// TestConcurrentJoins joins two nodes through the first at the same time:
// admissions are serialized, so both meta members start (none founds a
// cluster of its own) and the meta service ends with three started members.
func TestConcurrentJoins(t *testing.T) {
	ctx := context.Background()
	first := openNode(t, clusterConfig(t, ""))
	var wg sync.WaitGroup
	joined := make([]*Node, 2)
	errs := make([]error, 2)
	for i := range joined {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := openStarted(ctx, clusterConfig(t, first.PeerAddr()))
			if err == nil {
				n.Serve()
				t.Cleanup(func() { n.Close() })
			}
			joined[i], errs[i] = n, err
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	ms := first.meta.(membership)
	deadline := time.Now().Add(30 * time.Second)
	for {
		members, err := ms.Members(ctx)
		started := 0
		for _, m := range members {
			if m.Name != "" {
				started++
			}
		}
		if err == nil && len(members) == 3 && started == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("meta members after two concurrent joins: %+v, %v", members, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, n := range joined {
		if _, err := n.catalog.Nodes(ctx); err != nil {
			t.Fatalf("node %d cannot read the shared cluster map: %v", n.NodeID(), err)
		}
	}
	if nodes, _ := first.catalog.Nodes(ctx); len(nodes) != 3 {
		t.Fatalf("cluster map has %d nodes", len(nodes))
	}
}

// waitThreeVoters waits until the meta service, seen through n, has three
// members, all voters: a node stopped before that (a learner still being
// promoted) may take the quorum with it.
func waitThreeVoters(t *testing.T, n *Node) {
	t.Helper()
	ms := n.meta.(membership)
	deadline := time.Now().Add(60 * time.Second)
	for {
		members, err := ms.Members(context.Background())
		voters := 0
		for _, m := range members {
			if !m.Learner {
				voters++
			}
		}
		if err == nil && len(members) == 3 && voters == 3 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("meta members never became three voters: %+v, %v", members, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// metaVoters returns the names of the meta service's voters and learners
// as seen through n.
func metaVoters(t *testing.T, n *Node) (voters, learners []string) {
	t.Helper()
	members, err := n.meta.(membership).Members(context.Background())
	if err != nil {
		return nil, nil
	}
	for _, m := range members {
		if m.Learner {
			learners = append(learners, m.Name)
		} else {
			voters = append(voters, m.Name)
		}
	}
	slices.Sort(voters)
	return voters, learners
}

// waitMetaVoters waits until the meta service's voters are exactly want
// (and it has no learners).
func waitMetaVoters(t *testing.T, n *Node, want ...string) {
	t.Helper()
	slices.Sort(want)
	deadline := time.Now().Add(60 * time.Second)
	for {
		voters, learners := metaVoters(t, n)
		if slices.Equal(voters, want) && len(learners) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("meta voters %v, learners %v; want voters %v", voters, learners, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestMetaToppedUpAfterRemoval: with at most three meta members, a
// fourth node joins as a client; when a voter's node is removed, the
// client becomes a member and is promoted, so the meta service has three
// voters again, and it stays one across a restart.
func TestMetaToppedUpAfterRemoval(t *testing.T) {
	ctx := context.Background()
	nodes := clusterOf(t, 4, func(c *Config) {
		c.MetaMembers, c.HeartbeatTTL, c.RepairCheck = 3, time.Second, 200*time.Millisecond
	})
	name := func(n *Node) string { return memberName(n.NodeID()) }
	waitMetaVoters(t, nodes[0], name(nodes[0]), name(nodes[1]), name(nodes[2]))
	client := nodes[3]
	if client.member.Load() != nil || client.id.Member {
		t.Fatalf("node %d joined beyond MetaMembers 3 but runs a member", client.NodeID())
	}

	victim := nodes[1]
	if err := nodes[0].NodeAdmin(ctx, wire.NodeDrain, victim.NodeID()); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for {
		err := nodes[0].NodeAdmin(ctx, wire.NodeRemove, victim.NodeID())
		if err == nil {
			break
		}
		if wire.CodeOf(err) != wire.CodeNotDrained || time.Since(start) > 60*time.Second {
			t.Fatalf("remove node %d: %v", victim.NodeID(), err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	removed := time.Now()
	victim.Close()
	waitMetaVoters(t, nodes[0], name(nodes[0]), name(nodes[2]), name(client))
	t.Logf("three meta voters again %v after node %d was removed", time.Since(removed).Round(time.Millisecond), victim.NodeID())
	if client.member.Load() == nil {
		t.Fatal("the client node's new member is not its own")
	}

	// The new member survives a restart of its node: the identity says so.
	saved := client.id
	if v, c, err := client.eng.DB().Get(identityKey); err != nil {
		t.Fatal(err)
	} else {
		err = json.Unmarshal(v, &saved)
		c.Close()
		if err != nil || !saved.Member {
			t.Fatalf("saved identity after the top-up: %+v, %v", saved, err)
		}
	}
	cfg := restartConfig(client)
	client.Close()
	again := openNode(t, cfg)
	if !again.id.Member || again.member.Load() == nil {
		t.Fatalf("restarted node %d: member %v, running %v", again.NodeID(), again.id.Member, again.member.Load() != nil)
	}
	waitMetaVoters(t, nodes[0], name(nodes[0]), name(nodes[2]), name(again))

	// A node that stopped after its member started but before it saved
	// that starts the member again (here: the saved identity rolled back).
	id := again.id
	id.Member = false
	if err := again.writeIdentity(id); err != nil {
		t.Fatal(err)
	}
	cfg = restartConfig(again)
	again.Close()
	again = openNode(t, cfg)
	if !again.id.Member || again.member.Load() == nil {
		t.Fatalf("node %d restarted with member data but no saved membership: member %v, running %v", again.NodeID(), again.id.Member, again.member.Load() != nil)
	}
	waitMetaVoters(t, nodes[0], name(nodes[0]), name(nodes[2]), name(again))
	if _, err := again.catalog.CreateSpace(ctx, "after", meta.SpaceSettings{Ranges: 1}); err != nil {
		t.Fatal(err)
	}
}

func TestMetaMembersValidated(t *testing.T) {
	for _, k := range []int{-1, 2, 4, 9} {
		c := clusterConfig(t, "")
		c.MetaMembers = k
		c.EnsureDefaults()
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "meta members") {
			t.Errorf("MetaMembers %d: %v", k, err)
		}
	}
	c := clusterConfig(t, "")
	c.EnsureDefaults()
	if err := c.Validate(); err != nil || c.MetaMembers != 5 {
		t.Fatalf("default MetaMembers %d: %v", c.MetaMembers, err)
	}
}

// TestUnstartedMemberRemoved: a meta member added for a joiner that never
// started it (admitted, then gone) no longer blocks every later join: the
// membership reconciler removes it after MemberStartGrace, and the next
// node joins.
func TestUnstartedMemberRemoved(t *testing.T) {
	ctx := context.Background()
	cfg := clusterConfig(t, "")
	cfg.MemberStartGrace = time.Second
	first := openNode(t, cfg)
	ms := first.meta.(membership)
	ghost := fmt.Sprintf("https://127.0.0.1:%d", testenv.FreePort(t))
	ghostID, _, err := ms.AddLearner(ctx, ghost)
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	second := openNode(t, clusterConfig(t, first.PeerAddr()))
	t.Logf("joined %v after a never-started member was added", time.Since(began).Round(time.Millisecond))
	members, err := ms.Members(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		if m.ID == ghostID {
			t.Fatalf("the never-started member is still listed: %+v", members)
		}
	}
	if nodes, err := second.catalog.Nodes(ctx); err != nil || len(nodes) != 2 {
		t.Fatalf("cluster map after the join: %+v, %v", nodes, err)
	}
}
