package replica

import (
	"context"
	"fmt"

	"go.etcd.io/raft/v3/confchange"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
	"google.golang.org/protobuf/proto"
)

// ChangeReplicas proposes a membership change of the range (add or remove
// voters and learners; joint changes included) and blocks until it is
// applied on this replica. Errors are as for Propose, plus
// ErrConfChangeRefused when the change is invalid for the current
// configuration or another change is still pending.
//
// A new replica must start with the range's state, which is not streamed
// yet (see doc.go): today this serves to remove replicas, and to add ones
// whose node was bootstrapped with the same Peers.
func (r *Replica) ChangeReplicas(ctx context.Context, cc *raftpb.ConfChangeV2) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r.mu.Lock()
	st := r.mu.status
	r.mu.Unlock()
	if !st.IsLeader {
		return fmt.Errorf("%w: range %d, leader %d", ErrNotLeader, r.rangeID, st.Leader)
	}
	id := r.s.nextID.Add(1)
	cc = proto.CloneOf(cc)
	cc.Context = encodeCommand(id, nil)
	p := &proposal{r: r, id: id, cc: cc, done: make(chan proposalResult, 1)}
	if err := r.s.enqueue(p); err != nil {
		return err
	}
	select {
	case res := <-p.done:
		return res.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// checkConfChange reports whether cc applies to cs; raft panics when it
// applies an invalid change, so a leader checks before it proposes.
func checkConfChange(cs *raftpb.ConfState, lastIndex uint64, cc *raftpb.ConfChangeV2) error {
	chg := confchange.Changer{Tracker: tracker.MakeProgressTracker(1, 0), LastIndex: lastIndex}
	cfg, prs, err := confchange.Restore(chg, cs)
	if err != nil {
		return err
	}
	chg.Tracker.Config, chg.Tracker.Progress = cfg, prs
	if cc.LeaveJoint() {
		_, _, err = chg.LeaveJoint()
	} else if autoLeave, ok := cc.EnterJoint(); ok {
		_, _, err = chg.EnterJoint(autoLeave, cc.GetChanges()...)
	} else {
		_, _, err = chg.Simple(cc.GetChanges()...)
	}
	return err
}

// confChangeID returns the proposal id carried in a conf change entry's
// context, if it has one.
func confChangeID(e *raftpb.Entry) (uint64, bool) {
	var ctx []byte
	switch e.GetType() {
	case raftpb.EntryConfChange:
		cc := &raftpb.ConfChange{}
		if proto.Unmarshal(e.GetData(), cc) != nil {
			return 0, false
		}
		ctx = cc.GetContext()
	case raftpb.EntryConfChangeV2:
		cc := &raftpb.ConfChangeV2{}
		if proto.Unmarshal(e.GetData(), cc) != nil {
			return 0, false
		}
		ctx = cc.GetContext()
	default:
		return 0, false
	}
	id, _, err := decodeCommand(ctx)
	return id, err == nil
}
