package replica

import (
	"time"

	"go.etcd.io/raft/v3/raftpb"
)

// Commit-only appends.
//
// When a leader's commit index advances, raft tells each follower at once
// with a MsgApp that carries no entries, and the follower acknowledges it.
// Under load the next MsgApp with entries (which carries the commit index
// too) follows within a fraction of a millisecond, so these messages and
// their acknowledgements are half of all the messages a replicated write
// costs, for nothing. The Store holds each commit-only MsgApp for up to
// CommitDelay: a later MsgApp of the same range to the same follower
// replaces it, and what is still held when the delay is up goes out.
// Followers learn the commit index (and apply) at most CommitDelay later;
// the leader's own commit, and with it every client's acknowledgement,
// does not wait. Raft tolerates lost and late messages, so nothing else
// depends on when (or whether) a held message is sent.

// holder is the held commit-only appends (loop-owned).
type holder struct {
	msgs map[peerKey]*raftpb.Message
	// timer is set when a message is held while none is: it fires at the
	// latest CommitDelay after any message now held was held.
	timer *time.Timer
}

func newHolder() holder {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return holder{msgs: map[peerKey]*raftpb.Message{}, timer: t}
}

// outbound adds raft message m of range rangeID to out, or holds it: a
// commit-only MsgApp is held, and any MsgApp replaces the one held for the
// same range and node (its commit index is as high: it is newer).
func (s *Store) outbound(out []Message, rangeID uint64, m *raftpb.Message) []Message {
	if m.GetType() == raftpb.MsgApp && s.opts.CommitDelay > 0 {
		h := &s.hold
		k := peerKey{rangeID, m.GetTo()}
		if _, ok := h.msgs[k]; ok {
			delete(h.msgs, k)
			s.stats.skipped.Add(1)
		}
		if len(m.GetEntries()) == 0 {
			if len(h.msgs) == 0 {
				h.timer.Reset(s.opts.CommitDelay)
			}
			h.msgs[k] = m
			return out
		}
	}
	return append(out, Message{RangeID: rangeID, Msg: m})
}

// releaseHeld sends every held message: the delay is up.
func (s *Store) releaseHeld() {
	h := &s.hold
	if len(h.msgs) == 0 {
		return
	}
	out := make([]Message, 0, len(h.msgs))
	for k, m := range h.msgs {
		out = append(out, Message{RangeID: k.rangeID, Msg: m})
	}
	clear(h.msgs)
	s.opts.Transport.Send(out)
	s.stats.sent.Add(uint64(len(out)))
}
