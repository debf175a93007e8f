package cluster

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/cairn-db/cairn/internal/chunk"
	"github.com/cairn-db/cairn/internal/meta"
	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/wire"
)

func openTestNode(t *testing.T) *Node {
	t.Helper()
	n, err := openStarted(context.Background(), testConfig(vfs.NewMem(), meta.NewMemStore(time.Now)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

func mustCode(t *testing.T, err error, want wire.Code) {
	t.Helper()
	if got := wire.CodeOf(err); got != want {
		t.Fatalf("error %v has code %v, want %v", err, got, want)
	}
}

func put(t *testing.T, n *Node, space, key string, body []byte) object.Info {
	t.Helper()
	info, err := n.Put(context.Background(), &object.PutRequest{Space: space, Key: key, Size: int64(len(body))}, bytes.NewReader(body))
	if err != nil {
		t.Fatalf("put %s/%s: %v", space, key, err)
	}
	return info
}

func get(t *testing.T, n *Node, req object.GetRequest) ([]byte, object.Info, error) {
	t.Helper()
	return getCtx(context.Background(), n, req)
}

// getCtx reads an object whole (Length 0 means to the end).
func getCtx(ctx context.Context, n *Node, req object.GetRequest) ([]byte, object.Info, error) {
	if req.Length == 0 {
		req.Length = -1
	}
	info, rc, err := n.Get(ctx, &req)
	if err != nil {
		return nil, info, err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	return b, info, err
}

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func TestSpaces(t *testing.T) {
	n := openTestNode(t)
	ctx := context.Background()
	if _, err := n.CreateSpace(ctx, "alpha", object.SpaceSettings{}); err != nil {
		t.Fatal(err)
	}
	_, err := n.CreateSpace(ctx, "alpha", object.SpaceSettings{})
	mustCode(t, err, wire.CodeSpaceExists)
	for _, bad := range []string{"", "AB", "a", "has space", "-lead", strings.Repeat("x", 64), "192.168.1.1"} {
		_, err := n.CreateSpace(ctx, bad, object.SpaceSettings{})
		mustCode(t, err, wire.CodeBadSpaceName)
	}
	_, err = n.CreateSpace(ctx, "beta", object.SpaceSettings{Placement: "tag:"})
	mustCode(t, err, wire.CodeInvalidArgument)
	_, err = n.CreateSpace(ctx, "beta", object.SpaceSettings{Retention: "forever"})
	mustCode(t, err, wire.CodeInvalidArgument)
	if _, err := n.CreateSpace(ctx, "beta", object.SpaceSettings{Retention: "last", KeepLast: 2, Ranges: 3}); err != nil {
		t.Fatal(err)
	}
	spaces, err := n.ListSpaces(ctx)
	if err != nil || len(spaces) != 2 || spaces[0].Name != "alpha" || spaces[1].Settings.Ranges != 3 || spaces[1].Settings.KeepLast != 2 {
		t.Fatalf("ListSpaces = %+v, %v", spaces, err)
	}
	put(t, n, "alpha", "k", []byte("v"))
	mustCode(t, n.DeleteSpace(ctx, "alpha"), wire.CodeSpaceNotEmpty)
	// The failed delete changed nothing.
	if _, _, err := get(t, n, object.GetRequest{Space: "alpha", Key: "k"}); err != nil {
		t.Fatalf("after refused delete: %v", err)
	}
	if _, err := n.Delete(ctx, &object.DeleteRequest{Space: "alpha", Key: "k"}); err != nil {
		t.Fatal(err)
	}
	if err := n.DeleteSpace(ctx, "alpha"); err != nil {
		t.Fatalf("delete of a space with only delete markers: %v", err)
	}
	mustCode(t, n.DeleteSpace(ctx, "alpha"), wire.CodeSpaceNotFound)
	_, _, err = get(t, n, object.GetRequest{Space: "alpha", Key: "k"})
	mustCode(t, err, wire.CodeSpaceNotFound)
	// A new space with the old name starts empty.
	if _, err := n.CreateSpace(ctx, "alpha", object.SpaceSettings{}); err != nil {
		t.Fatal(err)
	}
	res, err := n.List(ctx, &object.ListRequest{Space: "alpha"})
	if err != nil || len(res.Objects) != 0 {
		t.Fatalf("recreated space lists %v, %v", res.Objects, err)
	}
}

func TestVersionsAndTimeTravel(t *testing.T) {
	n := openTestNode(t)
	ctx := context.Background()
	n.CreateSpace(ctx, "sp1", object.SpaceSettings{})
	r := rand.New(rand.NewPCG(1, 2))
	var infos []object.Info
	var bodies [][]byte
	for i, size := range []int{10, 100 << 10, 0, 300 << 10, 5} {
		b := randBytes(r, size)
		info := put(t, n, "sp1", "obj", b)
		if i > 0 && info.Parent != infos[i-1].Version {
			t.Fatalf("version %d parent %x, want %x", i, info.Parent, infos[i-1].Version)
		}
		if info.Hash != chunk.Sum(b) || info.Size != int64(size) {
			t.Fatalf("version %d: info %+v does not describe the body", i, info)
		}
		infos, bodies = append(infos, info), append(bodies, b)
	}
	for i, info := range infos {
		b, got, err := get(t, n, object.GetRequest{Space: "sp1", Key: "obj", Version: info.Version})
		if err != nil || !bytes.Equal(b, bodies[i]) || got.Version != info.Version {
			t.Fatalf("exact version %d: %v", i, err)
		}
		b, _, err = get(t, n, object.GetRequest{Space: "sp1", Key: "obj", AsOf: info.Version})
		if err != nil || !bytes.Equal(b, bodies[i]) {
			t.Fatalf("as of version %d: %v", i, err)
		}
	}
	_, _, err := get(t, n, object.GetRequest{Space: "sp1", Key: "obj", AsOf: infos[0].Version - 1})
	mustCode(t, err, wire.CodeNotFound)
	del, err := n.Delete(ctx, &object.DeleteRequest{Space: "sp1", Key: "obj"})
	if err != nil || !del.DeleteMarker {
		t.Fatalf("delete: %+v %v", del, err)
	}
	_, _, err = get(t, n, object.GetRequest{Space: "sp1", Key: "obj"})
	mustCode(t, err, wire.CodeNotFound)
	_, _, err = get(t, n, object.GetRequest{Space: "sp1", Key: "obj", Version: del.Version})
	mustCode(t, err, wire.CodeDeleted)
	// History survives the delete.
	if b, _, err := get(t, n, object.GetRequest{Space: "sp1", Key: "obj", AsOf: infos[4].Version}); err != nil || !bytes.Equal(b, bodies[4]) {
		t.Fatalf("as of before delete: %v", err)
	}
	vs, err := n.Versions(ctx, &object.VersionsRequest{Space: "sp1", Key: "obj"})
	if err != nil || len(vs.Versions) != 6 || !vs.Versions[0].DeleteMarker || vs.Versions[5].Version != infos[0].Version {
		t.Fatalf("versions: %+v %v", vs, err)
	}
	// Removing one version leaves the others.
	if _, err := n.Delete(ctx, &object.DeleteRequest{Space: "sp1", Key: "obj", Version: infos[2].Version}); err != nil {
		t.Fatal(err)
	}
	_, _, err = get(t, n, object.GetRequest{Space: "sp1", Key: "obj", Version: infos[2].Version})
	mustCode(t, err, wire.CodeNotFound)
	_, err = n.Delete(ctx, &object.DeleteRequest{Space: "sp1", Key: "obj", Version: infos[2].Version})
	mustCode(t, err, wire.CodeNotFound)
}

func TestRetentionKeepLast(t *testing.T) {
	n := openTestNode(t)
	n.CreateSpace(context.Background(), "sp1", object.SpaceSettings{Retention: "last", KeepLast: 2})
	var infos []object.Info
	for i := 0; i < 5; i++ {
		infos = append(infos, put(t, n, "sp1", "k", []byte(fmt.Sprint(i))))
	}
	vs, err := n.Versions(context.Background(), &object.VersionsRequest{Space: "sp1", Key: "k"})
	if err != nil || len(vs.Versions) != 2 || vs.Versions[0].Version != infos[4].Version || vs.Versions[1].Version != infos[3].Version {
		t.Fatalf("keep last 2 kept %+v, %v", vs.Versions, err)
	}
}

func TestListing(t *testing.T) {
	n := openTestNode(t)
	ctx := context.Background()
	n.CreateSpace(ctx, "sp1", object.SpaceSettings{Ranges: 4})
	var keys []string
	for i := 0; i < 300; i++ {
		// Keys spread over every range: first bytes from '!' to '~'.
		k := fmt.Sprintf("%c/%03d", '!'+i%94, i)
		keys = append(keys, k)
		put(t, n, "sp1", k, []byte(k))
	}
	before, err := n.oracle.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n.Delete(ctx, &object.DeleteRequest{Space: "sp1", Key: keys[0]})
	listed := listAll(t, n, "sp1", 37)
	// A page that ends exactly at the last key is not truncated.
	res, err := n.List(ctx, &object.ListRequest{Space: "sp1", StartAfter: listed[len(listed)-2], Limit: 1})
	if err != nil || len(res.Objects) != 1 || res.Truncated {
		t.Fatalf("last page: %d objects, truncated %v, %v", len(res.Objects), res.Truncated, err)
	}
	if len(listed) != 299 {
		t.Fatalf("listed %d keys, want 299", len(listed))
	}
	for i := 1; i < len(listed); i++ {
		if listed[i-1] >= listed[i] {
			t.Fatalf("listing out of order at %d: %q then %q", i, listed[i-1], listed[i])
		}
	}
	res, err = n.List(ctx, &object.ListRequest{Space: "sp1", Prefix: "A/"})
	if err != nil || len(res.Objects) != 3 { // every i < 300 with i%94 == 32: 32, 126, 220
		t.Fatalf("prefix A/: %d objects, %v", len(res.Objects), err)
	}
	for _, o := range res.Objects {
		if !strings.HasPrefix(o.Key, "A/") {
			t.Fatalf("prefix listing returned %q", o.Key)
		}
	}
	// As of before the delete, the deleted key is listed again.
	res, err = n.List(ctx, &object.ListRequest{Space: "sp1", AsOf: before, Limit: 10000})
	if err != nil || len(res.Objects) != 300 {
		t.Fatalf("as-of listing: %d, %v", len(res.Objects), err)
	}
}

// TestRangeWritesShareChunks checks byte-range writes and appends against a
// plain []byte model, and that untouched chunks are shared with the parent.
func TestRangeWritesShareChunks(t *testing.T) {
	n := openTestNode(t)
	ctx := context.Background()
	n.CreateSpace(ctx, "sp1", object.SpaceSettings{})
	r := rand.New(rand.NewPCG(7, 7))
	model := randBytes(r, 1<<20)
	put(t, n, "sp1", "big", model)
	for i := 0; i < 20; i++ {
		var req object.PutRequest
		data := randBytes(r, 1+r.IntN(40<<10))
		if r.IntN(3) == 0 {
			req = object.PutRequest{Space: "sp1", Key: "big", Mode: object.PutAppend, Size: int64(len(data))}
			model = append(model, data...)
		} else {
			off := r.IntN(len(model) + 1000)
			req = object.PutRequest{Space: "sp1", Key: "big", Mode: object.PutWriteAt, Offset: int64(off), Size: int64(len(data))}
			if end := off + len(data); end > len(model) {
				model = append(model, make([]byte, end-len(model))...)
			}
			copy(model[off:], data)
		}
		parent, _ := n.Stat(ctx, &object.GetRequest{Space: "sp1", Key: "big"})
		info, err := n.Put(ctx, &req, bytes.NewReader(data))
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if info.Parent != parent.Version || info.Hash != chunk.Sum(model) || info.Size != int64(len(model)) {
			t.Fatalf("step %d: info %+v does not describe the model", i, info)
		}
		b, _, err := get(t, n, object.GetRequest{Space: "sp1", Key: "big"})
		if err != nil || !bytes.Equal(b, model) {
			t.Fatalf("step %d: content differs from the model (%v)", i, err)
		}
		// Sharing: the new manifest keeps the parent's chunks but those the
		// write touched: the parent bytes not shared are at most the write
		// and a chunk or piece at each end (64 KiB chunks here; a piece of
		// a 40 KiB write is 64 KiB, a region's first up to 80 KiB).
		pm, nm := manifestOfVersion(t, n, parent.Version), manifestOfVersion(t, n, info.Version)
		kept := map[chunk.Hash]bool{}
		for _, c := range nm.Chunks {
			kept[c.Hash] = true
		}
		var lost int64
		for _, c := range pm.Chunks {
			if !kept[c.Hash] {
				lost += int64(c.Size)
			}
		}
		if lost > int64(len(data))+2*(80<<10) {
			t.Fatalf("step %d: %d parent bytes not shared by a write of %d", i, lost, len(data))
		}
		// Byte-range reads of the new version.
		off := r.IntN(len(model))
		length := r.IntN(len(model) - off + 1)
		b, _, err = get(t, n, object.GetRequest{Space: "sp1", Key: "big", Offset: int64(off), Length: int64(length)})
		if err != nil || !bytes.Equal(b, model[off:off+length]) {
			t.Fatalf("step %d: range [%d,+%d) differs (%v)", i, off, length, err)
		}
	}
	_, _, err := get(t, n, object.GetRequest{Space: "sp1", Key: "big", Offset: int64(len(model) + 1)})
	mustCode(t, err, wire.CodeInvalidRange)
}

func manifestOfVersion(t *testing.T, n *Node, v uint64) chunk.Manifest {
	t.Helper()
	return manifestOfKey(t, n, "sp1", "big", v)
}

func manifestOfKey(t *testing.T, n *Node, space, key string, v uint64) chunk.Manifest {
	t.Helper()
	rec, err := recordOf(n, space, key, v)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Manifest == nil && len(rec.Inline) == 0 {
		return chunk.Manifest{}
	}
	if rec.Manifest == nil { // inline: the one chunk a write into it makes
		return chunk.Manifest{Chunks: []chunk.Ref{{Hash: chunk.Sum(rec.Inline), Size: uint32(len(rec.Inline))}}}
	}
	m, err := chunk.UnmarshalManifest(rec.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestConditionalPut(t *testing.T) {
	n := openTestNode(t)
	ctx := context.Background()
	n.CreateSpace(ctx, "sp1", object.SpaceSettings{})
	req := func(ifMatch uint64, ifNone bool) error {
		_, err := n.Put(ctx, &object.PutRequest{Space: "sp1", Key: "k", Size: 1, IfMatch: ifMatch, IfNoneMatch: ifNone}, strings.NewReader("x"))
		return err
	}
	if err := req(0, true); err != nil {
		t.Fatal(err)
	}
	mustCode(t, req(0, true), wire.CodePreconditionFailed)
	info, _ := n.Stat(ctx, &object.GetRequest{Space: "sp1", Key: "k"})
	mustCode(t, req(info.Version+1, false), wire.CodePreconditionFailed)
	if err := req(info.Version, false); err != nil {
		t.Fatal(err)
	}
}

// TestBadInputChangesNothing sends each kind of bad request and checks the
// error code and that the space's state is unchanged.
func TestBadInputChangesNothing(t *testing.T) {
	n := openTestNode(t)
	ctx := context.Background()
	n.CreateSpace(ctx, "sp1", object.SpaceSettings{})
	good := put(t, n, "sp1", "k", []byte("original"))
	cases := []struct {
		name string
		req  object.PutRequest
		body io.Reader
		code wire.Code
	}{
		{"key over 1024 bytes", object.PutRequest{Space: "sp1", Key: strings.Repeat("k", 1025), Size: 1}, strings.NewReader("x"), wire.CodeKeyTooLong},
		{"empty key", object.PutRequest{Space: "sp1", Key: "", Size: 1}, strings.NewReader("x"), wire.CodeInvalidArgument},
		{"invalid UTF-8 key", object.PutRequest{Space: "sp1", Key: "\xff\xfe", Size: 1}, strings.NewReader("x"), wire.CodeInvalidArgument},
		{"bad space name", object.PutRequest{Space: "Bad_Name", Key: "k", Size: 1}, strings.NewReader("x"), wire.CodeBadSpaceName},
		{"missing space", object.PutRequest{Space: "nope", Key: "k", Size: 1}, strings.NewReader("x"), wire.CodeSpaceNotFound},
		{"truncated inline body", object.PutRequest{Space: "sp1", Key: "k", Size: 100}, strings.NewReader("short"), wire.CodeTruncated},
		{"truncated chunked body", object.PutRequest{Space: "sp1", Key: "k", Size: 1 << 20}, bytes.NewReader(make([]byte, 500<<10)), wire.CodeTruncated},
		{"body failing mid-stream", object.PutRequest{Space: "sp1", Key: "k", Size: -1}, io.MultiReader(bytes.NewReader(make([]byte, 200<<10)), errReader{}), wire.CodeTruncated},
		{"metadata too large", object.PutRequest{Space: "sp1", Key: "k", Size: 1, Meta: map[string]string{"m": strings.Repeat("v", 9000)}}, strings.NewReader("x"), wire.CodeTooLarge},
		{"negative offset", object.PutRequest{Space: "sp1", Key: "k", Mode: object.PutWriteAt, Offset: -1, Size: 1}, strings.NewReader("x"), wire.CodeInvalidRange},
		{"stale if-match", object.PutRequest{Space: "sp1", Key: "k", Size: 1, IfMatch: good.Version - 1}, strings.NewReader("x"), wire.CodePreconditionFailed},
	}
	for _, c := range cases {
		_, err := n.Put(ctx, &c.req, c.body)
		if wire.CodeOf(err) != c.code {
			t.Errorf("%s: got %v, want code %v", c.name, err, c.code)
		}
	}
	b, info, err := get(t, n, object.GetRequest{Space: "sp1", Key: "k"})
	if err != nil || string(b) != "original" || info.Version != good.Version {
		t.Fatalf("state changed by bad input: %q %x %v", b, info.Version, err)
	}
	vs, _ := n.Versions(ctx, &object.VersionsRequest{Space: "sp1", Key: "k"})
	if len(vs.Versions) != 1 {
		t.Fatalf("bad input added versions: %d", len(vs.Versions))
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }

// TestRestartRecovers closes a node and opens it again on the same files.
func TestRestartRecovers(t *testing.T) {
	fs, ms := vfs.NewMem(), meta.NewMemStore(time.Now)
	ctx := context.Background()
	n, err := openStarted(ctx, testConfig(fs, ms))
	if err != nil {
		t.Fatal(err)
	}
	n.CreateSpace(ctx, "sp1", object.SpaceSettings{})
	small := put(t, n, "sp1", "small", []byte("hello"))
	bigBody := randBytes(rand.New(rand.NewPCG(3, 3)), 700<<10)
	big := put(t, n, "sp1", "big", bigBody)
	n.Close()
	n, err = openStarted(ctx, testConfig(fs, ms))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if b, info, err := get(t, n, object.GetRequest{Space: "sp1", Key: "small"}); err != nil || string(b) != "hello" || info.Version != small.Version {
		t.Fatalf("small after restart: %q %v", b, err)
	}
	if b, _, err := get(t, n, object.GetRequest{Space: "sp1", Key: "big"}); err != nil || !bytes.Equal(b, bigBody) {
		t.Fatalf("big after restart: %v", err)
	}
	next := put(t, n, "sp1", "small", []byte("again"))
	if next.Version <= big.Version || next.Parent != small.Version {
		t.Fatalf("versions after restart: %x parent %x (before: %x)", next.Version, next.Parent, big.Version)
	}
}

// TestConcurrentWritersOneKey races writers on one key: every acknowledged
// version must exist, and the latest must be the newest acknowledged one
// (a version never lands below one already applied).
func TestConcurrentWritersOneKey(t *testing.T) {
	n := openTestNode(t)
	ctx := context.Background()
	n.CreateSpace(ctx, "sp1", object.SpaceSettings{})
	var (
		mu    sync.Mutex
		acked []uint64
		wg    sync.WaitGroup
	)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				body := []byte(fmt.Sprintf("w%d-%d", w, i))
				info, err := n.Put(ctx, &object.PutRequest{Space: "sp1", Key: "hot", Size: int64(len(body))}, bytes.NewReader(body))
				if err != nil {
					t.Errorf("put: %v", err)
					return
				}
				mu.Lock()
				acked = append(acked, info.Version)
				mu.Unlock()
			}
		}(w)
	}
	wg.Wait()
	vs, err := n.Versions(ctx, &object.VersionsRequest{Space: "sp1", Key: "hot", Limit: 1000})
	if err != nil || len(vs.Versions) != len(acked) {
		t.Fatalf("%d versions stored, %d acknowledged (%v)", len(vs.Versions), len(acked), err)
	}
	newest := uint64(0)
	for _, v := range acked {
		newest = max(newest, v)
	}
	if vs.Versions[0].Version != newest {
		t.Fatalf("latest %x, newest acknowledged %x", vs.Versions[0].Version, newest)
	}
	for i := 1; i < len(vs.Versions); i++ {
		if vs.Versions[i-1].Parent != vs.Versions[i].Version {
			t.Fatalf("version %x has parent %x, want %x: history is not a chain", vs.Versions[i-1].Version, vs.Versions[i-1].Parent, vs.Versions[i].Version)
		}
	}
}

// TestHostileOffsets sends offsets and lengths near the integer limits.
func TestHostileOffsets(t *testing.T) {
	n := openTestNode(t)
	ctx := context.Background()
	n.CreateSpace(ctx, "sp1", object.SpaceSettings{})
	put(t, n, "sp1", "small", []byte("hello"))
	b, _, err := get(t, n, object.GetRequest{Space: "sp1", Key: "small", Offset: 1, Length: math.MaxInt64})
	if err != nil || string(b) != "ello" {
		t.Fatalf("huge length: %q %v", b, err)
	}
	for _, off := range []int64{math.MaxInt64, math.MaxInt64 - 3, 5<<40 - 1, 1 << 30} {
		_, err := n.Put(ctx, &object.PutRequest{Space: "sp1", Key: "small", Mode: object.PutWriteAt, Offset: off, Size: 4}, strings.NewReader("data"))
		if c := wire.CodeOf(err); c != wire.CodeInvalidRange && c != wire.CodeTooLarge {
			t.Fatalf("write at %d: %v", off, err)
		}
	}
	_, err = n.Put(ctx, &object.PutRequest{Space: "sp1", Key: "small", Mode: object.PutAppend, Size: 1, IfNoneMatch: true}, strings.NewReader("x"))
	mustCode(t, err, wire.CodePreconditionFailed)
	_, err = n.CreateSpace(ctx, "sp2", object.SpaceSettings{Retention: "duration", KeepForSeconds: 18446744074})
	mustCode(t, err, wire.CodeInvalidArgument)
	if b, _, _ := get(t, n, object.GetRequest{Space: "sp1", Key: "small"}); string(b) != "hello" {
		t.Fatalf("hostile writes changed the object: %q", b)
	}
}

// TestCloseWithoutServe frees the ports.
func TestCloseWithoutServe(t *testing.T) {
	n := openTestNode(t)
	addr := n.PeerAddr()
	n.Close()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("port still bound after Close: %v", err)
	}
	l.Close()
}

// TestDeleteSpaceWaitsForWrites: a write in flight when DeleteSpace starts
// either lands before the emptiness check (and the delete is refused) or is
// refused itself; it is never acknowledged into a deleted space.
func TestDeleteSpaceWaitsForWrites(t *testing.T) {
	n := openTestNode(t)
	ctx := context.Background()
	n.CreateSpace(ctx, "sp1", object.SpaceSettings{})
	pr, pw := io.Pipe()
	putDone := make(chan error, 1)
	go func() {
		_, err := n.Put(ctx, &object.PutRequest{Space: "sp1", Key: "k", Size: 2}, pr)
		putDone <- err
	}()
	pw.Write([]byte("a")) // returns once the Put is reading its body
	delDone := make(chan error, 1)
	go func() { delDone <- n.DeleteSpace(ctx, "sp1") }()
	time.Sleep(20 * time.Millisecond)
	pw.Write([]byte("b"))
	pw.Close()
	if err := <-putDone; err != nil {
		t.Fatalf("put: %v", err)
	}
	mustCode(t, <-delDone, wire.CodeSpaceNotEmpty)
	if b, _, err := get(t, n, object.GetRequest{Space: "sp1", Key: "k"}); err != nil || string(b) != "ab" {
		t.Fatalf("acknowledged write: %q %v", b, err)
	}
}

// TestLatestCacheFollowsWrites reads the latest version between writes so
// that it is served from the record cache, and checks that every kind of
// write (put, delete marker, removal of the latest version) is seen next.
func TestLatestCacheFollowsWrites(t *testing.T) {
	n := openTestNode(t)
	ctx := context.Background()
	if _, err := n.CreateSpace(ctx, "cached", object.SpaceSettings{}); err != nil {
		t.Fatal(err)
	}
	latest := func() (string, error) {
		b, _, err := get(t, n, object.GetRequest{Space: "cached", Key: "k"})
		return string(b), err
	}
	v1 := put(t, n, "cached", "k", []byte("one"))
	for range 2 { // the first read fills the cache, the second hits it
		if got, err := latest(); err != nil || got != "one" {
			t.Fatalf("latest = %q, %v; want one", got, err)
		}
	}
	if n.cache.Len() == 0 {
		t.Fatal("the latest record was not cached")
	}
	v2 := put(t, n, "cached", "k", []byte("two"))
	if got, err := latest(); err != nil || got != "two" {
		t.Fatalf("after put: latest = %q, %v; want two", got, err)
	}
	// An exact read of the cached latest version.
	if b, _, err := get(t, n, object.GetRequest{Space: "cached", Key: "k", Version: v2.Version}); err != nil || string(b) != "two" {
		t.Fatalf("exact latest version: %q, %v", b, err)
	}
	if _, err := n.Delete(ctx, &object.DeleteRequest{Space: "cached", Key: "k", Version: v2.Version}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if got, err := latest(); err != nil || got != "one" {
			t.Fatalf("after removing the latest version: latest = %q, %v; want one", got, err)
		}
	}
	if _, _, err := get(t, n, object.GetRequest{Space: "cached", Key: "k", Version: v2.Version}); wire.CodeOf(err) != wire.CodeNotFound {
		t.Fatalf("removed version still readable: %v", err)
	}
	if _, err := n.Delete(ctx, &object.DeleteRequest{Space: "cached", Key: "k"}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		_, err := latest()
		mustCode(t, err, wire.CodeNotFound)
	}
	if info, err := n.Stat(ctx, &object.GetRequest{Space: "cached", Key: "k", Version: v1.Version}); err != nil || info.Version != v1.Version {
		t.Fatalf("older version after delete: %+v, %v", info, err)
	}
}

// TestConcurrentUploadETags puts chunked objects from several writers at
// once and checks each ETag is the MD5 of its body.
func TestConcurrentUploadETags(t *testing.T) {
	n := openTestNode(t)
	ctx := context.Background()
	if _, err := n.CreateSpace(ctx, "etags", object.SpaceSettings{}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 9))
			for i := range 4 {
				body := randBytes(r, 100<<10+r.IntN(400<<10))
				key := fmt.Sprintf("w%d-%d", g, i)
				info, err := n.Put(ctx, &object.PutRequest{Space: "etags", Key: key, Size: int64(len(body))}, bytes.NewReader(body))
				if err != nil {
					t.Error(err)
					return
				}
				if sum := md5.Sum(body); info.ETag != hex.EncodeToString(sum[:]) {
					t.Errorf("%s: ETag %s, want %x", key, info.ETag, sum)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestStorageMetrics checks that /metrics carries the state store's own
// figures: a node that has written has a memtable and WAL bytes.
func TestStorageMetrics(t *testing.T) {
	n := openTestNode(t)
	if _, err := n.CreateSpace(context.Background(), "metrics", object.SpaceSettings{}); err != nil {
		t.Fatal(err)
	}
	fams, err := n.metrics.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			got[f.GetName()] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	for _, name := range []string{"cairn_storage_memtables", "cairn_storage_wal_bytes_total"} {
		if got[name] < 1 {
			t.Errorf("%s = %v, want at least 1 (metrics: %d families)", name, got[name], len(fams))
		}
	}
	for _, name := range []string{"cairn_storage_l0_sublevels", "cairn_storage_read_amplification", "cairn_storage_block_cache_hits_total"} {
		if _, ok := got[name]; !ok {
			t.Errorf("%s missing", name)
		}
	}
}
