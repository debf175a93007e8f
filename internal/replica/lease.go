package replica

import (
	"encoding/binary"
	"time"
)

// A leader's lease is its promise that no other replica can become leader
// before a point in time, so it may serve reads from its applied state.
//
// The promise comes from raft's CheckQuorum: a follower that heard from the
// leader less than an election timeout ago (by its own ticks) ignores vote
// and pre-vote requests. So when a quorum acknowledged a heartbeat the leader
// sent at time t, no rival can win an election before t + election timeout as
// measured by those followers. The leader discounts the maximum clock offset
// (which also covers tick-rate drift) and serves reads until
//
//	expiration = t - MaxClockOffset + ElectionTicks*TickInterval
//
// t comes from the leader's own clock when it sends the heartbeat: the loop
// renews the lease on every tick with RawNode.ReadIndex carrying t (term and
// time, 16 bytes) as its context, and raft answers with a ReadState once a
// quorum acknowledged that heartbeat round. With a single voter the quorum
// is the leader itself and the answer is immediate.
//
// A follower that restarts forgets when it last heard from the leader, so
// the Store drops vote requests to a restarted replica for its first
// ElectionTicks ticks. A leadership transfer breaks the promise (its
// target campaigns with MsgTimeoutNow, which voters grant inside a lease),
// so a leader drops its lease when it starts one and renews none while it
// is under way (Replica.TransferLeadership, dropLease).

// lease is the lease state of one replica; the zero value holds no lease.
type lease struct {
	term    uint64    // the term the lease belongs to
	contact time.Time // send time of the latest heartbeat round a quorum acked
}

// expiration returns when the lease expires.
func (l lease) expiration(maxOffset, electionTimeout time.Duration) time.Time {
	if l.contact.IsZero() {
		return time.Time{}
	}
	return l.contact.Add(electionTimeout - maxOffset)
}

// valid reports whether the lease is valid for term at now.
func (l lease) valid(now time.Time, term uint64, maxOffset, electionTimeout time.Duration) bool {
	return l.term == term && !l.contact.IsZero() && now.Before(l.expiration(maxOffset, electionTimeout))
}

// extend records that a quorum acked a heartbeat sent at t in term.
func (l lease) extend(term uint64, t time.Time) lease {
	if l.term != term {
		return lease{term: term, contact: t}
	}
	if t.After(l.contact) {
		l.contact = t
	}
	return l
}

func encodeLeaseCtx(term uint64, t time.Time) []byte {
	b := make([]byte, 0, 16)
	b = binary.BigEndian.AppendUint64(b, term)
	return binary.BigEndian.AppendUint64(b, uint64(t.UnixNano()))
}

func decodeLeaseCtx(b []byte) (term uint64, t time.Time, ok bool) {
	if len(b) != 16 {
		return 0, time.Time{}, false
	}
	return binary.BigEndian.Uint64(b), time.Unix(0, int64(binary.BigEndian.Uint64(b[8:]))), true
}
