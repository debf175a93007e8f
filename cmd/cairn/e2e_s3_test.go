package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/e2es3"
	"github.com/cairn-db/cairn/internal/testenv"
)

// The end-to-end S3 run: scripts/e2e-s3.sh drives Debian's awscli, rclone,
// s3cmd and boto3 against a server. deploy/s3_test.go runs the same script
// against the 3-node Docker cluster.

var e2eS3Script = e2es3.Script("../..")

// TestE2ES3Clients runs scripts/e2e-s3.sh against one server.
func TestE2ES3Clients(t *testing.T) {
	if testing.Short() {
		t.Skip("the end-to-end S3 run takes about a minute")
	}
	e2es3.RequireClients(t, e2eS3Script)
	bin := cairnBinary(t)
	ports := [5]int{testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t)}
	srv := startServer(t, bin, t.TempDir(), ports, "--root-access-key", e2es3.AccessKey, "--root-secret-key", e2es3.SecretKey)
	defer func() {
		srv.kill()
		if t.Failed() {
			t.Logf("server log:\n%s", srv.log)
		}
	}()
	start := time.Now()
	if err := e2es3.Run(t, 6*time.Minute, e2eS3Script, fmt.Sprintf("http://127.0.0.1:%d", srv.http)); err != nil {
		t.Errorf("scripts/e2e-s3.sh: %v (its output is above)", err)
	}
	t.Logf("e2e-s3.sh took %v", time.Since(start).Round(time.Second))
}
