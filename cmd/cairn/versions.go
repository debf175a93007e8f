package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairn-db/cairn/client"
	"github.com/cairn-db/cairn/internal/tstamp"
)

func newCloneCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "clone SPACE/KEY DSTSPACE/DSTKEY",
		Short: "Make a new object (or version) that shares a version's content: no data is copied",
		Long: `Clone writes DSTSPACE/DSTKEY as a new version with the content and metadata
of a version of SPACE/KEY (the latest, or --version / --as-of). The clone's
chunks are the source's: nothing is copied, whatever the size. The clone
records its origin; cairn lineage shows it.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			space, key, err := splitTarget(args[0], true)
			if err != nil {
				return err
			}
			dspace, dkey, err := splitTarget(args[1], true)
			if err != nil {
				return err
			}
			var o client.CloneOptions
			f := cmd.Flags()
			if v, _ := f.GetString("version"); v != "" {
				if o.Version, err = parseVersion(v); err != nil {
					return err
				}
			}
			if a, _ := f.GetString("as-of"); a != "" {
				if o.AsOf, err = parseAsOf(a); err != nil {
					return err
				}
			}
			o.IfNoneMatch, _ = f.GetBool("if-none-match")
			c, err := dial(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			info, err := c.Clone(cmd.Context(), space, key, dspace, dkey, o)
			if err != nil {
				return err
			}
			if j, _ := f.GetBool("json"); j {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(info)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s/%s %s (%d bytes) cloned from %s\n", dspace, dkey, tstamp.String(info.Version), info.Size, refString(info.Origin))
			return nil
		},
	}
	addReadFlags(cmd)
	cmd.Flags().Bool("if-none-match", false, "clone only if DSTSPACE/DSTKEY has no live version")
	cmd.Flags().Bool("json", false, "print the clone's record as JSON")
	return cmd
}

func refString(r *client.VersionRef) string {
	if r == nil {
		return "-"
	}
	space := r.Space
	if space == "" {
		space = "(deleted space)"
	}
	return fmt.Sprintf("%s/%s %s", space, r.Key, tstamp.String(r.Version))
}

func newLineageCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lineage SPACE/KEY",
		Short: "Show where a version came from and what was made of it",
		Long: `Lineage prints a version's ancestors, nearest first — the version it was
cloned from if it is a clone, else the key's version before it — and its
children: the key's next version and every clone of it (in the spaces your
key may read).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			space, key, err := splitTarget(args[0], true)
			if err != nil {
				return err
			}
			f := cmd.Flags()
			var v uint64
			if s, _ := f.GetString("version"); s != "" {
				if v, err = parseVersion(s); err != nil {
					return err
				}
			}
			limit, _ := f.GetInt("limit")
			c, err := dial(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			l, err := c.Lineage(cmd.Context(), space, key, v, limit)
			if err != nil {
				return err
			}
			if j, _ := f.GetBool("json"); j {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(l)
			}
			printLineage(cmd.OutOrStdout(), &l)
			return nil
		},
	}
	cmd.Flags().String("version", "", "the version (an id from `cairn versions`; default the latest)")
	cmd.Flags().Int("limit", 0, "follow at most this many ancestors (default 100, at most 1000)")
	cmd.Flags().Bool("json", false, "print JSON")
	return cmd
}

func printLineage(w io.Writer, l *client.Lineage) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RELATION\tOBJECT\tVERSION\tSIZE\tMODIFIED\t")
	row := func(rel string, e client.LineageEntry) {
		size, mod := fmt.Sprint(e.Size), time.Unix(0, e.Modified).UTC().Format(time.RFC3339)
		switch {
		case e.Gone:
			size, mod = "-", "(gone)"
		case e.DeleteMarker:
			size = "(delete marker)"
		}
		space := e.Space
		if space == "" {
			space = "(deleted space)"
		}
		fmt.Fprintf(tw, "%s\t%s/%s\t%s\t%s\t%s\t\n", rel, space, e.Key, tstamp.String(e.Version), size, mod)
	}
	// Oldest first; "origin" marks the version the next one was cloned
	// from, "parent" the key's version before the next one.
	for i := len(l.Ancestors) - 1; i >= 0; i-- {
		rel := "parent"
		if l.Ancestors[i].Clone {
			rel = "origin"
		}
		row(fmt.Sprintf("%s (-%d)", rel, i+1), l.Ancestors[i])
	}
	row("this", client.LineageEntry{Info: l.Version})
	for _, c := range l.Children {
		rel := "next version"
		if c.Clone {
			rel = "clone"
		}
		row(rel, c)
	}
	tw.Flush()
	if l.Truncated {
		fmt.Fprintln(w, "(older ancestors not shown: raise --limit, or they are in spaces your key may not read)")
	}
}

func newDiffCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "diff SPACE/KEY V1 [V2] | diff SPACE1 SPACE2",
		Short: "Show what changed between two versions (metadata, byte ranges) or two views of a space (keys)",
		Long: `Diff compares version V1 of SPACE/KEY with V2 (default: the latest), or with
a version of another object (--to SPACE/KEY). It reports the metadata that
changed and the byte ranges where the content differs, computed from the two
versions' manifests without reading data: exact where the versions share
chunks at the same places (byte-range writes), chunk-granular elsewhere.
--exact reads both versions over those ranges to narrow them to the bytes
that differ.

Diff SPACE1 SPACE2 compares two views of one space — the space, its
snapshots, its branches — and lists the keys added (+), removed (-) and
changed (~) from SPACE1 to SPACE2 (--prefix narrows them). It reads only
what changed between the two, not the whole space.`,
		Args: cobra.RangeArgs(2, 3),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 2 && !strings.Contains(args[0], "/") {
				return diffSpaces(cmd, args[0], args[1])
			}
			space, key, err := splitTarget(args[0], true)
			if err != nil {
				return err
			}
			from, err := parseVersion(args[1])
			if err != nil {
				return err
			}
			var to uint64
			if len(args) == 3 && args[2] != "latest" {
				if to, err = parseVersion(args[2]); err != nil {
					return err
				}
			}
			f := cmd.Flags()
			var o client.DiffOptions
			if t, _ := f.GetString("to"); t != "" {
				if o.ToSpace, o.ToKey, err = splitTarget(t, true); err != nil {
					return err
				}
			}
			o.Exact, _ = f.GetBool("exact")
			c, err := dial(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			d, err := c.Diff(cmd.Context(), space, key, from, to, o)
			if err != nil {
				return err
			}
			if j, _ := f.GetBool("json"); j {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(d)
			}
			printDiff(cmd.OutOrStdout(), &d)
			return nil
		},
	}
	cmd.Flags().String("to", "", "compare with a version of this object (SPACE/KEY) instead")
	cmd.Flags().Bool("exact", false, "read both versions where they may differ, to report only the bytes that do")
	cmd.Flags().Bool("json", false, "print JSON")
	cmd.Flags().String("prefix", "", "diff SPACE1 SPACE2: only keys under this prefix")
	return cmd
}

// diffSpaces prints every key that differs between two views of a space,
// page by page.
func diffSpaces(cmd *cobra.Command, from, to string) error {
	f := cmd.Flags()
	prefix, _ := f.GetString("prefix")
	asJSON, _ := f.GetBool("json")
	c, err := dial(cmd)
	if err != nil {
		return err
	}
	defer c.Close()
	w := cmd.OutOrStdout()
	all := []client.KeyChange{}
	var added, removed, changed int
	o := client.SpaceDiffOptions{Prefix: prefix}
	for {
		d, err := c.DiffSpaces(cmd.Context(), from, to, o)
		if err != nil {
			return err
		}
		for _, ch := range d.Changes {
			switch ch.Change {
			case "added":
				added++
				if !asJSON {
					fmt.Fprintf(w, "+ %s (%d bytes, version %s)\n", ch.Key, ch.To.Size, tstamp.String(ch.To.Version))
				}
			case "removed":
				removed++
				if !asJSON {
					fmt.Fprintf(w, "- %s\n", ch.Key)
				}
			default:
				changed++
				if !asJSON {
					fmt.Fprintf(w, "~ %s (%d -> %d bytes, version %s -> %s)\n", ch.Key, ch.From.Size, ch.To.Size, tstamp.String(ch.From.Version), tstamp.String(ch.To.Version))
				}
			}
		}
		if asJSON {
			all = append(all, d.Changes...)
		}
		if !d.Truncated {
			break
		}
		o.StartAfter = d.Next
	}
	if asJSON {
		return json.NewEncoder(w).Encode(struct {
			From    string             `json:"from"`
			To      string             `json:"to"`
			Changes []client.KeyChange `json:"changes"`
		}{from, to, all})
	}
	fmt.Fprintf(w, "%s -> %s: %d added, %d removed, %d changed\n", from, to, added, removed, changed)
	return nil
}

func printDiff(w io.Writer, d *client.Diff) {
	fmt.Fprintf(w, "--- %s/%s %s (%d bytes)\n+++ %s/%s %s (%d bytes)\n", d.From.Space, d.From.Key, tstamp.String(d.From.Version), d.From.Size,
		d.To.Space, d.To.Key, tstamp.String(d.To.Version), d.To.Size)
	for _, c := range d.Changes {
		switch {
		case c.Added:
			fmt.Fprintf(w, "+ %s: %q\n", c.Field, c.To)
		case c.Removed:
			fmt.Fprintf(w, "- %s: %q\n", c.Field, c.From)
		default:
			fmt.Fprintf(w, "~ %s: %q -> %q\n", c.Field, c.From, c.To)
		}
	}
	if len(d.Ranges) == 0 {
		fmt.Fprintln(w, "content: the same")
		return
	}
	var total int64
	var sb strings.Builder
	for _, r := range d.Ranges {
		total += r.Len
		fmt.Fprintf(&sb, "  [%d, %d) %d bytes\n", r.Off, r.Off+r.Len, r.Len)
	}
	how := "may differ (chunk-granular; --exact narrows them)"
	if d.Exact {
		how = "differ"
	}
	fmt.Fprintf(w, "content: %d bytes in %d ranges %s\n%s", total, len(d.Ranges), how, sb.String())
}

func newSnapshotCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "snapshot", Short: "Make, list and remove snapshots: read-only spaces that show a space as of one moment"}
	create := &cobra.Command{
		Use:   "create SPACE NAME",
		Short: "Make NAME a read-only space showing SPACE as it is now",
		Long: `Snapshot create makes NAME a space that shows SPACE exactly as of one
timestamp — a transaction is in it whole or not at all — and never changes.
It copies nothing, whatever SPACE holds. Read it as any space: cairn cat,
ls, versions, and S3 clients (a read-only bucket). While a space has
snapshots, its retention policy prunes nothing and the versions they show
cannot be removed.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := dial(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			s, err := c.CreateSnapshot(cmd.Context(), args[0], args[1])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "snapshot %s of %s as of %s (%s)\n", s.Name, s.Space, tstamp.String(s.At), tstamp.Time(s.At).UTC().Format(time.RFC3339Nano))
			return nil
		},
	}
	ls := &cobra.Command{
		Use:   "ls [SPACE]",
		Short: "List the snapshots of SPACE (default: of every space)",
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
			l, err := c.Snapshots(cmd.Context(), space)
			if err != nil {
				return err
			}
			if j, _ := cmd.Flags().GetBool("json"); j {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(l)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tSPACE\tAS OF\tVERSION\t")
			for _, s := range l {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", s.Name, s.Space, tstamp.Time(s.At).UTC().Format(time.RFC3339), tstamp.String(s.At))
			}
			return tw.Flush()
		},
	}
	ls.Flags().Bool("json", false, "print JSON")
	rm := &cobra.Command{
		Use:   "rm NAME",
		Short: "Remove a snapshot (the versions it held may then be pruned)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := dial(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			if err := c.DeleteSnapshot(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "removed snapshot %s\n", args[0])
			return nil
		},
	}
	cmd.AddCommand(create, ls, rm)
	return cmd
}
