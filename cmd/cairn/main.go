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
	pf := root.PersistentFlags()
	pf.String("server", "", "native protocol address of a node, or a comma-separated list of a cluster's nodes (default $CAIRN_SERVER, the profile's server, or 127.0.0.1:7070)")
	pf.String("access-key", "", "access key to authenticate with (default $CAIRN_ACCESS_KEY, else the credentials file's profile)")
	pf.String("secret-key", "", "its secret (prefer $CAIRN_SECRET_KEY or the credentials file: flags show in the process list)")
	pf.String("profile", "", "profile of the credentials file ~/.config/cairn/credentials (default $CAIRN_PROFILE, else default)")
	pf.String("ca", "", "connect with TLS, verifying the server with this PEM CA certificate (default $CAIRN_CA, else the profile's ca_file)")
	pf.Bool("tls", false, "connect with TLS, verifying the server with the system's roots")
	root.AddCommand(
		newServerCmd(),
		newPutCmd(), newGetCmd(), newCatCmd(), newRmCmd(), newStatCmd(),
		newVersionsCmd(), newLsCmd(), newSpaceCmd(), newCloneCmd(), newLineageCmd(), newDiffCmd(), newSnapshotCmd(), newBranchCmd(),
		newQueryCmd(), newWatchCmd(), newSQLCmd(), newShellCmd(), newTxnCmd(), newReplayCmd(), newBenchCmd(), newClusterCmd(), newGCCmd(), newNodeCmd(), newKeyCmd(), newKMSCmd(),
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
	var ce conflictError
	if errors.As(err, &ce) {
		return 3
	}
	return 1
}

// describe adds what to do next to the errors a user most often meets.
func describe(err error) string {
	msg := err.Error()
	switch wire.CodeOf(err) {
	case wire.CodeSpaceNotFound, wire.CodeNotFound, wire.CodeBadSpaceName, wire.CodeKeyTooLong:
		return msg
	case wire.CodeUnauthenticated:
		return msg + "\n  (check the key: --access-key/--secret-key, CAIRN_ACCESS_KEY/CAIRN_SECRET_KEY, or --profile of ~/.config/cairn/credentials)"
	}
	var ne interface{ Timeout() bool }
	if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.ECONNREFUSED) {
		return msg + "\n  (is a server running? start one with `cairn server`, or point to one with --server or CAIRN_SERVER)"
	}
	return msg
}
