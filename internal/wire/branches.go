package wire

import (
	"context"
	"slices"

	"github.com/cairn-db/cairn/internal/auth"
	"github.com/cairn-db/cairn/internal/object"
)

// BRANCH actions.
const (
	BranchCreate = 1
	BranchList   = 2
	BranchDelete = 3
	BranchMerge  = 4
)

// BranchRequest is a BRANCH request: what each action uses of it.
type BranchRequest struct {
	Action byte
	// Create: Space, Name, From (a snapshot; "" for now). List: Space
	// ("" for all). Delete: Name. Merge: Name, Into ("" for its base),
	// Strategy.
	Space, Name, From, Into, Strategy string
}

// AppendBranchRequest encodes a BRANCH request: the action, then its
// strings in the order BranchRequest names them.
func AppendBranchRequest(b []byte, r *BranchRequest) []byte {
	b = append(b, r.Action)
	switch r.Action {
	case BranchCreate:
		b = appendStr(b, r.Space)
		b = appendStr(b, r.Name)
		return appendStr(b, r.From)
	case BranchList:
		return appendStr(b, r.Space)
	case BranchMerge:
		b = appendStr(b, r.Name)
		b = appendStr(b, r.Into)
		return appendStr(b, r.Strategy)
	}
	return appendStr(b, r.Name)
}

// DecodeBranchRequest decodes a BRANCH request.
func DecodeBranchRequest(b []byte) (BranchRequest, error) {
	d := newDecoder(b)
	r := BranchRequest{Action: d.u8("action")}
	switch r.Action {
	case BranchCreate:
		r.Space, r.Name, r.From = d.str("space"), d.str("name"), d.str("from")
	case BranchList:
		r.Space = d.str("space")
	case BranchDelete:
		r.Name = d.str("name")
	case BranchMerge:
		r.Name, r.Into, r.Strategy = d.str("name"), d.str("into"), d.str("strategy")
	default:
		d.fail("branch action")
	}
	if e := d.done(); e != nil {
		return BranchRequest{}, e
	}
	return r, nil
}

// AppendBranchInfos encodes a BRANCH create or list answer: the branch
// made, or those listed (each as a snapshot is: name, space, point,
// creation time).
func AppendBranchInfos(b []byte, l []object.BranchInfo) []byte {
	b = appendUvarint(b, uint64(len(l)))
	for i := range l {
		s := object.SnapshotInfo(l[i])
		b = appendSnapshotInfo(b, &s)
	}
	return b
}

// DecodeBranchInfos decodes a BRANCH create or list answer.
func DecodeBranchInfos(b []byte) ([]object.BranchInfo, error) {
	d := newDecoder(b)
	n := d.count(1+1+8+8, "branch count")
	out := []object.BranchInfo{}
	for i := 0; i < n && d.Err() == nil; i++ {
		out = append(out, object.BranchInfo(d.snapshotInfo()))
	}
	if err := d.done(); err != nil {
		return nil, err
	}
	return out, nil
}

// AppendMergeResult encodes a BRANCH merge answer: the commit version,
// the count of keys taken, and the conflicts (key, reason).
func AppendMergeResult(b []byte, r *object.MergeResult) []byte {
	b = appendU64(b, r.Version)
	b = appendUvarint(b, uint64(r.Applied))
	b = appendUvarint(b, uint64(len(r.Conflicts)))
	for _, c := range r.Conflicts {
		b = appendStr(b, c.Key)
		b = appendStr(b, c.Reason)
	}
	return b
}

// DecodeMergeResult decodes a BRANCH merge answer.
func DecodeMergeResult(b []byte) (object.MergeResult, error) {
	d := newDecoder(b)
	r := object.MergeResult{Version: d.u64("version"), Applied: int(d.uvarint("applied"))}
	n := d.count(2, "conflict count")
	for i := 0; i < n && d.Err() == nil; i++ {
		r.Conflicts = append(r.Conflicts, object.MergeConflict{Key: d.str("key"), Reason: d.str("reason")})
	}
	if err := d.done(); err != nil {
		return object.MergeResult{}, err
	}
	return r, nil
}

// branchOp serves BRANCH: create needs the admin grant on the space (a
// branch holds its history) and on the branch's name, a list of one space's the read grant on it
// (and lists what the key may read), delete the admin grant on the
// branch or on its base, merge the write grant on the base and the read
// grant on the branch.
func (c *serverConn) branchOp(ctx context.Context, buf, body []byte) ([]byte, error) {
	br, ok := c.s.svc.(object.Brancher)
	if !ok {
		return nil, Errorf(CodeUnknownOp, "this server makes no branches")
	}
	r, err := DecodeBranchRequest(body)
	if err != nil {
		return nil, err
	}
	// base is the space branch name branches from ("" if it is none).
	base := func(name string) (string, error) {
		all, err := br.Branches(ctx, "")
		if err != nil {
			return "", err
		}
		if i := slices.IndexFunc(all, func(b object.BranchInfo) bool { return b.Name == name }); i >= 0 {
			return all[i].Space, nil
		}
		return "", nil
	}
	switch r.Action {
	case BranchCreate:
		// A branch is a new space showing the base: the admin grant on
		// both names, as CREATE_SPACE needs on its name.
		for _, sp := range []string{r.Space, r.Name} {
			if e := c.allow(sp, auth.Admin); e != nil {
				return nil, e
			}
		}
		b, err := br.CreateBranch(ctx, r.Space, r.Name, r.From)
		if err != nil {
			return nil, err
		}
		return AppendBranchInfos(buf, []object.BranchInfo{b}), nil
	case BranchList:
		if r.Space != "" {
			if e := c.allow(r.Space, auth.Read); e != nil {
				return nil, e
			}
		}
		l, err := br.Branches(ctx, r.Space)
		if err != nil {
			return nil, err
		}
		l = slices.DeleteFunc(l, func(b object.BranchInfo) bool {
			return c.allow(b.Name, auth.Read) != nil && c.allow(b.Space, auth.Read) != nil
		})
		return AppendBranchInfos(buf, l), nil
	case BranchMerge:
		if e := c.allow(r.Name, auth.Read); e != nil {
			return nil, e
		}
		into, err := base(r.Name)
		if err != nil {
			return nil, err
		}
		if r.Into != "" {
			into = r.Into
		}
		if into != "" {
			if e := c.allow(into, auth.Write); e != nil {
				return nil, e
			}
		}
		res, err := br.MergeBranch(ctx, &object.MergeRequest{Branch: r.Name, Into: into, Strategy: r.Strategy})
		if err != nil {
			return nil, err
		}
		return AppendMergeResult(buf, &res), nil
	default:
		if e := c.allow(r.Name, auth.Admin); e != nil {
			sp, err := base(r.Name)
			if err != nil {
				return nil, err
			}
			if sp == "" || c.allow(sp, auth.Admin) != nil {
				return nil, e
			}
		}
		return buf, br.DeleteBranch(ctx, r.Name)
	}
}

// Branch sends a BRANCH request. It returns the branches answered (create:
// the one made; list: those listed) or, for a merge, its result.
func (c *Conn) Branch(ctx context.Context, r *BranchRequest) ([]object.BranchInfo, object.MergeResult, error) {
	b, err := c.Call(ctx, OpBranch, AppendBranchRequest(nil, r))
	if err != nil {
		return nil, object.MergeResult{}, err
	}
	switch r.Action {
	case BranchDelete:
		if len(b) != 0 {
			return nil, object.MergeResult{}, Errorf(CodeMalformed, "BRANCH delete answered %d bytes", len(b))
		}
		return nil, object.MergeResult{}, nil
	case BranchMerge:
		res, err := DecodeMergeResult(b)
		return nil, res, err
	}
	l, err := DecodeBranchInfos(b)
	return l, object.MergeResult{}, err
}
