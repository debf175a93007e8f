package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/cluster"
	"github.com/cairn-db/cairn/internal/node"
)

const (
	benchS3Access = "BENCHKEY"
	benchS3Secret = "bench-secret-key"
)

// startS3Node runs a node in this process on free ports and returns its
// S3 endpoint.
func startS3Node(t *testing.T) string {
	t.Helper()
	n, err := node.Open(context.Background(), node.Config{
		Config: cluster.Config{DataDir: t.TempDir(), MetaPort: -1, PeerPort: -1, MetaClientPort: -1,
			RootAccessKey: benchS3Access, RootSecretKey: benchS3Secret,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
		NativePort: -1, HTTPPort: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	n.Serve()
	t.Cleanup(func() { _ = n.Close() })
	return "http://" + n.HTTPAddr()
}

// TestBenchS3 runs every S3 workload briefly on small objects: each must
// complete requests and none may fail.
func TestBenchS3(t *testing.T) {
	endpoint := startS3Node(t)
	for _, tc := range []struct {
		op       string
		size     int64
		unsigned bool
		dur      time.Duration
		conc     int
	}{
		{op: "put", size: 1 << 10},
		{op: "put", size: 300 << 10, unsigned: true, dur: 2 * time.Second}, // two chunks, unsigned; room for a chunked PUT under -race on a busy machine
		{op: "get", size: 1 << 10},
		{op: "get", size: 0},
		{op: "stat", size: 1 << 10},
		{op: "delete", size: 1 << 10},
		{op: "mixed", size: 1 << 10},
		// A listing is two pages; one at a time, with room for it to
		// finish under -race beside the rest of the suite on two cores (four
		// at once took over 2 s each on such a machine).
		{op: "list", size: 16, dur: 5 * time.Second, conc: 1},
	} {
		if tc.dur == 0 {
			tc.dur = 300 * time.Millisecond
		}
		if tc.conc == 0 {
			tc.conc = 4
		}
		res, err := runS3Bench(context.Background(), s3BenchSpec{
			endpoint: endpoint, region: "us-east-1", access: benchS3Access, secret: benchS3Secret, bucket: "bench",
			op: tc.op, size: tc.size, conc: tc.conc, dur: tc.dur, keys: 1200, unsigned: tc.unsigned,
			warn: func(s string) { t.Logf("%s: %s", tc.op, s) },
		})
		if err != nil {
			t.Fatalf("%s: %v", tc.op, err)
		}
		t.Logf("%s %d: %d ops, %.0f ops/s, p50 %.2f ms, p99 %.2f ms, first byte p50 %.2f ms", tc.op, tc.size, res.Ops, res.OpsPerSec, res.P50Ms, res.P99Ms, res.TTFBP50Ms)
		if res.Ops == 0 || res.Errors != 0 {
			t.Fatalf("%s: %d ops, %d errors", tc.op, res.Ops, res.Errors)
		}
		if res.API != "s3" {
			t.Errorf("%s: api %q", tc.op, res.API)
		}
		switch tc.op {
		case "get":
			if res.TTFBP50Ms <= 0 || res.TTFBP50Ms > res.P99Ms {
				t.Errorf("get: first byte p50 %.3f ms, latency p99 %.3f ms", res.TTFBP50Ms, res.P99Ms)
			}
			if want := float64(res.Ops) * float64(tc.size) / (1 << 20) / res.Seconds; res.MiBPerSec != want {
				t.Errorf("get: %.3f MiB/s, want %.3f", res.MiBPerSec, want)
			}
		case "list":
			if res.Objects != 1200 {
				t.Errorf("list: %d objects per listing, want 1200", res.Objects)
			}
		case "mixed":
			if len(res.PerOp) != 4 {
				t.Fatalf("mixed: per-op results %+v", res.PerOp)
			}
			sum := 0
			for _, r := range res.PerOp {
				sum += r.Ops
				if r.Errors != 0 || (res.Ops >= 200 && r.Ops == 0) {
					t.Errorf("mixed %s: %d ops, %d errors (of %d)", r.Op, r.Ops, r.Errors, res.Ops)
				}
			}
			if sum != res.Ops {
				t.Errorf("mixed: per-op ops add up to %d, not %d", sum, res.Ops)
			}
		}
	}
}

// TestBenchS3Command runs `cairn bench --s3` with its flags and the key
// from the environment.
func TestBenchS3Command(t *testing.T) {
	endpoint := startS3Node(t)
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("CAIRN_ROOT_ACCESS_KEY", benchS3Access)
	t.Setenv("CAIRN_ROOT_SECRET_KEY", benchS3Secret)
	root := newRoot()
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs([]string{"bench", "--s3", endpoint, "--bucket", "cli", "--op", "get", "--size", "2KiB",
		"--concurrency", "2", "--keys", "20", "--duration", "200ms", "--json"})
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("bench --s3: %v; stderr %s", err, errb.String())
	}
	var res benchResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("output %q: %v", out.String(), err)
	}
	if res.Op != "get" || res.Size != 2048 || res.Ops == 0 || res.Errors != 0 || res.TTFBP99Ms <= 0 {
		t.Fatalf("result %+v", res)
	}

	t.Setenv("CAIRN_ROOT_SECRET_KEY", "")
	root = newRoot()
	root.SetOut(io.Discard)
	root.SetErr(io.Discard)
	root.SetArgs([]string{"bench", "--s3", endpoint, "--op", "get"})
	if err := root.ExecuteContext(context.Background()); exitCode(err) != 2 {
		t.Fatalf("without a key: %v (exit %d), want a usage error", err, exitCode(err))
	}
}
