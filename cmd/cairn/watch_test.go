package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/cairn-db/cairn/client"
	"github.com/cairn-db/cairn/internal/testenv"
)

// TestWatch: `cairn watch` prints changes as they are committed (and
// resumes from a cursor), the Go client's Watch delivers them in order,
// and its Cache drops an object another client changed.
func TestWatch(t *testing.T) {
	bin := cairnBinary(t)
	srv := startServer(t, bin, t.TempDir(), [5]int{testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t)})
	defer srv.kill()
	must, _ := cliChecks(t, bin, srv)
	must("", "space", "create", "feed")

	// The CLI, from now, as JSON lines.
	w := exec.Command(bin, "watch", "feed", "--json")
	w.Env = srv.env()
	stdout, err := w.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { w.Process.Kill(); w.Wait() }()
	time.Sleep(300 * time.Millisecond) // its first page fixes "now"
	must("one", "put", "feed/a", "-")
	must("", "rm", "feed/a")
	lines := bufio.NewScanner(stdout)
	var cursor string
	for _, want := range []string{`"key":"a"`, `"delete_marker":true`} {
		if !lines.Scan() {
			t.Fatalf("cairn watch ended: %v", lines.Err())
		}
		if !strings.Contains(lines.Text(), want) {
			t.Fatalf("cairn watch printed %s, want %s", lines.Text(), want)
		}
		var ev struct{ Cursor string }
		if err := json.Unmarshal(lines.Bytes(), &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Cursor == "" {
			t.Fatalf("no cursor in %s", lines.Text())
		}
		cursor = ev.Cursor
	}

	ctx := context.Background()
	c, err := srv.dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The Go client resumes from the cursor the CLI printed.
	if _, err := c.Put(ctx, "feed", "b", []byte("b")); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	var got []string
	err = c.Watch(wctx, "feed", cursor, func(ev client.WatchEvent, _ string) error {
		got = append(got, ev.Key)
		cancel()
		return nil
	})
	cancel()
	if len(got) != 1 || got[0] != "b" {
		t.Fatalf("Watch from the CLI's cursor: %v (%v)", got, err)
	}

	// The cache: a Get is served from memory until another client
	// changes the object.
	k, err := c.NewCache(ctx, "feed", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	if b, _, err := k.Get(ctx, "b"); err != nil || string(b) != "b" {
		t.Fatalf("cache get: %q %v", b, err)
	}
	other, err := srv.dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.Put(ctx, "feed", "b", []byte("b2")); err != nil {
		t.Fatal(err)
	}
	if err := k.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if b, _, err := k.Get(ctx, "b"); err != nil || string(b) != "b2" {
		t.Fatalf("cache get after another client's write and a Sync: %q %v", b, err)
	}
	// Without a Sync, the watch in the background drops it soon.
	if _, err := other.Put(ctx, "feed", "b", []byte("b3")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _, err := k.Get(ctx, "b")
		if err != nil {
			t.Fatal(err)
		}
		if string(b) == "b3" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cache still serves %q 10 s after another client's write", b)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if k.Dropped() < 2 {
		t.Fatalf("dropped %d", k.Dropped())
	}
}
