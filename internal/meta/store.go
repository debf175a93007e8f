package meta

import (
	"context"
	"errors"
	"time"
)

// Sentinel errors. Test with errors.Is; they are usually wrapped with context.
var (
	// ErrNotFound is returned by Store.Get and Store.Delete when the key does
	// not exist.
	ErrNotFound = errors.New("meta: key not found")
	// ErrConflict is returned by Store.Put and Store.Delete when the key's
	// current revision is not the expected one (a lost compare-and-swap). It
	// is retryable: re-read and try again.
	ErrConflict = errors.New("meta: revision conflict")
	// ErrNotLeader is returned by the Oracle when it does not hold a valid
	// "tso" leadership: before Start, after Close, or once its lease is lost
	// or may have expired. Start again (re-campaign) to recover.
	ErrNotLeader = errors.New("meta: not the leader")
	// ErrSpaceExists is returned by Catalog.CreateSpace when a space of that
	// name already exists.
	ErrSpaceExists = errors.New("meta: space already exists")
	// ErrSpaceNotFound is returned by the Catalog's per-space methods when no
	// space has that name.
	ErrSpaceNotFound = errors.New("meta: space not found")
	// ErrBadSpaceName is returned by ValidSpaceName (and CreateSpace) when a
	// name breaks the S3 bucket-name rules; the message names the rule.
	ErrBadSpaceName = errors.New("meta: invalid space name")
	// ErrQuota is returned by EtcdStore writes when etcd's backend quota is
	// exhausted (the NOSPACE alarm): the meta service is read-only until an
	// operator compacts, defragments and disarms the alarm.
	ErrQuota = errors.New("meta: meta store is out of space (etcd NOSPACE alarm); it is read-only until compacted, defragmented and disarmed")
	// ErrClosed is returned by Store methods called after Close.
	ErrClosed = errors.New("meta: store closed")
)

// AnyRev as the expected revision makes Put and Delete unconditional.
const AnyRev int64 = -1

// KV is one stored key. Value is owned by the caller once returned.
type KV struct {
	Key   string
	Value []byte
	// Rev is the key's modification revision: it changes on every write and
	// is what Put and Delete compare against.
	Rev int64
}

// Store is the meta service's key-value store: etcd in production (EtcdStore),
// a map in tests (MemStore). All methods may be called concurrently. Keys of
// this package live under "/cairn/" (see doc.go).
type Store interface {
	// Get returns key's value and revision, or ErrNotFound.
	Get(ctx context.Context, key string) (KV, error)
	// List returns every key with the given prefix, in key order.
	List(ctx context.Context, prefix string) ([]KV, error)
	// Put writes key if its current revision equals expect: 0 means the key
	// must not exist, AnyRev (-1) writes unconditionally. It returns the new
	// revision, or ErrConflict.
	Put(ctx context.Context, key string, value []byte, expect int64) (int64, error)
	// Delete removes key if its current revision equals expect (AnyRev:
	// unconditionally). It returns ErrNotFound when the key does not exist
	// and ErrConflict when its revision differs. expect 0 is invalid.
	Delete(ctx context.Context, key string, expect int64) error
	// Campaign blocks until this member holds leadership name, backed by a
	// lease of about ttl, and returns it. Only one holder exists at a time.
	Campaign(ctx context.Context, name string, ttl time.Duration) (Leadership, error)
	// Close releases the store; leaderships still held are resigned.
	Close() error
}

// Leadership is a held leadership. Its methods may be called concurrently.
type Leadership interface {
	// Done is closed when the leadership or its lease is lost (or resigned).
	Done() <-chan struct{}
	// ValidUntil is a conservative local deadline: the time by which the
	// lease is certainly still valid (lease grant or keepalive send time +
	// TTL - a clock-skew margin). It is the zero time once Done is closed.
	// It is measured on the store's clock (time.Now for EtcdStore).
	ValidUntil() time.Time
	// Resign gives the leadership up (deleting the leader key and revoking
	// the lease) so another member can take it at once. Idempotent.
	Resign(ctx context.Context) error
}

// leaderKey is where the holder of leadership name is recorded.
func leaderKey(name string) string { return keyLeaderPrefix + name }
