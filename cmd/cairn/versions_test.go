package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/client"
	"github.com/cairn-db/cairn/internal/testenv"
)

// TestCLIVersions: clone, lineage and diff as a user runs them, with
// their JSON, their errors, and a key that may read the source but not
// write the target.
func TestCLIVersions(t *testing.T) {
	bin := cairnBinary(t)
	srv := startServer(t, bin, t.TempDir(), [5]int{testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t)})
	defer srv.kill()
	must, fails := cliChecks(t, bin, srv)
	version := regexp.MustCompile(`version ([0-9a-f]{16})`)
	must("", "space", "create", "models")
	must("", "space", "create", "forks")
	v1 := version.FindStringSubmatch(must("weights v1\n", "put", "models/w", "-", "--meta", "epoch=1"))[1]
	v2 := version.FindStringSubmatch(must("weights v2\n", "put", "models/w", "-", "--meta", "epoch=2"))[1]

	out := must("", "clone", "models/w", "forks/w", "--version", v1)
	if !strings.Contains(out, "forks/w") || !strings.Contains(out, "cloned from models/w "+v1) {
		t.Fatalf("clone: %q", out)
	}
	if got := must("", "cat", "forks/w"); got != "weights v1\n" {
		t.Fatalf("the clone reads %q", got)
	}
	var info client.ObjectInfo
	if err := json.Unmarshal([]byte(must("", "clone", "models/w", "forks/latest", "--json")), &info); err != nil || info.Origin == nil || info.Origin.Space != "models" {
		t.Fatalf("clone --json: %+v %v", info, err)
	}
	fails(1, "precondition", "clone", "models/w", "forks/w", "--if-none-match")
	fails(1, "not", "clone", "models/nothing", "forks/x")
	fails(2, "SPACE/KEY", "clone", "models/w", "forks")

	out = must("", "lineage", "forks/w")
	if !strings.Contains(out, "origin (-1)") || !strings.Contains(out, "models/w") || !strings.Contains(out, v1) {
		t.Fatalf("lineage of the clone: %q", out)
	}
	out = must("", "lineage", "models/w", "--version", v1)
	if !strings.Contains(out, "next version") || !strings.Contains(out, v2) || !strings.Contains(out, "clone ") || !strings.Contains(out, "forks/w") {
		t.Fatalf("lineage of v1: %q", out)
	}
	var l client.Lineage
	if err := json.Unmarshal([]byte(must("", "lineage", "models/w", "--json")), &l); err != nil || len(l.Ancestors) != 1 || len(l.Children) != 1 {
		t.Fatalf("lineage --json: %+v %v", l, err)
	}

	out = must("", "diff", "models/w", v1, v2)
	if !strings.Contains(out, `~ meta.epoch: "1" -> "2"`) || !strings.Contains(out, "[9, 10) 1 bytes") {
		t.Fatalf("diff: %q", out)
	}
	if out := must("", "diff", "models/w", v1, "--to", "forks/w"); !strings.Contains(out, "content: the same") {
		t.Fatalf("diff against the clone: %q", out)
	}
	fails(2, "version id", "diff", "models/w", "nope")

	// A key that may read models and forks but write neither.
	out = must("", "key", "create", "--access", "viewer", "--grant", "models=read", "--grant", "forks=read")
	secret := regexp.MustCompile(`secret key: (\S+)`).FindStringSubmatch(out)[1]
	_, errs, code := run(t, bin, srv, "", "clone", "models/w", "forks/stolen", "--access-key", "viewer", "--secret-key", secret)
	if code != 1 || !strings.Contains(errs, "may not write") {
		t.Fatalf("clone without the write grant: exit %d, %q", code, errs)
	}
	if out, _, code := run(t, bin, srv, "", "lineage", "models/w", "--access-key", "viewer", "--secret-key", secret); code != 0 || !strings.Contains(out, "this") {
		t.Fatalf("lineage with the read grant: exit %d, %q", code, out)
	}
	fails(1, "no such object", "cat", "forks/stolen")

	// Snapshots: made, read as a space, refused writes, listed, removed.
	out = must("", "snapshot", "create", "models", "models-v2")
	if !strings.Contains(out, "snapshot models-v2 of models as of") {
		t.Fatalf("snapshot create: %q", out)
	}
	must("weights v3\n", "put", "models/w", "-")
	if got := must("", "cat", "models-v2/w"); got != "weights v2\n" {
		t.Fatalf("the snapshot reads %q", got)
	}
	if out := must("", "ls", "models-v2"); !strings.Contains(out, " w\n") {
		t.Fatalf("ls of the snapshot: %q", out)
	}
	fails(1, "read-only", "put", "models-v2/x", "-")
	if out := must("", "snapshot", "ls", "models"); !strings.Contains(out, "models-v2") {
		t.Fatalf("snapshot ls: %q", out)
	}
	fails(1, "has snapshots", "space", "rm", "models")
	fails(1, "may not", "snapshot", "create", "models", "models-v3", "--access-key", "viewer", "--secret-key", secret)
	must("", "snapshot", "rm", "models-v2")
	fails(1, "does not exist", "cat", "models-v2/w")

	// Listing a space's snapshots needs the read grant on it; the admin
	// of a space may remove its snapshots.
	must("", "space", "create", "private")
	fails(1, "may not", "snapshot", "ls", "private", "--access-key", "viewer", "--secret-key", secret)
	out = must("", "key", "create", "--access", "modeladmin", "--grant", "models=admin")
	adminSecret := regexp.MustCompile(`secret key: (\S+)`).FindStringSubmatch(out)[1]
	must("", "snapshot", "create", "models", "models-v4")
	fails(1, "may not", "snapshot", "rm", "models-v4", "--access-key", "viewer", "--secret-key", secret)
	if out, errs, code := run(t, bin, srv, "", "snapshot", "rm", "models-v4", "--access-key", "modeladmin", "--secret-key", adminSecret); code != 0 {
		t.Fatalf("the space's admin removing its snapshot: exit %d %s %s", code, out, errs)
	}

	// Branches: made, written without touching the space, merged back
	// (conflicts stop a merge unless a strategy settles them), removed.
	out = must("", "branch", "create", "models", "exp")
	if !strings.Contains(out, "branch exp of models as of") {
		t.Fatalf("branch create: %q", out)
	}
	must("exp weights\n", "put", "exp/w", "-")
	must("new in exp\n", "put", "exp/new", "-")
	if got := must("", "cat", "models/w"); got != "weights v3\n" {
		t.Fatalf("a write to the branch changed the space: %q", got)
	}
	if out := must("", "ls", "exp"); !strings.Contains(out, " new\n") || !strings.Contains(out, " w\n") {
		t.Fatalf("ls of the branch: %q", out)
	}
	if out := must("", "branch", "ls", "models"); !strings.Contains(out, "exp") {
		t.Fatalf("branch ls: %q", out)
	}
	must("weights v4\n", "put", "models/w", "-")
	fails(1, "nothing merged", "branch", "merge", "exp")
	var res client.MergeResult
	if err := json.Unmarshal([]byte(must("", "branch", "merge", "exp", "--into", "models", "--strategy", "dest-wins", "--json")), &res); err != nil || res.Applied != 1 || len(res.Conflicts) != 1 || res.Conflicts[0].Key != "w" {
		t.Fatalf("merge --json: %+v %v", res, err)
	}
	if got := must("", "cat", "models/new"); got != "new in exp\n" {
		t.Fatalf("the merged key reads %q", got)
	}
	// Settled by dest-wins until a side changes w again; both do.
	if out := must("", "branch", "merge", "exp"); !strings.Contains(out, "nothing to take") {
		t.Fatalf("merging again after dest-wins: %q", out)
	}
	must("exp weights 2\n", "put", "exp/w", "-")
	must("weights v5\n", "put", "models/w", "-")
	if out := must("", "branch", "merge", "exp", "--strategy", "source-wins"); !strings.Contains(out, "merged exp: 1 keys") {
		t.Fatalf("merge, source wins: %q", out)
	}
	if got := must("", "cat", "models/w"); got != "exp weights 2\n" {
		t.Fatalf("source wins: %q", got)
	}
	// A space diff between views of one space: the branch against the
	// space, and the space against a snapshot of it.
	must("only here\n", "put", "exp/only", "-")
	must("", "rm", "exp/new")
	out = must("", "diff", "models", "exp")
	if !strings.Contains(out, "+ only (10 bytes") || !strings.Contains(out, "- new\n") || !strings.Contains(out, "1 added, 1 removed, 0 changed") {
		t.Fatalf("diff of a space and its branch: %q", out)
	}
	must("", "snapshot", "create", "models", "models-before")
	must("changed\n", "put", "models/w", "-")
	var sd struct {
		Changes []client.KeyChange `json:"changes"`
	}
	if err := json.Unmarshal([]byte(must("", "diff", "models-before", "models", "--json")), &sd); err != nil || len(sd.Changes) != 1 || sd.Changes[0].Key != "w" || sd.Changes[0].Change != "changed" {
		t.Fatalf("diff --json of a snapshot and its space: %+v %v", sd, err)
	}
	fails(1, "not views of one space", "diff", "models", "forks")
	must("", "snapshot", "rm", "models-before")
	fails(1, "has branches", "space", "rm", "models")
	fails(1, "branch rm", "space", "rm", "exp")
	fails(1, "may not", "branch", "create", "models", "exp2", "--access-key", "viewer", "--secret-key", secret)
	fails(1, "may not", "branch", "merge", "exp", "--access-key", "viewer", "--secret-key", secret)
	must("", "branch", "rm", "exp")
	fails(1, "does not exist", "cat", "exp/w")
}
