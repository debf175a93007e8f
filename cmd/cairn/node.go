package main

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairn-db/cairn/client"
	"github.com/cairn-db/cairn/internal/meta"
	"github.com/cairn-db/cairn/internal/wire"
)

func newNodeCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "node", Short: "Drain, undrain or remove a node of the cluster"}
	drain := &cobra.Command{
		Use:   "drain ID",
		Short: "Move every range replica, lease and chunk off a node (it stays in the cluster, empty)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, c, err := dialForNode(cmd, args[0])
			if err != nil {
				return err
			}
			defer c.Close()
			if err := c.DrainNode(cmd.Context(), id); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "node %d is draining; watch it empty with: cairn cluster status\n", id)
			return nil
		},
	}
	undrain := &cobra.Command{
		Use:   "undrain ID",
		Short: "Take a draining node back: new chunks and range replicas may go to it again",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, c, err := dialForNode(cmd, args[0])
			if err != nil {
				return err
			}
			defer c.Close()
			if err := c.UndrainNode(cmd.Context(), id); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "node %d is back in service\n", id)
			return nil
		},
	}
	var timeout time.Duration
	remove := &cobra.Command{
		Use:   "remove ID",
		Short: "Drain a node, wait until it is empty, and take it out of the cluster for good",
		Long: "remove drains the node (if it is not draining or down yet), waits until its range replicas\n" +
			"have moved and its chunks are copied to other nodes, then removes it and its meta service\n" +
			"member. Ask another node than the one removed (--server). A removed node cannot come back\n" +
			"under its id: to use the machine again, delete its data directory and --join afresh.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, c, err := dialForNode(cmd, args[0])
			if err != nil {
				return err
			}
			defer c.Close()
			return removeNode(cmd, c, id, timeout)
		},
	}
	remove.Flags().DurationVar(&timeout, "timeout", 30*time.Minute, "give up waiting for the drain after this long (the node stays draining)")
	cmd.AddCommand(drain, undrain, remove)
	return cmd
}

// dialForNode parses the node id argument and connects to the server.
func dialForNode(cmd *cobra.Command, arg string) (uint64, *client.Client, error) {
	id, err := strconv.ParseUint(arg, 10, 64)
	if err != nil || id == 0 {
		return 0, nil, usageError{fmt.Errorf("%q is not a node id (see the NODE column of cairn cluster status)", arg)}
	}
	c, err := dial(cmd)
	return id, c, err
}

// removeNode drains node id and retries the removal until the node is
// empty, showing what is left on a terminal.
func removeNode(cmd *cobra.Command, c *client.Client, id uint64, timeout time.Duration) error {
	ctx := cmd.Context()
	rep, err := c.ClusterStatus(ctx)
	if err != nil {
		return err
	}
	for _, n := range rep.Nodes {
		if n.ID == id && n.State != meta.NodeDown && n.State != meta.NodeRemoved && n.State != meta.NodeDraining {
			if err := c.DrainNode(ctx, id); err != nil {
				return err
			}
		}
	}
	stderr := cmd.ErrOrStderr()
	tty := isTerminal(cmdStderr(cmd))
	start := time.Now()
	lastLog := time.Time{}
	for {
		err := c.RemoveNode(ctx, id)
		if err == nil {
			if tty {
				fmt.Fprint(stderr, "\r\033[K")
			}
			fmt.Fprintf(cmd.OutOrStdout(), "node %d removed from the cluster (drained in %v)\n", id, time.Since(start).Round(time.Second))
			return nil
		}
		if wire.CodeOf(err) != wire.CodeNotDrained {
			return err
		}
		if time.Since(start) > timeout {
			return fmt.Errorf("node %d is not drained after %v (%v); it stays draining: run remove again to keep waiting", id, timeout, err)
		}
		switch {
		case tty:
			fmt.Fprintf(stderr, "\r\033[Kdraining node %d (%v): %s", id, time.Since(start).Round(time.Second), errMessage(err))
		case time.Since(lastLog) >= 10*time.Second:
			fmt.Fprintf(stderr, "draining node %d (%v): %s\n", id, time.Since(start).Round(time.Second), errMessage(err))
			lastLog = time.Now()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// errMessage is the message of a server error without its code prefix.
func errMessage(err error) string {
	var we *wire.Error
	if errors.As(err, &we) && we.Message != "" {
		return we.Message
	}
	return err.Error()
}
