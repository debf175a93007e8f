package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cairn-db/cairn/client"
	"github.com/cairn-db/cairn/internal/tstamp"
	"github.com/cairn-db/cairn/internal/wire"
)

const shellHelp = `Commands (case-insensitive):
  PUT KEY VALUE...   write VALUE under KEY in the current space
  GET KEY            print the latest value of KEY
  DEL KEY            delete KEY (writes a delete marker)
  USE SPACE          switch the current space (created if missing)
  any cairn verb     e.g. ls SPACE, stat SPACE/KEY, versions SPACE/KEY,
                     put SPACE/KEY FILE, space ls
  help, quit
`

func newShellCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "shell",
		Short: "Interactive shell: PUT k v / GET k / DEL k, plus every cairn verb",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sh, err := dialShell(cmd)
			if err != nil {
				return err
			}
			defer sh.c.Close()
			sh.interactive = isTerminal(os.Stdin)
			return sh.run(cmd.InOrStdin())
		},
	}
	cmd.Flags().String("space", "shell", "current space for PUT/GET/DEL (created if missing)")
	return cmd
}

// dialShell connects a shell as cmd's flags say (--space, and how to
// connect); the caller closes its client.
func dialShell(cmd *cobra.Command) (*shell, error) {
	space, _ := cmd.Flags().GetString("space")
	o, err := clientOptions(cmd)
	if err != nil {
		return nil, err
	}
	c, err := client.DialOptions(cmd.Context(), o)
	if err != nil {
		return nil, err
	}
	return &shell{cmd: cmd, c: c, space: space, addrs: strings.Join(o.Addrs, ","), out: cmd.OutOrStdout()}, nil
}

type shell struct {
	cmd         *cobra.Command
	c           *client.Client
	addrs       string // the servers, as --server takes them
	space       string
	ensured     bool
	out         io.Writer
	interactive bool
	tx          *client.Txn // the open transaction (BEGIN), or nil
}

func (sh *shell) run(in io.Reader) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	if sh.interactive {
		fmt.Fprintf(sh.out, "cairn shell on %s, space %q; type help\n", sh.addrs, sh.space)
	}
	for {
		if sh.interactive {
			if sh.tx != nil {
				fmt.Fprintf(sh.out, "%s(txn)> ", sh.space)
			} else {
				fmt.Fprintf(sh.out, "%s> ", sh.space)
			}
		}
		if !sc.Scan() {
			if sh.tx != nil {
				_ = sh.tx.Rollback(sh.cmd.Context())
				fmt.Fprintln(sh.out, "ROLLBACK (the input ended inside a transaction)")
			}
			return sc.Err()
		}
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		quit, err := sh.exec(line)
		if err != nil {
			fmt.Fprintln(sh.out, "error:", describe(err))
		}
		if quit {
			return nil
		}
	}
}

func (sh *shell) ensureSpace() error {
	if sh.ensured {
		return nil
	}
	_, err := sh.c.CreateSpace(sh.cmd.Context(), sh.space, client.SpaceSettings{})
	if err != nil && !errors.Is(err, wire.ErrSpaceExists) {
		return err
	}
	sh.ensured = true
	return nil
}

// exec runs one line. The FilelogKV forms (PUT/GET/DEL with a key that has
// no '/') act on the current space; anything else is a cairn verb.
func (sh *shell) exec(line string) (quit bool, err error) {
	args, err := splitArgs(line)
	if err != nil {
		return false, err
	}
	verb := strings.ToLower(args[0])
	ctx := sh.cmd.Context()
	simple := len(args) >= 2 && !strings.Contains(args[1], "/")
	switch {
	case verb == "quit" || verb == "exit":
		if sh.tx != nil {
			_ = sh.tx.Rollback(ctx)
			fmt.Fprintln(sh.out, "ROLLBACK (the open transaction ends with the shell)")
		}
		return true, nil
	case verb == "help":
		fmt.Fprint(sh.out, shellHelp+shellTxnHelp)
		return false, nil
	}
	if handled, err := sh.txnVerb(args); handled {
		return false, err
	}
	switch {
	case verb == "use" && len(args) == 2:
		sh.space, sh.ensured = args[1], false
		return false, sh.ensureSpace()
	case verb == "put" && simple && len(args) >= 3:
		if err := sh.ensureSpace(); err != nil {
			return false, err
		}
		info, err := sh.c.Put(ctx, sh.space, args[1], []byte(strings.Join(args[2:], " ")))
		if err != nil {
			return false, err
		}
		fmt.Fprintf(sh.out, "OK %s\n", tstamp.String(info.Version))
		return false, nil
	case verb == "get" && simple && len(args) == 2:
		data, _, err := sh.c.Get(ctx, sh.space, args[1])
		if errors.Is(err, wire.ErrNotFound) {
			fmt.Fprintln(sh.out, "(not found)")
			return false, nil
		}
		if err != nil {
			return false, err
		}
		fmt.Fprintf(sh.out, "%s\n", data)
		return false, nil
	case verb == "del" && len(args) == 2:
		space, key := sh.space, args[1]
		if !simple {
			space, key, _ = strings.Cut(args[1], "/")
		}
		info, err := sh.c.Delete(ctx, space, key)
		if err != nil {
			return false, err
		}
		fmt.Fprintf(sh.out, "OK %s\n", tstamp.String(info.Version))
		return false, nil
	}
	if verb == "shell" || verb == "server" {
		return false, fmt.Errorf("%s cannot run inside the shell", verb)
	}
	root := newRoot()
	args[0] = verb
	root.SetArgs(append(append(args, "--server", sh.addrs), connectionFlags(sh.cmd)...))
	root.SetOut(sh.out)
	root.SetErr(sh.out)
	root.SetIn(strings.NewReader(""))
	return false, root.ExecuteContext(ctx)
}

// connectionFlags are the flags of cmd that say how to connect (but
// --server), as given: a verb the shell runs connects as the shell did.
func connectionFlags(cmd *cobra.Command) []string {
	var out []string
	for _, name := range []string{"access-key", "secret-key", "profile", "ca", "tls"} {
		if f := cmd.Flags().Lookup(name); f != nil && f.Changed {
			out = append(out, "--"+name+"="+f.Value.String())
		}
	}
	return out
}

// splitArgs splits a line into words, honouring "double" and 'single'
// quotes and backslash escapes.
func splitArgs(line string) ([]string, error) {
	var (
		args  []string
		cur   strings.Builder
		quote rune
		in    bool
		esc   bool
	)
	for _, r := range line {
		switch {
		case esc:
			cur.WriteRune(r)
			esc = false
		case r == '\\' && quote != '\'':
			esc, in = true, true
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '"' || r == '\'':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				args = append(args, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if quote != 0 || esc {
		return nil, errors.New("unterminated quote or escape")
	}
	if in {
		args = append(args, cur.String())
	}
	if len(args) == 0 {
		return nil, errors.New("empty command")
	}
	return args, nil
}
