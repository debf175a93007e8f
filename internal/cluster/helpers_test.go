package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/cairn-db/cairn/client"
	"github.com/cairn-db/cairn/internal/meta"
	"github.com/cairn-db/cairn/internal/testenv"
	"github.com/cairn-db/cairn/internal/wire"
)

// openStarted opens a node and starts its background work, as the node
// package's Open does.
func openStarted(ctx context.Context, cfg Config) (*Node, error) {
	n, err := Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	n.Start()
	return n, nil
}

// serveNative serves the native protocol over n at the address its
// config advertises (Config.NativeAddr), as the node package does, for
// tests that drive a node through the Go client.
func serveNative(t testing.TB, n *Node) { serveNativeMetrics(t, n, nil) }

// serveNativeMetrics is serveNative with the server's requests observed
// by m.
func serveNativeMetrics(t testing.TB, n *Node, m wire.Metrics) {
	t.Helper()
	l, err := net.Listen("tcp", n.cfg.NativeAddr)
	if err != nil {
		t.Fatal(err)
	}
	srv := wire.NewServer(n, wire.ServerOptions{Logger: n.log, Keys: n.Keyring(), Metrics: m})
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(l); err != nil && !errors.Is(err, wire.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
			t.Errorf("native server: %v", err)
		}
	}()
	t.Cleanup(func() {
		srv.Close()
		<-done
	})
}

// nativeNode opens a node in memory that serves the native protocol on
// a free loopback port (its requests observed by m, if not nil), and a
// Go client of it with the root key; both close with the test.
func nativeNode(t testing.TB, m wire.Metrics) (*Node, *client.Client) {
	t.Helper()
	ctx := context.Background()
	cfg := testConfig(vfs.NewMem(), meta.NewMemStore(time.Now))
	cfg.NativeAddr = fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	n, err := openStarted(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	serveNativeMetrics(t, n, m)
	root := n.RootKey()
	c, err := client.DialOptions(ctx, client.Options{Addrs: []string{cfg.NativeAddr}, AccessKey: root.Access, SecretKey: root.Secret})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return n, c
}
