package cluster

import (
	"context"
	"errors"
	"net"
	"testing"

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
