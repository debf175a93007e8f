package meta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cairn-db/cairn/internal/auth"
)

// keyRoot holds the root access key of a cluster that was not given one
// in its configuration.
const keyRoot = Prefix + "rootkey"

type rootKeyRecord struct {
	V      int    `json:"v"`
	Access string `json:"access"`
	Secret string `json:"secret,omitempty"` // format 1 only
	Sealed []byte `json:"sealed,omitempty"`
}

func (c *Catalog) encodeRoot(k auth.Key) ([]byte, error) {
	sealed, err := c.seal(keyRoot, k.Secret)
	if err != nil {
		return nil, err
	}
	return json.Marshal(rootKeyRecord{V: formatSealed, Access: k.Access, Sealed: sealed})
}

func (c *Catalog) decodeRoot(kv KV) (auth.Key, error) {
	var rec rootKeyRecord
	if err := json.Unmarshal(kv.Value, &rec); err != nil || rec.Access == "" {
		return auth.Key{}, fmt.Errorf("meta: root key record is damaged: %v", err)
	}
	secret, err := c.open(kv.Key, rec.V, rec.Secret, rec.Sealed)
	if err != nil {
		return auth.Key{}, err
	}
	if secret == "" {
		return auth.Key{}, errors.New("meta: root key record has no secret")
	}
	return auth.Key{Access: rec.Access, Secret: secret, ClusterAdmin: true}, nil
}

// RootKey returns the cluster's saved root key (a cluster admin), making
// and saving one if there is none yet; created says this call made it (so
// that it is shown once). Concurrent callers on several nodes all get the
// same key.
func (c *Catalog) RootKey(ctx context.Context) (k auth.Key, created bool, err error) {
	for {
		kv, err := c.store.Get(ctx, keyRoot)
		if err == nil {
			k, err := c.decodeRoot(kv)
			return k, false, err
		}
		if !errors.Is(err, ErrNotFound) {
			return auth.Key{}, false, err
		}
		k = auth.NewKey()
		k.ClusterAdmin = true
		b, err := c.encodeRoot(k)
		if err != nil {
			return auth.Key{}, false, err
		}
		_, err = c.store.Put(ctx, keyRoot, b, 0)
		if err == nil {
			return k, true, nil
		}
		if !errors.Is(err, ErrConflict) {
			return auth.Key{}, false, err
		}
		// Another node saved one first: read it.
	}
}

// GetRootKey returns the cluster's saved root key, or ErrKeyNotFound if it
// has none (its root key is configured on its nodes).
func (c *Catalog) GetRootKey(ctx context.Context) (auth.Key, error) {
	kv, err := c.store.Get(ctx, keyRoot)
	if errors.Is(err, ErrNotFound) {
		return auth.Key{}, fmt.Errorf("%w: no saved root key", ErrKeyNotFound)
	}
	if err != nil {
		return auth.Key{}, err
	}
	return c.decodeRoot(kv)
}

// RotateRootKey replaces the saved root key with a new one and returns it.
func (c *Catalog) RotateRootKey(ctx context.Context) (auth.Key, error) {
	k := auth.NewKey()
	k.ClusterAdmin = true
	b, err := c.encodeRoot(k)
	if err != nil {
		return auth.Key{}, err
	}
	if _, err := c.store.Put(ctx, keyRoot, b, AnyRev); err != nil {
		return auth.Key{}, err
	}
	return k, nil
}
