package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairn-db/cairn/client"
	"github.com/cairn-db/cairn/internal/wire"
)

func newKeyCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "key", Short: "Manage access keys (S3 and native) and what each may do, bucket by bucket"}
	var access, secret string
	var grants []string
	var clusterAdmin bool
	create := &cobra.Command{
		Use:   "create --grant BUCKET=PERMISSION...",
		Short: "Make an S3 access key; its secret is shown once",
		Long: "create makes an access key (and its secret, unless given) with the grants named by\n" +
			"--grant BUCKET=PERMISSION, repeated: PERMISSION is read (get, head, list), write (and put,\n" +
			"delete, tag, multipart) or admin (and create, delete and configure the bucket); BUCKET *\n" +
			"is every bucket. A key takes effect on every node within a second.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			spec := wire.KeySpec{Access: access, Secret: secret, Grants: map[string]string{}, ClusterAdmin: clusterAdmin}
			for _, g := range grants {
				space, perm, ok := strings.Cut(g, "=")
				if !ok || space == "" || perm == "" {
					return usageError{fmt.Errorf("--grant %q: use BUCKET=read|write|admin (BUCKET * for all)", g)}
				}
				spec.Grants[space] = perm
			}
			if len(spec.Grants) == 0 && !clusterAdmin {
				return usageError{fmt.Errorf("a key needs at least one --grant BUCKET=read|write|admin, or --cluster-admin")}
			}
			c, err := dial(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			k, err := c.CreateKey(cmd.Context(), spec)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "access key: %s\nsecret key: %s\ngrants:     %s\n(the secret is not shown again)\n", k.Access, k.Secret, formatKeyGrants(k))
			return nil
		},
	}
	create.Flags().StringVar(&access, "access", "", "the access key id (default: made up, 20 characters)")
	create.Flags().StringVar(&secret, "secret", "", "the secret key (default: made up, 40 characters)")
	create.Flags().StringArrayVar(&grants, "grant", nil, "BUCKET=read|write|admin; repeat for more buckets (* is every bucket)")
	create.Flags().BoolVar(&clusterAdmin, "cluster-admin", false, "the key may also manage keys, join tokens and nodes, and read the cluster's state (and every bucket)")
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List the access keys (not the root key) and their grants",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := dial(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			keys, err := c.ListKeys(cmd.Context())
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ACCESS KEY\tCREATED\tGRANTS")
			for _, k := range keys {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", k.Access, time.Unix(0, k.Created).UTC().Format(time.RFC3339), formatKeyGrants(k))
			}
			return tw.Flush()
		},
	}
	rm := &cobra.Command{
		Use:   "rm ACCESS_KEY",
		Short: "Remove an access key: requests signed with it are refused",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := dial(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			if err := c.DeleteKey(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "removed access key %s\n", args[0])
			return nil
		},
	}
	rotate := &cobra.Command{
		Use:   "rotate-root",
		Short: "Replace the root key: the new one is shown once (and saved in your credentials file if the old one was there)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := dial(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			old := c.Credentials()
			k, err := c.RotateRootKey(cmd.Context())
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "access key: %s\nsecret key: %s\n(the old root key stops working within a second; the secret is not shown again)\n", k.Access, k.Secret)
			if old.Path != "" {
				if err := client.ReplaceKey(old.Path, old.Profile, k.Access, k.Secret); err != nil {
					return fmt.Errorf("the root key was rotated, but saving it in %s failed: %w", old.Path, err)
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "saved the new root key in profile %s of %s\n", old.Profile, old.Path)
			}
			return nil
		},
	}
	cmd.AddCommand(create, ls, rm, rotate)
	return cmd
}

func formatKeyGrants(k wire.KeySpec) string {
	g := formatGrants(k.Grants)
	if k.ClusterAdmin {
		if g == "" {
			return "cluster-admin"
		}
		return "cluster-admin," + g
	}
	return g
}

func formatGrants(g map[string]string) string {
	var parts []string
	for _, s := range slices.Sorted(maps.Keys(g)) {
		parts = append(parts, s+"="+g[s])
	}
	return strings.Join(parts, ",")
}
