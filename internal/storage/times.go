package storage

import (
	"encoding/binary"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/sstable"

	"github.com/cairn-db/cairn/internal/keys"
)

// VersionTimes names the block property that records, for each data block
// and table, the interval of the version timestamps its version keys
// carry (keys.AppendVersion): the history's own change log. A scan for
// what changed after a timestamp (SinceFilter) skips every block and
// table whose versions are all older, so its cost follows the change, not
// the space, as ZFS's birth times make an incremental send. Tables
// written before the property existed carry none and are always read.
const VersionTimes = "cairn.version-times"

// versionTimes maps a version key to its timestamp, [ts, ts+1); every
// other key to the empty interval.
type versionTimes struct{}

func (versionTimes) MapPointKey(k sstable.InternalKey, _ []byte) (sstable.BlockInterval, error) {
	uk := k.UserKey
	if n := keys.Split(uk); n == len(uk) || len(uk)-n != 8 {
		return sstable.BlockInterval{}, nil
	}
	ts := ^binary.BigEndian.Uint64(uk[len(uk)-8:])
	if ts == ^uint64(0) {
		return sstable.BlockInterval{Lower: ts - 1, Upper: ts}, nil // (never handed out)
	}
	return sstable.BlockInterval{Lower: ts, Upper: ts + 1}, nil
}

func (versionTimes) MapRangeKeys(sstable.Span) (sstable.BlockInterval, error) {
	return sstable.BlockInterval{}, nil
}

// versionTimesCollector makes the collector of VersionTimes.
func versionTimesCollector() pebble.BlockPropertyCollector {
	return sstable.NewBlockIntervalCollector(VersionTimes, versionTimes{}, nil)
}

// SinceFilter is the iterator filter that skips the blocks and tables
// holding no version newer than since (VersionTimes). Keys of the blocks
// it keeps may be of any time: the caller still checks each version's.
func SinceFilter(since uint64) pebble.BlockPropertyFilter {
	return sstable.NewBlockIntervalFilter(VersionTimes, since+1, ^uint64(0), nil)
}
