package cluster

import (
	"context"
	"errors"

	"github.com/cairn-db/cairn/internal/meta"
	"github.com/cairn-db/cairn/internal/object"
)

// A branch is a space of its own (id, ranges, catalog entry) that records
// its base and branch point (meta.Space.Base*); the object layer makes
// its reads fall through to the base (object/branch.go). Its base's
// history at and below the branch point must stay, as a snapshot's does:
// a branch is made as a snapshot is (snapshots.go), recorded pending,
// every node told to hold the base, and only then its point taken, and
// while it exists the base's writes prune nothing and the base cannot be
// deleted.

// branchRef is a branch's base and point.
type branchRef struct {
	base *space
	at   uint64
}

// CreateBranch implements object.Brancher.
func (n *Node) CreateBranch(ctx context.Context, spaceName, name, from string) (object.BranchInfo, error) {
	if err := meta.ValidNewSpaceName(name); err != nil {
		return object.BranchInfo{}, object.Errorf(object.BadSpaceName, "%v", err)
	}
	base, release, err := n.acquire(ctx, spaceName)
	if err != nil {
		return object.BranchInfo{}, err
	}
	bm, isView := base.meta, base.base != nil
	release()
	switch {
	case isView:
		return object.BranchInfo{}, object.Errorf(object.InvalidArgument, "%q is a snapshot: branch the space it shows, from it (cairn branch create %s %s --from %s)", spaceName, bm.Name, name, spaceName)
	case bm.Branch():
		return object.BranchInfo{}, object.Errorf(object.InvalidArgument, "%q is a branch: a branch of a branch is not supported yet; branch %q", spaceName, bm.Base)
	case bm.Settings.Placement != meta.PlaceOrdered:
		return object.BranchInfo{}, object.Errorf(object.InvalidArgument, "%q has %s placement: branches of hash and tag spaces are not supported yet (snapshots are)", spaceName, bm.Settings.Placement)
	}
	var fromAt uint64
	if from != "" {
		if fromAt, err = n.snapshotPoint(ctx, from, bm); err != nil {
			return object.BranchInfo{}, err
		}
	}
	set := bm.Settings
	set.Ranges = 1 // it starts empty; it splits as it grows
	// It keeps its whole history: a merge compares with what it showed
	// at the last merge (and it goes whole with branch rm).
	set.Retention, set.KeepLast, set.KeepFor = meta.RetainAll, 0, 0
	sp, err := n.catalog.CreateBranch(ctx, name, set, bm.Name, bm.ID)
	if errors.Is(err, meta.ErrSpaceExists) {
		return object.BranchInfo{}, object.Errorf(object.SpaceExists, "the name %q is taken (%v)", name, err)
	}
	if err != nil {
		return object.BranchInfo{}, object.Unreachable("space catalog", err)
	}
	undo := func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), holdWait)
		defer cancel()
		if err := n.finishDeleteSpace(uctx, sp); err != nil {
			// It stays pending, holding its base everywhere: branch ls
			// shows it as being made, and branch rm removes it.
			n.log.Warn("a branch that was not made could not be removed; remove it with cairn branch rm", "branch", name, "err", err)
		}
		n.releaseEverywhere(bm.Name)
	}
	if err := n.holdEverywhere(ctx, bm.Name); err != nil {
		undo()
		return object.BranchInfo{}, object.Errorf(object.Unavailable, "branch %q not made: %v", name, err)
	}
	at := fromAt
	if from != "" {
		// The snapshot held the versions it shows until every node held
		// the base for the branch: it must still be there now.
		if _, err := n.snapshotPoint(ctx, from, bm); err != nil {
			undo()
			return object.BranchInfo{}, err
		}
	} else if at, err = n.tso.Next(ctx); err != nil {
		undo()
		return object.BranchInfo{}, object.Unreachable("timestamp oracle", err)
	}
	made, err := n.catalog.SetBranchPoint(ctx, name, at)
	if err != nil {
		undo()
		return object.BranchInfo{}, object.Unreachable("space catalog", err)
	}
	sp = made
	n.releaseEverywhere(bm.Name) // each node's mark goes down to the newest hold
	if _, err := n.openSpace(ctx, sp); err != nil {
		// Made all the same: it opens on its first use.
		n.log.Warn("a branch was made but not opened here", "branch", name, "err", err)
	}
	return branchInfo(sp), nil
}

// snapshotPoint is the timestamp of snapshot name, which must show base.
func (n *Node) snapshotPoint(ctx context.Context, name string, base meta.Space) (uint64, error) {
	snap, err := n.catalog.GetSnapshot(ctx, name)
	if errors.Is(err, meta.ErrSnapshotNotFound) {
		return 0, object.Errorf(object.SpaceNotFound, "no snapshot %q (cairn snapshot ls %s lists them)", name, base.Name)
	}
	if err != nil {
		return 0, object.Unreachable("space catalog", err)
	}
	if snap.OfID != base.ID {
		return 0, object.Errorf(object.InvalidArgument, "snapshot %q shows %q, not %q", name, snap.Of, base.Name)
	}
	if snap.Pending() {
		return 0, object.Errorf(object.Unavailable, "snapshot %q is being made; try again in a moment", name)
	}
	return snap.At, nil
}

func branchInfo(sp meta.Space) object.BranchInfo {
	return object.BranchInfo{Name: sp.Name, Space: sp.Base, At: sp.BaseAt, Created: sp.Created.UnixNano()}
}

// Branches implements object.Brancher: the branches of space spaceName
// ("": of every space) in name order; one being made (or left so by a
// failure) has point 0.
func (n *Node) Branches(ctx context.Context, spaceName string) ([]object.BranchInfo, error) {
	if spaceName != "" {
		_, release, err := n.acquire(ctx, spaceName)
		if err != nil {
			return nil, err
		}
		release()
	}
	all, err := n.catalog.ListSpaces(ctx)
	if err != nil {
		return nil, object.Unreachable("space catalog", err)
	}
	out := []object.BranchInfo{}
	for _, sp := range all {
		if sp.Branch() && sp.State == meta.SpaceActive && (spaceName == "" || sp.Base == spaceName) {
			out = append(out, branchInfo(sp))
		}
	}
	return out, nil
}

// DeleteBranch implements object.Brancher: the branch goes with
// everything written in it (merged or not); its base's history may be
// pruned from then on.
func (n *Node) DeleteBranch(ctx context.Context, name string) error {
	sp, err := n.catalog.GetSpace(ctx, name)
	if errors.Is(err, meta.ErrSpaceNotFound) {
		return object.Errorf(object.SpaceNotFound, "no branch %q (cairn branch ls lists them)", name)
	}
	if err != nil {
		return object.Unreachable("space catalog", err)
	}
	if !sp.Branch() {
		return object.Errorf(object.InvalidArgument, "%q is not a branch (cairn branch ls lists them)", name)
	}
	if err := n.deleteSpace(ctx, name, true); err != nil {
		return err
	}
	n.releaseEverywhere(sp.Base)
	return nil
}

// findBase finds the base of branch s for its first use: the branch must
// be made (its point taken) and its base open.
func (n *Node) findBase(ctx context.Context, s *space) error {
	sp, err := n.catalog.GetSpace(ctx, s.meta.Name)
	if err != nil && !errors.Is(err, meta.ErrSpaceNotFound) {
		return object.Unreachable("space catalog", err)
	}
	if err != nil || sp.ID != s.meta.ID {
		return object.Errorf(object.SpaceNotFound, "space %q does not exist", s.meta.Name)
	}
	if sp.BaseAt == 0 {
		return object.Errorf(object.Unavailable, "branch %q is being made; try again in a moment", sp.Name)
	}
	// Not held: the caller may hold the base (a clone from it into the
	// branch, a diff of the two).
	base, err := n.lookup(ctx, sp.Base)
	if object.KindOf(err) == object.SpaceNotFound || err == nil && (base.meta.ID != sp.BaseID || base.base != nil) {
		return object.Errorf(object.SpaceNotFound, "branch %q branches from space %q, which no longer exists", sp.Name, sp.Base)
	}
	if err != nil {
		return err
	}
	s.branch.CompareAndSwap(nil, &branchRef{base: base, at: sp.BaseAt})
	return nil
}

// Branches implements object.Spaces.
func (o spaceOpener) Branches(ctx context.Context, space string) ([]object.BranchInfo, error) {
	return o.n.Branches(ctx, space)
}

// MergePoint implements object.Spaces.
func (o spaceOpener) MergePoint(ctx context.Context, name string) (uint64, error) {
	sp, err := o.n.catalog.GetSpace(ctx, name)
	if err != nil {
		return 0, object.Unreachable("space catalog", err)
	}
	return sp.MergedAt, nil
}

// SetMergePoint implements object.Spaces.
func (o spaceOpener) SetMergePoint(ctx context.Context, name string, id uint32, at uint64) error {
	if err := o.n.catalog.SetBranchMerged(ctx, name, id, at); err != nil {
		return object.Unreachable("space catalog", err)
	}
	return nil
}
