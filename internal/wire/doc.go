// Package wire is Cairn's native protocol, version 1: the frame and message
// codec, the server that turns frames into calls on a Service, and Conn, the
// client side of one multiplexed connection. docs/protocol.md is the spec;
// this package is its reference implementation.
//
// # Shape
//
// A frame is a 12-byte header (version, opcode, flags, request id, body
// length; see frame.go) and a body of at most MaxFrame bytes. Many requests
// are in flight on one connection; answers carry the request's id and may
// come back in any order. Large bodies stream: a PUT or a GET answer with
// FlagMore is continued by DATA frames, the last one flagged END.
//
// # Goroutines and memory
//
// Each side of a connection has one reader goroutine and one writer
// goroutine. The writer coalesces whatever frames are queued into one
// buffered write and flushes only when the queue is empty. The server runs
// each request on a pool of reusable worker goroutines (workers.go), at most
// MaxInflightPerConn requests per connection.
// A stream never has more than StreamFrames frames buffered in either
// direction: a streamed upload's frames wait in a small channel the Service
// drains, and a GET answer waits for the writer before reading further.
// The price is head-of-line blocking: a consumer that stops reading its
// stream stops the connection's reader. Clients that mix big streams with
// latency-sensitive requests should use more than one connection.
//
// # Errors
//
// Every answer that is not a success is an error frame carrying a Code from
// the table in service.go. A request that cannot be decoded changes nothing.
// A frame that breaks the framing itself (an unknown version, a length over
// the limit) is answered and the connection is closed, because the byte
// stream can no longer be trusted.
package wire
