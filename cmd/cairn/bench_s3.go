package main

// `cairn bench --s3 URL`: closed-loop load on the S3 API through
// aws-sdk-go-v2, in the workload shapes of MinIO's warp (put, get, stat,
// delete, mixed, list).

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/spf13/cobra"

	"github.com/cairn-db/cairn/client"
)

// s3Op is one kind of S3 request the benchmark makes.
type s3Op int

const (
	s3Get s3Op = iota
	s3Stat
	s3Put
	s3Delete
	s3List
	numS3Ops
)

var s3OpNames = [numS3Ops]string{"get", "stat", "put", "delete", "list"}

// Warp's mixed distribution, in percent.
const (
	mixedGet    = 45
	mixedStat   = 30
	mixedPut    = 15
	mixedDelete = 10
)

// s3ListPage is the page size of the LIST workload (ListObjectsV2 max-keys).
const s3ListPage = 1000

// s3ListKeys is --keys for --op list unless given.
const s3ListKeys = 10000

// stampEvery is the stride of the unique stamp written into every PUT body:
// below the chunker's smallest chunk (256 KiB), so no chunk of an object
// equals a stored one and the server's deduplication never skips a write.
const stampEvery = 64 << 10

type s3BenchSpec struct {
	endpoint string // http(s)://host:port
	region   string
	access   string
	secret   string
	bucket   string
	op       string
	size     int64
	conc     int
	dur      time.Duration
	keys     int
	unsigned bool // UNSIGNED-PAYLOAD PUT bodies instead of a signed SHA-256
	progress func(string)
	warn     func(string)
}

// runS3BenchCmd is `cairn bench --s3 ENDPOINT`.
func runS3BenchCmd(cmd *cobra.Command, endpoint, op, sizeS string, size int64, conc int, dur time.Duration, nkeys int, asJSON bool) error {
	f := cmd.Flags()
	switch op {
	case "put", "get", "stat", "delete", "mixed", "list":
	default:
		return usageError{fmt.Errorf("--op %q: with --s3 use put, get, stat, delete, mixed or list", op)}
	}
	if op == "list" && !f.Changed("keys") {
		nkeys = s3ListKeys
	}
	if conc < 1 || nkeys < 1 || dur <= 0 {
		return usageError{errors.New("--concurrency, --keys and --duration must be positive")}
	}
	ep, err := s3Endpoint(endpoint)
	if err != nil {
		return usageError{err}
	}
	access, secret, err := s3Credentials(cmd)
	if err != nil {
		return usageError{err}
	}
	bucket, _ := f.GetString("bucket")
	if bucket == "" {
		bucket, _ = f.GetString("space")
	}
	region, _ := f.GetString("region")
	if region == "" {
		region = firstEnv("AWS_REGION", "AWS_DEFAULT_REGION")
	}
	if region == "" {
		region = "us-east-1"
	}
	unsigned, _ := f.GetBool("unsigned-payload")
	stderr := cmd.ErrOrStderr()
	res, err := runS3Bench(cmd.Context(), s3BenchSpec{
		endpoint: ep, region: region, access: access, secret: secret, bucket: bucket,
		op: op, size: size, conc: conc, dur: dur, keys: nkeys, unsigned: unsigned,
		progress: func(s string) {
			if !asJSON && isTerminal(cmdStderr(cmd)) {
				fmt.Fprint(stderr, s)
			}
		},
		warn: func(s string) { fmt.Fprintln(stderr, "cairn: "+s) },
	})
	if err != nil {
		return err
	}
	if asJSON {
		return json.NewEncoder(cmd.OutOrStdout()).Encode(res)
	}
	printS3Result(cmd.OutOrStdout(), res, sizeS)
	return nil
}

func printS3Result(w io.Writer, res benchResult, sizeS string) {
	if res.Op == "list" {
		fmt.Fprintf(w, "s3 list of %d objects (pages of %d) x%d for %.1fs: %d listings (%d errors), %.1f listings/s (%.0f objects/s), per listing p50 %.3f ms, p99 %.3f ms\n",
			res.Objects, s3ListPage, res.Concurrency, res.Seconds, res.Ops, res.Errors, res.OpsPerSec, res.OpsPerSec*float64(res.Objects), res.P50Ms, res.P99Ms)
		return
	}
	line := func(prefix string, r benchResult) {
		s := fmt.Sprintf("%s%d ops (%d errors), %.0f obj/s, %.1f MiB/s, p50 %.3f ms, p99 %.3f ms, p99.9 %.3f ms",
			prefix, r.Ops, r.Errors, r.OpsPerSec, r.MiBPerSec, r.P50Ms, r.P99Ms, r.P999Ms)
		if r.TTFBP50Ms > 0 {
			s += fmt.Sprintf("; first byte p50 %.3f ms, p99 %.3f ms", r.TTFBP50Ms, r.TTFBP99Ms)
		}
		fmt.Fprintln(w, s)
	}
	payload := ""
	if res.Payload != "" {
		payload = ", " + res.Payload + " payload"
	}
	line(fmt.Sprintf("s3 %s %s x%d for %.1fs%s: ", res.Op, sizeS, res.Concurrency, res.Seconds, payload), res)
	for _, r := range res.PerOp {
		line(fmt.Sprintf("  %-6s ", r.Op), r)
	}
}

// s3Endpoint checks an endpoint URL; a bare host:port means http.
func s3Endpoint(s string) (string, error) {
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return "", fmt.Errorf("--s3 %q: expected an endpoint URL such as http://127.0.0.1:7080", s)
	}
	return u.Scheme + "://" + u.Host, nil
}

// s3Credentials is --access-key/--secret-key, else $AWS_ACCESS_KEY_ID and
// $AWS_SECRET_ACCESS_KEY, else $CAIRN_ROOT_ACCESS_KEY and
// $CAIRN_ROOT_SECRET_KEY, else the native protocol's key
// ($CAIRN_ACCESS_KEY, the credentials file): the same keys sign both.
func s3Credentials(cmd *cobra.Command) (string, string, error) {
	access, _ := cmd.Flags().GetString("access-key")
	secret, _ := cmd.Flags().GetString("secret-key")
	if access != "" || secret != "" {
		if access == "" || secret == "" {
			return "", "", errors.New("give both --access-key and --secret-key")
		}
		return access, secret, nil
	}
	for _, pair := range [][2]string{{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}, {"CAIRN_ROOT_ACCESS_KEY", "CAIRN_ROOT_SECRET_KEY"}} {
		if a, s := os.Getenv(pair[0]), os.Getenv(pair[1]); a != "" && s != "" {
			return a, s, nil
		}
	}
	profile, _ := cmd.Flags().GetString("profile")
	if c, err := client.FindCredentials("", "", profile, ""); err == nil {
		return c.AccessKey, c.SecretKey, nil
	}
	return "", "", errors.New("--s3 needs a key: --access-key and --secret-key, AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, CAIRN_ACCESS_KEY and CAIRN_SECRET_KEY, or the credentials file")
}

func firstEnv(names ...string) string {
	for _, n := range names {
		if v := os.Getenv(n); v != "" {
			return v
		}
	}
	return ""
}

// newS3BenchClient is an SDK client as warp configures minio-go: path-style
// requests, HTTP/1.1 keep-alive connections enough for every worker, 32 KiB
// socket buffers, no body checksums beyond those an operation requires, and
// no retries (a failed request counts as an error).
func newS3BenchClient(s s3BenchSpec, conns int) *s3.Client {
	tr := &http.Transport{ // no Proxy: the benchmark talks to the endpoint directly
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          conns,
		MaxIdleConnsPerHost:   conns,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second, // the SDK's default client's
		DisableCompression:    true,
		WriteBufferSize:       32 << 10,
		ReadBufferSize:        32 << 10,
	}
	creds := aws.Credentials{AccessKeyID: s.access, SecretAccessKey: s.secret, Source: "cairn bench"}
	cfg := aws.Config{
		Region:                     s.region,
		Credentials:                aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) { return creds, nil }),
		HTTPClient:                 &http.Client{Transport: tr},
		Retryer:                    func() aws.Retryer { return aws.NopRetryer{} },
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	}
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(s.endpoint)
		o.UsePathStyle = true
	})
}

// s3Body makes PUT bodies: a worker's random buffer with a stamp unique
// to this run, worker and PUT every stampEvery bytes.
type s3Body struct {
	buf  []byte
	id   uint64
	next uint64
}

func newS3Body(size int64, run uint64, worker int) *s3Body {
	b := &s3Body{buf: make([]byte, size), id: run ^ uint64(worker)<<48}
	rng := rand.NewChaCha8([32]byte{byte(worker), byte(worker >> 8), 1})
	_, _ = rng.Read(b.buf)
	return b
}

func (b *s3Body) fill() []byte {
	b.next++
	var stamp [16]byte
	binary.LittleEndian.PutUint64(stamp[:], b.id)
	binary.LittleEndian.PutUint64(stamp[8:], b.next)
	for off := 0; off < len(b.buf); off += stampEvery {
		copy(b.buf[off:], stamp[:])
	}
	return b.buf
}

// s3Samples is what one worker measured for one kind of request.
type s3Samples struct {
	lat   latencies
	ttfb  latencies
	errs  int
	bytes int64
}

type s3Worker struct {
	st   [numS3Ops]s3Samples
	done bool // ran out of objects (delete)
}

type s3Bench struct {
	s      s3BenchSpec
	c      *s3.Client
	prefix string
	run    uint64
	ops    atomic.Int64

	errMu    sync.Mutex
	firstErr error
}

func (b *s3Bench) key(i int) string { return fmt.Sprintf("%sobj-%08d", b.prefix, i) }

func (b *s3Bench) noteErr(err error) {
	b.errMu.Lock()
	if b.firstErr == nil {
		b.firstErr = err
	}
	b.errMu.Unlock()
}

func runS3Bench(ctx context.Context, s s3BenchSpec) (benchResult, error) {
	preloads := s.op != "put"
	conns := s.conc
	if preloads {
		conns = max(conns, min(16, s.keys))
	}
	b := &s3Bench{s: s, c: newS3BenchClient(s, conns), run: rand.Uint64()}
	// A fresh prefix per run: the objects a run preloads are the only ones
	// its reads and listings see.
	b.prefix = fmt.Sprintf("cairn-bench/%s-%04x/", time.Now().UTC().Format("20060102T150405"), b.run&0xffff)
	if err := b.createBucket(ctx); err != nil {
		return benchResult{}, err
	}
	if preloads {
		if err := b.preload(ctx, conns); err != nil {
			return benchResult{}, fmt.Errorf("preload: %w", err)
		}
	}

	rctx, cancel := context.WithTimeout(ctx, s.dur)
	defer cancel()
	workers := make([]s3Worker, s.conc)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.work(rctx, w, &workers[w])
		}()
	}
	stopProgress := make(chan struct{})
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		if s.progress == nil {
			return
		}
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stopProgress:
				s.progress("\r\033[K")
				return
			case <-t.C:
				s.progress(fmt.Sprintf("\r\033[Ks3 %s: %.0fs of %.0fs, %d ops", s.op, time.Since(start).Seconds(), s.dur.Seconds(), b.ops.Load()))
			}
		}
	}()
	wg.Wait()
	elapsed := time.Since(start)
	close(stopProgress)
	<-progressDone
	if ctx.Err() != nil {
		return benchResult{}, ctx.Err()
	}

	res := b.result(workers, elapsed)
	if res.Ops == 0 && res.Errors == 0 && s.warn != nil {
		s.warn("no request completed within --duration")
	}
	if res.Errors > 0 && s.warn != nil {
		s.warn(fmt.Sprintf("%d requests failed; the first: %v", res.Errors, b.firstErr))
	}
	if s.op == "delete" && s.warn != nil {
		all := true
		for _, wk := range workers {
			all = all && wk.done
		}
		if all {
			s.warn(fmt.Sprintf("every preloaded object was deleted after %.1fs, before --duration: raise --keys", elapsed.Seconds()))
		}
	}
	return res, nil
}

func (b *s3Bench) createBucket(ctx context.Context) error {
	_, err := b.c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(b.s.bucket)})
	var ae smithy.APIError
	if errors.As(err, &ae) && (ae.ErrorCode() == "BucketAlreadyOwnedByYou" || ae.ErrorCode() == "BucketAlreadyExists") {
		return nil
	}
	if err != nil {
		return fmt.Errorf("create bucket %s: %w", b.s.bucket, err)
	}
	return nil
}

// preload puts every key with n workers.
func (b *s3Bench) preload(ctx context.Context, n int) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var next atomic.Int64
	var done atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for w := 0; w < n; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := newS3Body(b.s.size, b.run, 1000+w)
			for {
				i := int(next.Add(1) - 1)
				if i >= b.s.keys || ctx.Err() != nil {
					return
				}
				if err := b.put(ctx, b.key(i), body.fill()); err != nil {
					once.Do(func() { first = err; cancel() })
					return
				}
				done.Add(1)
			}
		}()
	}
	stop := make(chan struct{})
	if b.s.progress != nil {
		go func() {
			t := time.NewTicker(time.Second)
			defer t.Stop()
			for {
				select {
				case <-stop:
					b.s.progress("\r\033[K")
					return
				case <-t.C:
					b.s.progress(fmt.Sprintf("\r\033[Ks3 %s: preloading %d of %d objects", b.s.op, done.Load(), b.s.keys))
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	if first != nil {
		return first
	}
	return ctx.Err()
}

func (b *s3Bench) put(ctx context.Context, key string, body []byte) error {
	in := &s3.PutObjectInput{
		Bucket: aws.String(b.s.bucket), Key: aws.String(key),
		Body: bytes.NewReader(body), ContentLength: aws.Int64(int64(len(body))),
	}
	var err error
	if b.s.unsigned {
		_, err = b.c.PutObject(ctx, in, s3.WithAPIOptions(v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware))
	} else {
		_, err = b.c.PutObject(ctx, in)
	}
	return err
}

// get reads key whole and returns the time to its first body byte.
func (b *s3Bench) get(ctx context.Context, key string, buf []byte) (time.Duration, error) {
	t0 := time.Now()
	out, err := b.c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(b.s.bucket), Key: aws.String(key)})
	if err != nil {
		return 0, err
	}
	defer out.Body.Close()
	var ttfb time.Duration
	var n int64
	if b.s.size > 0 {
		k, err := io.ReadFull(out.Body, buf[:1])
		if err != nil {
			return 0, err
		}
		ttfb, n = time.Since(t0), int64(k)
	}
	for {
		k, err := out.Body.Read(buf)
		n += int64(k)
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, err
		}
	}
	if n != b.s.size {
		return 0, fmt.Errorf("GET %s: %d bytes, want %d", key, n, b.s.size)
	}
	if b.s.size == 0 {
		ttfb = time.Since(t0)
	}
	return ttfb, nil
}

func (b *s3Bench) stat(ctx context.Context, key string) error {
	out, err := b.c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(b.s.bucket), Key: aws.String(key)})
	if err == nil && aws.ToInt64(out.ContentLength) != b.s.size {
		err = fmt.Errorf("HEAD %s: size %d, want %d", key, aws.ToInt64(out.ContentLength), b.s.size)
	}
	return err
}

func (b *s3Bench) del(ctx context.Context, key string) error {
	_, err := b.c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(b.s.bucket), Key: aws.String(key)})
	return err
}

// list lists the run's prefix whole, a page of s3ListPage keys at a time.
func (b *s3Bench) list(ctx context.Context) error {
	var token *string
	n := 0
	for {
		out, err := b.c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{
			Bucket: aws.String(b.s.bucket), Prefix: aws.String(b.prefix),
			MaxKeys: aws.Int32(s3ListPage), ContinuationToken: token,
		})
		if err != nil {
			return err
		}
		n += len(out.Contents)
		if !aws.ToBool(out.IsTruncated) {
			break
		}
		if token = out.NextContinuationToken; token == nil {
			return errors.New("LIST: truncated page without a continuation token")
		}
	}
	if n != b.s.keys {
		return fmt.Errorf("LIST: %d objects, want %d", n, b.s.keys)
	}
	return nil
}

// work is worker w's closed loop until ctx ends.
func (b *s3Bench) work(ctx context.Context, w int, wk *s3Worker) {
	rng := rand.New(rand.NewPCG(b.run, uint64(w)))
	var body *s3Body
	if b.s.op == "put" || b.s.op == "mixed" {
		body = newS3Body(b.s.size, b.run, w)
	}
	buf := make([]byte, 256<<10)
	// delete and mixed work on the worker's own share of the keys, so no
	// request meets an object another worker is deleting.
	var live, deleted []int
	if b.s.op == "delete" || b.s.op == "mixed" {
		for i := w; i < b.s.keys; i += b.s.conc {
			live = append(live, i)
		}
	}
	puts := 0
	for ctx.Err() == nil {
		op := s3Put
		switch b.s.op {
		case "get":
			op = s3Get
		case "stat":
			op = s3Stat
		case "delete":
			op = s3Delete
		case "list":
			op = s3List
		case "mixed":
			switch r := rng.IntN(100); {
			case r < mixedGet:
				op = s3Get
			case r < mixedGet+mixedStat:
				op = s3Stat
			case r < mixedGet+mixedStat+mixedPut:
				op = s3Put
			default:
				op = s3Delete
			}
			if len(live) == 0 {
				op = s3Put
			}
		}
		var key string
		idx := -1 // mixed: where key is in live
		switch {
		case b.s.op == "put":
			key = fmt.Sprintf("%sput-%03d-%09d", b.prefix, w, puts)
			puts++
		case b.s.op == "delete":
			if len(live) == 0 {
				wk.done = true
				return
			}
			key, live = b.key(live[0]), live[1:]
		case b.s.op == "mixed" && op == s3Put:
			if n := len(deleted); n > 0 {
				// Put back a deleted object so that reads keep hitting.
				key = b.key(deleted[n-1])
			} else {
				key = b.key(live[rng.IntN(len(live))])
			}
		case b.s.op == "mixed":
			idx = rng.IntN(len(live))
			key = b.key(live[idx])
		case op != s3List:
			key = b.key(rng.IntN(b.s.keys))
		}

		t0 := time.Now()
		var err error
		var ttfb time.Duration
		var n int64
		switch op {
		case s3Put:
			err = b.put(ctx, key, body.fill())
			n = b.s.size
		case s3Get:
			ttfb, err = b.get(ctx, key, buf)
			n = b.s.size
		case s3Stat:
			err = b.stat(ctx, key)
		case s3Delete:
			err = b.del(ctx, key)
		case s3List:
			err = b.list(ctx)
		}
		lat := time.Since(t0)
		if ctx.Err() != nil {
			return // the run ended mid-request: not a sample
		}
		st := &wk.st[op]
		if err != nil {
			st.errs++
			b.noteErr(err)
			continue
		}
		b.ops.Add(1)
		st.lat = append(st.lat, lat)
		st.bytes += n
		if op == s3Get {
			st.ttfb = append(st.ttfb, ttfb)
		}
		if b.s.op == "mixed" {
			switch op {
			case s3Put:
				if n := len(deleted); n > 0 {
					live, deleted = append(live, deleted[n-1]), deleted[:n-1]
				}
			case s3Delete:
				deleted = append(deleted, live[idx])
				live[idx] = live[len(live)-1]
				live = live[:len(live)-1]
			}
		}
	}
}

func (b *s3Bench) result(workers []s3Worker, elapsed time.Duration) benchResult {
	secs := elapsed.Seconds()
	summarize := func(op string, st s3Samples) benchResult {
		lat, ttfb := st.lat.sorted(), st.ttfb.sorted()
		return benchResult{
			Op: op, Size: b.s.size, Concurrency: b.s.conc, Seconds: secs, Ops: len(lat), Errors: st.errs,
			OpsPerSec: float64(len(lat)) / secs,
			MiBPerSec: float64(st.bytes) / (1 << 20) / secs,
			P50Ms:     ms(lat.pct(0.50)), P99Ms: ms(lat.pct(0.99)), P999Ms: ms(lat.pct(0.999)),
			TTFBP50Ms: ms(ttfb.pct(0.50)), TTFBP99Ms: ms(ttfb.pct(0.99)),
		}
	}
	var byOp [numS3Ops]s3Samples
	var all s3Samples
	for _, wk := range workers {
		for op := range byOp {
			st := wk.st[op]
			byOp[op].lat = append(byOp[op].lat, st.lat...)
			byOp[op].ttfb = append(byOp[op].ttfb, st.ttfb...)
			byOp[op].errs += st.errs
			byOp[op].bytes += st.bytes
			all.lat = append(all.lat, st.lat...)
			all.ttfb = append(all.ttfb, st.ttfb...)
			all.errs += st.errs
			all.bytes += st.bytes
		}
	}
	res := summarize(b.s.op, all)
	res.API = "s3"
	if b.s.op == "put" || b.s.op == "mixed" {
		res.Payload = "signed"
		if b.s.unsigned {
			res.Payload = "unsigned"
		}
	}
	switch b.s.op {
	case "list":
		res.Objects = b.s.keys
	case "mixed":
		for _, op := range []s3Op{s3Get, s3Stat, s3Put, s3Delete} {
			res.PerOp = append(res.PerOp, summarize(s3OpNames[op], byOp[op]))
		}
	}
	return res
}
