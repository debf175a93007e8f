package client

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/auth"
	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/wire"
)

// The key the tests' servers know and their clients use (a cluster admin).
const (
	testAccess = "CLIENTTESTKEY"
	testSecret = "client-test-secret"
)

func testKeys() *auth.Keyring {
	var r auth.Keyring
	r.Set([]auth.Key{{Access: testAccess, Secret: testSecret, ClusterAdmin: true}})
	return &r
}

func serve(t testing.TB, svc object.Service) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := wire.NewServer(svc, wire.ServerOptions{Keys: testKeys()})
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	t.Cleanup(func() {
		s.Close()
		<-done
	})
	return l.Addr().String()
}

// deadAddr returns an address nothing listens on.
func deadAddr(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := l.Addr().String()
	l.Close()
	return a
}

func newClient(t testing.TB, addrs ...string) *Client {
	t.Helper()
	c, err := DialOptions(context.Background(), Options{Addrs: addrs, RetryBackoff: 1, AccessKey: testAccess, SecretKey: testSecret})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestClientOps(t *testing.T) {
	ctx := context.Background()
	svc := object.NewMemService()
	// The first address is down: the client moves on to the next.
	c := newClient(t, deadAddr(t), serve(t, svc))

	if _, err := c.CreateSpace(ctx, "s", SpaceSettings{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateSpace(ctx, "s", SpaceSettings{}); !errors.Is(err, ErrSpaceExists) {
		t.Fatalf("second CreateSpace: %v", err)
	}
	if l, err := c.ListSpaces(ctx); err != nil || len(l) != 1 {
		t.Fatalf("ListSpaces: %v %v", l, err)
	}
	v1, err := c.Put(ctx, "s", "k", []byte("hello"), WithContentType("text/plain"),
		WithMeta(map[string]string{"a": "b"}), WithTags(map[string]string{"t": "1"}), IfNoneMatch())
	if err != nil || v1.ContentType != "text/plain" || v1.Meta["a"] != "b" || v1.Tags["t"] != "1" {
		t.Fatalf("Put: %+v %v", v1, err)
	}
	if _, err := c.Put(ctx, "s", "k", []byte("x"), IfNoneMatch()); !errors.Is(err, ErrPreconditionFailed) {
		t.Fatalf("IfNoneMatch: %v", err)
	}
	if _, err := c.Put(ctx, "s", "k", []byte("x"), IfMatch(v1.Version+1)); !errors.Is(err, ErrPreconditionFailed) {
		t.Fatalf("IfMatch: %v", err)
	}
	v2, err := c.WriteAt(ctx, "s", "k", 5, []byte(", world"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Append(ctx, "s", "k", []byte("!")); err != nil {
		t.Fatal(err)
	}
	data, info, err := c.Get(ctx, "s", "k")
	if err != nil || string(data) != "hello, world!" || info.Size != 13 {
		t.Fatalf("Get: %q %+v %v", data, info, err)
	}
	if data, _, err = c.Get(ctx, "s", "k", WithVersion(v1.Version)); err != nil || string(data) != "hello" {
		t.Fatalf("Get version: %q %v", data, err)
	}
	if data, _, err = c.Get(ctx, "s", "k", WithAsOf(v2.Version)); err != nil || string(data) != "hello, world" {
		t.Fatalf("Get as-of: %q %v", data, err)
	}
	if data, _, err = c.ReadRange(ctx, "s", "k", 7, 5); err != nil || string(data) != "world" {
		t.Fatalf("ReadRange: %q %v", data, err)
	}
	if _, _, err = c.ReadRange(ctx, "s", "k", 100, 1); !errors.Is(err, ErrInvalidRange) {
		t.Fatalf("ReadRange past the end: %v", err)
	}
	if st, err := c.Stat(ctx, "s", "k"); err != nil || st.Size != 13 {
		t.Fatalf("Stat: %+v %v", st, err)
	}
	if _, err := c.Stat(ctx, "s", "missing"); !errors.Is(err, ErrNotFound) || CodeOf(err) != wire.CodeNotFound {
		t.Fatalf("Stat missing: %v", err)
	}
	vr, err := c.Versions(ctx, "s", "k", VersionsOptions{})
	if err != nil || len(vr.Versions) != 3 || vr.Versions[2].Version != v1.Version {
		t.Fatalf("Versions: %+v %v", vr, err)
	}
	if _, err := c.Delete(ctx, "s", "k", WithVersion(v1.Version)); err != nil {
		t.Fatal(err)
	}
	if m, err := c.Delete(ctx, "s", "k"); err != nil || !m.DeleteMarker {
		t.Fatalf("Delete: %+v %v", m, err)
	}
	if _, _, err := c.Get(ctx, "s", "k"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get deleted: %v", err)
	}

	// Paging: 25 keys in pages of 10.
	for i := range 25 {
		if _, err := c.Put(ctx, "s", fmt.Sprintf("p/%02d", i), []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	page, err := c.List(ctx, "s", ListOptions{Prefix: "p/", Limit: 10})
	if err != nil || len(page.Objects) != 10 || !page.Truncated || page.Next != "p/09" {
		t.Fatalf("List: %+v %v", page, err)
	}
	var keys []string
	for obj, err := range c.ListAll(ctx, "s", ListOptions{Prefix: "p/", Limit: 10}) {
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, obj.Key)
	}
	if len(keys) != 25 || keys[0] != "p/00" || keys[24] != "p/24" {
		t.Fatalf("ListAll: %v", keys)
	}

	// Batch.
	rs, err := c.Batch(ctx).Put("s", "b1", []byte("one")).Get("s", "b1").Stat("s", "nope").Delete("s", "b1").Do()
	if err != nil || len(rs) != 4 {
		t.Fatalf("Batch: %v %v", rs, err)
	}
	if rs[0].Err != nil || string(rs[1].Data) != "one" || !errors.Is(rs[2].Err, ErrNotFound) || !rs[3].Info.DeleteMarker {
		t.Fatalf("Batch results: %+v", rs)
	}

	if err := c.DeleteSpace(ctx, "s"); !errors.Is(err, ErrSpaceNotEmpty) {
		t.Fatalf("DeleteSpace: %v", err)
	}
}

func TestClientStreams(t *testing.T) {
	ctx := context.Background()
	svc := object.NewMemService()
	c := newClient(t, serve(t, svc))
	if _, err := c.CreateSpace(ctx, "s", SpaceSettings{}); err != nil {
		t.Fatal(err)
	}
	const size = 3<<20 + 12345
	body := make([]byte, size)
	(&object.PatternReader{}).Read(body)
	if _, err := c.PutStream(ctx, "s", "big", bytes.NewReader(body), size); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutStream(ctx, "s", "big2", bytes.NewReader(body), -1); err != nil {
		t.Fatal(err)
	}
	// A body shorter than declared writes nothing.
	if _, err := c.PutStream(ctx, "s", "short", bytes.NewReader(body[:1<<20]), size); !errors.Is(err, ErrTruncated) {
		t.Fatalf("short body: %v", err)
	}
	if _, err := c.Stat(ctx, "s", "short"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("short body stored: %v", err)
	}
	for _, k := range []string{"big", "big2"} {
		rc, info, err := c.GetStream(ctx, "s", k)
		if err != nil || info.Size != size {
			t.Fatalf("GetStream: %+v %v", info, err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("GetStream %s: %d bytes, %v", k, len(got), err)
		}
		data, _, err := c.Get(ctx, "s", k)
		if err != nil || !bytes.Equal(data, body) {
			t.Fatalf("Get %s: %d bytes, %v", k, len(data), err)
		}
	}
	// Closing a stream early cancels it; the connection keeps working.
	rc, _, err := c.GetStream(ctx, "s", "big")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(rc, make([]byte, 1000)); err != nil {
		t.Fatal(err)
	}
	rc.Close()
	if _, err := c.Stat(ctx, "s", "big"); err != nil {
		t.Fatal(err)
	}
}

// flaky fails the first n calls of every method with code.
type flaky struct {
	*object.MemService
	code  wire.Code
	left  atomic.Int32
	calls atomic.Int32
}

func (f *flaky) fail() error {
	f.calls.Add(1)
	if f.left.Add(-1) >= 0 {
		return wire.Errorf(f.code, "injected")
	}
	return nil
}

func (f *flaky) Put(ctx context.Context, req *object.PutRequest, body io.Reader) (ObjectInfo, error) {
	if err := f.fail(); err != nil {
		io.Copy(io.Discard, body)
		return ObjectInfo{}, err
	}
	return f.MemService.Put(ctx, req, body)
}

func (f *flaky) Stat(ctx context.Context, req *object.GetRequest) (ObjectInfo, error) {
	if err := f.fail(); err != nil {
		return ObjectInfo{}, err
	}
	return f.MemService.Stat(ctx, req)
}

func TestRetries(t *testing.T) {
	ctx := context.Background()
	svc := &flaky{MemService: object.NewMemService(), code: wire.CodeUnavailable}
	c := newClient(t, serve(t, svc))
	if _, err := c.CreateSpace(ctx, "s", SpaceSettings{}); err != nil {
		t.Fatal(err)
	}

	// Unavailable proves the write was not applied: a Put is retried.
	svc.left.Store(2)
	svc.calls.Store(0)
	if _, err := c.Put(ctx, "s", "k", []byte("v")); err != nil {
		t.Fatalf("Put after 2 retryable failures: %v", err)
	}
	if n := svc.calls.Load(); n != 3 {
		t.Fatalf("service saw %d Puts, want 3", n)
	}
	// More failures than attempts: the error comes back.
	svc.left.Store(10)
	svc.calls.Store(0)
	if _, err := c.Stat(ctx, "s", "k"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Stat: %v", err)
	}
	if n := svc.calls.Load(); n != 4 {
		t.Fatalf("service saw %d Stats, want 1 + 3 retries", n)
	}
	// A streamed body already read cannot be sent again.
	svc.left.Store(1)
	svc.calls.Store(0)
	if _, err := c.PutStream(ctx, "s", "k", bytes.NewReader([]byte("abc")), 3); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("PutStream: %v", err)
	}
	if n := svc.calls.Load(); n != 1 {
		t.Fatalf("streamed Put sent %d times", n)
	}
	// Other errors are not retried.
	svc.code = wire.CodePreconditionFailed
	svc.left.Store(1)
	svc.calls.Store(0)
	if _, err := c.Put(ctx, "s", "k", []byte("v")); !errors.Is(err, ErrPreconditionFailed) || svc.calls.Load() != 1 {
		t.Fatalf("Put: %v after %d calls", err, svc.calls.Load())
	}
}

func TestRetryable(t *testing.T) {
	lost := fmt.Errorf("%w: reset", wire.ErrConnLost)
	for _, tc := range []struct {
		err           error
		idem, nonIdem bool
		stated        string
	}{
		{&errDial{err: errors.New("refused")}, true, true, "dial failure"},
		{fmt.Errorf("%w: x", wire.ErrConnClosed), true, true, "closed before sending"},
		{wire.Errorf(wire.CodeNotLeader, ""), true, true, "not leader"},
		{wire.Errorf(wire.CodeUnavailable, ""), true, true, "unavailable"},
		{lost, true, false, "lost in flight"},
		{wire.Errorf(wire.CodeNotFound, ""), false, false, "not found"},
		{context.Canceled, false, false, "canceled"},
	} {
		if got := retryable(tc.err, true); got != tc.idem {
			t.Errorf("%s: idempotent retryable=%v", tc.stated, got)
		}
		if got := retryable(tc.err, false); got != tc.nonIdem {
			t.Errorf("%s: non-idempotent retryable=%v", tc.stated, got)
		}
	}
}

// A broken connection is replaced on next use.
func TestReconnect(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, serve(t, object.NewMemService()))
	if _, err := c.CreateSpace(ctx, "s", SpaceSettings{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range c.nodes {
		n.mu.Lock()
		for _, cn := range n.mu.conns {
			if cn != nil {
				cn.Close()
			}
		}
		n.mu.Unlock()
	}
	for range 4 {
		if _, err := c.ListSpaces(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Put(ctx, "s", "k", []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
}

func TestDialFailsWithNoNode(t *testing.T) {
	t.Setenv(EnvAccessKey, testAccess)
	t.Setenv(EnvSecretKey, testSecret)
	if _, err := Dial(context.Background(), deadAddr(t)); err == nil || !strings.Contains(err.Error(), "dial") {
		t.Fatalf("Dial to a dead address: %v", err)
	}
	if _, err := DialOptions(context.Background(), Options{}); err == nil {
		t.Fatal("no addresses accepted")
	}
}

func BenchmarkGet1KiB(b *testing.B) {
	ctx := context.Background()
	svc := object.NewMemService()
	c := newClient(b, serve(b, svc))
	if _, err := c.CreateSpace(ctx, "s", SpaceSettings{}); err != nil {
		b.Fatal(err)
	}
	if _, err := c.Put(ctx, "s", "k", make([]byte, 1024)); err != nil {
		b.Fatal(err)
	}
	for _, callers := range []int{1, 64} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(1024)
			var next atomic.Int64
			var wg sync.WaitGroup
			var failed atomic.Value
			b.ResetTimer()
			for range callers {
				wg.Go(func() {
					for next.Add(1) <= int64(b.N) {
						if data, _, err := c.Get(ctx, "s", "k"); err != nil || len(data) != 1024 {
							failed.Store(fmt.Errorf("Get: %d bytes, %v", len(data), err))
							return
						}
					}
				})
			}
			wg.Wait()
			if err := failed.Load(); err != nil {
				b.Fatal(err)
			}
		})
	}
}

func BenchmarkPut1KiB(b *testing.B) {
	ctx := context.Background()
	svc := object.NewMemService()
	c := newClient(b, serve(b, svc))
	if _, err := c.CreateSpace(ctx, "s", SpaceSettings{}); err != nil {
		b.Fatal(err)
	}
	data := make([]byte, 1024)
	b.ReportAllocs()
	b.SetBytes(1024)
	for i := 0; b.Loop(); i++ {
		if _, err := c.Put(ctx, "sink", fmt.Sprint(i%100), data); err != nil {
			b.Fatal(err)
		}
	}
}

// frozenNode listens like a node that was paused (SIGSTOP) after it
// accepted connections: each connection's first PING is answered (so the
// dial succeeds), then nothing more, and the connection stays open.
func frozenNode(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns sync.WaitGroup
	done := make(chan struct{})
	t.Cleanup(func() { close(done); l.Close(); conns.Wait() })
	go func() {
		for {
			nc, err := l.Accept()
			if err != nil {
				return
			}
			conns.Go(func() {
				defer nc.Close()
				// It answers the handshake (PING, HELLO, AUTH) as a live
				// node would, and freezes at the first request.
				br := bufio.NewReader(nc)
				var hb [wire.HeaderLen]byte
				var tr auth.Transcript
				for {
					h, body, err := wire.ReadFrame(br, hb[:], wire.DefaultMaxFrame)
					if err != nil {
						return
					}
					var out []byte
					switch h.Op {
					case wire.OpPing:
						out = wire.AppendPingInfo(nil, wire.PingInfo{MaxFrame: wire.DefaultMaxFrame, MaxInflight: 256})
					case wire.OpHello:
						hello, _ := wire.DecodeHello(body)
						tr = auth.Transcript{Mech: hello.Mech, Access: hello.Access, Client: hello.Nonce, Server: auth.NewNonce()}
						out = tr.Server[:]
					case wire.OpAuth:
						out = wire.AppendAuthResult(nil, &wire.AuthResult{Proof: auth.ServerProof(testSecret, &tr), IdleTimeout: time.Minute})
					}
					if out == nil {
						break
					}
					nc.Write(wire.AppendFrame(nil, h.Op, wire.FlagResponse, h.ID, out))
				}
				<-done
			})
		}
	}()
	return l.Addr().String()
}

// TestFrozenSeed: with a paused node first in the seed list, a read made
// without a deadline does not wait for it forever: its connection is given
// up after Options.Liveness and the read is served by the next node; the
// paused node is then tried last, so the next reads do not wait at all.
func TestFrozenSeed(t *testing.T) {
	ctx := context.Background()
	const live = 300 * time.Millisecond
	addr := serve(t, object.NewMemService())
	setup := newClient(t, addr)
	if _, err := setup.CreateSpace(ctx, "s", SpaceSettings{}); err != nil {
		t.Fatal(err)
	}
	if _, err := setup.Put(ctx, "s", "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	c, err := DialOptions(ctx, Options{Addrs: []string{frozenNode(t), addr}, NoRouting: true, RetryBackoff: 1, Liveness: live,
		AccessKey: testAccess, SecretKey: testSecret})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	data, _, err := c.Get(ctx, "s", "k")
	if err != nil || string(data) != "v" {
		t.Fatalf("get with a paused first seed: %q, %v", data, err)
	}
	if took := time.Since(start); took > 3*live {
		t.Fatalf("the read took %v, want it served within about Liveness (%v)", took, live)
	} else {
		t.Logf("first read served after %v", took.Round(time.Millisecond))
	}
	start = time.Now()
	for range 10 {
		if _, _, err := c.Get(ctx, "s", "k"); err != nil {
			t.Fatal(err)
		}
	}
	if took := time.Since(start); took > live {
		t.Fatalf("10 more reads took %v: the paused node was asked again", took)
	}
}

// TestStaleConnectionReplaced: a connection idle for most of the server's
// idle timeout is not used again (a request on it could cross the
// server's close): the next request dials a fresh one, and the old one is
// closed.
func TestStaleConnectionReplaced(t *testing.T) {
	ctx := context.Background()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := wire.NewServer(object.NewMemService(), wire.ServerOptions{Keys: testKeys(), IdleTimeout: 400 * time.Millisecond})
	go s.Serve(l)
	t.Cleanup(func() { s.Close() })
	c, err := DialOptions(ctx, Options{Addrs: []string{l.Addr().String()}, Conns: 1, AccessKey: testAccess, SecretKey: testSecret})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	conn := func() *wire.Conn {
		c.nodes[0].mu.Lock()
		defer c.nodes[0].mu.Unlock()
		return c.nodes[0].mu.conns[0]
	}
	if _, err := c.ListSpaces(ctx); err != nil {
		t.Fatal(err)
	}
	first := conn()
	time.Sleep(350 * time.Millisecond) // past 80% of the idle timeout
	if _, err := c.ListSpaces(ctx); err != nil {
		t.Fatalf("a request after the connection went stale: %v", err)
	}
	if conn() == first {
		t.Fatal("the stale connection was used again")
	}
	deadline := time.Now().Add(2 * time.Second)
	for first.Err() == nil && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if first.Err() == nil {
		t.Fatal("the stale connection was not closed")
	}
}
