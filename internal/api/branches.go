package api

import (
	"net/http"
	"slices"
	"time"

	"github.com/cairn-db/cairn/internal/auth"
	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/tstamp"
)

// BranchRequest names a branch to make (Space, Name and From: a snapshot
// of Space, "" for now), the space whose branches to list (Space; "" for
// every space), one to remove (Name) or one to merge (Name, Into: ""
// for the space it branches from, and Strategy: "fail", the default,
// "source-wins" or "dest-wins").
type BranchRequest struct {
	Space    string `json:"space,omitempty"`
	Name     string `json:"name,omitempty"`
	From     string `json:"from,omitempty"`
	Into     string `json:"into,omitempty"`
	Strategy string `json:"strategy,omitempty"`
}

// Branch describes a branch: At is the version id (timestamp) of its
// branch point.
type Branch struct {
	Name    string `json:"name"`
	Space   string `json:"space"`
	At      string `json:"at"`
	Created string `json:"created"`
}

// BranchList answers branch/list.
type BranchList struct {
	Branches []Branch `json:"branches"`
}

// MergeResponse answers branch/merge: the version every key taken got
// ("" if nothing was written), how many keys were taken, and the keys
// changed on both sides.
type MergeResponse struct {
	Version   string          `json:"version,omitempty"`
	Applied   int             `json:"applied"`
	Conflicts []MergeConflict `json:"conflicts"`
}

// MergeConflict is one key changed on both sides of a merge.
type MergeConflict struct {
	Key    string `json:"key"`
	Reason string `json:"reason"`
}

func branchOf(b object.BranchInfo) Branch {
	return Branch{Name: b.Name, Space: b.Space, At: tstamp.String(b.At), Created: time.Unix(0, b.Created).UTC().Format(time.RFC3339Nano)}
}

func (q *call) branch(op string, req *BranchRequest) (any, *ErrorBody) {
	br, ok := q.h.cfg.Service.(object.Brancher)
	if !ok {
		return nil, &ErrorBody{Status: http.StatusNotImplemented, Code: "NotImplemented", Message: "this server makes no branches"}
	}
	// base is the space branch name branches from ("" if it is none).
	base := func(name string) (string, *ErrorBody) {
		all, err := br.Branches(q.ctx, "")
		if err != nil {
			return "", serviceError(err)
		}
		if i := slices.IndexFunc(all, func(b object.BranchInfo) bool { return b.Name == name }); i >= 0 {
			return all[i].Space, nil
		}
		return "", nil
	}
	switch op {
	case "create":
		for _, sp := range []string{req.Space, req.Name} { // as a new space's name, and its base
			if e := q.allow(sp, auth.Admin); e != nil {
				return nil, e
			}
		}
		b, err := br.CreateBranch(q.ctx, req.Space, req.Name, req.From)
		if err != nil {
			return nil, serviceError(err)
		}
		return branchOf(b), nil
	case "list":
		if req.Space != "" {
			if e := q.allow(req.Space, auth.Read); e != nil {
				return nil, e
			}
		}
		l, err := br.Branches(q.ctx, req.Space)
		if err != nil {
			return nil, serviceError(err)
		}
		out := BranchList{Branches: []Branch{}}
		for _, b := range l {
			if q.h.cfg.Keys.Allowed(q.access, b.Name, auth.Read) || q.h.cfg.Keys.Allowed(q.access, b.Space, auth.Read) {
				out.Branches = append(out.Branches, branchOf(b))
			}
		}
		return out, nil
	case "merge":
		if e := q.allow(req.Name, auth.Read); e != nil {
			return nil, e
		}
		into, e := base(req.Name)
		if e != nil {
			return nil, e
		}
		if req.Into != "" {
			into = req.Into
		}
		if into != "" {
			if e := q.allow(into, auth.Write); e != nil {
				return nil, e
			}
		}
		res, err := br.MergeBranch(q.ctx, &object.MergeRequest{Branch: req.Name, Into: into, Strategy: req.Strategy})
		if err != nil {
			return nil, serviceError(err)
		}
		out := MergeResponse{Applied: res.Applied, Conflicts: []MergeConflict{}}
		if res.Version != 0 {
			out.Version = tstamp.String(res.Version)
		}
		for _, c := range res.Conflicts {
			out.Conflicts = append(out.Conflicts, MergeConflict{Key: c.Key, Reason: c.Reason})
		}
		return out, nil
	default:
		// The admin of the branch, or of the space it branches from.
		if e := q.allow(req.Name, auth.Admin); e != nil {
			sp, be := base(req.Name)
			if be != nil {
				return nil, be
			}
			if sp == "" || !q.h.cfg.Keys.Allowed(q.access, sp, auth.Admin) {
				return nil, e
			}
		}
		if err := br.DeleteBranch(q.ctx, req.Name); err != nil {
			return nil, serviceError(err)
		}
		return struct{}{}, nil
	}
}

// SpaceDiffRequest compares two views of one space (a space, its
// snapshots, its branches): the keys added, removed and changed from From
// to To, a page at a time.
type SpaceDiffRequest struct {
	From       string `json:"from"`
	To         string `json:"to"`
	Prefix     string `json:"prefix,omitempty"`
	StartAfter string `json:"start_after,omitempty"`
	Limit      uint32 `json:"limit,omitempty"`
}

// SpaceDiffResponse is one page of a space diff, in key order.
type SpaceDiffResponse struct {
	Changes   []KeyChange `json:"changes"`
	Truncated bool        `json:"truncated"`
	Next      string      `json:"next,omitempty"`
}

// KeyChange is one key that differs: "added", "removed" or "changed",
// with its version on each side that has it.
type KeyChange struct {
	Key         string `json:"key"`
	Change      string `json:"change"`
	FromVersion string `json:"from_version,omitempty"`
	ToVersion   string `json:"to_version,omitempty"`
	FromSize    *int64 `json:"from_size,omitempty"`
	ToSize      *int64 `json:"to_size,omitempty"`
}

func (q *call) diffSpaces(req *SpaceDiffRequest) (any, *ErrorBody) {
	sd, ok := q.h.cfg.Service.(object.SpaceDiffer)
	if !ok {
		return nil, &ErrorBody{Status: http.StatusNotImplemented, Code: "NotImplemented", Message: "this server compares no spaces"}
	}
	for _, sp := range []string{req.From, req.To} {
		if e := q.allow(sp, auth.Read); e != nil {
			return nil, e
		}
	}
	d, err := sd.DiffSpaces(q.ctx, &object.SpaceDiffRequest{From: req.From, To: req.To, Prefix: req.Prefix, StartAfter: req.StartAfter, Limit: req.Limit})
	if err != nil {
		return nil, serviceError(err)
	}
	out := SpaceDiffResponse{Changes: []KeyChange{}, Truncated: d.Truncated, Next: d.Next}
	for _, c := range d.Changes {
		k := KeyChange{Key: c.Key, Change: c.Change}
		if c.From != nil {
			k.FromVersion, k.FromSize = tstamp.String(c.From.Version), &c.From.Size
		}
		if c.To != nil {
			k.ToVersion, k.ToSize = tstamp.String(c.To.Version), &c.To.Size
		}
		out.Changes = append(out.Changes, k)
	}
	return out, nil
}
