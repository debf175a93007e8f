package node

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/cairn-db/cairn/internal/cluster"
	"github.com/cairn-db/cairn/internal/meta"
)

// TestCloseWithoutServe: a node opened and closed without serving frees
// its native protocol, HTTP and peer ports.
func TestCloseWithoutServe(t *testing.T) {
	n, err := Open(context.Background(), Config{
		Config: cluster.Config{DataDir: "data", FS: vfs.NewMem(), Meta: meta.NewMemStore(time.Now),
			MetaPort: -1, PeerPort: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
		NativePort: -1, HTTPPort: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	addrs := []string{n.NativeAddr(), n.HTTPAddr(), n.PeerAddr()}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		l, err := net.Listen("tcp", a)
		if err != nil {
			t.Fatalf("port %s still bound after Close: %v", a, err)
		}
		l.Close()
	}
}

// TestConfigValidation: the node's own settings are checked with the
// cluster's, every problem at once.
func TestConfigValidation(t *testing.T) {
	c := Config{NativePort: 70000, IdleTimeout: time.Millisecond}
	c.TLSCertFile = "cert.pem"
	c.Config.DefaultRanges = 1000
	c.EnsureDefaults()
	err := c.Validate()
	for _, want := range []string{"native port 70000", "TLS certificate and its key", "idle timeout", "default ranges 1000"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("validation error %v does not say %q", err, want)
		}
	}
}
