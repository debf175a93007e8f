package node

import (
	"context"
	"net/http"

	"github.com/cairn-db/cairn/internal/s3"
)

// s3Handler is the S3 API over this node.
func (n *Node) s3Handler() http.Handler {
	n.s3api = s3.New(s3.Config{
		Service: n, Credentials: n.Keyring(), Region: n.cfg.S3Region, Domains: n.cfg.S3Domains, Logger: n.log,
	})
	return n.s3api
}

// sweepUploads aborts S3 multipart uploads older than MultipartExpiry.
// Every node sweeps every bucket: removing an upload twice is harmless.
func (n *Node) sweepUploads(ctx context.Context) {
	aborted, err := n.s3api.SweepUploads(ctx, n.cfg.Clock().Add(-n.cfg.MultipartExpiry))
	if err != nil && ctx.Err() == nil {
		n.log.Warn("sweeping expired multipart uploads", "err", err)
	}
	if aborted > 0 {
		n.log.Info("aborted expired multipart uploads", "count", aborted)
	}
}
