package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

func newSQLCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sql 'SELECT ...'",
		Short: "Run a read-only SQL statement over the spaces as tables",
		Long: `Run a read-only SQL statement (MySQL dialect) on a node: each space and
snapshot the key may read is a table of the database cairn, with the
columns key, version, size, etag, content_type, modified, tags (JSON),
meta (JSON), doc (JSON) and one per ready field index (doc.a.b is
doc_a_b). A WHERE on key or an indexed column is served by the indexes;
FROM t AS OF '2026-11-25T10:00:00Z' reads the past. Rows print tab-
separated under a header, NULL as NULL (--json: one JSON object).

For large answers and for mariadb/mysql clients and BI tools, start the
node with --sql-port and connect there (the user is the access key).`,
		Example: `  cairn sql 'SELECT ` + "`key`" + `, size FROM photos WHERE JSON_EXTRACT(tags, "$.color") = "red" LIMIT 10'
  cairn sql 'SELECT doc_age, COUNT(*) FROM staff GROUP BY doc_age'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := dial(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			res, err := c.SQL(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if j, _ := cmd.Flags().GetBool("json"); j {
				rows := res.Rows
				if rows == nil {
					rows = [][]*string{}
				}
				return json.NewEncoder(out).Encode(map[string]any{"columns": res.Columns, "rows": rows})
			}
			if len(res.Columns) > 0 {
				fmt.Fprintln(out, strings.Join(res.Columns, "\t"))
			}
			for _, row := range res.Rows {
				cells := make([]string, len(row))
				for i, c := range row {
					cells[i] = "NULL"
					if c != nil {
						cells[i] = *c
					}
				}
				fmt.Fprintln(out, strings.Join(cells, "\t"))
			}
			return nil
		},
	}
	cmd.Flags().Bool("json", false, "print {\"columns\": [...], \"rows\": [[...]...]}")
	return cmd
}
