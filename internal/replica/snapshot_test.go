package replica

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/cairn-db/cairn/internal/rangedesc"
)

// TestReceiveSnapshotRefusesBadSSTs: a snapshot whose SST holds a key
// outside the range's span, or whose bytes were damaged, or that is
// truncated, is refused before raft sees it, and changes nothing.
func TestReceiveSnapshotRefusesBadSSTs(t *testing.T) {
	e := openEngine(t, vfs.NewMem())
	s := newStore(t, testOptions(1, e))
	t.Cleanup(func() { _ = s.Close(); _ = e.Close() })
	sm := &counterSM{rangeID: 1}
	r, err := s.AddReplica(rangedesc.Range{ID: 1, Replicas: []uint64{1}}, sm)
	if err != nil {
		t.Fatal(err)
	}
	proposeSeq(t, r, 1, 3)
	span := sm.Spans(rangedesc.Range{})[0]
	build := func(keys ...[]byte) []byte {
		b := e.DB().NewBatch()
		for _, k := range keys {
			_ = b.Set(k, []byte("x"), nil)
		}
		if err := b.Commit(pebble.NoSync); err != nil {
			t.Fatal(err)
		}
		return buildTestSSTs(t, s, e.DB(), []Span{{Start: []byte("a"), End: []byte("zz")}})[0]
	}
	outside := build([]byte("b-outside"))
	good := buildTestSSTs(t, s, e.DB(), []Span{span})
	damaged := bytes.Clone(good[0])
	damaged[len(damaged)/3] ^= 0x40
	msg := Message{RangeID: 1, Msg: &raftpb.Message{
		Type: raftpb.MsgSnap.Enum(), From: new(uint64(2)), To: new(uint64(1)), Term: new(uint64(100)),
		Snapshot: &raftpb.Snapshot{Metadata: &raftpb.SnapshotMetadata{Index: new(uint64(1000)), Term: new(uint64(100)),
			ConfState: &raftpb.ConfState{Voters: []uint64{1, 2}}}},
	}}
	ctx := context.Background()
	for name, sst := range map[string][]byte{"key outside the span": outside, "damaged block": damaged} {
		err := s.ReceiveSnapshot(ctx, msg, []int64{int64(len(sst))}, bytes.NewReader(sst))
		if err == nil {
			t.Fatalf("%s: snapshot accepted", name)
		}
		if name == "key outside the span" && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if err := s.ReceiveSnapshot(ctx, msg, []int64{int64(len(good[0])) + 10}, bytes.NewReader(good[0])); err == nil {
		t.Fatal("truncated snapshot accepted")
	}
	if err := s.ReceiveSnapshot(ctx, msg, []int64{1, 1}, bytes.NewReader(good[0])); err == nil {
		t.Fatal("snapshot with the wrong number of SSTs accepted")
	}
	if err := s.Step(ctx, msg); !errors.Is(err, ErrSnapshotUnsupported) {
		t.Fatalf("snapshot through Step: %v", err)
	}
	proposeSeq(t, r, 4, 4)
	if c := checkSM(t, e.DB(), 1); c != 4 {
		t.Fatalf("count %d after refused snapshots", c)
	}
	if st := r.Status(); !st.IsLeader || st.Term > 10 {
		t.Fatalf("refused snapshots moved raft: %+v", st)
	}
}
