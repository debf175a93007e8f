package kv

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/cairn-db/cairn/internal/mvcc"
)

const cmdVersion = 1

const (
	opPut           byte = 1
	opDeleteVersion byte = 2
	opSetTags       byte = 3
)

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

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

func readBytes(b []byte) (v, rest []byte, err error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return nil, nil, ErrBadCommand
	}
	return b[k : k+int(n)], b[k+int(n):], nil
}

func readUvarint(b []byte) (uint64, []byte, error) {
	v, k := binary.Uvarint(b)
	if k <= 0 {
		return 0, nil, ErrBadCommand
	}
	return v, b[k:], nil
}

// Encode returns the command's bytes.
func (c *PutCmd) Encode() []byte {
	rec := c.Rec.Marshal()
	b := make([]byte, 0, 2+len(c.Obj)+len(rec)+32)
	b = append(b, opPut, cmdVersion)
	b = appendBytes(b, c.Obj)
	b = binary.AppendUvarint(b, c.Rec.Version)
	b = appendBytes(b, rec)
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

// decode parses a command into *PutCmd, *DeleteVersionCmd or *SetTagsCmd.
func decode(b []byte) (any, error) {
	if len(b) < 2 || b[1] != cmdVersion {
		return nil, ErrBadCommand
	}
	op, b := b[0], b[2:]
	switch op {
	case opPut:
		obj, b, err := readBytes(b)
		if err != nil {
			return nil, err
		}
		version, b, err := readUvarint(b)
		if err != nil {
			return nil, err
		}
		recb, b, err := readBytes(b)
		if err != nil {
			return nil, err
		}
		rec, err := mvcc.Unmarshal(recb)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadCommand, err)
		}
		rec.Version = version
		if len(b) < 1 {
			return nil, ErrBadCommand
		}
		c := &PutCmd{Obj: obj, Rec: rec}
		c.Retention.Mode = mvcc.RetentionMode(b[0])
		b = b[1:]
		var v uint64
		if v, b, err = readUvarint(b); err != nil {
			return nil, err
		}
		c.Retention.KeepLast = int(v)
		if v, b, err = readUvarint(b); err != nil {
			return nil, err
		}
		c.Retention.KeepFor = time.Duration(v)
		if c.IfMatch, b, err = readUvarint(b); err != nil {
			return nil, err
		}
		if len(b) != 1 {
			return nil, ErrBadCommand
		}
		c.IfNoneMatch = b[0]&1 != 0
		c.IfAbsent = b[0]&2 != 0
		return c, nil
	case opDeleteVersion:
		obj, b, err := readBytes(b)
		if err != nil {
			return nil, err
		}
		v, b, err := readUvarint(b)
		if err != nil || len(b) != 0 {
			return nil, ErrBadCommand
		}
		return &DeleteVersionCmd{Obj: obj, Version: v}, nil
	case opSetTags:
		obj, b, err := readBytes(b)
		if err != nil {
			return nil, err
		}
		c := &SetTagsCmd{Obj: obj}
		if c.Version, b, err = readUvarint(b); err != nil {
			return nil, err
		}
		n, b, err := readUvarint(b)
		if err != nil || n > uint64(len(b)/2) {
			return nil, ErrBadCommand
		}
		if n > 0 {
			c.Tags = make(map[string]string, n)
		}
		for range n {
			var k, v []byte
			if k, b, err = readBytes(b); err != nil {
				return nil, err
			}
			if v, b, err = readBytes(b); err != nil {
				return nil, err
			}
			c.Tags[string(k)] = string(v)
		}
		if len(b) != 0 {
			return nil, ErrBadCommand
		}
		return c, nil
	}
	return nil, ErrBadCommand
}
