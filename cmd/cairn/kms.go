package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

func newKMSCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "kms", Short: "Manage the cluster's encryption keys (S3 SSE-KMS)"}
	key := &cobra.Command{Use: "key", Short: "Make and list KMS keys"}
	create := &cobra.Command{
		Use:   "create KEY_ID",
		Short: "Make a KMS key: its material is random, sealed under the cluster key, and never shown",
		Long: "create makes a key of the cluster's KMS. S3 clients encrypt an object under it with\n" +
			"x-amz-server-side-encryption: aws:kms and x-amz-server-side-encryption-aws-kms-key-id: KEY_ID\n" +
			"(or a bucket's default encryption). KEY_ID is 1 to 256 letters, digits and _.:/+=@-.\n" +
			"A key cannot be removed: the objects encrypted under it would be lost.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := dial(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			k, err := c.CreateKMSKey(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "made KMS key %s\n", k.ID)
			return nil
		},
	}
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List the KMS keys",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := dial(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			keys, err := c.ListKMSKeys(cmd.Context())
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "KEY ID\tCREATED")
			for _, k := range keys {
				fmt.Fprintf(tw, "%s\t%s\n", k.ID, time.Unix(0, k.Created).UTC().Format(time.RFC3339))
			}
			return tw.Flush()
		},
	}
	key.AddCommand(create, ls)
	cmd.AddCommand(key)
	return cmd
}
