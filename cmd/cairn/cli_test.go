package main

import (
	"bytes"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/testenv"
)

// run runs the cairn binary against srv and returns stdout, stderr and the
// exit code.
func run(t *testing.T, bin string, srv *server, stdin string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = srv.env()
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// cliChecks returns must, which runs cairn and fails the test unless it
// exits 0 (returning stdout), and fails, which runs it and fails the test
// unless it exits wantCode with wantErr in its stderr.
func cliChecks(t *testing.T, bin string, srv *server) (must func(stdin string, args ...string) string, fails func(wantCode int, wantErr string, args ...string)) {
	must = func(stdin string, args ...string) string {
		t.Helper()
		out, errs, code := run(t, bin, srv, stdin, args...)
		if code != 0 {
			t.Fatalf("cairn %s: exit %d: %s", strings.Join(args, " "), code, errs)
		}
		return out
	}
	fails = func(wantCode int, wantErr string, args ...string) {
		t.Helper()
		_, errs, code := run(t, bin, srv, "", args...)
		if code != wantCode || !strings.Contains(errs, wantErr) {
			t.Fatalf("cairn %s: exit %d, stderr %q; want exit %d containing %q", strings.Join(args, " "), code, errs, wantCode, wantErr)
		}
	}
	return must, fails
}

func TestCLI(t *testing.T) {
	bin := cairnBinary(t)
	srv := startServer(t, bin, t.TempDir(), [5]int{testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t)})
	defer srv.kill()
	dir := t.TempDir()
	must, fails := cliChecks(t, bin, srv)

	must("", "space", "create", "docs", "--retention", "last:5")
	// S3 access keys.
	out := must("", "key", "create", "--access", "reader", "--grant", "docs=read", "--grant", "*=read")
	if !strings.Contains(out, "access key: reader") || !regexp.MustCompile(`secret key: \S{40}`).MatchString(out) {
		t.Fatalf("key create: %q", out)
	}
	if out := must("", "key", "ls"); !strings.Contains(out, "reader") || !strings.Contains(out, "*=read,docs=read") || strings.Contains(out, "secret") {
		t.Fatalf("key ls: %q", out)
	}
	fails(2, "at least one --grant", "key", "create")
	fails(1, "not read, write or admin", "key", "create", "--grant", "docs=owner")
	fails(1, "exists", "key", "create", "--access", "reader", "--grant", "docs=read")
	must("", "key", "rm", "reader")
	fails(1, "no access key", "key", "rm", "reader")
	// KMS keys (SSE-KMS): made once, listed by id, never shown.
	if out := must("", "kms", "key", "create", "backups-1"); !strings.Contains(out, "made KMS key backups-1") {
		t.Fatalf("kms key create: %q", out)
	}
	fails(1, "exists", "kms", "key", "create", "backups-1")
	fails(1, "not a valid KMS key id", "kms", "key", "create", "_mine")
	if out := must("", "kms", "key", "ls"); !strings.Contains(out, "backups-1") || strings.Contains(out, "_sse-s3") {
		t.Fatalf("kms key ls: %q", out)
	}
	if out := must("", "space", "ls"); !strings.Contains(out, "docs") || !strings.Contains(out, "last:5") {
		t.Fatalf("space ls: %s", out)
	}
	out = must("first\n", "put", "docs/notes.txt", "-")
	v1 := regexp.MustCompile(`version ([0-9a-f]{16})`).FindStringSubmatch(out)[1]
	must("second\n", "put", "docs/notes.txt", "-")
	if out := must("", "cat", "docs/notes.txt"); out != "second\n" {
		t.Fatalf("cat: %q", out)
	}
	if out := must("", "cat", "docs/notes.txt", "--version", v1); out != "first\n" {
		t.Fatalf("cat --version: %q", out)
	}
	if out := must("", "cat", "docs/notes.txt", "--as-of", v1); out != "first\n" {
		t.Fatalf("cat --as-of: %q", out)
	}
	if out := must("", "versions", "docs/notes.txt"); strings.Count(out, "\n") != 3 {
		t.Fatalf("versions: %q", out)
	}
	if out := must("", "stat", "docs/notes.txt"); !strings.Contains(out, "parent:") || !regexp.MustCompile(`size: +7\n`).MatchString(out) {
		t.Fatalf("stat: %q", out)
	}
	must("more\n", "put", "docs/notes.txt", "-", "--append")
	if out := must("", "cat", "docs/notes.txt"); out != "second\nmore\n" {
		t.Fatalf("after append: %q", out)
	}
	fails(1, "precondition failed", "put", "docs/notes.txt", "-", "--append", "--if-match", v1)
	if out := must("", "cat", "docs/notes.txt", "--offset", "7", "--length", "4"); out != "more" {
		t.Fatalf("range read: %q", out)
	}

	// A file large enough to be chunked, in and out.
	big := make([]byte, 3<<20)
	rand.Read(big)
	src := filepath.Join(dir, "big.bin")
	os.WriteFile(src, big, 0o644)
	must("", "put", "docs/big.bin", src)
	dst := filepath.Join(dir, "out.bin")
	must("", "get", "docs/big.bin", dst)
	if got, _ := os.ReadFile(dst); !bytes.Equal(got, big) {
		t.Fatal("get returned different bytes")
	}
	if out := must("", "ls", "docs"); !strings.Contains(out, "big.bin") || !strings.Contains(out, "notes.txt") {
		t.Fatalf("ls: %q", out)
	}
	if out := must("", "ls", "docs/no"); !strings.Contains(out, "notes.txt") || strings.Contains(out, "big.bin") {
		t.Fatalf("ls prefix: %q", out)
	}
	must("", "rm", "docs/big.bin")
	fails(1, "not found", "cat", "docs/big.bin")

	// Bad input: clear errors, usage errors exit 2.
	fails(2, "unknown flag", "ls", "docs", "--bogus")
	fails(2, "expected SPACE/KEY", "cat", "docs")
	fails(2, "version id", "cat", "docs/notes.txt", "--version", "zz")
	fails(1, "bad space name", "space", "create", "Bad_Name")
	fails(1, "key too long", "put", "docs/"+strings.Repeat("k", 1025), src)
	fails(1, "space not found", "ls", "nosuchspace")
	fails(1, "not empty", "space", "rm", "docs")

	// The shell: FilelogKV's PUT/GET/DEL, case-insensitive, and verbs.
	out = must("PUT k1 hello world\nget k1\nDel k1\nGET k1\nls shell\nspace ls\n", "shell")
	for _, want := range []string{"OK ", "hello world", "(not found)", "docs"} {
		if !strings.Contains(out, want) {
			t.Fatalf("shell output lacks %q:\n%s", want, out)
		}
	}

	// Replay a trace.
	trace := filepath.Join(dir, "trace.txt")
	os.WriteFile(trace, []byte("PUT 1 AAAAA\nGET 1\nput 2 BB B\nDEL 1\nGET 1\n"), 0o644)
	out = must("", "replay", trace)
	if !strings.Contains(out, "5 requests") || !strings.Contains(out, "1 GETs found nothing") || !strings.Contains(out, "p99") {
		t.Fatalf("replay: %s", out)
	}
	if out := must("", "cat", "replay/2"); out != "BB B" {
		t.Fatalf("replayed value: %q", out)
	}
	os.WriteFile(trace, []byte("PUT 9 x\nFROB 2\n"), 0o644)
	fails(2, "trace.txt:2", "replay", trace)
	if _, _, code := run(t, bin, srv, "", "cat", "replay/9"); code == 0 {
		t.Fatal("a malformed trace sent requests")
	}

	// bench: a short run with JSON output.
	out = must("", "bench", "--op", "mixed", "--duration", "300ms", "--concurrency", "4", "--keys", "20", "--json")
	if !strings.Contains(out, `"ops_per_sec"`) || !strings.Contains(out, `"p999_ms"`) {
		t.Fatalf("bench --json: %s", out)
	}
}

// TestSIGTERM checks that SIGTERM stops the server cleanly (exit 0) and
// that a restart serves what was written before.
func TestSIGTERM(t *testing.T) {
	bin := cairnBinary(t)
	dir := t.TempDir()
	ports := [5]int{testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t)}
	srv := startServer(t, bin, dir, ports)
	run(t, bin, srv, "", "space", "create", "term")
	if _, errs, code := run(t, bin, srv, "kept", "put", "term/k", "-"); code != 0 {
		t.Fatal(errs)
	}
	srv.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-srv.exited:
		if srv.waitErr != nil {
			t.Fatalf("server exited with %v after SIGTERM; log:\n%s", srv.waitErr, srv.log)
		}
	case <-time.After(20 * time.Second):
		srv.kill()
		t.Fatalf("server did not stop within 20s of SIGTERM; log:\n%s", srv.log)
	}
	if strings.Contains(srv.log.String(), "level=ERROR") {
		t.Fatalf("clean shutdown logged an error:\n%s", srv.log)
	}
	srv = startServer(t, bin, dir, ports)
	defer srv.kill()
	if out, errs, code := run(t, bin, srv, "", "cat", "term/k"); code != 0 || out != "kept" {
		t.Fatalf("after restart: %q %s", out, errs)
	}
}
