package main

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairn-db/cairn/client"
	"github.com/cairn-db/cairn/internal/tstamp"
)

// splitTarget splits SPACE/KEY. needKey says whether a key is required.
func splitTarget(arg string, needKey bool) (space, key string, err error) {
	space, key, _ = strings.Cut(arg, "/")
	if space == "" {
		return "", "", usageError{fmt.Errorf("%q: expected SPACE/KEY", arg)}
	}
	if needKey && key == "" {
		return "", "", usageError{fmt.Errorf("%q names no key: expected SPACE/KEY", arg)}
	}
	return space, key, nil
}

// parseVersion reads a version id (16 hex digits).
func parseVersion(s string) (uint64, error) {
	v, err := tstamp.Parse(s)
	if err != nil {
		return 0, usageError{fmt.Errorf("--version %q: a version id is 16 hex digits, as `cairn versions` prints them", s)}
	}
	return v, nil
}

// parseAsOf reads a point in time: RFC 3339, a Unix time in seconds, a
// duration ago ("10m"), or a version id.
func parseAsOf(s string) (uint64, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return tstamp.FromTime(t) | tstamp.MaxLogical, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return tstamp.FromTime(time.Now().Add(-d)) | tstamp.MaxLogical, nil
	}
	if v, err := tstamp.Parse(s); err == nil {
		return v, nil
	}
	if sec, err := strconv.ParseInt(s, 10, 64); err == nil && sec > 0 {
		return tstamp.FromTime(time.Unix(sec, 0)) | tstamp.MaxLogical, nil
	}
	return 0, usageError{fmt.Errorf("--as-of %q: give an RFC 3339 time (2026-11-21T10:00:00Z), a duration ago (10m), Unix seconds, or a version id", s)}
}

// readOpts turns --version / --as-of into client options.
func readOpts(cmd *cobra.Command) ([]client.GetOption, error) {
	var opts []client.GetOption
	if v, _ := cmd.Flags().GetString("version"); v != "" {
		ver, err := parseVersion(v)
		if err != nil {
			return nil, err
		}
		opts = append(opts, client.WithVersion(ver))
	}
	if a, _ := cmd.Flags().GetString("as-of"); a != "" {
		ts, err := parseAsOf(a)
		if err != nil {
			return nil, err
		}
		opts = append(opts, client.WithAsOf(ts))
	}
	return opts, nil
}

func addReadFlags(cmd *cobra.Command) {
	cmd.Flags().String("version", "", "read this version (an id from `cairn versions`)")
	cmd.Flags().String("as-of", "", "read the version current at this time (RFC 3339, Unix seconds, or a duration ago like 1h)")
}

func parseKV(list []string, what string) (map[string]string, error) {
	if len(list) == 0 {
		return nil, nil
	}
	m := map[string]string{}
	for _, s := range list {
		k, v, ok := strings.Cut(s, "=")
		if !ok || k == "" {
			return nil, usageError{fmt.Errorf("--%s %q: expected KEY=VALUE", what, s)}
		}
		m[k] = v
	}
	return m, nil
}

func newPutCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "put SPACE/KEY [FILE|-]",
		Short: "Write an object from a file or standard input (a new version)",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			space, key, err := splitTarget(args[0], true)
			if err != nil {
				return err
			}
			f := cmd.Flags()
			ct, _ := f.GetString("content-type")
			metaL, _ := f.GetStringArray("meta")
			tagL, _ := f.GetStringArray("tag")
			meta, err := parseKV(metaL, "meta")
			if err != nil {
				return err
			}
			tags, err := parseKV(tagL, "tag")
			if err != nil {
				return err
			}
			opts := []client.PutOption{client.WithContentType(ct), client.WithMeta(meta), client.WithTags(tags)}
			if v, _ := f.GetString("if-match"); v != "" {
				ver, err := parseVersion(v)
				if err != nil {
					return err
				}
				opts = append(opts, client.IfMatch(ver))
			}
			if b, _ := f.GetBool("if-none-match"); b {
				opts = append(opts, client.IfNoneMatch())
			}
			var (
				in   = cmd.InOrStdin()
				size = int64(-1)
			)
			if len(args) == 2 && args[1] != "-" {
				fh, err := os.Open(args[1])
				if err != nil {
					return err
				}
				defer fh.Close()
				st, err := fh.Stat()
				if err != nil {
					return err
				}
				in, size = fh, st.Size()
				rangeWrite := f.Changed("append") || f.Changed("offset")
				if ct == "" && !rangeWrite {
					opts = append(opts, client.WithContentType(contentTypeOf(args[1])))
				}
			}
			c, err := dial(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			bar := newProgress(cmd, "put "+args[0], size)
			defer bar.done()
			var info client.ObjectInfo
			appendMode, _ := f.GetBool("append")
			switch {
			case appendMode || f.Changed("offset"):
				data, err := io.ReadAll(bar.wrap(in))
				if err != nil {
					return err
				}
				if appendMode {
					info, err = c.Append(cmd.Context(), space, key, data, opts...)
				} else {
					off, _ := f.GetInt64("offset")
					info, err = c.WriteAt(cmd.Context(), space, key, off, data, opts...)
				}
				if err != nil {
					return err
				}
			default:
				info, err = c.PutStream(cmd.Context(), space, key, bar.wrap(in), size, opts...)
				if err != nil {
					return err
				}
			}
			bar.done()
			fmt.Fprintf(cmd.OutOrStdout(), "%s/%s version %s size %d etag %s\n", space, key, tstamp.String(info.Version), info.Size, info.ETag)
			return nil
		},
	}
	f := cmd.Flags()
	f.String("content-type", "", "content type (default: from the file name)")
	f.StringArray("meta", nil, "user metadata KEY=VALUE (repeatable)")
	f.StringArray("tag", nil, "tag KEY=VALUE (repeatable)")
	f.String("if-match", "", "write only if the latest version is this one")
	f.Bool("if-none-match", false, "write only if the object does not exist")
	f.Int64("offset", 0, "write the input at this byte offset of the latest version (a byte-range write)")
	f.Bool("append", false, "append the input to the latest version")
	return cmd
}

func contentTypeOf(name string) string {
	switch strings.ToLower(path.Ext(name)) {
	case ".txt":
		return "text/plain"
	case ".json":
		return "application/json"
	case ".html", ".htm":
		return "text/html"
	case ".png":
		return "image/png"
	case ".jpg", ".jpeg":
		return "image/jpeg"
	case ".gz":
		return "application/gzip"
	case ".tar":
		return "application/x-tar"
	}
	return "application/octet-stream"
}

func readRange(cmd *cobra.Command) []client.GetOption {
	off, _ := cmd.Flags().GetInt64("offset")
	length, _ := cmd.Flags().GetInt64("length")
	if off == 0 && length < 0 {
		return nil
	}
	return []client.GetOption{client.WithRange(off, length)}
}

func download(cmd *cobra.Command, target string, out io.Writer) (client.ObjectInfo, error) {
	space, key, err := splitTarget(target, true)
	if err != nil {
		return client.ObjectInfo{}, err
	}
	opts, err := readOpts(cmd)
	if err != nil {
		return client.ObjectInfo{}, err
	}
	opts = append(opts, readRange(cmd)...)
	c, err := dial(cmd)
	if err != nil {
		return client.ObjectInfo{}, err
	}
	defer c.Close()
	rc, info, err := c.GetStream(cmd.Context(), space, key, opts...)
	if err != nil {
		return info, err
	}
	defer rc.Close()
	bar := newProgress(cmd, "get "+target, info.Size)
	defer bar.done()
	if _, err := io.Copy(out, bar.wrap(rc)); err != nil {
		return info, err
	}
	return info, nil
}

func addRangeFlags(cmd *cobra.Command) {
	cmd.Flags().Int64("offset", 0, "first byte to read")
	cmd.Flags().Int64("length", -1, "bytes to read (default: to the end)")
}

func newGetCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "get SPACE/KEY [FILE|-]",
		Short: "Read an object into a file (default: the key's base name) or standard output",
		Long: `Read an object into a file (default: the key's base name) or standard output.

With --follow N the object is a JSON document whose references
({"$ref": "SPACE/KEY"}) are read with it, N references deep, all as of one
snapshot and in one round trip; the answer is printed as JSON (to standard
output unless FILE is given): {"at", "truncated", "objects": [{"space",
"key", "depth", "version", "content_type", "size", "doc" (a document) or
"data" (other bytes, base64), or "error"}]}.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, key, err := splitTarget(args[0], true)
			if err != nil {
				return err
			}
			dst := path.Base(key)
			if cmd.Flags().Changed("follow") {
				dst = "-"
			}
			if len(args) == 2 {
				dst = args[1]
			}
			if cmd.Flags().Changed("follow") {
				out := cmd.OutOrStdout()
				if dst != "-" {
					f, err := os.Create(dst)
					if err != nil {
						return err
					}
					defer f.Close()
					out = f
				}
				return follow(cmd, args[0], out)
			}
			if dst == "-" {
				_, err := download(cmd, args[0], cmd.OutOrStdout())
				return err
			}
			// Write to a temporary file and rename, so a failed read leaves
			// no partial file behind.
			tmp, err := os.CreateTemp(path.Dir(dst), ".cairn-get-*")
			if err != nil {
				return err
			}
			defer os.Remove(tmp.Name())
			if _, err := download(cmd, args[0], tmp); err != nil {
				tmp.Close()
				return err
			}
			if err := tmp.Close(); err != nil {
				return err
			}
			return os.Rename(tmp.Name(), dst)
		},
	}
	addReadFlags(cmd)
	addRangeFlags(cmd)
	cmd.Flags().Int("follow", 0, "also read what the document references, this many references deep (prints JSON)")
	return cmd
}

// followedJSON is one object of `cairn get --follow`.
type followedJSON struct {
	Space       string          `json:"space"`
	Key         string          `json:"key"`
	Depth       int             `json:"depth"`
	Version     string          `json:"version,omitempty"`
	ContentType string          `json:"content_type,omitempty"`
	Size        int64           `json:"size"`
	Doc         json.RawMessage `json:"doc,omitempty"`
	Data        []byte          `json:"data,omitempty"`
	Error       string          `json:"error,omitempty"`
}

// follow prints target's document and what its references reach as JSON.
func follow(cmd *cobra.Command, target string, out io.Writer) error {
	space, key, err := splitTarget(target, true)
	if err != nil {
		return err
	}
	depth, _ := cmd.Flags().GetInt("follow")
	opts, err := readOpts(cmd)
	if err != nil {
		return err
	}
	c, err := dial(cmd)
	if err != nil {
		return err
	}
	defer c.Close()
	res, err := c.Follow(cmd.Context(), space, key, depth, opts...)
	if err != nil {
		return err
	}
	doc := struct {
		At        string         `json:"at"`
		Truncated bool           `json:"truncated"`
		Objects   []followedJSON `json:"objects"`
	}{At: tstamp.String(res.At), Truncated: res.Truncated, Objects: []followedJSON{}}
	for _, o := range res.Objects {
		f := followedJSON{Space: o.Space, Key: o.Key, Depth: o.Depth}
		switch {
		case o.Err != nil:
			f.Error = o.Err.Error()
		default:
			f.Version, f.ContentType, f.Size = tstamp.String(o.Info.Version), o.Info.ContentType, o.Info.Size
			if client.IsDocument(o.Info.ContentType) && json.Valid(o.Data) {
				f.Doc = o.Data
			} else {
				f.Data = o.Data
			}
		}
		doc.Objects = append(doc.Objects, f)
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}

func newCatCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cat SPACE/KEY",
		Short: "Write an object to standard output",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := download(cmd, args[0], cmd.OutOrStdout())
			return err
		},
	}
	addReadFlags(cmd)
	addRangeFlags(cmd)
	return cmd
}

func newRmCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rm SPACE/KEY",
		Short: "Delete an object (writes a delete marker; --version removes one version)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			space, key, err := splitTarget(args[0], true)
			if err != nil {
				return err
			}
			var opts []client.DeleteOption
			if v, _ := cmd.Flags().GetString("version"); v != "" {
				ver, err := parseVersion(v)
				if err != nil {
					return err
				}
				opts = append(opts, client.WithVersion(ver))
			}
			c, err := dial(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			info, err := c.Delete(cmd.Context(), space, key, opts...)
			if err != nil {
				return err
			}
			if len(opts) > 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "removed version %s of %s\n", tstamp.String(info.Version), args[0])
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "deleted %s (delete marker %s)\n", args[0], tstamp.String(info.Version))
			}
			return nil
		},
	}
	cmd.Flags().String("version", "", "remove only this version")
	return cmd
}

func printInfo(w io.Writer, info client.ObjectInfo) {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	fmt.Fprintf(tw, "key:\t%s/%s\n", info.Space, info.Key)
	fmt.Fprintf(tw, "version:\t%s\n", tstamp.String(info.Version))
	if info.Parent != 0 {
		fmt.Fprintf(tw, "parent:\t%s\n", tstamp.String(info.Parent))
	}
	if info.DeleteMarker {
		fmt.Fprintf(tw, "delete marker:\ttrue\n")
	}
	fmt.Fprintf(tw, "size:\t%d\n", info.Size)
	fmt.Fprintf(tw, "modified:\t%s\n", time.Unix(0, info.Modified).UTC().Format(time.RFC3339Nano))
	fmt.Fprintf(tw, "etag:\t%s\n", info.ETag)
	fmt.Fprintf(tw, "blake3:\t%s\n", hex.EncodeToString(info.Hash[:]))
	if info.ContentType != "" {
		fmt.Fprintf(tw, "content-type:\t%s\n", info.ContentType)
	}
	for _, m := range []struct {
		name string
		m    map[string]string
	}{{"meta", info.Meta}, {"tag", info.Tags}} {
		ks := make([]string, 0, len(m.m))
		for k := range m.m {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		for _, k := range ks {
			fmt.Fprintf(tw, "%s:\t%s=%s\n", m.name, k, m.m[k])
		}
	}
	tw.Flush()
}

func newStatCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "stat SPACE/KEY",
		Short: "Show an object's version record",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			space, key, err := splitTarget(args[0], true)
			if err != nil {
				return err
			}
			opts, err := readOpts(cmd)
			if err != nil {
				return err
			}
			c, err := dial(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			info, err := c.Stat(cmd.Context(), space, key, opts...)
			if err != nil {
				return err
			}
			if j, _ := cmd.Flags().GetBool("json"); j {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(info)
			}
			printInfo(cmd.OutOrStdout(), info)
			return nil
		},
	}
	addReadFlags(cmd)
	cmd.Flags().Bool("json", false, "print JSON")
	return cmd
}

func newVersionsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "versions SPACE/KEY",
		Short: "List every version of an object, newest first",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			space, key, err := splitTarget(args[0], true)
			if err != nil {
				return err
			}
			c, err := dial(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "VERSION\tSIZE\tMODIFIED\tETAG\t")
			var before uint64
			for {
				res, err := c.Versions(cmd.Context(), space, key, client.VersionsOptions{Before: before})
				if err != nil {
					return err
				}
				for _, v := range res.Versions {
					size, etag := fmt.Sprint(v.Size), v.ETag
					if v.DeleteMarker {
						size, etag = "-", "(delete marker)"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", tstamp.String(v.Version), size,
						time.Unix(0, v.Modified).UTC().Format(time.RFC3339), etag)
					before = v.Version
				}
				if !res.Truncated || len(res.Versions) == 0 {
					break
				}
			}
			return tw.Flush()
		},
	}
	return cmd
}

func newLsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ls SPACE[/PREFIX]",
		Short: "List objects in key order",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			space, prefix, err := splitTarget(args[0], false)
			if err != nil {
				return err
			}
			f := cmd.Flags()
			after, _ := f.GetString("start-after")
			limit, _ := f.GetInt("limit")
			var asOf uint64
			if a, _ := f.GetString("as-of"); a != "" {
				if asOf, err = parseAsOf(a); err != nil {
					return err
				}
			}
			c, err := dial(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			printed := 0
			for limit <= 0 || printed < limit {
				page := 1000
				if limit > 0 && limit-printed < page {
					page = limit - printed
				}
				res, err := c.List(cmd.Context(), space, client.ListOptions{Prefix: prefix, StartAfter: after, Limit: uint32(page), AsOf: asOf})
				if err != nil {
					return err
				}
				for _, o := range res.Objects {
					fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", time.Unix(0, o.Modified).UTC().Format(time.RFC3339), o.Size, tstamp.String(o.Version), o.Key)
					printed++
				}
				if !res.Truncated || len(res.Objects) == 0 {
					break
				}
				after = res.Next
			}
			return tw.Flush()
		},
	}
	cmd.Flags().String("start-after", "", "list keys after this one")
	cmd.Flags().Int("limit", 0, "print at most this many keys (default: all)")
	cmd.Flags().String("as-of", "", "list the space as it was at this time")
	return cmd
}

func newSpaceCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "space", Short: "Create, list and delete spaces"}
	create := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a space",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f := cmd.Flags()
			ret, _ := f.GetString("retention")
			ranges, _ := f.GetUint32("ranges")
			replicas, _ := f.GetUint32("replicas")
			placement, _ := f.GetString("placement")
			set := client.SpaceSettings{Ranges: ranges, Replicas: replicas, Placement: placement}
			switch {
			case ret == "all" || ret == "":
				set.Retention = "all"
			case strings.HasPrefix(ret, "last:"):
				n, err := strconv.ParseUint(strings.TrimPrefix(ret, "last:"), 10, 32)
				if err != nil || n == 0 {
					return usageError{fmt.Errorf("--retention %q: expected last:N with N ≥ 1", ret)}
				}
				set.Retention, set.KeepLast = "last", uint32(n)
			case strings.HasPrefix(ret, "for:"):
				d, err := time.ParseDuration(strings.TrimPrefix(ret, "for:"))
				if err != nil || d < time.Second {
					return usageError{fmt.Errorf("--retention %q: expected for:DURATION (e.g. for:720h), at least 1s", ret)}
				}
				set.Retention, set.KeepForSeconds = "duration", uint64(d/time.Second)
			default:
				return usageError{fmt.Errorf("--retention %q: use all, last:N or for:DURATION", ret)}
			}
			c, err := dial(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			sp, err := c.CreateSpace(cmd.Context(), args[0], set)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "created space %s (id %d, %d ranges, %d replicas, retention %s, placement %s)\n", sp.Name, sp.ID, sp.Settings.Ranges, replicasOf(sp.Settings), retentionString(sp.Settings), sp.Settings.Placement)
			return nil
		},
	}
	create.Flags().String("retention", "all", "version history kept: all, last:N, or for:DURATION")
	create.Flags().Uint32("ranges", 0, "number of ranges the space starts with (default: the server's)")
	create.Flags().String("placement", "ordered", "where keys live: ordered (key order: cheap prefix listing), hash (sequential keys spread over 16 buckets; listings merge them) or tag:NAME (objects that share tag NAME's value live together: a query on it reads one range; an object's NAME tag cannot change)")
	create.Flags().Uint32("replicas", 0, "copies of each range and chunk, on as many nodes (default 3, capped by the nodes that are up)")
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List spaces",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := dial(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			spaces, err := c.ListSpaces(cmd.Context())
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tID\tRANGES\tREPLICAS\tRETENTION\tPLACEMENT\tCREATED")
			for _, s := range spaces {
				fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\t%s\n", s.Name, s.ID, s.Settings.Ranges, replicasOf(s.Settings), retentionString(s.Settings), s.Settings.Placement, time.Unix(0, s.Created).UTC().Format(time.RFC3339))
			}
			return tw.Flush()
		},
	}
	rm := &cobra.Command{
		Use:   "rm NAME",
		Short: "Delete an empty space",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := dial(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			if err := c.DeleteSpace(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deleted space %s\n", args[0])
			return nil
		},
	}
	cmd.AddCommand(create, ls, rm, newIndexCmd())
	return cmd
}

// replicasOf is a space's replication factor as the server applies it.
func replicasOf(s client.SpaceSettings) uint32 {
	if s.Replicas == 0 {
		return 3
	}
	return s.Replicas
}

func retentionString(s client.SpaceSettings) string {
	switch s.Retention {
	case "last":
		return fmt.Sprintf("last:%d", s.KeepLast)
	case "duration":
		return fmt.Sprintf("for:%s", time.Duration(s.KeepForSeconds)*time.Second)
	}
	return "all"
}
