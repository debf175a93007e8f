package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/spf13/cobra"

	"github.com/cairn-db/cairn/client"
	"github.com/cairn-db/cairn/internal/wire"
)

// queryBenchResult is what `cairn bench --op query --json` prints.
type queryBenchResult struct {
	Op          string  `json:"op"`
	Objects     int     `json:"objects"`
	Matches     int     `json:"matches"`
	Ranges      int     `json:"ranges"`
	LoadSeconds float64 `json:"load_seconds,omitempty"`
	Concurrency int     `json:"concurrency"`
	Seconds     float64 `json:"seconds"`
	Queries     int     `json:"queries"`
	Errors      int     `json:"errors"`
	QueriesPerS float64 `json:"queries_per_sec"`
	P50Ms       float64 `json:"p50_ms"`
	P99Ms       float64 `json:"p99_ms"`
	Examined    int     `json:"examined_per_query"`
	RangesAsked int     `json:"ranges_per_query"`
	Plan        string  `json:"plan"`

	// The S3 way (--s3): list every object, then GetObjectTagging on
	// each, as mc find --tags does.
	S3Seconds  float64 `json:"s3_seconds,omitempty"`
	S3Requests int     `json:"s3_requests,omitempty"`
	S3Matches  int     `json:"s3_matches,omitempty"`
	Speedup    float64 `json:"speedup,omitempty"` // S3 way's time / query p50
}

// queryBenchGroups is how many objects share one value of the group tag.
func queryGroup(i, groups int) string { return "g" + strconv.Itoa(i%groups) }

// runQueryBenchCmd: --op query. It fills a space of --objects objects, each
// with three tags (group, a value --matches objects share; color; shard),
// unless the space holds that set already, then runs tag-equality queries
// on random groups for --duration and reports their latency; with --s3 it
// then finds one group the S3 way over the same data.
func runQueryBenchCmd(cmd *cobra.Command, space string, size int64, conc int, dur time.Duration, asJSON bool) error {
	f := cmd.Flags()
	objects, _ := f.GetInt("objects")
	if !f.Changed("objects") {
		objects = 100000
	}
	matches, _ := f.GetInt("matches")
	ranges, _ := f.GetInt("ranges")
	if !f.Changed("ranges") {
		ranges = 8
	}
	if !f.Changed("space") {
		space = "bench-query"
	}
	switch {
	case objects < 1 || matches < 1 || matches > objects || objects%matches != 0:
		return usageError{errors.New("--objects must be a positive multiple of --matches")}
	case ranges < 1 || ranges > 256 || conc < 1 || dur <= 0:
		return usageError{errors.New("--ranges within 1 to 256; --concurrency and --duration positive")}
	}
	o, err := clientOptions(cmd)
	if err != nil {
		return err
	}
	c, err := client.DialOptions(cmd.Context(), o)
	if err != nil {
		return err
	}
	defer c.Close()
	progress := func(s string) {
		if !asJSON && isTerminal(cmdStderr(cmd)) {
			fmt.Fprint(cmd.ErrOrStderr(), s)
		}
	}
	ctx := cmd.Context()
	res := queryBenchResult{Op: "query", Objects: objects, Matches: matches, Ranges: ranges, Concurrency: conc}
	groups := objects / matches
	if res.LoadSeconds, err = loadQueryBench(ctx, c, space, objects, groups, ranges, size, conc, progress); err != nil {
		return err
	}
	// Queries on random groups, closed loop.
	rctx, cancel := context.WithTimeout(ctx, dur)
	defer cancel()
	type worker struct {
		lat            latencies
		errs, examined int
		ranges         int
		plan           string
	}
	workers := make([]worker, conc)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range workers {
		wg.Go(func() {
			wk := &workers[w]
			rng := rand.New(rand.NewPCG(uint64(w), 3))
			for rctx.Err() == nil {
				g := queryGroup(rng.IntN(groups), groups)
				t0 := time.Now()
				r, err := c.Query(rctx, client.QueryRequest{Space: space, Filter: `tags.group == "` + g + `"`, Limit: uint32(min(matches, 10000))})
				if rctx.Err() != nil {
					return
				}
				if err != nil || len(r.Objects) != min(matches, 10000) {
					wk.errs++
					continue
				}
				wk.lat = append(wk.lat, time.Since(t0))
				wk.examined += r.Examined
				wk.ranges += r.Ranges
				wk.plan = r.Plan
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	var all latencies
	examined, asked := 0, 0
	for _, wk := range workers {
		all = append(all, wk.lat...)
		res.Errors += wk.errs
		examined += wk.examined
		asked += wk.ranges
		if wk.plan != "" {
			res.Plan = wk.plan
		}
	}
	all = all.sorted()
	res.Seconds, res.Queries = elapsed.Seconds(), len(all)
	if res.Queries == 0 {
		return fmt.Errorf("no query succeeded (%d failed)", res.Errors)
	}
	res.QueriesPerS = float64(res.Queries) / elapsed.Seconds()
	res.P50Ms, res.P99Ms = ms(all.pct(0.50)), ms(all.pct(0.99))
	res.Examined, res.RangesAsked = examined/res.Queries, asked/res.Queries
	if endpoint, _ := f.GetString("s3"); endpoint != "" {
		if err := queryTheS3Way(cmd, endpoint, space, conc, queryGroup(0, groups), &res, progress); err != nil {
			return err
		}
		res.Speedup = res.S3Seconds * 1000 / res.P50Ms
	}
	if asJSON {
		return json.NewEncoder(cmd.OutOrStdout()).Encode(res)
	}
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "query: %d objects over %d ranges, a tag shared by %d; x%d for %.1fs: %d queries (%d errors), %.0f queries/s, p50 %.3f ms, p99 %.3f ms\n",
		res.Objects, res.Ranges, res.Matches, res.Concurrency, res.Seconds, res.Queries, res.Errors, res.QueriesPerS, res.P50Ms, res.P99Ms)
	fmt.Fprintf(out, "  plan: %s; %d candidates examined and %d ranges asked per query\n", res.Plan, res.Examined, res.RangesAsked)
	if res.S3Seconds > 0 {
		fmt.Fprintf(out, "  the S3 way (ListObjectsV2 + GetObjectTagging per object, x%d): %.2f s, %d requests, %d matches: %.0fx the query's p50\n",
			res.Concurrency, res.S3Seconds, res.S3Requests, res.S3Matches, res.Speedup)
	}
	return nil
}

// loadQueryBench fills the space unless a marker object says it holds
// this set already; it returns the seconds the load took (0 if skipped).
func loadQueryBench(ctx context.Context, c *client.Client, space string, objects, groups, ranges int, size int64, conc int, progress func(string)) (float64, error) {
	marker := fmt.Sprintf("loaded-%d-%d-%d", objects, groups, size)
	if _, err := c.CreateSpace(ctx, space, client.SpaceSettings{Ranges: uint32(ranges)}); err != nil && !errors.Is(err, wire.ErrSpaceExists) {
		return 0, err
	}
	if _, err := c.Stat(ctx, space, "~"+marker); err == nil {
		return 0, nil
	}
	body := make([]byte, size)
	colors := []string{"red", "green", "blue", "cyan", "magenta", "yellow", "black", "white"}
	start := time.Now()
	if err := batchLoad(ctx, c, objects, conc, "objects", progress, func(b *client.Batch, i int) {
		b.Put(space, fmt.Sprintf("obj-%08d", i), body, client.WithTags(map[string]string{
			"group": queryGroup(i, groups), "color": colors[i%len(colors)], "shard": strconv.Itoa(i % 16)}))
	}); err != nil {
		return 0, err
	}
	if _, err := c.Put(ctx, space, "~"+marker, nil); err != nil {
		return 0, err
	}
	return time.Since(start).Seconds(), nil
}

// batchLoad runs put for 0..n-1 in BATCH requests of 64, conc at once,
// showing progress each second.
func batchLoad(ctx context.Context, c *client.Client, n, conc int, what string, progress func(string), put func(b *client.Batch, i int)) error {
	start := time.Now()
	var next, done atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, conc)
	const per = 64
	stop := make(chan struct{})
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				progress("\r\033[K")
				return
			case <-t.C:
				d := done.Load()
				progress(fmt.Sprintf("\r\033[Kloading %s: %d of %d (%.0f/s)", what, d, n, float64(d)/time.Since(start).Seconds()))
			}
		}
	}()
	for range conc {
		wg.Go(func() {
			for ctx.Err() == nil {
				i0 := int(next.Add(per)) - per
				if i0 >= n {
					return
				}
				b := c.Batch(ctx)
				for i := i0; i < min(i0+per, n); i++ {
					put(b, i)
				}
				rs, err := b.Do()
				for _, r := range rs {
					if err == nil && r.Err != nil {
						err = r.Err
					}
				}
				if err != nil {
					errc <- err
					return
				}
				done.Add(int64(len(rs)))
			}
		})
	}
	wg.Wait()
	close(stop)
	select {
	case err := <-errc:
		return fmt.Errorf("load %s: %w", what, err)
	default:
	}
	return ctx.Err()
}

// queryTheS3Way finds the objects of one group as a client of S3 alone
// must (mc find --tags): list every object, then ask each one's tags,
// conc requests at a time.
func queryTheS3Way(cmd *cobra.Command, endpoint, bucket string, conc int, group string, res *queryBenchResult, progress func(string)) error {
	ep, err := s3Endpoint(endpoint)
	if err != nil {
		return usageError{err}
	}
	access, secret, err := s3Credentials(cmd)
	if err != nil {
		return err
	}
	region, _ := cmd.Flags().GetString("region")
	if region == "" {
		region = firstEnv("AWS_REGION", "AWS_DEFAULT_REGION")
	}
	if region == "" {
		region = "us-east-1"
	}
	s3c := newS3BenchClient(s3BenchSpec{endpoint: ep, access: access, secret: secret, region: region}, conc)
	ctx := cmd.Context()
	start := time.Now()
	keys := make(chan string, 4096)
	var requests, matched, seen atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, conc+1)
	for range conc {
		wg.Go(func() {
			for k := range keys {
				out, err := s3c.GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: aws.String(bucket), Key: aws.String(k)})
				requests.Add(1)
				if err != nil {
					errc <- fmt.Errorf("GetObjectTagging %s: %w", k, err)
					continue
				}
				for _, t := range out.TagSet {
					if aws.ToString(t.Key) == "group" && aws.ToString(t.Value) == group {
						matched.Add(1)
					}
				}
				if n := seen.Add(1); n%10000 == 0 {
					progress(fmt.Sprintf("\r\033[Kthe S3 way: %d objects' tags read", n))
				}
			}
		})
	}
	var token *string
	for {
		out, err := s3c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String("obj-"), ContinuationToken: token})
		requests.Add(1)
		if err != nil {
			errc <- fmt.Errorf("ListObjectsV2: %w", err)
			break
		}
		for _, o := range out.Contents {
			keys <- aws.ToString(o.Key)
		}
		if !aws.ToBool(out.IsTruncated) {
			break
		}
		token = out.NextContinuationToken
	}
	close(keys)
	wg.Wait()
	progress("\r\033[K")
	select {
	case err := <-errc:
		return err
	default:
	}
	res.S3Seconds = time.Since(start).Seconds()
	res.S3Requests, res.S3Matches = int(requests.Load()), int(matched.Load())
	if res.S3Matches != res.Matches {
		return fmt.Errorf("the S3 way found %d objects of group %s, the query %d", res.S3Matches, group, res.Matches)
	}
	return nil
}
