package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cairn-db/cairn/internal/admin"
	"github.com/cairn-db/cairn/internal/auth"
	"github.com/cairn-db/cairn/internal/meta"
	"github.com/cairn-db/cairn/internal/object"
)

// Access keys: the root key (configured, or the cluster's saved one) and
// the keys made with `cairn key create`, kept in n.keys, the keyring that
// the S3 API and the native protocol check requests against.

// loadRootKey finds the root key: the configured one, or the cluster's
// saved one (made now if this is the cluster's first start, and then
// handed to cfg.OnRootKey to be shown once).
func (n *Node) loadRootKey(ctx context.Context) error {
	if n.cfg.RootAccessKey != "" {
		n.rootKey.Store(&auth.Key{Access: n.cfg.RootAccessKey, Secret: n.cfg.RootSecretKey, ClusterAdmin: true})
		return nil
	}
	k, created, err := n.catalog.RootKey(ctx)
	if err != nil {
		return fmt.Errorf("read the root key: %w", err)
	}
	n.rootKey.Store(&k)
	if created && n.cfg.OnRootKey != nil {
		n.cfg.OnRootKey(k)
	}
	return nil
}

// refreshKeys reads the access keys (and the saved root key) from the
// meta service: a key made, removed or rotated on any node takes effect
// here within a second.
func (n *Node) refreshKeys(ctx context.Context) error {
	if n.cfg.RootAccessKey == "" {
		root, err := n.catalog.GetRootKey(ctx)
		if err != nil {
			return err
		}
		n.rootKey.Store(&root)
	}
	keys, err := n.catalog.ListKeys(ctx)
	if err != nil && !errors.Is(err, meta.ErrBadRecords) {
		return err // the meta service did not answer: the keys in force stay
	}
	// The keys read go in force even if some records could not be read
	// (those keys stop working): a bad record must not freeze removals.
	n.keys.Set(append([]auth.Key{*n.rootKey.Load()}, keys...))
	if err != nil {
		msg := err.Error()
		if old := n.keysErr.Swap(&msg); old == nil || *old != msg {
			n.log.Warn("some access keys could not be read; they do not work until they can be", "err", err)
		}
	} else {
		n.keysErr.Store(nil)
	}
	return nil
}

// Keys is the node's keyring.
func (n *Node) Keys() *auth.Keyring { return &n.keys }

// RootKey returns the root key.
func (n *Node) RootKey() auth.Key { return *n.rootKey.Load() }

// CreateKey implements admin.KeyService.
func (n *Node) CreateKey(ctx context.Context, ks admin.KeySpec) (admin.KeySpec, error) {
	made := auth.NewKey()
	k := auth.Key{Access: cmp.Or(ks.Access, made.Access), Secret: cmp.Or(ks.Secret, made.Secret), Grants: ks.Grants, ClusterAdmin: ks.ClusterAdmin}
	if k.Access == n.RootKey().Access {
		return admin.KeySpec{}, object.Errorf(object.InvalidArgument, "%q is the root key", k.Access)
	}
	if err := k.Validate(meta.ValidSpaceName); err != nil {
		return admin.KeySpec{}, object.Errorf(object.InvalidArgument, "%v", err)
	}
	k, err := n.catalog.CreateKey(ctx, k)
	if errors.Is(err, meta.ErrKeyExists) {
		return admin.KeySpec{}, object.Errorf(object.InvalidArgument, "access key %q exists", ks.Access)
	}
	if err != nil {
		return admin.KeySpec{}, err
	}
	_ = n.refreshKeys(ctx)
	return admin.KeySpec{Access: k.Access, Secret: k.Secret, Grants: k.Grants, ClusterAdmin: k.ClusterAdmin, Created: k.Created.UnixNano()}, nil
}

// ListKeys implements admin.KeyService; secrets are left out.
func (n *Node) ListKeys(ctx context.Context) ([]admin.KeySpec, error) {
	keys, err := n.catalog.ListKeys(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]admin.KeySpec, 0, len(keys))
	for _, k := range keys {
		out = append(out, admin.KeySpec{Access: k.Access, Grants: k.Grants, ClusterAdmin: k.ClusterAdmin, Created: k.Created.UnixNano()})
	}
	return out, nil
}

// DeleteKey implements admin.KeyService.
func (n *Node) DeleteKey(ctx context.Context, access string) error {
	err := n.catalog.DeleteKey(ctx, access)
	if errors.Is(err, meta.ErrKeyNotFound) {
		return object.Errorf(object.NotFound, "no access key %q", access)
	}
	if err == nil {
		_ = n.refreshKeys(ctx)
	}
	return err
}

// RotateRootKey implements admin.KeyRotator: a new saved root key, in
// force on every node within a second.
func (n *Node) RotateRootKey(ctx context.Context) (admin.KeySpec, error) {
	if n.cfg.RootAccessKey != "" {
		return admin.KeySpec{}, object.Errorf(object.InvalidArgument, "this cluster's root key is given in the nodes' configuration (--root-access-key): restart them with another")
	}
	k, err := n.catalog.RotateRootKey(ctx)
	if err != nil {
		return admin.KeySpec{}, err
	}
	if err := n.refreshKeys(ctx); err != nil {
		return admin.KeySpec{}, err
	}
	n.log.Info("root key rotated", "access", k.Access)
	return admin.KeySpec{Access: k.Access, Secret: k.Secret, ClusterAdmin: true}, nil
}

// Join tokens (admin.TokenService).

// defaultTokenTTL is how long a token made without a TTL is valid.
const defaultTokenTTL = time.Hour

// CreateToken implements admin.TokenService: a new token, shown once.
func (n *Node) CreateToken(ctx context.Context, ts admin.TokenSpec) (admin.TokenSpec, error) {
	ttl := time.Duration(ts.TTLSeconds) * time.Second
	if ts.TTLSeconds == 0 {
		ttl = defaultTokenTTL
	}
	uses := cmp.Or(ts.Uses, 1)
	if ttl <= 0 || ttl > 30*24*time.Hour || uses < 1 || uses > 1000 {
		return admin.TokenSpec{}, object.Errorf(object.InvalidArgument, "a join token lasts from 1s to 30 days and admits 1 to 1000 nodes (asked: %v, %d)", ttl, uses)
	}
	tok := auth.NewJoinToken()
	now := n.cfg.Clock()
	t := meta.JoinToken{ID: tok.ID, Secret: tok.Secret, Created: now, Expires: now.Add(ttl), Uses: uses}
	if err := n.catalog.CreateToken(ctx, t); err != nil {
		return admin.TokenSpec{}, err
	}
	n.log.Info("join token made", "token", auth.DescribeToken(tok.ID), "expires", t.Expires.UTC().Format(time.RFC3339), "uses", uses)
	return admin.TokenSpec{Token: tok.String(), ID: tok.ID, Uses: uses, Expires: t.Expires.UnixNano(), Created: now.UnixNano()}, nil
}

// ListTokens implements admin.TokenService; secrets are left out.
func (n *Node) ListTokens(ctx context.Context) ([]admin.TokenSpec, error) {
	ts, err := n.catalog.ListTokens(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]admin.TokenSpec, 0, len(ts))
	for _, t := range ts {
		out = append(out, admin.TokenSpec{ID: t.ID, Uses: t.Uses, Expires: t.Expires.UnixNano(), Created: t.Created.UnixNano()})
	}
	return out, nil
}

// RevokeToken implements admin.TokenService.
func (n *Node) RevokeToken(ctx context.Context, id string) error {
	if err := n.catalog.DeleteToken(ctx, id); errors.Is(err, meta.ErrTokenInvalid) {
		return object.Errorf(object.NotFound, "no join token %s", id)
	} else if err != nil {
		return err
	}
	n.log.Info("join token revoked", "token", auth.DescribeToken(id))
	return nil
}

// registerBootstrapToken saves Config.BootstrapToken at a new cluster's
// first start, so that the other nodes of a deploy file that starts them
// all at once can join with it: any number of nodes may, until it expires
// BootstrapTokenTTL later. Later starts do not register it again.
func (n *Node) registerBootstrapToken(ctx context.Context) error {
	tok, err := auth.ParseJoinToken(n.cfg.BootstrapToken)
	if err != nil {
		return fmt.Errorf("the bootstrap join token: %w", err)
	}
	now := n.cfg.Clock()
	if err := n.catalog.CreateToken(ctx, meta.JoinToken{ID: tok.ID, Secret: tok.Secret, Created: now, Expires: now.Add(n.cfg.BootstrapTokenTTL), Uses: -1}); err != nil {
		return err
	}
	n.log.Info("bootstrap join token registered", "token", auth.DescribeToken(tok.ID), "expires", now.Add(n.cfg.BootstrapTokenTTL).UTC().Format(time.RFC3339))
	return nil
}
