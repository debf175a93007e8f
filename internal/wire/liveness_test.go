package wire

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/object"
)

// frozenServer accepts one connection, answers the client's first PING (so
// DialConn succeeds) and then neither reads nor answers anything, as a
// paused process does: the TCP connection stays open.
func frozenServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { close(done); l.Close() })
	go func() {
		nc, err := l.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		var hb [HeaderLen]byte
		h, _, err := ReadFrame(bufio.NewReader(nc), hb[:], DefaultMaxFrame)
		if err != nil || h.Op != OpPing {
			return
		}
		nc.Write(AppendFrame(nil, OpPing, FlagResponse, h.ID, AppendPingInfo(nil, PingInfo{MaxFrame: DefaultMaxFrame, MaxInflight: 256})))
		<-done
	}()
	return l.Addr().String()
}

// TestUnresponsiveServer: a request without a deadline to a server that
// went silent fails with ErrConnLost after about Liveness (not never), and
// the connection says why.
func TestUnresponsiveServer(t *testing.T) {
	const live = 300 * time.Millisecond
	c, err := DialConn(context.Background(), frozenServer(t), ConnOptions{Liveness: live})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	_, err = c.Stat(context.Background(), &object.GetRequest{Space: "s", Key: "k"})
	took := time.Since(start)
	if !errors.Is(err, ErrConnLost) || !errors.Is(c.Err(), ErrUnresponsive) {
		t.Fatalf("request to a silent server: %v (connection: %v), want ErrConnLost / ErrUnresponsive", err, c.Err())
	}
	// Not never: the bound is loose, for a loaded machine's scheduling.
	if took < live || took > 30*live {
		t.Fatalf("given up after %v, want between %v and %v", took, live, 30*live)
	}
	t.Logf("given up after %v: %v", took.Round(time.Millisecond), err)
}

// TestSlowServerStaysConnected: a live server whose handler takes several
// times Liveness to answer keeps the connection (it answers the liveness
// PINGs meanwhile, though the one request holds the only in-flight slot),
// and the request succeeds; so does one made after the connection sat
// idle for longer than Liveness.
func TestSlowServerStaysConnected(t *testing.T) {
	// A second: a PING's answer must come within half of it, which a
	// machine loaded by the race detector and other packages' tests did
	// not always manage at 200 ms.
	const live = time.Second
	ctx := context.Background()
	svc := object.NewMemService()
	gate := make(chan struct{})
	svc.Gates["slow"] = gate
	addr, _ := startServer(t, svc, ServerOptions{})
	c, err := DialConn(ctx, addr, withKey(ConnOptions{Liveness: live, MaxInflight: 1}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateSpace(ctx, "s", object.SpaceSettings{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutBytes(ctx, &object.PutRequest{Space: "s", Key: "slow"}, []byte("slow")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * live) // idle
	time.AfterFunc(3*live, func() { close(gate) })
	_, data, err := c.GetBytes(ctx, &object.GetRequest{Space: "s", Key: "slow", Length: -1})
	if err != nil || string(data) != "slow" {
		t.Fatalf("slow get: %q, %v (connection: %v)", data, err, c.Err())
	}
}

// TestSlowReaderStaysConnected: a caller that stops reading a long GET
// stream for several times Liveness (the connection's reader waits for
// it, reading nothing from the server) does not lose the connection.
func TestSlowReaderStaysConnected(t *testing.T) {
	const live = time.Second
	ctx := context.Background()
	svc := object.NewMemService()
	svc.SinkSize = 16 << 20
	addr, _ := startServer(t, svc, ServerOptions{})
	c, err := DialConn(ctx, addr, withKey(ConnOptions{Liveness: live}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateSpace(ctx, "sink", object.SpaceSettings{}); err != nil {
		t.Fatal(err)
	}
	_, rc, err := c.Get(ctx, &object.GetRequest{Space: "sink", Key: "big", Length: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var b [1]byte
	if _, err := io.ReadFull(rc, b[:]); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * live)
	n, err := io.Copy(io.Discard, rc)
	if err != nil || n != svc.SinkSize-1 {
		t.Fatalf("read %d more bytes after the pause, %v (connection: %v)", n, err, c.Err())
	}
}
