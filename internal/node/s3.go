package node

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/cairn-db/cairn/internal/meta"
	"github.com/cairn-db/cairn/internal/s3"
	"github.com/cairn-db/cairn/internal/wire"
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

// Secret implements s3.Credentials: the root key, or a key made with
// `cairn key create` as this node last read them (refreshKeys).
func (n *Node) Secret(accessKey string) (string, bool) {
	if accessKey == n.rootKey.Access {
		return n.rootKey.Secret, true
	}
	if m := n.accessKeys.Load(); m != nil {
		if k, ok := (*m)[accessKey]; ok {
			return k.Secret, true
		}
	}
	return "", false
}

// Allowed implements s3.Permissions: the root key may do anything, other
// keys what their grants say.
func (n *Node) Allowed(accessKey, bucket, need string) bool {
	if accessKey == n.rootKey.Access {
		return true
	}
	if m := n.accessKeys.Load(); m != nil {
		if k, ok := (*m)[accessKey]; ok {
			return k.Allows(bucket, need)
		}
	}
	return false
}

// refreshKeys reads the access keys from the meta service: a key made or
// removed on any node takes effect here within a second.
func (n *Node) refreshKeys(ctx context.Context) {
	keys, err := n.catalog.ListKeys(ctx)
	if err != nil {
		return
	}
	m := make(map[string]meta.Key, len(keys))
	for _, k := range keys {
		m[k.Access] = k
	}
	n.accessKeys.Store(&m)
}

// CreateKey implements wire.KeyService.
func (n *Node) CreateKey(ctx context.Context, ks wire.KeySpec) (wire.KeySpec, error) {
	made := meta.NewAccessKey()
	k := meta.Key{AccessKey: meta.AccessKey{Access: cmp.Or(ks.Access, made.Access), Secret: cmp.Or(ks.Secret, made.Secret)}, Grants: ks.Grants}
	if k.Access == n.rootKey.Access {
		return wire.KeySpec{}, wire.Errorf(wire.CodeInvalidArgument, "%q is the root key", k.Access)
	}
	if err := meta.ValidateKey(k); err != nil {
		return wire.KeySpec{}, wire.Errorf(wire.CodeInvalidArgument, "%v", err)
	}
	k, err := n.catalog.CreateKey(ctx, k)
	if errors.Is(err, meta.ErrKeyExists) {
		return wire.KeySpec{}, wire.Errorf(wire.CodeInvalidArgument, "access key %q exists", ks.Access)
	}
	if err != nil {
		return wire.KeySpec{}, err
	}
	n.refreshKeys(ctx)
	return wire.KeySpec{Access: k.Access, Secret: k.Secret, Grants: k.Grants, Created: k.Created.UnixNano()}, nil
}

// ListKeys implements wire.KeyService; secrets are left out.
func (n *Node) ListKeys(ctx context.Context) ([]wire.KeySpec, error) {
	keys, err := n.catalog.ListKeys(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]wire.KeySpec, 0, len(keys))
	for _, k := range keys {
		out = append(out, wire.KeySpec{Access: k.Access, Grants: k.Grants, Created: k.Created.UnixNano()})
	}
	return out, nil
}

// DeleteKey implements wire.KeyService.
func (n *Node) DeleteKey(ctx context.Context, access string) error {
	err := n.catalog.DeleteKey(ctx, access)
	if errors.Is(err, meta.ErrKeyNotFound) {
		return wire.Errorf(wire.CodeNotFound, "no access key %q", access)
	}
	if err == nil {
		n.refreshKeys(ctx)
	}
	return err
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
