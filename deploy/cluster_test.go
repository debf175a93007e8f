package deploy

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/cairn-db/cairn/client"
	"github.com/cairn-db/cairn/internal/wire"
)

// dockerCluster is a Cairn cluster of containers on a network of its own.
// Every node has a fixed address on that network, which it advertises, so
// it keeps its address across restarts and reconnects and the test process
// on the host reaches it directly.
type dockerCluster struct {
	flags []string // extra server flags for every node
	t     testing.TB
	image string
	name  string // prefix of the containers' and volumes' names; the network's name
	base  string // the subnet's first three octets
	nodes []*dockerNode
	added int // nodes ever started, for numbering
}

// dockerNode is one node's container.
type dockerNode struct {
	num  int
	name string // container and volume
	ip   string
}

func (n *dockerNode) native() string { return n.ip + ":7070" }

// newDockerCluster starts an n-node cluster: the first node starts it, the
// others join through it; every node's server gets flags too. It returns
// once every node is up.
func newDockerCluster(t testing.TB, n int, flags ...string) *dockerCluster {
	c := &dockerCluster{t: t, image: testImage(t), name: fmt.Sprintf("cairnfault%d-%d", os.Getpid(), n), flags: flags}
	var err error
	for k := range 40 {
		// A /24 that no other network on this engine uses.
		base := fmt.Sprintf("172.30.%d", (os.Getpid()+n*31+k*7)%220+20)
		if _, err = docker(t, nil, "network", "create", "--subnet", base+".0/24", c.name); err == nil {
			c.base = base
			break
		}
	}
	if c.base == "" {
		t.Fatalf("no free subnet for the test network: %v", err)
	}
	t.Cleanup(c.destroy)
	c.add()
	c.waitUp(1)
	for range n - 1 {
		c.add()
	}
	c.waitUp(n)
	return c
}

// add starts a new node; all but the first join through the first.
func (c *dockerCluster) add() *dockerNode {
	c.added++
	nd := &dockerNode{num: c.added, name: fmt.Sprintf("%s-n%d", c.name, c.added), ip: fmt.Sprintf("%s.%d", c.base, 10+c.added)}
	// The root key and the token are the test's (main_test.go): the first
	// node registers the token, which every later node joins with, and
	// every node knows the root key from its environment.
	args := []string{"run", "-d", "--name", nd.name, "--hostname", fmt.Sprintf("n%d", nd.num),
		"--network", c.name, "--ip", nd.ip, "-v", nd.name + ":/data",
		"-e", "CAIRN_ROOT_ACCESS_KEY=" + rootAccess, "-e", "CAIRN_ROOT_SECRET_KEY=" + rootSecret,
		"-e", "CAIRN_ACCESS_KEY=" + rootAccess, "-e", "CAIRN_SECRET_KEY=" + rootSecret,
		"-e", "CAIRN_TOKEN=" + joinToken, c.image,
		"server", "--advertise", nd.ip, "--zone", fmt.Sprintf("z%d", nd.num),
		"--down-after", "30s", "--rebalance-after", "5s", "--token-ttl", "3h",
		"--chunk-cache", "268435456"} // (several nodes on one machine; each faults its cache in)
	args = append(args, c.flags...)
	if len(c.nodes) > 0 {
		args = append(args, "--join", c.nodes[0].ip+":7071")
	}
	mustDocker(c.t, nil, args...)
	c.nodes = append(c.nodes, nd)
	return nd
}

// destroy removes the containers, their volumes and the network, showing
// each node's log first if the test failed.
func (c *dockerCluster) destroy() {
	for i := 1; i <= c.added; i++ {
		name := fmt.Sprintf("%s-n%d", c.name, i)
		if c.t.Failed() {
			logs, _ := docker(c.t, nil, "logs", "--tail", "150", name)
			c.t.Logf("log of %s:\n%s", name, logs)
		}
		docker(c.t, nil, "rm", "-f", name)
		docker(c.t, nil, "volume", "rm", "-f", name)
	}
	docker(c.t, nil, "network", "rm", c.name)
}

// seeds is every node's native address.
func (c *dockerCluster) seeds() []string {
	var out []string
	for _, n := range c.nodes {
		out = append(out, n.native())
	}
	return out
}

// status asks any node for the cluster's state.
func (c *dockerCluster) status(ctx context.Context) (client.ClusterReport, error) {
	cl, err := client.Dial(ctx, c.seeds()...)
	if err != nil {
		return client.ClusterReport{}, err
	}
	defer cl.Close()
	return cl.ClusterStatus(ctx)
}

// waitUp waits until the cluster map shows n nodes up and every range has
// a known leader.
func (c *dockerCluster) waitUp(n int) client.ClusterReport {
	c.t.Helper()
	deadline := time.Now().Add(120 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		rep, err := c.status(ctx)
		cancel()
		up := 0
		for _, nd := range rep.Nodes {
			if nd.State == "up" {
				up++
			}
		}
		if err == nil && up == n {
			return rep
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("the cluster did not reach %d nodes up: %d up, %v", n, up, err)
		}
		time.Sleep(time.Second)
	}
}

// nodeID is the cluster's id for nd, read from the cluster map.
func (c *dockerCluster) nodeID(nd *dockerNode) uint64 {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rep, err := c.status(ctx)
	if err != nil {
		c.t.Fatal(err)
	}
	for _, m := range rep.Nodes {
		if m.Native == nd.native() {
			return m.ID
		}
	}
	c.t.Fatalf("%s (%s) is not in the cluster map", nd.name, nd.native())
	return 0
}

// remove drains nd, removes it from the cluster once it holds nothing, and
// deletes its container.
func (c *dockerCluster) remove(nd *dockerNode) {
	c.t.Helper()
	id := c.nodeID(nd)
	ctx := context.Background()
	// A node does not remove itself: ask the others.
	var others []string
	for _, n := range c.nodes {
		if n != nd {
			others = append(others, n.native())
		}
	}
	cl, err := client.Dial(ctx, others...)
	if err != nil {
		c.t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.DrainNode(ctx, id); err != nil {
		c.t.Fatalf("drain %s: %v", nd.name, err)
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		err := cl.RemoveNode(ctx, id)
		if err == nil {
			break
		}
		if wire.CodeOf(err) != wire.CodeNotDrained && !client.NotApplied(err) || time.Now().After(deadline) {
			c.t.Fatalf("remove %s: %v", nd.name, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	mustDocker(c.t, nil, "rm", "-f", nd.name)
	for i, n := range c.nodes {
		if n == nd {
			c.nodes = append(c.nodes[:i:i], c.nodes[i+1:]...)
			break
		}
	}
}

// writable waits until a write through any node succeeds and returns how
// long that took.
func (c *dockerCluster) writable(space string) time.Duration {
	c.t.Helper()
	start := time.Now()
	var cl *client.Client
	for {
		var err error
		if cl, err = client.DialOptions(context.Background(), client.Options{Addrs: c.seeds(), DialTimeout: time.Second}); err == nil {
			break
		}
		if time.Since(start) > 2*time.Minute {
			c.t.Fatalf("no node answers: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	defer cl.Close()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := cl.Put(ctx, space, "writable", []byte(time.Now().String()))
		cancel()
		if err == nil {
			return time.Since(start)
		}
		if time.Since(start) > 2*time.Minute {
			c.t.Fatalf("the cluster took no write for %v: %v", time.Since(start).Round(time.Second), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
