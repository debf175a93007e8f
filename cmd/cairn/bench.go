package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairn-db/cairn/client"
	"github.com/cairn-db/cairn/internal/wire"
)

// benchResult is what `cairn bench --json` prints.
type benchResult struct {
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

	// With --s3 (see bench_s3.go):
	API       string        `json:"api,omitempty"`         // "s3"
	Payload   string        `json:"payload,omitempty"`     // PUT bodies: "signed" (SHA-256) or "unsigned"
	Objects   int           `json:"objects,omitempty"`     // list: objects per listing (ops are listings)
	TTFBP50Ms float64       `json:"ttfb_p50_ms,omitempty"` // get: time to the first body byte
	TTFBP99Ms float64       `json:"ttfb_p99_ms,omitempty"`
	PerOp     []benchResult `json:"per_op,omitempty"` // mixed: each kind of request

	// Transactions (txn, txn-read, gets): objects per op (MiB/s counts
	// them all) and the commits run again after a conflict.
	Conflicts int `json:"conflicts,omitempty"`
}

func newBenchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Closed-loop load over the native protocol or the S3 API: ops/s, MiB/s, p50/p99/p99.9",
		Long: `Closed-loop load: --concurrency workers each send a request, wait for
its reply and send the next, for --duration. Reports ops/s, MiB/s and
latency percentiles. Without --s3 it uses the native protocol (--server).

With --s3 ENDPOINT_URL it drives the S3 API through aws-sdk-go-v2 in the
shapes of MinIO's warp (path-style requests, one keep-alive connection per
worker, no retries, no body checksums beyond those a request requires):
  put     new objects of --size (each PUT's body is unique: no dedup)
  get     preloads --keys objects, then reads them whole at random; also
          reports the time to the first body byte
  stat    HeadObject on the preloaded objects
  delete  deletes the preloaded objects once each (stops when none is left)
  mixed   45% get, 30% stat, 15% put, 10% delete over the preloaded
          objects (a deleted object is put again by a later put)
  list    preloads --keys objects (default 10000 here) and lists them whole
          with ListObjectsV2, 1000 keys a page; latency is per full listing
Each run works under a fresh prefix, cairn-bench/<time>-<id>/, of --bucket
(created if missing); its objects are left in place. PUT bodies are signed
with their SHA-256 (what the SDK does over http) unless --unsigned-payload.
Credentials: --access-key/--secret-key, else (with --s3) AWS_ACCESS_KEY_ID
and AWS_SECRET_ACCESS_KEY, else CAIRN_ACCESS_KEY and CAIRN_SECRET_KEY, else
the credentials file's profile (--profile).`,
		Example: `  cairn bench --op get --size 1KiB --concurrency 64 --duration 10s
  cairn bench --op vosd --rounds 10 --concurrency 8 --data-dir ./data
  cairn bench --s3 http://127.0.0.1:7080 --op put --size 4KiB --concurrency 20
  cairn bench --s3 http://127.0.0.1:7080 --op get --size 16MiB --concurrency 8 --keys 64
  cairn bench --s3 http://127.0.0.1:7080 --op list --size 1KiB --concurrency 1 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f := cmd.Flags()
			op, _ := f.GetString("op")
			sizeS, _ := f.GetString("size")
			conc, _ := f.GetInt("concurrency")
			dur, _ := f.GetDuration("duration")
			nkeys, _ := f.GetInt("keys")
			space, _ := f.GetString("space")
			asJSON, _ := f.GetBool("json")
			conns, _ := f.GetInt("conns")
			size, err := parseSize(sizeS)
			if err != nil {
				return usageError{err}
			}
			if op == "query" {
				return runQueryBenchCmd(cmd, space, size, conc, dur, asJSON)
			}
			if op == "twitter" {
				return runTwitterBenchCmd(cmd, space, conc, dur, asJSON)
			}
			if op == "watch" {
				return runWatchBenchCmd(cmd, space, conc, dur, asJSON)
			}
			if endpoint, _ := f.GetString("s3"); endpoint != "" {
				return runS3BenchCmd(cmd, endpoint, op, sizeS, size, conc, dur, nkeys, asJSON)
			}
			if op == "vosd" {
				return runVOSDCmd(cmd, size, conc, space, asJSON)
			}
			switch {
			case !slices.Contains([]string{"put", "get", "mixed", "txn", "txn-read", "gets"}, op):
				return usageError{fmt.Errorf("--op %q: use put, get, mixed, txn, txn-read or gets", op)}
			case conc < 1 || nkeys < 1 || dur <= 0 || conns < 1:
				return usageError{errors.New("--concurrency, --keys, --conns and --duration must be positive")}
			}
			objects, _ := f.GetInt("objects")
			ranges, _ := f.GetInt("ranges")
			if objects < 1 || ranges < 1 || ranges > 256 {
				return usageError{errors.New("--objects must be positive and --ranges within 1 to 256")}
			}
			o, err := clientOptions(cmd)
			if err != nil {
				return err
			}
			o.Conns = conns
			c, err := client.DialOptions(cmd.Context(), o)
			if err != nil {
				return err
			}
			defer c.Close()
			ntags, _ := f.GetInt("tags")
			nfields, _ := f.GetInt("fields")
			if nfields < 0 || nfields > 16 || (nfields > 0 && size < int64(24*nfields+16)) {
				return usageError{errors.New("--fields within 0 to 16, with --size large enough for the document (24 bytes a field)")}
			}
			res, err := runBench(cmd.Context(), c, benchSpec{op: op, size: size, conc: conc, dur: dur, keys: nkeys, space: space,
				objects: objects, ranges: ranges, tags: ntags, fields: nfields,
				progress: func(s string) {
					if !asJSON && isTerminal(cmdStderr(cmd)) {
						fmt.Fprint(cmd.ErrOrStderr(), s)
					}
				}})
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(res)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s x%d for %.1fs: %d ops (%d errors), %.0f ops/s, %.1f MiB/s, p50 %.3f ms, p99 %.3f ms, p99.9 %.3f ms\n",
				res.Op, sizeS, res.Concurrency, res.Seconds, res.Ops, res.Errors, res.OpsPerSec, res.MiBPerSec, res.P50Ms, res.P99Ms, res.P999Ms)
			if res.Objects > 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "  %d objects per op over %d range(s): %.0f objects/s; %d conflicts retried\n",
					res.Objects, ranges, res.OpsPerSec*float64(res.Objects), res.Conflicts)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.String("op", "put", "workload: put, get, or mixed (50% get, 50% put); vosd (VOSD's version workload: --objects of --size, --rounds of --mods byte-range writes of --mod-size per object in one transaction, a snapshot per round; defaults 100 x 4MiB, 100 x 64 x 16KiB); txn (transactions each inserting --objects new objects), txn-read (read-only transactions of --objects keys), gets (--objects single GETs in a row, to compare); query (tag-equality queries over --objects objects, --matches sharing each value, on --ranges ranges; with --s3 also one done the S3 way: ListObjectsV2 + GetObjectTagging per object); twitter (Clouder's Twitter-like workload: --users posting --tweets each and following --follows others; timelines, hashtag search, mentions, tweets and follows in --mix, over a space per --placements of --ranges ranges (default 16), reporting each operation's throughput, latency and ranges asked); watch (--concurrency writers putting an object every --pause on one connection, a watch on another: how long a committed change takes to reach it); with --s3 also stat, delete, list, and mixed is 45% get, 30% stat, 15% put, 10% delete")
	f.Int("objects", 4, "objects per operation of txn, txn-read and gets; objects of vosd (default 100 there); objects of query (default 100000 there)")
	f.Int("matches", 100, "query: objects that share each value of the queried tag")
	f.Duration("pause", 10*time.Millisecond, "watch: each writer's pause between puts")
	f.Int("users", 1000, "twitter: users")
	f.Int("tweets", 20, "twitter: tweets loaded per user")
	f.Int("follows", 10, "twitter: users each user follows")
	f.StringSlice("placements", []string{"ordered", "hash", "tag:user"}, "twitter: the placements of the tweets' spaces, each run in turn")
	f.String("mix", "default", "twitter: the operations run: default (35% user_timeline, 25% friends_timeline, 10% search_hashtag, 10% mentions, 15% update, 3% follow, 2% unfollow), one operation's name, or OP=PERCENT,...")
	f.Int("tags", 0, "put, mixed: tags on each written object")
	f.Int("fields", 0, "put, mixed: write JSON documents with this many number fields, each with a field index the bench declares")
	f.Int("rounds", 100, "vosd: rounds (each: one new version of every object, then a snapshot)")
	f.Int("mods", 64, "vosd: modifications per object per round")
	f.String("mod-size", "16KiB", "vosd: size of each modification")
	f.String("data-dir", "", "vosd: the server's data directory, to report the disk the run took")
	f.Int("ranges", 1, "ranges of the space, if the bench creates it: keys spread over them (txn, txn-read, gets)")
	f.String("size", "1KiB", "object size")
	f.Int("concurrency", 64, "concurrent closed-loop workers")
	f.Duration("duration", 10*time.Second, "how long to run")
	f.Int("keys", 1000, "number of distinct keys; with --s3, objects preloaded for get, stat, delete, mixed and list (list: default 10000)")
	f.String("space", "bench", "space to use (created if missing)")
	f.Int("conns", 2, "connections to the server (native protocol; with --s3 each worker has its own)")
	f.Bool("json", false, "print the result as JSON")
	f.String("s3", "", "drive the S3 API at this endpoint URL (e.g. http://127.0.0.1:7080) instead of the native protocol")
	f.String("bucket", "", "with --s3: the bucket, created if missing (default: --space)")
	f.String("region", "", "with --s3: signing region (default $AWS_REGION, $AWS_DEFAULT_REGION or us-east-1)")
	f.Bool("unsigned-payload", false, "with --s3: send PUT bodies as UNSIGNED-PAYLOAD instead of signing their SHA-256")
	return cmd
}

type benchSpec struct {
	op       string
	size     int64
	conc     int
	dur      time.Duration
	keys     int
	space    string
	objects  int // per txn, txn-read or gets operation
	ranges   int // of a space the bench creates
	tags     int // on each write of put and mixed
	fields   int // indexed document fields of each write of put and mixed
	progress func(string)
}

// spreadAlphabet starts bench keys of the transaction workloads, so that
// they spread over the ranges a space is cut into (cluster.splitBounds
// cuts along it).
const spreadAlphabet = "0123456789abcdefghijklmnopqrstuvwxyz"

// benchDocument is a JSON document of size bytes: fields number fields
// f0, f1, ... (random values) and padding.
func benchDocument(size, fields int, rng *rand.Rand) []byte {
	b := make([]byte, 0, size)
	b = append(b, '{')
	for j := range fields {
		b = fmt.Appendf(b, `"f%d":%d,`, j, rng.IntN(1_000_000))
	}
	b = append(b, `"pad":"`...)
	for len(b) < size-2 {
		b = append(b, 'x')
	}
	return append(b, '"', '}')
}

func runBench(ctx context.Context, c *client.Client, s benchSpec) (benchResult, error) {
	multi := s.op == "txn" || s.op == "txn-read" || s.op == "gets"
	settings := client.SpaceSettings{}
	if multi {
		settings.Ranges = uint32(s.ranges)
	}
	if _, err := c.CreateSpace(ctx, s.space, settings); err != nil && !errors.Is(err, wire.ErrSpaceExists) {
		return benchResult{}, err
	}
	payload := make([]byte, s.size)
	for i := range payload {
		payload[i] = byte(rand.Uint32())
	}
	key := func(i int) string { return fmt.Sprintf("bench-%08d", i) }
	if multi {
		key = func(i int) string { return fmt.Sprintf("%c-bench-%08d", spreadAlphabet[i%len(spreadAlphabet)], i) }
	}
	if s.fields > 0 {
		// Writes are JSON documents with s.fields number fields, each
		// indexed (declared before the run; an index that exists stays).
		for j := range s.fields {
			if _, err := c.AddIndex(ctx, s.space, "doc.f"+strconv.Itoa(j), "number"); err != nil {
				return benchResult{}, fmt.Errorf("index doc.f%d: %w", j, err)
			}
		}
	}
	var conflicts atomic.Int64
	if s.op != "put" && s.op != "txn" {
		// Preload every key so that reads hit.
		var wg sync.WaitGroup
		errc := make(chan error, s.conc)
		next := make(chan int)
		for w := 0; w < s.conc; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					if _, err := c.Put(ctx, s.space, key(i), payload); err != nil {
						errc <- err
						return
					}
				}
			}()
		}
	feed:
		for i := 0; i < s.keys; i++ {
			select {
			case next <- i:
			case err := <-errc:
				close(next)
				wg.Wait()
				return benchResult{}, fmt.Errorf("preload: %w", err)
			case <-ctx.Done():
				break feed
			}
		}
		close(next)
		wg.Wait()
		select {
		case err := <-errc:
			return benchResult{}, fmt.Errorf("preload: %w", err)
		default:
		}
	}
	rctx, cancel := context.WithTimeout(ctx, s.dur)
	defer cancel()
	type worker struct {
		lat  latencies
		errs int
	}
	workers := make([]worker, s.conc)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range workers {
		wg.Add(1)
		go func(wk *worker, seed uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, 1))
			var buf []byte // benchGetStream's
			for seq := 0; rctx.Err() == nil; seq++ {
				k := key(rng.IntN(s.keys))
				put := s.op == "put" || (s.op == "mixed" && rng.IntN(2) == 0)
				t0 := time.Now()
				var err error
				switch {
				case s.op == "txn":
					err = benchTxn(rctx, c, s, payload, func(j int) string {
						return fmt.Sprintf("%c-txn-%d-%d-%d", spreadAlphabet[rng.IntN(len(spreadAlphabet))], seed, seq, j)
					}, &conflicts)
				case s.op == "txn-read":
					err = benchTxnRead(rctx, c, s, func() string { return key(rng.IntN(s.keys)) })
				case s.op == "gets":
					for range s.objects {
						if _, _, err = c.Get(rctx, s.space, key(rng.IntN(s.keys))); err != nil {
							break
						}
					}
				case put && (s.tags > 0 || s.fields > 0):
					var opts []client.PutOption
					if s.tags > 0 {
						tags := make(map[string]string, s.tags)
						for j := range s.tags {
							tags["tag"+strconv.Itoa(j)] = strconv.Itoa(rng.IntN(1000))
						}
						opts = append(opts, client.WithTags(tags))
					}
					body := payload
					if s.fields > 0 {
						body = benchDocument(len(payload), s.fields, rng)
						opts = append(opts, client.WithContentType("application/json"))
					}
					_, err = c.Put(rctx, s.space, k, body, opts...)
				case put:
					_, err = c.Put(rctx, s.space, k, payload)
				case s.size > streamGetSize:
					err = benchGetStream(rctx, c, s.space, k, &buf)
				default:
					_, _, err = c.Get(rctx, s.space, k)
				}
				if rctx.Err() != nil {
					return // the run ended mid-request: not a sample
				}
				if err != nil {
					wk.errs++
					continue
				}
				wk.lat = append(wk.lat, time.Since(t0))
			}
		}(&workers[w], uint64(w))
	}
	if s.progress != nil {
		go func() {
			t := time.NewTicker(time.Second)
			defer t.Stop()
			for {
				select {
				case <-rctx.Done():
					s.progress("\r\033[K")
					return
				case <-t.C:
					s.progress(fmt.Sprintf("\r\033[K%s: %.0fs of %.0fs", s.op, time.Since(start).Seconds(), s.dur.Seconds()))
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	var all latencies
	errs := 0
	for _, wk := range workers {
		all = append(all, wk.lat...)
		errs += wk.errs
	}
	all = all.sorted()
	ops := len(all)
	perOp := 1
	res := benchResult{Op: s.op, Size: s.size, Concurrency: s.conc, Seconds: elapsed.Seconds(), Ops: ops, Errors: errs}
	if multi {
		perOp, res.Objects, res.Conflicts = s.objects, s.objects, int(conflicts.Load())
	}
	res.OpsPerSec = float64(ops) / elapsed.Seconds()
	res.MiBPerSec = float64(ops*perOp) * float64(s.size) / (1 << 20) / elapsed.Seconds()
	res.P50Ms, res.P99Ms, res.P999Ms = ms(all.pct(0.50)), ms(all.pct(0.99)), ms(all.pct(0.999))
	return res, nil
}

// benchTxn runs one transaction inserting s.objects new objects, again
// while it loses conflicts.
func benchTxn(ctx context.Context, c *client.Client, s benchSpec, payload []byte, key func(int) string, conflicts *atomic.Int64) error {
	tries := 0
	_, err := c.Update(ctx, func(tx *client.Txn) error {
		if tries++; tries > 1 {
			conflicts.Add(1)
		}
		for j := range s.objects {
			if err := tx.Put(ctx, s.space, key(j), payload); err != nil {
				return err
			}
		}
		return nil
	}, client.MaxAttempts(20))
	return err
}

// benchTxnRead runs one read-only transaction of s.objects keys.
func benchTxnRead(ctx context.Context, c *client.Client, s benchSpec, key func() string) error {
	tx, err := c.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	for range s.objects {
		if _, _, err := tx.Get(ctx, s.space, key()); err != nil {
			return err
		}
	}
	return tx.Commit(ctx)
}

// streamGetSize: GETs of larger objects stream (Client.GetStream) into
// a buffer the worker reuses, as an application reading large objects
// does (Client.Get's doc), so the run measures the server and the
// transfer, not the client's allocation of a fresh buffer per object
// (on this VM kind, touching 16 MiB of new memory cost more than
// receiving it).
const streamGetSize = 1 << 20

func benchGetStream(ctx context.Context, c *client.Client, space, key string, buf *[]byte) error {
	rc, info, err := c.GetStream(ctx, space, key)
	if err != nil {
		return err
	}
	defer rc.Close()
	if *buf == nil {
		*buf = make([]byte, 1<<20)
	}
	var got int64
	for {
		k, err := rc.Read(*buf)
		got += int64(k)
		if err == io.EOF {
			if got != info.Size {
				return fmt.Errorf("get %s: %d bytes of %d", key, got, info.Size)
			}
			return nil
		}
		if err != nil {
			return err
		}
	}
}
