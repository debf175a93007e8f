package replica

import "go.etcd.io/raft/v3/raftpb"

// Message is a raft message for the replica of RangeID on node Msg.To.
// raftpb.Message carries no range, so every message on the wire does.
type Message struct {
	RangeID uint64
	Msg     *raftpb.Message
}

// Transport carries raft messages to other nodes; the Store owns none.
type Transport interface {
	// Send hands msgs to the transport, in order per (range, peer). It is
	// called from the Store's loop, so it must not block: queue, and drop
	// what cannot be delivered (raft retransmits). The messages and the
	// entries they hold are shared with raft and must not be modified; a
	// transport may keep them until they are sent.
	Send(msgs []Message)
}

// dropTransport drops every message: the default for a single node, whose
// groups have no other voters to talk to.
type dropTransport struct{}

func (dropTransport) Send([]Message) {}
