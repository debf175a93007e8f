// Package e2es3 runs scripts/e2e-s3.sh, the end-to-end S3 run with
// Debian's awscli, rclone, s3cmd and boto3, from Go tests: cmd/cairn runs
// it against one server, deploy against the 3-node Docker cluster.
package e2es3

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The root key the servers under test are started with.
const (
	AccessKey = "e2e-root"
	SecretKey = "e2e-root-secret-key-0123456789"
)

// Script is the path of scripts/e2e-s3.sh from a test's package directory
// in the repository (root is the relative path to the repository root).
func Script(root string) string { return filepath.Join(root, "scripts", "e2e-s3.sh") }

// RequireClients skips the test when a client the script drives is not
// installed, unless CAIRN_REQUIRE_S3_CLIENTS is set (scripts/test.sh sets
// it and installs them), which makes that a failure.
func RequireClients(t *testing.T, script string) {
	t.Helper()
	out, err := exec.Command(script, "--check-clients").CombinedOutput()
	if err == nil {
		return
	}
	if os.Getenv("CAIRN_REQUIRE_S3_CLIENTS") != "" {
		t.Fatalf("S3 clients missing (CAIRN_REQUIRE_S3_CLIENTS is set): %v\n%s", err, out)
	}
	t.Skipf("S3 clients missing (scripts/test.sh installs them): %s", bytes.TrimSpace(out))
}

// Run runs script against endpoint (ENDPOINT [OTHER_ENDPOINT...]; the root
// key is added), each line of its output going to t.Log as it comes, so a
// failed run shows everything and -v shows it live. The script and its
// clients run in a process group of their own, which is stopped (the
// script then removes its bucket) when limit is reached.
func Run(t *testing.T, limit time.Duration, script, endpoint string, others ...string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, script, append([]string{endpoint, AccessKey, SecretKey}, others...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	out := &lineLogger{t: t}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return err
	}
	err := cmd.Wait()
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // anything left of the group
	out.close()
	if ctx.Err() != nil {
		return fmt.Errorf("stopped after %v: %v", limit, err)
	}
	return err
}

// lineLogger hands each complete line written to it to t.Log.
type lineLogger struct {
	mu     sync.Mutex
	t      *testing.T
	buf    []byte
	closed bool
}

func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return len(p), nil
	}
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		l.t.Log(string(l.buf[:i]))
		l.buf = l.buf[i+1:]
	}
	return len(p), nil
}

// close logs an unfinished last line; later writes are dropped (the test
// may be over).
func (l *lineLogger) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) > 0 {
		l.t.Log(string(l.buf))
	}
	l.closed = true
}
