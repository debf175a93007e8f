package object

import (
	"cmp"
	"context"
	"encoding/binary"
	"maps"
	"slices"
	"strings"

	"github.com/cairn-db/cairn/internal/chunk"
	"github.com/cairn-db/cairn/internal/keys"
	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/mvcc"
	"github.com/cairn-db/cairn/internal/tstamp"
)

// A branch is a writable space of its own (its id, its ranges) whose
// reads fall through to another space, its base, as of one timestamp,
// the branch point: a key the branch has no version of reads as the
// base's key did then; once the branch writes or deletes it, the
// branch's own versions answer. Making one copies nothing.
//
// Every version a branch writes is stamped after the branch point (the
// branch is usable only once its point is taken), so a version number
// says which side holds it: at or below the point, the base; above it,
// the branch. A key's history in a branch is the branch's versions, then
// the base's up to the point. A listing merges the branch's keys (its
// delete markers hide the base's) with the base's as of the point.
//
// The base's versions at or below the point never change (the branch
// holds them as a snapshot does), so a conditional write to a key the
// branch has not written is checked against the base's version in the
// object layer and then requires, on the branch's range, that the key
// still have no version there (kv.PutCmd.IfNoVersion): atomic without a
// transaction over the two spaces.

// Brancher is implemented by a Service that makes branches.
type Brancher interface {
	// CreateBranch makes name a branch of space as of a fresh timestamp,
	// or of snapshot from's timestamp ("": now): SpaceExists if the name
	// is taken, Unavailable if a node of the cluster could not be told.
	CreateBranch(ctx context.Context, space, name, from string) (BranchInfo, error)
	// Branches lists the branches of space ("": of every space) in name
	// order (one being made has At 0).
	Branches(ctx context.Context, space string) ([]BranchInfo, error)
	// DeleteBranch removes branch name with everything written in it
	// (SpaceNotFound if there is no such branch).
	DeleteBranch(ctx context.Context, name string) error
	// MergeBranch merges a branch into its base (MergeRequest).
	MergeBranch(ctx context.Context, req *MergeRequest) (MergeResult, error)
}

// BranchInfo describes a branch.
type BranchInfo struct {
	Name, Space string // the branch, and the space it branches from
	At          uint64 // the branch point
	Created     int64  // Unix nanoseconds
}

// Merge strategies: what a merge does with a key both sides changed.
const (
	MergeFail       = "fail"        // nothing is merged; the conflicts are reported
	MergeSourceWins = "source-wins" // the branch's version is taken
	MergeDestWins   = "dest-wins"   // the space's version stays
)

// MergeRequest merges branch Branch into Into (the space it branches
// from; "" is that space).
type MergeRequest struct {
	Branch, Into string
	Strategy     string // MergeFail ("" too), MergeSourceWins or MergeDestWins
}

// MergeResult is a merge's outcome. A merge is three-way and by object:
// each key the branch wrote is compared with the space's version at the
// branch point (the ancestor) and now; changed only in the branch, it is
// taken; changed on both sides (differently), it is a conflict, settled
// by the strategy. Everything taken is written in one transaction.
type MergeResult struct {
	// Version is the merge transaction's commit timestamp: every key
	// taken has it as its new version in the space. 0 if nothing was
	// written (nothing to take, or conflicts under MergeFail).
	Version uint64
	// Applied counts the keys taken from the branch (deletes too).
	Applied int
	// Conflicts are the keys changed on both sides, in key order; under
	// MergeFail they stopped the merge.
	Conflicts []MergeConflict
}

// MergeConflict is one key changed on both sides of a merge.
type MergeConflict struct {
	Key, Reason string
}

// rebase is obj, an object key, as the same key of space id (an object
// key begins with its space's id).
func rebase(obj []byte, id uint32) []byte {
	b := slices.Clone(obj)
	binary.BigEndian.PutUint32(b, id)
	return b
}

// readBranch is readRecord in branch s of base b at point at.
func (st *Store) readBranch(ctx context.Context, s, b OpenSpace, at uint64, obj []byte, version, asOf uint64) (*mvcc.Record, error) {
	if (version != 0 && version <= at) || (version == 0 && asOf != 0 && asOf <= at) {
		return st.readOwn(ctx, b, rebase(obj, b.ID()), version, asOf) // the base's side of the point
	}
	rec, err := st.readOwn(ctx, s, obj, version, asOf)
	if version != 0 || KindOf(err) != NotFound {
		return rec, err
	}
	// None in the branch (as of asOf): deleted there, or never written
	// there, when the base shows through.
	if own, oerr := st.hasOwn(ctx, s, obj, asOf); oerr != nil || own {
		if oerr != nil {
			return nil, oerr
		}
		return rec, err
	}
	return st.readOwn(ctx, b, rebase(obj, b.ID()), 0, at)
}

// hasOwn reports whether branch s has a version of obj (a delete marker
// counts) at or before asOf (0: at all).
func (st *Store) hasOwn(ctx context.Context, s OpenSpace, obj []byte, asOf uint64) (bool, error) {
	before := uint64(0)
	if asOf != 0 {
		before = asOf + 1
	}
	recs, _, err := st.versionsOwn(ctx, s, obj, before, 1)
	return len(recs) > 0, err
}

// branchConditions makes the conditions of c, a write to obj in space s,
// hold in a branch: a key the branch has no version of shows its base's
// version, so IfMatch and IfNoneMatch are checked against that (which
// never changes), and the write then needs the branch to still have no
// version of the key. Any other write is left alone.
func (st *Store) branchConditions(ctx context.Context, s OpenSpace, obj []byte, c *kv.PutCmd) error {
	b, at := s.Base()
	if b == nil || (c.IfMatch == 0 && !c.IfNoneMatch) || c.IfMatch > at {
		return nil // not a branch, no condition on the base, or one on the branch's own version
	}
	if own, err := st.hasOwn(ctx, s, obj, 0); err != nil || own {
		return err // the branch's own version decides (a base version cannot match it)
	}
	rec, err := st.readOwn(ctx, b, rebase(obj, b.ID()), 0, at)
	if err != nil && KindOf(err) != NotFound {
		return err
	}
	live := err == nil
	if c.IfMatch != 0 && (!live || rec.Version != c.IfMatch) {
		if !live {
			return Errorf(PreconditionFailed, "the object does not exist")
		}
		return Errorf(PreconditionFailed, "latest version is %s, not %s", tstamp.String(rec.Version), tstamp.String(c.IfMatch))
	}
	if c.IfNoneMatch && live {
		return Errorf(PreconditionFailed, "the object exists (in the branch's base)")
	}
	c.IfMatch, c.IfNoneMatch, c.IfAbsent, c.IfNoVersion = 0, false, false, true
	return nil
}

// sideEntry is one entry of one side of a branch's listing.
type sideEntry struct {
	key string
	rec *mvcc.Record
}

// before orders listing positions: key ascending, then version
// descending (a key's newest version first).
func (e sideEntry) before(o sideEntry) bool {
	if c := strings.Compare(e.key, o.key); c != 0 {
		return c < 0
	}
	return e.rec.Version > o.rec.Version
}

// listBounds is the span of a listing of prefix in space id: system keys
// are left out unless asked for (List).
func listBounds(ctx context.Context, id uint32, prefix string) (lower, upper []byte) {
	lower = keys.ObjectPrefix(id, nil, []byte(prefix))
	upper = keys.PrefixEnd(lower)
	if !strings.HasPrefix(prefix, SystemKeyPrefix) || !SystemKeys(ctx) {
		// System keys sort after every UTF-8 key: end the span before them.
		upper = minBytes(upper, keys.ObjectPrefix(id, nil, []byte(SystemKeyPrefix)))
	}
	return lower, upper
}

// listSide lists one side of a branch's listing: space sp's keys under
// req's prefix after (startAfter, afterVersion), as of asOf; markers
// lists the keys whose visible version is a delete marker too.
func (st *Store) listSide(ctx context.Context, sp OpenSpace, req *ListRequest, startAfter string, afterVersion, asOf uint64, limit int, markers bool) ([]sideEntry, bool, error) {
	return st.scanSide(ctx, sp, req.Prefix, startAfter, mvcc.ListOptions{Limit: limit, AsOf: asOf,
		AllVersions: req.AllVersions, AfterVersion: afterVersion, Markers: markers && !req.AllVersions})
}

// scanSide is a listing of space sp's keys under prefix after startAfter
// (o's span and StartAfter are set here), its keys decoded.
func (st *Store) scanSide(ctx context.Context, sp OpenSpace, prefix, startAfter string, o mvcc.ListOptions) ([]sideEntry, bool, error) {
	o.Lower, o.Upper = listBounds(ctx, sp.ID(), prefix)
	if startAfter != "" {
		o.StartAfter = keys.Object(sp.ID(), nil, []byte(startAfter))
	} else {
		o.AfterVersion = 0
	}
	var ents []mvcc.Entry
	var more bool
	for attempt := 0; ; attempt++ {
		// A range that split under the scan: read the table again; a
		// transaction's locks in the span: resolve them and scan again.
		err := st.cfg.Ranges.RetryMoved(ctx, func() (err error) {
			ents, more, err = st.cfg.Ranges.Scan(ctx, sp.Table(), o, 1)
			return err
		}, func() bool { return true })
		if again, serr := st.settle(ctx, err, attempt); serr != nil {
			return nil, false, serr
		} else if !again {
			if err != nil {
				return nil, false, FromRange(err)
			}
			break
		}
	}
	out := make([]sideEntry, len(ents))
	for i, e := range ents {
		_, _, key, err := keys.DecodeObject(e.Obj)
		if err != nil {
			return nil, false, Errorf(Corrupt, "object key: %v", err)
		}
		out[i] = sideEntry{key: string(key), rec: e.Rec}
	}
	return out, more, nil
}

// listBranchRounds bounds the scans of each side one page of a branch's
// listing makes.
const listBranchRounds = 8

// listBranch is a page of a listing of branch s (base b, point at): its
// own keys merged with the base's as of the point, the branch's
// (delete markers included) hiding the base's of the same key; with
// AllVersions, a key's versions in the branch come before (are newer
// than) those of the base.
func (st *Store) listBranch(ctx context.Context, s, b OpenSpace, at uint64, req *ListRequest, limit int) (ListResult, error) {
	asOf := req.AsOf
	if asOf == 0 {
		ts, err := st.cfg.Timestamps.Next(ctx) // both sides at one timestamp
		if err != nil {
			return ListResult{}, Unreachable("timestamp oracle", err)
		}
		asOf = ts
	}
	baseAt := min(asOf, at)
	name := st.namer()
	out := ListResult{Objects: []Info{}}
	after, afterVersion := req.StartAfter, req.AfterVersion
	for round := 0; ; round++ {
		if round == listBranchRounds {
			// Pages of delete markers (the branch hides many base keys):
			// answer what there is, and where to go on from.
			out.Truncated, out.Next, out.NextVersion = true, after, afterVersion
			return out, nil
		}
		var own []sideEntry
		var ownMore bool
		if asOf > at { // as of the point or before, the branch had nothing
			var err error
			if own, ownMore, err = st.listSide(ctx, s, req, after, afterVersion, asOf, limit, true); err != nil {
				return ListResult{}, err
			}
		}
		base, baseMore, err := st.listSide(ctx, b, req, after, afterVersion, baseAt, limit, false)
		if err != nil {
			return ListResult{}, err
		}
		// The entries both pages cover: up to the end of a page that
		// stopped short (past it, the other side may be missing some).
		var bound *sideEntry
		if ownMore {
			bound = &own[len(own)-1]
		}
		if baseMore && (bound == nil || base[len(base)-1].before(*bound)) {
			bound = &base[len(base)-1]
		}
		i, j := 0, 0
		for i < len(own) || j < len(base) {
			var e sideEntry
			switch {
			case j == len(base) || (i < len(own) && !base[j].before(own[i])):
				e = own[i]
				i++
				if !req.AllVersions && j < len(base) && base[j].key == e.key {
					j++ // the branch's version of the key hides the base's
				}
			default:
				e = base[j]
				j++
			}
			if bound != nil && bound.before(e) {
				break
			}
			if len(out.Objects) == limit {
				out.Truncated = true
				return out, nil
			}
			after, afterVersion = e.key, 0
			if req.AllVersions {
				afterVersion = e.rec.Version
			}
			if !req.AllVersions && e.rec.DeleteMarker {
				continue // deleted in the branch
			}
			out.Objects = append(out.Objects, objectInfo(req.Space, e.key, e.rec))
			name(ctx, &out.Objects[len(out.Objects)-1])
			out.Next, out.NextVersion = e.key, afterVersion
		}
		if bound == nil {
			out.Next, out.NextVersion = "", 0
			return out, nil
		}
	}
}

// MergeBranch implements Brancher.
func (st *Store) MergeBranch(ctx context.Context, req *MergeRequest) (MergeResult, error) {
	strategy := cmp.Or(req.Strategy, MergeFail)
	if strategy != MergeFail && strategy != MergeSourceWins && strategy != MergeDestWins {
		return MergeResult{}, Errorf(InvalidArgument, "merge strategy %q is not %s, %s or %s", strategy, MergeFail, MergeSourceWins, MergeDestWins)
	}
	s, release, err := st.cfg.Spaces.Acquire(ctx, req.Branch)
	if err != nil {
		return MergeResult{}, err
	}
	b, at := s.Base()
	release() // the transaction holds each space as it uses it
	if b == nil {
		return MergeResult{}, Errorf(InvalidArgument, "%q is not a branch (cairn branch ls lists them)", req.Branch)
	}
	into, err := st.cfg.Spaces.Name(ctx, b.ID())
	if err != nil {
		return MergeResult{}, err
	}
	if req.Into != "" && req.Into != into {
		return MergeResult{}, Errorf(InvalidArgument, "branch %q merges into the space it branches from, %q, not %q", req.Branch, into, req.Into)
	}
	t, err := st.Begin(ctx, TxnOptions{})
	if err != nil {
		return MergeResult{}, err
	}
	done := false
	defer func() {
		if !done {
			t.Rollback()
		}
	}()
	dst, drelease, err := st.cfg.Spaces.Acquire(ctx, into)
	if err != nil {
		return MergeResult{}, err
	}
	t.touched(dst, into)
	drelease()
	// The commit holds the branch too: one removed meanwhile (and its
	// hold on the base with it) fails the merge.
	t.touched(s, req.Branch)
	mergedAt, err := st.cfg.Spaces.MergePoint(ctx, req.Branch)
	if err != nil {
		return MergeResult{}, err
	}
	var res MergeResult
	// Every key the branch wrote, as of the transaction's snapshot.
	list := &ListRequest{Space: req.Branch}
	after := ""
	for {
		page, more, err := st.listSide(ctx, s, list, after, 0, t.StartTS(), listMax, true)
		if err != nil {
			return MergeResult{}, err
		}
		for _, e := range page {
			after = e.key
			applied, conflict, err := st.mergeKey(ctx, t, s, dst, at, mergedAt, e, strategy)
			if err != nil {
				return MergeResult{}, err
			}
			if conflict != "" {
				res.Conflicts = append(res.Conflicts, MergeConflict{Key: e.key, Reason: conflict})
			}
			if applied {
				res.Applied++
			}
		}
		if !more {
			break
		}
	}
	if strategy == MergeFail && len(res.Conflicts) > 0 {
		res.Applied = 0
		return res, nil // nothing merged, nothing agreed
	}
	if res.Applied > 0 {
		res.Version, err = t.Commit(ctx)
		done = true
		if err != nil {
			return MergeResult{}, err
		}
	}
	// The two sides now agree on every key as the branch showed it at the
	// transaction's start (the space's kept where it won): the next merge
	// compares from there. Should this record be lost, the next merge
	// compares from an older point and may report conflicts where there
	// are none, never miss one.
	_ = st.cfg.Spaces.SetMergePoint(context.WithoutCancel(ctx), req.Branch, s.ID(), t.StartTS())
	return res, nil
}

// mergeKey merges the branch's visible version of one key (e) into dst
// within t: it reports whether the branch's version is written, and why
// the key is a conflict ("" if it is not). The ancestor both sides are
// compared with is what the branch showed of the key at its last merge
// (mergedAt; for a key it did not change, that is its base's version at
// the branch point), or else the space's at the branch point: a side
// changed the key if it now holds another object than the ancestor.
func (st *Store) mergeKey(ctx context.Context, t *Txn, s, dst OpenSpace, at, mergedAt uint64, e sideEntry, strategy string) (bool, string, error) {
	obj := objKey(dst, []byte(e.key))
	sobj := objKey(s, []byte(e.key))
	cur, _, err := t.tx.Read(ctx, dst.Table(), obj) // the space now (nil: absent)
	if err != nil {
		return false, "", FromRange(err)
	}
	src := e.rec
	if src.DeleteMarker {
		src = nil
	}
	if sameContent(src, cur) {
		return false, "", nil // the same on both sides (made so twice, or merged before)
	}
	var anc *mvcc.Record
	if mergedAt != 0 {
		anc, err = st.readRecord(ctx, s, sobj, 0, mergedAt)
	} else {
		anc, err = st.readOwn(ctx, dst, obj, 0, at)
	}
	if KindOf(err) == NotFound {
		anc, err = nil, nil
	}
	if err != nil {
		return false, "", err
	}
	if sameContent(src, anc) {
		return false, "", nil // only the space changed it: it stays
	}
	reason := ""
	if !sameContent(cur, anc) {
		switch {
		case src == nil:
			reason = "deleted in the branch, changed in the space"
		case cur == nil:
			reason = "changed in the branch, deleted in the space"
		default:
			reason = "changed in the branch and in the space"
		}
		if strategy != MergeSourceWins {
			return false, reason, nil
		}
	}
	origin := &mvcc.Origin{SpaceID: s.ID(), Key: e.key, Version: e.rec.Version}
	if src == nil {
		return true, reason, FromRange(t.tx.Write(obj, &mvcc.Record{DeleteMarker: true, Origin: origin}, dst.Retention()))
	}
	full, err := st.readOwn(ctx, s, sobj, src.Version, 0)
	if err != nil {
		return false, "", err
	}
	// The merged version is a child of the branch's (lineage), recorded
	// before it commits as a clone's is: a merge that then fails leaves
	// an entry that lineage skips.
	if _, err := st.propose(ctx, s, sobj, (&kv.ChildCmd{Obj: sobj, Version: full.Version, Child: obj}).Encode()); err != nil {
		return false, "", err
	}
	if full.Manifest != nil {
		m, err := chunk.UnmarshalManifest(full.Manifest)
		if err != nil {
			return false, "", Errorf(Corrupt, "the manifest of %q in the branch: %v", e.key, err)
		}
		if err := st.touchShared(ctx, m); err != nil {
			return false, "", err
		}
	}
	rec := &mvcc.Record{
		Size: full.Size, Hash: full.Hash, ETag: full.ETag, ContentType: full.ContentType,
		Meta: full.Meta, Tags: full.Tags, Headers: full.Headers, Inline: full.Inline, Manifest: full.Manifest,
		Origin: origin,
	}
	return true, reason, FromRange(t.tx.Write(obj, rec, dst.Retention()))
}

// sameContent reports whether two visible versions (nil: none) hold the
// same object: one version, or equal bytes and metadata.
func sameContent(a, b *mvcc.Record) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Version == b.Version || (a.Size == b.Size && a.Hash == b.Hash && a.ETag == b.ETag &&
		a.ContentType == b.ContentType && maps.Equal(a.Meta, b.Meta) && maps.Equal(a.Tags, b.Tags))
}

// baseVersion refuses a change of version v in place (its removal, its
// tags) when s is a branch and v is its base's: a branch changes only
// what it wrote.
func baseVersion(s OpenSpace, v uint64) error {
	if b, at := s.Base(); b != nil && v <= at {
		return Errorf(InvalidArgument, "version %s is the branch's base's (at or before the branch point %s); a branch changes only the versions it wrote", tstamp.String(v), tstamp.String(at))
	}
	return nil
}
