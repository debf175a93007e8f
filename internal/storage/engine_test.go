package storage

import (
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

func TestOpenValidates(t *testing.T) {
	if _, err := Open(Options{}); err == nil {
		t.Fatal("Open with no Dir succeeded")
	}
}

// TestCrashDropsUnsynced proves the seam: a synced write survives a
// simulated crash and an unsynced one does not.
func TestCrashDropsUnsynced(t *testing.T) {
	fs := vfs.NewCrashableMem()
	e, err := Open(Options{Dir: "db", FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.DB().Set([]byte("synced"), []byte("1"), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := e.DB().Set([]byte("unsynced"), []byte("1"), pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	crashed := fs.CrashClone(vfs.CrashCloneCfg{})
	_ = e.Close()
	e2, err := Open(Options{Dir: "db", FS: crashed})
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Close()
	if _, c, err := e2.DB().Get([]byte("synced")); err != nil {
		t.Fatalf("synced key lost: %v", err)
	} else {
		c.Close()
	}
	if _, _, err := e2.DB().Get([]byte("unsynced")); err != pebble.ErrNotFound {
		t.Fatalf("unsynced key survived crash: %v", err)
	}
}
