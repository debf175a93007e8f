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

func newBranchCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "branch", Short: "Make, list, merge and remove branches: writable spaces that start as another space at one moment"}
	create := &cobra.Command{
		Use:   "create SPACE NAME",
		Short: "Make NAME a writable space that starts as SPACE is now (or as a snapshot of it shows)",
		Long: `Branch create makes NAME a space whose reads fall through to SPACE as of
one timestamp (now, or a snapshot's with --from) until NAME writes or
deletes the key itself; writes to NAME never touch SPACE. It copies
nothing, whatever SPACE holds. Use it as any space: cairn put, cat, ls,
versions, transactions, and S3 clients (a bucket). While a space has
branches, its retention policy prunes nothing and it cannot be removed.
Merge a branch back with cairn branch merge.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			from, _ := cmd.Flags().GetString("from")
			c, err := dial(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			b, err := c.CreateBranch(cmd.Context(), args[0], args[1], from)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "branch %s of %s as of %s (%s)\n", b.Name, b.Space, tstamp.String(b.At), tstamp.Time(b.At).UTC().Format(time.RFC3339Nano))
			return nil
		},
	}
	create.Flags().String("from", "", "start the branch as this snapshot of SPACE shows it")
	ls := &cobra.Command{
		Use:   "ls [SPACE]",
		Short: "List the branches of SPACE (default: of every space)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			space := ""
			if len(args) == 1 {
				space = args[0]
			}
			c, err := dial(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			l, err := c.Branches(cmd.Context(), space)
			if err != nil {
				return err
			}
			if j, _ := cmd.Flags().GetBool("json"); j {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(l)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tSPACE\tFROM\tVERSION\t")
			for _, b := range l {
				if b.At == 0 {
					fmt.Fprintf(tw, "%s\t%s\t(being made)\t\t\n", b.Name, b.Space)
					continue
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", b.Name, b.Space, tstamp.Time(b.At).UTC().Format(time.RFC3339), tstamp.String(b.At))
			}
			return tw.Flush()
		},
	}
	ls.Flags().Bool("json", false, "print JSON")
	merge := &cobra.Command{
		Use:   "merge NAME [--into SPACE] [--strategy fail|source-wins|dest-wins]",
		Short: "Merge branch NAME into the space it branches from, in one transaction",
		Long: `Branch merge compares each key the branch wrote with the space as it was at
the branch point and as it is now. A key changed only in the branch is
taken (its version shares the branch's chunks: nothing is copied); a key
changed on both sides, differently, is a conflict:

  fail         (default) nothing is merged; the conflicts are listed
  source-wins  the branch's version is taken
  dest-wins    the space's version stays

Everything taken is written in one transaction: every key gets the same
new version, or none does. The branch stays; merging it again takes only
what changed since.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			into, _ := cmd.Flags().GetString("into")
			strategy, _ := cmd.Flags().GetString("strategy")
			c, err := dial(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			res, err := c.MergeBranch(cmd.Context(), args[0], into, strategy)
			if err != nil {
				return err
			}
			if j, _ := cmd.Flags().GetBool("json"); j {
				if err := json.NewEncoder(cmd.OutOrStdout()).Encode(res); err != nil {
					return err
				}
			} else {
				printMerge(cmd, args[0], res)
			}
			if res.Version == 0 && len(res.Conflicts) > 0 && (strategy == "" || strategy == client.MergeFail) {
				return fmt.Errorf("nothing merged: %d keys changed in the branch and in the space; settle them in the branch, or merge with --strategy source-wins or dest-wins", len(res.Conflicts))
			}
			return nil
		},
	}
	merge.Flags().String("into", "", "the space the branch branches from (checked; default: that space)")
	merge.Flags().String("strategy", client.MergeFail, "what to do with keys changed on both sides: fail, source-wins or dest-wins")
	merge.Flags().Bool("json", false, "print JSON")
	rm := &cobra.Command{
		Use:   "rm NAME",
		Short: "Remove a branch with everything written in it (its base's history may then be pruned)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := dial(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			if err := c.DeleteBranch(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "removed branch %s\n", args[0])
			return nil
		},
	}
	cmd.AddCommand(create, ls, merge, rm)
	return cmd
}

func printMerge(cmd *cobra.Command, name string, res client.MergeResult) {
	w := cmd.OutOrStdout()
	for _, c := range res.Conflicts {
		fmt.Fprintf(w, "conflict %s: %s\n", c.Key, c.Reason)
	}
	switch {
	case res.Version != 0:
		fmt.Fprintf(w, "merged %s: %d keys at version %s\n", name, res.Applied, tstamp.String(res.Version))
	case len(res.Conflicts) == 0:
		fmt.Fprintf(w, "merged %s: nothing to take\n", name)
	}
}
