package wire

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/auth"
	"github.com/cairn-db/cairn/internal/chunk"
	"github.com/cairn-db/cairn/internal/object"
)

// The key the tests' servers know and their clients authenticate with:
// a cluster admin, so that every operation is allowed.
const (
	testAccess = "WIRETESTKEY"
	testSecret = "wire-test-secret-key"
)

func testKeys() *auth.Keyring {
	var r auth.Keyring
	r.Set([]auth.Key{{Access: testAccess, Secret: testSecret, ClusterAdmin: true}})
	return &r
}

// withKey adds the test key to o.
func withKey(o ConnOptions) ConnOptions {
	o.AccessKey, o.SecretKey = testAccess, testSecret
	return o
}

// startServer serves svc on a fresh port. Without o.Keys the server knows
// the test key (testKeys).
func startServer(t testing.TB, svc object.Service, o ServerOptions) (string, *Server) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if o.Keys == nil && !o.AllowUnauthenticated {
		o.Keys = testKeys()
	}
	s := NewServer(svc, o)
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	t.Cleanup(func() {
		s.Close()
		if err := <-done; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return l.Addr().String(), s
}

func dial(t testing.TB, addr string) *Conn {
	t.Helper()
	c, err := DialConn(context.Background(), addr, withKey(ConnOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func wantCode(t *testing.T, err error, c Code) {
	t.Helper()
	if got := CodeOf(err); got != c || err == nil && c != CodeOK {
		t.Fatalf("got error %v (code %v), want code %v", err, got, c)
	}
}

func TestEveryOp(t *testing.T) {
	ctx := context.Background()
	svc := object.NewMemService()
	addr, _ := startServer(t, svc, ServerOptions{})
	c := dial(t, addr)

	sp, err := c.CreateSpace(ctx, "photos", object.SpaceSettings{Retention: "last", KeepLast: 3, Placement: "hash"})
	if err != nil || sp.Name != "photos" || sp.Settings.KeepLast != 3 || sp.Settings.Placement != "hash" {
		t.Fatalf("CreateSpace: %+v %v", sp, err)
	}
	_, err = c.CreateSpace(ctx, "photos", object.SpaceSettings{})
	wantCode(t, err, CodeSpaceExists)
	if !errors.Is(err, ErrSpaceExists) {
		t.Fatalf("errors.Is(%v, ErrSpaceExists) = false", err)
	}
	_, err = c.CreateSpace(ctx, "bad name", object.SpaceSettings{})
	wantCode(t, err, CodeBadSpaceName)
	if _, err := c.CreateSpace(ctx, "empty", object.SpaceSettings{}); err != nil {
		t.Fatal(err)
	}
	l, err := c.ListSpaces(ctx)
	if err != nil || len(l) != 2 || l[0].Name != "empty" || l[1].Name != "photos" {
		t.Fatalf("ListSpaces: %+v %v", l, err)
	}
	if err := c.DeleteSpace(ctx, "empty"); err != nil {
		t.Fatal(err)
	}
	wantCode(t, c.DeleteSpace(ctx, "empty"), CodeSpaceNotFound)

	put := &object.PutRequest{Space: "photos", Key: "a/1", ContentType: "text/plain",
		Meta: map[string]string{"m": "1"}, Tags: map[string]string{"t": "x"}}
	v1, err := c.PutBytes(ctx, put, []byte("hello"))
	if err != nil || v1.Size != 5 || v1.ContentType != "text/plain" || v1.Meta["m"] != "1" || v1.Tags["t"] != "x" {
		t.Fatalf("Put: %+v %v", v1, err)
	}
	wantCode(t, c.DeleteSpace(ctx, "photos"), CodeSpaceNotEmpty)
	// IfNoneMatch fails while a live version exists; IfMatch needs the latest.
	_, err = c.PutBytes(ctx, &object.PutRequest{Space: "photos", Key: "a/1", IfNoneMatch: true}, []byte("x"))
	wantCode(t, err, CodePreconditionFailed)
	_, err = c.PutBytes(ctx, &object.PutRequest{Space: "photos", Key: "a/1", IfMatch: v1.Version + 100}, []byte("x"))
	wantCode(t, err, CodePreconditionFailed)
	v2, err := c.PutBytes(ctx, &object.PutRequest{Space: "photos", Key: "a/1", Mode: object.PutWriteAt, Offset: 1, IfMatch: v1.Version}, []byte("EL"))
	if err != nil || v2.Parent != v1.Version {
		t.Fatalf("WriteAt: %+v %v", v2, err)
	}
	v3, err := c.PutBytes(ctx, &object.PutRequest{Space: "photos", Key: "a/1", Mode: object.PutAppend}, []byte("!"))
	if err != nil {
		t.Fatal(err)
	}
	info, data, err := c.GetBytes(ctx, &object.GetRequest{Space: "photos", Key: "a/1", Length: -1})
	if err != nil || string(data) != "hELlo!" || info.Version != v3.Version {
		t.Fatalf("Get: %q %+v %v", data, info, err)
	}
	_, data, err = c.GetBytes(ctx, &object.GetRequest{Space: "photos", Key: "a/1", Version: v1.Version, Length: -1})
	if err != nil || string(data) != "hello" {
		t.Fatalf("Get version: %q %v", data, err)
	}
	_, data, err = c.GetBytes(ctx, &object.GetRequest{Space: "photos", Key: "a/1", AsOf: v2.Version, Offset: 1, Length: 3})
	if err != nil || string(data) != "ELl" {
		t.Fatalf("Get as-of range: %q %v", data, err)
	}
	_, _, err = c.GetBytes(ctx, &object.GetRequest{Space: "photos", Key: "a/1", Offset: 99, Length: -1})
	wantCode(t, err, CodeInvalidRange)
	st, err := c.Stat(ctx, &object.GetRequest{Space: "photos", Key: "a/1", Length: -1})
	if err != nil || st.Size != 6 {
		t.Fatalf("Stat: %+v %v", st, err)
	}
	_, err = c.Stat(ctx, &object.GetRequest{Space: "photos", Key: "nope", Length: -1})
	wantCode(t, err, CodeNotFound)
	_, err = c.Stat(ctx, &object.GetRequest{Space: "nospace", Key: "nope", Length: -1})
	wantCode(t, err, CodeSpaceNotFound)
	for i := range 5 {
		if _, err := c.PutBytes(ctx, &object.PutRequest{Space: "photos", Key: fmt.Sprintf("b/%d", i)}, []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	lr, err := c.List(ctx, &object.ListRequest{Space: "photos", Prefix: "b/", Limit: 3})
	if err != nil || len(lr.Objects) != 3 || !lr.Truncated || lr.Next != "b/2" {
		t.Fatalf("List: %+v %v", lr, err)
	}
	lr, err = c.List(ctx, &object.ListRequest{Space: "photos", Prefix: "b/", StartAfter: lr.Next})
	if err != nil || len(lr.Objects) != 2 || lr.Truncated || lr.Objects[0].Key != "b/3" {
		t.Fatalf("List page 2: %+v %v", lr, err)
	}
	del, err := c.Delete(ctx, &object.DeleteRequest{Space: "photos", Key: "a/1"})
	if err != nil || !del.DeleteMarker {
		t.Fatalf("Delete: %+v %v", del, err)
	}
	_, _, err = c.GetBytes(ctx, &object.GetRequest{Space: "photos", Key: "a/1", Length: -1})
	wantCode(t, err, CodeNotFound)
	_, _, err = c.GetBytes(ctx, &object.GetRequest{Space: "photos", Key: "a/1", Version: del.Version, Length: -1})
	wantCode(t, err, CodeDeleted)
	vr, err := c.Versions(ctx, &object.VersionsRequest{Space: "photos", Key: "a/1", Limit: 3})
	if err != nil || len(vr.Versions) != 3 || !vr.Truncated || !vr.Versions[0].DeleteMarker || vr.Versions[2].Version != v2.Version {
		t.Fatalf("Versions: %+v %v", vr, err)
	}
	if _, err := c.Delete(ctx, &object.DeleteRequest{Space: "photos", Key: "a/1", Version: v1.Version}); err != nil {
		t.Fatal(err)
	}
	_, _, err = c.GetBytes(ctx, &object.GetRequest{Space: "photos", Key: "a/1", Version: v1.Version, Length: -1})
	wantCode(t, err, CodeNotFound)

	// BATCH: per-item results.
	rs, err := c.Batch(ctx, []BatchItem{
		{Op: BatchPut, Put: object.PutRequest{Space: "photos", Key: "c", Size: 3}, Body: []byte("abc")},
		{Op: BatchGet, Get: object.GetRequest{Space: "photos", Key: "c", Length: -1}},
		{Op: BatchStat, Get: object.GetRequest{Space: "photos", Key: "missing", Length: -1}},
		{Op: BatchDelete, Delete: object.DeleteRequest{Space: "photos", Key: "c"}},
		{Op: BatchStat, Get: object.GetRequest{Space: "photos", Key: "b/0", Length: -1}},
	})
	if err != nil || len(rs) != 5 {
		t.Fatalf("Batch: %v %v", rs, err)
	}
	if rs[0].Err() != nil || rs[0].Info.Size != 3 || string(rs[1].Data) != "abc" || rs[2].Code != CodeNotFound ||
		!rs[3].Info.DeleteMarker || rs[4].Info.Key != "b/0" {
		t.Fatalf("Batch results: %+v", rs)
	}
	if !errors.Is(rs[2].Err(), ErrNotFound) {
		t.Fatalf("batch item error %v", rs[2].Err())
	}
}

// A request the Service is slow to answer does not hold back a fast one on
// the same connection.
func TestOutOfOrder(t *testing.T) {
	ctx := context.Background()
	svc := object.NewMemService()
	gate := make(chan struct{})
	svc.Gates["slow"] = gate
	addr, _ := startServer(t, svc, ServerOptions{})
	c := dial(t, addr)
	if _, err := c.CreateSpace(ctx, "s", object.SpaceSettings{}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"slow", "fast"} {
		if _, err := c.PutBytes(ctx, &object.PutRequest{Space: "s", Key: k}, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	slow := make(chan error, 1)
	go func() {
		_, data, err := c.GetBytes(ctx, &object.GetRequest{Space: "s", Key: "slow", Length: -1})
		if err == nil && string(data) != "slow" {
			err = fmt.Errorf("got %q", data)
		}
		slow <- err
	}()
	for c.Inflight() == 0 {
		runtime.Gosched()
	}
	for range 10 {
		_, data, err := c.GetBytes(ctx, &object.GetRequest{Space: "s", Key: "fast", Length: -1})
		if err != nil || string(data) != "fast" {
			t.Fatalf("fast: %q %v", data, err)
		}
	}
	select {
	case err := <-slow:
		t.Fatalf("slow request finished before its gate opened: %v", err)
	default:
	}
	close(gate)
	if err := <-slow; err != nil {
		t.Fatal(err)
	}
}

// rawConn speaks frames directly, for pipelining and malformed input.
type rawConn struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
}

// rawDial opens a raw connection and authenticates it with the test key.
func rawDial(t *testing.T, addr string) *rawConn {
	r := rawDialPlain(t, addr)
	r.login(testAccess, testSecret)
	return r
}

// rawDialPlain opens a raw connection that has not authenticated.
func rawDialPlain(t *testing.T, addr string) *rawConn {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc, br: bufio.NewReader(nc)}
}

// login runs the handshake on r (request ids 0xFFFF_FFF0 and 1) and
// fails the test unless it succeeds.
func (r *rawConn) login(access, secret string) AuthResult {
	r.t.Helper()
	res, err := r.tryLogin(access, secret)
	if err != nil {
		r.t.Fatalf("login: %v", err)
	}
	return res
}

// tryLogin runs the handshake and returns the server's answer to AUTH.
func (r *rawConn) tryLogin(access, secret string) (AuthResult, error) {
	r.t.Helper()
	tr := auth.Transcript{Mech: auth.MechHMACSHA256, Access: access, Client: auth.NewNonce()}
	r.send(OpHello, 0, 0xFFFFFFF0, AppendHello(nil, &HelloRequest{Mech: tr.Mech, Access: access, Nonce: tr.Client}))
	h, body := r.read()
	if h.Flags&FlagError != 0 {
		e, _ := DecodeError(body)
		return AuthResult{}, e
	}
	copy(tr.Server[:], body)
	p := auth.ClientProof(secret, &tr)
	r.send(OpAuth, 0, 0xFFFFFFF1, p[:])
	h, body = r.read()
	if h.Flags&FlagError != 0 {
		e, _ := DecodeError(body)
		return AuthResult{}, e
	}
	res, err := DecodeAuthResult(body)
	if err != nil {
		return AuthResult{}, err
	}
	if want := auth.ServerProof(secret, &tr); want != res.Proof {
		r.t.Fatal("the server's proof is wrong")
	}
	return res, nil
}

func (r *rawConn) write(b []byte) {
	if _, err := r.nc.Write(b); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rawConn) send(op Op, flags uint16, id uint32, body []byte) {
	r.write(AppendFrame(nil, op, flags, id, body))
}

func (r *rawConn) read() (Header, []byte) {
	r.t.Helper()
	var hb [HeaderLen]byte
	h, body, err := ReadFrame(r.br, hb[:], 64<<20)
	if err != nil {
		r.t.Fatalf("reading a frame: %v", err)
	}
	return h, body
}

func (r *rawConn) readError() (Header, *Error) {
	r.t.Helper()
	h, body := r.read()
	if h.Flags&FlagError == 0 {
		r.t.Fatalf("got %s frame flags %#x, want an error", h.Op, h.Flags)
	}
	e, err := DecodeError(body)
	if err != nil {
		r.t.Fatal(err)
	}
	return h, e
}

func (r *rawConn) expectEOF() {
	r.t.Helper()
	var b [1]byte
	if _, err := io.ReadFull(r.br, b[:]); err == nil {
		r.t.Fatalf("connection still open")
	}
}

func (r *rawConn) ping(id uint32) {
	r.t.Helper()
	r.send(OpPing, 0, id, nil)
	h, body := r.read()
	if h.Op != OpPing || h.ID != id || h.Flags != FlagResponse {
		r.t.Fatalf("ping answer %+v", h)
	}
	if p, err := DecodePingInfo(body); err != nil || p.MaxFrame != DefaultMaxFrame {
		r.t.Fatalf("ping info %+v %v", p, err)
	}
}

// 1000 requests written in one go, before any answer is read.
func TestPipelining(t *testing.T) {
	ctx := context.Background()
	svc := object.NewMemService()
	addr, _ := startServer(t, svc, ServerOptions{})
	c := dial(t, addr)
	if _, err := c.CreateSpace(ctx, "s", object.SpaceSettings{}); err != nil {
		t.Fatal(err)
	}
	const n = 1000
	var frames []byte
	for i := range n {
		put := AppendPutRequest(nil, &object.PutRequest{Space: "s", Key: fmt.Sprint(i), Size: 4})
		frames = AppendFrame(frames, OpPut, 0, uint32(i+1), append(put, fmt.Sprintf("%04d", i)...))
	}
	r := rawDial(t, addr)
	r.write(frames)
	seen := map[uint32]bool{}
	for range n {
		h, body := r.read()
		info, err := DecodeObjectInfo(body)
		if err != nil || h.Op != OpPut || h.Flags != FlagResponse || seen[h.ID] || info.Key != fmt.Sprint(h.ID-1) {
			t.Fatalf("answer %+v %+v %v", h, info, err)
		}
		seen[h.ID] = true
	}
	// The same through Conn from 1000 goroutines at once.
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			_, data, err := c.GetBytes(ctx, &object.GetRequest{Space: "s", Key: fmt.Sprint(i), Length: -1})
			if err == nil && string(data) != fmt.Sprintf("%04d", i) {
				err = fmt.Errorf("key %d: got %q", i, data)
			}
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// heapWatch samples the live heap until stopped and reports the peak growth.
// GC runs often meanwhile, so the in-use heap tracks live memory rather
// than garbage.
func heapWatch() (stop func() uint64) {
	old := debug.SetGCPercent(10)
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	var peak atomic.Uint64
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > base && ms.HeapInuse-base > peak.Load() {
				peak.Store(ms.HeapInuse - base)
			}
		}
	}()
	return func() uint64 {
		close(done)
		<-finished
		debug.SetGCPercent(old)
		return peak.Load()
	}
}

// A 64 MiB body streams both ways with a few frames buffered per stream.
func TestStreamBoundedMemory(t *testing.T) {
	ctx := context.Background()
	const size = 64 << 20
	svc := object.NewMemService()
	svc.SinkSize = size
	svc.SinkSeen = make(chan int64, 1)
	addr, srv := startServer(t, svc, ServerOptions{})
	c := dial(t, addr)

	stop := heapWatch()
	info, err := c.Put(ctx, &object.PutRequest{Space: "sink", Key: "big", Size: size}, io.LimitReader(&object.PatternReader{}, size))
	if err != nil || info.Size != size {
		t.Fatalf("Put: %+v %v", info, err)
	}
	if n := <-svc.SinkSeen; n != size {
		t.Fatalf("service read %d bytes", n)
	}
	// Unknown size: streamed to EOF.
	if _, err := c.Put(ctx, &object.PutRequest{Space: "sink", Key: "big", Size: -1}, io.LimitReader(&object.PatternReader{}, size/4)); err != nil {
		t.Fatal(err)
	}
	if n := <-svc.SinkSeen; n != size/4 {
		t.Fatalf("service read %d bytes", n)
	}
	info, rc, err := c.Get(ctx, &object.GetRequest{Space: "sink", Key: "big", Length: -1})
	if err != nil || info.Size != size {
		t.Fatalf("Get: %+v %v", info, err)
	}
	want := &object.PatternReader{}
	buf := make([]byte, 256<<10)
	wbuf := make([]byte, len(buf))
	var total int64
	for {
		n, err := rc.Read(buf)
		want.Read(wbuf[:n])
		if !bytes.Equal(buf[:n], wbuf[:n]) {
			t.Fatalf("wrong bytes at offset %d", total)
		}
		total += int64(n)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	rc.Close()
	peak := stop()
	if total != size {
		t.Fatalf("read %d bytes", total)
	}
	if p := srv.Stats().PeakStreamFrames; p < 1 || p > 4 {
		t.Fatalf("server buffered up to %d frames of one stream, want 1..4", p)
	}
	// Both directions together hold a few 1 MiB frames per side; the body
	// is 64 MiB.
	if peak > 32<<20 {
		t.Fatalf("heap grew by %d MiB while streaming", peak>>20)
	}
	t.Logf("peak heap growth %d KiB, peak frames per stream %d", peak>>10, srv.Stats().PeakStreamFrames)
}

// A client that vanishes mid-body leaves nothing stored, and the Service
// sees the body fail.
func TestTruncatedUpload(t *testing.T) {
	ctx := context.Background()
	svc := object.NewMemService()
	svc.PutSeen = make(chan struct{}, 10)
	addr, srv := startServer(t, svc, ServerOptions{})
	c := dial(t, addr)
	if _, err := c.CreateSpace(ctx, "s", object.SpaceSettings{}); err != nil {
		t.Fatal(err)
	}
	waitIdle := func() {
		for srv.Stats().Inflight != 0 {
			runtime.Gosched()
		}
	}

	// 1. The connection closes before END.
	r := rawDial(t, addr)
	hdr := AppendPutRequest(nil, &object.PutRequest{Space: "s", Key: "k", Size: 3000})
	r.send(OpPut, FlagMore, 7, append(hdr, make([]byte, 1000)...))
	r.send(OpData, 0, 7, make([]byte, 1000))
	<-svc.PutSeen
	r.nc.Close()
	waitIdle()

	// 2. The client CANCELs before END: the answer is an error.
	r = rawDial(t, addr)
	r.send(OpPut, FlagMore, 9, append(hdr, make([]byte, 1000)...))
	<-svc.PutSeen
	r.send(OpCancel, 0, 9, nil)
	h, e := r.readError()
	if h.ID != 9 || e.Code != CodeTruncated && e.Code != CodeCanceled {
		t.Fatalf("answer to a canceled upload: %+v %v", h, e)
	}
	r.ping(10) // the connection still works

	// 3. The client's body reader fails midway.
	_, err := c.Put(ctx, &object.PutRequest{Space: "s", Key: "k", Size: 5 << 20}, io.MultiReader(
		io.LimitReader(&object.PatternReader{}, 2<<20), iotestErrReader{}))
	if err == nil {
		t.Fatal("Put with a failing body succeeded")
	}
	<-svc.PutSeen
	waitIdle()

	errs := svc.PutErrors()
	if len(errs) != 3 {
		t.Fatalf("service saw %d body errors, want 3: %v", len(errs), errs)
	}
	for _, err := range errs {
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("body error %v, want io.ErrUnexpectedEOF", err)
		}
	}
	_, err = c.Stat(ctx, &object.GetRequest{Space: "s", Key: "k", Length: -1})
	wantCode(t, err, CodeNotFound)
}

type iotestErrReader struct{}

func (iotestErrReader) Read([]byte) (int, error) { return 0, errors.New("disk on fire") }

func TestMalformedFrames(t *testing.T) {
	svc := object.NewMemService()
	addr, _ := startServer(t, svc, ServerOptions{})

	t.Run("bad version", func(t *testing.T) {
		r := rawDial(t, addr)
		f := AppendFrame(nil, OpPing, 0, 5, nil)
		f[0] = 2
		r.write(f)
		h, e := r.readError()
		if h.ID != 0 || e.Code != CodeMalformed {
			t.Fatalf("%+v %v", h, e)
		}
		r.expectEOF()
	})
	t.Run("oversize length", func(t *testing.T) {
		r := rawDial(t, addr)
		var hb [HeaderLen]byte
		PutHeader(hb[:], Header{Version: Version, Op: OpPut, ID: 6, Len: DefaultMaxFrame + 1})
		r.write(hb[:])
		h, e := r.readError()
		if h.ID != 6 || e.Code != CodeTooLarge {
			t.Fatalf("%+v %v", h, e)
		}
		r.expectEOF()
	})
	t.Run("garbage body", func(t *testing.T) {
		r := rawDial(t, addr)
		for i, op := range []Op{OpGet, OpPut, OpStat, OpBatch, OpList, OpCreateSpace, OpListSpaces} {
			r.send(op, 0, uint32(i+1), []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
			h, e := r.readError()
			if h.ID != uint32(i+1) || h.Op != op || e.Code != CodeMalformed {
				t.Fatalf("%s: %+v %v", op, h, e)
			}
		}
		// Trailing bytes after a valid message are malformed too.
		r.send(OpStat, 0, 50, append(AppendGetRequest(nil, &object.GetRequest{Space: "s", Key: "k", Length: -1}), 0))
		if _, e := r.readError(); e.Code != CodeMalformed {
			t.Fatal(e)
		}
		r.ping(99)
	})
	t.Run("unknown opcode", func(t *testing.T) {
		r := rawDial(t, addr)
		r.send(Op(0x7e), 0, 3, []byte("whatever"))
		h, e := r.readError()
		if h.ID != 3 || e.Code != CodeUnknownOp {
			t.Fatalf("%+v %v", h, e)
		}
		r.ping(4)
		// CLUSTER with a body is malformed; a service that keeps no cluster
		// state answers it as unknown.
		r.send(OpCluster, 0, 5, []byte("x"))
		if _, e := r.readError(); e.Code != CodeMalformed {
			t.Fatal(e)
		}
		r.send(OpCluster, 0, 6, nil)
		if _, e := r.readError(); e.Code != CodeUnknownOp {
			t.Fatal(e)
		}
		r.ping(7)
		// NODE needs exactly an action and a node id.
		r.send(OpNode, 0, 8, []byte{1, 2})
		if _, e := r.readError(); e.Code != CodeMalformed {
			t.Fatal(e)
		}
		r.send(OpNode, 0, 9, []byte{1, 0, 0, 0, 0, 0, 0, 0, 2})
		if _, e := r.readError(); e.Code != CodeUnknownOp {
			t.Fatal(e)
		}
		r.ping(10)
	})
	t.Run("response flag on a request", func(t *testing.T) {
		r := rawDial(t, addr)
		r.send(OpPing, FlagResponse, 3, nil)
		if _, e := r.readError(); e.Code != CodeMalformed {
			t.Fatal(e)
		}
		r.ping(4)
	})
	if l, _ := svc.ListSpaces(context.Background()); len(l) != 0 {
		t.Fatalf("bad frames changed state: %v", l)
	}
}

func TestShutdownWaitsForInflight(t *testing.T) {
	ctx := context.Background()
	svc := object.NewMemService()
	gate := make(chan struct{})
	svc.Gates["slow"] = gate
	addr, srv := startServer(t, svc, ServerOptions{})
	c := dial(t, addr)
	if _, err := c.CreateSpace(ctx, "s", object.SpaceSettings{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutBytes(ctx, &object.PutRequest{Space: "s", Key: "slow"}, []byte("v")); err != nil {
		t.Fatal(err)
	}
	// The put's answer goes out before its handler counts itself done; wait
	// for that, so the count below is the gated Stat's.
	for srv.Stats().Inflight != 0 {
		runtime.Gosched()
	}
	got := make(chan error, 1)
	go func() {
		_, err := c.Stat(ctx, &object.GetRequest{Space: "s", Key: "slow", Length: -1})
		got <- err
	}()
	for srv.Stats().Inflight == 0 {
		runtime.Gosched()
	}
	down := make(chan error, 1)
	go func() { down <- srv.Shutdown(ctx) }()
	for !srv.closing.Load() {
		runtime.Gosched()
	}
	// New requests are refused as retryable while draining.
	_, err := c.Stat(ctx, &object.GetRequest{Space: "s", Key: "other", Length: -1})
	wantCode(t, err, CodeUnavailable)
	close(gate)
	if err := <-got; err != nil {
		t.Fatalf("in-flight request: %v", err)
	}
	if err := <-down; err != nil {
		t.Fatal(err)
	}
	<-c.Done()
	if err := srv.Shutdown(ctx); err != nil { // idempotent
		t.Fatal(err)
	}
}

func TestBodyLongerThanDeclared(t *testing.T) {
	ctx := context.Background()
	svc := object.NewMemService()
	addr, _ := startServer(t, svc, ServerOptions{})
	c := dial(t, addr)
	if _, err := c.CreateSpace(ctx, "s", object.SpaceSettings{}); err != nil {
		t.Fatal(err)
	}
	r := rawDial(t, addr)
	// Inline bytes past the declared size.
	hdr := AppendPutRequest(nil, &object.PutRequest{Space: "s", Key: "k", Size: 2})
	r.send(OpPut, 0, 1, append(hdr, "abc"...))
	if _, e := r.readError(); e.Code != CodeInvalidArgument {
		t.Fatal(e)
	}
	// Streamed bytes past the declared size.
	r.send(OpPut, FlagMore, 2, append(hdr, "a"...))
	r.send(OpData, FlagEnd, 2, []byte("bc"))
	if _, e := r.readError(); e.Code != CodeInvalidArgument && e.Code != CodeTruncated {
		t.Fatal(e)
	}
	r.ping(3)
	_, err := c.Stat(ctx, &object.GetRequest{Space: "s", Key: "k", Length: -1})
	wantCode(t, err, CodeNotFound)
}

// An error met mid-stream reaches the reader in place of the rest.
func TestGetStreamError(t *testing.T) {
	ctx := context.Background()
	svc := object.NewMemService()
	svc.SinkSize = 5 << 20
	addr, _ := startServer(t, svc, ServerOptions{})
	c := dial(t, addr)
	_, rc, err := c.Get(ctx, &object.GetRequest{Space: "sink", Key: "corrupt", Length: -1})
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, rc)
	rc.Close()
	if CodeOf(err) != CodeCorrupt || n > svc.SinkSize/2 {
		t.Fatalf("read %d bytes, then %v", n, err)
	}
	// Abandoning a stream midway leaves the connection usable.
	_, rc, err = c.Get(ctx, &object.GetRequest{Space: "sink", Key: "x", Length: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(rc, make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	rc.Close()
	if _, err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	for c.Inflight() != 0 {
		runtime.Gosched()
	}
}

// With a tiny in-flight limit the server stops reading instead of failing:
// every request is served.
func TestInflightLimit(t *testing.T) {
	ctx := context.Background()
	svc := object.NewMemService()
	addr, _ := startServer(t, svc, ServerOptions{MaxInflightPerConn: 2})
	c := dial(t, addr)
	if _, err := c.CreateSpace(ctx, "s", object.SpaceSettings{}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := range 100 {
		wg.Go(func() {
			if _, err := c.PutBytes(ctx, &object.PutRequest{Space: "s", Key: fmt.Sprint(i)}, []byte("v")); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if l, err := c.List(ctx, &object.ListRequest{Space: "s"}); err != nil || len(l.Objects) != 100 {
		t.Fatalf("%d objects, %v", len(l.Objects), err)
	}
}

// A client adopts a server's smaller frame limit; bodies stream in more,
// smaller frames.
func TestSmallServerFrames(t *testing.T) {
	ctx := context.Background()
	svc := object.NewMemService()
	addr, _ := startServer(t, svc, ServerOptions{MaxFrame: MinMaxFrame})
	c := dial(t, addr)
	if _, err := c.CreateSpace(ctx, "s", object.SpaceSettings{}); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, 1<<20+3)
	(&object.PatternReader{}).Read(body)
	if _, err := c.PutBytes(ctx, &object.PutRequest{Space: "s", Key: "k"}, body); err != nil {
		t.Fatal(err)
	}
	_, got, err := c.GetBytes(ctx, &object.GetRequest{Space: "s", Key: "k", Length: -1})
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("%d bytes, %v", len(got), err)
	}
	// A batch answer that would not fit one frame fails per item.
	rs, err := c.Batch(ctx, []BatchItem{{Op: BatchGet, Get: object.GetRequest{Space: "s", Key: "k", Length: -1}},
		{Op: BatchStat, Get: object.GetRequest{Space: "s", Key: "k", Length: -1}}})
	if err != nil || rs[0].Code != CodeTooLarge || rs[1].Err() != nil {
		t.Fatalf("%+v %v", rs, err)
	}
}

type countMetrics struct {
	mu    sync.Mutex
	codes map[Op][]Code
}

func (m *countMetrics) RequestDone(op Op, code Code, _ time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.codes[op] = append(m.codes[op], code)
}

func TestMetrics(t *testing.T) {
	ctx := context.Background()
	m := &countMetrics{codes: map[Op][]Code{}}
	addr, srv := startServer(t, object.NewMemService(), ServerOptions{Metrics: m})
	c := dial(t, addr)
	c.CreateSpace(ctx, "s", object.SpaceSettings{})
	c.Stat(ctx, &object.GetRequest{Space: "s", Key: "nope", Length: -1})
	c.Close()
	srv.Close()
	m.mu.Lock()
	defer m.mu.Unlock()
	if fmt.Sprint(m.codes[OpCreateSpace], m.codes[OpStat]) != "[ok] [not found]" {
		t.Fatalf("observed %v", m.codes)
	}
}

// panicService panics in Stat.
type panicService struct{ *object.MemService }

func (panicService) Stat(context.Context, *object.GetRequest) (object.Info, error) { panic("boom") }

// TestHandlerPanic: a panicking handler answers CodeInternal and the server
// keeps serving the connection.
func TestHandlerPanic(t *testing.T) {
	ctx := context.Background()
	addr, _ := startServer(t, panicService{object.NewMemService()}, ServerOptions{Logger: discardLogger()})
	c := dial(t, addr)
	_, err := c.Stat(ctx, &object.GetRequest{Space: "s", Key: "k"})
	wantCode(t, err, CodeInternal)
	if _, err := c.ListSpaces(ctx); err != nil {
		t.Fatalf("after a panic: %v", err)
	}
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// routed is a MemService that reports routes and says it forwarded every
// STAT.
type routed struct{ *object.MemService }

func (routed) Routes(_ context.Context, space string) (RouteTable, error) {
	if space != "s" {
		return RouteTable{}, Errorf(CodeSpaceNotFound, "no space %q", space)
	}
	return RouteTable{Space: 7, Routes: []Route{{Range: 1, Epoch: 1, Start: []byte{0, 0, 0, 7}, Leaseholder: "a:1", Replicas: []string{"a:1"}}}}, nil
}

func (r routed) Stat(ctx context.Context, req *object.GetRequest) (object.Info, error) {
	MarkForwarded(ctx)
	return r.MemService.Stat(ctx, req)
}

// TestRoutesAndForwarded checks ROUTES (answered by a RouteService, and
// UNKNOWN_OP from a Service without routes) and that an answer the service
// marked forwarded carries FlagForwarded, an error answer too, while
// others do not.
func TestRoutesAndForwarded(t *testing.T) {
	ctx := context.Background()
	plain, _ := startServer(t, object.NewMemService(), ServerOptions{})
	if _, err := dial(t, plain).Routes(ctx, "s"); CodeOf(err) != CodeUnknownOp {
		t.Fatalf("ROUTES from a service without routes: %v", err)
	}
	addr, _ := startServer(t, routed{object.NewMemService()}, ServerOptions{})
	var mu sync.Mutex
	var seen []Op
	c, err := DialConn(ctx, addr, withKey(ConnOptions{OnForwarded: func(op Op) {
		mu.Lock()
		seen = append(seen, op)
		mu.Unlock()
	}}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rt, err := c.Routes(ctx, "s")
	if err != nil || rt.Space != 7 || len(rt.Routes) != 1 || rt.Routes[0].Leaseholder != "a:1" {
		t.Fatalf("routes: %+v %v", rt, err)
	}
	if _, err := c.Routes(ctx, "nope"); CodeOf(err) != CodeSpaceNotFound {
		t.Fatalf("routes of a missing space: %v", err)
	}
	if _, err := c.CreateSpace(ctx, "s", object.SpaceSettings{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutBytes(ctx, &object.PutRequest{Space: "s", Key: "k", Size: 1}, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Stat(ctx, &object.GetRequest{Space: "s", Key: "k", Length: -1}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Stat(ctx, &object.GetRequest{Space: "s", Key: "missing", Length: -1}); CodeOf(err) != CodeNotFound {
		t.Fatalf("stat of a missing key: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 || seen[0] != OpStat || seen[1] != OpStat {
		t.Fatalf("answers flagged forwarded: %v, want only the two STATs (the error answer too)", seen)
	}
}

// viewService answers Get with a body that hands out views
// (object.Viewer) of pieces of uneven sizes, as the chunk reader does.
type viewService struct {
	*object.MemService
	views  atomic.Int64 // views handed out
	pinned atomic.Int64 // views not released yet
}

type viewBody struct {
	s      *viewService
	b      []byte
	pieces []int
	fail   bool // end with an error instead of io.EOF
}

var _ object.Viewer = (*viewBody)(nil)

func (v *viewBody) View(max int) ([]byte, *chunk.Pin, error) {
	b, err := v.next(max)
	if err != nil {
		return nil, nil, err
	}
	v.s.views.Add(1)
	v.s.pinned.Add(1)
	return b, chunk.NewPin(func() { v.s.pinned.Add(-1) }), nil
}

func (v *viewBody) next(max int) ([]byte, error) {
	if len(v.b) == 0 {
		if v.fail {
			return nil, object.Errorf(object.Corrupt, "a chunk failed its hash")
		}
		return nil, io.EOF
	}
	k := min(v.pieces[0], len(v.b), max)
	if k == v.pieces[0] {
		v.pieces = append(v.pieces[1:], v.pieces[0])
	} else {
		v.pieces[0] -= k
	}
	out := v.b[:k:k]
	v.b = v.b[k:]
	return out, nil
}

func (v *viewBody) Read(p []byte) (int, error) {
	b, err := v.next(len(p))
	return copy(p, b), err
}

func (v *viewBody) Close() error { return nil }

func (s *viewService) Get(ctx context.Context, req *object.GetRequest) (object.Info, io.ReadCloser, error) {
	info, rc, err := s.MemService.Get(ctx, req)
	if err != nil {
		return info, rc, err
	}
	b, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		return info, nil, err
	}
	fail := req.Key == "fails"
	if fail {
		b = b[:len(b)/2]
	}
	return info, &viewBody{s: s, b: b, pieces: []int{700 << 10, 3, 1 << 20, 64 << 10}, fail: fail}, nil
}

// A body that hands out views is sent from them: every byte arrives, in
// order, for whole objects and ranges, whatever the views' sizes against
// the frames'; an error after some views reaches the reader; every view's
// pin is released.
func TestGetFromViews(t *testing.T) {
	ctx := context.Background()
	svc := &viewService{MemService: object.NewMemService()}
	addr, _ := startServer(t, svc, ServerOptions{MaxFrame: MinMaxFrame})
	c := dial(t, addr)
	if _, err := c.CreateSpace(ctx, "v", object.SpaceSettings{}); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, 5<<20+123)
	for i := range body {
		body[i] = byte(i * 7 / 3)
	}
	for _, key := range []string{"big", "fails"} {
		if _, err := c.PutBytes(ctx, &object.PutRequest{Space: "v", Key: key}, body); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range [][2]int64{{0, -1}, {1, 3 << 20}, {700<<10 - 1, 2}, {5 << 20, -1}, {100, 64 << 10}} {
		_, got, err := c.GetBytes(ctx, &object.GetRequest{Space: "v", Key: "big", Offset: r[0], Length: r[1]})
		want := body[r[0]:]
		if r[1] >= 0 {
			want = want[:r[1]]
		}
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("GET [%d, +%d): %d bytes, %v; want %d bytes", r[0], r[1], len(got), err, len(want))
		}
	}
	if n := svc.views.Load(); n < (5<<20)/MinMaxFrame {
		t.Fatalf("%d views taken; the bodies were not sent from them", n)
	}
	_, rc, err := c.Get(ctx, &object.GetRequest{Space: "v", Key: "fails", Length: -1})
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, rc)
	rc.Close()
	if CodeOf(err) != CodeCorrupt || n > int64(len(body))/2 {
		t.Fatalf("read %d bytes, then %v; want at most half and CORRUPT", n, err)
	}
	// (The last frames' pins go as the server's writer finishes them.)
	for deadline := time.Now().Add(5 * time.Second); svc.pinned.Load() != 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if n := svc.pinned.Load(); n != 0 {
		t.Fatalf("%d views' pins not released", n)
	}
}
