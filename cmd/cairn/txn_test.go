package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-db/cairn/client"
	"github.com/cairn-db/cairn/internal/testenv"
)

// TestTransactions drives transactions against a real server: the Go
// client's Update (conflicts retried, rollback on error and on panic),
// Begin/Commit/Rollback with a listing inside, serializable against write
// skew, a transaction open longer than the server's idle timeout; the
// shell's BEGIN/COMMIT/ROLLBACK and `cairn txn FILE`.
func TestTransactions(t *testing.T) {
	bin := cairnBinary(t)
	srv := startServer(t, bin, t.TempDir(), [5]int{testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t)},
		"--idle-timeout", "2s")
	defer srv.kill()
	ctx := context.Background()
	c, err := srv.dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateSpace(ctx, "acct", client.SpaceSettings{Ranges: 4}); err != nil {
		t.Fatal(err)
	}

	t.Run("range writes", func(t *testing.T) {
		// Many byte-range writes and an append to one key in a transaction
		// make one version; a buffered put before them comes first.
		if _, err := c.CreateSpace(ctx, "ledgers", client.SpaceSettings{}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Put(ctx, "ledgers", "ledger", []byte("0123456789")); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Update(ctx, func(tx *client.Txn) error {
			if err := tx.Put(ctx, "ledgers", "other", []byte("x")); err != nil {
				return err
			}
			for i, s := range []string{"ab", "cd", "ef"} {
				if err := tx.WriteAt(ctx, "ledgers", "ledger", int64(3*i), []byte(s)); err != nil {
					return err
				}
			}
			return tx.Append(ctx, "ledgers", "ledger", []byte("!"))
		}); err != nil {
			t.Fatal(err)
		}
		b, info, err := c.Get(ctx, "ledgers", "ledger")
		if err != nil || string(b) != "ab2cd5ef89!" {
			t.Fatalf("ledger reads %q (%v)", b, err)
		}
		vs, err := c.Versions(ctx, "ledgers", "ledger", client.VersionsOptions{})
		if err != nil || len(vs.Versions) != 2 || vs.Versions[0].Version != info.Version {
			t.Fatalf("the range writes made %d versions (%v)", len(vs.Versions), err)
		}

		// More range writes than the client keeps (they go ahead in one
		// request each time it fills), and a read inside the transaction
		// that must see the ones still buffered.
		model := make([]byte, 1<<20)
		if _, err := c.Put(ctx, "ledgers", "big", model); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Update(ctx, func(tx *client.Txn) error {
			for i := range 80 {
				mod := bytes.Repeat([]byte{byte(i + 1)}, 16<<10)
				off := int64(i * 13001 % (len(model) - len(mod)))
				if err := tx.WriteAt(ctx, "ledgers", "big", off, mod); err != nil {
					return err
				}
				copy(model[off:], mod)
			}
			got, _, err := tx.Get(ctx, "ledgers", "big")
			if err != nil {
				return err
			}
			if !bytes.Equal(got, model) {
				t.Errorf("inside the transaction the object does not show its range writes")
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if b, _, err := c.Get(ctx, "ledgers", "big"); err != nil || !bytes.Equal(b, model) {
			t.Fatalf("after 80 range writes in one transaction: %d bytes, %v, equal %v", len(b), err, bytes.Equal(b, model))
		}
	})

	t.Run("update", func(t *testing.T) {
		// Concurrent increments of one counter: each loses conflicts and
		// runs again; none is lost.
		if _, err := c.Put(ctx, "acct", "counter", []byte("0")); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		const workers, each = 4, 10
		errs := make(chan error, workers)
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range each {
					_, err := c.Update(ctx, func(tx *client.Txn) error {
						b, _, err := tx.Get(ctx, "acct", "counter")
						if err != nil {
							return err
						}
						n, _ := strconv.Atoi(string(b))
						return tx.Put(ctx, "acct", "counter", []byte(strconv.Itoa(n+1)))
					}, client.MaxAttempts(100))
					if err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		b, _, err := c.Get(ctx, "acct", "counter")
		if err != nil || string(b) != strconv.Itoa(workers*each) {
			t.Fatalf("counter = %q, %v", b, err)
		}

		// An error from fn rolls back; so does a panic.
		boom := errors.New("boom")
		if _, err := c.Update(ctx, func(tx *client.Txn) error {
			if err := tx.Put(ctx, "acct", "!never", []byte("x")); err != nil {
				return err
			}
			return boom
		}); !errors.Is(err, boom) {
			t.Fatalf("update returning an error: %v", err)
		}
		func() {
			defer func() {
				if recover() == nil {
					t.Fatal("the panic did not go on")
				}
			}()
			c.Update(ctx, func(tx *client.Txn) error {
				tx.Put(ctx, "acct", "zznever", []byte("x"))
				panic("in the transaction")
			})
		}()
		for _, k := range []string{"!never", "zznever"} {
			if _, _, err := c.Get(ctx, "acct", k); !errors.Is(err, client.ErrNotFound) {
				t.Fatalf("%s after a rolled-back transaction: %v", k, err)
			}
		}
	})

	t.Run("explicit", func(t *testing.T) {
		tx, err := c.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"!a", "5b", "Lc", "zd"} {
			if err := tx.Put(ctx, "acct", k, []byte("v-"+k)); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Delete(ctx, "acct", "counter"); err != nil {
			t.Fatal(err)
		}
		// Kept in the client so far: no snapshot yet, own writes read back.
		if tx.StartTS() != 0 {
			t.Fatalf("a transaction that only wrote has snapshot %x", tx.StartTS())
		}
		if b, info, err := tx.Get(ctx, "acct", "5b"); err != nil || string(b) != "v-5b" || info.Version != 0 {
			t.Fatalf("own buffered write: %q %+v %v", b, info, err)
		}
		if _, _, err := tx.Get(ctx, "acct", "counter"); !errors.Is(err, client.ErrNotFound) {
			t.Fatalf("own buffered delete: %v", err)
		}
		res, err := tx.List(ctx, "acct", client.ListOptions{})
		if err != nil || len(res.Objects) != 4 {
			t.Fatalf("list in the transaction: %+v %v", res, err)
		}
		if _, _, err := c.Get(ctx, "acct", "!a"); !errors.Is(err, client.ErrNotFound) {
			t.Fatalf("uncommitted write visible: %v", err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"!a", "zd"} {
			_, info, err := c.Get(ctx, "acct", k)
			if err != nil || info.Version != tx.CommitTS() {
				t.Fatalf("%s: version %x, commit %x, %v", k, info.Version, tx.CommitTS(), err)
			}
		}
		if err := tx.Put(ctx, "acct", "x", nil); !errors.Is(err, client.ErrTxnDone) {
			t.Fatalf("a put after the commit: %v", err)
		}
		rb, err := c.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rb.Put(ctx, "acct", "!a", []byte("dropped"))
		if err := rb.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		if b, _, _ := c.Get(ctx, "acct", "!a"); string(b) != "v-!a" {
			t.Fatalf("after a rollback: %q", b)
		}
	})

	t.Run("serializable", func(t *testing.T) {
		// Write skew: each reads both, writes one. Snapshot isolation lets
		// both commit; serializable, one.
		for _, ser := range []bool{false, true} {
			var opts []client.TxnOption
			if ser {
				opts = append(opts, client.Serializable())
			}
			t1, _ := c.Begin(ctx, opts...)
			t2, _ := c.Begin(ctx, opts...)
			for _, tx := range []*client.Txn{t1, t2} {
				tx.Get(ctx, "acct", "!a")
				tx.Get(ctx, "acct", "zd")
			}
			t1.Put(ctx, "acct", "!a", []byte("t1"))
			t2.Put(ctx, "acct", "zd", []byte("t2"))
			e1, e2 := t1.Commit(ctx), t2.Commit(ctx)
			if !ser && (e1 != nil || e2 != nil) {
				t.Fatalf("snapshot isolation: %v, %v", e1, e2)
			}
			if ser && !(e1 == nil && errors.Is(e2, client.ErrTxnConflict)) {
				t.Fatalf("serializable: %v, %v", e1, e2)
			}
		}
	})

	t.Run("long", func(t *testing.T) {
		// Open across several of the server's idle timeouts (2s): the
		// connection is kept, and nothing is locked meanwhile.
		tx, err := c.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := tx.Get(ctx, "acct", "zd"); err != nil { // opens it on the node
			t.Fatal(err)
		}
		tx.Put(ctx, "acct", "long", []byte("kept"))
		time.Sleep(5 * time.Second)
		if _, err := c.Put(ctx, "acct", "other", []byte("not blocked")); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatalf("a transaction open for 5s: %v", err)
		}
	})

	t.Run("shell", func(t *testing.T) {
		body := filepath.Join(t.TempDir(), "body")
		os.WriteFile(body, []byte("from-the-shell"), 0o600)
		out, errs, code := run(t, bin, srv, `USE shl
PUT a 1
BEGIN
PUT a 2
PUT b 2
GET a
ROLLBACK
GET a
GET b
BEGIN
PUT a 3
DEL b
put acct/!shell `+body+`
COMMIT
GET a
cat acct/!shell
BEGIN
space ls
COMMIT
`, "shell")
		if code != 0 {
			t.Fatalf("shell: exit %d: %s", code, errs)
		}
		want := []string{"BEGIN (snapshot ", "ROLLBACK\n1\n(not found)\n", "COMMIT ", "3\nfrom-the-shell", "cannot run inside a transaction"}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Fatalf("shell output lacks %q:\n%s", w, out)
			}
		}
		if regexp.MustCompile(`GET a\n2`).MatchString(out) {
			t.Fatalf("the rolled-back write was read:\n%s", out)
		}
	})

	t.Run("txn file", func(t *testing.T) {
		dir := t.TempDir()
		script := filepath.Join(dir, "move.txt")
		os.WriteFile(script, []byte("# move one unit\nPUT src 9\nPUT dst 1\nGET src\n"), 0o600)
		out, errs, code := run(t, bin, srv, "", "txn", "--space", "acct", script)
		if code != 0 || !regexp.MustCompile(`committed at [0-9a-f]{16}`).MatchString(out) || !strings.Contains(out, "9\n") {
			t.Fatalf("txn: exit %d: %q %q", code, out, errs)
		}
		// A failing line: nothing is written.
		os.WriteFile(script, []byte("PUT src 0\ncat nosuchspace/x\n"), 0o600)
		_, errs, code = run(t, bin, srv, "", "txn", "--space", "acct", script)
		if code != 1 || !strings.Contains(errs, "line 2") || !strings.Contains(errs, "nothing was written") {
			t.Fatalf("txn with a failing line: exit %d: %q", code, errs)
		}
		if b, _, _ := c.Get(ctx, "acct", "src"); string(b) != "9" {
			t.Fatalf("src after the failed transaction: %q", b)
		}
		_, errs, code = run(t, bin, srv, "PUT a 1\nCOMMIT\n", "txn", "-")
		if code != 2 || !strings.Contains(errs, "one transaction") {
			t.Fatalf("txn with COMMIT inside: exit %d: %q", code, errs)
		}
	})
}
