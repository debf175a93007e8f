package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cairn-db/cairn/client"
	"github.com/cairn-db/cairn/internal/tstamp"
	"github.com/cairn-db/cairn/internal/wire"
)

// Transactions in the shell (BEGIN ... COMMIT | ROLLBACK) and `cairn txn`,
// which runs a file of shell lines as one transaction.

const shellTxnHelp = `Transactions:
  BEGIN [SERIALIZABLE]   start one; the lines until COMMIT or ROLLBACK join it
  COMMIT                 apply every write of it, or none
  ROLLBACK               drop it
  Inside one: PUT/GET/DEL (current space or SPACE/KEY), put SPACE/KEY FILE,
  cat|get SPACE/KEY, stat SPACE/KEY, rm SPACE/KEY, ls SPACE[/PREFIX].
`

func newTxnCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "txn [--serializable] FILE|-",
		Short: "Run a file of shell lines as one transaction and say whether it committed",
		Long: `Runs the lines of FILE (or standard input) — shell commands such as
PUT KEY VALUE, GET KEY, DEL KEY, put SPACE/KEY FILE, cat SPACE/KEY,
rm SPACE/KEY, ls SPACE — as one transaction: every write applies, or none.
If a line fails, nothing is written. A transaction that loses a conflict
with another writer (exit code 3) did nothing and may be run again.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var in io.Reader = cmd.InOrStdin()
			if args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return err
				}
				defer f.Close()
				in = f
			}
			script, err := io.ReadAll(in)
			if err != nil {
				return err
			}
			ser, _ := cmd.Flags().GetBool("serializable")
			sh, err := dialShell(cmd)
			if err != nil {
				return err
			}
			defer sh.c.Close()
			return sh.runTxn(string(script), ser)
		},
	}
	cmd.Flags().Bool("serializable", false, "validate every read at commit (no write skew)")
	cmd.Flags().String("space", "shell", "current space for PUT/GET/DEL (created if missing)")
	return cmd
}

// conflictError marks a transaction that lost a conflict (exit code 3).
type conflictError struct{ error }

// runTxn runs script's lines as one transaction.
func (sh *shell) runTxn(script string, serializable bool) error {
	ctx := sh.cmd.Context()
	if err := sh.begin(ctx, serializable, false); err != nil {
		return err
	}
	for i, line := range strings.Split(script, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if f := strings.Fields(line); len(f) > 0 && slices.Contains([]string{"begin", "commit", "rollback", "quit", "exit"}, strings.ToLower(f[0])) {
			_ = sh.tx.Rollback(context.WithoutCancel(ctx))
			sh.tx = nil
			return usageError{fmt.Errorf("line %d (%s): the file is one transaction: no BEGIN, COMMIT, ROLLBACK or QUIT in it; nothing was written", i+1, line)}
		}
		if _, err := sh.exec(line); err != nil {
			_ = sh.tx.Rollback(context.WithoutCancel(ctx))
			sh.tx = nil
			return fmt.Errorf("line %d (%s): %w; rolled back: nothing was written", i+1, line, err)
		}
	}
	tx := sh.tx
	sh.tx = nil
	if err := tx.Commit(ctx); err != nil {
		if client.Retryable(err) {
			return conflictError{fmt.Errorf("not committed: %w\n  (nothing was written; run it again)", err)}
		}
		return fmt.Errorf("not committed: %w", err)
	}
	fmt.Fprintf(sh.out, "committed at %s\n", tstamp.String(tx.CommitTS()))
	return nil
}

// begin starts the shell's transaction.
func (sh *shell) begin(ctx context.Context, serializable, say bool) error {
	if sh.tx != nil {
		return errors.New("a transaction is open: COMMIT or ROLLBACK it first")
	}
	var opts []client.TxnOption
	if serializable {
		opts = append(opts, client.Serializable())
	}
	tx, err := sh.c.Begin(ctx, opts...)
	if err != nil {
		return err
	}
	sh.tx = tx
	if say {
		fmt.Fprintf(sh.out, "BEGIN (snapshot %s)\n", tstamp.String(tx.StartTS()))
	}
	return nil
}

// txnVerb runs the transaction verbs and, inside a transaction, every
// verb that may join it. handled is false for a line it leaves to exec.
func (sh *shell) txnVerb(args []string) (handled bool, err error) {
	ctx := sh.cmd.Context()
	verb := strings.ToLower(args[0])
	switch verb {
	case "begin":
		if len(args) > 2 || len(args) == 2 && !strings.EqualFold(args[1], "serializable") {
			return true, errors.New("usage: BEGIN [SERIALIZABLE]")
		}
		return true, sh.begin(ctx, len(args) == 2, true)
	case "commit":
		if sh.tx == nil {
			return true, errors.New("no transaction: BEGIN one first")
		}
		tx := sh.tx
		sh.tx = nil
		if err := tx.Commit(ctx); err != nil {
			if client.Retryable(err) {
				return true, fmt.Errorf("not committed: %w (nothing was written; run it again)", err)
			}
			return true, fmt.Errorf("not committed: %w", err)
		}
		fmt.Fprintf(sh.out, "COMMIT %s\n", tstamp.String(tx.CommitTS()))
		return true, nil
	case "rollback":
		if sh.tx == nil {
			return true, errors.New("no transaction: BEGIN one first")
		}
		err := sh.tx.Rollback(ctx)
		sh.tx = nil
		if err == nil {
			fmt.Fprintln(sh.out, "ROLLBACK")
		}
		return true, err
	}
	if sh.tx == nil || verb == "use" {
		return false, nil
	}
	tx := sh.tx
	// target resolves KEY (the current space) or SPACE/KEY.
	target := func(a string) (string, string, error) {
		if !strings.Contains(a, "/") {
			return sh.space, a, sh.ensureSpace()
		}
		return splitTarget(a, true)
	}
	switch {
	case verb == "put" && len(args) >= 3 && !strings.Contains(args[1], "/"):
		space, key, err := target(args[1])
		if err != nil {
			return true, err
		}
		if err := tx.Put(ctx, space, key, []byte(strings.Join(args[2:], " "))); err != nil {
			return true, err
		}
		fmt.Fprintln(sh.out, "OK (at commit)")
		return true, nil
	case verb == "put" && len(args) == 3:
		space, key, err := target(args[1])
		if err != nil {
			return true, err
		}
		data, err := os.ReadFile(args[2])
		if err != nil {
			return true, err
		}
		if err := tx.Put(ctx, space, key, data); err != nil {
			return true, err
		}
		fmt.Fprintf(sh.out, "OK %d bytes (at commit)\n", len(data))
		return true, nil
	case (verb == "get" || verb == "cat") && len(args) == 2:
		space, key, err := target(args[1])
		if err != nil {
			return true, err
		}
		data, _, err := tx.Get(ctx, space, key)
		if errors.Is(err, wire.ErrNotFound) && verb == "get" {
			fmt.Fprintln(sh.out, "(not found)")
			return true, nil
		}
		if err != nil {
			return true, err
		}
		if verb == "get" {
			fmt.Fprintf(sh.out, "%s\n", data)
		} else {
			_, err = sh.out.Write(data)
		}
		return true, err
	case verb == "stat" && len(args) == 2:
		space, key, err := target(args[1])
		if err != nil {
			return true, err
		}
		info, err := tx.Stat(ctx, space, key)
		if err != nil {
			return true, err
		}
		v := "(written in this transaction)"
		if info.Version != 0 {
			v = tstamp.String(info.Version)
		}
		fmt.Fprintf(sh.out, "%s/%s %d bytes, version %s\n", space, key, info.Size, v)
		return true, nil
	case (verb == "del" || verb == "rm") && len(args) == 2:
		space, key, err := target(args[1])
		if err != nil {
			return true, err
		}
		if err := tx.Delete(ctx, space, key); err != nil {
			return true, err
		}
		fmt.Fprintln(sh.out, "OK (at commit)")
		return true, nil
	case verb == "ls" && len(args) == 2:
		space, prefix, _ := strings.Cut(args[1], "/")
		o := client.ListOptions{Prefix: prefix}
		for {
			res, err := tx.List(ctx, space, o)
			if err != nil {
				return true, err
			}
			for _, obj := range res.Objects {
				fmt.Fprintf(sh.out, "%10d  %s\n", obj.Size, obj.Key)
			}
			if !res.Truncated {
				return true, nil
			}
			o.StartAfter = res.Next
		}
	}
	return true, fmt.Errorf("%s cannot run inside a transaction: COMMIT or ROLLBACK first", args[0])
}
