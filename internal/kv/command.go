package kv

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/cairn-db/cairn/internal/codec"
	"github.com/cairn-db/cairn/internal/mvcc"
)

const cmdVersion = 1

const (
	opPut           byte = 1
	opDeleteVersion byte = 2
	opSetTags       byte = 3
	opChild         byte = 12 // after the transaction commands (txn.go)
	opPrune         byte = 13
	opTrimFeed      byte = 15 // after opIndex (fields.go)
)

// TrimFeedCmd drops the range's change feed entries older than Before and
// raises the feed's horizon to it: a watch from a cursor below the
// horizon is told that changes after it may be gone (CursorExpired).
// Obj is any key of the range (it routes the command).
type TrimFeedCmd struct {
	Obj    []byte
	Before uint64
}

// Encode returns the command's bytes.
func (c *TrimFeedCmd) Encode() []byte {
	b := append(make([]byte, 0, 16+len(c.Obj)), opTrimFeed, cmdVersion)
	b = appendBytes(b, c.Obj)
	return binary.AppendUvarint(b, c.Before)
}

// ErrBadCommand is returned when a Raft entry does not decode as a command.
// It means a bug or corruption; the entry is skipped with no effect.
var ErrBadCommand = errors.New("kv: malformed command")

// PutCmd writes a new version of an object.
type PutCmd struct {
	Obj       []byte       // keys.Object key
	Rec       *mvcc.Record // Version must be set (the commit timestamp)
	Retention mvcc.Retention
	// IfMatch, when non-zero, requires the latest version to be exactly it.
	IfMatch uint64
	// IfNoneMatch requires that the key have no live latest version.
	IfNoneMatch bool
	// IfAbsent (used by WriteAt/Append planning) requires that the key have
	// no live latest version when IfMatch is zero; set by the planner when
	// the write was planned against an absent object.
	IfAbsent bool
	// IfNoVersion requires that the key have no version at all, not even
	// a delete marker: a branch's key not yet written in the branch,
	// whose base shows through (a write planned against the base's
	// version).
	IfNoVersion bool
}

// DeleteVersionCmd removes one version of an object.
type DeleteVersionCmd struct {
	Obj     []byte
	Version uint64
}

// SetTagsCmd replaces the tags of one version of an object.
type SetTagsCmd struct {
	Obj     []byte
	Version uint64
	Tags    map[string]string // nil or empty: remove them
}

// ChildCmd records in the children index that object Child was cloned
// from version Version of object Obj (the command's range holds Obj). The
// clone writes it before it commits the child's version, so the index
// never misses a child; an entry whose child never committed is told
// apart by reading the child (its version's Origin), and is harmless.
type ChildCmd struct {
	Obj     []byte
	Version uint64
	Child   []byte
}

// PruneCmd applies a space's retention to one object's history at a
// timestamp (mvcc.Prune): the version collector's command for keys no one
// writes again.
type PruneCmd struct {
	Obj       []byte
	Retention mvcc.Retention
	Now       uint64
	// SafePoint: Now is the collector's safe point, and a version goes
	// only once a newer one replaced it at or before Now
	// (mvcc.Retention.PruneAt). Encoded as a trailing flag; commands
	// without it prune by the policy alone, as they always did.
	SafePoint bool
}

// Encode returns the command's bytes.
func (c *PruneCmd) Encode() []byte {
	b := append(make([]byte, 0, 32+len(c.Obj)), opPrune, cmdVersion)
	b = appendBytes(b, c.Obj)
	b = append(b, byte(c.Retention.Mode))
	b = binary.AppendUvarint(b, uint64(c.Retention.KeepLast))
	b = binary.AppendUvarint(b, uint64(c.Retention.KeepFor))
	b = binary.AppendUvarint(b, c.Now)
	if c.SafePoint {
		b = append(b, 1)
	}
	return b
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// Encode returns the command's bytes.
func (c *PutCmd) Encode() []byte {
	b := make([]byte, 0, 2+len(c.Obj)+c.Rec.MarshalCap()+64)
	b = append(b, opPut, cmdVersion)
	b = appendBytes(b, c.Obj)
	b = binary.AppendUvarint(b, c.Rec.Version)
	b = appendRecord(b, c.Rec)
	b = append(b, byte(c.Retention.Mode))
	b = binary.AppendUvarint(b, uint64(c.Retention.KeepLast))
	b = binary.AppendUvarint(b, uint64(c.Retention.KeepFor))
	b = binary.AppendUvarint(b, c.IfMatch)
	var flags byte
	if c.IfNoneMatch {
		flags |= 1
	}
	if c.IfAbsent {
		flags |= 2
	}
	if c.IfNoVersion {
		flags |= 4
	}
	return append(b, flags)
}

// Encode returns the command's bytes.
func (c *DeleteVersionCmd) Encode() []byte {
	b := make([]byte, 0, 2+len(c.Obj)+12)
	b = append(b, opDeleteVersion, cmdVersion)
	b = appendBytes(b, c.Obj)
	return binary.AppendUvarint(b, c.Version)
}

// Encode returns the command's bytes: the tags in key order, so equal
// commands encode equally.
func (c *SetTagsCmd) Encode() []byte {
	b := append(make([]byte, 0, 64), opSetTags, cmdVersion)
	b = appendBytes(b, c.Obj)
	b = binary.AppendUvarint(b, c.Version)
	b = binary.AppendUvarint(b, uint64(len(c.Tags)))
	for _, k := range slices.Sorted(maps.Keys(c.Tags)) {
		b = appendBytes(b, []byte(k))
		b = appendBytes(b, []byte(c.Tags[k]))
	}
	return b
}

// Encode returns the command's bytes.
func (c *ChildCmd) Encode() []byte {
	b := append(make([]byte, 0, 16+len(c.Obj)+len(c.Child)), opChild, cmdVersion)
	b = appendBytes(b, c.Obj)
	b = binary.AppendUvarint(b, c.Version)
	return appendBytes(b, c.Child)
}

// decode parses a command into *PutCmd, *DeleteVersionCmd, *SetTagsCmd,
// *ChildCmd, *PruneCmd or
// a transaction command (txn.go).
// Any failure is ErrBadCommand.
func decode(b []byte) (any, error) {
	if len(b) < 2 || b[1] != cmdVersion {
		return nil, ErrBadCommand
	}
	d := codec.NewDecoder(b[2:], func(msg string) error { return fmt.Errorf("%w: %s", ErrBadCommand, msg) })
	switch b[0] {
	case opPut:
		c := &PutCmd{Obj: d.Bytes()}
		version := d.Uvarint()
		recb := d.Bytes()
		if d.Err() != nil {
			return nil, d.Err()
		}
		rec, err := mvcc.Unmarshal(recb)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadCommand, err)
		}
		rec.Version = version
		c.Rec = rec
		c.Retention.Mode = mvcc.RetentionMode(d.U8())
		c.Retention.KeepLast = int(d.Uvarint())
		c.Retention.KeepFor = time.Duration(d.Uvarint())
		c.IfMatch = d.Uvarint()
		flags := d.U8()
		c.IfNoneMatch = flags&1 != 0
		c.IfAbsent = flags&2 != 0
		c.IfNoVersion = flags&4 != 0
		if err := d.Done(); err != nil {
			return nil, err
		}
		return c, nil
	case opDeleteVersion:
		c := &DeleteVersionCmd{Obj: d.Bytes(), Version: d.Uvarint()}
		if err := d.Done(); err != nil {
			return nil, err
		}
		return c, nil
	case opTrimFeed:
		c := &TrimFeedCmd{Obj: d.Bytes(), Before: d.Uvarint()}
		if err := d.Done(); err != nil {
			return nil, err
		}
		return c, nil
	case opPrune:
		c := &PruneCmd{Obj: d.Bytes()}
		c.Retention.Mode = mvcc.RetentionMode(d.U8())
		c.Retention.KeepLast = int(d.Uvarint())
		c.Retention.KeepFor = time.Duration(d.Uvarint())
		c.Now = d.Uvarint()
		if d.Err() == nil && d.Len() > 0 {
			if d.U8() != 1 {
				return nil, fmt.Errorf("%w: prune flag", ErrBadCommand)
			}
			c.SafePoint = true
		}
		if err := d.Done(); err != nil {
			return nil, err
		}
		return c, nil
	case opChild:
		c := &ChildCmd{Obj: d.Bytes(), Version: d.Uvarint(), Child: d.Bytes()}
		if err := d.Done(); err != nil {
			return nil, err
		}
		return c, nil
	case opSetTags:
		c := &SetTagsCmd{Obj: d.Bytes(), Version: d.Uvarint()}
		if n := d.Count(2); n > 0 {
			c.Tags = make(map[string]string, n)
			for range n {
				k, v := d.Str(), d.Str()
				c.Tags[k] = v
			}
		}
		if err := d.Done(); err != nil {
			return nil, err
		}
		return c, nil
	}
	if b[0] == opIndex {
		return decodeIndexCmd(b[2:])
	}
	return decodeTxn(b[0], b[2:])
}
