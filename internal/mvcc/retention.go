package mvcc

import (
	"errors"
	"fmt"
	"time"

	"github.com/cairn-db/cairn/internal/tstamp"
)

// RetentionMode says which versions of a key Put keeps.
type RetentionMode uint8

const (
	// KeepAll keeps every version (the zero value).
	KeepAll RetentionMode = iota
	// KeepLast keeps the Retention.KeepLast newest versions; delete markers
	// count.
	KeepLast
	// KeepFor keeps the current version and every version that became
	// noncurrent less than Retention.KeepFor before now.
	KeepFor
)

func (m RetentionMode) String() string {
	switch m {
	case KeepAll:
		return "keep-all"
	case KeepLast:
		return "keep-last"
	case KeepFor:
		return "keep-for"
	}
	return fmt.Sprintf("RetentionMode(%d)", uint8(m))
}

// Retention is a space's version-history policy. The zero value keeps
// everything. Whatever the mode, the newest version is never pruned.
type Retention struct {
	// Mode selects the policy. Default: KeepAll.
	Mode RetentionMode
	// KeepLast is the number of versions kept in mode KeepLast (>= 1).
	KeepLast int
	// KeepFor is how long a noncurrent version is kept in mode KeepFor
	// (> 0). A version becomes noncurrent at the timestamp of the next newer
	// version; time is measured on the physical part of timestamps
	// (milliseconds).
	KeepFor time.Duration
}

// Validate reports every problem with the policy at once.
func (p Retention) Validate() error {
	var errs []error
	switch p.Mode {
	case KeepAll:
	case KeepLast:
		if p.KeepLast < 1 {
			errs = append(errs, fmt.Errorf("mvcc: retention keep-last %d is below 1", p.KeepLast))
		}
	case KeepFor:
		if p.KeepFor <= 0 {
			errs = append(errs, fmt.Errorf("mvcc: retention keep-for %v is not positive", p.KeepFor))
		}
	default:
		errs = append(errs, fmt.Errorf("mvcc: unknown retention mode %d", uint8(p.Mode)))
	}
	if p.Mode != KeepLast && p.KeepLast != 0 {
		errs = append(errs, fmt.Errorf("mvcc: retention KeepLast set in mode %v", p.Mode))
	}
	if p.Mode != KeepFor && p.KeepFor != 0 {
		errs = append(errs, fmt.Errorf("mvcc: retention KeepFor set in mode %v", p.Mode))
	}
	return errors.Join(errs...)
}

// Prune returns, for the version timestamps of one key sorted newest first,
// which ones the policy drops at time now (a timestamp): drop[i] is true when
// versions[i] goes. It is pure; Put applies it.
func (p Retention) Prune(versions []uint64, now uint64) []bool {
	drop := make([]bool, len(versions))
	switch p.Mode {
	case KeepLast:
		for i := p.KeepLast; i < len(versions); i++ {
			drop[i] = i > 0
		}
	case KeepFor:
		// age >= KeepFor, in whole milliseconds, without overflowing a Duration.
		keepMs := int64((p.KeepFor + time.Millisecond - 1) / time.Millisecond)
		for i := 1; i < len(versions); i++ {
			noncurrentAt := versions[i-1]
			ageMs := tstamp.Physical(now) - tstamp.Physical(noncurrentAt)
			drop[i] = ageMs >= keepMs
		}
	}
	return drop
}

// PruneAt is Prune for a collector whose now is a safe point (a
// timestamp at or below every open transaction's snapshot): a version
// the policy drops goes only once a newer one replaced it at or before
// now, so that no transaction reading at or after now read it. The
// versions dropped are still the oldest ones.
func (p Retention) PruneAt(versions []uint64, now uint64) []bool {
	drop := p.Prune(versions, now)
	for i := 1; i < len(drop); i++ {
		if versions[i-1] > now {
			drop[i] = false
		}
	}
	return drop
}
