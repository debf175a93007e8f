package main

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

func newGCCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "gc", Short: "Inspect the chunk collector that gives deleted data's disk space back"}
	var asJSON bool
	status := &cobra.Command{
		Use:   "status",
		Short: "Show each node's chunk collector: cutoff, progress, deleted and reclaimed bytes",
		Long: `Show each node's chunk collector. Every node deletes the chunks no version
references once they have been untouched for --gc-grace, every --gc-interval,
and compacts segment files that are mostly garbage. The cutoff is the
collection's safe point: chunks touched after it are never candidates.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := dial(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			rep, err := c.ClusterStatus(cmd.Context())
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(rep.GC)
			}
			tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "NODE\tPHASE\tLAST RUN\tCUTOFF\tSAFE POINT\tEXAMINED\tGARBAGE\tDELETED\tRECLAIMED\tRECLAIMABLE\tSEGMENTS\tLIVE\tERROR")
			for _, g := range rep.GC {
				if g.Error != "" && g.Phase == "" {
					fmt.Fprintf(tw, "%d\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t%s\n", g.Node, g.Error)
					continue
				}
				last, cutoff, safe := "never", "-", "-"
				if !g.Finished.IsZero() {
					last = g.Finished.UTC().Format(time.RFC3339)
				}
				if !g.Cutoff.IsZero() {
					cutoff = g.Cutoff.UTC().Format(time.RFC3339)
				}
				if !g.SafePoint.IsZero() {
					safe = g.SafePoint.UTC().Format(time.RFC3339)
				}
				if g.SafePointBy != "" {
					safe += " (" + g.SafePointBy + ")"
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s (%d)\t%s\t%s\n", g.Node, g.Phase, last, cutoff, safe,
					g.Examined, g.Garbage, humanBytes(uint64(g.DeletedBytes)), humanBytes(uint64(g.ReclaimedBytes)),
					humanBytes(uint64(g.Reclaimable)), humanBytes(uint64(g.SegmentBytes)), g.Segments, humanBytes(uint64(g.LiveBytes)), g.Error)
			}
			return tw.Flush()
		},
	}
	status.Flags().BoolVar(&asJSON, "json", false, "print each node's collector as JSON")
	cmd.AddCommand(status)
	return cmd
}
