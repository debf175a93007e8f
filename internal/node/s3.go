package node

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/cairn-db/cairn/internal/meta"

	"github.com/cairn-db/cairn/internal/s3"
)

// s3Handler is the S3 API over this node.
func (n *Node) s3Handler() http.Handler {
	n.s3api = s3.New(s3.Config{
		Service: n, Credentials: n.Keyring(), Region: n.cfg.S3Region, Domains: n.cfg.S3Domains, Logger: n.log,
		KMS: s3KMS{n},
	})
	return n.s3api
}

// s3KMS gives the S3 API the cluster's KMS keys.
type s3KMS struct{ n *Node }

func (k s3KMS) KMSKey(ctx context.Context, id string) ([]byte, error) {
	if !meta.ValidKMSKeyID(id) {
		return nil, fmt.Errorf("%w: %q", s3.ErrNoSuchKMSKey, id)
	}
	m, err := k.n.Node.KMSKey(ctx, id)
	if errors.Is(err, meta.ErrKMSKeyNotFound) {
		return nil, fmt.Errorf("%w: %q", s3.ErrNoSuchKMSKey, id)
	}
	return m, err
}

func (k s3KMS) ServerKey(ctx context.Context) ([]byte, error) { return k.n.ServerKMSKey(ctx) }

// SweepLifecycle carries out the buckets' S3 lifecycle rules as of now
// (the node runs it every LifecycleSweep; tests call it with the time
// they choose).
func (n *Node) SweepLifecycle(ctx context.Context, now time.Time) {
	done, err := n.s3api.SweepLifecycle(ctx, now)
	if err != nil && ctx.Err() == nil {
		n.log.Warn("carrying out lifecycle rules", "err", err)
	}
	if done > 0 {
		n.log.Info("lifecycle rules expired versions and uploads", "count", done)
	}
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
