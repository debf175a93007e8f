package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairn-db/cairn/internal/config"
	"github.com/cairn-db/cairn/internal/meta"
	"github.com/cairn-db/cairn/internal/node"
)

func newServerCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run a node (with no flags: a complete single-node store in ./cairn-data)",
		Long: `Run a Cairn node. With no flags it is a complete single-node store on
./cairn-data, serving the native protocol on 127.0.0.1:7070 and HTTP
(/healthz, /metrics) on 127.0.0.1:7080.

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
	cfg.OnRootKey = func(k meta.AccessKey) {
		fmt.Fprintf(os.Stderr, "cairn: made the S3 root key (shown only now; it is saved in the cluster):\n  access key: %s\n  secret key: %s\n", k.Access, k.Secret)
	}
	n, err := node.Open(ctx, cfg)
	if err != nil {
		return err
	}
	n.Serve()
	cfg.Logger.Info("cairn node serving",
		"version", version, "node", n.NodeID(), "data", cfg.DataDir,
		"native", n.NativeAddr(), "http", n.HTTPAddr(), "startup", time.Since(start).Round(time.Millisecond))
	fmt.Fprintf(os.Stderr, "cairn: serving %s (native %s, http %s); Ctrl-C or SIGTERM stops\n", cfg.DataDir, n.NativeAddr(), n.HTTPAddr())
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
