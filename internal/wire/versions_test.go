package wire

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/cairn-db/cairn/internal/chunk"
	"github.com/cairn-db/cairn/internal/object"
)

var sqlA, sqlB = "a", ""

func sampleVersionBodies(r *rand.Rand) [][]byte {
	info := randInfo(r)
	clone := info
	clone.Origin = &object.VersionRef{Space: "src", Key: "k", Version: 9}
	l := object.Lineage{Version: info, Ancestors: []object.LineageEntry{{Info: info, Clone: true}, {Info: object.Info{Space: "s", Key: "k", Version: 3}, Gone: true}},
		Children: []object.LineageEntry{{Info: info}}, Truncated: true}
	df := object.Diff{From: info, To: info, Changes: []object.FieldChange{{Field: "meta.a", To: "1", Added: true}, {Field: "size", From: "1", To: "2"}},
		Ranges: []chunk.Extent{{Off: 0, Len: 5}, {Off: 100, Len: 1}}, Exact: true}
	return [][]byte{
		AppendCloneRequest(nil, &object.CloneRequest{Space: "a", Key: "b", Version: 1, AsOf: 2, DstSpace: "c", DstKey: "d", IfNoneMatch: true}),
		AppendCloneResult(nil, &clone),
		AppendLineageRequest(nil, &object.LineageRequest{Space: "a", Key: "b", Version: 7, Limit: 10}),
		AppendLineage(nil, &l),
		AppendDiffRequest(nil, &object.DiffRequest{Space: "a", Key: "b", From: 1, ToSpace: "c", ToKey: "d", To: 2, Exact: true}),
		AppendDiff(nil, &df),
		AppendSnapshotRequest(nil, SnapshotCreate, "space", "snap"),
		AppendSnapshotInfos(nil, []object.SnapshotInfo{{Name: "snap", Space: "space", At: 5, Created: 6}, {Name: "s2", Space: "sp", At: 7}}),
		AppendBranchRequest(nil, &BranchRequest{Action: BranchMerge, Name: "dev", Into: "main", Strategy: "source-wins"}),
		AppendBranchInfos(nil, []object.BranchInfo{{Name: "dev", Space: "main", At: 5, Created: 6}}),
		AppendMergeResult(nil, &object.MergeResult{Version: 9, Applied: 3, Conflicts: []object.MergeConflict{{Key: "a", Reason: "changed on both sides"}}}),
		AppendBranchRequest(nil, &BranchRequest{Action: BranchCreate, Space: "main", Name: "dev", From: "monday"}),
		AppendSpaceDiffRequest(nil, &object.SpaceDiffRequest{From: "a", To: "b", Prefix: "p/", StartAfter: "p/x", Limit: 7}),
		AppendSpaceDiff(nil, &object.SpaceDiff{Truncated: true, Next: "k", Changes: []object.KeyChange{
			{Key: "a", Change: object.KeyAdded, To: &info}, {Key: "b", Change: object.KeyRemoved, From: &info},
			{Key: "c", Change: object.KeyChanged, From: &info, To: &info}}}),
		AppendFollowRequest(nil, &object.FollowRequest{Space: "a", Key: "b", Version: 3, AsOf: 4, Depth: 2}),
		AppendFollowResult(nil, &object.FollowResult{At: 9, Truncated: true, Objects: []object.Followed{
			{Space: "a", Key: "b", Info: info, Data: []byte("{}")},
			{Space: "c", Key: "d", Depth: 1, Err: &Error{Code: CodeNotFound, Message: "no such object"}}}}, wireError),
		AppendQueryRequest(nil, &object.QueryRequest{Space: "a", Filter: `tags.c == "r"`, AsOf: 5, Limit: 9, After: "k", OrderBy: "size", Desc: true, Docs: true}),
		AppendQueryResult(nil, &object.QueryResult{AsOf: 5, Truncated: true, Next: "k", Plan: "tag equal", Ranges: 3, Examined: 7,
			Objects: []object.Info{info, {Space: "a", Key: "doc", Version: 2}}, Docs: map[string]json.RawMessage{"doc": json.RawMessage(`{"a":1}`)}}),
		AppendIndexRequest(nil, &IndexRequest{Action: IndexAdd, Space: "s", Path: "doc.age", Type: "number"}),
		AppendIndexInfos(nil, []object.IndexInfo{{Path: "doc.age", Type: "number", State: "building", Created: 5, RangesDone: 1, Ranges: 3, Objects: 512, Error: "x"}}),
		AppendSQLResult(nil, &object.SQLResult{Columns: []string{"key", "n"}, Rows: [][]*string{{&sqlA, nil}, {&sqlB, &sqlA}}}),
	}
}

// wireError is the *Error err is (FOLLOW answers carry them).
func wireError(err error) *Error {
	var e *Error
	errors.As(err, &e)
	return e
}

// decodeVersionBody decodes body as kind (the order of
// sampleVersionBodies) and re-encodes it.
func decodeVersionBody(kind int, b []byte) (v any, again func() (any, error), err error) {
	switch kind % 21 {
	case 20:
		x, err := DecodeSQLResult(b)
		return x, func() (any, error) { return DecodeSQLResult(AppendSQLResult(nil, &x)) }, err
	case 18:
		x, err := DecodeIndexRequest(b)
		return x, func() (any, error) { return DecodeIndexRequest(AppendIndexRequest(nil, &x)) }, err
	case 19:
		x, err := DecodeIndexInfos(b)
		return x, func() (any, error) { return DecodeIndexInfos(AppendIndexInfos(nil, x)) }, err
	case 16:
		x, err := DecodeQueryRequest(b)
		return x, func() (any, error) { return DecodeQueryRequest(AppendQueryRequest(nil, &x)) }, err
	case 17:
		x, err := DecodeQueryResult(b)
		return x, func() (any, error) { return DecodeQueryResult(AppendQueryResult(nil, &x)) }, err
	case 14:
		x, err := DecodeFollowRequest(b)
		return x, func() (any, error) { return DecodeFollowRequest(AppendFollowRequest(nil, &x)) }, err
	case 15:
		x, err := DecodeFollowResult(b)
		return x, func() (any, error) { return DecodeFollowResult(AppendFollowResult(nil, &x, wireError)) }, err
	case 0:
		x, err := DecodeCloneRequest(b)
		return x, func() (any, error) { return DecodeCloneRequest(AppendCloneRequest(nil, &x)) }, err
	case 1:
		x, err := DecodeCloneResult(b)
		return x, func() (any, error) { return DecodeCloneResult(AppendCloneResult(nil, &x)) }, err
	case 2:
		x, err := DecodeLineageRequest(b)
		return x, func() (any, error) { return DecodeLineageRequest(AppendLineageRequest(nil, &x)) }, err
	case 3:
		x, err := DecodeLineage(b)
		return x, func() (any, error) { return DecodeLineage(AppendLineage(nil, &x)) }, err
	case 4:
		x, err := DecodeDiffRequest(b)
		return x, func() (any, error) { return DecodeDiffRequest(AppendDiffRequest(nil, &x)) }, err
	case 5:
		x, err := DecodeDiff(b)
		return x, func() (any, error) { return DecodeDiff(AppendDiff(nil, &x)) }, err
	case 6:
		type req struct {
			action      byte
			space, name string
		}
		var x req
		var err error
		x.action, x.space, x.name, err = DecodeSnapshotRequest(b)
		return x, func() (any, error) {
			var y req
			var err error
			y.action, y.space, y.name, err = DecodeSnapshotRequest(AppendSnapshotRequest(nil, x.action, x.space, x.name))
			return y, err
		}, err
	case 7:
		x, err := DecodeSnapshotInfos(b)
		return x, func() (any, error) { return DecodeSnapshotInfos(AppendSnapshotInfos(nil, x)) }, err
	case 8, 11:
		x, err := DecodeBranchRequest(b)
		return x, func() (any, error) { return DecodeBranchRequest(AppendBranchRequest(nil, &x)) }, err
	case 12:
		x, err := DecodeSpaceDiffRequest(b)
		return x, func() (any, error) { return DecodeSpaceDiffRequest(AppendSpaceDiffRequest(nil, &x)) }, err
	case 13:
		x, err := DecodeSpaceDiff(b)
		return x, func() (any, error) { return DecodeSpaceDiff(AppendSpaceDiff(nil, &x)) }, err
	case 9:
		x, err := DecodeBranchInfos(b)
		return x, func() (any, error) { return DecodeBranchInfos(AppendBranchInfos(nil, x)) }, err
	default:
		x, err := DecodeMergeResult(b)
		return x, func() (any, error) { return DecodeMergeResult(AppendMergeResult(nil, &x)) }, err
	}
}

// TestVersionBodies: each CLONE, LINEAGE, DIFF, SNAPSHOT and BRANCH body round-trips, and
// every truncation of it is refused.
func TestVersionBodies(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	for kind, b := range sampleVersionBodies(r) {
		v, again, err := decodeVersionBody(kind, b)
		if err != nil {
			t.Fatalf("kind %d: %v", kind, err)
		}
		if v2, err := again(); err != nil || !reflect.DeepEqual(v, v2) {
			t.Fatalf("kind %d does not round-trip: %v\n%+v\n%+v", kind, err, v, v2)
		}
		for i := range len(b) {
			if _, _, err := decodeVersionBody(kind, b[:i]); err == nil {
				t.Fatalf("kind %d: %d of %d bytes decoded", kind, i, len(b))
			}
		}
		if _, _, err := decodeVersionBody(kind, append(b, 0)); err == nil {
			t.Fatalf("kind %d: a trailing byte decoded", kind)
		}
	}
}

func FuzzDecodeVersionBodies(f *testing.F) {
	for kind, b := range sampleVersionBodies(rand.New(rand.NewPCG(2, 2))) {
		f.Add(uint8(kind), b)
	}
	f.Fuzz(func(t *testing.T, kind uint8, b []byte) {
		v, again, err := decodeVersionBody(int(kind), b)
		if err != nil {
			return
		}
		if v2, err := again(); err != nil || !reflect.DeepEqual(v, v2) {
			t.Fatalf("kind %d does not round-trip: %v\n%+v\n%+v", kind, err, v, v2)
		}
	})
}
