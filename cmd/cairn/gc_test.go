package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/cairn-db/cairn/client"
	"github.com/cairn-db/cairn/internal/testenv"
)

// TestDiskComesBack writes 1 GiB (256 MiB with -short), deletes every
// object and drops the space, and waits for the server's own collector
// (--gc-grace 2s, --gc-interval 1s) to give 90% of it back: the data
// directory must shrink by that much. cairn gc status shows it.
func TestDiskComesBack(t *testing.T) {
	bin := cairnBinary(t)
	dir := t.TempDir()
	srv := startServer(t, bin, dir, [5]int{testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t)},
		"--gc-grace", "2s", "--gc-interval", "1s")
	defer srv.kill()
	must, _ := cliChecks(t, bin, srv)
	total, each := 1<<30, 64<<20
	if testing.Short() {
		total = 256 << 20
	}
	must("", "space", "create", "scratch")
	start := dirBytes(dir)
	rng := rand.NewChaCha8([32]byte{1})
	body := make([]byte, each)
	for i := 0; i < total/each; i++ {
		rng.Read(body)
		must(string(body), "put", fmt.Sprintf("scratch/part-%02d", i), "-")
	}
	full := dirBytes(dir)
	if full-start < int64(total) {
		t.Fatalf("the data directory grew by %d bytes for %d written", full-start, total)
	}
	for i := 0; i < total/each; i++ {
		must("", "rm", fmt.Sprintf("scratch/part-%02d", i))
	}
	must("", "space", "rm", "scratch")
	deleted := time.Now()
	goal := full - int64(total)*9/10
	for {
		now := dirBytes(dir)
		if now <= goal {
			t.Logf("data directory: %d MiB before, %d MiB full, %d MiB %v after the space was dropped",
				start>>20, full>>20, now>>20, time.Since(deleted).Round(time.Second))
			break
		}
		if time.Since(deleted) > 2*time.Minute {
			t.Fatalf("data directory still %d MiB two minutes after dropping the space (full: %d MiB, goal %d MiB)\n%s",
				now>>20, full>>20, goal>>20, must("", "gc", "status"))
		}
		time.Sleep(500 * time.Millisecond)
	}
	// The collection that gave the space back may still be compacting
	// (its totals come at its end): wait for them.
	for {
		var gcs []client.GCNode
		if err := json.Unmarshal([]byte(must("", "gc", "status", "--json")), &gcs); err != nil || len(gcs) != 1 {
			t.Fatalf("gc status --json: %v %+v", err, gcs)
		}
		g := gcs[0]
		if g.ReclaimedBytes >= int64(total)*9/10 && g.DeletedBytes >= int64(total) && g.Runs > 0 {
			break
		}
		if time.Since(deleted) > 2*time.Minute {
			t.Fatalf("collector two minutes after the drop: %+v", g)
		}
		time.Sleep(500 * time.Millisecond)
	}
	out := must("", "gc", "status")
	if !strings.Contains(out, "RECLAIMED") || !strings.Contains(out, "\n1 ") {
		t.Fatalf("gc status:\n%s", out)
	}
}
