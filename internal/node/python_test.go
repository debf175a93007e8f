package node

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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

// TestPythonSDKInstalls: `pip install ./python` (offline: with Debian's
// setuptools and wheel, no build isolation) installs a package that
// imports, and leaves no build output in the tree.
func TestPythonSDKInstalls(t *testing.T) {
	py := pytest(t)
	if err := exec.Command(py, "-c", "import setuptools, wheel, pip").Run(); err != nil {
		if os.Getenv("CAIRN_REQUIRE_PYTEST") != "" {
			t.Fatalf("%s lacks pip, setuptools or wheel (scripts/test.sh installs python3-pip and python3-wheel): %v", py, err)
		}
		t.Skip("no pip, setuptools or wheel for " + py)
	}
	src, err := filepath.Abs("../../python")
	if err != nil {
		t.Fatal(err)
	}
	// Built from a copy: a build writes build/ and *.egg-info next to
	// the sources.
	work := t.TempDir()
	if out, err := exec.Command("cp", "-r", src, filepath.Join(work, "src")).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	target := filepath.Join(work, "site")
	cmd := exec.Command(py, "-m", "pip", "install", "--quiet", "--no-index", "--no-build-isolation", "--target", target, filepath.Join(work, "src"))
	cmd.Env = append(os.Environ(), "PIP_DISABLE_PIP_VERSION_CHECK=1", "PIP_ROOT_USER_ACTION=ignore")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pip install: %v\n%s", err, out)
	}
	check := exec.Command(py, "-c", "import cairn, cairn.persistent; print(cairn.__version__)")
	check.Dir, check.Env = work, append(os.Environ(), "PYTHONPATH="+target)
	out, err := check.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) == "" {
		t.Fatalf("the installed package: %v: %s", err, out)
	}
}

// TestPythonSDK runs the Python SDK's tests (python/tests, with Debian's
// pytest) against a node: the client over the S3 API and the JSON API,
// transparent persistence and the watch; then the example service's.
func TestPythonSDK(t *testing.T) {
	py := pytest(t)
	n := memNode(t, false)
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
