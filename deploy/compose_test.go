package deploy

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// compose runs docker-compose (or docker compose, where that exists) on
// compose.yaml for project p.
func compose(t *testing.T, env []string, stdin []byte, p string, args ...string) (string, error) {
	t.Helper()
	bin, pre := "docker-compose", []string{}
	if _, err := exec.LookPath(bin); err != nil {
		bin, pre = "docker", []string{"compose"}
	}
	cmd := exec.Command(bin, append(append(pre, "-f", "compose.yaml", "-p", p), args...)...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s %s: %v: %s", bin, strings.Join(args, " "), err, errb.String())
	}
	return out.String(), nil
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestCompose starts deploy/compose.yaml's three-node cluster (with a join
// token and a root key, as its comment says to), checks that all three
// nodes joined, and writes through one node and reads through the others
// with the CLI inside the containers.
func TestCompose(t *testing.T) {
	tag := testImage(t)
	p := fmt.Sprintf("cairncompose%d", os.Getpid())
	env := []string{"CAIRN_CHUNK_CACHE=268435456", "CAIRN_IMAGE=" + tag, fmt.Sprintf("CAIRN_PORT=%d", freePort(t)), fmt.Sprintf("CAIRN_HTTP_PORT=%d", freePort(t)),
		"CAIRN_TOKEN=" + joinToken, "CAIRN_ROOT_ACCESS_KEY=" + rootAccess, "CAIRN_ROOT_SECRET_KEY=" + rootSecret}
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := compose(t, env, nil, p, "logs", "--no-color")
			t.Logf("cluster logs:\n%s", logs)
		}
		compose(t, env, nil, p, "down", "-v", "-t", "1")
	})
	if _, err := compose(t, env, nil, p, "up", "-d"); err != nil {
		t.Fatal(err)
	}
	cli := func(stdin []byte, node string, args ...string) (string, error) {
		return compose(t, env, stdin, p, append([]string{"exec", "-T", node, "/cairn"}, args...)...)
	}
	deadline := time.Now().Add(120 * time.Second)
	for {
		out, err := cli(nil, "n1", "cluster", "status")
		if err == nil && strings.Count(out, " up ") >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cluster did not come up with three nodes: %s %v", out, err)
		}
		time.Sleep(time.Second)
	}
	if out, err := cli(nil, "n2", "space", "create", "composed"); err != nil {
		t.Fatalf("%s %v", out, err)
	}
	body := []byte("written through n2\n")
	if out, err := cli(body, "n2", "put", "composed/hello.txt", "-"); err != nil {
		t.Fatalf("%s %v", out, err)
	}
	for _, node := range []string{"n1", "n3"} {
		got, err := cli(nil, node, "cat", "composed/hello.txt")
		if err != nil || got != string(body) {
			t.Fatalf("cat through %s: %q %v", node, got, err)
		}
	}
}
