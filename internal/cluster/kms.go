package cluster

import (
	"context"
	"errors"
	"sync"

	"github.com/cairn-db/cairn/internal/admin"
	"github.com/cairn-db/cairn/internal/meta"
	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/sse"
)

// The cluster's KMS: named keys whose material is made here, sealed under
// the cluster key in the meta service, and never leaves the cluster. S3's
// SSE-KMS wraps each object's data key under one of them.

// kmsCache keeps the material of the KMS keys this node has used. A key
// is never changed once made, so an entry stays valid.
type kmsCache struct {
	mu sync.Mutex
	m  map[string][]byte
}

// CreateKMSKey implements admin.KMSService.
func (n *Node) CreateKMSKey(ctx context.Context, id string) (admin.KMSKeySpec, error) {
	if !meta.ValidKMSKeyID(id) {
		return admin.KMSKeySpec{}, object.Errorf(object.InvalidArgument, "%q is not a valid KMS key id: 1 to 256 letters, digits and _.:/+=@-, starting with a letter or digit", id)
	}
	k, err := n.catalog.CreateKMSKey(ctx, id, sse.NewKey())
	if errors.Is(err, meta.ErrKMSKeyExists) {
		return admin.KMSKeySpec{}, object.Errorf(object.InvalidArgument, "KMS key %q exists", id)
	}
	if err != nil {
		return admin.KMSKeySpec{}, err
	}
	return admin.KMSKeySpec{ID: k.ID, Created: k.Created.UnixNano()}, nil
}

// ListKMSKeys implements admin.KMSService.
func (n *Node) ListKMSKeys(ctx context.Context) ([]admin.KMSKeySpec, error) {
	keys, err := n.catalog.ListKMSKeys(ctx)
	out := make([]admin.KMSKeySpec, 0, len(keys))
	for _, k := range keys {
		if meta.ValidKMSKeyID(k.ID) { // the cluster's own (SSE-S3's) are not listed
			out = append(out, admin.KMSKeySpec{ID: k.ID, Created: k.Created.UnixNano()})
		}
	}
	return out, err
}

// ErrNoKMSKey is KMSKey's error for an id no key has.
var ErrNoKMSKey = meta.ErrKMSKeyNotFound

// KMSKey returns the material of KMS key id (ErrNoKMSKey if there is no
// such key).
func (n *Node) KMSKey(ctx context.Context, id string) ([]byte, error) {
	c := &n.kms
	c.mu.Lock()
	m, ok := c.m[id]
	c.mu.Unlock()
	if ok {
		return m, nil
	}
	k, err := n.catalog.GetKMSKey(ctx, id)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string][]byte{}
	}
	c.m[id] = k.Material
	c.mu.Unlock()
	return k.Material, nil
}

// ServerKMSKey returns the material of the KMS key SSE-S3 wraps under,
// making it the first time (a node that loses the race to make it reads
// the winner's).
func (n *Node) ServerKMSKey(ctx context.Context) ([]byte, error) {
	m, err := n.KMSKey(ctx, meta.ServerKMSKeyID)
	if !errors.Is(err, meta.ErrKMSKeyNotFound) {
		return m, err
	}
	if _, err := n.catalog.CreateKMSKey(ctx, meta.ServerKMSKeyID, sse.NewKey()); err != nil && !errors.Is(err, meta.ErrKMSKeyExists) {
		return nil, err
	}
	return n.KMSKey(ctx, meta.ServerKMSKeyID)
}

// SecretBox seals and opens values under the cluster key: what S3's
// SSE-S3 wraps data keys with.
func (n *Node) SecretBox() meta.SecretBox { return keyBox{n} }
