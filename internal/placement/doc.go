// Package placement is where replicas go: the rendezvous ranking of nodes
// for a key (a range id, a chunk's hash), spread over zones, and the plan
// a range's leaseholder follows to bring its replicas to their places.
//
// It is pure: no I/O, no clock (the time is an argument), no randomness.
// The same inputs give the same answer on every node, which is what lets
// nodes agree on where things belong without talking.
package placement
