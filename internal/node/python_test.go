package node

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/cairn-db/cairn/internal/cluster"
	"github.com/cairn-db/cairn/internal/meta"
)

// debianPython is the python3 whose packages Debian installs (not one of
// pyenv's or a virtualenv's on the PATH before it).
const debianPython = "/usr/bin/python3"

// pytest returns Debian's python3 if it has pytest, or skips the test
// (scripts/test.sh installs python3-pytest and sets CAIRN_REQUIRE_PYTEST:
// then a missing pytest fails).
func pytest(t *testing.T) string {
	t.Helper()
	if err := exec.Command(debianPython, "-c", "import pytest").Run(); err != nil {
		if os.Getenv("CAIRN_REQUIRE_PYTEST") != "" {
			t.Fatalf("%s has no pytest (CAIRN_REQUIRE_PYTEST is set): %v", debianPython, err)
		}
		t.Skip("no pytest for " + debianPython + " (apt-get install python3-pytest)")
	}
	return debianPython
}

// TestPythonSDK runs the Python SDK's tests (python/tests, with Debian's
// pytest) against a node: the client over the S3 API and the JSON API,
// transparent persistence and the watch; then the example service's.
func TestPythonSDK(t *testing.T) {
	py := pytest(t)
	n, err := Open(context.Background(), Config{
		Config: cluster.Config{DataDir: "data", FS: vfs.NewMem(), Meta: meta.NewMemStore(time.Now),
			MetaPort: -1, PeerPort: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			RootAccessKey: "root", RootSecretKey: "rootsecret123456"},
		NativePort: -1, HTTPPort: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	n.Serve()
	// The SDK's tests, then the example service's (examples/bookstore).
	for _, dir := range []string{"../../python/tests", "../../examples/bookstore"} {
		abs, err := filepath.Abs(dir)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(py, "-m", "pytest", "-q", "-p", "no:cacheprovider", ".")
		cmd.Dir = abs
		cmd.Env = append(os.Environ(), "CAIRN_ENDPOINT=http://"+n.HTTPAddr(), "CAIRN_ACCESS_KEY=root",
			"CAIRN_SECRET_KEY=rootsecret123456", "CAIRN_PROFILE=", "CAIRN_CREDENTIALS_FILE="+filepath.Join(t.TempDir(), "none"),
			"PYTHONDONTWRITEBYTECODE=1")
		out, err := cmd.CombinedOutput()
		t.Logf("pytest %s:\n%s", dir, out)
		if err != nil {
			t.Errorf("%s failed: %v", dir, err)
		}
	}
}
