package segment

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"

	"github.com/cairn-db/cairn/internal/chunk"
	"github.com/cairn-db/cairn/internal/storage"
)

// On-disk formats; see doc.go for the pictures. All integers are big-endian.
const (
	fileMagic      = 0x43525347 // "CRSG"
	fileVersion    = 1
	fileHeaderSize = 20

	recordMagic      = 0x4352434b // "CRCK"
	recordVersion    = 1
	recordHeaderSize = 48
	recordCRCOffset  = 44

	// flagPad marks a padding record: no chunk, zero data, never indexed.
	// The writer ends every group commit with one to fill the last block.
	flagPad = 1

	indexVersion   = 1
	indexValueSize = 1 + 8 + 8 + 4

	metaVersion   = 1
	metaValueSize = 1 + 1 + 8 + 8
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func segmentName(seg uint64) string { return fmt.Sprintf("seg-%016x.cairn", seg) }

// parseSegmentName returns the number of a segment file name.
func parseSegmentName(name string) (uint64, bool) {
	var seg uint64
	if len(name) != len("seg-0000000000000000.cairn") {
		return 0, false
	}
	if _, err := fmt.Sscanf(name, "seg-%016x.cairn", &seg); err != nil {
		return 0, false
	}
	return seg, segmentName(seg) == name
}

func encodeFileHeader(seg uint64) []byte {
	b := make([]byte, 0, fileHeaderSize)
	b = binary.BigEndian.AppendUint32(b, fileMagic)
	b = append(b, fileVersion, 0, 0, 0)
	b = binary.BigEndian.AppendUint64(b, seg)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// headerBlock is a new segment's first block: its file header and a
// padding record filling the rest, so records start block-aligned.
func headerBlock(seg uint64) []byte {
	b := make([]byte, blockSize)
	copy(b, encodeFileHeader(seg))
	encodePad(b[fileHeaderSize:])
	return b
}

func checkFileHeader(b []byte, seg uint64) error {
	if len(b) < fileHeaderSize {
		return fmt.Errorf("%w: segment header of %d bytes", ErrCorrupt, len(b))
	}
	if m := binary.BigEndian.Uint32(b); m != fileMagic {
		return fmt.Errorf("%w: segment magic %#x", ErrCorrupt, m)
	}
	if v := b[4]; v != fileVersion {
		return fmt.Errorf("%w: segment format version %d unknown", ErrCorrupt, v)
	}
	if got, want := crc32.Checksum(b[:16], castagnoli), binary.BigEndian.Uint32(b[16:]); got != want {
		return fmt.Errorf("%w: segment header checksum %#x, want %#x", ErrCorrupt, got, want)
	}
	if n := binary.BigEndian.Uint64(b[8:]); n != seg {
		return fmt.Errorf("%w: segment header names segment %d, file is %d", ErrCorrupt, n, seg)
	}
	return nil
}

// encodeRecord writes header and data into b, which has exactly
// recordHeaderSize+len(data) bytes, ready to append, and returns b. b's
// old contents do not matter (it may be a pooled buffer): every header
// byte is written.
func encodeRecord(b []byte, h chunk.Hash, data []byte) []byte {
	binary.BigEndian.PutUint32(b[0:], recordMagic)
	b[4] = recordVersion
	b[5] = 0          // flags: none defined yet
	b[6], b[7] = 0, 0 // reserved
	binary.BigEndian.PutUint32(b[8:], uint32(len(data)))
	copy(b[12:], h[:])
	copy(b[recordHeaderSize:], data)
	crc := crc32.Update(crc32.Checksum(b[:recordCRCOffset], castagnoli), castagnoli, data)
	binary.BigEndian.PutUint32(b[recordCRCOffset:], crc)
	return b
}

// encodePad fills b (at least recordHeaderSize bytes) with a padding
// record whose data is len(b)-recordHeaderSize zero bytes.
func encodePad(b []byte) {
	clear(b)
	binary.BigEndian.PutUint32(b[0:], recordMagic)
	b[4] = recordVersion
	b[5] = flagPad
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-recordHeaderSize))
	crc := crc32.Update(crc32.Checksum(b[:recordCRCOffset], castagnoli), castagnoli, b[recordHeaderSize:])
	binary.BigEndian.PutUint32(b[recordCRCOffset:], crc)
}

// recordHeader is a decoded record header.
type recordHeader struct {
	length uint32
	hash   chunk.Hash
	crc    uint32
	pad    bool // a padding record (flagPad): no chunk
}

// parseRecordHeader checks the fixed fields of a record header.
func parseRecordHeader(b []byte) (recordHeader, error) {
	var rh recordHeader
	if m := binary.BigEndian.Uint32(b); m != recordMagic {
		return rh, fmt.Errorf("%w: record magic %#x", ErrCorrupt, m)
	}
	if v := b[4]; v != recordVersion {
		return rh, fmt.Errorf("%w: record format version %d unknown", ErrCorrupt, v)
	}
	switch f := b[5]; f {
	case 0:
	case flagPad:
		rh.pad = true
	default:
		return rh, fmt.Errorf("%w: record flags %#x unknown", ErrCorrupt, f)
	}
	if r := binary.BigEndian.Uint16(b[6:]); r != 0 {
		return rh, fmt.Errorf("%w: record reserved bytes %#x are not zero", ErrCorrupt, r)
	}
	rh.length = binary.BigEndian.Uint32(b[8:])
	if rh.length > MaxChunkSize {
		return rh, fmt.Errorf("%w: record length %d", ErrCorrupt, rh.length)
	}
	copy(rh.hash[:], b[12:])
	rh.crc = binary.BigEndian.Uint32(b[recordCRCOffset:])
	return rh, nil
}

// verifyRecord checks the CRC over header and data, then that data hashes
// to the header's hash (for a padding record, that the hash field and the
// data are zero). Recovery uses it: it has no index entry to compare the
// header with.
func verifyRecord(hdr []byte, rh recordHeader, data []byte) error {
	crc := crc32.Update(crc32.Checksum(hdr[:recordCRCOffset], castagnoli), castagnoli, data)
	if crc != rh.crc {
		return fmt.Errorf("%w: record checksum %#x, want %#x", ErrCorrupt, crc, rh.crc)
	}
	if rh.pad {
		if rh.hash != (chunk.Hash{}) || slices.ContainsFunc(data, func(c byte) bool { return c != 0 }) {
			return fmt.Errorf("%w: padding record with a hash or data", ErrCorrupt)
		}
		return nil
	}
	if got := chunk.Sum(data); got != rh.hash {
		return fmt.Errorf("%w: record data hashes to %s, header says %s", ErrCorrupt, got, rh.hash)
	}
	return nil
}

// verifyRead checks a record read for the chunk with hash h and data length
// n, as Get does: the header's fixed fields (parseRecordHeader), that the
// header names h and n, and that data hashes to h. Every header byte but
// the CRC is thereby checked against a known value and every data byte
// against the chunk's BLAKE3 address, so the CRC, a second and weaker pass
// over the same bytes, is not computed: damage to the CRC field alone
// changes no byte that Get returns (recovery, which has no address to
// check against, still verifies it; see verifyRecord).
func verifyRead(hdr []byte, h chunk.Hash, n uint32, data []byte) error {
	rh, err := parseRecordHeader(hdr)
	if err != nil {
		return err
	}
	if rh.pad {
		return fmt.Errorf("%w: index points at a padding record", ErrCorrupt)
	}
	if rh.length != n || rh.hash != h {
		return fmt.Errorf("%w: record holds %s (%d bytes), index says %s (%d bytes)",
			ErrCorrupt, rh.hash, rh.length, h, n)
	}
	if int(n) != len(data) {
		return fmt.Errorf("%w: %d bytes of data read for a %d-byte record", ErrCorrupt, len(data), n)
	}
	if got := chunk.Sum(data); got != h {
		return fmt.Errorf("%w: record data hashes to %s, header says %s", ErrCorrupt, got, h)
	}
	return nil
}

// location is where a chunk's record lives.
type location struct {
	seg    uint64
	off    int64 // of the record header
	length uint32
}

func indexKey(h chunk.Hash) []byte {
	return append([]byte(storage.PrefixChunkIndex), h[:]...)
}

func (l location) encode() []byte {
	b := make([]byte, 0, indexValueSize)
	b = append(b, indexVersion)
	b = binary.BigEndian.AppendUint64(b, l.seg)
	b = binary.BigEndian.AppendUint64(b, uint64(l.off))
	return binary.BigEndian.AppendUint32(b, l.length)
}

func decodeLocation(b []byte) (location, error) {
	if len(b) != indexValueSize || b[0] != indexVersion {
		return location{}, fmt.Errorf("%w: chunk index entry of %d bytes, version %d", ErrCorrupt, len(b), firstByte(b))
	}
	return location{
		seg:    binary.BigEndian.Uint64(b[1:]),
		off:    int64(binary.BigEndian.Uint64(b[9:])),
		length: binary.BigEndian.Uint32(b[17:]),
	}, nil
}

// Segment states in the bookkeeping.
const (
	stateOpen   = 1
	stateSealed = 2
)

// segMeta is the bookkeeping of one segment: its state, the length of its
// durable, indexed prefix, and its record count.
type segMeta struct {
	state   uint8
	size    int64
	records int64
}

func segKey(seg uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte(storage.PrefixSegment), seg)
}

func (m segMeta) encode() []byte {
	b := make([]byte, 0, metaValueSize)
	b = append(b, metaVersion, m.state)
	b = binary.BigEndian.AppendUint64(b, uint64(m.size))
	return binary.BigEndian.AppendUint64(b, uint64(m.records))
}

func decodeSegMeta(b []byte) (segMeta, error) {
	if len(b) != metaValueSize || b[0] != metaVersion || (b[1] != stateOpen && b[1] != stateSealed) {
		return segMeta{}, fmt.Errorf("%w: segment bookkeeping entry of %d bytes, version %d", ErrCorrupt, len(b), firstByte(b))
	}
	return segMeta{
		state:   b[1],
		size:    int64(binary.BigEndian.Uint64(b[2:])),
		records: int64(binary.BigEndian.Uint64(b[10:])),
	}, nil
}

func firstByte(b []byte) int {
	if len(b) == 0 {
		return -1
	}
	return int(b[0])
}
