package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairn-db/cairn/client"
	"github.com/cairn-db/cairn/internal/wire"
)

// The Twitter-like workload of Clouder/DataDroplets: users post tweets
// (each tagged with its user, a hashtag and sometimes a mention) and
// follow each other. Tweets live in one space per placement under test;
// who follows whom lives in an ordered space of keys FOLLOWER/FOLLOWED.
// Each operation is what the workload's API names:
//
//	user_timeline     a user's newest tweets (tags.user == U, newest first)
//	friends_timeline  the newest tweets of the users U follows (their
//	                  list, then each one's timeline, merged)
//	search_hashtag    the newest tweets with a hashtag (tags.topic == T)
//	mentions          the newest tweets that mention U (tags.mention == U)
//	update            a new tweet
//	follow, unfollow  a new or a dropped follow
var twitterOps = []string{"user_timeline", "friends_timeline", "search_hashtag", "mentions", "update", "follow", "unfollow"}

// twitterMix is the default share of each operation, in percent: reads
// dominate, as on the service the workload imitates.
var twitterMix = map[string]int{"user_timeline": 35, "friends_timeline": 25, "search_hashtag": 10, "mentions": 10, "update": 15, "follow": 3, "unfollow": 2}

// twitterTopics is how many hashtags tweets use.
const twitterTopics = 100

// twitterPage is how many tweets a timeline returns.
const twitterPage = 20

// twitterOpResult is one operation's figures in one placement's run.
type twitterOpResult struct {
	Op        string  `json:"op"`
	Ops       int     `json:"ops"`
	Errors    int     `json:"errors"`
	OpsPerSec float64 `json:"ops_per_sec"`
	P50Ms     float64 `json:"p50_ms"`
	P99Ms     float64 `json:"p99_ms"`
	// RangesPerOp is the ranges the operation's queries asked, on
	// average (0 for writes).
	RangesPerOp float64 `json:"ranges_per_op"`
}

// twitterRun is one placement's run.
type twitterRun struct {
	Placement   string            `json:"placement"`
	Space       string            `json:"space"`
	Ranges      int               `json:"ranges"`
	LoadSeconds float64           `json:"load_seconds,omitempty"`
	Seconds     float64           `json:"seconds"`
	Ops         int               `json:"ops"`
	OpsPerSec   float64           `json:"ops_per_sec"`
	PerOp       []twitterOpResult `json:"per_op"`
}

// twitterResult is what `cairn bench --op twitter --json` prints.
type twitterResult struct {
	Op          string         `json:"op"`
	Users       int            `json:"users"`
	Tweets      int            `json:"tweets_per_user"`
	Follows     int            `json:"follows_per_user"`
	Concurrency int            `json:"concurrency"`
	Mix         map[string]int `json:"mix"`
	Runs        []twitterRun   `json:"runs"`
}

// runTwitterBenchCmd: --op twitter.
func runTwitterBenchCmd(cmd *cobra.Command, space string, conc int, dur time.Duration, asJSON bool) error {
	f := cmd.Flags()
	users, _ := f.GetInt("users")
	tweets, _ := f.GetInt("tweets")
	follows, _ := f.GetInt("follows")
	ranges, _ := f.GetInt("ranges")
	if !f.Changed("ranges") {
		ranges = 16
	}
	placements, _ := f.GetStringSlice("placements")
	mixS, _ := f.GetString("mix")
	if !f.Changed("space") {
		space = "twitter"
	}
	mix, err := parseTwitterMix(mixS)
	if err != nil {
		return usageError{err}
	}
	switch {
	case users < 2 || tweets < 1 || follows < 0 || follows >= users:
		return usageError{errors.New("--users at least 2, --tweets positive, --follows below --users")}
	case ranges < 1 || ranges > 16 || conc < 1 || dur <= 0:
		return usageError{errors.New("--ranges within 1 to 16; --concurrency and --duration positive")}
	}
	for _, p := range placements {
		if p != "ordered" && p != "hash" && !strings.HasPrefix(p, "tag:") {
			return usageError{fmt.Errorf("--placements: %q is not ordered, hash or tag:NAME", p)}
		}
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
	w := &twitterWorkload{c: c, users: users, tweets: tweets, follows: follows, graph: space + "-graph", progress: progress}
	if err := w.loadGraph(ctx); err != nil {
		return err
	}
	res := twitterResult{Op: "twitter", Users: users, Tweets: tweets, Follows: follows, Concurrency: conc, Mix: mix}
	for _, p := range placements {
		sp := space + "-" + strings.ReplaceAll(p, ":", "-")
		run := twitterRun{Placement: p, Space: sp, Ranges: ranges}
		if run.LoadSeconds, err = w.loadTweets(ctx, sp, p, ranges, conc); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		if err := w.run(ctx, sp, mix, conc, dur, &run); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		res.Runs = append(res.Runs, run)
	}
	if asJSON {
		return json.NewEncoder(cmd.OutOrStdout()).Encode(res)
	}
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "twitter: %d users, %d tweets each, following %d; x%d for %v per placement\n", users, tweets, follows, conc, dur)
	for _, r := range res.Runs {
		fmt.Fprintf(out, "%s (%d ranges): %d ops, %.0f ops/s\n", r.Placement, r.Ranges, r.Ops, r.OpsPerSec)
		for _, op := range r.PerOp {
			fmt.Fprintf(out, "  %-17s %7d ops (%d errors) %8.0f ops/s  p50 %7.3f ms  p99 %7.3f ms  %5.1f ranges/op\n",
				op.Op, op.Ops, op.Errors, op.OpsPerSec, op.P50Ms, op.P99Ms, op.RangesPerOp)
		}
	}
	return nil
}

// parseTwitterMix reads --mix: "default", one operation's name (it alone
// runs), or OP=PERCENT pairs separated by commas.
func parseTwitterMix(s string) (map[string]int, error) {
	if s == "" || s == "default" {
		return twitterMix, nil
	}
	if slices.Contains(twitterOps, s) {
		return map[string]int{s: 100}, nil
	}
	m := map[string]int{}
	for _, part := range strings.Split(s, ",") {
		op, pct, ok := strings.Cut(part, "=")
		n, err := strconv.Atoi(pct)
		if !ok || err != nil || n < 0 || !slices.Contains(twitterOps, op) {
			return nil, fmt.Errorf("--mix %q: use default, one of %s, or OP=PERCENT,...", s, strings.Join(twitterOps, ", "))
		}
		m[op] = n
	}
	return m, nil
}

// twitterWorkload holds the workload's shape and its follow graph.
type twitterWorkload struct {
	c                      *client.Client
	users, tweets, follows int
	graph                  string
	progress               func(string)
	seq                    atomic.Int64 // new tweets' numbers
	mu                     sync.Mutex
	following              [][]int // by user: whom it follows (kept as the run changes it)
}

func twitterUser(u int) string { return fmt.Sprintf("user%05d", u) }

func twitterTopic(t int) string { return "topic" + strconv.Itoa(t) }

// tweet is one new tweet of user u: its key, document and tags.
func (w *twitterWorkload) tweet(rng *rand.Rand, u int, n int64) (string, []byte, map[string]string) {
	topic := twitterTopic(rng.IntN(twitterTopics))
	tags := map[string]string{"user": twitterUser(u), "topic": topic}
	text := "a tweet about #" + topic
	if rng.IntN(10) < 3 {
		m := twitterUser(rng.IntN(w.users))
		tags["mention"] = m
		text += " for @" + m
	}
	doc, _ := json.Marshal(map[string]any{"user": twitterUser(u), "text": text, "n": n})
	return fmt.Sprintf("tweet-%010d", n), doc, tags
}

// loadGraph makes the follow graph (each user follows --follows others,
// chosen at random) unless the graph space holds this one already.
func (w *twitterWorkload) loadGraph(ctx context.Context) error {
	rng := rand.New(rand.NewPCG(uint64(w.users), uint64(w.follows)))
	w.following = make([][]int, w.users)
	for u := range w.users {
		for _, f := range rng.Perm(w.users)[:w.follows+1] {
			if f != u && len(w.following[u]) < w.follows {
				w.following[u] = append(w.following[u], f)
			}
		}
	}
	if _, err := w.c.CreateSpace(ctx, w.graph, client.SpaceSettings{}); err != nil && !errors.Is(err, wire.ErrSpaceExists) {
		return err
	}
	marker := fmt.Sprintf("~loaded-%d-%d", w.users, w.follows)
	if _, err := w.c.Stat(ctx, w.graph, marker); err == nil {
		return nil
	}
	var keys []string
	for u, fs := range w.following {
		for _, f := range fs {
			keys = append(keys, twitterUser(u)+"/"+twitterUser(f))
		}
	}
	if err := batchLoad(ctx, w.c, len(keys), 4, "follows", w.progress, func(b *client.Batch, i int) {
		b.Put(w.graph, keys[i], nil)
	}); err != nil {
		return err
	}
	_, err := w.c.Put(ctx, w.graph, marker, nil)
	return err
}

// loadTweets fills space (placed by placement) with --tweets tweets of
// each user, unless it holds this set already; it returns the seconds the
// load took (0 if skipped).
func (w *twitterWorkload) loadTweets(ctx context.Context, space, placement string, ranges, conc int) (float64, error) {
	if _, err := w.c.CreateSpace(ctx, space, client.SpaceSettings{Ranges: uint32(ranges), Placement: placement}); err != nil && !errors.Is(err, wire.ErrSpaceExists) {
		return 0, err
	}
	total := w.users * w.tweets
	w.seq.Store(int64(total))
	marker := fmt.Sprintf("~loaded-%d-%d", w.users, w.tweets)
	if _, err := w.c.Stat(ctx, space, marker); err == nil {
		return 0, nil
	}
	start := time.Now()
	err := batchLoad(ctx, w.c, total, conc, "tweets", w.progress, func(b *client.Batch, i int) {
		rng := rand.New(rand.NewPCG(uint64(i), 7))
		key, doc, tags := w.tweet(rng, rng.IntN(w.users), int64(i))
		b.Put(space, key, doc, client.WithTags(tags), client.WithContentType("application/json"))
	})
	if err != nil {
		return 0, err
	}
	if _, err := w.c.Put(ctx, space, marker, nil); err != nil {
		return 0, err
	}
	return time.Since(start).Seconds(), nil
}

// timeline is a page of the newest tweets matching filter; it returns the
// ranges the query asked.
func (w *twitterWorkload) timeline(ctx context.Context, space, filter string) ([]client.ObjectInfo, int, error) {
	r, err := w.c.Query(ctx, client.QueryRequest{Space: space, Filter: filter, OrderBy: "modified", Desc: true, Limit: twitterPage})
	return r.Objects, r.Ranges, err
}

// do runs one operation of user u.
func (w *twitterWorkload) do(ctx context.Context, rng *rand.Rand, space, op string, u int) (ranges int, err error) {
	user := twitterUser(u)
	switch op {
	case "user_timeline":
		_, ranges, err = w.timeline(ctx, space, `tags.user == "`+user+`"`)
	case "friends_timeline":
		// The users u follows, from the graph; then each one's newest
		// tweets, at once; merged newest first.
		l, err := w.c.List(ctx, w.graph, client.ListOptions{Prefix: user + "/"})
		if err != nil {
			return 0, err
		}
		pages := make([][]client.ObjectInfo, len(l.Objects))
		asked := make([]int, len(l.Objects))
		errs := make([]error, len(l.Objects))
		var wg sync.WaitGroup
		for i, o := range l.Objects {
			wg.Go(func() {
				pages[i], asked[i], errs[i] = w.timeline(ctx, space, `tags.user == "`+strings.TrimPrefix(o.Key, user+"/")+`"`)
			})
		}
		wg.Wait()
		var all []client.ObjectInfo
		for i := range pages {
			if errs[i] != nil {
				return 0, errs[i]
			}
			all = append(all, pages[i]...)
			ranges += asked[i]
		}
		// The page a client shows: the newest of them all.
		slices.SortFunc(all, func(a, b client.ObjectInfo) int { return cmp.Compare(b.Version, a.Version) })
		if len(all) > twitterPage && all[twitterPage-1].Version < all[twitterPage].Version {
			return 0, errors.New("friends_timeline merged out of order")
		}
	case "search_hashtag":
		_, ranges, err = w.timeline(ctx, space, `tags.topic == "`+twitterTopic(rng.IntN(twitterTopics))+`"`)
	case "mentions":
		_, ranges, err = w.timeline(ctx, space, `tags.mention == "`+user+`"`)
	case "update":
		key, doc, tags := w.tweet(rng, u, w.seq.Add(1))
		_, err = w.c.Put(ctx, space, key, doc, client.WithTags(tags), client.WithContentType("application/json"))
	case "follow", "unfollow":
		f := rng.IntN(w.users)
		if f == u {
			f = (f + 1) % w.users
		}
		key := user + "/" + twitterUser(f)
		if op == "follow" {
			_, err = w.c.Put(ctx, w.graph, key, nil)
		} else {
			_, err = w.c.Delete(ctx, w.graph, key)
		}
	}
	return ranges, err
}

// run drives the mix over space for dur with conc closed-loop workers.
func (w *twitterWorkload) run(ctx context.Context, space string, mix map[string]int, conc int, dur time.Duration, res *twitterRun) error {
	var ops []string // one per percent
	for _, op := range twitterOps {
		for range mix[op] {
			ops = append(ops, op)
		}
	}
	if len(ops) == 0 {
		return errors.New("the mix runs no operation")
	}
	type opStats struct {
		lat    latencies
		errs   int
		ranges int
	}
	workers := make([]map[string]*opStats, conc)
	rctx, cancel := context.WithTimeout(ctx, dur)
	defer cancel()
	var wg sync.WaitGroup
	start := time.Now()
	for i := range workers {
		st := map[string]*opStats{}
		for _, op := range twitterOps {
			st[op] = &opStats{}
		}
		workers[i] = st
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), uint64(time.Now().UnixNano())))
			for rctx.Err() == nil {
				op := ops[rng.IntN(len(ops))]
				t0 := time.Now()
				ranges, err := w.do(rctx, rng, space, op, rng.IntN(w.users))
				if rctx.Err() != nil {
					return
				}
				s := st[op]
				if err != nil {
					s.errs++
					continue
				}
				s.lat = append(s.lat, time.Since(t0))
				s.ranges += ranges
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	res.Seconds = elapsed
	for _, op := range twitterOps {
		if mix[op] == 0 {
			continue
		}
		var all latencies
		r := twitterOpResult{Op: op}
		ranges := 0
		for _, st := range workers {
			all = append(all, st[op].lat...)
			r.Errors += st[op].errs
			ranges += st[op].ranges
		}
		all = all.sorted()
		r.Ops = len(all)
		r.OpsPerSec = float64(r.Ops) / elapsed
		if r.Ops > 0 {
			r.P50Ms, r.P99Ms = ms(all.pct(0.50)), ms(all.pct(0.99))
			r.RangesPerOp = float64(ranges) / float64(r.Ops)
		}
		res.Ops += r.Ops
		res.PerOp = append(res.PerOp, r)
	}
	res.OpsPerSec = float64(res.Ops) / elapsed
	return nil
}
