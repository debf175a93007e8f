package segment

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"syscall"
	"unsafe"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// blockSize is the unit of segment appends. Every group commit starts at a
// multiple of it and ends with a padding record up to the next one, so
//
//   - the writer can append with O_DIRECT, which needs offsets, lengths and
//     memory aligned to the device's block (4096 covers 512-byte and
//     4 KiB devices), and
//   - no write ever touches a block holding records already acknowledged:
//     a crash tearing one append cannot damage an earlier one.
//
// The cost is at most a block and a record header per group commit.
const blockSize = 4096

// cachedRecord: a group commit whose records are all this small is
// written through the page cache, not with O_DIRECT. Such records are the
// pieces of byte-range writes (16 KiB for a 16 KiB write), and they are
// read back soon and at random — by the next version's hash, by writes
// next to them, by reads of the versions that share them — where a read
// that misses the cache costs a device round trip and more CPU than the
// copy into the cache did. The chunks of whole uploads (content-defined,
// ~1 MiB) are written directly: large, read in order, and not worth the
// memory.
const cachedRecord = 128 << 10

// stageSize is the size of the writer's staging buffer: a group commit is
// written out in pieces of this size, then its padded remainder.
const stageSize = 4 << 20

// appender writes records at the tail of the open segment through a
// block-aligned staging buffer: full stages as they fill, the rest (padded
// to a block) when the group commit ends. It is owned by the writer
// goroutine.
type appender struct {
	f      vfs.File // the segment; reads and syncs use it
	direct *os.File // the same file opened with O_DIRECT, or nil
	name   string

	buf []byte // stageSize + 2 blocks (room for the final pad), block-aligned
	n   int    // bytes staged
	off int64  // file offset of buf[0]; a multiple of blockSize

	// pads counts the bytes of padding records written, for the stats.
	pads int64

	// large is set once a record of more than cachedRecord bytes is
	// staged in this group commit; until then, the group is written
	// through the page cache (see write).
	large bool

	// noDirect is set once O_DIRECT was refused, at open or by a write:
	// from then on every segment is written through the page cache.
	noDirect bool
	log      *slog.Logger
}

// padTo is the length n bytes of records take once padded to whole
// blocks: a padding record fills the rest of the last block, or of the
// block after it when the rest is too short for a record header.
func padTo(n int64) int64 {
	p := (blockSize - n%blockSize) % blockSize
	if p > 0 && p < recordHeaderSize {
		p += blockSize
	}
	return n + p
}

func newAppender(log *slog.Logger) appender {
	return appender{buf: alignedBuf(stageSize + 2*blockSize), log: log}
}

// alignedBuf returns n bytes of memory starting at a multiple of blockSize.
func alignedBuf(n int) []byte {
	b := make([]byte, n+blockSize)
	skip := int(-uintptr(unsafe.Pointer(&b[0])) & (blockSize - 1))
	return b[skip : skip+n : skip+n]
}

// reset points the appender at a segment whose synced length is off (a
// multiple of blockSize), closing the previous direct handle.
func (a *appender) reset(f vfs.File, direct *os.File, name string, off int64) {
	a.closeDirect()
	a.f, a.direct, a.name, a.n, a.off = f, direct, name, 0, off
}

// tail is the offset the next record will have.
func (a *appender) tail() int64 { return a.off + int64(a.n) }

// add stages rec, writing out each stage that fills.
func (a *appender) add(rec []byte) error {
	if len(rec) > cachedRecord {
		a.large = true
	}
	for len(rec) > 0 {
		c := copy(a.buf[a.n:stageSize], rec)
		a.n += c
		rec = rec[c:]
		if a.n == stageSize {
			if err := a.write(a.buf[:stageSize]); err != nil {
				return err
			}
		}
	}
	return nil
}

// finish pads what is staged to a whole block with a padding record and
// writes it out. The tail is then a multiple of blockSize.
func (a *appender) finish() error {
	if p := int(padTo(int64(a.n))) - a.n; p > 0 {
		encodePad(a.buf[a.n : a.n+p])
		a.n += p
		a.pads += int64(p)
	}
	if a.n == 0 {
		a.large = false
		return nil
	}
	err := a.write(a.buf[:a.n])
	a.large = false
	return err
}

func (a *appender) write(b []byte) error {
	var err error
	if a.direct != nil && a.large {
		_, err = a.direct.WriteAt(b, a.off)
		if errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.EOPNOTSUPP) {
			// The file system took O_DIRECT at open but refuses these
			// writes (a stricter alignment than ours, or no direct I/O
			// after all). The refused write changed nothing; an earlier
			// part of this one may have been written, and is written
			// again, identically, below. From now on write through the
			// page cache.
			a.log.Warn("segment append with O_DIRECT refused; writing through the page cache", "segment", a.name, "err", err)
			a.noDirect = true
			a.closeDirect()
		}
	}
	if a.direct == nil || !a.large {
		_, err = a.f.WriteAt(b, a.off)
	}
	if err != nil {
		return fmt.Errorf("segment: append to %s: %w", a.name, err)
	}
	a.off += int64(len(b))
	a.n = 0
	return nil
}

func (a *appender) closeDirect() {
	if a.direct != nil {
		a.direct.Close()
		a.direct = nil
	}
}
