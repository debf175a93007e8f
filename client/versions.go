package client

import (
	"cmp"
	"context"
	"fmt"

	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/wire"
)

// CloneOptions select the source version of a clone and guard its target.
type CloneOptions struct {
	// Version is the exact source version; 0 is the latest (or the one
	// as of AsOf).
	Version, AsOf uint64
	// IfNoneMatch makes the clone only if the target key has no live
	// version (ErrPreconditionFailed otherwise).
	IfNoneMatch bool
}

// Clone makes dstSpace/dstKey a new version with the content and
// metadata of a version of space/key, sharing its chunks: no data is
// copied, whatever its size. The result's Origin names the source. The
// call needs the read grant on space and the write grant on dstSpace.
// It is retried like a Put: a retry after an answer was lost may make a
// second version of the clone.
func (c *Client) Clone(ctx context.Context, space, key, dstSpace, dstKey string, o CloneOptions) (ObjectInfo, error) {
	req := object.CloneRequest{Space: space, Key: key, Version: o.Version, AsOf: o.AsOf, DstSpace: dstSpace, DstKey: dstKey, IfNoneMatch: o.IfNoneMatch}
	var info ObjectInfo
	err := c.doKey(ctx, cmp.Or(dstSpace, space), dstKey, false, nil, func(cn *wire.Conn) (err error) {
		info, err = cn.Clone(ctx, &req)
		return err
	})
	return info, err
}

// Lineage returns where a version of space/key (0: the latest) came from,
// nearest first, following clones to their origins and versions to
// their parents (at most limit; 0: 100), and what was made of it: the
// key's next version and its clones in every space the key may read.
func (c *Client) Lineage(ctx context.Context, space, key string, version uint64, limit int) (Lineage, error) {
	req := object.LineageRequest{Space: space, Key: key, Version: version, Limit: limit}
	var l Lineage
	err := c.doKey(ctx, space, key, true, nil, func(cn *wire.Conn) (err error) {
		l, err = cn.Lineage(ctx, &req)
		return err
	})
	return l, err
}

// DiffOptions name what a diff compares a version with, and how closely.
type DiffOptions struct {
	// ToSpace and ToKey name another object to compare with ("": the
	// same one).
	ToSpace, ToKey string
	// Exact reads both versions where their manifests differ and reports
	// only the bytes that do.
	Exact bool
}

// Diff compares version from of space/key with version to (0: the
// latest) of the same object or of o.ToSpace/o.ToKey: the metadata
// fields that differ and the byte ranges where the content does,
// computed from the two manifests without reading data unless o.Exact.
func (c *Client) Diff(ctx context.Context, space, key string, from, to uint64, o DiffOptions) (Diff, error) {
	req := object.DiffRequest{Space: space, Key: key, From: from, ToSpace: o.ToSpace, ToKey: o.ToKey, To: to, Exact: o.Exact}
	var d Diff
	err := c.doKey(ctx, space, key, true, nil, func(cn *wire.Conn) (err error) {
		d, err = cn.Diff(ctx, &req)
		return err
	})
	return d, err
}

// SnapshotInfo describes a snapshot: a read-only space showing Space as
// of At.
type SnapshotInfo = object.SnapshotInfo

// CreateSnapshot makes name a read-only space that shows space exactly as
// of one timestamp (read-atomic: a transaction is in it whole or not at
// all), whatever the space holds: no data is copied. Read it as any
// space (Get, List, Versions, S3). It needs the admin grant on space.
func (c *Client) CreateSnapshot(ctx context.Context, space, name string) (SnapshotInfo, error) {
	var l []SnapshotInfo
	err := c.do(ctx, false, nil, func(cn *wire.Conn) (err error) {
		l, err = cn.Snapshot(ctx, wire.SnapshotCreate, space, name)
		return err
	})
	if err == nil && len(l) != 1 {
		err = wire.Errorf(wire.CodeMalformed, "SNAPSHOT create answered %d snapshots", len(l))
	}
	if err != nil {
		return SnapshotInfo{}, err
	}
	return l[0], nil
}

// Snapshots lists the snapshots of space ("": of every space) that the
// key may read, in name order.
func (c *Client) Snapshots(ctx context.Context, space string) ([]SnapshotInfo, error) {
	var l []SnapshotInfo
	err := c.do(ctx, true, nil, func(cn *wire.Conn) (err error) {
		l, err = cn.Snapshot(ctx, wire.SnapshotList, space, "")
		return err
	})
	return l, err
}

// DeleteSnapshot removes snapshot name; the versions it held may be
// pruned from then on. It needs the admin grant on name.
func (c *Client) DeleteSnapshot(ctx context.Context, name string) error {
	return c.do(ctx, false, nil, func(cn *wire.Conn) error {
		_, err := cn.Snapshot(ctx, wire.SnapshotDelete, "", name)
		return err
	})
}

// BranchInfo describes a branch: a writable space whose reads fall
// through to Space as of At.
type BranchInfo = object.BranchInfo

// MergeResult is a merge's outcome: its version, the keys taken and the
// keys changed on both sides.
type MergeResult = object.MergeResult

// MergeConflict is one key changed on both sides of a merge.
type MergeConflict = object.MergeConflict

// Merge strategies for MergeBranch.
const (
	MergeFail       = object.MergeFail
	MergeSourceWins = object.MergeSourceWins
	MergeDestWins   = object.MergeDestWins
)

// CreateBranch makes name a writable space whose reads fall through to
// space as of one timestamp (now, or snapshot from's: "" for now) and
// whose writes never touch space; no data is copied. It needs the admin
// grant on space.
func (c *Client) CreateBranch(ctx context.Context, space, name, from string) (BranchInfo, error) {
	var l []BranchInfo
	err := c.do(ctx, false, nil, func(cn *wire.Conn) (err error) {
		l, _, err = cn.Branch(ctx, &wire.BranchRequest{Action: wire.BranchCreate, Space: space, Name: name, From: from})
		return err
	})
	if err == nil && len(l) != 1 {
		err = wire.Errorf(wire.CodeMalformed, "BRANCH create answered %d branches", len(l))
	}
	if err != nil {
		return BranchInfo{}, err
	}
	return l[0], nil
}

// Branches lists the branches of space ("": of every space) that the key
// may read, in name order.
func (c *Client) Branches(ctx context.Context, space string) ([]BranchInfo, error) {
	var l []BranchInfo
	err := c.do(ctx, true, nil, func(cn *wire.Conn) (err error) {
		l, _, err = cn.Branch(ctx, &wire.BranchRequest{Action: wire.BranchList, Space: space})
		return err
	})
	return l, err
}

// DeleteBranch removes branch name with everything written in it. It
// needs the admin grant on name or on the space it branches from.
func (c *Client) DeleteBranch(ctx context.Context, name string) error {
	return c.do(ctx, false, nil, func(cn *wire.Conn) error {
		_, _, err := cn.Branch(ctx, &wire.BranchRequest{Action: wire.BranchDelete, Name: name})
		return err
	})
}

// MergeBranch merges branch name into the space it branches from (into:
// that space's name, or ""), three-way and by object, in one
// transaction: a key changed only in the branch is taken; one changed on
// both sides is a conflict, settled by strategy (MergeFail, the default:
// nothing is merged and the result lists the conflicts). It needs the
// read grant on the branch and the write grant on the space.
func (c *Client) MergeBranch(ctx context.Context, name, into, strategy string) (MergeResult, error) {
	var res MergeResult
	err := c.do(ctx, false, nil, func(cn *wire.Conn) (err error) {
		_, res, err = cn.Branch(ctx, &wire.BranchRequest{Action: wire.BranchMerge, Name: name, Into: into, Strategy: strategy})
		return err
	})
	return res, err
}

// SpaceDiffOptions narrow and page a space diff.
type SpaceDiffOptions struct {
	Prefix     string // only keys under it
	StartAfter string // the page after this key (SpaceDiff.Next)
	Limit      uint32 // 0: the server's default (1000)
}

// SpaceDiff is one page of a space diff; KeyChange one key in it.
type (
	SpaceDiff = object.SpaceDiff
	KeyChange = object.KeyChange
)

// DiffSpaces lists the keys whose objects differ between from and to —
// two views of one space: the space, its snapshots, its branches — as
// added, removed or changed, in key order. Its cost follows the size of
// the change, not of the space. It needs the read grant on both.
func (c *Client) DiffSpaces(ctx context.Context, from, to string, o SpaceDiffOptions) (SpaceDiff, error) {
	var d SpaceDiff
	err := c.do(ctx, true, nil, func(cn *wire.Conn) (err error) {
		d, err = cn.DiffSpaces(ctx, &object.SpaceDiffRequest{From: from, To: to, Prefix: o.Prefix, StartAfter: o.StartAfter, Limit: o.Limit})
		return err
	})
	return d, err
}

// Follow reads the document space/key and, breadth first, the objects its
// references ({"$ref": "SPACE/KEY"}) reach, to depth references away
// (0: the document alone), all as of one snapshot, in one round trip.
// Version and AsOf (GetOptions) choose the document's version and the
// snapshot. An object that is missing, in a space the key may not read,
// or too large to come in the answer (its bodies fill at most half a
// frame) has its Err set, an *Error matching ErrNotFound,
// ErrAccessDenied or ErrTooLarge; read a large one with Get.
func (c *Client) Follow(ctx context.Context, space, key string, depth int, opts ...GetOption) (FollowResult, error) {
	if depth < 0 || depth > object.MaxFollowDepth {
		return FollowResult{}, fmt.Errorf("client: follow depth %d is outside 0..%d", depth, object.MaxFollowDepth)
	}
	g := getRequest(space, key, opts)
	req := object.FollowRequest{Space: space, Key: key, Version: g.Version, AsOf: g.AsOf, Depth: depth}
	var res FollowResult
	err := c.doKey(ctx, space, key, true, nil, func(cn *wire.Conn) (err error) {
		res, err = cn.Follow(ctx, &req)
		return err
	})
	return res, err
}

// IsDocument reports whether objects of a content type are documents
// (application/json, with any parameters): those whose references Follow
// follows.
func IsDocument(contentType string) bool { return object.IsDocument(contentType) }

// Query returns a page of the live objects of req.Space whose visible
// version passes req.Filter, a CEL expression over key, tags.NAME,
// meta.NAME, size, content_type, modified, version_count and doc.PATH
// (docs/api.md, "Queries"), in key order. The ranges run the filter next
// to their data, each on the candidates its tag index names. A page that
// is Truncated continues with req.After = Next and req.AsOf = AsOf (the
// same snapshot); QueryAll reads every page.
func (c *Client) Query(ctx context.Context, req QueryRequest) (QueryResult, error) {
	var res QueryResult
	err := c.do(ctx, true, nil, func(cn *wire.Conn) (err error) {
		res, err = cn.Query(ctx, &req)
		return err
	})
	return res, err
}

// QueryAll runs a query page by page at one snapshot and returns every
// match (at most limit: 0 means no limit).
func (c *Client) QueryAll(ctx context.Context, req QueryRequest, limit int) ([]ObjectInfo, error) {
	var out []ObjectInfo
	for {
		res, err := c.Query(ctx, req)
		if err != nil {
			return out, err
		}
		out = append(out, res.Objects...)
		if limit > 0 && len(out) >= limit {
			return out[:limit], nil
		}
		if !res.Truncated || res.Next == "" {
			return out, nil
		}
		req.After, req.AsOf = res.Next, res.AsOf
	}
}

// AddIndex declares a field index on field (doc.PATH) of space, of type
// "string", "number" or "time". It returns once every range indexes the
// documents written from then on; the documents written before are
// indexed in the background: Indexes shows the build's progress, and
// queries use the index once its State is "ready". Adding it again
// resumes a build that stopped.
func (c *Client) AddIndex(ctx context.Context, space, field, typ string) ([]IndexInfo, error) {
	return c.index(ctx, &wire.IndexRequest{Action: wire.IndexAdd, Space: space, Path: field, Type: typ}, false)
}

// DropIndex removes a field index and its entries.
func (c *Client) DropIndex(ctx context.Context, space, field string) ([]IndexInfo, error) {
	return c.index(ctx, &wire.IndexRequest{Action: wire.IndexDrop, Space: space, Path: field}, false)
}

// Indexes lists space's field indexes.
func (c *Client) Indexes(ctx context.Context, space string) ([]IndexInfo, error) {
	return c.index(ctx, &wire.IndexRequest{Action: wire.IndexList, Space: space}, true)
}

func (c *Client) index(ctx context.Context, r *wire.IndexRequest, idempotent bool) ([]IndexInfo, error) {
	var out []IndexInfo
	err := c.do(ctx, idempotent, nil, func(cn *wire.Conn) (err error) {
		out, err = cn.Index(ctx, r)
		return err
	})
	return out, err
}

// SQL runs a read-only SQL statement over the spaces as tables (the
// database cairn: a table per space and snapshot the key may read;
// docs/api.md, "SQL") and returns its columns and rows as text (a nil
// cell is NULL). The answer fills at most half a frame: add a LIMIT, or
// use the node's SQL port (cairn server --sql-port) for large results.
func (c *Client) SQL(ctx context.Context, stmt string) (SQLResult, error) {
	var res SQLResult
	err := c.do(ctx, true, nil, func(cn *wire.Conn) (err error) {
		res, err = cn.SQL(ctx, stmt)
		return err
	})
	return res, err
}
