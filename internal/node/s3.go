package node

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/cairn-db/cairn/internal/meta"
	"github.com/cairn-db/cairn/internal/s3"
)

// loadRootKey sets the S3 root key: the configured one, or the cluster's
// saved one (made now if this is the cluster's first start, and then
// handed to cfg.OnRootKey to be shown once).
func (n *Node) loadRootKey(ctx context.Context) error {
	if n.cfg.RootAccessKey != "" {
		n.rootKey = meta.AccessKey{Access: n.cfg.RootAccessKey, Secret: n.cfg.RootSecretKey}
		return nil
	}
	k, created, err := n.catalog.RootKey(ctx)
	if err != nil {
		return fmt.Errorf("read the S3 root key: %w", err)
	}
	n.rootKey = k
	if created && n.cfg.OnRootKey != nil {
		n.cfg.OnRootKey(k)
	}
	return nil
}

// Secret implements s3.Credentials.
func (n *Node) Secret(accessKey string) (string, bool) {
	if accessKey == n.rootKey.Access {
		return n.rootKey.Secret, true
	}
	return "", false
}

// RootKey returns the S3 root key.
func (n *Node) RootKey() meta.AccessKey { return n.rootKey }

// s3Handler is the S3 API over this node.
func (n *Node) s3Handler() http.Handler {
	n.s3api = s3.New(s3.Config{
		Service: n, Credentials: n, Region: n.cfg.S3Region, Domains: n.cfg.S3Domains, Logger: n.log,
	})
	return n.s3api
}

// sweepUploads aborts S3 multipart uploads older than MultipartExpiry.
// Every node sweeps every bucket: removing an upload twice is harmless.
func (n *Node) sweepUploads(ctx context.Context) {
	aborted, err := n.s3api.SweepUploads(ctx, time.Now().Add(-n.cfg.MultipartExpiry))
	if err != nil && ctx.Err() == nil {
		n.log.Warn("sweeping expired multipart uploads", "err", err)
	}
	if aborted > 0 {
		n.log.Info("aborted expired multipart uploads", "count", aborted)
	}
}
