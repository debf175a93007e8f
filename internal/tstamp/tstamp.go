// Package tstamp defines Cairn's timestamps: the values the timestamp oracle
// hands out and that name every version.
//
// A timestamp is a uint64: the high 46 bits are milliseconds since the Unix
// epoch, the low 18 bits a logical counter within that millisecond (PD's
// layout). It is printed as 16 lower-case hex digits, which sort like the
// numbers they encode, so a version id is an opaque sortable string.
package tstamp

import (
	"fmt"
	"strconv"
	"time"
)

// LogicalBits is the width of the logical counter.
const LogicalBits = 18

// MaxLogical is the largest logical value within one millisecond.
const MaxLogical = 1<<LogicalBits - 1

// Max is the largest timestamp; "as of Max" means "latest".
const Max = ^uint64(0)

// Make builds a timestamp from milliseconds since the epoch and a logical
// counter (which must be ≤ MaxLogical).
func Make(ms int64, logical uint32) uint64 {
	return uint64(ms)<<LogicalBits | uint64(logical&MaxLogical)
}

// Physical returns the wall-clock milliseconds of ts.
func Physical(ts uint64) int64 { return int64(ts >> LogicalBits) }

// Logical returns the logical counter of ts.
func Logical(ts uint64) uint32 { return uint32(ts & MaxLogical) }

// Time returns the wall-clock time of ts (millisecond precision).
func Time(ts uint64) time.Time { return time.UnixMilli(Physical(ts)) }

// FromTime returns the smallest timestamp at or after t's millisecond.
func FromTime(t time.Time) uint64 { return Make(t.UnixMilli(), 0) }

// String formats ts as 16 lower-case hex digits (a listing of versions
// prints one per version, so without fmt).
func String(ts uint64) string {
	var b [16]byte
	for i := len(b) - 1; i >= 0; i-- {
		b[i] = "0123456789abcdef"[ts&0xf]
		ts >>= 4
	}
	return string(b[:])
}

// Parse reads a version id printed by String.
func Parse(s string) (uint64, error) {
	if len(s) != 16 {
		return 0, fmt.Errorf("tstamp: version id %q is not 16 hex digits", s)
	}
	v, err := strconv.ParseUint(s, 16, 64)
	if err != nil {
		return 0, fmt.Errorf("tstamp: version id %q is not 16 hex digits", s)
	}
	return v, nil
}
