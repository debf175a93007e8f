package main

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairn-db/cairn/client"
	"github.com/cairn-db/cairn/internal/tstamp"
)

func newQueryCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "query SPACE FILTER",
		Short: "List the objects of a space a filter matches",
		Long: `List the live objects of SPACE whose latest version (or the one visible at
--as-of) passes FILTER, a CEL expression over key, tags.NAME, meta.NAME,
size, content_type, modified, version_count and doc.PATH (the fields of a
JSON document), for example:

  cairn query photos 'tags.color == "red" && size > 1024'
  cairn query staff 'doc.type == "Employee" && doc.age >= 40' --order-by doc.age
  cairn query logs 'key.startsWith("2026/") && has(tags.error)'

Tag conditions are served by the tag index; the rest of the filter runs on
each range next to the data. Matches come in key order, page by page at
one snapshot (--limit caps them), or ordered by --order-by.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			f := cmd.Flags()
			limit, _ := f.GetInt("limit")
			orderBy, _ := f.GetString("order-by")
			desc, _ := f.GetBool("desc")
			asJSON, _ := f.GetBool("json")
			docs, _ := f.GetBool("docs")
			explain, _ := f.GetBool("explain")
			req := client.QueryRequest{Space: args[0], Filter: args[1], OrderBy: orderBy, Desc: desc, Docs: docs}
			if a, _ := f.GetString("as-of"); a != "" {
				v, err := parseAsOf(a)
				if err != nil {
					return err
				}
				req.AsOf = v
			}
			if limit < 0 {
				return usageError{fmt.Errorf("--limit %d: give a positive number, or 0 for every match", limit)}
			}
			if orderBy != "" && limit == 0 {
				limit = 1000
			}
			c, err := dial(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			out := cmd.OutOrStdout()
			tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
			enc := json.NewEncoder(out)
			printed, pages, examined, ranges := 0, 0, 0, 0
			var plan string
			for {
				req.Limit = 1000
				if limit > 0 {
					req.Limit = uint32(min(limit-printed, 10000))
				}
				res, err := c.Query(cmd.Context(), req)
				if err != nil {
					return err
				}
				pages++
				plan, examined, ranges = res.Plan, examined+res.Examined, ranges+res.Ranges
				for _, o := range res.Objects {
					if asJSON {
						line := struct {
							client.ObjectInfo
							Doc json.RawMessage `json:",omitempty"`
						}{o, res.Docs[o.Key]}
						if err := enc.Encode(line); err != nil {
							return err
						}
					} else {
						fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", time.Unix(0, o.Modified).UTC().Format(time.RFC3339), o.Size, tstamp.String(o.Version), o.Key)
						if d := res.Docs[o.Key]; d != nil {
							fmt.Fprintf(tw, "\t\t\t  %s\n", d)
						}
					}
					printed++
				}
				if !res.Truncated || res.Next == "" || (limit > 0 && printed >= limit) {
					break
				}
				req.After, req.AsOf = res.Next, res.AsOf
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if explain {
				fmt.Fprintf(cmd.ErrOrStderr(), "plan: %s; %d matches, %d candidates examined, %d range requests in %d pages\n", plan, printed, examined, ranges, pages)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.String("as-of", "", "query the space as it was at this time")
	f.String("order-by", "", "order by key, size, modified, content_type, version, tags.NAME, meta.NAME or doc.PATH (default: key)")
	f.Bool("desc", false, "with --order-by: largest first")
	f.Int("limit", 0, "print at most this many matches (default: all; 1000 with --order-by)")
	f.Bool("json", false, "print one JSON object per match")
	f.Bool("docs", false, "print the JSON documents too")
	f.Bool("explain", false, "say on stderr how the query found its candidates")
	return cmd
}
