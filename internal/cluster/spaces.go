package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/internal/keys"
	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/meta"
	"github.com/cairn-db/cairn/internal/mvcc"
	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/placement"
	"github.com/cairn-db/cairn/internal/rangeclient"
	"github.com/cairn-db/cairn/internal/rangedesc"
	"github.com/cairn-db/cairn/internal/replica"
)

// space is the node's cached view of one space and its ranges.
type space struct {
	meta meta.Space
	// retention is the space's history policy, replaced when its
	// settings change (refreshSettings).
	retention atomic.Pointer[mvcc.Retention]
	// tab holds the space's ranges (see splits.go for how it changes).
	tab rangeclient.Table

	// gate is held shared by every object operation for its duration and
	// exclusively by DeleteSpace while it checks that the space is empty
	// and removes it, so no write can land in a space after the check.
	gate    sync.RWMutex
	deleted bool // guarded by gate
	fenced  bool // guarded by gate: a delete is checking the space (fence.go)

	// held is the newest timestamp a snapshot of the space shows
	// (object.HeldPending while one is being made, 0 with none): versions at
	// or below it stay (snapshots.go). Set under gate held exclusively.
	held atomic.Uint64

	// base and readAt make the space a snapshot view: base's keys as of
	// readAt, read-only.
	base   *space
	readAt uint64

	// branch is, for a branch (meta.Branch), its base and branch point,
	// found on its first use once the branch is made (branches.go).
	branch atomic.Pointer[branchRef]
}

// Replicas is how many nodes hold each of the space's chunks (and ranges):
// its setting, or meta.DefaultReplicas.
func (s *space) Replicas() int {
	if s.base != nil {
		return s.base.Replicas()
	}
	return cmp.Or(s.meta.Settings.Replicas, meta.DefaultReplicas)
}

// ID implements object.OpenSpace.
func (s *space) ID() uint32 { return s.meta.ID }

// Retention implements object.OpenSpace. While the space has snapshots,
// writes prune nothing: the versions a snapshot shows stay.
func (s *space) Retention() mvcc.Retention {
	if s.base != nil {
		return s.base.Retention()
	}
	if s.held.Load() != 0 {
		return mvcc.Retention{Mode: mvcc.KeepAll}
	}
	return *s.retention.Load()
}

// Table implements object.OpenSpace.
func (s *space) Table() *rangeclient.Table {
	if s.base != nil {
		return &s.base.tab
	}
	return &s.tab
}

// ReadAt implements object.OpenSpace.
func (s *space) ReadAt() uint64 { return s.readAt }

// Base implements object.OpenSpace.
func (s *space) Base() (object.OpenSpace, uint64) {
	if r := s.branch.Load(); r != nil {
		return r.base, r.at
	}
	return nil, 0
}

// Hashed implements object.OpenSpace: a snapshot is placed as its
// space.
func (s *space) Hashed() bool {
	m := s
	if s.base != nil {
		m = s.base
	}
	return m.meta.Settings.Placement == meta.PlaceHash
}

// PlacementTag implements object.OpenSpace: a snapshot is placed as its
// space.
func (s *space) PlacementTag() string {
	m := s
	if s.base != nil {
		m = s.base
	}
	return meta.PlacementTag(m.meta.Settings.Placement)
}

// Held implements object.OpenSpace.
func (s *space) Held() uint64 {
	if s.base != nil {
		return s.base.Held()
	}
	return s.held.Load()
}

// rng is one range of a space with its local replica (the range
// client's table entry), carrying rangeExt.
type rng = rangeclient.Range

// rangeExt is the node's own state for a range entry: what splits,
// merges and the table sync keep about it.
type rangeExt struct {
	load splitLoad
	// unlisted marks an entry a split applied here made before the range
	// table listed it; the table sync keeps it until then (syncTable).
	// Guarded by Node.openMu.
	unlisted bool
	// colocate is where the left-hand neighbour's leaseholder asked this
	// range's replicas to go so that the two can merge (merges.go).
	colocate atomic.Pointer[colocation]
	// sized is the range's last counted size (merges.go rangeSize).
	sized atomic.Pointer[sizeMemo]
	// merging is set while a merge into this range runs (startMerge).
	merging atomic.Bool
}

func newRng(d rangedesc.Range, rep *replica.Replica) *rng {
	return rangeclient.NewRange(d, rep, &rangeExt{})
}

// ext returns the node's state for r.
func ext(r *rng) *rangeExt { return r.Ext().(*rangeExt) }

// maxSpaceReplicas is the largest replication factor a space may have.
const maxSpaceReplicas = 7

// loadSpaces opens a replica for every range of every space, creating the
// ranges of a space whose creation was interrupted before they existed.
func (n *Node) loadSpaces(ctx context.Context) error {
	spaces, err := n.catalog.ListSpaces(ctx)
	if err != nil {
		return fmt.Errorf("load space catalog: %w", err)
	}
	for _, sp := range spaces {
		if sp.State == meta.SpaceDeleting {
			// A delete that did not finish: the space was found empty, so
			// finish it.
			if err := n.finishDeleteSpace(ctx, sp); err != nil {
				return err
			}
			continue
		}
		if _, err := n.openSpace(ctx, sp); object.KindOf(err) == object.SpaceNotFound {
			continue // being deleted, its ranges gone already
		} else if err != nil {
			return err
		}
	}
	return nil
}

// openSpace opens the replicas of sp's ranges (creating the ranges if the
// space has none yet) and caches the space.
func (n *Node) openSpace(ctx context.Context, sp meta.Space) (*space, error) {
	n.openMu.Lock() // requests and the range watcher may open a space at once
	defer n.openMu.Unlock()
	n.mu.RLock()
	cur := n.mu.spaces[sp.Name]
	n.mu.RUnlock()
	if cur != nil && cur.meta.ID == sp.ID {
		return cur, nil // opened meanwhile: one copy, which fences and holds reach
	}
	descs, err := n.catalog.SpaceRanges(ctx, sp.ID)
	if err != nil {
		return nil, fmt.Errorf("load ranges of space %s: %w", sp.Name, err)
	}
	if len(descs) == 0 && sp.State != meta.SpaceActive {
		// Its ranges went with a delete (the state read may be older than
		// that): never made again.
		return nil, object.Errorf(object.SpaceNotFound, "space %q is being deleted", sp.Name)
	}
	if len(descs) == 0 {
		place, err := n.placeRanges(ctx, sp.Settings.Replicas)
		if err != nil {
			return nil, err
		}
		bounds := splitBounds(sp.ID, sp.Settings.Ranges)
		switch {
		case sp.Settings.Placement == meta.PlaceHash:
			bounds = hashBounds(sp.ID, sp.Settings.Ranges)
		case meta.PlacementTag(sp.Settings.Placement) != "":
			bounds = tagBounds(sp.ID, sp.Settings.Ranges)
		}
		descs, err = n.catalog.CreatePlacedRanges(ctx, sp.ID, bounds, place)
		if err != nil {
			return nil, fmt.Errorf("create ranges of space %s: %w", sp.Name, err)
		}
		if len(descs) == 0 {
			return nil, object.Errorf(object.SpaceNotFound, "space %q is being deleted", sp.Name)
		}
	}
	// A space a delete is checking opens fenced (fence.go).
	s := &space{meta: sp, fenced: sp.State == meta.SpaceFencing}
	s.tab.Space = sp.ID
	ret := retentionOf(sp.Settings)
	s.retention.Store(&ret)
	var tab []*rng
	for _, d := range descs {
		var rep *replica.Replica
		if d.Holds(n.id.NodeID) {
			rep, err = n.openReplica(d)
			if errors.Is(err, replica.ErrRangeMerged) {
				// Merged away here, but the merge is not in the table
				// yet (the node stopped before recording it): the
				// left-hand neighbour covers its keys, and its repair
				// records the merge from its replica (repairRange).
				n.log.Info("a range merged away here is still in the table; its merge will be recorded", "range", d.ID, "space", sp.Name)
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("open range %d of space %s: %w", d.ID, sp.Name, err)
			}
		}
		tab = append(tab, newRng(d, rep))
	}
	s.tab.Set(tab)
	// Its snapshot mark is read after the space is in the map, under its
	// gate: a snapshot made meanwhile either finds it there (and raises
	// the mark once the gate is free) or was recorded before this read.
	s.gate.Lock()
	n.mu.Lock()
	n.mu.spaces[sp.Name] = s
	n.mu.Unlock()
	held := object.HeldPending // not known: keep everything until the next refresh
	if snaps, err := n.catalog.Snapshots(ctx); err == nil {
		if holds, err := n.withBranches(ctx, snaps); err == nil {
			held = heldOf(holds, sp.ID)
		}
	}
	s.held.Store(held)
	// The state sp was read with may be older than a delete that began
	// since, whose fence did not find the space open here: read it again
	// now that the space is in the map (a fence from here on finds it).
	if now, err := n.catalog.GetSpace(ctx, sp.Name); errors.Is(err, meta.ErrSpaceNotFound) || err == nil && (now.ID != sp.ID || now.State == meta.SpaceDeleting) {
		s.deleted = true
		s.gate.Unlock()
		n.mu.Lock()
		if n.mu.spaces[sp.Name] == s {
			delete(n.mu.spaces, sp.Name)
		}
		n.mu.Unlock()
		return nil, object.Errorf(object.SpaceNotFound, "space %q does not exist", sp.Name)
	} else if err == nil && now.State == meta.SpaceFencing {
		s.fenced = true
	}
	s.gate.Unlock()
	return s, nil
}

// openReplica starts the local replica of range d, or returns the one
// running. A range never changed since it was created (epoch 1) is
// bootstrapped from its first replicas; a replica added later starts empty
// and gets the range's state from the leader as a snapshot.
func (n *Node) openReplica(d rangedesc.Range) (*replica.Replica, error) {
	if rep := n.ranges.Replica(d.ID); rep != nil {
		return rep, nil
	}
	rd := rangedesc.Range{ID: d.ID, Start: d.Start, End: d.End}
	if d.Epoch == 1 && d.Parent == 0 {
		rd.Replicas = d.Replicas
	}
	rep, err := n.ranges.AddReplica(rd, n.newStateMachine(rd))
	if errors.Is(err, replica.ErrRangeMerged) {
		n.merged.Store(d.ID, true)
	}
	if errors.Is(err, replica.ErrReplicaExists) {
		if rep = n.ranges.Replica(d.ID); rep != nil {
			return rep, nil
		}
	}
	return rep, err
}

// placeRanges returns where a new range's replicas go: r (default 3) of the
// nodes that are up, by placement.Rank.
func (n *Node) placeRanges(ctx context.Context, r int) (func(uint64) []uint64, error) {
	if r == 0 {
		r = meta.DefaultReplicas
	}
	nodes, err := n.catalog.Nodes(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the cluster map: %w", err)
	}
	var up []placement.Node
	for _, nd := range placementNodes(nodes) {
		if nd.State == placement.Up {
			up = append(up, nd)
		}
	}
	if len(up) == 0 {
		up = []placement.Node{{ID: n.id.NodeID, Zone: n.cfg.Zone}}
	}
	return func(rangeID uint64) []uint64 { return placement.Rank(rangeID, up, r) }, nil
}

// keyAlphabet is what most object keys begin with: digits and lowercase
// letters (words, paths, dates, hex and base-32 ids), in byte order.
const keyAlphabet = "0123456789abcdefghijklmnopqrstuvwxyz"

// splitBounds cuts a new ordered space into count ranges, the cuts spread
// evenly over keyAlphabet and, past its length, over two-character
// prefixes of it: cuts at whole bytes (0x40, 0x80, 0xC0) put every key
// that starts with a letter or a digit in one range. Size and load splits
// refine the ranges from there.
func splitBounds(spaceID uint32, count int) [][2][]byte {
	if count < 1 {
		count = 1
	}
	cuts := [][]byte{keys.SpaceStart(spaceID)}
	n := len(keyAlphabet)
	var prev []byte
	for i := 1; i < count; i++ {
		// Position i/count of the way through the two-character prefixes.
		p := i * n * n / count
		cut := []byte{keyAlphabet[p/n], keyAlphabet[p%n]}
		if p%n == 0 {
			cut = cut[:1]
		}
		if prev != nil && string(cut) <= string(prev) {
			continue // more ranges than prefixes: fewer cuts
		}
		prev = cut
		cuts = append(cuts, keys.ObjectPrefix(spaceID, nil, cut))
	}
	cuts = append(cuts, keys.SpaceEnd(spaceID))
	var b [][2][]byte
	for i := 0; i+1 < len(cuts); i++ {
		b = append(b, [2][]byte{cuts[i], cuts[i+1]})
	}
	return b
}

// tagBounds cuts a new tag space into count ranges: the directory and
// the objects of the first values in one, the rest of the values' hashes
// cut evenly (at most 256 ranges; splits go on from there).
func tagBounds(spaceID uint32, count int) [][2][]byte {
	count = max(1, min(count, 256))
	cuts := [][]byte{keys.SpaceStart(spaceID)}
	lo, _ := keys.TagSpan(spaceID)
	for i := 1; i < count; i++ {
		cuts = append(cuts, append(slices.Clip(lo), byte(i*256/count)))
	}
	cuts = append(cuts, keys.SpaceEnd(spaceID))
	var b [][2][]byte
	for i := 0; i+1 < len(cuts); i++ {
		b = append(b, [2][]byte{cuts[i], cuts[i+1]})
	}
	return b
}

// hashBounds cuts a new hash space into count ranges at bucket
// boundaries, as evenly as the buckets allow (at most keys.HashBuckets
// ranges; splits by size and load go on from there).
func hashBounds(spaceID uint32, count int) [][2][]byte {
	count = max(1, min(count, keys.HashBuckets))
	cuts := [][]byte{keys.SpaceStart(spaceID)}
	for i := 1; i < count; i++ {
		cuts = append(cuts, keys.ObjectPrefix(spaceID, []byte{byte(i * keys.HashBuckets / count)}, nil))
	}
	cuts = append(cuts, keys.SpaceEnd(spaceID))
	var b [][2][]byte
	for i := 0; i+1 < len(cuts); i++ {
		b = append(b, [2][]byte{cuts[i], cuts[i+1]})
	}
	return b
}

func retentionOf(s meta.SpaceSettings) mvcc.Retention {
	switch s.Retention {
	case "last":
		return mvcc.Retention{Mode: mvcc.KeepLast, KeepLast: s.KeepLast}
	case "duration":
		return mvcc.Retention{Mode: mvcc.KeepFor, KeepFor: s.KeepFor}
	}
	return mvcc.Retention{Mode: mvcc.KeepAll}
}

// spaceOpener opens spaces for the object service (object.Spaces).
type spaceOpener struct{ n *Node }

func (o spaceOpener) Acquire(ctx context.Context, name string) (object.OpenSpace, func(), error) {
	s, release, err := o.n.acquire(ctx, name)
	if err != nil {
		return nil, nil, err // not a nil *space in an interface
	}
	// A branch is read through its base: found on its first use (the
	// node's own uses of the space, its ranges and their keys, need
	// none).
	if s.meta.Branch() && s.branch.Load() == nil {
		if err := o.n.findBase(ctx, s); err != nil {
			release()
			return nil, nil, err
		}
	}
	return s, release, nil
}

// Name implements object.Spaces: the open spaces first, then the
// catalog ("" if no space has the id: it was deleted).
func (o spaceOpener) Name(ctx context.Context, id uint32) (string, error) {
	o.n.mu.RLock()
	for name, s := range o.n.mu.spaces {
		if s.meta.ID == id && s.base == nil {
			o.n.mu.RUnlock()
			return name, nil
		}
	}
	o.n.mu.RUnlock()
	all, err := o.n.catalog.ListSpaces(ctx)
	if err != nil {
		return "", object.Unreachable("space catalog", err)
	}
	for _, sp := range all {
		if sp.ID == id && sp.State == meta.SpaceActive {
			return sp.Name, nil
		}
	}
	return "", nil
}

// acquire returns the space, held shared (see space.gate) until release is
// called, or CodeSpaceNotFound. A space in the catalog that this node has
// not opened (a create that failed half-way) is opened here.
func (n *Node) acquire(ctx context.Context, name string) (s *space, release func(), err error) {
	if s, err = n.lookup(ctx, name); err != nil {
		return nil, nil, err
	}
	return n.holdSpace(s, name)
}

// lookup returns the space or snapshot view called name, opening it if
// this node has not yet, without holding it: for what needs a space
// another operation may be holding (a branch's base, a snapshot's space)
// — taking a gate shared twice in one goroutine waits forever once a
// writer queues between the two.
func (n *Node) lookup(ctx context.Context, name string) (s *space, err error) {
	n.mu.RLock()
	s = n.mu.spaces[name]
	if s == nil {
		s = n.mu.snaps[name]
	}
	n.mu.RUnlock()
	if s == nil {
		if err := meta.ValidSpaceName(name); err != nil {
			return nil, object.Errorf(object.BadSpaceName, "%v", err)
		}
		sp, err := n.catalog.GetSpace(ctx, name)
		if errors.Is(err, meta.ErrSpaceNotFound) {
			if s, err = n.openSnapshot(ctx, name); s != nil || err != nil {
				return s, err
			}
		}
		if err == nil && sp.State == meta.SpaceFencing {
			return nil, errFenced(name)
		}
		if err != nil || sp.State != meta.SpaceActive {
			if err != nil && !errors.Is(err, meta.ErrSpaceNotFound) {
				return nil, err
			}
			return nil, object.Errorf(object.SpaceNotFound, "space %q does not exist (create it with: cairn space create %s)", name, name)
		}
		if s, err = n.openSpace(ctx, sp); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// holdSpace takes s's gate shared for an operation.
func (n *Node) holdSpace(s *space, name string) (*space, func(), error) {
	s.gate.RLock()
	if s.deleted {
		s.gate.RUnlock()
		return nil, nil, object.Errorf(object.SpaceNotFound, "space %q does not exist", name)
	}
	if s.fenced {
		s.gate.RUnlock()
		return nil, nil, errFenced(name)
	}
	return s, s.gate.RUnlock, nil
}

func settingsToMeta(ws object.SpaceSettings, defRanges int) (meta.SpaceSettings, error) {
	if ws.KeepForSeconds > uint64(math.MaxInt64/int64(time.Second)) {
		return meta.SpaceSettings{}, object.Errorf(object.InvalidArgument, "keep-for of %d seconds is too long", ws.KeepForSeconds)
	}
	ms := meta.SpaceSettings{
		Retention: ws.Retention,
		KeepLast:  int(ws.KeepLast),
		KeepFor:   time.Duration(ws.KeepForSeconds) * time.Second,
		Ranges:    int(ws.Ranges),
		Placement: ws.Placement,
		Replicas:  int(ws.Replicas),
	}
	if ms.Retention == "" {
		ms.Retention = "all"
	}
	if ms.Placement == "" {
		ms.Placement = "ordered"
	}
	if ms.Ranges == 0 {
		ms.Ranges = defRanges
	}
	if ms.Placement != meta.PlaceOrdered && ms.Placement != meta.PlaceHash && meta.PlacementTag(ms.Placement) == "" {
		return ms, object.Errorf(object.InvalidArgument, "placement %q is not \"ordered\", \"hash\" or \"tag:NAME\"", ms.Placement)
	}
	if ws.Replicas > maxSpaceReplicas {
		return ms, object.Errorf(object.InvalidArgument, "replicas %d must be between 1 and %d", ws.Replicas, maxSpaceReplicas)
	}
	if ms.Placement == meta.PlaceHash && ms.Ranges > keys.HashBuckets {
		return ms, object.Errorf(object.InvalidArgument, "a hash space starts with at most %d ranges (one per bucket); it splits from there as it grows", keys.HashBuckets)
	}
	if ms.Ranges < 1 || ms.Ranges > 256 {
		return ms, object.Errorf(object.InvalidArgument, "ranges %d must be between 1 and 256", ms.Ranges)
	}
	if err := ms.Validate(); err != nil {
		return ms, object.Errorf(object.InvalidArgument, "%v", err)
	}
	return ms, nil
}

func spaceInfo(sp meta.Space) object.SpaceInfo {
	return object.SpaceInfo{
		ID: sp.ID, Name: sp.Name, Created: sp.Created.UnixNano(),
		Settings: object.SpaceSettings{
			Retention:      sp.Settings.Retention,
			KeepLast:       uint32(sp.Settings.KeepLast),
			KeepForSeconds: uint64(sp.Settings.KeepFor / time.Second),
			Ranges:         uint32(sp.Settings.Ranges),
			Placement:      sp.Settings.Placement,
			Replicas:       uint32(sp.Settings.Replicas),
		},
	}
}

// CreateSpace implements object.Service.
func (n *Node) CreateSpace(ctx context.Context, name string, ws object.SpaceSettings) (object.SpaceInfo, error) {
	if err := meta.ValidNewSpaceName(name); err != nil {
		return object.SpaceInfo{}, object.Errorf(object.BadSpaceName, "%v", err)
	}
	ms, err := settingsToMeta(ws, n.cfg.DefaultRanges)
	if err != nil {
		return object.SpaceInfo{}, err
	}
	sp, err := n.catalog.CreateSpace(ctx, name, ms)
	if errors.Is(err, meta.ErrSpaceExists) {
		return object.SpaceInfo{}, object.Errorf(object.SpaceExists, "space %q already exists", name)
	}
	if err != nil {
		return object.SpaceInfo{}, err
	}
	if _, err := n.openSpace(ctx, sp); err != nil {
		return object.SpaceInfo{}, err
	}
	return spaceInfo(sp), nil
}

// ListSpaces implements object.Service.
func (n *Node) ListSpaces(ctx context.Context) ([]object.SpaceInfo, error) {
	spaces, err := n.catalog.ListSpaces(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]object.SpaceInfo, 0, len(spaces))
	for _, sp := range spaces {
		if sp.State == meta.SpaceDeleting {
			continue
		}
		out = append(out, spaceInfo(sp))
	}
	return out, nil
}

// snapshotsKeep refuses the delete of space name if any of all that
// matches shows it, naming them.
func snapshotsKeep(name string, all []meta.Snapshot, of func(meta.Snapshot) bool) error {
	var names []string
	for _, sn := range all {
		if of(sn) {
			names = append(names, sn.Name)
		}
	}
	if len(names) > 0 {
		return object.Errorf(object.SpaceNotEmpty, "space %q has snapshots (%s): remove them first (cairn snapshot rm NAME)", name, strings.Join(names, ", "))
	}
	return nil
}

// DeleteSpace implements object.Service. A space can be deleted when it holds
// no live object; its history (noncurrent versions, delete markers) goes
// with it.
func (n *Node) DeleteSpace(ctx context.Context, name string) error {
	return n.deleteSpace(ctx, name, false)
}

// branchesKeep refuses the delete of space name (id; 0: by name) while
// branches of it exist, naming them.
func (n *Node) branchesKeep(ctx context.Context, name string, id uint32) error {
	all, err := n.catalog.ListSpaces(ctx)
	if err != nil {
		return object.Unreachable("space catalog", err)
	}
	var names []string
	for _, sp := range all {
		if sp.Branch() && (sp.BaseID == id || id == 0 && sp.Base == name) {
			names = append(names, sp.Name)
		}
	}
	if len(names) > 0 {
		return object.Errorf(object.SpaceNotEmpty, "space %q has branches (%s): merge and remove them first (cairn branch rm NAME)", name, strings.Join(names, ", "))
	}
	return nil
}

// deleteSpace is DeleteSpace, or with branch, DeleteBranch: a branch goes
// with what it holds.
func (n *Node) deleteSpace(ctx context.Context, name string, branch bool) error {
	if err := meta.ValidSpaceName(name); err != nil {
		return object.Errorf(object.BadSpaceName, "%v", err)
	}
	// Snapshots keep their space: refused early here by name, and again
	// after the fence by id (pending ones too: the fence stops new ones).
	all, err := n.catalog.Snapshots(ctx)
	if err != nil {
		return object.Unreachable("space catalog", err)
	}
	if slices.ContainsFunc(all, func(sn meta.Snapshot) bool { return sn.Name == name }) {
		return object.Errorf(object.InvalidArgument, "%q is a snapshot: remove it with cairn snapshot rm %s", name, name)
	}
	if err := snapshotsKeep(name, all, func(sn meta.Snapshot) bool { return sn.Of == name && !sn.Pending() }); err != nil {
		return err
	}
	if err := n.branchesKeep(ctx, name, 0); err != nil {
		return err
	}
	n.mu.RLock()
	s := n.mu.spaces[name]
	n.mu.RUnlock()
	if s == nil {
		// Not open here: finish a delete that stopped half-way, or open it.
		sp, err := n.catalog.GetSpace(ctx, name)
		if errors.Is(err, meta.ErrSpaceNotFound) {
			return object.Errorf(object.SpaceNotFound, "space %q does not exist", name)
		}
		if err != nil {
			return err
		}
		if sp.State == meta.SpaceDeleting {
			return n.finishDeleteSpace(ctx, sp)
		}
		if s, err = n.openSpace(ctx, sp); err != nil {
			return err
		}
	}
	switch {
	case s.meta.Branch() && !branch:
		return object.Errorf(object.InvalidArgument, "%q is a branch of %q: remove it with cairn branch rm %s", name, s.meta.Base, name)
	case branch && !s.meta.Branch():
		return object.Errorf(object.InvalidArgument, "%q is not a branch (cairn branch ls lists them)", name)
	}
	// Stop writes to the space on every node before checking it is
	// empty (fence.go); undo that unless the space goes.
	switch err := n.catalog.MoveSpaceState(ctx, name, meta.SpaceActive, meta.SpaceFencing); {
	case errors.Is(err, meta.ErrSpaceNotFound):
		return object.Errorf(object.SpaceNotFound, "space %q does not exist", name)
	case errors.Is(err, meta.ErrSpaceState):
		return object.Errorf(object.Unavailable, "space %q is being deleted by another request: %v", name, err)
	case err != nil:
		return err
	}
	deleting := false
	defer func() {
		if deleting {
			return
		}
		rctx, cancel := context.WithTimeout(context.Background(), fenceWait)
		defer cancel()
		if err := n.catalog.MoveSpaceState(rctx, name, meta.SpaceFencing, meta.SpaceActive); err != nil {
			// The fences stay: the space may be deleting after all (an
			// answer lost); if it is not, it goes back to active after
			// staleFence and the nodes lift their fences then.
			n.log.Warn("could not take a space back to active after a delete that did not happen; it is after a while", "space", name, "err", err)
			return
		}
		n.unfenceEverywhere(name)
	}()
	if err := n.fenceEverywhere(ctx, name); err != nil {
		return object.Errorf(object.Unavailable, "space %q was not deleted: writes to it could not be stopped on every node: %v", name, err)
	}
	if all, err := n.catalog.Snapshots(ctx); err != nil {
		return object.Unreachable("space catalog", err)
	} else if err := snapshotsKeep(name, all, func(sn meta.Snapshot) bool { return sn.OfID == s.meta.ID }); err != nil {
		return err
	}
	if err := n.branchesKeep(ctx, name, s.meta.ID); err != nil {
		return err
	}
	// Only client keys count: system keys (an S3 bucket's settings, its
	// open multipart uploads) go with the space.
	// Every range is asked at once (scatter-gather) for one live key.
	// (A hash space's keys are in buckets: each is asked.)
	prefixes := [][]byte{nil}
	if s.meta.Settings.Placement == meta.PlaceHash {
		prefixes = prefixes[:0]
		for b := range keys.HashBuckets {
			prefixes = append(prefixes, []byte{byte(b)})
		}
	}
	var live []mvcc.Entry
	if meta.PlacementTag(s.meta.Settings.Placement) != "" {
		// A tag space's keys are under their tags' values: its objects'
		// span is read until a client key shows.
		prefixes = nil
		lo, hi := keys.TagSpan(s.meta.ID)
		o := mvcc.ListOptions{Lower: lo, Upper: hi, Limit: 256}
		for {
			l, more, err := n.rc.Scan(ctx, &s.tab, o, 1)
			if err != nil {
				return object.FromRange(err)
			}
			for _, e := range l {
				if _, _, k, err := keys.DecodeObject(e.Obj); err == nil && !strings.HasPrefix(string(k), object.SystemKeyPrefix) {
					live = append(live, e)
				}
			}
			if len(live) > 0 || !more || len(l) == 0 {
				break
			}
			o.StartAfter = l[len(l)-1].Obj
		}
	}
	for _, pp := range prefixes {
		sys := keys.ObjectPrefix(s.meta.ID, pp, []byte(object.SystemKeyPrefix))
		l, _, err := n.rc.Scan(ctx, &s.tab, mvcc.ListOptions{Lower: keys.ObjectPrefix(s.meta.ID, pp, nil), Upper: sys, Limit: 1}, len(s.tab.Ranges()))
		if err != nil {
			return object.FromRange(err)
		}
		live = append(live, l...)
	}
	if len(live) > 0 && !branch {
		return object.Errorf(object.SpaceNotEmpty, "space %q still holds objects; delete them first", name)
	}
	if err := n.catalog.MoveSpaceState(ctx, name, meta.SpaceFencing, meta.SpaceDeleting); err != nil {
		return err
	}
	deleting = true
	s.gate.Lock()
	s.deleted = true
	s.gate.Unlock()
	n.mu.Lock()
	if n.mu.spaces[name] == s {
		delete(n.mu.spaces, name)
	}
	n.mu.Unlock()
	return n.finishDeleteSpace(ctx, s.meta)
}

func (n *Node) finishDeleteSpace(ctx context.Context, sp meta.Space) error {
	if err := n.catalog.DeleteRanges(ctx, sp.ID); err != nil {
		return err
	}
	return n.catalog.DeleteSpace(ctx, sp.Name)
}

// refreshSettings takes changes of the open spaces' settings from the
// catalog: their history policy (SetRetention) and fence (fence.go); and
// it drops the open spaces the catalog no longer has (deleted through
// another node, or deleted and made again under a new id).
func (n *Node) refreshSettings(ctx context.Context) {
	spaces, err := n.catalog.ListSpaces(ctx)
	if err != nil {
		return
	}
	n.applySettings(ctx, spaces)
	// A snapshot raises a space's mark through every node before it takes
	// its timestamp (snapshots.go); here a node catches up with removals,
	// and with marks it missed, without waiting long for a busy space.
	sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := n.refreshSnapshots(sctx); err != nil {
		n.log.Debug("refreshing snapshot marks", "err", err)
	}
}

// applySettings is refreshSettings for spaces, the catalog as read a
// moment ago.
func (n *Node) applySettings(ctx context.Context, spaces []meta.Space) {
	live := make(map[string]uint32, len(spaces))
	for _, sp := range spaces {
		if sp.State != meta.SpaceDeleting {
			live[sp.Name] = sp.ID
		}
	}
	var gone []*space
	n.mu.RLock()
	for name, s := range n.mu.spaces {
		if id, ok := live[name]; !ok || id != s.meta.ID {
			gone = append(gone, s)
		}
	}
	n.mu.RUnlock()
	for _, s := range gone {
		// The list may predate a space made since (here, just now): only
		// a fresh read drops one.
		cur, err := n.catalog.GetSpace(ctx, s.meta.Name)
		if err == nil && cur.ID == s.meta.ID && cur.State != meta.SpaceDeleting || err != nil && !errors.Is(err, meta.ErrSpaceNotFound) {
			continue
		}
		s.gate.Lock() // waits for its operations in flight
		s.deleted = true
		s.gate.Unlock()
		n.mu.Lock()
		if n.mu.spaces[s.meta.Name] == s {
			delete(n.mu.spaces, s.meta.Name)
		}
		n.mu.Unlock()
		n.log.Info("dropped a space deleted through another node", "space", s.meta.Name, "id", s.meta.ID)
	}
	for _, sp := range spaces {
		n.mu.RLock()
		s := n.mu.spaces[sp.Name]
		n.mu.RUnlock()
		if s == nil || s.meta.ID != sp.ID {
			continue
		}
		if ret := retentionOf(sp.Settings); ret != *s.retention.Load() {
			s.retention.Store(&ret)
		}
		n.liftStaleFence(ctx, sp, s)
	}
}

// SetRetention implements object.RetentionSetter: it changes space name's
// history policy (the retention fields of ws). Every node applies it to
// its writes within a second; this one at once.
func (n *Node) SetRetention(ctx context.Context, name string, ws object.SpaceSettings) (object.SpaceInfo, error) {
	// Only the retention fields count: check them as a new space's.
	ms, err := settingsToMeta(object.SpaceSettings{Retention: ws.Retention, KeepLast: ws.KeepLast, KeepForSeconds: ws.KeepForSeconds}, 1)
	if err != nil {
		return object.SpaceInfo{}, err
	}
	if cur, err := n.catalog.GetSpace(ctx, name); err == nil && cur.Branch() {
		return object.SpaceInfo{}, object.Errorf(object.InvalidArgument, "%q is a branch: it keeps its whole history (its merges compare with it) until it is removed", name)
	}
	sp, err := n.catalog.SetRetention(ctx, name, ms)
	if errors.Is(err, meta.ErrSpaceNotFound) {
		return object.SpaceInfo{}, object.Errorf(object.SpaceNotFound, "space %q does not exist", name)
	}
	if err != nil {
		return object.SpaceInfo{}, err
	}
	n.refreshSettings(ctx)
	return spaceInfo(sp), nil
}

// tableOf returns the range table of space id, for the transactions'
// lock resolution (a lock names its primary by object key, whose first
// part is the space id). A space this node has not opened yet is looked
// up in the catalog and opened.
func (n *Node) tableOf(ctx context.Context, id uint32) (*rangeclient.Table, error) {
	find := func() *space {
		n.mu.RLock()
		defer n.mu.RUnlock()
		for _, s := range n.mu.spaces {
			if s.meta.ID == id {
				return s
			}
		}
		return nil
	}
	if s := find(); s != nil {
		return &s.tab, nil
	}
	all, err := n.catalog.ListSpaces(ctx)
	if err != nil {
		return nil, object.Unreachable("the space catalog", err)
	}
	for _, sp := range all {
		if sp.ID != id {
			continue
		}
		// Read again (the list may be stale), and opened whether active or
		// fenced: a space being deleted still holds its keys until the
		// delete goes through, and the collector's marks and lock
		// resolution must read them.
		cur, err := n.catalog.GetSpace(ctx, sp.Name)
		if errors.Is(err, meta.ErrSpaceNotFound) || err == nil && (cur.ID != id || cur.State == meta.SpaceDeleting) {
			break
		}
		if err != nil {
			return nil, object.Unreachable("the space catalog", err)
		}
		s, err := n.openSpace(ctx, cur)
		if err != nil {
			return nil, err
		}
		return &s.tab, nil
	}
	return nil, object.Errorf(object.SpaceNotFound, "no space has id %d (deleted?)", id)
}

// sweepLocks resolves the expired locks of the ranges this node leads: a
// transaction whose coordinator died is ended — committed or rolled back,
// as its primary says — even on keys no reader meets.
func (n *Node) sweepLocks(ctx context.Context) {
	n.mu.RLock()
	var rs []*rng
	for _, s := range n.mu.spaces {
		for _, r := range s.tab.Ranges() {
			if rep := r.Replica(); rep != nil && rep.Leads() {
				rs = append(rs, r)
			}
		}
	}
	n.mu.RUnlock()
	now := n.cfg.Clock().UnixMilli()
	for _, r := range rs {
		d := r.Desc()
		locks, err := mvcc.Locks(kv.Reader{R: n.eng.DB()}, d.Start, d.End, 0, 256)
		if err != nil {
			n.log.Warn("reading a range's locks", "range", d.ID, "err", err)
			continue
		}
		var expired []mvcc.LockEntry
		for _, l := range locks {
			if l.Lock.Expires <= now {
				expired = append(expired, l)
			}
		}
		if len(expired) > 0 {
			if err := n.txns.ResolveExpired(ctx, expired); err != nil && ctx.Err() == nil {
				n.log.Debug("resolving expired locks", "range", d.ID, "err", err)
			}
		}
	}
}
