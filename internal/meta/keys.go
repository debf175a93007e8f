package meta

import "fmt"

// The meta service's keys. Everything lives under Prefix; doc.go draws the map.
const (
	// Prefix is the root of every key Cairn writes to the meta store.
	Prefix = "/cairn/"

	keyTSO           = Prefix + "tso"
	keyLeaderPrefix  = Prefix + "leader/"
	keySpacePrefix   = Prefix + "spaces/"
	keySnapPrefix    = Prefix + "snapshots/"
	keyRangePrefix   = Prefix + "ranges/"
	keyLayoutPrefix  = Prefix + "layouts/"
	keySpaceCounter  = Prefix + "counters/space"
	keyRangeCounter  = Prefix + "counters/range"
	keyNodeCounter   = Prefix + "counters/node"
	keyNodePrefix    = Prefix + "nodes/"
	formatVersionOne = 1
)

func spaceKey(name string) string { return keySpacePrefix + name }

func snapKey(name string) string { return keySnapPrefix + name }

// layoutKey holds the first ranges of space spaceID as claimed at its
// creation (CreatePlacedRanges).
func layoutKey(spaceID uint32) string { return fmt.Sprintf("%s%08x", keyLayoutPrefix, spaceID) }

// spaceRangePrefix is the prefix of one space's range descriptors; the fixed
// width hex keeps them in space-id, then range-id order.
func spaceRangePrefix(spaceID uint32) string {
	return fmt.Sprintf("%s%08x/", keyRangePrefix, spaceID)
}

func rangeKey(spaceID uint32, rangeID uint64) string {
	return fmt.Sprintf("%s%016x", spaceRangePrefix(spaceID), rangeID)
}
