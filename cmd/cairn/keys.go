package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairn-db/cairn/internal/wire"
)

func newKeyCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "key", Short: "Manage S3 access keys and what each may do, bucket by bucket"}
	var access, secret string
	var grants []string
	create := &cobra.Command{
		Use:   "create --grant BUCKET=PERMISSION...",
		Short: "Make an S3 access key; its secret is shown once",
		Long: "create makes an access key (and its secret, unless given) with the grants named by\n" +
			"--grant BUCKET=PERMISSION, repeated: PERMISSION is read (get, head, list), write (and put,\n" +
			"delete, tag, multipart) or admin (and create, delete and configure the bucket); BUCKET *\n" +
			"is every bucket. A key takes effect on every node within a second.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			spec := wire.KeySpec{Access: access, Secret: secret, Grants: map[string]string{}}
			for _, g := range grants {
				space, perm, ok := strings.Cut(g, "=")
				if !ok || space == "" || perm == "" {
					return usageError{fmt.Errorf("--grant %q: use BUCKET=read|write|admin (BUCKET * for all)", g)}
				}
				spec.Grants[space] = perm
			}
			if len(spec.Grants) == 0 {
				return usageError{fmt.Errorf("a key needs at least one --grant BUCKET=read|write|admin")}
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
			fmt.Fprintf(cmd.OutOrStdout(), "access key: %s\nsecret key: %s\ngrants:     %s\n(the secret is not shown again)\n", k.Access, k.Secret, formatGrants(k.Grants))
			return nil
		},
	}
	create.Flags().StringVar(&access, "access", "", "the access key id (default: made up, 20 characters)")
	create.Flags().StringVar(&secret, "secret", "", "the secret key (default: made up, 40 characters)")
	create.Flags().StringArrayVar(&grants, "grant", nil, "BUCKET=read|write|admin; repeat for more buckets (* is every bucket)")
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
				fmt.Fprintf(tw, "%s\t%s\t%s\n", k.Access, time.Unix(0, k.Created).UTC().Format(time.RFC3339), formatGrants(k.Grants))
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
	cmd.AddCommand(create, ls, rm)
	return cmd
}

func formatGrants(g map[string]string) string {
	var parts []string
	for _, s := range slices.Sorted(maps.Keys(g)) {
		parts = append(parts, s+"="+g[s])
	}
	return strings.Join(parts, ",")
}
