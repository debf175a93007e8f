package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/cairn-db/cairn/internal/meta"
	"github.com/cairn-db/cairn/internal/object"
)

// TestHealthzReportsFailedChunkStore fails a segment fsync under a chunked
// PUT: the PUT fails, and /healthz turns 503 and names the chunk store's
// error, since the node takes no chunked writes until it is restarted.
func TestHealthzReportsFailedChunkStore(t *testing.T) {
	ctx := context.Background()
	var fail atomic.Bool
	fs := errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op) error {
		if fail.Load() && op.Kind == errorfs.OpFileSyncData && strings.Contains(op.Path, "seg-") {
			return errors.New("injected fsync failure")
		}
		return nil
	}))
	n, err := openStarted(ctx, testConfig(fs, meta.NewMemStore(time.Now)))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if _, err := n.CreateSpace(ctx, "health", object.SpaceSettings{Ranges: 1}); err != nil {
		t.Fatal(err)
	}
	body := bytes.Repeat([]byte("cairn "), 20<<10) // chunked: over the 4 KiB inline threshold
	put := func() error {
		_, err := n.Put(ctx, &object.PutRequest{Space: "health", Key: "k", Size: int64(len(body))}, bytes.NewReader(body))
		return err
	}
	if err := put(); err != nil {
		t.Fatal(err)
	}
	health := func() (int, map[string]any) {
		rec := httptest.NewRecorder()
		n.Healthz(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		var m map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
			t.Fatalf("healthz body %q: %v", rec.Body.String(), err)
		}
		return rec.Code, m
	}
	if code, m := health(); code != http.StatusOK || m["status"] != "ok" || m["chunk_store"] != nil {
		t.Fatalf("healthy node: %d %v", code, m)
	} else if p, ok := m["problems"].([]any); !ok || len(p) != 0 {
		t.Fatalf("healthy node's problems: %#v, want []", m["problems"])
	}
	fail.Store(true)
	body = bytes.Repeat([]byte("other "), 20<<10)
	if err := put(); err == nil {
		t.Fatal("PUT succeeded with a failing segment fsync")
	}
	code, m := health()
	if msg, _ := m["chunk_store"].(string); code != http.StatusServiceUnavailable || m["status"] != "degraded" || !strings.Contains(msg, "injected fsync failure") {
		t.Fatalf("after a failed fsync: %d %v", code, m)
	}
}
