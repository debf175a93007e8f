package replica

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/cairn-db/cairn/internal/storage"
)

// Key layout of one range's replica-local state (see doc.go for the drawing).
const (
	suffixApplied   = 'a' // applied index
	suffixBounds    = 'b' // the range's key bounds (see encodeBounds)
	suffixSplit     = 's' // the range's latest split (see encodeSplit)
	suffixMerge     = 'm' // the range's merge state (see encodeMerge)
	suffixTombstone = 'x' // the range was merged into the range it names
	suffixConfState = 'c' // raftpb.ConfState as of the applied index
	suffixHardState = 'h' // raftpb.HardState
	suffixLog       = 'l' // + index BE64: raftpb.Entry
	suffixTruncated = 't' // index BE64 + term BE64 of the last truncated entry
)

// Value framing: every value is magic, version, payload, crc32c(magic..payload).
const (
	valueMagic   = 0xCA
	valueVersion = 0x01
	valueHeader  = 2
	valueTrailer = 4
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// rangePrefix returns 0x01 'r' rangeID(8, BE).
func rangePrefix(rangeID uint64) []byte {
	k := make([]byte, 0, len(storage.PrefixRangeLocal)+8+1+8)
	k = append(k, storage.PrefixRangeLocal...)
	return binary.BigEndian.AppendUint64(k, rangeID)
}

func stateKey(prefix []byte, suffix byte) []byte {
	return appendStateKey(make([]byte, 0, len(prefix)+1), prefix, suffix)
}

func appendStateKey(dst, prefix []byte, suffix byte) []byte {
	return append(append(dst, prefix...), suffix)
}

func logKey(prefix []byte, index uint64) []byte {
	return appendLogKey(make([]byte, 0, len(prefix)+9), prefix, index)
}

func appendLogKey(dst, prefix []byte, index uint64) []byte {
	return binary.BigEndian.AppendUint64(appendStateKey(dst, prefix, suffixLog), index)
}

// logIndex decodes the index of a log key built by logKey for prefix.
func logIndex(prefix, key []byte) (uint64, bool) {
	if len(key) != len(prefix)+9 || key[len(prefix)] != suffixLog {
		return 0, false
	}
	return binary.BigEndian.Uint64(key[len(prefix)+1:]), true
}

// encodeValue frames payload as magic | version | payload | crc32c.
func encodeValue(payload []byte) []byte {
	v := appendValueHeader(make([]byte, 0, valueHeader+len(payload)+valueTrailer))
	return sealValue(append(v, payload...), 0)
}

// appendValueHeader starts a framed value (encodeValue) at the end of dst.
func appendValueHeader(dst []byte) []byte { return append(dst, valueMagic, valueVersion) }

// sealValue ends the framed value that starts at v[start:] (its header and
// payload appended) with its checksum.
func sealValue(v []byte, start int) []byte {
	return binary.BigEndian.AppendUint32(v, crc32.Checksum(v[start:], crcTable))
}

// decodeValue checks the framing of v and returns its payload, which aliases v.
func decodeValue(v []byte) ([]byte, error) {
	if len(v) < valueHeader+valueTrailer {
		return nil, fmt.Errorf("%w: value of %d bytes is too short", ErrCorrupt, len(v))
	}
	if v[0] != valueMagic {
		return nil, fmt.Errorf("%w: bad magic %#x", ErrCorrupt, v[0])
	}
	if v[1] != valueVersion {
		return nil, fmt.Errorf("%w: unknown format version %d", ErrCorrupt, v[1])
	}
	body := v[:len(v)-valueTrailer]
	want := binary.BigEndian.Uint32(v[len(v)-valueTrailer:])
	if got := crc32.Checksum(body, crcTable); got != want {
		return nil, fmt.Errorf("%w: checksum %#x, want %#x", ErrCorrupt, got, want)
	}
	return body[valueHeader:], nil
}

func encodeUint64s(xs ...uint64) []byte {
	b := make([]byte, 0, 8*len(xs))
	for _, x := range xs {
		b = binary.BigEndian.AppendUint64(b, x)
	}
	return encodeValue(b)
}

func decodeUint64s(v []byte, n int) ([]uint64, error) {
	p, err := decodeValue(v)
	if err != nil {
		return nil, err
	}
	if len(p) != 8*n {
		return nil, fmt.Errorf("%w: want %d bytes, got %d", ErrCorrupt, 8*n, len(p))
	}
	xs := make([]uint64, n)
	for i := range xs {
		xs[i] = binary.BigEndian.Uint64(p[8*i:])
	}
	return xs, nil
}

// Command framing inside a raft entry's data: kind | proposal id BE64 | cmd.
// The kind is cmdVersion for a StateMachine command, cmdSplit for a
// split (split.go) and cmdMerge for a step of a merge (merge.go). An entry with empty data is raft's own (a new leader's
// empty entry).
const (
	cmdVersion = 0x01
	cmdSplit   = 0x02
	cmdMerge   = 0x03
	cmdHeader  = 9
)

func encodeCommand(id uint64, cmd []byte) []byte { return encodeKind(cmdVersion, id, cmd) }

func encodeKind(kind byte, id uint64, cmd []byte) []byte {
	b := make([]byte, 0, cmdHeader+len(cmd))
	b = append(b, kind)
	b = binary.BigEndian.AppendUint64(b, id)
	return append(b, cmd...)
}

func decodeCommand(data []byte) (id uint64, cmd []byte, err error) {
	_, id, cmd, err = decodeKind(data)
	return id, cmd, err
}

func decodeKind(data []byte) (kind byte, id uint64, cmd []byte, err error) {
	if len(data) < cmdHeader {
		return 0, 0, nil, fmt.Errorf("%w: command of %d bytes is too short", ErrCorrupt, len(data))
	}
	if data[0] != cmdVersion && data[0] != cmdSplit && data[0] != cmdMerge {
		return 0, 0, nil, fmt.Errorf("%w: unknown command kind %d", ErrCorrupt, data[0])
	}
	return data[0], binary.BigEndian.Uint64(data[1:cmdHeader]), data[cmdHeader:], nil
}

// encodeBounds frames a range's key bounds: uvarint length and bytes of
// Start, then 0 (no End: the range is unbounded above) or 1 and the
// uvarint length and bytes of End.
func encodeBounds(start, end []byte) []byte { return encodeValue(appendBounds(nil, start, end)) }

func decodeBounds(v []byte) (start, end []byte, err error) {
	p, err := decodeValue(v)
	if err != nil {
		return nil, nil, err
	}
	return parseBounds(p)
}

// appendBounds appends the unframed encoding of encodeBounds to b.
func appendBounds(b, start, end []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(start)))
	b = append(b, start...)
	if end == nil {
		return append(b, 0)
	}
	b = append(b, 1)
	b = binary.AppendUvarint(b, uint64(len(end)))
	return append(b, end...)
}

// parseBounds decodes what appendBounds wrote, all of p.
func parseBounds(p []byte) (start, end []byte, err error) {
	bad := fmt.Errorf("%w: malformed range bounds", ErrCorrupt)
	n, k := binary.Uvarint(p)
	if k <= 0 || n > uint64(len(p)-k) {
		return nil, nil, bad
	}
	start, p = append([]byte{}, p[k:k+int(n)]...), p[k+int(n):]
	switch {
	case len(p) == 1 && p[0] == 0:
		return start, nil, nil
	case len(p) < 2 || p[0] != 1:
		return nil, nil, bad
	}
	p = p[1:]
	n, k = binary.Uvarint(p)
	if k <= 0 || n != uint64(len(p)-k) {
		return nil, nil, bad
	}
	return start, append([]byte{}, p[k:]...), nil
}
