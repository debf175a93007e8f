// Package tso is a node's side of the cluster's timestamp oracle: one
// node leads the oracle (meta.Oracle, a lease in the meta service) and
// hands out timestamps; every other node asks it.
//
// Client.Next returns a timestamp above every one handed out before in
// the cluster: from the local oracle while this node leads it, else from
// the leader, concurrent requests sharing one call (a batch). The leader
// is found in the meta service and cached; a call to a leader that stops
// answering ends as soon as the meta service names another. Client.Start
// campaigns for the oracle whenever this node does not lead it, so the
// oracle moves to a live node when its leader's lease ends; Stop ends the
// campaign and any batch in flight and returns once they have exited.
package tso
