package replica

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cairn-db/cairn/internal/rangedesc"
	"github.com/cairn-db/cairn/internal/storage"
)

// Options configures NewStore. The zero value of every field but NodeID and
// Engine means its default.
type Options struct {
	// NodeID is this node's raft id, the same in every range. Required, > 0.
	NodeID uint64
	// Engine is the node's pebble instance; every range's state lives in it.
	// Required. The Store does not close it.
	Engine *storage.Engine
	// Transport carries raft messages to other nodes. Default: drops every
	// message, which is right for a single node.
	Transport Transport
	// TickInterval is the raft tick. Default: 100ms.
	TickInterval time.Duration
	// ElectionTicks is the election timeout in ticks. Default: 10.
	ElectionTicks int
	// HeartbeatTicks is the leader's heartbeat interval in ticks. Default: 1.
	HeartbeatTicks int
	// QuiesceTicks is how many ticks a leader's group must be idle before
	// it stops ticking (quiesce.go). Default: ElectionTicks; negative:
	// groups never quiesce.
	QuiesceTicks int
	// CommitDelay is how long a leader may hold a message that only tells
	// a follower the new commit index, waiting for one with entries to
	// carry it instead (hold.go). Followers apply at most this much later;
	// the leader's commits do not wait. Default: 2ms; negative: never held.
	CommitDelay time.Duration
	// LogKeep is how many applied entries stay in the log behind the applied
	// index when it is truncated. Default: 1000.
	LogKeep uint64
	// TruncateEvery is how many applied entries the log may hold before it is
	// truncated down to LogKeep. Default: 10000.
	TruncateEvery uint64
	// MaxClockOffset is the largest difference between two nodes' clocks that
	// leases tolerate; it must be below the election timeout, and a lease
	// lasts at most the difference. Default: 500ms, or half the election
	// timeout if that is less.
	MaxClockOffset time.Duration
	// Clock returns the current time: for leases and how long a read
	// waits for one. The ticker and the timing stats use the wall clock.
	// Default: time.Now.
	Clock func() time.Time
	// NewStateMachine makes the StateMachine of a replica the Store creates
	// itself: the new range of a split (split.go). Ranges cannot split
	// without it.
	NewStateMachine func(d rangedesc.Range) StateMachine
	// IDSpans, if set, returns the spans of the node's keyspace that a
	// range's StateMachine keys by the range's id (kv's index entries):
	// the range's replica going without its data being someone else's
	// now (a frozen range dropped, or subsumed by a snapshot of the range
	// it merged into) deletes them. They must be among Spans(d) of a
	// range with id d.ID.
	IDSpans func(id uint64) []Span
	// OnSplit, if set, is called on the loop after a split applied on this
	// node, with the two halves; the new range's replica exists by then.
	// It must not block or call into the Store.
	OnSplit func(left, right rangedesc.Range)
	// OnMerge, if set, is called on the loop after a merge applied on this
	// node (or a snapshot of left subsumed a frozen right here), with left
	// as merged and the range it absorbed; that range's replica is gone by
	// then. It must not block or call into the Store.
	OnMerge func(left, right rangedesc.Range)
	// Logger receives the Store's and raft's messages. Default: slog.Default().
	Logger *slog.Logger

	// ticks, if set (tests), replaces the ticker: the test harness ticks
	// the loop by hand.
	ticks <-chan time.Time
}

// EnsureDefaults fills in zero fields.
func (o *Options) EnsureDefaults() {
	if o.Transport == nil {
		o.Transport = dropTransport{}
	}
	if o.TickInterval == 0 {
		o.TickInterval = 100 * time.Millisecond
	}
	if o.ElectionTicks == 0 {
		o.ElectionTicks = 10
	}
	if o.HeartbeatTicks == 0 {
		o.HeartbeatTicks = 1
	}
	if o.QuiesceTicks == 0 {
		o.QuiesceTicks = o.ElectionTicks
	}
	if o.CommitDelay == 0 {
		o.CommitDelay = 2 * time.Millisecond
	}
	if o.LogKeep == 0 {
		o.LogKeep = 1000
	}
	if o.TruncateEvery == 0 {
		o.TruncateEvery = 10000
	}
	if o.MaxClockOffset == 0 {
		o.MaxClockOffset = min(500*time.Millisecond, o.electionTimeout()/2)
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Validate reports every problem with the options at once.
func (o *Options) Validate() error {
	var errs []error
	if o.NodeID == 0 {
		errs = append(errs, errors.New("replica: NodeID is required"))
	}
	if o.Engine == nil {
		errs = append(errs, errors.New("replica: Engine is required"))
	}
	if o.TickInterval < 0 {
		errs = append(errs, fmt.Errorf("replica: TickInterval %v is negative", o.TickInterval))
	}
	if o.HeartbeatTicks < 0 || o.ElectionTicks <= o.HeartbeatTicks {
		errs = append(errs, fmt.Errorf("replica: need 0 < HeartbeatTicks (%d) < ElectionTicks (%d)", o.HeartbeatTicks, o.ElectionTicks))
	}
	if o.MaxClockOffset < 0 || o.MaxClockOffset >= o.electionTimeout() {
		errs = append(errs, fmt.Errorf("replica: MaxClockOffset %v is not in [0, election timeout %v)", o.MaxClockOffset, o.electionTimeout()))
	}
	if o.TruncateEvery < o.LogKeep {
		errs = append(errs, fmt.Errorf("replica: TruncateEvery (%d) is below LogKeep (%d)", o.TruncateEvery, o.LogKeep))
	}
	return errors.Join(errs...)
}

// electionTimeout is the election timeout as a duration.
func (o *Options) electionTimeout() time.Duration {
	return time.Duration(o.ElectionTicks) * o.TickInterval
}
