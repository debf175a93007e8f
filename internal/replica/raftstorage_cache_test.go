package replica

import (
	"testing"

	"go.etcd.io/raft/v3/raftpb"
)

// TestEntryCacheGetIsACopy: entries handed out by the cache (raft sends
// them in messages another goroutine encodes) are not changed by later
// appends that evict, truncate or overwrite the cache's slots.
func TestEntryCacheGetIsACopy(t *testing.T) {
	ent := func(i uint64) *raftpb.Entry {
		return &raftpb.Entry{Index: new(i), Term: new(uint64(1)), Data: []byte("x")}
	}
	c := &entryCache{maxEnts: 4, maxBytes: 1 << 20}
	c.append([]*raftpb.Entry{ent(1), ent(2), ent(3), ent(4)})
	got, ok := c.get(1, 5)
	if !ok || len(got) != 4 {
		t.Fatalf("get(1, 5): %d entries, %v", len(got), ok)
	}
	c.append([]*raftpb.Entry{ent(5), ent(6)}) // evicts 1 and 2
	c.append([]*raftpb.Entry{ent(4)})         // truncates at 4, overwrites it
	for i, e := range got {
		if e == nil || e.GetIndex() != uint64(i+1) {
			t.Fatalf("entry %d handed out earlier is now %v", i+1, e)
		}
	}
}
