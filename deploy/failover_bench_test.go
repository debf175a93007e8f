package deploy

import (
	"context"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/cairn-db/cairn/client"
)

// BenchmarkFailoverDocker measures how soon a three-node cluster of
// containers takes writes again after a node is killed with SIGKILL: first
// the node leading the timestamp oracle (so the oracle's lease must run
// out before another node serves timestamps), then, once that node is back,
// the node leading the most ranges that does not lead the oracle. Writes go
// to keys in every range through the surviving nodes only, so the figure
// is the cluster's failover, not a client's dial timeout; a key counts as
// resumed at its first acknowledged write after the kill.
//
//	go test ./deploy -run '^$' -bench FailoverDocker -benchtime 1x
//
// With CAIRN_FAILOVER_LOGS=DIR, the surviving nodes' logs after each kill
// are written to DIR (the kill's time is in the benchmark's log).
func BenchmarkFailoverDocker(b *testing.B) {
	// The space's ranges must stay apart (an idle space merges them).
	c := newDockerCluster(b, 3, "--merge-size", "-1")
	ctx := context.Background()
	admin, err := client.Dial(ctx, c.seeds()...)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := admin.CreateSpace(ctx, "failover", client.SpaceSettings{Ranges: 6}); err != nil {
		b.Fatal(err)
	}
	admin.Close()
	c.writable("failover")
	time.Sleep(6 * time.Second) // leases settle where rebalancing puts them

	for b.Loop() {
		for _, tc := range []struct {
			oracle bool
			signal string
		}{{true, "KILL"}, {false, "KILL"}, {true, "STOP"}, {false, "STOP"}} {
			oracle, signal := tc.oracle, tc.signal
			rep := c.waitUp(3)
			var victim *dockerNode
			most := -1
			for _, nd := range rep.Nodes {
				if (nd.ID == rep.Oracle) != oracle || !oracle && nd.Leaders <= most {
					continue
				}
				for _, dn := range c.nodes {
					if dn.native() == nd.Native {
						victim, most = dn, nd.Leaders
					}
				}
			}
			if victim == nil {
				b.Fatalf("no node to kill (oracle %v): %+v", oracle, rep.Nodes)
			}
			b.Logf("sending SIG%s to %s at %s", signal, victim.name, time.Now().UTC().Format(time.RFC3339Nano))
			first, all := c.killAndTime(b, victim, "failover", signal)
			what := "range-leader"
			if oracle {
				what = "oracle"
			}
			what += "-" + signal
			b.Logf("killed %s (the %s, leading %d ranges): first write after %v, every key written after %v",
				victim.name, what, most, first.Round(time.Millisecond), all.Round(time.Millisecond))
			if dir := os.Getenv("CAIRN_FAILOVER_LOGS"); dir != "" {
				for _, dn := range c.nodes {
					if dn != victim {
						// Not docker(): it keeps only standard output, and
						// the nodes log to standard error.
						logs, _ := exec.Command("docker", "logs", "--tail", "400", dn.name).CombinedOutput()
						os.WriteFile(dir+"/"+what+"-"+dn.name+".log", logs, 0o644)
					}
				}
			}
			b.ReportMetric(first.Seconds(), what+"-first-s")
			b.ReportMetric(all.Seconds(), what+"-all-s")
			if signal == "KILL" {
				mustDocker(b, nil, "start", victim.name)
			} else {
				mustDocker(b, nil, "kill", "--signal", "CONT", victim.name)
			}
			c.waitUp(3)
			time.Sleep(8 * time.Second) // leases move back (--rebalance-after 5s)
		}
	}
}

// failoverAttempt bounds one write attempt in killAndTime (a healthy
// cluster answers in milliseconds).
const failoverAttempt = 250 * time.Millisecond

// killAndTime sends victim signal (KILL, or STOP to freeze it) and writes to 32 keys (in every range) through the other nodes
// until each has taken a write; it returns the time from the kill to the
// first acknowledged write and to the last key's.
func (c *dockerCluster) killAndTime(b *testing.B, victim *dockerNode, space, signal string) (first, all time.Duration) {
	var seeds []string
	for _, nd := range c.nodes {
		if nd != victim {
			seeds = append(seeds, nd.native())
		}
	}
	// NoRouting: the client's route table would still name the victim as
	// leaseholder for a while and spend attempts on it; the figure is the
	// cluster's failover as the surviving nodes serve it.
	cl, err := client.DialOptions(context.Background(), client.Options{Addrs: seeds, DialTimeout: time.Second, NoRouting: true})
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	mustDocker(b, nil, "kill", "--signal", signal, victim.name)
	killed := time.Now()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, key := range spreadKeys(32) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Since(killed) < time.Minute {
				// Short attempts sample finely when the cluster takes the
				// write again: one still waiting on the frozen or dead node
				// would otherwise hide a recovery behind its whole timeout.
				ctx, cancel := context.WithTimeout(context.Background(), failoverAttempt)
				_, err := cl.Put(ctx, space, key, []byte("after the kill"))
				cancel()
				if err == nil {
					d := time.Since(killed)
					mu.Lock()
					if first == 0 || d < first {
						first = d
					}
					all = max(all, d)
					mu.Unlock()
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
			b.Errorf("%s took no write for a minute after the kill", key)
		}()
	}
	wg.Wait()
	return first, all
}
