package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairn-db/cairn/client"
	"github.com/cairn-db/cairn/cmd/cairn/internal/config"
	"github.com/cairn-db/cairn/internal/auth"
	"github.com/cairn-db/cairn/internal/node"
)

func newServerCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run a node (with no flags: a complete single-node store in ./cairn-data)",
		Long: `Run a Cairn node. With no flags it is a complete single-node store on
./cairn-data, serving the native protocol on 127.0.0.1:7070 and HTTP
(the S3 API, /healthz, /metrics) on 127.0.0.1:7080. At a new cluster's
first start it makes the root key, prints it once and saves it in the
credentials file (~/.config/cairn/credentials) of the user running it, so
that the CLI works at once.

Another node joins with --join HOST:PEERPORT --token TOKEN, the token made
by cairn cluster token create on any node of the cluster.

Configuration comes from flags, then CAIRN_* environment variables
(CAIRN_DATA_DIR for --data-dir, ...), then the config file (--config or
CAIRN_CONFIG, YAML with the flag names as keys), then defaults.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := config.LoadServer(cmd.Flags(), os.Environ)
			if err != nil {
				return usageError{err}
			}
			cfg, err := s.NodeConfig()
			if err != nil {
				return usageError{err}
			}
			return runServer(cmd.Context(), cfg)
		},
	}
	config.RegisterServerFlags(cmd.Flags())
	return cmd
}

func runServer(ctx context.Context, cfg node.Config) error {
	start := time.Now()
	var made *auth.Key
	cfg.OnRootKey = func(k auth.Key) { made = &k }
	n, err := node.Open(ctx, cfg)
	if err != nil {
		return err
	}
	// The key is saved before the listeners serve: whoever waits for
	// /healthz to answer (a script, a test) then finds it.
	if made != nil {
		showRootKey(n, cfg, *made)
	}
	n.Serve()
	cfg.Logger.Info("cairn node serving",
		"version", version, "node", n.NodeID(), "data", cfg.DataDir,
		"native", n.NativeAddr(), "http", n.HTTPAddr(), "startup", time.Since(start).Round(time.Millisecond))
	sqlNote := ""
	if a := n.SQLAddr(); a != "" {
		sqlNote = ", sql " + a
	}
	fmt.Fprintf(os.Stderr, "cairn: serving %s (native %s, http %s%s); Ctrl-C or SIGTERM stops\n", cfg.DataDir, n.NativeAddr(), n.HTTPAddr(), sqlNote)
	<-ctx.Done()
	cfg.Logger.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := n.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	cfg.Logger.Info("stopped cleanly")
	return nil
}

// showRootKey prints a root key the node just made (the only time it is
// shown) and saves it as the default profile of the local user's
// credentials file, with the node's address (and, with TLS, the
// certificate that verifies it), so that `cairn` works with no extra step.
func showRootKey(n *node.Node, cfg node.Config, k auth.Key) {
	fmt.Fprintf(os.Stderr, "cairn: made the root key (shown only now; it is saved, sealed, in the cluster):\n  access key: %s\n  secret key: %s\n", k.Access, k.Secret)
	path, err := client.CredentialsPath()
	if err != nil {
		fmt.Fprintf(os.Stderr, "cairn: not saved in a credentials file (%v); give the CLI the key with CAIRN_ACCESS_KEY and CAIRN_SECRET_KEY\n", err)
		return
	}
	c := client.Credentials{AccessKey: k.Access, SecretKey: k.Secret, Server: localAddr(n.NativeAddr()),
		Endpoint: "http://" + localAddr(n.HTTPAddr())}
	if cfg.TLSCertFile != "" {
		c.Endpoint = "https://" + localAddr(n.HTTPAddr())
		if abs, err := filepath.Abs(cfg.TLSCertFile); err == nil {
			c.CAFile = abs
		}
	}
	kept, err := client.SaveCredentials(path, client.DefaultProfile, c)
	if err != nil {
		fmt.Fprintf(os.Stderr, "cairn: could not save the key in %s: %v; give the CLI the key with CAIRN_ACCESS_KEY and CAIRN_SECRET_KEY\n", path, err)
		return
	}
	fmt.Fprintf(os.Stderr, "cairn: saved it as the default profile of %s (mode 0600): cairn commands on this machine use it\n", path)
	if kept != "" {
		fmt.Fprintf(os.Stderr, "cairn: the earlier default profile is kept as [%s] (cairn --profile %s)\n", kept, kept)
	}
}

// localAddr is addr with an unspecified host (0.0.0.0, ::) replaced by
// the loopback address: where a CLI on this machine reaches the node.
func localAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}
