// Command peerbench drives the peers Cairn is compared with, on the same
// machine and workload shapes as `cairn bench`:
//
//	peerbench etcd-put -endpoint 127.0.0.1:2379 -size 1024 -concurrency 64 -duration 10s
//	peerbench etcd-txn -endpoint 127.0.0.1:2379 -size 512 -objects 4 -concurrency 50 -duration 10s
//	peerbench loopback -size 16777216 -duration 5s
//
// Both print one JSON object, in the same shape as `cairn bench --json`.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

type result struct {
	Op          string  `json:"op"`
	Size        int64   `json:"size"`
	Concurrency int     `json:"concurrency"`
	Seconds     float64 `json:"seconds"`
	Ops         int     `json:"ops"`
	Errors      int     `json:"errors"`
	OpsPerSec   float64 `json:"ops_per_sec"`
	MiBPerSec   float64 `json:"mib_per_sec"`
	P50Ms       float64 `json:"p50_ms"`
	P99Ms       float64 `json:"p99_ms"`
	P999Ms      float64 `json:"p999_ms"`
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: peerbench etcd-put|etcd-txn|loopback [flags]")
		os.Exit(2)
	}
	var (
		res result
		err error
	)
	switch os.Args[1] {
	case "etcd-put":
		res, err = etcdPut(os.Args[2:])
	case "etcd-txn":
		res, err = etcdTxn(os.Args[2:])
	case "loopback":
		res, err = loopback(os.Args[2:])
	default:
		err = fmt.Errorf("unknown mode %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "peerbench:", err)
		os.Exit(1)
	}
	json.NewEncoder(os.Stdout).Encode(res)
}

func pct(s []time.Duration, q float64) float64 {
	if len(s) == 0 {
		return 0
	}
	i := int(q*float64(len(s)) + 0.5)
	if i >= len(s) {
		i = len(s) - 1
	}
	return float64(s[i]) / float64(time.Millisecond)
}

func etcdPut(args []string) (result, error) {
	fs := flag.NewFlagSet("etcd-put", flag.ExitOnError)
	endpoint := fs.String("endpoint", "127.0.0.1:2379", "etcd client endpoint")
	size := fs.Int("size", 1024, "value size")
	conc := fs.Int("concurrency", 64, "concurrent workers")
	dur := fs.Duration("duration", 10*time.Second, "run time")
	keys := fs.Int("keys", 1000, "distinct keys")
	fs.Parse(args)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{*endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return result{}, err
	}
	defer cli.Close()
	val := string(make([]byte, *size))
	res := closedLoop(*conc, *dur, func(ctx context.Context, w, i int) error {
		_, err := cli.Put(ctx, fmt.Sprintf("bench-%08d", (w*7919+i)%*keys), val)
		return err
	})
	res.Op, res.Size = "etcd-put", int64(*size)
	res.MiBPerSec = float64(res.Ops) * float64(*size) / (1 << 20) / res.Seconds
	return res, nil
}

// etcdTxn runs transactions that each insert -objects new keys of -size
// bytes (one Txn with that many puts), as cairn bench --op txn does.
func etcdTxn(args []string) (result, error) {
	fs := flag.NewFlagSet("etcd-txn", flag.ExitOnError)
	endpoint := fs.String("endpoint", "127.0.0.1:2379", "etcd client endpoint")
	size := fs.Int("size", 512, "value size")
	objects := fs.Int("objects", 4, "puts per transaction")
	conc := fs.Int("concurrency", 50, "concurrent workers")
	dur := fs.Duration("duration", 10*time.Second, "run time")
	fs.Parse(args)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{*endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return result{}, err
	}
	defer cli.Close()
	val := string(make([]byte, *size))
	res := closedLoop(*conc, *dur, func(ctx context.Context, w, i int) error {
		ops := make([]clientv3.Op, *objects)
		for j := range ops {
			ops[j] = clientv3.OpPut(fmt.Sprintf("txn-%d-%d-%d", w, i, j), val)
		}
		_, err := cli.Txn(ctx).Then(ops...).Commit()
		return err
	})
	res.Op, res.Size = "etcd-txn", int64(*size)
	res.MiBPerSec = float64(res.Ops) * float64(*objects**size) / (1 << 20) / res.Seconds
	return res, nil
}

// closedLoop runs op from conc workers, each calling it again as soon as
// it returns (worker w's i-th call), for dur, and returns the counts, the
// rate and the latency percentiles (an op cut off by the end is no
// sample).
func closedLoop(conc int, dur time.Duration, op func(ctx context.Context, w, i int) error) result {
	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()
	var (
		mu   sync.Mutex
		all  []time.Duration
		errs int
		wg   sync.WaitGroup
	)
	start := time.Now()
	for w := 0; w < conc; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			var lat []time.Duration
			e := 0
			for i := 0; ctx.Err() == nil; i++ {
				t0 := time.Now()
				err := op(ctx, w, i)
				if ctx.Err() != nil {
					break
				}
				if err != nil {
					e++
					continue
				}
				lat = append(lat, time.Since(t0))
			}
			mu.Lock()
			all = append(all, lat...)
			errs += e
			mu.Unlock()
		}(w)
	}
	wg.Wait()
	el := time.Since(start).Seconds()
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	return result{Concurrency: conc, Seconds: el, Ops: len(all), Errors: errs, OpsPerSec: float64(len(all)) / el,
		P50Ms: pct(all, .5), P99Ms: pct(all, .99), P999Ms: pct(all, .999)}
}

// loopback measures TCP bandwidth over 127.0.0.1 with one stream writing
// size-byte buffers: the ceiling for any transfer over loopback.
func loopback(args []string) (result, error) {
	fs := flag.NewFlagSet("loopback", flag.ExitOnError)
	size := fs.Int("size", 16<<20, "write size")
	dur := fs.Duration("duration", 3*time.Second, "run time")
	fs.Parse(args)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return result{}, err
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		io.Copy(io.Discard, c)
		c.Close()
	}()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		return result{}, err
	}
	buf := make([]byte, *size)
	start := time.Now()
	n := 0
	for time.Since(start) < *dur {
		if _, err := c.Write(buf); err != nil {
			return result{}, err
		}
		n++
	}
	c.Close()
	el := time.Since(start).Seconds()
	return result{Op: "loopback", Size: int64(*size), Concurrency: 1, Seconds: el, Ops: n,
		OpsPerSec: float64(n) / el, MiBPerSec: float64(n) * float64(*size) / (1 << 20) / el}, nil
}
