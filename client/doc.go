// Package client is the Go client of Cairn's native protocol (see
// docs/protocol.md).
//
// A Client keeps a small pool of multiplexed connections to every address
// it was given (Options.Conns per address) and spreads requests across
// them; many requests share one connection, pipelined, answered in any
// order. Every method takes a context first and is safe for concurrent use.
//
// Retries: reads (Get, GetStream's opening, Stat, List, Versions,
// ListSpaces) are retried with backoff after any connection failure or a
// retryable answer (ErrNotLeader, ErrUnavailable). Writes (Put, Delete,
// CreateSpace, DeleteSpace, WriteAt, Append, batches holding a write) are
// retried only when the failure proves they were not applied: the
// connection could not be made or was closed before the request left, or
// the server answered ErrNotLeader / ErrUnavailable. A streamed Put is
// retried only if none of its body was read yet. A broken connection is
// replaced on next use; an address that cannot be reached is skipped for
// the next one in the list.
//
// Errors are *Error values with a numbered code; test them with errors.Is
// against the sentinels of this package (ErrNotFound, ...). Users never
// import internal packages: the types here are aliases of the protocol's.
package client
