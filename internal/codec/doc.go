// Package codec is the one helper every binary format of Cairn decodes
// with: the native protocol's messages (wire), version records (mvcc),
// range commands (kv) and the peer service's replies (node).
//
// A Decoder reads fields in order and checks every bound. The first
// failure sticks: later reads return zero values, and Err (or Done, which
// also refuses trailing bytes) reports it. The error is made by a
// function the format's owner passes in, so each format keeps its own
// class: a malformed request for a protocol, corruption for stored
// records. Encoders need no helper beyond encoding/binary's Append
// functions and AppendBytes here.
//
// The package is pure: no I/O, no allocation beyond what a caller asks
// to keep (Bytes aliases the input; Clone copies).
package codec
