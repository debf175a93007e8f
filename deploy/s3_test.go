package deploy

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/e2es3"
)

// The end-to-end S3 run of scripts/e2e-s3.sh (Debian's awscli, rclone,
// s3cmd and boto3) against the 3-node Docker cluster; cmd/cairn runs it
// against a single server.

var s3Script = e2es3.Script("..")

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
	e2es3.RequireClients(t, s3Script)
	c := newDockerCluster(t, 3) // with the root key e2es3's (main_test.go)
	var endpoints []string
	for _, nd := range c.nodes {
		ep := fmt.Sprintf("http://%s:7080", nd.ip)
		waitHealthy(t, ep)
		endpoints = append(endpoints, ep)
	}
	start := time.Now()
	if err := e2es3.Run(t, 8*time.Minute, s3Script, endpoints[0], endpoints[2]); err != nil {
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
