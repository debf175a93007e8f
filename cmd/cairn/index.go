package main

import (
	"encoding/json"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"

	"github.com/cairn-db/cairn/client"
)

func newIndexCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "index", Short: "Add, drop and list a space's field indexes"}
	add := &cobra.Command{
		Use:   "add SPACE doc.PATH --type string|number|time",
		Short: "Index a document field (existing documents are indexed online)",
		Long: `Declare a field index on doc.PATH of the JSON documents of SPACE. Every range
indexes the documents written from then on; those written before are
indexed online, a chunk of keys at a time, while the space stays
writable. The command waits for the build and shows its progress on a
terminal (--no-wait returns at once: see "cairn space index ls"). Queries
use the index once it is ready. Running add again resumes a build that
stopped.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			typ, _ := cmd.Flags().GetString("type")
			noWait, _ := cmd.Flags().GetBool("no-wait")
			c, err := dial(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			ixs, err := c.AddIndex(cmd.Context(), args[0], args[1], typ)
			if err != nil {
				return err
			}
			if noWait {
				return printIndexes(cmd, ixs)
			}
			return waitIndex(cmd, c, args[0], args[1])
		},
	}
	add.Flags().String("type", "string", "the field's type: string, number or time (RFC 3339 strings)")
	add.Flags().Bool("no-wait", false, "return once declared, without waiting for the build")
	rm := &cobra.Command{
		Use:   "rm SPACE doc.PATH",
		Short: "Drop a field index",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := dial(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			if _, err := c.DropIndex(cmd.Context(), args[0], args[1]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "dropped the index on %s of %s\n", args[1], args[0])
			return nil
		},
	}
	ls := &cobra.Command{
		Use:   "ls SPACE",
		Short: "List a space's field indexes and their builds",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := dial(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			ixs, err := c.Indexes(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return printIndexes(cmd, ixs)
		},
	}
	ls.Flags().Bool("json", false, "print JSON")
	add.Flags().Bool("json", false, "with --no-wait: print JSON")
	cmd.AddCommand(add, rm, ls)
	return cmd
}

func printIndexes(cmd *cobra.Command, ixs []client.IndexInfo) error {
	if j, _ := cmd.Flags().GetBool("json"); j {
		if ixs == nil {
			ixs = []client.IndexInfo{}
		}
		return json.NewEncoder(cmd.OutOrStdout()).Encode(ixs)
	}
	tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "FIELD\tTYPE\tSTATE\tRANGES\tCREATED\t")
	for _, ix := range ixs {
		state := ix.State
		if ix.Error != "" {
			state += " (stopped: " + ix.Error + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%s\t\n", ix.Path, ix.Type, state, ix.RangesDone, ix.Ranges, time.Unix(0, ix.Created).UTC().Format(time.RFC3339))
	}
	return tw.Flush()
}

// waitIndex polls the index's build until it is ready, with a bar of the
// ranges filled on a terminal.
func waitIndex(cmd *cobra.Command, c *client.Client, space, field string) error {
	var (
		p   *mpb.Progress
		bar *mpb.Bar
	)
	if isTerminal(os.Stderr) {
		p = mpb.NewWithContext(cmd.Context(), mpb.WithOutput(os.Stderr), mpb.WithWidth(40))
		bar = p.AddBar(0, mpb.PrependDecorators(decor.Name("indexing "+field+" "), decor.CountersNoUnit("%d / %d ranges")),
			mpb.AppendDecorators(decor.Elapsed(decor.ET_STYLE_GO)))
	}
	finish := func() {
		if p != nil {
			if !bar.Completed() {
				bar.Abort(false)
			}
			p.Wait()
		}
	}
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		ixs, err := c.Indexes(cmd.Context(), space)
		if err != nil {
			finish()
			return err
		}
		var ix *client.IndexInfo
		for i := range ixs {
			if ixs[i].Path == field {
				ix = &ixs[i]
			}
		}
		switch {
		case ix == nil:
			finish()
			return fmt.Errorf("the index on %s of %s is gone (dropped meanwhile?)", field, space)
		case ix.Error != "":
			finish()
			return fmt.Errorf("the index build stopped: %s", ix.Error)
		case ix.State == "ready":
			if bar != nil {
				bar.SetTotal(int64(ix.Ranges), false)
				bar.SetCurrent(int64(ix.Ranges))
			}
			finish()
			fmt.Fprintf(cmd.OutOrStdout(), "indexed %s of %s (%s) on %d ranges\n", field, space, ix.Type, ix.Ranges)
			return nil
		}
		if bar != nil && ix.Ranges > 0 {
			bar.SetTotal(int64(ix.Ranges), false)
			bar.SetCurrent(int64(ix.RangesDone))
		}
		select {
		case <-cmd.Context().Done():
			finish()
			return cmd.Context().Err()
		case <-t.C:
		}
	}
}
