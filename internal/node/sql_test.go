package node

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/cairn-db/cairn/internal/admin"
	"github.com/cairn-db/cairn/internal/cluster"
	"github.com/cairn-db/cairn/internal/meta"
	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/tstamp"
)

// memNode opens and serves a node on an in-memory disk with the root key
// root/rootsecret123456, its ports on loopback (with sql, the SQL port
// too), closed when the test ends.
func memNode(t *testing.T, sql bool) *Node {
	t.Helper()
	cfg := Config{
		Config: cluster.Config{DataDir: "data", FS: vfs.NewMem(), Meta: meta.NewMemStore(time.Now),
			MetaPort: -1, PeerPort: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			RootAccessKey: "root", RootSecretKey: "rootsecret123456"},
		NativePort: -1, HTTPPort: -1,
	}
	if sql {
		cfg.SQLPort = -1
	}
	n, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	n.Serve()
	return n
}

// mariadbClient returns Debian's mariadb client, or skips the test when
// it is missing (scripts/test.sh installs it and sets
// CAIRN_REQUIRE_MARIADB: then a missing client fails).
func mariadbClient(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("mariadb")
	if err != nil {
		if os.Getenv("CAIRN_REQUIRE_MARIADB") != "" {
			t.Fatalf("the mariadb client is missing (CAIRN_REQUIRE_MARIADB is set): %v", err)
		}
		t.Skip("no mariadb client (apt-get install mariadb-client)")
	}
	return p
}

// TestSQL drives the SQL port with Debian's mariadb client: spaces and
// snapshots are tables of one database, rows are live objects with their
// documents, a WHERE on an indexed field is an index lookup, AS OF reads
// the past, users are access keys (a wrong secret is refused, a key sees
// only the spaces it may read), and nothing can be written.
func TestSQL(t *testing.T) {
	bin := mariadbClient(t)
	ctx := context.Background()
	n := memNode(t, true)
	host, port, _ := net.SplitHostPort(n.SQLAddr())
	if host != "127.0.0.1" {
		t.Fatalf("the SQL port is bound to %s, not the loopback address", n.SQLAddr())
	}
	run := func(user, secret, stmt string) (string, error) {
		t.Helper()
		cmd := exec.Command(bin, "-h", host, "-P", port, "-u", user, "-p"+secret, "--batch", "--skip-column-names", "-e", stmt, "cairn")
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		if err != nil {
			return errb.String(), err
		}
		return strings.TrimSpace(out.String()), nil
	}
	must := func(stmt string) string {
		t.Helper()
		out, err := run("root", "rootsecret123456", stmt)
		if err != nil {
			t.Fatalf("%s: %v: %s", stmt, err, out)
		}
		return out
	}
	for _, s := range []string{"staff", "secret"} {
		if _, err := n.CreateSpace(ctx, s, object.SpaceSettings{Ranges: 2}); err != nil {
			t.Fatal(err)
		}
	}
	put := func(space, key, doc string, tags map[string]string) object.Info {
		info, err := n.Put(ctx, &object.PutRequest{Space: space, Key: key, Size: int64(len(doc)), ContentType: "application/json", Tags: tags},
			strings.NewReader(doc))
		if err != nil {
			t.Fatal(err)
		}
		return info
	}
	put("staff", "ada", `{"type": "Employee", "name": "Ada", "age": 36}`, map[string]string{"team": "core"})
	first := put("staff", "grace", `{"type": "Employee", "name": "Grace", "age": 45}`, nil)
	put("staff", "rnd", `{"type": "Department", "name": "R&D"}`, nil)
	put("secret", "x", `{}`, nil)

	if got := must("SHOW TABLES"); got != "secret\nstaff" {
		t.Fatalf("tables: %q", got)
	}
	if got := must("SELECT `key`, size, content_type, JSON_EXTRACT(doc, '$.name') FROM staff ORDER BY `key`"); got != "ada\t46\tapplication/json\t\"Ada\"\ngrace\t48\tapplication/json\t\"Grace\"\nrnd\t37\tapplication/json\t\"R&D\"" {
		t.Fatalf("rows: %q", got)
	}
	if got := must("SELECT `key` FROM staff WHERE JSON_EXTRACT(tags, '$.team') = 'core'"); got != "ada" {
		t.Fatalf("by tag: %q", got)
	}
	// A field index: its column, and a lookup served by it.
	if err := n.AddIndex(ctx, "staff", "doc.age", "number"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		ixs, _ := n.Indexes(ctx, "staff")
		if len(ixs) == 1 && ixs[0].State == "ready" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("index not ready: %+v", ixs)
		}
	}
	if got := must("SELECT `key`, doc_age FROM staff WHERE doc_age > 40"); got != "grace\t45" {
		t.Fatalf("doc_age > 40: %q", got)
	}
	if plan := must("EXPLAIN PLAN SELECT `key` FROM staff WHERE doc_age > 40"); !strings.Contains(plan, "IndexedTableAccess(staff)") || !strings.Contains(plan, "staff.doc_age") {
		t.Fatalf("plan: %s", plan)
	}
	if got := must("SELECT `key` FROM staff WHERE `key` = 'rnd'"); got != "rnd" {
		t.Fatalf("by key: %q", got)
	}
	// The past, and snapshots as tables.
	if _, err := n.CreateSnapshot(ctx, "staff", "staff-monday"); err != nil {
		t.Fatal(err)
	}
	put("staff", "grace", `{"type": "Employee", "name": "Grace", "age": 46}`, nil)
	if got := must("SELECT doc_age FROM staff WHERE `key` = 'grace'"); got != "46" {
		t.Fatalf("grace now: %q", got)
	}
	asOf := time.Unix(0, first.Modified).UTC().Add(time.Millisecond).Format(time.RFC3339Nano)
	if got := must("SELECT JSON_EXTRACT(doc, '$.age') FROM staff AS OF '" + asOf + "' WHERE `key` = 'grace'"); got != "45" {
		t.Fatalf("grace as of %s: %q", asOf, got)
	}
	if got := must("SELECT JSON_EXTRACT(doc, '$.age') FROM staff AS OF '" + tstamp.String(first.Version) + "' WHERE `key` = 'grace'"); got != "45" {
		t.Fatalf("grace as of her first version: %q", got)
	}
	if got := must("SELECT JSON_EXTRACT(doc, '$.age') FROM `staff-monday` WHERE `key` = 'grace'"); got != "45" {
		t.Fatalf("grace in the snapshot: %q", got)
	}
	// A branch is a table too: its own writes over its base's.
	if _, err := n.CreateBranch(ctx, "staff", "staff-next", ""); err != nil {
		t.Fatal(err)
	}
	put("staff-next", "grace", `{"type": "Employee", "name": "Grace", "age": 47}`, nil)
	if got := must("SELECT JSON_EXTRACT(doc, '$.age') FROM `staff-next` WHERE `key` = 'grace'"); got != "47" {
		t.Fatalf("grace in the branch: %q", got)
	}
	if got := must("SELECT doc_age FROM staff WHERE `key` = 'grace'"); got != "46" {
		t.Fatalf("grace in the space after the branch's write: %q", got)
	}
	// Read-only, whatever the key.
	for _, stmt := range []string{"INSERT INTO staff (`key`) VALUES ('x')", "DELETE FROM staff", "CREATE TABLE t (a INT)", "DROP TABLE staff"} {
		if out, err := run("root", "rootsecret123456", stmt); err == nil {
			t.Fatalf("%s succeeded: %s", stmt, out)
		}
	}
	if out, _ := run("root", "rootsecret123456", "SELECT LOAD_FILE('/etc/passwd')"); out != "NULL" {
		t.Fatalf("LOAD_FILE read a file: %q", out)
	}
	// Users are access keys with their grants.
	if out, err := run("root", "wrong-secret", "SELECT 1"); err == nil || !strings.Contains(out, "Access denied") {
		t.Fatalf("a wrong secret: %v %s", err, out)
	}
	if _, err := n.CreateKey(ctx, admin.KeySpec{Access: "clerk", Secret: "clerksecret1234", Grants: map[string]string{"staff": "read"}}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		out, err := run("clerk", "clerksecret1234", "SHOW TABLES")
		if err == nil && out == "staff" { // (not the snapshot: a grant names its space)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the clerk's tables: %v %q", err, out)
		}
	}
	if out, err := run("clerk", "clerksecret1234", "SELECT * FROM secret"); err == nil {
		t.Fatalf("the clerk read secret: %s", out)
	}
}
