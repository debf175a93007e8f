package wire

import (
	"errors"
	"fmt"

	"github.com/cairn-db/cairn/internal/admin"
	"github.com/cairn-db/cairn/internal/object"
)

// The administration contract lives in internal/admin; these names are
// the protocol's for it.
type (
	ClusterService     = admin.ClusterService
	NodeAction         = admin.NodeAction
	NodeService        = admin.NodeService
	ClusterKeyRotation = admin.ClusterKeyRotation
	KeyRotator         = admin.KeyRotator
	KeySpec            = admin.KeySpec
	KMSKeySpec         = admin.KMSKeySpec
	KMSService         = admin.KMSService
	KeyService         = admin.KeyService
	TokenSpec          = admin.TokenSpec
	TokenService       = admin.TokenService
	RouteTable         = admin.RouteTable
	Route              = admin.Route
	RouteService       = admin.RouteService
	ClusterReport      = admin.ClusterReport
	GCNode             = admin.GCNode
	ClusterNode        = admin.ClusterNode
	ClusterMember      = admin.ClusterMember
	ClusterRange       = admin.ClusterRange
)

// The NODE op's actions (admin.NodeAction).
const (
	NodeDrain   = admin.NodeDrain
	NodeRemove  = admin.NodeRemove
	NodeUndrain = admin.NodeUndrain
)

// KeyAction is what a KEYS request asks.
type KeyAction uint8

const (
	KeyCreate KeyAction = 1 // body: a KeySpec; answer: the key made, with its secret
	KeyList   KeyAction = 2 // no body; answer: every key, secrets left out
	KeyDelete KeyAction = 3 // body: the access key id; answer: empty
	// KeyRotateRoot replaces the root key: no body; answer: the new root
	// key, with its secret (KeyRotator).
	KeyRotateRoot KeyAction = 4
	// KeyRotateCluster makes a new cluster key, hands it to every node
	// and seals every secret under it: no body; answer: a JSON
	// ClusterKeyRotation (KeyRotator).
	KeyRotateCluster KeyAction = 5
	// KeyKMSCreate makes a key of the cluster's KMS (SSE-KMS): body: its
	// id; answer: a JSON KMSKeySpec (KMSService).
	KeyKMSCreate KeyAction = 6
	// KeyKMSList lists the KMS keys: no body; answer: a JSON array of
	// KMSKeySpec (KMSService).
	KeyKMSList KeyAction = 7
)

// Code is a numbered error code of the protocol. Codes never change meaning.
type Code uint16

// The error table. Clients map codes to errors with errors.Is(err, wire.ErrX).
const (
	CodeOK                 Code = 0
	CodeInternal           Code = 1  // a server bug or an unexpected I/O failure
	CodeMalformed          Code = 2  // a frame or message could not be decoded
	CodeUnknownOp          Code = 3  // the opcode is not known to this server
	CodeTooLarge           Code = 4  // a frame, key or body exceeds a limit
	CodeInvalidArgument    Code = 5  // a field has an invalid value
	CodeBadSpaceName       Code = 6  // a space name breaks the naming rules
	CodeKeyTooLong         Code = 7  // an object key is over 1024 bytes
	CodeNotFound           Code = 8  // no such object or version
	CodeSpaceNotFound      Code = 9  // no such space
	CodeSpaceExists        Code = 10 // a space with that name exists
	CodeSpaceNotEmpty      Code = 11 // the space still holds live objects
	CodePreconditionFailed Code = 12 // IfMatch / IfNoneMatch did not hold
	CodeTruncated          Code = 13 // a body ended before its declared size
	CodeCorrupt            Code = 14 // stored bytes failed their checksum
	CodeNotLeader          Code = 15 // retry elsewhere; the message may name the leader
	CodeUnavailable        Code = 16 // temporarily unable to serve; retry
	CodeCanceled           Code = 17 // the request was canceled
	CodeDeleted            Code = 18 // the selected version is a delete marker
	CodeInvalidRange       Code = 19 // a byte range lies outside the object
	CodeOutcomeUnknown     Code = 20 // a write may or may not have taken effect; read before retrying
	CodeNotDrained         Code = 21 // the node still holds data others lack; wait for its drain
	CodeRangeMoved         Code = 22 // the key left the range the request was sent to (a split, or a merge under way); nothing was done, retry
	CodeUnauthenticated    Code = 23 // the connection has not authenticated, or authentication failed
	CodeAccessDenied       Code = 24 // the connection's key lacks the grant the request needs
	CodeTLSRequired        Code = 25 // the port serves TLS and the client spoke plain TCP
	CodeTxnConflict        Code = 26 // a transaction lost a conflict and did nothing; run it again from its start
	CodeTxnAborted         Code = 27 // a transaction was rolled back (its locks expired) and did nothing; run it again
	// 28 and 29 are taken between nodes (the range client's "locked" and
	// "history pruned"), never sent to a client.
	CodeCursorExpired Code = 30 // a watch's cursor is older than the change feed keeps; start again from now (and drop what it cached)
)

var codeNames = map[Code]string{
	CodeOK: "ok", CodeInternal: "internal", CodeMalformed: "malformed",
	CodeUnknownOp: "unknown op", CodeTooLarge: "too large",
	CodeInvalidArgument: "invalid argument", CodeBadSpaceName: "bad space name",
	CodeKeyTooLong: "key too long", CodeNotFound: "not found",
	CodeSpaceNotFound: "space not found", CodeSpaceExists: "space exists",
	CodeSpaceNotEmpty: "space not empty", CodePreconditionFailed: "precondition failed",
	CodeTruncated: "truncated body", CodeCorrupt: "corrupt data",
	CodeNotLeader: "not leader", CodeUnavailable: "unavailable",
	CodeCanceled: "canceled", CodeDeleted: "delete marker",
	CodeInvalidRange: "invalid range", CodeOutcomeUnknown: "outcome unknown", CodeNotDrained: "not drained",
	CodeRangeMoved: "range moved", CodeUnauthenticated: "unauthenticated",
	CodeAccessDenied: "access denied", CodeTLSRequired: "TLS required",
	CodeTxnConflict: "transaction conflict", CodeTxnAborted: "transaction aborted",
	CodeCursorExpired: "cursor expired",
}

func (c Code) String() string {
	if s, ok := codeNames[c]; ok {
		return s
	}
	return fmt.Sprintf("code %d", uint16(c))
}

// Retryable reports whether an operation that failed with c may be retried
// unchanged (it had no effect, or it is idempotent).
func (c Code) Retryable() bool { return c == CodeNotLeader || c == CodeUnavailable }

// Error is an error with a protocol code. Two Errors match under errors.Is
// when their codes are equal, so errors.Is(err, wire.ErrNotFound) works.
type Error struct {
	Code    Code
	Message string
}

func (e *Error) Error() string {
	if e.Message == "" {
		return "cairn: " + e.Code.String()
	}
	return "cairn: " + e.Code.String() + ": " + e.Message
}

// Is matches on the code, and an *object.Error on the kind the code
// stands for, so errors.Is(err, object.ErrNotFound) holds for a peer's
// not-found answer.
func (e *Error) Is(target error) bool {
	switch t := target.(type) {
	case *Error:
		return t.Code == e.Code
	case *object.Error:
		return t.Kind == e.ObjectKind()
	}
	return false
}

// ObjectKind is the object service's kind the code stands for
// (object.Kinded); 0 for a code of the protocol's own (a failed
// handshake, an unknown op).
func (e *Error) ObjectKind() object.Kind { return codeKinds[e.Code] }

// Errorf builds an *Error.
func Errorf(c Code, format string, args ...any) *Error {
	return &Error{Code: c, Message: fmt.Sprintf(format, args...)}
}

// Sentinels for errors.Is.
var (
	ErrInternal           = &Error{Code: CodeInternal}
	ErrMalformed          = &Error{Code: CodeMalformed}
	ErrTooLarge           = &Error{Code: CodeTooLarge}
	ErrInvalidArgument    = &Error{Code: CodeInvalidArgument}
	ErrBadSpaceName       = &Error{Code: CodeBadSpaceName}
	ErrKeyTooLong         = &Error{Code: CodeKeyTooLong}
	ErrNotFound           = &Error{Code: CodeNotFound}
	ErrSpaceNotFound      = &Error{Code: CodeSpaceNotFound}
	ErrSpaceExists        = &Error{Code: CodeSpaceExists}
	ErrSpaceNotEmpty      = &Error{Code: CodeSpaceNotEmpty}
	ErrPreconditionFailed = &Error{Code: CodePreconditionFailed}
	ErrTruncated          = &Error{Code: CodeTruncated}
	ErrCorrupt            = &Error{Code: CodeCorrupt}
	ErrNotLeader          = &Error{Code: CodeNotLeader}
	ErrUnavailable        = &Error{Code: CodeUnavailable}
	ErrCanceled           = &Error{Code: CodeCanceled}
	ErrDeleted            = &Error{Code: CodeDeleted}
	ErrInvalidRange       = &Error{Code: CodeInvalidRange}
	ErrOutcomeUnknown     = &Error{Code: CodeOutcomeUnknown}
	ErrNotDrained         = &Error{Code: CodeNotDrained}
	ErrUnauthenticated    = &Error{Code: CodeUnauthenticated}
	ErrAccessDenied       = &Error{Code: CodeAccessDenied}
	ErrTLSRequired        = &Error{Code: CodeTLSRequired}
	ErrTxnConflict        = &Error{Code: CodeTxnConflict}
	ErrTxnAborted         = &Error{Code: CodeTxnAborted}
	ErrCursorExpired      = &Error{Code: CodeCursorExpired}
)

// CodeOf returns the protocol code for err: the code of an *Error in its
// chain, else the code of the object service's kind of it (kindCodes),
// CodeCanceled for context errors, CodeInternal otherwise.
func CodeOf(err error) Code {
	if err == nil {
		return CodeOK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	if c, ok := kindCodes[object.KindOf(err)]; ok {
		return c
	}
	return CodeInternal
}

// kindCodes is the one table from the object service's kinds to the
// protocol's codes; codeKinds is its inverse.
var kindCodes = map[object.Kind]Code{
	object.Internal:           CodeInternal,
	object.InvalidArgument:    CodeInvalidArgument,
	object.Malformed:          CodeMalformed,
	object.TooLarge:           CodeTooLarge,
	object.BadSpaceName:       CodeBadSpaceName,
	object.KeyTooLong:         CodeKeyTooLong,
	object.NotFound:           CodeNotFound,
	object.SpaceNotFound:      CodeSpaceNotFound,
	object.SpaceExists:        CodeSpaceExists,
	object.SpaceNotEmpty:      CodeSpaceNotEmpty,
	object.PreconditionFailed: CodePreconditionFailed,
	object.Truncated:          CodeTruncated,
	object.Corrupt:            CodeCorrupt,
	object.NotLeader:          CodeNotLeader,
	object.Unavailable:        CodeUnavailable,
	object.Canceled:           CodeCanceled,
	object.Deleted:            CodeDeleted,
	object.InvalidRange:       CodeInvalidRange,
	object.OutcomeUnknown:     CodeOutcomeUnknown,
	object.NotDrained:         CodeNotDrained,
	object.RangeMoved:         CodeRangeMoved,
	object.AccessDenied:       CodeAccessDenied,
	object.TxnConflict:        CodeTxnConflict,
	object.TxnAborted:         CodeTxnAborted,
	object.CursorExpired:      CodeCursorExpired,
}

var codeKinds = func() map[Code]object.Kind {
	m := make(map[Code]object.Kind, len(kindCodes))
	for k, c := range kindCodes {
		m[c] = k
	}
	return m
}()
