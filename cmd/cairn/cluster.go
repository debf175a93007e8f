package main

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

func newClusterCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "cluster", Short: "Inspect the cluster"}
	status := &cobra.Command{
		Use:   "status",
		Short: "Show nodes, meta service members and ranges with their replicas and leaders",
		Args:  cobra.NoArgs,
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
			oracle := "none"
			if rep.Oracle != 0 {
				oracle = fmt.Sprintf("node %d", rep.Oracle)
			}
			fmt.Fprintf(out, "cluster %s, map epoch %d, timestamp oracle on %s, answered by node %d\n\n", rep.Cluster, rep.Epoch, oracle, rep.Node)
			tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "NODE\tADDRESS\tPEER\tZONE\tSTATE\tCAPACITY\tREPLICAS\tLEADS\tSTARTED")
			for _, n := range rep.Nodes {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\n", n.ID, n.Native, n.Peer, n.Zone, n.State,
					humanBytes(n.Capacity), n.Replicas, n.Leaders, n.Started.UTC().Format(time.RFC3339))
			}
			tw.Flush()
			if len(rep.Meta) > 0 {
				fmt.Fprintln(out)
				tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "META MEMBER\tROLE\tPEER URL")
				for _, m := range rep.Meta {
					role := "learner"
					if m.Voter {
						role = "voter"
					}
					name := m.Name
					if name == "" {
						name = "(starting)"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\n", name, role, m.PeerURL)
				}
				tw.Flush()
			}
			fmt.Fprintln(out)
			tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "RANGE\tSPACE\tSTART\tEND\tREPLICAS\tLEADER\tEPOCH")
			for _, r := range rep.Ranges {
				ids := make([]string, 0, len(r.Replicas)+len(r.Learners))
				for _, id := range r.Replicas {
					ids = append(ids, fmt.Sprint(id))
				}
				for _, id := range r.Learners {
					ids = append(ids, fmt.Sprintf("%d(learner)", id))
				}
				leader := "?"
				if r.Leader != 0 {
					leader = fmt.Sprint(r.Leader)
				}
				end := "(end)"
				if r.End != nil {
					end = fmt.Sprintf("%x", r.End)
				}
				fmt.Fprintf(tw, "%d\t%s\t%x\t%s\t%s\t%s\t%d\n", r.ID, r.Space, r.Start, end, strings.Join(ids, ","), leader, r.Epoch)
			}
			return tw.Flush()
		},
	}
	cmd.AddCommand(status)
	return cmd
}

func humanBytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
