package rangeclient

import (
	"errors"
	"testing"

	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/mvcc"
)

// otherCodes stands for a protocol's codes beyond the package's own.
type otherCodes struct{}

type otherErr struct {
	code uint16
	msg  string
}

func (e *otherErr) Error() string { return e.msg }

func (otherCodes) Code(err error) (uint16, string) {
	var e *otherErr
	if errors.As(err, &e) {
		return e.code, e.msg
	}
	return uint16(CodeInternal), err.Error()
}

func (otherCodes) Error(code uint16, msg string) error { return &otherErr{code, msg} }

// TestPeerCodec round-trips the cairn.Range encodings and the reply
// envelope: each class, the leader hint, a payload with an error, and
// codes the package leaves to Config.Codes.
func TestPeerCodec(t *testing.T) {
	c := New(Config{Codes: otherCodes{}})
	res := &kv.Result{
		Rec:    &mvcc.Record{Version: 7, Parent: 3, Size: 2, Inline: []byte("hi"), ETag: "e", Meta: map[string]string{"a": "b"}},
		Pruned: []*mvcc.Record{{Version: 3, DeleteMarker: true}},
	}
	got, err := decodeResult(encodeResult(res))
	if err != nil || got.Rec.Version != 7 || string(got.Rec.Inline) != "hi" || got.Rec.Meta["a"] != "b" ||
		len(got.Pruned) != 1 || got.Pruned[0].Version != 3 || !got.Pruned[0].DeleteMarker {
		t.Fatalf("result round trip: %+v %v", got, err)
	}
	b := c.errReply(errorf(CodeDeleted, "gone"), 4, AppendRecord(nil, res.Rec))
	payload, lead, err := c.DecodeReply(b)
	var e *Error
	if !errors.Is(err, ErrDeleted) || lead != 4 || !errors.As(err, &e) || e.Msg != "gone" {
		t.Fatalf("error reply: lead %d, %v", lead, err)
	}
	d := NewDecoder(payload)
	if rec := d.Record(); d.Done() != nil || rec.Version != 7 {
		t.Fatalf("payload of an error reply: %+v %v", rec, d.Err())
	}
	for _, stale := range []error{mvcc.ErrStaleVersion, applyErr(1, mvcc.ErrStaleVersion)} {
		if _, _, err := c.DecodeReply(c.errReply(stale, 0, nil)); !errors.Is(err, ErrConflict) {
			t.Fatalf("stale reply: %v", err)
		}
	}
	for _, want := range []error{ErrNotLeader, ErrRangeMoved, ErrOutcomeUnknown, ErrUnavailable, ErrNotFound, ErrPrecondition, ErrCorrupt, ErrMalformed} {
		if _, _, err := c.DecodeReply(c.errReply(want, 0, nil)); !errors.Is(err, want) {
			t.Errorf("%v came back as %v", want, err)
		}
	}
	_, _, err = c.DecodeReply(c.errReply(&otherErr{40, "theirs"}, 0, nil))
	var oe *otherErr
	if !errors.As(err, &oe) || oe.code != 40 || oe.msg != "theirs" {
		t.Fatalf("a code left to Config.Codes came back as %v", err)
	}
	var opt []byte
	opt = AppendOptBytes(AppendOptBytes(AppendOptBytes(opt, nil), []byte{}), []byte("x"))
	d = NewDecoder(opt)
	if a, e, x := d.OptBytes(), d.OptBytes(), d.OptBytes(); a != nil || e == nil || len(e) != 0 || string(x) != "x" || d.Done() != nil {
		t.Fatalf("optional bytes: %q %q %q %v", a, e, x, d.Err())
	}
}

// TestApplyErr classes what a command's apply returns.
func TestApplyErr(t *testing.T) {
	for in, want := range map[error]error{
		kv.ErrPreconditionFailed: ErrPrecondition,
		mvcc.ErrNotFound:         ErrNotFound,
		mvcc.ErrDeleteMarker:     ErrDeleted,
		kv.ErrWrongRange:         ErrRangeMoved,
		mvcc.ErrStaleVersion:     ErrConflict,
	} {
		if got := applyErr(1, in); !errors.Is(got, want) {
			t.Errorf("applyErr(%v) = %v, want %v", in, got, want)
		}
	}
}

// FuzzPeerDecode feeds arbitrary bytes to the cairn.Range decoders: they
// return an error or a value, never panic or allocate beyond the input.
func FuzzPeerDecode(f *testing.F) {
	c := New(Config{Codes: otherCodes{}})
	f.Add(encodeResult(&kv.Result{Rec: &mvcc.Record{Version: 1, Size: 1, Inline: []byte("x")}}))
	f.Add(c.errReply(errorf(CodeNotLeader, "elsewhere"), 2, nil))
	f.Add([]byte{1, 0, 0, 0, 9})
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _, _ = c.DecodeReply(b)
		_, _ = decodeResult(b)
		d := NewDecoder(b)
		_ = d.U8()
		for range d.Count32(12) {
			_ = d.Bytes()
			_ = d.Record()
		}
		_ = d.OptBytes()
		_ = d.Done()
	})
}

// TestQueryPageCodec: a range's query answer crosses the peer protocol
// whole.
func TestQueryPageCodec(t *testing.T) {
	p := kv.QueryPage{
		Entries: []mvcc.Entry{{Obj: []byte("a"), Rec: &mvcc.Record{Version: 7, Size: 3, Tags: map[string]string{"c": "r"}}}},
		More:    true, Resume: []byte("b"), Examined: 12, Indexed: true,
	}
	got, err := decodeQueryPage(appendQueryPage(nil, p))
	if err != nil || !got.More || string(got.Resume) != "b" || got.Examined != 12 || !got.Indexed ||
		len(got.Entries) != 1 || string(got.Entries[0].Obj) != "a" || got.Entries[0].Rec.Version != 7 || got.Entries[0].Rec.Tags["c"] != "r" {
		t.Fatalf("%+v, %v", got, err)
	}
	if got, err := decodeQueryPage(appendQueryPage(nil, kv.QueryPage{})); err != nil || got.More || got.Resume != nil || len(got.Entries) != 0 {
		t.Fatalf("empty page: %+v, %v", got, err)
	}
	if _, err := decodeQueryPage(appendQueryPage(nil, p)[:10]); err == nil {
		t.Fatal("a truncated page decoded")
	}
}
