package main

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairn-db/cairn/internal/auth"
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
	rotate := &cobra.Command{
		Use:   "rotate-key",
		Short: "Make a new cluster key, hand it to every node (all must be up) and seal every secret under it",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := dial(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			r, err := c.RotateClusterKey(cmd.Context())
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "cluster key %d seals from now on, on all %d nodes; %d secrets sealed again under it\n", r.KeyID, r.Nodes, r.Resealed)
			return nil
		},
	}
	cmd.AddCommand(status, newTokenCmd(), rotate)
	return cmd
}

func newTokenCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "token", Short: "Make and revoke the join tokens that admit new nodes"}
	var ttl time.Duration
	var uses int
	create := &cobra.Command{
		Use:   "create",
		Short: "Make a join token (shown once): cairn server --join HOST:PEERPORT --token TOKEN",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := dial(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			t, err := c.CreateToken(cmd.Context(), ttl, uses)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), t.Token)
			fmt.Fprintf(cmd.ErrOrStderr(), "join token %s: admits %d node(s) until %s; start a node with\n  cairn server --join HOST:PEERPORT --token %s\n",
				t.ID, t.Uses, time.Unix(0, t.Expires).UTC().Format(time.RFC3339), t.Token)
			return nil
		},
	}
	create.Flags().DurationVar(&ttl, "ttl", time.Hour, "how long the token admits nodes (up to 720h)")
	create.Flags().IntVar(&uses, "uses", 1, "how many nodes may join with it")
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List the join tokens that may still be used (not their secrets)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := dial(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			ts, err := c.ListTokens(cmd.Context())
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TOKEN ID\tUSES LEFT\tEXPIRES")
			for _, t := range ts {
				left := fmt.Sprint(t.Uses)
				if t.Uses < 0 {
					left = "any"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\n", t.ID, left, time.Unix(0, t.Expires).UTC().Format(time.RFC3339))
			}
			return tw.Flush()
		},
	}
	rm := &cobra.Command{
		Use:   "rm ID",
		Short: "Revoke a join token",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := dial(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			if err := c.RevokeToken(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "revoked join token %s\n", args[0])
			return nil
		},
	}
	generate := &cobra.Command{
		Use:   "generate",
		Short: "Print a new random token without a cluster, for a new cluster's first node (cairn server --token)",
		Long: "generate prints a well-formed random join token and talks to no server. Give it to a new\n" +
			"cluster's first node (cairn server --token T) and to the nodes that join it (--join ... --token T):\n" +
			"the first node registers it at its first start, and it admits any number of nodes until\n" +
			"--token-ttl (1h) later. For deploy files that start every node at once.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(cmd.OutOrStdout(), auth.NewJoinToken())
			return nil
		},
	}
	cmd.AddCommand(create, ls, rm, generate)
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
