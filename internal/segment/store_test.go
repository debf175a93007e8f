package segment

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/cairn-db/cairn/internal/chunk"
	"github.com/cairn-db/cairn/internal/storage"
)

// testNode is a store with its pebble instance on one FS.
type testNode struct {
	fs  vfs.FS
	eng *storage.Engine
	st  *Store
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func openNode(t testing.TB, fs vfs.FS, segSize int64) *testNode {
	t.Helper()
	return openNodeAt(t, fs, "", segSize)
}

// openNodeAt opens pebble in base/db and the store in base/seg, its
// options passing through tune.
func openNodeAt(t testing.TB, fs vfs.FS, base string, segSize int64, tune ...func(*Options)) *testNode {
	t.Helper()
	eng, err := storage.Open(storage.Options{Dir: fs.PathJoin(base, "db"), FS: fs, CacheSize: 1 << 20, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Dir: fs.PathJoin(base, "seg"), FS: fs, DB: eng.DB(), SegmentSize: segSize, Logger: quietLogger()}
	for _, f := range tune {
		f(&o)
	}
	st, err := Open(o)
	if err != nil {
		eng.Close()
		t.Fatal(err)
	}
	return &testNode{fs: fs, eng: eng, st: st}
}

func (n *testNode) close(t testing.TB) {
	t.Helper()
	if err := n.st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := n.st.Close(); err != nil { // idempotent
		t.Fatal(err)
	}
	if err := n.eng.Close(); err != nil {
		t.Fatal(err)
	}
}

func randomChunk(rng *rand.Rand, n int) ([]byte, chunk.Hash) {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b, chunk.Sum(b)
}

func mustGet(t testing.TB, st *Store, h chunk.Hash, want []byte) {
	t.Helper()
	got, err := st.Get(context.Background(), h, nil)
	if err != nil {
		t.Fatalf("Get %s: %v", h, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Get %s: wrong bytes", h)
	}
}

func TestPutGetDedup(t *testing.T) {
	ctx := context.Background()
	n := openNode(t, vfs.NewMem(), 0)
	defer n.close(t)
	rng := rand.New(rand.NewPCG(1, 2))
	data, h := randomChunk(rng, 5000)
	if ok, err := n.st.Has(h); ok || err != nil {
		t.Fatalf("Has before Put = %v, %v", ok, err)
	}
	if _, err := n.st.Get(ctx, h, nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get before Put = %v", err)
	}
	if err := n.st.Put(ctx, h, data); err != nil {
		t.Fatal(err)
	}
	if ok, err := n.st.Has(h); !ok || err != nil {
		t.Fatalf("Has after Put = %v, %v", ok, err)
	}
	mustGet(t, n.st, h, data)
	before := n.st.Stats()
	if err := n.st.Put(ctx, h, data); err != nil {
		t.Fatal(err)
	}
	if after := n.st.Stats(); after != before {
		t.Fatalf("second Put of the same chunk changed stats: %+v -> %+v", before, after)
	}
	// The header block, then the record padded to a block.
	if before.Chunks != 1 || before.Segments != 1 || before.Bytes != blockSize+padTo(recordHeaderSize+5000) {
		t.Fatalf("stats %+v", before)
	}
	// dst is reused when large enough.
	buf := make([]byte, 0, 8000)
	got, err := n.st.Get(ctx, h, buf)
	if err != nil || &got[0] != &buf[:1][0] {
		t.Fatalf("Get did not use dst: %v", err)
	}
	// The empty chunk is a chunk like any other.
	if err := n.st.Put(ctx, chunk.Sum(nil), nil); err != nil {
		t.Fatal(err)
	}
	mustGet(t, n.st, chunk.Sum(nil), []byte{})

	// (A Put of a hash already stored is a no-op and does not hash data.)
	if err := n.st.Put(ctx, chunk.Sum([]byte("other")), data); !errors.Is(err, ErrHashMismatch) {
		t.Fatalf("Put with the wrong hash = %v", err)
	}
	big := make([]byte, MaxChunkSize+1)
	if err := n.st.Put(ctx, chunk.Hash{}, big); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Put of an oversized chunk = %v", err)
	}
	// PutAsync copies: scribbling on the buffer after it returns is safe.
	data2, h2 := randomChunk(rng, 3000)
	keep := bytes.Clone(data2)
	p := n.st.PutAsync(h2, data2)
	clear(data2)
	if err := p.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	mustGet(t, n.st, h2, keep)
}

// TestPutAsyncHashed stores chunks whose hash the caller computed, and
// checks that a wrong one is caught on the way out: Get reports the chunk
// as corrupt rather than return bytes that do not match their address.
func TestPutAsyncHashed(t *testing.T) {
	ctx := context.Background()
	n := openNode(t, vfs.NewMem(), 0)
	defer n.close(t)
	rng := rand.New(rand.NewPCG(5, 6))
	data, h := randomChunk(rng, 4000)
	keep := bytes.Clone(data)
	p := n.st.PutAsyncHashed(h, data)
	clear(data) // copied before PutAsyncHashed returns
	if err := p.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	mustGet(t, n.st, h, keep)
	if err := n.st.PutAsyncHashed(h, keep).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if s := n.st.Stats(); s.Chunks != 1 {
		t.Fatalf("second put of the same chunk was written: %+v", s)
	}

	other, _ := randomChunk(rng, 4000)
	wrong := chunk.Sum([]byte("not other"))
	if err := n.st.PutAsyncHashed(wrong, other).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := n.st.Get(ctx, wrong, nil); !errors.Is(err, ErrCorrupt) || got != nil {
		t.Fatalf("Get of a chunk stored under a wrong hash = %d bytes, %v", len(got), err)
	}
}

func TestConcurrentPutsOfOneHashWriteOnce(t *testing.T) {
	n := openNode(t, vfs.NewMem(), 0)
	defer n.close(t)
	data, h := randomChunk(rand.New(rand.NewPCG(3, 4)), 10000)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			if err := n.st.Put(context.Background(), h, data); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if c := n.st.Stats().Chunks; c != 1 {
		t.Fatalf("%d records written for one chunk", c)
	}
	mustGet(t, n.st, h, data)
}

func TestClosedStore(t *testing.T) {
	n := openNode(t, vfs.NewMem(), 0)
	data, h := randomChunk(rand.New(rand.NewPCG(5, 6)), 100)
	n.close(t)
	if err := n.st.Put(context.Background(), h, data); !errors.Is(err, ErrClosed) {
		t.Fatalf("Put after Close = %v", err)
	}
}

func TestOptionsValidate(t *testing.T) {
	o := Options{SegmentSize: 10}
	err := o.Validate()
	if err == nil {
		t.Fatal("validated")
	}
	for _, want := range []string{"Dir", "DB", "SegmentSize"} {
		if !bytes.Contains([]byte(err.Error()), []byte(want)) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}

// flipByte flips one byte of a file on fs.
func flipByte(t *testing.T, fs vfs.FS, name string, off int64) {
	t.Helper()
	f, err := fs.OpenReadWrite(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x40
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

func TestCorruptionDetected(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	n := openNode(t, fs, 0)
	rng := rand.New(rand.NewPCG(7, 8))
	var datas [][]byte
	var hashes []chunk.Hash
	for range 4 {
		d, h := randomChunk(rng, 1000)
		if err := n.st.Put(ctx, h, d); err != nil {
			t.Fatal(err)
		}
		datas, hashes = append(datas, d), append(hashes, h)
	}
	name := fs.PathJoin("seg", segmentName(1))
	// Record 1: a data byte. Record 2: a byte of the hash in the header.
	flipByte(t, fs, name, mustLocate(t, n.st, hashes[1]).off+recordHeaderSize+500)
	flipByte(t, fs, name, mustLocate(t, n.st, hashes[2]).off+20)
	check := func(st *Store) {
		for i, h := range hashes {
			got, err := st.Get(ctx, h, nil)
			if i == 1 || i == 2 {
				if !errors.Is(err, ErrCorrupt) || got != nil {
					t.Fatalf("Get of damaged chunk %d = %d bytes, %v", i, len(got), err)
				}
				continue
			}
			if err != nil || !bytes.Equal(got, datas[i]) {
				t.Fatalf("Get of intact chunk %d: %v", i, err)
			}
		}
	}
	check(n.st)
	// After a restart the damage is inside the acknowledged prefix: nothing
	// is truncated, the segment is sealed, and new writes go elsewhere.
	n.close(t)
	n = openNode(t, fs, 0)
	defer n.close(t)
	check(n.st)
	if s := n.st.Stats(); s.Segments != 2 {
		t.Fatalf("damaged segment not sealed: %+v", s)
	}
	d, h := randomChunk(rng, 1000)
	if err := n.st.Put(ctx, h, d); err != nil {
		t.Fatal(err)
	}
	mustGet(t, n.st, h, d)
}

func TestRotation(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	n := openNode(t, fs, 8<<10)
	rng := rand.New(rand.NewPCG(9, 10))
	chunks := map[chunk.Hash][]byte{}
	for i := range 20 {
		d, h := randomChunk(rng, 3000)
		if err := n.st.Put(ctx, h, d); err != nil {
			t.Fatal(err)
		}
		chunks[h] = d
		if i == 10 {
			// A chunk bigger than a segment gets one of its own.
			d, h := randomChunk(rng, 20<<10)
			if err := n.st.Put(ctx, h, d); err != nil {
				t.Fatal(err)
			}
			chunks[h] = d
		}
	}
	names, err := fs.List("seg")
	if err != nil {
		t.Fatal(err)
	}
	// One 3000-byte record, padded to a block, fits in 8 KiB after the
	// header block; the second starts a new segment.
	if len(names) < 21 {
		t.Fatalf("%d segment files: %v", len(names), names)
	}
	for _, name := range names {
		fi, err := fs.Stat(fs.PathJoin("seg", name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > 8<<10 && fi.Size() != blockSize+padTo(recordHeaderSize+20<<10) {
			t.Fatalf("%s has %d bytes", name, fi.Size())
		}
	}
	stats := n.st.Stats()
	if stats.Segments != len(names) || stats.Chunks != 21 {
		t.Fatalf("stats %+v with %d files", stats, len(names))
	}
	for h, d := range chunks {
		mustGet(t, n.st, h, d)
	}
	n.close(t)
	n = openNode(t, fs, 8<<10)
	defer n.close(t)
	for h, d := range chunks {
		mustGet(t, n.st, h, d)
	}
	if s := n.st.Stats(); s != stats {
		t.Fatalf("stats after reopen %+v, before %+v", s, stats)
	}
}

// TestRecoveryTornTail appends to the open segment a valid but unindexed
// record and then half of another, on memory and on the real disk (whose
// files can be truncated in place). With aligned, the orphan is a whole
// group commit (record and padding, as the writer leaves it when it
// crashes between its fsync and the index commit): recovery keeps
// appending to the segment. Without, the tail is off a block boundary and
// the segment is sealed for a new one.
func TestRecoveryTornTail(t *testing.T) {
	for _, tc := range []struct {
		fs      string
		aligned bool
	}{{"mem", true}, {"disk", true}, {"mem", false}, {"disk", false}} {
		fsName := tc.fs
		t.Run(fmt.Sprintf("%s/aligned=%v", tc.fs, tc.aligned), func(t *testing.T) {
			ctx := context.Background()
			var fs vfs.FS = vfs.NewMem()
			base := ""
			if fsName == "disk" {
				fs, base = vfs.Default, t.TempDir()
			}
			n := openNodeAt(t, fs, base, 0)
			rng := rand.New(rand.NewPCG(11, 12))
			chunks := map[chunk.Hash][]byte{}
			for range 5 {
				d, h := randomChunk(rng, 2000)
				if err := n.st.Put(ctx, h, d); err != nil {
					t.Fatal(err)
				}
				chunks[h] = d
			}
			n.close(t)

			name := fs.PathJoin(base, "seg", segmentName(1))
			f, err := fs.OpenReadWrite(name, vfs.WriteCategoryUnspecified)
			if err != nil {
				t.Fatal(err)
			}
			fi, _ := f.Stat()
			good := fi.Size()
			if good%blockSize != 0 {
				t.Fatalf("segment of %d bytes: not block-aligned", good)
			}
			// A record whose Put crashed between fsync and index commit...
			orphan, oh := randomChunk(rng, 1500)
			rec := newRecord(oh, orphan)
			if tc.aligned {
				pad := make([]byte, padTo(int64(len(rec)))-int64(len(rec)))
				encodePad(pad)
				rec = append(rec, pad...)
			}
			f.WriteAt(rec, good)
			// ...followed by half of another record.
			torn, th := randomChunk(rng, 1500)
			f.WriteAt(newRecord(th, torn)[:700], good+int64(len(rec)))
			f.Sync()
			f.Close()

			n = openNodeAt(t, fs, base, 0)
			fi, err = fs.Stat(name)
			if err != nil {
				t.Fatal(err)
			}
			if want := good + int64(len(rec)); fi.Size() != want {
				t.Fatalf("file size after recovery %d, want %d", fi.Size(), want)
			}
			for h, d := range chunks {
				mustGet(t, n.st, h, d)
			}
			mustGet(t, n.st, oh, orphan) // re-indexed
			if _, err := n.st.Get(ctx, th, nil); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Get of the torn record = %v", err)
			}
			// The store appends after the recovered tail.
			if err := n.st.Put(ctx, th, torn); err != nil {
				t.Fatal(err)
			}
			n.close(t)
			n = openNodeAt(t, fs, base, 0)
			defer n.close(t)
			mustGet(t, n.st, th, torn)
			wantSegs := 1
			if !tc.aligned {
				wantSegs = 2
			}
			if s := n.st.Stats(); s.Chunks != 7 || s.Segments != wantSegs {
				t.Fatalf("stats %+v, want %d segments", s, wantSegs)
			}
		})
	}
}

// TestRecoveryLostSeal simulates a crash during rotation after the new
// segment was created but before the seal of the old one was committed.
func TestRecoveryLostSeal(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	n := openNode(t, fs, 0)
	d, h := randomChunk(rand.New(rand.NewPCG(13, 14)), 100)
	if err := n.st.Put(ctx, h, d); err != nil {
		t.Fatal(err)
	}
	n.close(t)
	// An orphan record in segment 1 and an empty segment 2.
	orphan, oh := randomChunk(rand.New(rand.NewPCG(15, 16)), 100)
	f, _ := fs.OpenReadWrite(fs.PathJoin("seg", segmentName(1)), vfs.WriteCategoryUnspecified)
	fi, _ := f.Stat()
	f.WriteAt(newRecord(oh, orphan), fi.Size())
	f.Close()
	f, _ = fs.Create(fs.PathJoin("seg", segmentName(2)), vfs.WriteCategoryUnspecified)
	f.Write(headerBlock(2))
	f.Close()

	n = openNode(t, fs, 0)
	defer n.close(t)
	mustGet(t, n.st, h, d)
	mustGet(t, n.st, oh, orphan)
	d3, h3 := randomChunk(rand.New(rand.NewPCG(17, 18)), 100)
	if err := n.st.Put(ctx, h3, d3); err != nil {
		t.Fatal(err)
	}
	if s := n.st.Stats(); s.Segments != 2 || s.Chunks != 3 {
		t.Fatalf("stats %+v", s)
	}
}

func TestFormatRoundTrip(t *testing.T) {
	data := []byte("chunk data")
	h := chunk.Sum(data)
	rec := newRecord(h, data)
	rh, err := parseRecordHeader(rec)
	if err != nil || rh.length != uint32(len(data)) || rh.hash != h {
		t.Fatalf("parse: %+v, %v", rh, err)
	}
	if err := verifyRecord(rec, rh, rec[recordHeaderSize:]); err != nil {
		t.Fatal(err)
	}
	for i := range rec {
		c := bytes.Clone(rec)
		c[i] ^= 1
		if scanAccepts(c, len(data)) {
			t.Fatalf("flip of byte %d undetected", i)
		}
		// Get's check skips the CRC: only a flip in the CRC field itself,
		// which changes no byte Get returns, goes unseen.
		err := verifyRead(c[:recordHeaderSize], h, uint32(len(data)), c[recordHeaderSize:])
		inCRC := i >= recordCRCOffset && i < recordHeaderSize
		if (err == nil) != inCRC {
			t.Fatalf("flip of byte %d: verifyRead = %v", i, err)
		}
	}
	if err := verifyRead(rec[:recordHeaderSize], h, uint32(len(data)), rec[recordHeaderSize:]); err != nil {
		t.Fatal(err)
	}
	if err := verifyRead(rec[:recordHeaderSize], chunk.Sum([]byte("other")), uint32(len(data)), rec[recordHeaderSize:]); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("record of another hash: %v", err)
	}
	if err := verifyRead(rec[:recordHeaderSize], h, uint32(len(data))+1, rec[recordHeaderSize:]); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("record of another length: %v", err)
	}
	// A padding record passes recovery's check but never Get's, and
	// any byte of it changed (a data byte included) is caught.
	pad := make([]byte, 300)
	encodePad(pad)
	if rh, err := parseRecordHeader(pad); err != nil || !rh.pad || rh.length != 300-recordHeaderSize {
		t.Fatalf("parse padding: %+v, %v", rh, err)
	} else if err := verifyRecord(pad, rh, pad[recordHeaderSize:]); err != nil {
		t.Fatalf("padding: %v", err)
	}
	if err := verifyRead(pad[:recordHeaderSize], chunk.Hash{}, 300-recordHeaderSize, pad[recordHeaderSize:]); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("verifyRead of padding = %v", err)
	}
	for i := range pad {
		c := bytes.Clone(pad)
		c[i] ^= 1
		if scanAccepts(c, 300-recordHeaderSize) {
			t.Fatalf("flip of padding byte %d undetected", i)
		}
	}
	if err := checkFileHeader(encodeFileHeader(7), 7); err != nil {
		t.Fatal(err)
	}
	if err := checkFileHeader(encodeFileHeader(7), 8); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("wrong segment number: %v", err)
	}
	loc := location{seg: 3, off: 12345, length: 99}
	if got, err := decodeLocation(loc.encode()); err != nil || got != loc {
		t.Fatalf("location round trip: %+v, %v", got, err)
	}
	m := segMeta{state: stateSealed, size: 1 << 30, records: 77}
	if got, err := decodeSegMeta(m.encode()); err != nil || got != m {
		t.Fatalf("meta round trip: %+v, %v", got, err)
	}
	for _, name := range []string{segmentName(0), segmentName(1 << 40)} {
		if _, ok := parseSegmentName(name); !ok {
			t.Fatalf("parseSegmentName(%q) failed", name)
		}
	}
	for _, name := range []string{"seg-1.cairn", "seg-000000000000000G.cairn", "x", fmt.Sprintf("seg-%016X.cairn", 0xab)} {
		if _, ok := parseSegmentName(name); ok {
			t.Fatalf("parseSegmentName(%q) succeeded", name)
		}
	}
}

// FuzzRecord feeds arbitrary bytes to the record, index and bookkeeping
// decoders: they must not panic, and what they accept must be consistent.
func FuzzRecord(f *testing.F) {
	f.Add(newRecord(chunk.Sum([]byte("x")), []byte("x")))
	f.Add(headerBlock(1)[fileHeaderSize:])
	f.Add(location{seg: 1, off: 20, length: 5}.encode())
	f.Add(segMeta{state: stateOpen, size: 20}.encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		decodeLocation(b)
		decodeSegMeta(b)
		checkFileHeader(b, 1)
		if len(b) < recordHeaderSize {
			return
		}
		rh, err := parseRecordHeader(b)
		if err != nil || int(rh.length) != len(b)-recordHeaderSize {
			return
		}
		if verifyRecord(b, rh, b[recordHeaderSize:]) == nil {
			if rh.pad {
				re := make([]byte, len(b))
				encodePad(re)
				if !bytes.Equal(re, b) {
					t.Fatal("accepted padding record does not re-encode identically")
				}
			} else if !bytes.Equal(newRecord(rh.hash, b[recordHeaderSize:]), b) {
				t.Fatal("accepted record does not re-encode identically")
			}
		}
		// What Get accepts re-encodes identically but for the CRC.
		if verifyRead(b[:recordHeaderSize], rh.hash, rh.length, b[recordHeaderSize:]) == nil {
			re := newRecord(rh.hash, b[recordHeaderSize:])
			if !bytes.Equal(re[:recordCRCOffset], b[:recordCRCOffset]) || !bytes.Equal(re[recordHeaderSize:], b[recordHeaderSize:]) {
				t.Fatal("record accepted by verifyRead does not re-encode identically")
			}
		}
	})
}

// TestConcurrentReadsAndWrites reads acknowledged chunks while writers
// append and rotate segments.
func TestConcurrentReadsAndWrites(t *testing.T) {
	ctx := context.Background()
	n := openNode(t, vfs.NewMem(), 8<<10)
	defer n.close(t)
	var (
		mu    sync.Mutex
		acked []chunk.Hash
		data  = map[chunk.Hash][]byte{}
	)
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 99))
			for range 40 {
				d, h := randomChunk(rng, 1+rng.IntN(3000))
				if err := n.st.Put(ctx, h, d); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				acked, data[h] = append(acked, h), d
				mu.Unlock()
			}
		})
	}
	for r := range 2 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(r), 7))
			for range 200 {
				mu.Lock()
				if len(acked) == 0 {
					mu.Unlock()
					continue
				}
				h := acked[rng.IntN(len(acked))]
				want := data[h]
				mu.Unlock()
				got, err := n.st.Get(ctx, h, nil)
				if err != nil || !bytes.Equal(got, want) {
					t.Errorf("Get %s during writes: %v", h, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if s := n.st.Stats(); s.Chunks != 120 || s.Segments < 10 {
		t.Fatalf("stats %+v", s)
	}
}

// TestChunksIterates lists every stored chunk once, in hash order, and
// resumes after a given hash.
func TestChunksIterates(t *testing.T) {
	n := openNode(t, vfs.NewMem(), 0)
	want := map[chunk.Hash]uint32{}
	for i := range 20 {
		b := bytes.Repeat([]byte{byte(i)}, 100+i)
		h := chunk.Sum(b)
		if err := n.st.Put(context.Background(), h, b); err != nil {
			t.Fatal(err)
		}
		want[h] = uint32(len(b))
	}
	var seen []chunk.Hash
	err := n.st.Chunks(context.Background(), nil, func(h chunk.Hash, length uint32) bool {
		if want[h] != length {
			t.Errorf("chunk %s: length %d, want %d", h, length, want[h])
		}
		seen = append(seen, h)
		return true
	})
	if err != nil || len(seen) != len(want) {
		t.Fatalf("listed %d of %d chunks: %v", len(seen), len(want), err)
	}
	for i := 1; i < len(seen); i++ {
		if bytes.Compare(seen[i-1][:], seen[i][:]) >= 0 {
			t.Fatal("chunks not in hash order")
		}
	}
	var rest int
	_ = n.st.Chunks(context.Background(), &seen[9], func(h chunk.Hash, _ uint32) bool {
		if rest == 0 && h != seen[10] {
			t.Errorf("resumed at %s, want %s", h, seen[10])
		}
		rest++
		return rest < 5
	})
	if rest != 5 {
		t.Fatalf("stopping early: %d calls", rest)
	}
}

// scanAccepts reports whether recovery's checks take b as a valid record
// (chunk or padding) with n bytes of data.
func scanAccepts(b []byte, n int) bool {
	rh, err := parseRecordHeader(b)
	if err == nil {
		err = verifyRecord(b, rh, b[recordHeaderSize:])
	}
	return err == nil && int(rh.length) == n
}

// mustLocate returns the index entry of h.
func mustLocate(t *testing.T, st *Store, h chunk.Hash) location {
	t.Helper()
	loc, err := st.lookup(h)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// newRecord is a record of data under h in a buffer of its own.
func newRecord(h chunk.Hash, data []byte) []byte {
	return encodeRecord(make([]byte, recordHeaderSize+len(data)), h, data)
}

// TestEncodeRecordOverGarbage checks that a record encoded into a used
// buffer (records come from a pool shared with chunk reads) is the record
// encoded into a fresh one.
func TestEncodeRecordOverGarbage(t *testing.T) {
	data := []byte("some chunk data")
	h := chunk.Sum(data)
	used := bytes.Repeat([]byte{0xff}, recordHeaderSize+len(data))
	if got, want := encodeRecord(used, h, data), newRecord(h, data); !bytes.Equal(got, want) {
		t.Fatalf("record over a used buffer:\n%x\nwant\n%x", got, want)
	}
}

// TestDirectAppends stores chunks from a few bytes to past the staging
// buffer's size from concurrent writers on the real disk, where segments
// are appended with O_DIRECT when the file system allows it, rotating
// often; every chunk reads back before and after a reopen, and every
// segment file is a whole number of blocks.
func TestDirectAppends(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	n := openNodeAt(t, vfs.Default, base, 24<<20)
	direct := n.st.w.app.direct != nil
	if !direct {
		t.Logf("O_DIRECT refused under %s: appends go through the page cache", base)
	}
	var (
		mu   sync.Mutex
		data = map[chunk.Hash][]byte{}
	)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 5))
			for i := range 12 {
				size := rng.IntN(200)
				if i%3 == 0 {
					size = stageSize/2 + rng.IntN(stageSize)
				}
				d, h := randomChunk(rng, size)
				if err := n.st.Put(ctx, h, d); err != nil {
					t.Error(err)
					return
				}
				mustGet(t, n.st, h, d)
				mu.Lock()
				data[h] = d
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if direct && (n.st.w.app.noDirect || n.st.w.app.direct == nil) {
		t.Fatal("appends fell back from O_DIRECT to the page cache")
	}
	n.close(t)
	n = openNodeAt(t, vfs.Default, base, 24<<20)
	defer n.close(t)
	for h, d := range data {
		mustGet(t, n.st, h, d)
	}
	names, err := vfs.Default.List(filepath.Join(base, "seg"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		fi, err := vfs.Default.Stat(filepath.Join(base, "seg", name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size()%blockSize != 0 {
			t.Errorf("%s: %d bytes, not whole blocks", name, fi.Size())
		}
	}
	if s := n.st.Stats(); s.Chunks != int64(len(data)) || s.Segments < 3 || s.Segments != len(names) {
		t.Fatalf("stats %+v, %d chunks, %d files", s, len(data), len(names))
	}
}

// TestDirectRefusedMidway checks the appender's fallback when a file
// system takes O_DIRECT at open and then refuses a write (EINVAL, nothing
// written): the write goes through the page cache, and so do later ones.
func TestDirectRefusedMidway(t *testing.T) {
	name := filepath.Join(t.TempDir(), "f")
	f, err := vfs.Default.OpenReadWrite(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	direct, err := openDirect(name)
	if err != nil {
		t.Skipf("O_DIRECT refused at open here: %v", err)
	}
	a := newAppender(quietLogger())
	defer a.closeDirect()
	// An offset off the block size: O_DIRECT refuses it with EINVAL, but
	// not on every file system (tmpfs takes it).
	if _, err := direct.WriteAt(alignedBuf(blockSize), 100); err == nil {
		direct.Close()
		t.Skipf("%s takes unaligned O_DIRECT writes", filepath.Dir(name))
	}
	a.reset(f, direct, name, 100)
	rec := bytes.Repeat([]byte{7}, cachedRecord+blockSize) // large: written directly
	if err := a.add(rec); err != nil {
		t.Fatal(err)
	}
	if err := a.finish(); err != nil {
		t.Fatalf("finish: %v", err)
	}
	if a.direct != nil || !a.noDirect {
		t.Fatalf("still direct after EINVAL: direct=%v noDirect=%v", a.direct != nil, a.noDirect)
	}
	got := make([]byte, len(rec))
	if _, err := f.ReadAt(got, 100); err != nil || !bytes.Equal(got, rec) {
		t.Fatalf("bytes at 100 after the fallback: %v", err)
	}
}

// TestSmallGroupsThroughCache checks which handle a group commit is
// written with: a group of small records (byte-range writes' pieces,
// read back soon and at random) through the page cache, a group holding
// a record over cachedRecord with O_DIRECT. The direct handle here is
// another file, so the bytes show which one wrote.
func TestSmallGroupsThroughCache(t *testing.T) {
	dir := t.TempDir()
	f, err := vfs.Default.OpenReadWrite(filepath.Join(dir, "seg"), vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	other := filepath.Join(dir, "direct")
	direct, err := os.Create(other) // stands in for the O_DIRECT handle
	if err != nil {
		t.Fatal(err)
	}
	a := newAppender(quietLogger())
	defer a.closeDirect()
	a.reset(f, direct, "seg", 0)
	small := bytes.Repeat([]byte{1}, 16<<10)
	for range 3 {
		if err := a.add(small); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.finish(); err != nil {
		t.Fatal(err)
	}
	cached := a.tail()
	if fi, _ := os.Stat(other); fi.Size() != 0 {
		t.Fatalf("a group of 16 KiB records went to the direct handle (%d bytes)", fi.Size())
	}
	got := make([]byte, len(small))
	if _, err := f.ReadAt(got, 0); err != nil || !bytes.Equal(got, small) {
		t.Fatalf("the small group is not in the file: %v", err)
	}
	large := bytes.Repeat([]byte{2}, cachedRecord+1)
	if err := a.add(small); err != nil {
		t.Fatal(err)
	}
	if err := a.add(large); err != nil {
		t.Fatal(err)
	}
	if err := a.finish(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(other)
	if err != nil || fi.Size() != a.tail() {
		t.Fatalf("a group with a %d byte record: direct handle holds %v bytes, want the group up to %d (%v)", len(large), fi.Size(), a.tail(), err)
	}
	if fi, _ := f.Stat(); fi.Size() != cached {
		t.Fatalf("the large group also went through the cache: file is %d bytes, %d before", fi.Size(), cached)
	}
	// The next group is small again.
	if err := a.add(small); err != nil {
		t.Fatal(err)
	}
	if err := a.finish(); err != nil {
		t.Fatal(err)
	}
	if fi, _ := f.Stat(); fi.Size() != a.tail() {
		t.Fatalf("a small group after a large one: file is %d bytes, want %d", fi.Size(), a.tail())
	}
}

// TestWriteFailureStopsWrites fails a segment fsync: the Put waiting on it
// gets the error, so does every later Put (the file's state after a
// failed fsync is unknown), Err reports it, reads go on, and a reopened
// store takes writes again.
func TestWriteFailureStopsWrites(t *testing.T) {
	ctx := context.Background()
	errInjected := errors.New("injected fsync failure")
	var fail atomic.Bool
	fs := errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op) error {
		if fail.Load() && op.Kind == errorfs.OpFileSyncData && strings.Contains(op.Path, "seg-") {
			return errInjected
		}
		return nil
	}))
	n := openNode(t, fs, 0)
	rng := rand.New(rand.NewPCG(21, 22))
	d1, h1 := randomChunk(rng, 3000)
	if err := n.st.Put(ctx, h1, d1); err != nil {
		t.Fatal(err)
	}
	fail.Store(true)
	d2, h2 := randomChunk(rng, 3000)
	if err := n.st.Put(ctx, h2, d2); !errors.Is(err, errInjected) {
		t.Fatalf("Put with a failing fsync = %v", err)
	}
	if err := n.st.Err(); !errors.Is(err, errInjected) {
		t.Fatalf("Err = %v", err)
	}
	fail.Store(false)
	d3, h3 := randomChunk(rng, 3000)
	if err := n.st.Put(ctx, h3, d3); !errors.Is(err, errInjected) || !strings.Contains(err.Error(), "failed earlier") {
		t.Fatalf("Put after the failure = %v", err)
	}
	mustGet(t, n.st, h1, d1)
	if _, err := n.st.Get(ctx, h2, nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get of the chunk whose fsync failed = %v", err)
	}
	n.close(t)

	n = openNode(t, fs, 0)
	defer n.close(t)
	if err := n.st.Err(); err != nil {
		t.Fatalf("Err after reopening = %v", err)
	}
	if err := n.st.Put(ctx, h3, d3); err != nil {
		t.Fatal(err)
	}
	mustGet(t, n.st, h1, d1)
	mustGet(t, n.st, h3, d3)
}

// TestStatsAfterReopen puts chunks in concurrent batches into small
// segments, so that batches rotate midway and pad the segment they leave:
// the counters kept while writing equal those recovery computes from the
// files, and no segment passes its size but one holding a single record.
func TestStatsAfterReopen(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	const segSize = 16 << 10
	n := openNode(t, fs, segSize)
	rng := rand.New(rand.NewPCG(31, 32))
	for range 10 {
		var ps []*Pending
		for range 6 {
			d, h := randomChunk(rng, 500+rng.IntN(5000))
			ps = append(ps, n.st.PutAsync(h, d))
		}
		for _, p := range ps {
			if err := p.Wait(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	before := n.st.Stats()
	n.close(t)
	n = openNode(t, fs, segSize)
	defer n.close(t)
	if after := n.st.Stats(); after != before {
		t.Fatalf("stats while writing %+v, after reopening %+v", before, after)
	}
	names, err := fs.List("seg")
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, name := range names {
		fi, err := fs.Stat(fs.PathJoin("seg", name))
		if err != nil {
			t.Fatal(err)
		}
		total += fi.Size()
		if fi.Size() > segSize && fi.Size() > blockSize+padTo(recordHeaderSize+5500) {
			t.Errorf("%s: %d bytes, over the segment size with more than one record", name, fi.Size())
		}
	}
	if total != before.Bytes {
		t.Fatalf("files hold %d bytes, stats say %d", total, before.Bytes)
	}
}

// TestRecoveryTornHeaderBlock cuts a new segment's header block short
// after its header (a crash while the segment was created, before any
// group commit): recovery writes the block again rather than sealing an
// empty segment and starting another.
func TestRecoveryTornHeaderBlock(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	n := openNode(t, fs, 0)
	n.close(t)
	name := fs.PathJoin("seg", segmentName(1))
	f, err := fs.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	head := make([]byte, 100)
	if _, err := f.ReadAt(head, 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	g, err := fs.Create(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	g.Write(head)
	g.Close()

	n = openNode(t, fs, 0)
	defer n.close(t)
	if s := n.st.Stats(); s.Segments != 1 || s.Bytes != blockSize {
		t.Fatalf("stats after recovering a torn header block: %+v", s)
	}
	d, h := randomChunk(rand.New(rand.NewPCG(33, 34)), 1000)
	if err := n.st.Put(ctx, h, d); err != nil {
		t.Fatal(err)
	}
	if loc := mustLocate(t, n.st, h); loc.seg != 1 || loc.off != blockSize {
		t.Fatalf("first record at %s:%d", segmentName(loc.seg), loc.off)
	}
}

// TestCopies: a chunk's wanted copies only rise, and read back after a
// reopen; a chunk with none recorded reads 0.
func TestCopies(t *testing.T) {
	fs := vfs.NewMem()
	n := openNode(t, fs, 0)
	s := n.st
	h := chunk.Sum([]byte("wanted"))
	if r, err := s.Copies(h); err != nil || r != 0 {
		t.Fatalf("copies before any: %d, %v", r, err)
	}
	for _, r := range []int{1, 3, 2} {
		if err := s.RaiseCopies(h, r); err != nil {
			t.Fatal(err)
		}
	}
	if r, err := s.Copies(h); err != nil || r != 3 {
		t.Fatalf("copies after 1, 3, 2: %d, %v", r, err)
	}
	for _, bad := range []int{0, -1, 256} {
		if err := s.RaiseCopies(h, bad); err == nil {
			t.Fatalf("%d copies taken", bad)
		}
	}
	if err := n.eng.DB().Flush(); err != nil {
		t.Fatal(err)
	}
	n.close(t)
	n = openNode(t, fs, 0)
	defer n.close(t)
	if r, err := n.st.Copies(h); err != nil || r != 3 {
		t.Fatalf("copies after a reopen: %d, %v", r, err)
	}
}

// TestPutCopies: a chunk written with the copies it wants has them
// recorded with its index entry; writing it again, held, with more raises
// them; copies asked for while it is in flight (another write of it,
// RaiseCopies) are not lost to the batch's record; and never lowered.
func TestPutCopies(t *testing.T) {
	ctx := context.Background()
	n := openNode(t, vfs.NewMem(), 0)
	defer n.close(t)
	s := n.st
	rng := rand.New(rand.NewPCG(31, 32))
	copiesOf := func(h chunk.Hash) int {
		t.Helper()
		r, err := s.Copies(h)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	d, h := randomChunk(rng, 3000)
	if err := s.PutCopies(h, d, 2).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	mustGet(t, s, h, d)
	if r := copiesOf(h); r != 2 {
		t.Fatalf("copies of a new chunk: %d, want 2", r)
	}
	for _, c := range []int{1, 3} {
		if err := s.PutCopies(h, d, c).Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if r := copiesOf(h); r != 3 {
		t.Fatalf("copies after held writes wanting 1 then 3: %d, want 3", r)
	}
	if err := s.PutCopies(h, d, 0).Wait(ctx); err == nil {
		t.Fatal("0 copies taken")
	}
	// Many writes of new chunks in flight together, some raised meanwhile.
	var ps []*Pending
	want := map[chunk.Hash]int{}
	for i := range 200 {
		d, h := randomChunk(rng, 1000)
		c := 1 + i%3
		ps = append(ps, s.PutCopies(h, d, c))
		switch i % 4 {
		case 0:
			ps = append(ps, s.PutCopies(h, d, 5)) // the same chunk, in flight
			c = 5
		case 1:
			if err := s.RaiseCopies(h, 4); err != nil {
				t.Fatal(err)
			}
			c = 4
		}
		want[h] = c
	}
	for _, p := range ps {
		if err := p.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for h, c := range want {
		if r := copiesOf(h); r != c {
			t.Fatalf("copies of %s: %d, want %d", h, r, c)
		}
	}
}
