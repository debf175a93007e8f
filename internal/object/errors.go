package object

import (
	"context"
	"errors"
	"fmt"
)

// Kind says what went wrong. Kinds are the domain's; each protocol maps
// them to its own codes in one table (the native protocol's in
// wire/errors.go, S3's in s3/errors.go).
type Kind uint8

// The kinds. KindOf returns Internal for an error that carries none.
const (
	Internal           Kind = iota + 1 // a bug or an unexpected I/O failure
	InvalidArgument                    // a field has an invalid value
	Malformed                          // a request could not be decoded
	TooLarge                           // a key, body or request exceeds a limit
	BadSpaceName                       // a space name breaks the naming rules
	KeyTooLong                         // an object key is over 1024 bytes
	NotFound                           // no such object or version
	SpaceNotFound                      // no such space
	SpaceExists                        // a space with that name exists
	SpaceNotEmpty                      // the space still holds live objects
	PreconditionFailed                 // IfMatch / IfNoneMatch did not hold
	Truncated                          // a body ended before its declared size
	Corrupt                            // stored bytes failed their checksum
	NotLeader                          // this node does not lead the range; retry where the message says
	Unavailable                        // temporarily unable to serve; retry
	Canceled                           // the caller canceled, or its deadline passed
	Deleted                            // the selected version is a delete marker
	InvalidRange                       // a byte range lies outside the object
	OutcomeUnknown                     // a write may or may not have taken effect; read before retrying
	NotDrained                         // the node still holds data others lack
	RangeMoved                         // the key left the range asked; nothing was done, retry
	AccessDenied                       // the caller's key lacks the grant
	TxnConflict                        // a transaction lost a conflict; run it again from the start
	TxnAborted                         // a transaction was rolled back (its locks expired); run it again
	CursorExpired                      // a watch's cursor is older than the change feed keeps: start again from now
	kindCount
)

var kindNames = [kindCount]string{
	Internal: "internal", InvalidArgument: "invalid argument", Malformed: "malformed",
	TooLarge: "too large", BadSpaceName: "bad space name", KeyTooLong: "key too long",
	NotFound: "not found", SpaceNotFound: "space not found", SpaceExists: "space exists",
	SpaceNotEmpty: "space not empty", PreconditionFailed: "precondition failed",
	Truncated: "truncated body", Corrupt: "corrupt data", NotLeader: "not leader",
	Unavailable: "unavailable", Canceled: "canceled", Deleted: "delete marker",
	InvalidRange: "invalid range", OutcomeUnknown: "outcome unknown",
	NotDrained: "not drained", RangeMoved: "range moved", AccessDenied: "access denied",
	TxnConflict: "transaction conflict", TxnAborted: "transaction aborted",
	CursorExpired: "cursor expired",
}

func (k Kind) String() string {
	if k < kindCount && kindNames[k] != "" {
		return kindNames[k]
	}
	return fmt.Sprintf("kind %d", uint8(k))
}

// Class groups kinds by what a caller may do about them.
type Class uint8

const (
	// ClassInternal: a failure the caller cannot mend; report it.
	ClassInternal Class = iota
	// ClassRetryable: nothing was done; the same request may be sent
	// again (elsewhere, or after a moment).
	ClassRetryable
	// ClassNotFound: what the request names does not exist (or is a
	// delete marker).
	ClassNotFound
	// ClassConflict: the store's state does not allow the request now.
	ClassConflict
	// ClassInvalid: the request itself is wrong; sending it again fails
	// again.
	ClassInvalid
	// ClassCorrupt: stored bytes failed their checksum; no wrong byte was
	// returned.
	ClassCorrupt
	// ClassDenied: the caller may not do this.
	ClassDenied
	// ClassUnknown: a write may or may not have taken effect.
	ClassUnknown
	// ClassCanceled: the caller gave up.
	ClassCanceled
	// ClassTxn: a transaction did nothing and may run again from its
	// start (with a new snapshot).
	ClassTxn
)

// Class returns the kind's class.
func (k Kind) Class() Class {
	switch k {
	case NotLeader, Unavailable, RangeMoved:
		return ClassRetryable
	case NotFound, SpaceNotFound, Deleted:
		return ClassNotFound
	case SpaceExists, SpaceNotEmpty, PreconditionFailed, NotDrained, CursorExpired:
		return ClassConflict
	case InvalidArgument, Malformed, TooLarge, BadSpaceName, KeyTooLong, Truncated, InvalidRange:
		return ClassInvalid
	case Corrupt:
		return ClassCorrupt
	case AccessDenied:
		return ClassDenied
	case OutcomeUnknown:
		return ClassUnknown
	case TxnConflict, TxnAborted:
		return ClassTxn
	case Canceled:
		return ClassCanceled
	}
	return ClassInternal
}

// Error is a failure of the object service. Two Errors match under
// errors.Is when their kinds are equal, so errors.Is(err, ErrNotFound)
// holds for any not-found error, whatever its message.
type Error struct {
	Kind    Kind
	Message string
}

func (e *Error) Error() string {
	if e.Message == "" {
		return "cairn: " + e.Kind.String()
	}
	return "cairn: " + e.Kind.String() + ": " + e.Message
}

// Is matches on the kind, also against a protocol's error that stands for
// one (Kinded): errors.Is(err, wire.ErrNotFound) holds for ErrNotFound.
func (e *Error) Is(target error) bool {
	t, ok := target.(Kinded)
	return ok && t.ObjectKind() != 0 && t.ObjectKind() == e.Kind
}

// ObjectKind returns e's kind (see Kinded).
func (e *Error) ObjectKind() Kind { return e.Kind }

// Kinded is implemented by errors that carry a Kind without being an
// *Error: a protocol's error decoded from a peer's answer. KindOf finds
// them, so an error a peer returned classifies as the one it stands for.
// ObjectKind returns 0 for an error that stands for no kind (a
// protocol's own failure, such as a failed handshake).
type Kinded interface {
	error
	ObjectKind() Kind
}

// Errorf builds an *Error.
func Errorf(k Kind, format string, args ...any) *Error {
	return &Error{Kind: k, Message: fmt.Sprintf(format, args...)}
}

// KindOf returns err's kind: that of the first error in its chain that
// carries one, Canceled for a context's error, Internal otherwise (and 0
// for nil).
func KindOf(err error) Kind {
	if err == nil {
		return 0
	}
	var k Kinded
	if errors.As(err, &k) {
		if kind := k.ObjectKind(); kind != 0 {
			return kind
		}
		return Internal
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return Canceled
	}
	return Internal
}

// ClassOf returns the class of err's kind.
func ClassOf(err error) Class { return KindOf(err).Class() }

// IsRetryable reports whether a request that failed with err had no
// effect and may be sent again.
func IsRetryable(err error) bool { return err != nil && ClassOf(err) == ClassRetryable }

// Sentinels for errors.Is.
var (
	ErrInternal           = &Error{Kind: Internal}
	ErrInvalidArgument    = &Error{Kind: InvalidArgument}
	ErrMalformed          = &Error{Kind: Malformed}
	ErrTooLarge           = &Error{Kind: TooLarge}
	ErrBadSpaceName       = &Error{Kind: BadSpaceName}
	ErrKeyTooLong         = &Error{Kind: KeyTooLong}
	ErrNotFound           = &Error{Kind: NotFound}
	ErrSpaceNotFound      = &Error{Kind: SpaceNotFound}
	ErrSpaceExists        = &Error{Kind: SpaceExists}
	ErrSpaceNotEmpty      = &Error{Kind: SpaceNotEmpty}
	ErrPreconditionFailed = &Error{Kind: PreconditionFailed}
	ErrTruncated          = &Error{Kind: Truncated}
	ErrCorrupt            = &Error{Kind: Corrupt}
	ErrNotLeader          = &Error{Kind: NotLeader}
	ErrUnavailable        = &Error{Kind: Unavailable}
	ErrCanceled           = &Error{Kind: Canceled}
	ErrDeleted            = &Error{Kind: Deleted}
	ErrInvalidRange       = &Error{Kind: InvalidRange}
	ErrOutcomeUnknown     = &Error{Kind: OutcomeUnknown}
	ErrNotDrained         = &Error{Kind: NotDrained}
	ErrRangeMoved         = &Error{Kind: RangeMoved}
	ErrAccessDenied       = &Error{Kind: AccessDenied}
	ErrTxnConflict        = &Error{Kind: TxnConflict}
	ErrTxnAborted         = &Error{Kind: TxnAborted}
	ErrCursorExpired      = &Error{Kind: CursorExpired}
)
