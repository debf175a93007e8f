package deploy

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The end-to-end S3 run of scripts/e2e-s3.sh (Debian's awscli, rclone,
// s3cmd and boto3) against the 3-node Docker cluster; cmd/cairn runs it
// against a single server.

const (
	s3Script    = "../scripts/e2e-s3.sh"
	s3AccessKey = "e2e-root"
	s3SecretKey = "e2e-root-secret-key-0123456789"
)

// requireS3Clients skips the test when a client the script drives is not
// installed, unless CAIRN_REQUIRE_S3_CLIENTS is set (scripts/test.sh sets
// it and installs them), which makes that a failure.
func requireS3Clients(t *testing.T) {
	t.Helper()
	out, err := exec.Command(s3Script, "--check-clients").CombinedOutput()
	if err == nil {
		return
	}
	if os.Getenv("CAIRN_REQUIRE_S3_CLIENTS") != "" {
		t.Fatalf("S3 clients missing (CAIRN_REQUIRE_S3_CLIENTS is set): %v\n%s", err, out)
	}
	t.Skipf("S3 clients missing (scripts/test.sh installs them): %s", bytes.TrimSpace(out))
}

// TestS3ClientsDocker3 runs the script against node 1's HTTP port, with
// node 3 as the other endpoint: objects written through node 1 (by the aws
// CLI, and boto3's 100 MiB multipart upload) are read through node 3 (aws
// cp, rclone check, boto3's ranged GETs, get-object by version), and one
// written through node 3 is read and removed through node 1.
func TestS3ClientsDocker3(t *testing.T) {
	if testing.Short() {
		t.Skip("the end-to-end S3 run on a Docker cluster takes a few minutes")
	}
	requireDocker(t)
	requireS3Clients(t)
	c := newDockerCluster(t, 3, "--root-access-key", s3AccessKey, "--root-secret-key", s3SecretKey)
	var endpoints []string
	for _, nd := range c.nodes {
		ep := fmt.Sprintf("http://%s:7080", nd.ip)
		waitHealthy(t, ep)
		endpoints = append(endpoints, ep)
	}
	start := time.Now()
	if err := runS3Script(t, 8*time.Minute, endpoints[0], endpoints[2]); err != nil {
		t.Errorf("scripts/e2e-s3.sh: %v (its output is above)", err)
	}
	t.Logf("e2e-s3.sh took %v", time.Since(start).Round(time.Second))
}

// waitHealthy waits until endpoint's /healthz answers 200.
func waitHealthy(t *testing.T, endpoint string) {
	t.Helper()
	cl := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := cl.Get(endpoint + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			err = fmt.Errorf("status %s", resp.Status)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/healthz: %v", endpoint, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// runS3Script runs the script with ENDPOINT [OTHER_ENDPOINT...] (the root
// key is added), each line of its output going to t.Log as it comes, so a
// failed run shows everything and -v shows it live. The script and its
// clients run in a process group of their own, which is stopped (the
// script then removes its bucket) when limit is reached.
func runS3Script(t *testing.T, limit time.Duration, endpoint string, others ...string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, s3Script, append([]string{endpoint, s3AccessKey, s3SecretKey}, others...)...)
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
