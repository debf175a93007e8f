package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairn-db/cairn/client"
	"github.com/cairn-db/cairn/internal/wire"
)

func newReplayCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "replay TRACE",
		Short: "Run a trace of PUT k v / GET k / DEL k lines and report throughput and latency",
		Long: `Replay a trace file: one request per line, "PUT KEY VALUE", "GET KEY" or
"DEL KEY" (case-insensitive; blank lines and # comments are skipped), in
order, against the current space. Prints throughput and p50/p99 latency per
operation. A malformed line stops the replay before any request is sent.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			space, _ := cmd.Flags().GetString("space")
			ops, err := readTrace(args[0])
			if err != nil {
				return usageError{err}
			}
			c, err := dial(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			ctx := cmd.Context()
			if _, err := c.CreateSpace(ctx, space, client.SpaceSettings{}); err != nil && !errors.Is(err, wire.ErrSpaceExists) {
				return err
			}
			lat := map[string]latencies{}
			misses := 0
			start := time.Now()
			for _, op := range ops {
				t0 := time.Now()
				switch op.verb {
				case "PUT":
					_, err = c.Put(ctx, space, op.key, []byte(op.value))
				case "GET":
					_, _, err = c.Get(ctx, space, op.key)
					if errors.Is(err, wire.ErrNotFound) {
						misses, err = misses+1, nil
					}
				case "DEL":
					_, err = c.Delete(ctx, space, op.key)
				}
				if err != nil {
					return fmt.Errorf("line %d (%s %s): %w", op.line, op.verb, op.key, err)
				}
				lat[op.verb] = append(lat[op.verb], time.Since(t0))
			}
			elapsed := time.Since(start)
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintf(w, "op\tcount\tp50 ms\tp99 ms\t\n")
			for _, v := range []string{"PUT", "GET", "DEL"} {
				if s := lat[v].sorted(); len(s) > 0 {
					fmt.Fprintf(w, "%s\t%d\t%.3f\t%.3f\t\n", v, len(s), ms(s.pct(0.50)), ms(s.pct(0.99)))
				}
			}
			w.Flush()
			fmt.Fprintf(cmd.OutOrStdout(), "%d requests in %s: %.0f ops/s (%d GETs found nothing)\n",
				len(ops), elapsed.Round(time.Millisecond), float64(len(ops))/elapsed.Seconds(), misses)
			return nil
		},
	}
	cmd.Flags().String("space", "replay", "space the trace runs against (created if missing)")
	return cmd
}

type traceOp struct {
	line             int
	verb, key, value string
}

func readTrace(path string) ([]traceOp, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var ops []traceOp
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for ln := 1; sc.Scan(); ln++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		op := traceOp{line: ln, verb: strings.ToUpper(fields[0])}
		switch {
		case op.verb == "PUT" && len(fields) >= 3:
			op.key = fields[1]
			// The value is the rest of the line, spaces included.
			op.value = strings.TrimSpace(line[len(fields[0]):])
			op.value = strings.TrimSpace(op.value[len(fields[1]):])
		case (op.verb == "GET" || op.verb == "DEL") && len(fields) == 2:
			op.key = fields[1]
		default:
			return nil, fmt.Errorf("%s:%d: %q is not PUT KEY VALUE, GET KEY or DEL KEY", path, ln, line)
		}
		ops = append(ops, op)
	}
	return ops, sc.Err()
}
