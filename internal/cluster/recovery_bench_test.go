package cluster

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/chunk"
	"github.com/cairn-db/cairn/internal/keys"
	"github.com/cairn-db/cairn/internal/meta"
	"github.com/cairn-db/cairn/internal/object"
)

// BenchmarkRecovery measures what a four-node cluster (one process, one
// machine) does when it loses a node: how soon writes to the ranges the
// node led resume, and how fast the chunk copies it held are restored to
// three, against the machine's fsync'd disk write rate and loopback TCP
// rate, and what foreground PUTs get meanwhile.
//
//	CAIRN_RECOVERY_MIB=512 go test ./internal/node -run '^$' -bench Recovery -benchtime 1x
//
// CAIRN_RECOVERY_RATE sets --repair-rate (bytes per second per node;
// default -1, no limit); CAIRN_RECOVERY_DEBUG=1 logs the nodes to stderr.
func BenchmarkRecovery(b *testing.B) {
	mib := envInt("CAIRN_RECOVERY_MIB", 128)
	rate := int64(envInt("CAIRN_RECOVERY_RATE", -1))
	disk := diskRate(b, mib)
	netRate := loopbackRate(b, mib)
	for range b.N {
		ctx := context.Background()
		nodes := clusterOf(b, 4, func(c *Config) {
			c.HeartbeatTTL, c.DownAfter, c.RepairCheck, c.RepairRate = time.Second, time.Second, 200*time.Millisecond, rate
			c.RebalanceAfter = time.Hour // leases stay where they are until the stop
			if os.Getenv("CAIRN_RECOVERY_DEBUG") != "" {
				c.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
			}
		})
		if _, err := nodes[0].CreateSpace(ctx, "recovery", object.SpaceSettings{Ranges: 4}); err != nil {
			b.Fatal(err)
		}
		rnd := rand.New(rand.NewPCG(1, 2))
		var hashes []chunk.Hash
		seen := map[chunk.Hash]bool{}
		for i := range mib / 16 {
			info := writeAny(b, nodes, "recovery", fmt.Sprintf("obj-%d", i), string(randBytes(rnd, 16<<20)))
			for _, ref := range manifest(b, nodes[0], "recovery", fmt.Sprintf("obj-%d", i), info.Version).Chunks {
				if !seen[ref.Hash] {
					seen[ref.Hash] = true
					hashes = append(hashes, ref.Hash)
				}
			}
		}
		// The victim leads every range it holds a replica of (leadership is
		// moved to it), so its stop costs those ranges a failover. The
		// foreground load and the checks go through another node, front.
		victim, front := nodes[1], nodes[0]
		var led []uint64
		for _, d := range rangesOf(b, front, "recovery") {
			if slices.Contains(d.Replicas, victim.NodeID()) {
				led = append(led, d.ID)
			}
		}
		leadsAll := func() bool {
			for _, id := range led {
				if rep := victim.ranges.Replica(id); rep == nil || !rep.Status().IsLeader {
					for _, n := range nodes {
						if rep := n.ranges.Replica(id); rep != nil && rep.Status().IsLeader {
							rep.TransferLeadership(victim.NodeID())
						}
					}
					return false
				}
			}
			return true
		}
		for deadline := time.Now().Add(30 * time.Second); !leadsAll(); time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				b.Fatalf("node %d did not take the lead of ranges %v", victim.NodeID(), led)
			}
		}
		most := len(led)
		var lost []chunk.Hash
		for _, h := range hashes {
			if ok, _ := victim.chunks.Has(h); ok {
				lost = append(lost, h)
			}
		}
		rest := []*Node{}
		for _, n := range nodes {
			if n != victim {
				rest = append(rest, n)
			}
		}

		// Foreground: 8 writers of 4 KiB objects through front.
		var fg atomic.Int64
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				val := strings.Repeat("f", 4096)
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
					_, err := front.Put(cctx, &object.PutRequest{Space: "recovery", Key: fmt.Sprintf("fg-%d-%d", w, i%100), Size: 4096}, strings.NewReader(val))
					cancel()
					if err == nil {
						fg.Add(1)
					} else if os.Getenv("CAIRN_RECOVERY_DEBUG") != "" {
						fmt.Fprintf(os.Stderr, "foreground put: %v\n", err)
					}
				}
			})
		}
		before := fg.Load()
		time.Sleep(2 * time.Second)
		calm := float64(fg.Load()-before) / 2

		// Failover: a write to every range the victim led succeeds again.
		probe := map[uint64]string{}
		for i := 0; len(probe) < most && i < 10000; i++ {
			key := fmt.Sprintf("probe-%d", i)
			s, release, err := front.acquire(ctx, "recovery")
			if err != nil {
				b.Fatal(err)
			}
			id := s.tab.Route(keys.Object(s.meta.ID, nil, []byte(key))).Desc().ID
			release()
			if slices.Contains(led, id) && probe[id] == "" {
				probe[id] = key
			}
		}
		victim.Close()
		killed := time.Now()
		var failover time.Duration
		for _, key := range probe {
			writeAny(b, rest, "recovery", key, "x")
			failover = max(failover, time.Since(killed))
		}

		// Restore: every chunk on three of the nodes left; foreground
		// PUTs are counted from the node being down (copying starts) to
		// the end.
		var restored, down time.Duration
		var fgAtDown int64
		deadline := time.Now().Add(10 * time.Minute)
		for {
			if down == 0 {
				all, _ := front.catalog.Nodes(ctx)
				for _, nd := range all {
					if nd.ID == victim.NodeID() && nd.State == meta.NodeDown {
						down, fgAtDown = time.Since(killed), fg.Load()
					}
				}
			}
			short := 0
			for _, h := range hashes {
				if copies(rest, h) < 3 {
					short++
				}
			}
			if short == 0 && down != 0 {
				restored = time.Since(killed)
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("%d chunks short of three copies after 10 minutes", short)
			}
			time.Sleep(50 * time.Millisecond)
		}
		during := float64(fg.Load()-fgAtDown) / (restored - down).Seconds()
		close(stop)
		wg.Wait()
		var bytes int64
		for _, h := range lost {
			d, err := rest[0].plane.GetChunk(ctx, h, nil, 3)
			if err != nil {
				b.Fatal(err)
			}
			bytes += int64(len(d))
		}
		copied := float64(bytes) / (1 << 20)
		// Copying starts once the node is down (after the suspect grace
		// and the 1s down timeout); the rate is over the time after that.
		copyTime := restored - down
		b.ReportMetric(failover.Seconds(), "s-failover")
		b.ReportMetric(restored.Seconds(), "s-restore")
		b.ReportMetric(down.Seconds(), "s-down")
		b.ReportMetric(copied/copyTime.Seconds(), "MiB/s-repair")
		b.ReportMetric(disk, "MiB/s-disk")
		b.ReportMetric(netRate, "MiB/s-loopback")
		b.ReportMetric(calm, "put/s-before")
		b.ReportMetric(during, "put/s-during")
		b.Logf("%d MiB in %d chunks; node %d led %d of 4 ranges and held %d chunks (%.0f MiB); writes resumed on its ranges %v after the stop; 3 copies again %v after the stop (down after 1s); foreground 4 KiB PUTs %.0f/s before, %.0f/s during",
			mib, len(hashes), victim.NodeID(), most, len(lost), copied, failover.Round(time.Millisecond), restored.Round(time.Millisecond), calm, during)
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v != 0 {
		return v
	}
	return def
}

// diskRate is the machine's sequential write rate into the temp dir, in
// MiB/s, with an fsync at the end: mib MiB in 4 MiB writes.
func diskRate(b *testing.B, mib int) float64 {
	f, err := os.Create(filepath.Join(b.TempDir(), "disk"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := randBytes(rand.New(rand.NewPCG(5, 6)), 4<<20)
	start := time.Now()
	for range mib / 4 {
		if _, err := f.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
	return float64(mib) / time.Since(start).Seconds()
}

// loopbackRate is one TCP stream's rate over loopback, in MiB/s.
func loopbackRate(b *testing.B, mib int) float64 {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err == nil {
			_, _ = io.Copy(io.Discard, c)
			c.Close()
		}
	}()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	start := time.Now()
	for range mib {
		if _, err := c.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	c.Close()
	return float64(mib) / time.Since(start).Seconds()
}
