package wire

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/auth"
	"github.com/cairn-db/cairn/internal/object"
)

// closed reports whether the server closes r within d (reading and
// dropping whatever it sends meanwhile).
func (r *rawConn) closed(d time.Duration) bool {
	r.nc.SetReadDeadline(time.Now().Add(d))
	defer r.nc.SetReadDeadline(time.Time{})
	_, err := io.Copy(io.Discard, r.br)
	var ne net.Error
	return err == nil || !(errors.As(err, &ne) && ne.Timeout())
}

// TestUnauthenticated: before AUTH a connection may PING and nothing
// else; failures to authenticate get one answer whatever failed, and the
// third closes the connection. Nothing a refused request asks is done.
func TestUnauthenticated(t *testing.T) {
	svc := object.NewMemService()
	addr, _ := startServer(t, svc, ServerOptions{})

	r := rawDialPlain(t, addr)
	r.send(OpPing, 0, 1, nil)
	if h, _ := r.read(); h.Flags&FlagError != 0 || h.ID != 1 {
		t.Fatalf("PING before AUTH: %+v", h)
	}
	r.send(OpCreateSpace, 0, 2, AppendCreateSpace(nil, "nope", &object.SpaceSettings{}))
	if _, e := r.readError(); e.Code != CodeUnauthenticated || !strings.Contains(e.Message, "authenticate first") {
		t.Fatalf("CREATE_SPACE before AUTH: %v", e)
	}
	if _, err := r.tryLogin(testAccess, "not-the-secret"); CodeOf(err) != CodeUnauthenticated {
		t.Fatalf("wrong secret: %v", err)
	}
	_, err := r.tryLogin("NOSUCHKEY", testSecret)
	if CodeOf(err) != CodeUnauthenticated || err.Error() != errAuthFailed().Error() {
		t.Fatalf("unknown key: %v, want the same answer as a wrong secret", err)
	}
	if !r.closed(2 * time.Second) {
		t.Fatal("the connection stayed open after three failures")
	}
	if l, _ := svc.ListSpaces(context.Background()); len(l) != 0 {
		t.Fatalf("a refused request created %+v", l)
	}

	// AUTH without HELLO, a short proof, a second HELLO after success.
	r = rawDialPlain(t, addr)
	r.send(OpAuth, 0, 1, make([]byte, auth.ProofSize))
	if _, e := r.readError(); e.Code != CodeInvalidArgument {
		t.Fatalf("AUTH without HELLO: %v", e)
	}
	r.send(OpHello, 0, 2, AppendHello(nil, &HelloRequest{Mech: 9, Access: testAccess}))
	if _, e := r.readError(); e.Code != CodeInvalidArgument || !strings.Contains(e.Message, "mechanism") {
		t.Fatalf("HELLO with an unknown mechanism: %v", e)
	}
	r.send(OpHello, 0, 3, []byte{1, 2})
	if _, e := r.readError(); e.Code != CodeMalformed {
		t.Fatalf("a malformed HELLO: %v", e)
	}
	res := r.login(testAccess, testSecret)
	if !res.ClusterAdmin || res.IdleTimeout != 60*time.Second {
		t.Fatalf("AUTH answer: %+v", res)
	}
	r.send(OpHello, 0, 4, AppendHello(nil, &HelloRequest{Mech: 1, Access: testAccess}))
	if _, e := r.readError(); e.Code != CodeInvalidArgument || !strings.Contains(e.Message, "already authenticated") {
		t.Fatalf("HELLO after AUTH: %v", e)
	}

	// Before authentication a frame gets no frame-sized buffer, and DATA
	// and CANCEL count as failures too.
	r = rawDialPlain(t, addr)
	r.write(AppendFrame(nil, OpCreateSpace, 0, 1, make([]byte, 8<<10)))
	if _, e := r.readError(); e.Code != CodeTooLarge {
		t.Fatalf("an 8 KiB frame before AUTH: %v", e)
	}
	if !r.closed(2 * time.Second) {
		t.Fatal("the connection stayed open after an oversized frame before AUTH")
	}
	r = rawDialPlain(t, addr)
	for id := uint32(1); id <= 3; id++ {
		r.send(OpData, FlagEnd, id, []byte("x"))
	}
	if !r.closed(2 * time.Second) {
		t.Fatal("three DATA frames before AUTH did not close the connection")
	}

	// A client without a key gets a clear answer from the first request.
	c, err := DialConn(context.Background(), addr, ConnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.ListSpaces(context.Background()); CodeOf(err) != CodeUnauthenticated || !strings.Contains(err.Error(), "CAIRN_ACCESS_KEY") {
		t.Fatalf("LIST_SPACES without a key: %v", err)
	}
	if _, err := DialConn(context.Background(), addr, ConnOptions{AccessKey: testAccess, SecretKey: "wrong-secret"}); CodeOf(err) != CodeUnauthenticated {
		t.Fatalf("DialConn with a wrong secret: %v", err)
	}
}

// TestGrants: each request is checked against the key's grants; refused
// requests change nothing; listing spaces shows the ones the key holds a
// grant on; cluster operations need the cluster-admin grant; a key
// removed from the keyring stops working on open connections.
func TestGrants(t *testing.T) {
	ctx := context.Background()
	svc := object.NewMemService()
	keys := testKeys()
	set := func(more ...auth.Key) {
		keys.Set(append([]auth.Key{{Access: testAccess, Secret: testSecret, ClusterAdmin: true}}, more...))
	}
	reader := auth.Key{Access: "READER", Secret: "reader-secret", Grants: map[string]string{"photos": auth.Read, "logs": auth.Write}}
	set(reader)
	addr, _ := startServer(t, keyedService{svc}, ServerOptions{Keys: keys})
	admin := dial(t, addr)
	for _, sp := range []string{"photos", "logs", "secret"} {
		if _, err := admin.CreateSpace(ctx, sp, object.SpaceSettings{}); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.PutBytes(ctx, &object.PutRequest{Space: sp, Key: "k"}, []byte(sp)); err != nil {
			t.Fatal(err)
		}
	}
	c, err := DialConn(ctx, addr, ConnOptions{AccessKey: reader.Access, SecretKey: reader.Secret})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if res := c.Auth(); res.ClusterAdmin || res.Grants["photos"] != auth.Read {
		t.Fatalf("AUTH answer for the reader: %+v", res)
	}
	denied := func(what string, err error) {
		t.Helper()
		if CodeOf(err) != CodeAccessDenied {
			t.Fatalf("%s: %v, want access denied", what, err)
		}
	}
	if _, b, err := c.GetBytes(ctx, &object.GetRequest{Space: "photos", Key: "k", Length: -1}); err != nil || string(b) != "photos" {
		t.Fatalf("GET with a read grant: %q %v", b, err)
	}
	_, err = c.PutBytes(ctx, &object.PutRequest{Space: "photos", Key: "k"}, []byte("x"))
	denied("PUT with a read grant", err)
	_, err = c.Put(ctx, &object.PutRequest{Space: "photos", Key: "big", Size: 3 << 20}, bytes.NewReader(make([]byte, 3<<20)))
	denied("streamed PUT with a read grant", err)
	_, err = c.Delete(ctx, &object.DeleteRequest{Space: "photos", Key: "k"})
	denied("DELETE with a read grant", err)
	_, err = c.Stat(ctx, &object.GetRequest{Space: "secret", Key: "k", Length: -1})
	denied("STAT without a grant", err)
	_, err = c.List(ctx, &object.ListRequest{Space: "secret"})
	denied("LIST without a grant", err)
	_, err = c.CreateSpace(ctx, "mine", object.SpaceSettings{})
	denied("CREATE_SPACE without admin", err)
	denied("DELETE_SPACE without admin", c.DeleteSpace(ctx, "logs"))
	_, err = c.Keys(ctx, KeyList, nil)
	denied("KEYS without cluster admin", err)
	_, err = c.Tokens(ctx, TokenList, nil)
	denied("TOKENS without cluster admin", err)
	denied("NODE without cluster admin", c.NodeAdmin(ctx, NodeDrain, 1))
	if _, err := c.PutBytes(ctx, &object.PutRequest{Space: "logs", Key: "new"}, []byte("x")); err != nil {
		t.Fatalf("PUT with a write grant: %v", err)
	}
	l, err := c.ListSpaces(ctx)
	if err != nil || len(l) != 2 || l[0].Name != "logs" || l[1].Name != "photos" {
		t.Fatalf("LIST_SPACES of the reader: %+v %v", l, err)
	}
	rs, err := c.Batch(ctx, []BatchItem{
		{Op: BatchGet, Get: object.GetRequest{Space: "photos", Key: "k", Length: -1}},
		{Op: BatchPut, Put: object.PutRequest{Space: "photos", Key: "b", Size: 1}, Body: []byte("b")},
		{Op: BatchGet, Get: object.GetRequest{Space: "secret", Key: "k", Length: -1}},
		{Op: BatchDelete, Delete: object.DeleteRequest{Space: "logs", Key: "new"}},
	})
	if err != nil || rs[0].Code != CodeOK || rs[1].Code != CodeAccessDenied || rs[2].Code != CodeAccessDenied || rs[3].Code != CodeOK {
		t.Fatalf("BATCH of mixed grants: %+v %v", rs, err)
	}
	for _, k := range []struct{ space, key string }{{"photos", "b"}, {"photos", "big"}} {
		if _, err := svc.Stat(ctx, &object.GetRequest{Space: k.space, Key: k.key, Length: -1}); CodeOf(err) != CodeNotFound {
			t.Fatalf("a refused write left %s/%s: %v", k.space, k.key, err)
		}
	}
	if _, b, _ := admin.GetBytes(ctx, &object.GetRequest{Space: "photos", Key: "k", Length: -1}); string(b) != "photos" {
		t.Fatalf("a refused write changed photos/k: %q", b)
	}
	if l, _ := admin.ListSpaces(ctx); len(l) != 3 {
		t.Fatalf("spaces after refused requests: %+v", l)
	}

	// The key removed and made again under the same id, with another
	// secret: a connection of the old one does not become the new one.
	set(auth.Key{Access: reader.Access, Secret: "another-secret", Grants: reader.Grants})
	if _, err := c.Stat(ctx, &object.GetRequest{Space: "photos", Key: "k", Length: -1}); CodeOf(err) != CodeUnauthenticated {
		t.Fatalf("a request with a key made again: %v", err)
	}
	set() // the reader's key is removed
	if _, err := c.Stat(ctx, &object.GetRequest{Space: "photos", Key: "k", Length: -1}); CodeOf(err) != CodeUnauthenticated {
		t.Fatalf("a request with a removed key: %v", err)
	}
}

// keyedService is a MemService with the cluster-only operations, which
// answer nothing useful: the test is whether they are reached.
type keyedService struct{ *object.MemService }

func (keyedService) CreateKey(context.Context, KeySpec) (KeySpec, error) { return KeySpec{}, nil }
func (keyedService) ListKeys(context.Context) ([]KeySpec, error)         { return nil, nil }
func (keyedService) DeleteKey(context.Context, string) error             { return nil }
func (keyedService) CreateToken(context.Context, TokenSpec) (TokenSpec, error) {
	return TokenSpec{}, nil
}
func (keyedService) ListTokens(context.Context) ([]TokenSpec, error)     { return nil, nil }
func (keyedService) RevokeToken(context.Context, string) error           { return nil }
func (keyedService) NodeAdmin(context.Context, NodeAction, uint64) error { return nil }

// TestDeadlines: a connection that does not authenticate in time, one left
// idle, one that stops in the middle of a frame or of an upload, and one
// whose client stops reading answers are closed; one waiting on a slow
// request is not. An upload cut off writes nothing.
func TestDeadlines(t *testing.T) {
	ctx := context.Background()
	svc := object.NewMemService()
	const idle = 300 * time.Millisecond
	addr, srv := startServer(t, svc, ServerOptions{HandshakeTimeout: 200 * time.Millisecond, IdleTimeout: idle})

	if r := rawDialPlain(t, addr); !r.closed(2 * time.Second) {
		t.Fatal("a connection that never authenticated stayed open")
	}
	r := rawDial(t, addr)
	if !r.closed(3 * time.Second) {
		t.Fatal("an idle connection stayed open")
	}

	if _, err := svc.CreateSpace(ctx, "s", object.SpaceSettings{}); err != nil {
		t.Fatal(err)
	}
	// Half a frame, then nothing.
	r = rawDial(t, addr)
	frame := AppendFrame(nil, OpStat, 0, 5, AppendGetRequest(nil, &object.GetRequest{Space: "s", Key: "k", Length: -1}))
	r.write(frame[:HeaderLen+3])
	if !r.closed(3 * time.Second) {
		t.Fatal("a connection stopped inside a frame stayed open")
	}
	// An upload that stalls: the PUT fails and stores nothing.
	r = rawDial(t, addr)
	put := AppendPutRequest(nil, &object.PutRequest{Space: "s", Key: "stalled", Size: 1 << 20})
	r.send(OpPut, FlagMore, 6, append(put, make([]byte, 1000)...))
	r.send(OpData, 0, 6, make([]byte, 1000))
	if !r.closed(3 * time.Second) {
		t.Fatal("a connection stalled in an upload stayed open")
	}
	time.Sleep(50 * time.Millisecond)
	if _, err := svc.Stat(ctx, &object.GetRequest{Space: "s", Key: "stalled", Length: -1}); CodeOf(err) != CodeNotFound {
		t.Fatalf("a cut-off upload was stored: %v", err)
	}
	// A client that stops reading a large answer.
	big := bytes.Repeat([]byte("x"), 48<<20)
	if _, err := svc.Put(ctx, &object.PutRequest{Space: "s", Key: "big", Size: int64(len(big))}, bytes.NewReader(big)); err != nil {
		t.Fatal(err)
	}
	cut := srv.Stats().Cut
	r = rawDial(t, addr)
	r.send(OpGet, 0, 7, AppendGetRequest(nil, &object.GetRequest{Space: "s", Key: "big", Length: -1}))
	deadline := time.Now().Add(5 * time.Second)
	for srv.Stats().Cut == cut && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if srv.Stats().Cut == cut {
		t.Fatal("a connection whose client stopped reading stayed open")
	}

	// A request that takes longer than the idle timeout is not cut.
	slowAddr, _ := startServer(t, slowService{svc, 3 * idle}, ServerOptions{IdleTimeout: idle})
	c := dial(t, slowAddr)
	if _, err := c.Stat(ctx, &object.GetRequest{Space: "s", Key: "big", Length: -1}); err != nil {
		t.Fatalf("a slow request on a quiet connection: %v", err)
	}
	// The client stops using a connection before the server's timeout.
	time.Sleep(idle * 9 / 10)
	if !c.Stale() {
		t.Fatal("a connection idle for 90% of the server's timeout is not stale")
	}
}

type slowService struct {
	*object.MemService
	d time.Duration
}

func (s slowService) Stat(ctx context.Context, req *object.GetRequest) (object.Info, error) {
	time.Sleep(s.d)
	return s.MemService.Stat(ctx, req)
}

// TestMaxConns: past the cap a connection is answered "too many
// connections" and closed; the ones open go on.
func TestMaxConns(t *testing.T) {
	ctx := context.Background()
	addr, srv := startServer(t, object.NewMemService(), ServerOptions{MaxConns: 2})
	a, b := dial(t, addr), dial(t, addr)
	_, err := DialConn(ctx, addr, withKey(ConnOptions{}))
	if CodeOf(err) != CodeUnavailable || !strings.Contains(err.Error(), "too many connections") {
		t.Fatalf("a third connection: %v", err)
	}
	if srv.Stats().Refused != 1 {
		t.Fatalf("refused %d", srv.Stats().Refused)
	}
	for _, c := range []*Conn{a, b} {
		if _, err := c.ListSpaces(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTLS: a TLS port serves TLS clients (whose handshake is bound to the
// TLS session); a plain client is told TLS is required, and a TLS client
// of a plain port is told the port does not speak TLS.
func TestTLS(t *testing.T) {
	ctx := context.Background()
	ca, err := auth.NewCA("test", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	key, _ := auth.NewNodeKey()
	certPEM, _ := ca.IssueNode(&key.PublicKey, 1, []string{"127.0.0.1"}, time.Now())
	keyPEM, _ := auth.KeyPEM(key)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := startServer(t, object.NewMemService(), ServerOptions{TLS: &tls.Config{Certificates: []tls.Certificate{cert}}})
	c, err := DialConn(ctx, addr, withKey(ConnOptions{TLS: &tls.Config{RootCAs: ca.Pool()}}))
	if err != nil {
		t.Fatalf("TLS client: %v", err)
	}
	defer c.Close()
	if _, err := c.CreateSpace(ctx, "over-tls", object.SpaceSettings{}); err != nil {
		t.Fatal(err)
	}
	_, err = DialConn(ctx, addr, withKey(ConnOptions{}))
	if CodeOf(err) != CodeTLSRequired {
		t.Fatalf("plain client of a TLS port: %v", err)
	}
	_, err = DialConn(ctx, addr, withKey(ConnOptions{TLS: &tls.Config{}}))
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("TLS client that does not trust the server: %v", err)
	}
	plain, _ := startServer(t, object.NewMemService(), ServerOptions{})
	_, err = DialConn(ctx, plain, withKey(ConnOptions{TLS: &tls.Config{RootCAs: ca.Pool()}}))
	if err == nil || !strings.Contains(err.Error(), "does not speak TLS") {
		t.Fatalf("TLS client of a plain port: %v", err)
	}
}

// TestServerProof: a client refuses a server that cannot prove it holds
// the key's secret (one that accepts any proof).
func TestServerProof(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		nc, err := l.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		br := bufio.NewReader(nc)
		var hb [HeaderLen]byte
		for {
			h, _, err := ReadFrame(br, hb[:], DefaultMaxFrame)
			if err != nil {
				return
			}
			var body []byte
			switch h.Op {
			case OpPing:
				body = AppendPingInfo(nil, PingInfo{MaxFrame: DefaultMaxFrame, MaxInflight: 256})
			case OpHello:
				n := auth.NewNonce()
				body = n[:]
			case OpAuth:
				body = AppendAuthResult(nil, &AuthResult{ClusterAdmin: true})
			}
			nc.Write(AppendFrame(nil, h.Op, FlagResponse, h.ID, body))
		}
	}()
	_, err = DialConn(context.Background(), l.Addr().String(), withKey(ConnOptions{}))
	if CodeOf(err) != CodeUnauthenticated || !strings.Contains(err.Error(), "did not prove") {
		t.Fatalf("a server that accepts any proof: %v", err)
	}
}

// FuzzHandshake sends arbitrary frames to a server before any valid
// authentication: it must never panic, never answer anything but PING,
// HELLO and errors, and never run a request.
func FuzzHandshake(f *testing.F) {
	tr := auth.Transcript{Mech: 1, Access: testAccess, Client: auth.NewNonce()}
	hello := AppendHello(nil, &HelloRequest{Mech: 1, Access: testAccess, Nonce: tr.Client})
	p := auth.ClientProof(testSecret, &tr)
	f.Add(AppendFrame(AppendFrame(nil, OpHello, 0, 1, hello), OpAuth, 0, 2, p[:]))
	f.Add(AppendFrame(nil, OpAuth, 0, 1, make([]byte, 32)))
	f.Add(AppendFrame(nil, OpCreateSpace, 0, 1, AppendCreateSpace(nil, "fuzz", &object.SpaceSettings{})))
	f.Add(AppendFrame(AppendFrame(nil, OpHello, 0, 1, []byte{1, 3, 'a', 'b', 'c'}), OpPing, 0, 2, nil))
	f.Fuzz(handshakeOnce)
}

// handshakeOnce is one run of FuzzHandshake.
func handshakeOnce(t *testing.T, in []byte) {
	svc := object.NewMemService()
	s := NewServer(svc, ServerOptions{Keys: testKeys(), HandshakeTimeout: time.Second, IdleTimeout: time.Second})
	cli, srvEnd := net.Pipe()
	l := &oneConnListener{c: srvEnd, done: make(chan struct{})}
	go s.Serve(l)
	// A last PING marks the end of the input: its answer (or the
	// connection closing) says the server has read everything. The input
	// is cut after its last whole frame, so that the PING is not taken
	// as the rest of a body (a frame left unfinished is TestDeadlines').
	const last = 0xFFFFFFFF
	whole := 0
	for whole+HeaderLen <= len(in) {
		h := ParseHeader(in[whole:])
		if h.Version != Version {
			whole = len(in) // the server closes the connection here
			break
		}
		if uint64(whole+HeaderLen)+uint64(h.Len) > uint64(len(in)) {
			break
		}
		whole += HeaderLen + int(h.Len)
	}
	go func() {
		cli.SetWriteDeadline(time.Now().Add(time.Second))
		// A copy: appending to in would write into the fuzzer's buffer.
		cli.Write(AppendFrame(bytes.Clone(in[:whole]), OpPing, 0, last, nil))
	}()
	cli.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	br := bufio.NewReader(cli)
	var hb [HeaderLen]byte
	for {
		h, _, err := ReadFrame(br, hb[:], 64<<20)
		if err != nil {
			break
		}
		if h.Flags&FlagError == 0 && h.Op != OpPing && h.Op != OpHello {
			t.Fatalf("unauthenticated %s answered without an error", h.Op)
		}
		if h.Op == OpPing && h.ID == last {
			break
		}
	}
	cli.Close()
	s.Close()
	if l, _ := svc.ListSpaces(context.Background()); len(l) != 0 {
		t.Fatalf("an unauthenticated connection created %+v", l)
	}
}

// oneConnListener hands out one connection, then blocks until closed.
type oneConnListener struct {
	c    net.Conn
	done chan struct{}
	took bool
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	if !l.took {
		l.took = true
		return l.c, nil
	}
	<-l.done
	return nil, net.ErrClosed
}

func (l *oneConnListener) Close() error {
	select {
	case <-l.done:
	default:
		close(l.done)
	}
	return nil
}

func (l *oneConnListener) Addr() net.Addr { return l.c.LocalAddr() }

// TestUnauthenticatedServer: a server without keys (tests of the protocol
// alone) answers HELLO and AUTH with an error instead of failing.
func TestUnauthenticatedServer(t *testing.T) {
	addr, _ := startServer(t, object.NewMemService(), ServerOptions{AllowUnauthenticated: true})
	r := rawDialPlain(t, addr)
	if _, err := r.tryLogin(testAccess, testSecret); CodeOf(err) != CodeInvalidArgument {
		t.Fatalf("HELLO to a server without keys: %v", err)
	}
	r.send(OpListSpaces, 0, 9, nil)
	if h, _ := r.read(); h.Flags&FlagError != 0 {
		t.Fatal("a server without keys refused a request")
	}
}

// BenchmarkAuthentication measures what authentication adds per request:
// 1 KiB GETs and PUTs on a connection that authenticated (every request
// checked against its key's grants) and on one of a server that takes
// none, and the handshake itself (a connection dialled, PING, HELLO,
// AUTH, closed). A second server in the same process slows the first, so
// compare the two in separate processes, alternating:
//
//	for i in 1 2 3 4 5 6; do for a in off on; do
//	  go test ./internal/wire -run '^$' -bench "Authentication/auth=$a/" -count 1
//	done; done | benchstat -col /auth -
func BenchmarkAuthentication(b *testing.B) {
	ctx := context.Background()
	for _, on := range []bool{false, true} {
		name := "auth=off"
		if on {
			name = "auth=on"
		}
		b.Run(name, func(b *testing.B) {
			svc := object.NewMemService()
			addr, _ := startServer(b, svc, ServerOptions{AllowUnauthenticated: !on})
			o := ConnOptions{}
			if on {
				o = withKey(o)
			}
			c, err := DialConn(ctx, addr, o)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			if _, err := c.CreateSpace(ctx, "s", object.SpaceSettings{}); err != nil {
				b.Fatal(err)
			}
			data := make([]byte, 1024)
			if _, err := c.PutBytes(ctx, &object.PutRequest{Space: "s", Key: "k"}, data); err != nil {
				b.Fatal(err)
			}
			b.Run("op=get", func(b *testing.B) {
				b.ReportAllocs()
				req := &object.GetRequest{Space: "s", Key: "k", Length: -1}
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if _, got, err := c.GetBytes(ctx, req); err != nil || len(got) != 1024 {
							b.Error(err)
							return
						}
					}
				})
			})
			b.Run("op=put", func(b *testing.B) {
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if _, err := c.PutBytes(ctx, &object.PutRequest{Space: "s", Key: "p"}, data); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
			b.Run("op=dial", func(b *testing.B) {
				for b.Loop() {
					d, err := DialConn(ctx, addr, o)
					if err != nil {
						b.Fatal(err)
					}
					d.Close()
				}
			})
		})
	}
}
