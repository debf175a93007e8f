// Package deploy holds the Docker image and compose files; its test builds
// the image and runs it.
package deploy

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// docker runs the docker CLI and returns its standard output.
func docker(t testing.TB, stdin []byte, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("docker", args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("docker %s: %v: %s", strings.Join(args, " "), err, errb.String())
	}
	return out.String(), nil
}

func mustDocker(t testing.TB, stdin []byte, args ...string) string {
	t.Helper()
	out, err := docker(t, stdin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// requireDocker skips the test without docker, unless CAIRN_REQUIRE_DOCKER
// is set (scripts/test.sh sets it), which makes that a failure.
func requireDocker(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("docker"); err != nil {
		if os.Getenv("CAIRN_REQUIRE_DOCKER") != "" {
			t.Fatal("docker is not installed")
		}
		t.Skip("docker is not installed (scripts/test.sh requires it)")
	}
}

// waitCLI runs a CLI command in the container until it succeeds.
func waitCLI(t *testing.T, name string, args ...string) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, err := docker(t, nil, append([]string{"exec", name, "/cairn"}, args...)...)
		if err == nil {
			return out
		}
		if time.Now().After(deadline) {
			logs, _ := docker(t, nil, "logs", name)
			t.Fatalf("%v\ncontainer log:\n%s", err, logs)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestImage builds the FROM-scratch image, runs a node in a container with
// a named volume, writes through the CLI inside it, kills the container
// (SIGKILL) and starts it again: the acknowledged object must still be there.
func TestImage(t *testing.T) {
	tag := testImage(t)
	name := fmt.Sprintf("cairn-image-test-%d", os.Getpid())
	vol := name + "-data"
	t.Cleanup(func() {
		docker(t, nil, "rm", "-f", name)
		docker(t, nil, "volume", "rm", "-f", vol)
	})
	// Nothing but the binary is in the image.
	if out := mustDocker(t, nil, "image", "inspect", "--format", "{{json .Config.Entrypoint}} {{len .RootFS.Layers}}", tag); strings.TrimSpace(out) != `["/cairn"] 1` {
		t.Fatalf("image entrypoint and layers: %s", out)
	}
	mustDocker(t, nil, "run", "-d", "--name", name, "--hostname", "node1", "-v", vol+":/data", tag)
	waitCLI(t, name, "space", "create", "images")
	body := []byte("written inside a container\n")
	mustDocker(t, body, "exec", "-i", name, "/cairn", "put", "images/hello.txt", "-")

	mustDocker(t, nil, "kill", "--signal", "KILL", name)
	mustDocker(t, nil, "start", name)
	if got := waitCLI(t, name, "cat", "images/hello.txt"); got != string(body) {
		t.Fatalf("after kill -9 and restart: %q, want %q", got, body)
	}
}
