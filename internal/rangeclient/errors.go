package rangeclient

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/mvcc"
)

// Code classes a range failure. The numbers are the native protocol's for
// the same failures, so that peers of every version read a reply alike;
// they cross only the cairn.Range reply envelope.
type Code uint16

// The codes this package classes; any other code in a reply is decoded by
// Config.Codes.
const (
	CodeInternal       Code = 1
	CodeMalformed      Code = 2
	CodeNotFound       Code = 8
	CodePrecondition   Code = 12
	CodeCorrupt        Code = 14
	CodeNotLeader      Code = 15
	CodeUnavailable    Code = 16
	CodeCanceled       Code = 17
	CodeDeleted        Code = 18
	CodeOutcomeUnknown Code = 20
	CodeRangeMoved     Code = 22
	CodeTxnConflict    Code = 26
	CodeTxnAborted     Code = 27
	CodeLocked         Code = 28
	// CodeHistoryPruned crosses between peers only: the node's protocol
	// answers such a read as not found.
	CodeHistoryPruned Code = 29
	// CodeCursorExpired: a watch's cursor is below a range's change feed
	// horizon (the protocols' code 30).
	CodeCursorExpired Code = 30
	// codeConflict travels as the envelope's own status (replyStale),
	// never as a code.
	codeConflict Code = 0xffff
)

var codeNames = map[Code]string{
	CodeInternal: "internal", CodeMalformed: "malformed", CodeNotFound: "not found",
	CodePrecondition: "precondition failed", CodeCorrupt: "corrupt", CodeNotLeader: "not leader",
	CodeUnavailable: "unavailable", CodeCanceled: "canceled", CodeDeleted: "delete marker",
	CodeOutcomeUnknown: "outcome unknown", CodeRangeMoved: "range moved", codeConflict: "conflict",
	CodeTxnConflict: "transaction conflict", CodeTxnAborted: "transaction aborted", CodeLocked: "locked",
	CodeHistoryPruned: "history pruned", CodeCursorExpired: "cursor expired",
}

// Error is a classed range failure. Two Errors match under errors.Is when
// their codes are equal: errors.Is(err, ErrRangeMoved) holds for any
// range-moved failure, whatever its message.
type Error struct {
	Code Code
	Msg  string
}

func (e *Error) Error() string {
	if e.Msg == "" {
		return "range: " + codeNames[e.Code]
	}
	return "range: " + codeNames[e.Code] + ": " + e.Msg
}

// Is matches on the code; a history-pruned failure is also a not-found
// one, for every reader but a snapshot's.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && (t.Code == e.Code || e.Code == CodeHistoryPruned && t.Code == CodeNotFound)
}

// The sentinels. What the client returns matches at most one of them.
var (
	// ErrNotLeader: the replica asked does not hold the lease; nothing
	// was done. The client retries elsewhere on its own; callers see it
	// only from the serving half.
	ErrNotLeader = &Error{Code: CodeNotLeader}
	// ErrRangeMoved: the key left the range asked (a split, or a merge
	// under way); nothing was done, route again.
	ErrRangeMoved = &Error{Code: CodeRangeMoved}
	// ErrConflict: a newer version of the key committed first (a write
	// at a stale timestamp); nothing was done, retry at a new timestamp.
	ErrConflict = &Error{Code: codeConflict}
	// ErrOutcomeUnknown: a command reached a leaseholder and its answer
	// was lost; it may have applied. Read before retrying.
	ErrOutcomeUnknown = &Error{Code: CodeOutcomeUnknown}
	// ErrUnavailable: no replica held the lease in time; nothing was done.
	ErrUnavailable = &Error{Code: CodeUnavailable}
	// ErrNotFound: no such key or version.
	ErrNotFound = &Error{Code: CodeNotFound}
	// ErrDeleted: the exact version asked is a delete marker (Read
	// returns the marker's record with it).
	ErrDeleted = &Error{Code: CodeDeleted}
	// ErrPrecondition: a command's condition on the current version did
	// not hold; nothing was done.
	ErrPrecondition = &Error{Code: CodePrecondition}
	// ErrCorrupt: a stored record failed its checksum.
	ErrCorrupt = &Error{Code: CodeCorrupt}
	// ErrMalformed: a peer message could not be decoded.
	ErrMalformed = &Error{Code: CodeMalformed}
	// ErrLocked: keys are locked by transactions (a *LockedError says
	// which); nothing was done.
	ErrLocked = &Error{Code: CodeLocked}
	// ErrTxnConflict: a transaction lost a conflict (a *ConflictError
	// says where); nothing was done.
	ErrTxnConflict = &Error{Code: CodeTxnConflict}
	// ErrTxnAborted: the transaction was rolled back; it cannot commit.
	ErrTxnAborted = &Error{Code: CodeTxnAborted}
	// ErrHistoryPruned: a read as of a timestamp found no version at or
	// before it, but the key had one that is gone (retention pruned it).
	// It matches ErrNotFound too: only a transaction, whose snapshot must
	// read what it read at its start, tells the two apart.
	ErrHistoryPruned = &Error{Code: CodeHistoryPruned}
)

func errorf(c Code, format string, args ...any) *Error {
	return &Error{Code: c, Msg: fmt.Sprintf(format, args...)}
}

// errMoved is the answer for a key that left the range a request reached.
func errMoved(rangeID uint64) error {
	return errorf(CodeRangeMoved, "range %d does not serve the key now (it split, or is merging)", rangeID)
}

// Codes carries the failures this package does not class (those of
// handlers registered with Method) across the reply envelope.
type Codes interface {
	// Code returns err's code and its message without any prefix.
	Code(err error) (uint16, string)
	// Error is the error a reply's code and message stand for.
	Error(code uint16, msg string) error
}

// Reply envelope of the cairn.Range methods: a status byte, then for
// replyErr a code (u16), the leader the replica knows of (u64, 0 if none)
// and a length-prefixed message; the payload follows in every case.
const (
	replyOK    = 0
	replyErr   = 1
	replyStale = 2 // ErrConflict
)

func okReply(payload []byte) []byte { return append([]byte{replyOK}, payload...) }

// errReply encodes err (with any payload that goes with it) for the caller.
func (c *Client) errReply(err error, lead uint64, payload []byte) []byte {
	if errors.Is(err, ErrConflict) || errors.Is(err, mvcc.ErrStaleVersion) {
		return append([]byte{replyStale}, payload...)
	}
	var code uint16
	var msg string
	var e *Error
	var le *LockedError
	var ce *ConflictError
	switch {
	case errors.As(err, &le):
		code, msg, payload = uint16(CodeLocked), le.Error(), appendLocked(nil, le)
	case errors.As(err, &ce):
		code, msg, payload = uint16(CodeTxnConflict), ce.Error(), appendConflict(nil, ce)
	case errors.As(err, &e):
		code, msg = uint16(e.Code), e.Msg
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		code, msg = uint16(CodeCanceled), err.Error()
	case c.cfg.Codes != nil:
		code, msg = c.cfg.Codes.Code(err)
	default:
		code, msg = uint16(CodeInternal), err.Error()
	}
	b := []byte{replyErr}
	b = binary.BigEndian.AppendUint16(b, code)
	b = binary.BigEndian.AppendUint64(b, lead)
	b = binary.BigEndian.AppendUint32(b, uint32(len(msg)))
	b = append(b, msg...)
	return append(b, payload...)
}

// DecodeReply splits a cairn.Range reply into its payload, the leader the
// replica named (with ErrNotLeader) and its error.
func (c *Client) DecodeReply(b []byte) (payload []byte, lead uint64, err error) {
	if len(b) == 0 {
		return nil, 0, errorf(CodeInternal, "empty reply from a peer")
	}
	switch b[0] {
	case replyOK:
		return b[1:], 0, nil
	case replyStale:
		return b[1:], 0, errorf(codeConflict, "a newer version committed first")
	case replyErr:
		if len(b) >= 15 {
			code := binary.BigEndian.Uint16(b[1:])
			lead = binary.BigEndian.Uint64(b[3:])
			ml := binary.BigEndian.Uint32(b[11:])
			if uint64(len(b)-15) >= uint64(ml) {
				msg := string(b[15 : 15+ml])
				switch Code(code) {
				case CodeLocked:
					le, err := decodeLocked(b[15+ml:])
					if err != nil {
						return nil, lead, err
					}
					return nil, lead, le
				case CodeTxnConflict:
					ce, err := decodeConflict(b[15+ml:], msg)
					if err != nil {
						return nil, lead, err
					}
					return nil, lead, ce
				}
				if _, ok := codeNames[Code(code)]; ok || c.cfg.Codes == nil {
					return b[15+ml:], lead, &Error{Code: Code(code), Msg: msg}
				}
				return b[15+ml:], lead, c.cfg.Codes.Error(code, msg)
			}
		}
	}
	return nil, 0, errorf(CodeInternal, "malformed reply from a peer")
}

// applyErr classes what a command's apply returned in place of a result.
func applyErr(rangeID uint64, v error) error {
	if err, ok := txnApplyErr(v); ok {
		return err
	}
	switch {
	case errors.Is(v, kv.ErrPreconditionFailed):
		return errorf(CodePrecondition, "the object's current version does not match the request's condition")
	case errors.Is(v, mvcc.ErrNotFound):
		return errorf(CodeNotFound, "no such version")
	case errors.Is(v, mvcc.ErrDeleteMarker):
		return errorf(CodeDeleted, "the version is a delete marker")
	case errors.Is(v, kv.ErrWrongRange):
		return errMoved(rangeID)
	case errors.Is(v, mvcc.ErrStaleVersion):
		return errorf(codeConflict, "%v", v)
	}
	return v
}
