package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/cairn-db/cairn/client"
	"github.com/cairn-db/cairn/internal/tstamp"
)

func newWatchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "watch SPACE",
		Short: "Print a space's changes as they are committed",
		Long: `Print every version committed to SPACE, in commit order, as it happens:
its version, its key, and "deleted" for a delete marker (one line each;
--json: one JSON object each; the last of each page of changes carries
the cursor that resumes after it).
Starts from now, from --from (a time or a version id: the changes after
it), or from --cursor (where an earlier watch stopped). Ctrl-C stops it.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f := cmd.Flags()
			asJSON, _ := f.GetBool("json")
			cursor, _ := f.GetString("cursor")
			req := client.WatchRequest{Space: args[0], Cursor: cursor}
			if from, _ := f.GetString("from"); from != "" {
				if cursor != "" {
					return usageError{fmt.Errorf("--from and --cursor: give one")}
				}
				v, err := parseAsOf(from)
				if err != nil {
					return err
				}
				req.From = v
			}
			c, err := dial(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			ctx := cmd.Context()
			// The first page fixes the start (from now, or --from), then
			// the watch runs from its cursor.
			first, err := c.WatchPage(ctx, req)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			enc := json.NewEncoder(out)
			print := func(ev client.WatchEvent, cursor string) error {
				if asJSON {
					return enc.Encode(struct {
						Key          string `json:"key"`
						Version      string `json:"version"`
						DeleteMarker bool   `json:"delete_marker,omitempty"`
						Cursor       string `json:"cursor,omitempty"`
					}{ev.Key, tstamp.String(ev.Version), ev.DeleteMarker, cursor})
				}
				what := ""
				if ev.DeleteMarker {
					what = "  deleted"
				}
				_, err := fmt.Fprintf(out, "%s  %s%s\n", tstamp.String(ev.Version), ev.Key, what)
				return err
			}
			for i, ev := range first.Events {
				c := ""
				if i == len(first.Events)-1 {
					c = first.Next
				}
				if err := print(ev, c); err != nil {
					return err
				}
			}
			err = c.Watch(ctx, args[0], first.Next, print)
			if ctx.Err() != nil {
				return nil // stopped
			}
			return err
		},
	}
	cmd.Flags().String("from", "", "print the changes after this time (RFC 3339) or version id")
	cmd.Flags().String("cursor", "", "resume where a watch stopped (the cursor --json printed)")
	cmd.Flags().Bool("json", false, "one JSON object a change, with its cursor")
	return cmd
}
