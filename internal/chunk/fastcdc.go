package chunk

import (
	"errors"
	"fmt"
	"io"
	"math/bits"

	"github.com/cairn-db/cairn/internal/bufpool"
)

// Default chunk sizes of the content-defined chunker.
const (
	DefaultMinSize = 256 << 10
	DefaultAvgSize = 1 << 20
	DefaultMaxSize = 4 << 20

	// MaxChunkSize bounds every chunk this package produces (content-defined
	// or fixed); the segment store refuses anything larger.
	MaxChunkSize = 64 << 20

	// minMinSize is the smallest MinSize accepted: below it the gear hash's
	// 64-byte window is not yet full when a cut is first allowed.
	minMinSize = 64
)

// Options configures the content-defined chunker. The zero value of every
// field means its default. Changing them changes where chunks are cut and so
// defeats deduplication against data chunked with other options.
type Options struct {
	// MinSize is the smallest chunk (except the last of a stream).
	// Default: AvgSize/4 (256 KiB with the default AvgSize).
	MinSize int
	// AvgSize is the target average chunk size; it is rounded to the
	// nearest power of two for the cut masks. Default: 1 MiB.
	AvgSize int
	// MaxSize is the largest chunk. Default: 4*AvgSize (4 MiB).
	MaxSize int
}

// EnsureDefaults fills in zero fields.
func (o *Options) EnsureDefaults() {
	if o.AvgSize == 0 {
		o.AvgSize = DefaultAvgSize
	}
	if o.MinSize == 0 {
		o.MinSize = o.AvgSize / 4
	}
	if o.MaxSize == 0 {
		o.MaxSize = o.AvgSize * 4
	}
}

// Validate reports every problem with the options at once.
func (o *Options) Validate() error {
	var errs []error
	if o.MinSize < minMinSize {
		errs = append(errs, fmt.Errorf("chunk: MinSize %d is below %d", o.MinSize, minMinSize))
	}
	if o.AvgSize < 256 {
		errs = append(errs, fmt.Errorf("chunk: AvgSize %d is below 256", o.AvgSize))
	}
	if o.MinSize > o.AvgSize {
		errs = append(errs, fmt.Errorf("chunk: MinSize %d exceeds AvgSize %d", o.MinSize, o.AvgSize))
	}
	if o.AvgSize > o.MaxSize {
		errs = append(errs, fmt.Errorf("chunk: AvgSize %d exceeds MaxSize %d", o.AvgSize, o.MaxSize))
	}
	if o.MaxSize > MaxChunkSize {
		errs = append(errs, fmt.Errorf("chunk: MaxSize %d exceeds %d", o.MaxSize, MaxChunkSize))
	}
	return errors.Join(errs...)
}

// masks returns the FastCDC cut masks for o: a harder one (more bits) used
// before AvgSize and an easier one after it ("normalized chunking", level 2).
// The masks take the top bits of the gear hash, which depend on the last 64
// bytes (lower bits see fewer bytes).
func (o *Options) masks() (small, large uint64) {
	b := bits.Len(uint(o.AvgSize)) - 1
	if o.AvgSize-(1<<b) > (1<<(b+1))-o.AvgSize {
		b++ // round to the nearest power of two
	}
	top := func(n int) uint64 { return ^uint64(0) << (64 - n) }
	return top(b + 2), top(b - 2)
}

// Chunker cuts a stream into content-defined chunks with FastCDC (Xia et al.,
// USENIX ATC 2016): a gear rolling hash, no cut before MinSize, a hard mask up
// to AvgSize and an easy one after it, and a forced cut at MaxSize. Identical
// content produces identical chunks wherever it appears in a stream, which is
// what makes chunk-level deduplication work.
//
// A Chunker holds a buffer of 2*MaxSize bytes. It is not safe for concurrent
// use.
type Chunker struct {
	r      io.Reader
	o      Options
	maskS  uint64
	maskL  uint64
	bufp   *[]byte // buf's pooled buffer
	buf    []byte
	start  int // first unconsumed byte in buf
	end    int // end of valid data in buf
	eof    bool
	err    error
	offset int64
}

// NewChunker returns a Chunker over r. o is completed with EnsureDefaults;
// invalid options make every Next return the validation error.
func NewChunker(r io.Reader, o Options) *Chunker {
	o.EnsureDefaults()
	c := &Chunker{r: r, o: o}
	if err := o.Validate(); err != nil {
		c.err = err
		return c
	}
	c.maskS, c.maskL = o.masks()
	c.bufp = bufpool.Get(2 * o.MaxSize)
	c.buf = *c.bufp
	return c
}

// errClosed is what Next returns after Close.
var errClosed = errors.New("chunk: Next after Close")

// Close gives the Chunker's buffer back for reuse by later Chunkers: no
// chunk that Next returned may be used after it. Next then fails. A
// Chunker that is not closed leaves its buffer to the garbage collector.
func (c *Chunker) Close() {
	if c.bufp != nil {
		bufpool.Put(c.bufp)
		c.bufp, c.buf = nil, nil
		c.start, c.end = 0, 0
		c.err = errClosed
	}
}

// Next returns the next chunk, or io.EOF after the last one. The returned
// slice aliases the Chunker's buffer and is valid only until the next call.
// A read error of the underlying reader is returned as soon as it is seen
// (data buffered before it is dropped) and every later call returns it again.
func (c *Chunker) Next() ([]byte, error) {
	if c.err != nil {
		return nil, c.err
	}
	if c.end-c.start < c.o.MaxSize && !c.eof {
		if err := c.fill(); err != nil {
			c.err = err
			return nil, err
		}
	}
	avail := c.end - c.start
	if avail == 0 {
		c.err = io.EOF
		return nil, io.EOF
	}
	n := cut(c.buf[c.start:c.end], c.o.MinSize, c.o.AvgSize, c.o.MaxSize, c.maskS, c.maskL)
	out := c.buf[c.start : c.start+n : c.start+n]
	c.start += n
	c.offset += int64(n)
	return out, nil
}

// Offset returns the stream offset of the byte after the last returned chunk.
func (c *Chunker) Offset() int64 { return c.offset }

// fill reads until MaxSize bytes are unconsumed or the reader is
// exhausted. It moves the unconsumed bytes to the front of the buffer only
// when the rest of the buffer cannot take MaxSize of them: about once per
// MaxSize consumed, rather than once per chunk.
func (c *Chunker) fill() error {
	if len(c.buf)-c.start < c.o.MaxSize {
		c.end = copy(c.buf, c.buf[c.start:c.end])
		c.start = 0
	}
	for c.end-c.start < c.o.MaxSize {
		n, err := c.r.Read(c.buf[c.end:])
		c.end += n
		if err == io.EOF {
			c.eof = true
			return nil
		}
		if err != nil {
			return err
		}
		if n == 0 {
			// Tolerate readers that return (0, nil) now and then, but do
			// not spin forever on one that always does.
			n, err = c.r.Read(c.buf[c.end:])
			c.end += n
			if err == io.EOF {
				c.eof = true
				return nil
			}
			if err != nil {
				return err
			}
			if n == 0 {
				return io.ErrNoProgress
			}
		}
	}
	return nil
}

// cut returns the length of the first chunk of data. If len(data) < max the
// caller must be at the end of the stream.
func cut(data []byte, min, avg, max int, maskS, maskL uint64) int {
	n := len(data)
	if n <= min {
		return n
	}
	if n > max {
		n = max
	}
	normal := avg
	if normal > n {
		normal = n
	}
	var fp uint64
	g := &gear
	i := min
	// Unrolled by four: the loop-carried work is one shift and one add per
	// byte; the bounds check and the loop test are paid once per four.
	for ; i+4 <= normal; i += 4 {
		d := data[i : i+4 : i+4]
		if fp = fp<<1 + g[d[0]]; fp&maskS == 0 {
			return i + 1
		}
		if fp = fp<<1 + g[d[1]]; fp&maskS == 0 {
			return i + 2
		}
		if fp = fp<<1 + g[d[2]]; fp&maskS == 0 {
			return i + 3
		}
		if fp = fp<<1 + g[d[3]]; fp&maskS == 0 {
			return i + 4
		}
	}
	for ; i < normal; i++ {
		if fp = fp<<1 + g[data[i]]; fp&maskS == 0 {
			return i + 1
		}
	}
	for ; i+4 <= n; i += 4 {
		d := data[i : i+4 : i+4]
		if fp = fp<<1 + g[d[0]]; fp&maskL == 0 {
			return i + 1
		}
		if fp = fp<<1 + g[d[1]]; fp&maskL == 0 {
			return i + 2
		}
		if fp = fp<<1 + g[d[2]]; fp&maskL == 0 {
			return i + 3
		}
		if fp = fp<<1 + g[d[3]]; fp&maskL == 0 {
			return i + 4
		}
	}
	for ; i < n; i++ {
		if fp = fp<<1 + g[data[i]]; fp&maskL == 0 {
			return i + 1
		}
	}
	return n
}
