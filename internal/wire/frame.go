package wire

import (
	"encoding/binary"
	"fmt"
	"io"
)

// Frame header, 12 bytes, big-endian:
//
//	 0       1       2               4                               8                              12
//	+-------+-------+---------------+-------------------------------+-------------------------------+
//	|version|opcode |     flags     |          request id           |          body length          |
//	|  u8=1 |  u8   |      u16      |             u32               |             u32               |
//	+-------+-------+---------------+-------------------------------+-------------------------------+
//	| body (body length bytes) ...
const (
	// Version is the only frame version this package speaks.
	Version = 1
	// HeaderLen is the size of a frame header.
	HeaderLen = 12
	// DefaultMaxFrame is the default limit on a frame body.
	DefaultMaxFrame = 1 << 20
	// MinMaxFrame is the smallest frame limit a server accepts; every
	// non-streamed message must fit in it.
	MinMaxFrame = 64 << 10
)

// Op is a frame opcode.
type Op uint8

// Opcodes. A response carries the opcode of its request.
const (
	OpPing        Op = 0x01
	OpCreateSpace Op = 0x02
	OpListSpaces  Op = 0x03
	OpDeleteSpace Op = 0x04
	OpCluster     Op = 0x05
	OpNode        Op = 0x06
	OpRoutes      Op = 0x07
	OpKeys        Op = 0x08
	OpHello       Op = 0x09 // authentication, first step: the key and the client's nonce
	OpAuth        Op = 0x0A // authentication, second step: the client's proof
	OpTokens      Op = 0x0B // join tokens
	OpPut         Op = 0x10
	OpGet         Op = 0x11
	OpStat        Op = 0x12
	OpDelete      Op = 0x13
	OpList        Op = 0x14
	OpVersions    Op = 0x15
	OpClone       Op = 0x16 // a new version sharing another's chunks
	OpLineage     Op = 0x17 // a version's ancestors and children
	OpDiff        Op = 0x18 // what changed between two versions
	OpSnapshot    Op = 0x19 // make, list or remove snapshots
	OpBranch      Op = 0x1A // make, list, remove or merge branches
	OpDiffSpaces  Op = 0x1B // the keys that differ between two views of a space
	OpFollow      Op = 0x1C // a document and the objects its references reach
	OpQuery       Op = 0x1D // the objects of a space a filter matches
	OpIndex       Op = 0x1E // add, drop or list a space's field indexes
	OpSQL         Op = 0x1F // a read-only SQL statement over the spaces
	OpBatch       Op = 0x20
	OpWatch       Op = 0x21 // a space's committed changes after a cursor
	OpData        Op = 0x30 // body continuation of a streamed request or response
	OpCancel      Op = 0x31 // the client abandons a request id
	OpTxnBegin    Op = 0x40 // start a transaction on this connection
	OpTxnCommit   Op = 0x41 // commit it: all its writes, or none
	OpTxnRollback Op = 0x42 // end it without a write
)

var opNames = map[Op]string{
	OpPing: "PING", OpCreateSpace: "CREATE_SPACE", OpListSpaces: "LIST_SPACES",
	OpDeleteSpace: "DELETE_SPACE", OpCluster: "CLUSTER", OpNode: "NODE", OpRoutes: "ROUTES", OpKeys: "KEYS",
	OpHello: "HELLO", OpAuth: "AUTH", OpTokens: "TOKENS", OpPut: "PUT", OpGet: "GET", OpStat: "STAT",
	OpDelete: "DELETE", OpList: "LIST", OpVersions: "VERSIONS", OpBatch: "BATCH",
	OpClone: "CLONE", OpLineage: "LINEAGE", OpDiff: "DIFF", OpSnapshot: "SNAPSHOT", OpBranch: "BRANCH", OpDiffSpaces: "DIFF_SPACES", OpFollow: "FOLLOW", OpQuery: "QUERY", OpIndex: "INDEX", OpSQL: "SQL",
	OpWatch: "WATCH",
	OpData:  "DATA", OpCancel: "CANCEL",
	OpTxnBegin: "TXN_BEGIN", OpTxnCommit: "TXN_COMMIT", OpTxnRollback: "TXN_ROLLBACK",
}

func (o Op) String() string {
	if s, ok := opNames[o]; ok {
		return s
	}
	return fmt.Sprintf("op(0x%02x)", uint8(o))
}

// Known reports whether o is an opcode of protocol version 1.
func (o Op) Known() bool { _, ok := opNames[o]; return ok }

// Flags of a frame.
const (
	// FlagResponse marks a frame sent by the server.
	FlagResponse uint16 = 1 << 0
	// FlagError marks an error response; the body is an error body.
	FlagError uint16 = 1 << 1
	// FlagMore says DATA frames with the same request id follow.
	FlagMore uint16 = 1 << 2
	// FlagEnd marks the last DATA frame of a stream.
	FlagEnd uint16 = 1 << 3
	// FlagForwarded, on an answer, says the node that answered did not
	// hold the lease of the key's range and passed the request on: a
	// client that routed by its route table should fetch it again.
	FlagForwarded uint16 = 1 << 4
	// FlagTxn, on a GET, STAT, PUT, DELETE or LIST request, says its body
	// starts with a transaction id (u64) that TXN_BEGIN gave on this
	// connection: the request runs inside that transaction.
	FlagTxn uint16 = 1 << 5

	// knownFlags are the flags a request may carry.
	knownFlags = FlagResponse | FlagError | FlagMore | FlagEnd | FlagTxn
)

// Header is a decoded frame header.
type Header struct {
	Version uint8
	Op      Op
	Flags   uint16
	ID      uint32
	Len     uint32
}

// PutHeader encodes h into b[:HeaderLen].
func PutHeader(b []byte, h Header) {
	_ = b[HeaderLen-1]
	b[0] = h.Version
	b[1] = byte(h.Op)
	binary.BigEndian.PutUint16(b[2:], h.Flags)
	binary.BigEndian.PutUint32(b[4:], h.ID)
	binary.BigEndian.PutUint32(b[8:], h.Len)
}

// ParseHeader decodes b[:HeaderLen] without validating it.
func ParseHeader(b []byte) Header {
	_ = b[HeaderLen-1]
	return Header{
		Version: b[0],
		Op:      Op(b[1]),
		Flags:   binary.BigEndian.Uint16(b[2:]),
		ID:      binary.BigEndian.Uint32(b[4:]),
		Len:     binary.BigEndian.Uint32(b[8:]),
	}
}

// Check validates a header against a frame limit. A non-nil error means the
// stream cannot be trusted any more: the peer replies with the error (request
// id 0 for a bad version) and closes the connection.
func (h Header) Check(maxFrame int) *Error {
	if h.Version != Version {
		return Errorf(CodeMalformed, "frame version %d, want %d", h.Version, Version)
	}
	if int64(h.Len) > int64(maxFrame) {
		return Errorf(CodeTooLarge, "frame body %d bytes over the %d limit", h.Len, maxFrame)
	}
	return nil
}

// ReadFrame reads one frame from r. The body is freshly allocated and owned
// by the caller. A header error (see Header.Check) is returned as an *Error
// together with the header; an I/O error is returned as is.
func ReadFrame(r io.Reader, hbuf []byte, maxFrame int) (Header, []byte, error) {
	if _, err := io.ReadFull(r, hbuf[:HeaderLen]); err != nil {
		return Header{}, nil, err
	}
	h := ParseHeader(hbuf)
	if err := h.Check(maxFrame); err != nil {
		return h, nil, err
	}
	if h.Len == 0 {
		return h, nil, nil
	}
	body := make([]byte, h.Len)
	if _, err := io.ReadFull(r, body); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return h, nil, err
	}
	return h, body, nil
}

// DecodeFrame decodes one whole frame from b: the header and exactly
// header.Len body bytes. It never panics; it is the parser the fuzz target
// drives.
func DecodeFrame(b []byte, maxFrame int) (Header, []byte, error) {
	if len(b) < HeaderLen {
		return Header{}, nil, Errorf(CodeMalformed, "short frame header: %d bytes", len(b))
	}
	h := ParseHeader(b)
	if err := h.Check(maxFrame); err != nil {
		return h, nil, err
	}
	if uint64(len(b)-HeaderLen) != uint64(h.Len) {
		return h, nil, Errorf(CodeMalformed, "frame body is %d bytes, header says %d", len(b)-HeaderLen, h.Len)
	}
	return h, b[HeaderLen:], nil
}

// AppendFrame appends a whole frame (header and body) to dst.
func AppendFrame(dst []byte, op Op, flags uint16, id uint32, body []byte) []byte {
	var hb [HeaderLen]byte
	PutHeader(hb[:], Header{Version: Version, Op: op, Flags: flags, ID: id, Len: uint32(len(body))})
	dst = append(dst, hb[:]...)
	return append(dst, body...)
}
