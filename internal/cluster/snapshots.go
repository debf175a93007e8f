package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/cairn-db/cairn/internal/meta"
	"github.com/cairn-db/cairn/internal/object"
)

// A snapshot shows a space as of one timestamp from the oracle, read-only,
// under a name of its own: a view that shares the space's ranges and
// reads them at that timestamp (every read at a timestamp is read-atomic:
// the range's guard holds back writes at or below it, and a transaction's
// lock is resolved before its keys are read). Making one writes the
// catalog and takes a timestamp, whatever the space holds.
//
// What a snapshot shows must stay: while a space has snapshots its writes
// prune no version (its retention policy waits) and no version at or
// below the newest snapshot's timestamp may be removed. Every node learns
// that before the snapshot's timestamp is taken: the snapshot is recorded
// pending, every node marks the space held (waiting, as a delete's fence
// does, for the operations in flight there), and only then is the
// timestamp taken. A write stamped after it was planned by a node that
// already held the space; one stamped before it is shown by the snapshot
// as it left the history. A node that cannot be reached fails the
// snapshot; one that misses the completion stays held at "everything"
// until it next reads the catalog, which keeps more, never less.

// holdWait bounds how long one node may take to hold a space.
const holdWait = fenceWait

// CreateSnapshot implements object.Snapshotter.
func (n *Node) CreateSnapshot(ctx context.Context, spaceName, name string) (object.SnapshotInfo, error) {
	if err := meta.ValidNewSpaceName(name); err != nil {
		return object.SnapshotInfo{}, object.Errorf(object.BadSpaceName, "%v", err)
	}
	s, release, err := n.acquire(ctx, spaceName)
	if err != nil {
		return object.SnapshotInfo{}, err
	}
	id, isView, isBranch := s.meta.ID, s.base != nil, s.meta.Branch()
	release()
	if isView {
		return object.SnapshotInfo{}, object.Errorf(object.InvalidArgument, "%q is a snapshot already; snapshot the space it shows", spaceName)
	}
	if isBranch {
		return object.SnapshotInfo{}, object.Errorf(object.InvalidArgument, "%q is a branch: a branch cannot be snapshotted yet; merge it, or snapshot the space it branches from (%s)", spaceName, s.meta.Base)
	}
	snap, err := n.catalog.CreateSnapshot(ctx, name, spaceName, id)
	if errors.Is(err, meta.ErrSpaceExists) {
		return object.SnapshotInfo{}, object.Errorf(object.SpaceExists, "the name %q is taken (%v)", name, err)
	}
	if err != nil {
		return object.SnapshotInfo{}, object.Unreachable("space catalog", err)
	}
	if err := n.holdEverywhere(ctx, spaceName); err != nil {
		_ = n.catalog.DeleteSnapshot(context.WithoutCancel(ctx), name)
		n.releaseEverywhere(spaceName)
		return object.SnapshotInfo{}, object.Errorf(object.Unavailable, "snapshot %q not made: %v", name, err)
	}
	at, err := n.tso.Next(ctx)
	if err == nil {
		snap, err = n.catalog.SetSnapshotAt(ctx, name, at)
	}
	if err != nil {
		_ = n.catalog.DeleteSnapshot(context.WithoutCancel(ctx), name)
		n.releaseEverywhere(spaceName)
		return object.SnapshotInfo{}, object.Unreachable("timestamp oracle or space catalog", err)
	}
	n.releaseEverywhere(spaceName) // each node's mark goes down to the newest snapshot
	return snapshotInfo(snap), nil
}

func snapshotInfo(s meta.Snapshot) object.SnapshotInfo {
	return object.SnapshotInfo{Name: s.Name, Space: s.Of, At: s.At, Created: s.Created.UnixNano()}
}

// Snapshots implements object.Snapshotter: the snapshots of space
// spaceName ("": of every space) in name order, pending ones left out.
func (n *Node) Snapshots(ctx context.Context, spaceName string) ([]object.SnapshotInfo, error) {
	all, err := n.catalog.Snapshots(ctx)
	if err != nil {
		return nil, object.Unreachable("space catalog", err)
	}
	if spaceName != "" {
		if _, release, err := n.acquire(ctx, spaceName); err != nil {
			return nil, err
		} else {
			release()
		}
	}
	out := []object.SnapshotInfo{}
	for _, s := range all {
		if !s.Pending() && (spaceName == "" || s.Of == spaceName) {
			out = append(out, snapshotInfo(s))
		}
	}
	return out, nil
}

// DeleteSnapshot implements object.Snapshotter. The space's versions it
// held may be pruned from then on.
func (n *Node) DeleteSnapshot(ctx context.Context, name string) error {
	snap, err := n.catalog.GetSnapshot(ctx, name)
	if errors.Is(err, meta.ErrSnapshotNotFound) {
		return object.Errorf(object.SpaceNotFound, "no snapshot %q (cairn snapshot ls lists them)", name)
	}
	if err != nil {
		return object.Unreachable("space catalog", err)
	}
	if err := n.catalog.DeleteSnapshot(ctx, name); err != nil && !errors.Is(err, meta.ErrSnapshotNotFound) {
		return object.Unreachable("space catalog", err)
	}
	n.releaseEverywhere(snap.Of)
	return nil
}

// openSnapshot opens the view of snapshot name, or returns nil if there
// is no such snapshot.
func (n *Node) openSnapshot(ctx context.Context, name string) (*space, error) {
	snap, err := n.catalog.GetSnapshot(ctx, name)
	if errors.Is(err, meta.ErrSnapshotNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, object.Unreachable("space catalog", err)
	}
	if snap.Pending() {
		return nil, object.Errorf(object.Unavailable, "snapshot %q is being made; try again in a moment", name)
	}
	base, err := n.lookup(ctx, snap.Of) // not held: the caller may hold it
	if object.KindOf(err) == object.SpaceNotFound || err == nil && (base.meta.ID != snap.OfID || base.base != nil) {
		// The space it showed is gone (a space may be deleted only once
		// its snapshots are; this one outlived it half-way).
		return nil, object.Errorf(object.SpaceNotFound, "snapshot %q shows space %q, which no longer exists", name, snap.Of)
	}
	if err != nil {
		return nil, err
	}
	v := &space{meta: meta.Space{ID: snap.OfID, Name: name, Created: snap.Created, Settings: base.meta.Settings, State: meta.SpaceActive},
		base: base, readAt: snap.At}
	n.mu.Lock()
	defer n.mu.Unlock()
	if cur := n.mu.snaps[name]; cur != nil {
		return cur, nil
	}
	n.mu.snaps[name] = v
	return v, nil
}

// withBranches is snaps with the branches of the catalog as snapshots of
// their bases at their branch points (a branch holds its base's history
// as a snapshot does; a pending one is a pending snapshot).
func (n *Node) withBranches(ctx context.Context, snaps []meta.Snapshot) ([]meta.Snapshot, error) {
	spaces, err := n.catalog.ListSpaces(ctx)
	if err != nil {
		return nil, err
	}
	holds := slices.Clip(snaps)
	for _, sp := range spaces {
		if sp.Branch() {
			holds = append(holds, meta.Snapshot{Name: sp.Name, Of: sp.Base, OfID: sp.BaseID, At: sp.BaseAt})
		}
	}
	return holds, nil
}

// heldOf returns the held mark of the space with id among snaps.
func heldOf(snaps []meta.Snapshot, id uint32) uint64 {
	var held uint64
	for _, s := range snaps {
		if s.OfID != id {
			continue
		}
		if s.Pending() {
			return object.HeldPending
		}
		held = max(held, s.At)
	}
	return held
}

// refreshSnapshots brings this node's held marks and snapshot views in
// line with the catalog. A mark that rises waits for the space's
// operations in flight (ctx bounds the wait).
func (n *Node) refreshSnapshots(ctx context.Context) error {
	n.snapMu.Lock()
	defer n.snapMu.Unlock()
	snaps, err := n.catalog.Snapshots(ctx)
	if err != nil {
		return err
	}
	holds, err := n.withBranches(ctx, snaps)
	if err != nil {
		return err
	}
	n.mu.RLock()
	spaces := make([]*space, 0, len(n.mu.spaces))
	for _, s := range n.mu.spaces {
		spaces = append(spaces, s)
	}
	var stale []*space
	for name, v := range n.mu.snaps {
		if !slices.ContainsFunc(snaps, func(s meta.Snapshot) bool { return s.Name == name && s.OfID == v.meta.ID && s.At == v.readAt }) {
			stale = append(stale, v)
		}
	}
	n.mu.RUnlock()
	var errs []error
	for _, s := range spaces {
		held := heldOf(holds, s.meta.ID)
		if held == s.held.Load() {
			continue
		}
		if held < s.held.Load() {
			s.held.Store(held) // lowering it needs no wait
			continue
		}
		if err := lockGate(ctx, s); err != nil {
			errs = append(errs, fmt.Errorf("space %q: %w", s.meta.Name, err))
			continue
		}
		s.held.Store(held)
		s.gate.Unlock()
	}
	for _, v := range stale {
		v.gate.Lock()
		v.deleted = true
		v.gate.Unlock()
		n.mu.Lock()
		if n.mu.snaps[v.meta.Name] == v {
			delete(n.mu.snaps, v.meta.Name)
		}
		n.mu.Unlock()
	}
	return errors.Join(errs...)
}

// lockGate takes s's gate exclusively, which waits for its operations in
// flight, unless ctx ends first.
func lockGate(ctx context.Context, s *space) error {
	locked := make(chan struct{})
	go func() {
		s.gate.Lock()
		close(locked)
	}()
	select {
	case <-locked:
		return nil
	case <-ctx.Done():
		go func() { // taken later all the same: release it then
			<-locked
			s.gate.Unlock()
		}()
		return fmt.Errorf("operations in flight did not end within the wait: %w", ctx.Err())
	}
}

// holdEverywhere makes every node of the cluster map that has not left it
// refresh its snapshot marks (space names the space being snapshotted,
// for the errors). A node that cannot be reached fails it.
func (n *Node) holdEverywhere(ctx context.Context, spaceName string) error {
	ctx, cancel := context.WithTimeout(ctx, holdWait)
	defer cancel()
	if err := n.refreshSnapshots(ctx); err != nil {
		return fmt.Errorf("this node: %w", err)
	}
	for _, nd := range n.peers.view() {
		if nd.State == meta.NodeRemoved || nd.ID == n.id.NodeID {
			continue
		}
		if _, err := n.callNode(ctx, nd.ID, adminService, "RefreshSnapshots", []byte(spaceName), holdWait); err != nil {
			return fmt.Errorf("node %d (%s) did not confirm it holds space %q: %w; bring it back, or remove it (cairn node remove %d)", nd.ID, nd.State, spaceName, err, nd.ID)
		}
	}
	return nil
}

// releaseEverywhere asks every node it can reach to refresh its marks;
// the others do when they next read the catalog.
func (n *Node) releaseEverywhere(spaceName string) {
	ctx, cancel := context.WithTimeout(context.Background(), holdWait)
	defer cancel()
	if err := n.refreshSnapshots(ctx); err != nil {
		n.log.Info("could not refresh snapshot marks", "space", spaceName, "err", err)
	}
	for _, nd := range n.peers.view() {
		if nd.State == meta.NodeRemoved || nd.ID == n.id.NodeID {
			continue
		}
		if _, err := n.callNode(ctx, nd.ID, adminService, "RefreshSnapshots", []byte(spaceName), holdWait); err != nil {
			n.log.Info("could not refresh a node's snapshot marks; it does when it next reads the catalog", "space", spaceName, "node", nd.ID, "err", err)
		}
	}
}

// handleRefreshSnapshots serves RefreshSnapshots: refresh this node's
// marks from the catalog and answer once they hold.
func (n *Node) handleRefreshSnapshots(ctx context.Context, _ []byte) ([]byte, error) {
	return nil, n.refreshSnapshots(ctx)
}
