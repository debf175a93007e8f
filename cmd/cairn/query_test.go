package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/internal/testenv"
)

// TestCLIQuery: `cairn query` answers a tag filter with the matching
// keys in order, explains that the tag index served it, orders by a
// document field, prints JSON, reads the past with --as-of, refuses a bad
// filter with a clear message and a space the key may not read.
func TestCLIQuery(t *testing.T) {
	bin := cairnBinary(t)
	srv := startServer(t, bin, t.TempDir(), [5]int{testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t)})
	defer srv.kill()
	must, fails := cliChecks(t, bin, srv)
	must("", "space", "create", "photos", "--ranges", "3")
	must("", "space", "create", "staff")
	must("aaaa", "put", "photos/a.png", "-", "--tag", "color=red")
	must("bbbbbbbb", "put", "photos/b.png", "-", "--tag", "color=blue")
	must("cccccccccccc", "put", "photos/c.png", "-", "--tag", "color=red", "--tag", "size=big")
	must("d", "put", "photos/d.png", "-")
	keys := func(out string) string {
		var ks []string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if f := strings.Fields(l); len(f) > 0 {
				ks = append(ks, f[len(f)-1])
			}
		}
		return strings.Join(ks, " ")
	}
	if got := keys(must("", "query", "photos", `tags.color == "red"`)); got != "a.png c.png" {
		t.Fatalf("red: %q", got)
	}
	_, errs, code := run(t, bin, srv, "", "query", "photos", `tags.color == "red" && size > 4`, "--explain")
	if code != 0 || !strings.Contains(errs, "plan: tag equal") || !strings.Contains(errs, "2 candidates examined") {
		t.Fatalf("explain: exit %d, %s", code, errs)
	}
	if got := keys(must("", "query", "photos", `!has(tags.color) || tags.color != "red"`)); got != "b.png d.png" {
		t.Fatalf("not red: %q", got)
	}
	if got := keys(must("", "query", "photos", `true`, "--order-by", "size", "--desc", "--limit", "2")); got != "c.png b.png" {
		t.Fatalf("largest two: %q", got)
	}
	v := regexp.MustCompile(`version:\s+(\S+)`).FindStringSubmatch(must("", "stat", "photos/c.png"))
	if v == nil {
		t.Fatal("no version in stat")
	}
	must("x", "put", "photos/c.png", "-", "--tag", "color=green")
	if got := keys(must("", "query", "photos", `tags.color == "red"`)); got != "a.png" {
		t.Fatalf("red after the retag: %q", got)
	}
	if got := keys(must("", "query", "photos", `tags.color == "red"`, "--as-of", v[1])); got != "a.png c.png" {
		t.Fatalf("red as of before: %q", got)
	}

	must(`{"type": "Employee", "name": "Ada", "age": 36}`, "put", "staff/ada", "-", "--content-type", "application/json")
	must(`{"type": "Employee", "name": "Grace", "age": 45}`, "put", "staff/grace", "-", "--content-type", "application/json")
	must(`{"type": "Department", "name": "R&D"}`, "put", "staff/rnd", "-", "--content-type", "application/json")
	out := must("", "query", "staff", `doc.type == "Employee"`, "--order-by", "doc.age", "--desc", "--json", "--docs")
	var names []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var m struct {
			Key string
			Doc struct{ Name string }
		}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("--json printed %q: %v", l, err)
		}
		names = append(names, m.Key+"="+m.Doc.Name)
	}
	if strings.Join(names, " ") != "grace=Grace ada=Ada" {
		t.Fatalf("employees by age: %v", names)
	}

	// A field index: built online, used by the planner, dropped.
	out = must("", "space", "index", "add", "staff", "doc.age", "--type", "number")
	if !strings.Contains(out, "indexed doc.age of staff (number)") {
		t.Fatalf("index add: %q", out)
	}
	if out := must("", "space", "index", "ls", "staff"); !strings.Contains(out, "doc.age") || !strings.Contains(out, "ready") {
		t.Fatalf("index ls: %q", out)
	}
	_, errs, code = run(t, bin, srv, "", "query", "staff", `doc.age > 40`, "--explain")
	if code != 0 || !strings.Contains(errs, `plan: field range "doc.age"; 1 matches`) {
		t.Fatalf("explain with the index: exit %d, %s", code, errs)
	}
	fails(1, "indexed as a number", "space", "index", "add", "staff", "doc.age", "--type", "string")
	fails(1, "doc.PATH", "space", "index", "add", "staff", "age")
	must("", "space", "index", "rm", "staff", "doc.age")
	fails(1, "no index", "space", "index", "rm", "staff", "doc.age")

	// SQL over the native protocol: the same engine as the SQL port.
	if out := must("", "sql", "SELECT `key`, JSON_EXTRACT(doc, '$.age') FROM staff WHERE JSON_EXTRACT(doc, '$.type') = 'Employee' ORDER BY `key`"); out != "key\tJSON_EXTRACT(doc, '$.age')\nada\t36\ngrace\t45\n" {
		t.Fatalf("sql: %q", out)
	}
	if out := must("", "sql", "SELECT COUNT(*) FROM photos", "--json"); !strings.Contains(out, `"rows":[["4"]]`) {
		t.Fatalf("sql --json: %q", out)
	}
	fails(1, "cannot be dropped", "sql", "DROP TABLE photos")
	fails(1, "read-only", "sql", "DELETE FROM photos")

	fails(1, "invalid filter", "query", "photos", `size >`)
	fails(1, "not bool", "query", "photos", `size`)
	out = must("", "key", "create", "--access", "clerk", "--grant", "staff=read")
	secret := regexp.MustCompile(`secret key: (\S+)`).FindStringSubmatch(out)[1]
	if _, errs, code := run(t, bin, srv, "", "query", "photos", "true", "--access-key", "clerk", "--secret-key", secret); code == 0 || !strings.Contains(errs, "denied") {
		t.Fatalf("the clerk queried photos: exit %d, %s", code, errs)
	}
	if _, errs, code := run(t, bin, srv, "", "sql", "SELECT * FROM photos", "--access-key", "clerk", "--secret-key", secret); code == 0 || !strings.Contains(errs, "photos") {
		t.Fatalf("the clerk's SQL over photos: exit %d, %s", code, errs)
	}

	// The Twitter-like bench runs every operation under each placement;
	// a user's timeline asks one range of a space placed by user, and
	// every bucket of a hash space.
	out = must("", "bench", "--op", "twitter", "--users", "30", "--tweets", "5", "--follows", "3", "--ranges", "4",
		"--duration", "500ms", "--concurrency", "4", "--placements", "hash,tag:user", "--json")
	var tw twitterResult
	if err := json.Unmarshal([]byte(out), &tw); err != nil || len(tw.Runs) != 2 {
		t.Fatalf("bench --op twitter: %v: %s", err, out)
	}
	for _, r := range tw.Runs {
		if len(r.PerOp) != len(twitterOps) {
			t.Fatalf("%s: %+v", r.Placement, r.PerOp)
		}
		for _, op := range r.PerOp {
			if op.Errors > 0 {
				t.Fatalf("%s: %s failed %d times", r.Placement, op.Op, op.Errors)
			}
			want := map[string]float64{"hash": 16, "tag:user": 1}[r.Placement]
			if op.Op == "user_timeline" && op.Ops > 0 && op.RangesPerOp != want {
				t.Fatalf("%s: user_timeline asked %.1f ranges, want %.0f", r.Placement, op.RangesPerOp, want)
			}
		}
	}
	if got := keys(must("", "query", "twitter-tag-user", `tags.user == "user00001" && key < "tweet-0000000150"`)); got == "" {
		t.Fatal("user00001 has no tweets")
	}
}
