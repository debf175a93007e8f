// Command cairn is the one Cairn binary: the server, the CLI verbs, the
// interactive shell, trace replay and the load generator.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/cairn-db/cairn/internal/wire"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRoot()
	if err := root.ExecuteContext(ctx); err != nil {
		msg := describe(err)
		if !strings.HasPrefix(msg, "cairn: ") {
			msg = "cairn: " + msg
		}
		fmt.Fprintln(os.Stderr, msg)
		os.Exit(exitCode(err))
	}
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "cairn",
		Short:         "Cairn: a distributed, versioned, transactional object store",
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.PersistentFlags().String("server", "", "native protocol address of a node, or a comma-separated list of a cluster's nodes (default $CAIRN_SERVER or 127.0.0.1:7070)")
	root.AddCommand(
		newServerCmd(),
		newPutCmd(), newGetCmd(), newCatCmd(), newRmCmd(), newStatCmd(),
		newVersionsCmd(), newLsCmd(), newSpaceCmd(),
		newShellCmd(), newReplayCmd(), newBenchCmd(), newClusterCmd(), newNodeCmd(), newKeyCmd(),
	)
	return root
}

// usageError marks errors in how the command was called (exit code 2).
type usageError struct{ error }

func exitCode(err error) int {
	var ue usageError
	if errors.As(err, &ue) {
		return 2
	}
	return 1
}

// describe adds what to do next to the errors a user most often meets.
func describe(err error) string {
	msg := err.Error()
	switch wire.CodeOf(err) {
	case wire.CodeSpaceNotFound, wire.CodeNotFound, wire.CodeBadSpaceName, wire.CodeKeyTooLong:
		return msg
	}
	var ne interface{ Timeout() bool }
	if errors.As(err, &ne) || errors.Is(err, syscall.ECONNREFUSED) {
		return msg + "\n  (is a server running? start one with `cairn server`, or point to one with --server or CAIRN_SERVER)"
	}
	return msg
}
