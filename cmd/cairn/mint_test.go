package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// The S3 conformance run with minio-go's own functional suite (the "mint"
// suite: functional_tests.go in the minio-go/v7 module this module already
// requires). The file is built from the module cache at test time, never
// copied into this tree: its //go:build mint line is dropped (with the tag
// set the module's directory would hold two packages) and it is built as a
// main package in a scratch module that requires exactly this module's
// versions. It runs in full mode over HTTPS with the KMS tests on, against
// one server, and every record it prints is kept in the test log.
//
// testdata/mint-allow.txt lists the tests that pass. The list may only
// grow: a listed test that does not pass fails this test, and a test that
// passes but is not listed is named so it can be added.

const mintAllowList = "testdata/mint-allow.txt"

// mintRecord is one line of the suite's JSON log.
type mintRecord struct {
	Name     string         `json:"name"`
	Function string         `json:"function"`
	Status   string         `json:"status"`
	Message  string         `json:"message"`
	Error    string         `json:"error"`
	Alert    string         `json:"alert"`
	Args     map[string]any `json:"args"`
}

func TestMintSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("the minio-go functional suite takes about a minute")
	}
	suite := buildMintSuite(t)
	bin := cairnBinary(t)

	tdir := t.TempDir()
	certFile, keyFile, _ := writeServerCert(t, tdir)
	const access, secret = "mint-root", "mint-root-secret-key-0123456789"
	srv := startServer(t, bin, filepath.Join(tdir, "data"), freePorts(t),
		"--root-access-key", access, "--root-secret-key", secret, "--tls-cert", certFile, "--tls-key", keyFile)
	defer func() {
		srv.kill()
		if t.Failed() {
			t.Logf("server log:\n%s", srv.log)
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, suite)
	cmd.Dir = t.TempDir() // the suite writes its data files into the working directory
	cmd.Env = append(os.Environ(),
		fmt.Sprintf("SERVER_ENDPOINT=127.0.0.1:%d", srv.http),
		"ACCESS_KEY="+access, "SECRET_KEY="+secret,
		"ENABLE_HTTPS=1", "SKIP_CERT_VALIDATION=1", "ENABLE_KMS=1",
		"MINT_MODE=full", "RUN_ON_FAIL=1", "MINT_DATA_DIR=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	out, err := cmd.Output()
	t.Logf("the suite ran for %v", time.Since(start).Round(time.Second))
	if err != nil {
		t.Errorf("the suite exited with %v; its stderr:\n%s", err, stderr.String())
	}

	status, records := mintResults(t, out)
	allowed := readMintAllowList(t)
	counts := map[string]int{}
	var names []string
	for name, s := range status {
		counts[s]++
		names = append(names, name)
	}
	slices.Sort(names)
	t.Logf("%d tests: %d PASS, %d FAIL, %d NA (%d records)", len(status), counts["PASS"], counts["FAIL"], counts["NA"], records)
	var newPasses []string
	for _, name := range names {
		t.Logf("%-4s %s", status[name], name)
		if status[name] == "PASS" && !allowed[name] {
			newPasses = append(newPasses, name)
		}
	}
	for name := range allowed {
		if status[name] != "PASS" {
			t.Errorf("%s is on the allow-list but did not pass (%s); its records are in the log above", name, cmp.Or(status[name], "not run"))
		}
	}
	slices.Sort(newPasses)
	if len(newPasses) > 0 {
		t.Logf("passing now and not on %s (add them):\n%s", mintAllowList, strings.Join(newPasses, "\n"))
	}
}

// mintResults reads the suite's log: a test fails if any of its records
// says FAIL, passes if none does and one says PASS, else is NA. Every
// record that is not a PASS goes to the test log whole.
func mintResults(t *testing.T, out []byte) (map[string]string, int) {
	t.Helper()
	status := map[string]string{}
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var r mintRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil || r.Name == "" {
			t.Logf("suite: %s", sc.Text())
			continue
		}
		n++
		name := strings.TrimPrefix(r.Name, "minio-go: ")
		if r.Status != "PASS" {
			t.Logf("record: %s", sc.Text())
		}
		switch {
		case r.Status == "FAIL" || status[name] == "FAIL":
			status[name] = "FAIL"
		case r.Status == "PASS" || status[name] == "PASS":
			status[name] = "PASS"
		default:
			status[name] = "NA"
		}
	}
	if n == 0 {
		t.Fatalf("the suite printed no records")
	}
	return status, n
}

var mintNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// readMintAllowList reads testdata/mint-allow.txt: one test name a line,
// # starts a comment.
func readMintAllowList(t *testing.T) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(mintAllowList)
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{}
	for i, line := range strings.Split(string(data), "\n") {
		line, _, _ = strings.Cut(line, "#")
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if !mintNameRE.MatchString(line) || allowed[line] {
			t.Fatalf("%s:%d: %q is not a test name, or is listed twice", mintAllowList, i+1, line)
		}
		allowed[line] = true
	}
	return allowed
}

// buildMintSuite builds functional_tests.go of the minio-go/v7 module this
// module requires into a binary, in a scratch module with this module's
// go.mod and go.sum (so the versions are exactly ours and nothing new is
// resolved).
func buildMintSuite(t *testing.T) string {
	t.Helper()
	// go mod download fetches the module if the cache lacks it, and says
	// where it is.
	out, err := exec.Command("go", "mod", "download", "-json", "github.com/minio/minio-go/v7").Output()
	if err != nil {
		t.Fatalf("go mod download github.com/minio/minio-go/v7: %v", err)
	}
	var mod struct{ Dir, Error string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		t.Fatalf("go mod download github.com/minio/minio-go/v7: %v %s", err, mod.Error)
	}
	src, err := os.ReadFile(filepath.Join(mod.Dir, "functional_tests.go"))
	if err != nil {
		t.Fatal(err)
	}
	src, ok := bytes.CutPrefix(src, []byte("//go:build mint\n"))
	if !ok {
		t.Fatal("functional_tests.go does not start with //go:build mint: the build below would not be what the suite expects")
	}
	work := t.TempDir()
	gomod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	gosum, err := os.ReadFile("../../go.sum")
	if err != nil {
		t.Fatal(err)
	}
	gomod = regexp.MustCompile(`(?m)^module .*$`).ReplaceAll(gomod, []byte("module mintsuite"))
	for name, data := range map[string][]byte{"main.go": src, "go.mod": gomod, "go.sum": gosum} {
		if err := os.WriteFile(filepath.Join(work, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(work, "mint")
	build := exec.Command("go", "build", "-mod=readonly", "-o", bin, ".")
	build.Dir = work
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the suite: %v\n%s", err, out)
	}
	return bin
}
