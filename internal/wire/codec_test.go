package wire

import (
	"bytes"
	"encoding/hex"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/testenv"
)

func TestHeaderLayout(t *testing.T) {
	f := AppendFrame(nil, OpGet, FlagResponse|FlagMore, 0x01020304, []byte("xy"))
	if got, want := hex.EncodeToString(f), "011100050102030400000002"+"7879"; got != want {
		t.Fatalf("frame %s, want %s", got, want)
	}
	h, body, err := DecodeFrame(f, DefaultMaxFrame)
	if err != nil || h.Op != OpGet || h.ID != 0x01020304 || string(body) != "xy" {
		t.Fatalf("%+v %q %v", h, body, err)
	}
	if _, _, err := DecodeFrame(f[:len(f)-1], DefaultMaxFrame); CodeOf(err) != CodeMalformed {
		t.Fatalf("short body: %v", err)
	}
	if _, _, err := DecodeFrame(f, 1); CodeOf(err) != CodeTooLarge {
		t.Fatalf("over limit: %v", err)
	}
}

func randStr(r *rand.Rand) string {
	b := make([]byte, r.IntN(20))
	for i := range b {
		b[i] = byte(r.IntN(256))
	}
	return string(b)
}

func randMap(r *rand.Rand) map[string]string {
	n := r.IntN(4)
	if n == 0 {
		return nil
	}
	m := map[string]string{}
	for range n {
		m[randStr(r)] = randStr(r)
	}
	return m
}

func randInfo(r *rand.Rand) object.Info {
	o := object.Info{Space: randStr(r), Key: randStr(r), Version: r.Uint64(), Parent: r.Uint64(),
		Size: r.Int64() - r.Int64(), ETag: randStr(r), ContentType: randStr(r), Modified: r.Int64(),
		DeleteMarker: r.IntN(2) == 0, Meta: randMap(r), Tags: randMap(r), Headers: randMap(r)}
	for i := range o.Hash {
		o.Hash[i] = byte(r.IntN(256))
	}
	return o
}

func randSettings(r *rand.Rand) object.SpaceSettings {
	return object.SpaceSettings{Retention: randStr(r), KeepLast: r.Uint32(), KeepForSeconds: r.Uint64(),
		Ranges: r.Uint32(), Placement: randStr(r), Replicas: r.Uint32()}
}

func randPut(r *rand.Rand) object.PutRequest {
	return object.PutRequest{Space: randStr(r), Key: randStr(r), Mode: object.PutMode(r.IntN(3)), Offset: r.Int64N(1 << 40),
		Size: r.Int64N(1<<40) - 1, ContentType: randStr(r), Meta: randMap(r), Tags: randMap(r), Headers: randMap(r),
		IfMatch: r.Uint64(), IfNoneMatch: r.IntN(2) == 0}
}

func randGet(r *rand.Rand) object.GetRequest {
	return object.GetRequest{Space: randStr(r), Key: randStr(r), Version: r.Uint64(), AsOf: r.Uint64(),
		Offset: r.Int64N(1 << 40), Length: r.Int64N(1<<40) - 1}
}

// Every message survives encode then decode, for random values.
func TestMessageRoundTrip(t *testing.T) {
	seed := testenv.Seed(t)
	r := rand.New(rand.NewPCG(seed, 0))
	check := func(what string, want, got any, err error) {
		t.Helper()
		if err != nil || !reflect.DeepEqual(want, got) {
			t.Fatalf("%s (seed %d): %v\nwant %+v\ngot  %+v", what, seed, err, want, got)
		}
	}
	for range 200 {
		info := randInfo(r)
		got, err := DecodeObjectInfo(AppendObjectInfo(nil, &info))
		check("ObjectInfo", info, got, err)

		name, st := randStr(r), randSettings(r)
		gn, gs, err := DecodeCreateSpace(AppendCreateSpace(nil, name, &st))
		check("CreateSpace", [2]any{name, st}, [2]any{gn, gs}, err)

		spaces := []object.SpaceInfo{{ID: r.Uint32(), Name: randStr(r), Created: r.Int64(), Settings: randSettings(r)}}
		gl, err := DecodeSpaceList(AppendSpaceList(nil, spaces))
		check("SpaceList", spaces, gl, err)

		put := randPut(r)
		body := []byte(randStr(r))
		gp, inline, err := DecodePutRequest(append(AppendPutRequest(nil, &put), body...))
		check("PutRequest", [2]any{put, string(body)}, [2]any{gp, string(inline)}, err)

		get := randGet(r)
		gg, err := DecodeGetRequest(AppendGetRequest(nil, &get))
		check("GetRequest", get, gg, err)

		del := object.DeleteRequest{Space: randStr(r), Key: randStr(r), Version: r.Uint64()}
		gd, err := DecodeDeleteRequest(AppendDeleteRequest(nil, &del))
		check("DeleteRequest", del, gd, err)

		lr := object.ListRequest{Space: randStr(r), Prefix: randStr(r), StartAfter: randStr(r), Limit: r.Uint32(), AsOf: r.Uint64()}
		if r.IntN(2) == 0 {
			lr.AllVersions, lr.AfterVersion = true, r.Uint64()
		}
		glr, err := DecodeListRequest(AppendListRequest(nil, &lr))
		check("ListRequest", lr, glr, err)

		res := object.ListResult{Objects: []object.Info{randInfo(r), randInfo(r)}, Truncated: true, Next: randStr(r)}
		if r.IntN(2) == 0 {
			res.NextVersion = r.Uint64() | 1
		}
		gres, err := DecodeListResult(AppendListResult(nil, &res))
		check("ListResult", res, gres, err)

		vr := object.VersionsRequest{Space: randStr(r), Key: randStr(r), Before: r.Uint64(), Limit: r.Uint32()}
		gvr, err := DecodeVersionsRequest(AppendVersionsRequest(nil, &vr))
		check("VersionsRequest", vr, gvr, err)

		vres := object.VersionsResult{Versions: []object.Info{randInfo(r)}, Truncated: r.IntN(2) == 0}
		gvres, err := DecodeVersionsResult(AppendVersionsResult(nil, &vres))
		check("VersionsResult", vres, gvres, err)

		e := &Error{Code: Code(r.IntN(20)), Message: randStr(r)}
		ge, err := DecodeError(AppendError(nil, e))
		check("Error", e, ge, err)

		p := put
		p.Size = int64(len(body))
		items := []BatchItem{{Op: BatchPut, Put: p, Body: body}, {Op: BatchGet, Get: get},
			{Op: BatchStat, Get: randGet(r)}, {Op: BatchDelete, Delete: del}}
		gi, err := DecodeBatchRequest(AppendBatchRequest(nil, items))
		check("BatchRequest", items, gi, err)

		rt := RouteTable{Space: r.Uint32(), Routes: []Route{
			{Range: r.Uint64(), Epoch: r.Uint64(), Start: []byte(randStr(r)), End: []byte(randStr(r)), Leaseholder: randStr(r), Replicas: []string{randStr(r), randStr(r)}},
			{Range: r.Uint64(), Epoch: r.Uint64(), Start: []byte{}}}}
		grt, err := DecodeRouteTable(AppendRouteTable(nil, &rt))
		check("RouteTable", rt, grt, err)

		rs := []BatchResult{{Op: BatchGet, Info: randInfo(r), Data: []byte("data")},
			{Op: BatchPut, Code: CodeNotFound, Message: randStr(r)}, {Op: BatchStat, Info: randInfo(r)}}
		grs, err := DecodeBatchResponse(AppendBatchResponse(nil, rs))
		check("BatchResponse", rs, grs, err)
	}
}

// Truncating any encoding at any point fails cleanly.
func TestTruncatedMessages(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	info := randInfo(r)
	b := AppendObjectInfo(nil, &info)
	for i := range len(b) {
		if _, err := DecodeObjectInfo(b[:i]); CodeOf(err) != CodeMalformed {
			t.Fatalf("prefix %d: %v", i, err)
		}
	}
	// A huge declared count is bounded by the bytes present.
	if _, err := DecodeListResult([]byte{0xff, 0xff, 0xff, 0xff, 0x0f}); CodeOf(err) != CodeMalformed {
		t.Fatal(err)
	}
}

func FuzzDecodeFrame(f *testing.F) {
	f.Add(AppendFrame(nil, OpPing, 0, 1, nil))
	f.Add(AppendFrame(nil, OpGet, FlagResponse|FlagMore, 7, []byte("body")))
	f.Add([]byte{2, 1, 0, 0, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, body, err := DecodeFrame(b, 1<<16)
		var hb [HeaderLen]byte
		h2, body2, err2 := ReadFrame(bytes.NewReader(b), hb[:], 1<<16)
		if err == nil {
			if err2 != nil || h2 != h || !bytes.Equal(body, body2) {
				t.Fatalf("ReadFrame disagrees: %v", err2)
			}
			if again := AppendFrame(nil, h.Op, h.Flags, h.ID, body); !bytes.Equal(again, b) {
				t.Fatalf("frame does not round-trip")
			}
		}
	})
}

func FuzzDecodeMessages(f *testing.F) {
	r := rand.New(rand.NewPCG(3, 4))
	info := randInfo(r)
	put := randPut(r)
	get := randGet(r)
	f.Add(uint8(0), AppendObjectInfo(nil, &info))
	f.Add(uint8(1), AppendPutRequest(nil, &put))
	f.Add(uint8(2), AppendGetRequest(nil, &get))
	f.Add(uint8(9), AppendBatchRequest(nil, []BatchItem{{Op: BatchGet, Get: get}, {Op: BatchPut, Put: object.PutRequest{Size: 1}, Body: []byte("x")}}))
	f.Add(uint8(10), AppendBatchResponse(nil, []BatchResult{{Op: BatchGet, Info: info, Data: []byte("d")}}))
	f.Add(uint8(13), AppendRouteTable(nil, &RouteTable{Space: 3, Routes: []Route{
		{Range: 1, Epoch: 2, Start: []byte{0, 0, 0, 3}, End: []byte{0, 0, 0, 3, 'm'}, Leaseholder: "10.0.0.1:7070", Replicas: []string{"10.0.0.1:7070", "10.0.0.2:7070"}},
		{Range: 2, Epoch: 1, Start: []byte{0, 0, 0, 3, 'm'}}}}))
	f.Fuzz(func(t *testing.T, kind uint8, b []byte) {
		// Each case decodes, re-encodes what decoded and must decode to the
		// same value again.
		same := func(a, b any, err error) {
			if err != nil || !reflect.DeepEqual(a, b) {
				t.Fatalf("kind %d does not round-trip: %v\n%+v\n%+v", kind, err, a, b)
			}
		}
		switch kind % 14 {
		case 0:
			if v, err := DecodeObjectInfo(b); err == nil {
				v2, err := DecodeObjectInfo(AppendObjectInfo(nil, &v))
				same(v, v2, err)
			}
		case 1:
			if v, in, err := DecodePutRequest(b); err == nil {
				v2, in2, err := DecodePutRequest(append(AppendPutRequest(nil, &v), in...))
				same([2]any{v, string(in)}, [2]any{v2, string(in2)}, err)
			}
		case 2:
			if v, err := DecodeGetRequest(b); err == nil {
				v2, err := DecodeGetRequest(AppendGetRequest(nil, &v))
				same(v, v2, err)
			}
		case 3:
			if v, err := DecodeDeleteRequest(b); err == nil {
				v2, err := DecodeDeleteRequest(AppendDeleteRequest(nil, &v))
				same(v, v2, err)
			}
		case 4:
			if v, err := DecodeListRequest(b); err == nil {
				v2, err := DecodeListRequest(AppendListRequest(nil, &v))
				same(v, v2, err)
			}
		case 5:
			if v, err := DecodeListResult(b); err == nil {
				v2, err := DecodeListResult(AppendListResult(nil, &v))
				same(v, v2, err)
			}
		case 6:
			if v, err := DecodeVersionsRequest(b); err == nil {
				v2, err := DecodeVersionsRequest(AppendVersionsRequest(nil, &v))
				same(v, v2, err)
			}
		case 7:
			if v, err := DecodeVersionsResult(b); err == nil {
				v2, err := DecodeVersionsResult(AppendVersionsResult(nil, &v))
				same(v, v2, err)
			}
		case 8:
			if n, s, err := DecodeCreateSpace(b); err == nil {
				n2, s2, err := DecodeCreateSpace(AppendCreateSpace(nil, n, &s))
				same([2]any{n, s}, [2]any{n2, s2}, err)
			}
		case 9:
			if v, err := DecodeBatchRequest(b); err == nil {
				v2, err := DecodeBatchRequest(AppendBatchRequest(nil, v))
				same(v, v2, err)
			}
		case 10:
			if v, err := DecodeBatchResponse(b); err == nil {
				v2, err := DecodeBatchResponse(AppendBatchResponse(nil, v))
				same(v, v2, err)
			}
		case 11:
			if v, err := DecodeSpaceList(b); err == nil {
				v2, err := DecodeSpaceList(AppendSpaceList(nil, v))
				same(v, v2, err)
			}
		case 13:
			if v, err := DecodeRouteTable(b); err == nil {
				v2, err := DecodeRouteTable(AppendRouteTable(nil, &v))
				same(v, v2, err)
			}
		case 12:
			if v, err := DecodeError(b); err == nil {
				v2, err := DecodeError(AppendError(nil, v))
				same(v, v2, err)
			}
			if v, err := DecodePingInfo(b); err == nil {
				v2, err := DecodePingInfo(AppendPingInfo(nil, v))
				same(v, v2, err)
			}
		}
	})
}
