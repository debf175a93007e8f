package client

import (
	"github.com/cairn-db/cairn/internal/chunk"
	"github.com/cairn-db/cairn/internal/wire"

	"github.com/cairn-db/cairn/internal/object"
)

// Types of the protocol, re-exported.
type (
	// ObjectInfo describes one version of an object.
	ObjectInfo = object.Info
	// SpaceInfo describes a space.
	SpaceInfo = object.SpaceInfo
	// SpaceSettings are per-space options; zero values mean the node's defaults.
	SpaceSettings = object.SpaceSettings
	// ListResult is one page of a listing.
	ListResult = object.ListResult
	// VersionsResult is one page of versions, newest first.
	VersionsResult = object.VersionsResult
	// VersionRef names one version of an object (a clone's origin).
	VersionRef = object.VersionRef
	// Lineage is a version's ancestors and children (Client.Lineage).
	Lineage = object.Lineage
	// LineageEntry is one version of a lineage.
	LineageEntry = object.LineageEntry
	// Diff is what changed between two versions (Client.Diff).
	Diff = object.Diff
	// FieldChange is one metadata field that differs.
	FieldChange = object.FieldChange
	// FollowResult is a document and what its references reach
	// (Client.Follow).
	FollowResult = object.FollowResult
	// Followed is one object of a FollowResult; its Err is an *Error.
	Followed = object.Followed
	// QueryRequest asks for the objects of a space a filter matches
	// (Client.Query).
	QueryRequest = object.QueryRequest
	// QueryResult is a page of a query's matches.
	QueryResult = object.QueryResult
	// IndexInfo describes a field index and its build (Client.Indexes).
	IndexInfo = object.IndexInfo
	// SQLResult is a SQL statement's columns and rows (Client.SQL).
	SQLResult = object.SQLResult
	// WatchRequest asks for a space's changes after a cursor
	// (Client.WatchPage).
	WatchRequest = object.WatchRequest
	// WatchResult is a page of a space's changes.
	WatchResult = object.WatchResult
	// WatchEvent is one committed version.
	WatchEvent = object.WatchEvent
	// Extent is a byte range of an object's content.
	Extent = chunk.Extent
	// Error is an error answered by the server, with a numbered Code.
	Error = wire.Error
	// Code is a numbered protocol error code (the table in docs/protocol.md).
	Code = wire.Code
	// BatchOp is the kind of one batch item.
	BatchOp = wire.BatchOp
	// ClusterReport is a node's report of its cluster (ClusterStatus).
	ClusterReport = wire.ClusterReport
	// ClusterNode is one node of the cluster map.
	ClusterNode = wire.ClusterNode
	// ClusterMember is one member of the meta service.
	ClusterMember = wire.ClusterMember
	// ClusterRange is one range with its replicas and leader.
	ClusterRange = wire.ClusterRange
	// GCNode is one node's chunk collector (ClusterReport.GC).
	GCNode = wire.GCNode
)

// Batch item kinds.
const (
	BatchPut    = wire.BatchPut
	BatchGet    = wire.BatchGet
	BatchStat   = wire.BatchStat
	BatchDelete = wire.BatchDelete
)

// Errors, for errors.Is. Each matches any *Error with the same code.
var (
	// ErrInternal: a server bug or an unexpected I/O failure.
	ErrInternal = wire.ErrInternal
	// ErrMalformed: the server could not decode a request.
	ErrMalformed = wire.ErrMalformed
	// ErrTooLarge: a frame, key or body exceeds a limit.
	ErrTooLarge = wire.ErrTooLarge
	// ErrInvalidArgument: a field has an invalid value.
	ErrInvalidArgument = wire.ErrInvalidArgument
	// ErrBadSpaceName: a space name breaks the naming rules.
	ErrBadSpaceName = wire.ErrBadSpaceName
	// ErrKeyTooLong: an object key is over 1024 bytes.
	ErrKeyTooLong = wire.ErrKeyTooLong
	// ErrNotFound: no such object or version.
	ErrNotFound = wire.ErrNotFound
	// ErrAccessDenied: the key lacks the grant a request needs.
	ErrAccessDenied = wire.ErrAccessDenied
	// ErrSpaceNotFound: no such space.
	ErrSpaceNotFound = wire.ErrSpaceNotFound
	// ErrSpaceExists: a space with that name exists.
	ErrSpaceExists = wire.ErrSpaceExists
	// ErrSpaceNotEmpty: the space still holds live objects.
	ErrSpaceNotEmpty = wire.ErrSpaceNotEmpty
	// ErrPreconditionFailed: IfMatch / IfNoneMatch did not hold; nothing was written.
	ErrPreconditionFailed = wire.ErrPreconditionFailed
	// ErrTruncated: a body ended before its declared size; nothing was written.
	ErrTruncated = wire.ErrTruncated
	// ErrCorrupt: stored bytes failed their checksum (never returned as data).
	ErrCorrupt = wire.ErrCorrupt
	// ErrNotLeader: the node does not lead the key's range; retried elsewhere.
	ErrNotLeader = wire.ErrNotLeader
	// ErrUnavailable: temporarily unable to serve; retried.
	ErrUnavailable = wire.ErrUnavailable
	// ErrCanceled: the request was canceled.
	ErrCanceled = wire.ErrCanceled
	// ErrDeleted: the selected version is a delete marker.
	ErrDeleted = wire.ErrDeleted
	// ErrInvalidRange: a byte range lies outside the object.
	ErrInvalidRange = wire.ErrInvalidRange

	// ErrConnClosed: the connection closed before the request was sent
	// (the request was not applied).
	ErrConnClosed = wire.ErrConnClosed
	// ErrCursorExpired: a watch's cursor is older than the cluster keeps
	// changes for (its --watch-retention): start again from now, and
	// drop what was cached from the watch.
	ErrCursorExpired = wire.ErrCursorExpired
	// ErrConnLost: the connection broke with the request in flight; it may
	// or may not have been applied.
	ErrConnLost = wire.ErrConnLost
)

// CodeOf returns the protocol code of err (CodeOK for nil).
func CodeOf(err error) Code { return wire.CodeOf(err) }
