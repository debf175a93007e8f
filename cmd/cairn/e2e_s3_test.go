package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The end-to-end S3 run: scripts/e2e-s3.sh drives Debian's awscli, rclone,
// s3cmd and boto3 against a server. deploy/s3_test.go runs the same script
// against the 3-node Docker cluster.

const (
	e2eS3Script    = "../../scripts/e2e-s3.sh"
	e2eS3AccessKey = "e2e-root"
	e2eS3SecretKey = "e2e-root-secret-key-0123456789"
)

// requireS3Clients skips the test when a client the script drives is not
// installed, unless CAIRN_REQUIRE_S3_CLIENTS is set (scripts/test.sh sets
// it and installs them), which makes that a failure.
func requireS3Clients(t *testing.T) {
	t.Helper()
	out, err := exec.Command(e2eS3Script, "--check-clients").CombinedOutput()
	if err == nil {
		return
	}
	if os.Getenv("CAIRN_REQUIRE_S3_CLIENTS") != "" {
		t.Fatalf("S3 clients missing (CAIRN_REQUIRE_S3_CLIENTS is set): %v\n%s", err, out)
	}
	t.Skipf("S3 clients missing (scripts/test.sh installs them): %s", bytes.TrimSpace(out))
}

// TestE2ES3Clients runs scripts/e2e-s3.sh against one server.
func TestE2ES3Clients(t *testing.T) {
	if testing.Short() {
		t.Skip("the end-to-end S3 run takes about a minute")
	}
	requireS3Clients(t)
	bin := cairnBinary(t)
	ports := [5]int{freePort(t), freePort(t), freePort(t), freePort(t), freePort(t)}
	srv := startServer(t, bin, t.TempDir(), ports, "--root-access-key", e2eS3AccessKey, "--root-secret-key", e2eS3SecretKey)
	defer func() {
		srv.kill()
		if t.Failed() {
			t.Logf("server log:\n%s", srv.log)
		}
	}()
	start := time.Now()
	if err := runE2ES3(t, 6*time.Minute, fmt.Sprintf("http://127.0.0.1:%d", srv.http)); err != nil {
		t.Errorf("scripts/e2e-s3.sh: %v (its output is above)", err)
	}
	t.Logf("e2e-s3.sh took %v", time.Since(start).Round(time.Second))
}

// runE2ES3 runs the script with args (ENDPOINT [OTHER_ENDPOINT...]; the
// root key is added), each line of its output going to t.Log as it comes,
// so a failed run shows everything and -v shows it live. The script and
// its clients run in a process group of their own, which is stopped (the
// script then removes its bucket) when limit is reached.
func runE2ES3(t *testing.T, limit time.Duration, endpoint string, others ...string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, e2eS3Script, append([]string{endpoint, e2eS3AccessKey, e2eS3SecretKey}, others...)...)
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
