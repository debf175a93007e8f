package meta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/cairn-db/cairn/internal/auth"
)

// keysPrefix holds the access keys made with `cairn key create`, one
// record per access key id.
const keysPrefix = Prefix + "keys/"

// ErrKeyExists and ErrKeyNotFound are returned by the key calls.
var (
	ErrKeyExists   = errors.New("meta: access key exists")
	ErrKeyNotFound = errors.New("meta: no such access key")
	// ErrNoSecretBox is returned by calls that keep or read a secret on
	// a Catalog made without one (WithSecrets).
	ErrNoSecretBox = errors.New("meta: no cluster key to seal secrets with")
	// ErrBadRecords is returned by ListKeys with the keys it could read
	// when some records could not be (damaged, or sealed under a key this
	// node lacks).
	ErrBadRecords = errors.New("meta: some access key records could not be read")
)

// SecretBox seals the secrets the catalog keeps (access-key secrets, join
// tokens) and opens them again; auth.ClusterKeys is one. ad binds a sealed
// value to its record: the record's key.
type SecretBox interface {
	Seal(plaintext, ad []byte) ([]byte, error)
	Open(sealed, ad []byte) ([]byte, error)
}

// WithSecrets gives the catalog the box its secrets are sealed with. Call
// it before the catalog is used.
func (c *Catalog) WithSecrets(box SecretBox) *Catalog {
	c.box = box
	return c
}

// Secret-holding records are format 2: the secret sealed (SecretBox) under
// "sealed". Format 1 records, written before secrets were sealed, hold it
// in clear under "secret"; they are read as they are, and SealSecrets
// rewrites them.
const formatSealed = 2

type keyRecord struct {
	V            int               `json:"v"`
	Access       string            `json:"access"`
	Secret       string            `json:"secret,omitempty"` // format 1 only
	Sealed       []byte            `json:"sealed,omitempty"`
	Grants       map[string]string `json:"grants"`
	ClusterAdmin bool              `json:"cluster_admin,omitempty"`
	Created      time.Time         `json:"created"`
}

// seal returns the sealed form of secret for the record at key.
func (c *Catalog) seal(key, secret string) ([]byte, error) {
	if c.box == nil {
		return nil, ErrNoSecretBox
	}
	return c.box.Seal([]byte(secret), []byte(key))
}

// open returns the secret of a record: sealed (format 2) or in clear.
func (c *Catalog) open(key string, v int, clear string, sealed []byte) (string, error) {
	switch v {
	case formatVersionOne:
		return clear, nil
	case formatSealed:
		if c.box == nil {
			return "", ErrNoSecretBox
		}
		p, err := c.box.Open(sealed, []byte(key))
		if err != nil {
			return "", fmt.Errorf("meta: %s: %w", key, err)
		}
		return string(p), nil
	}
	return "", fmt.Errorf("meta: %s has format version %d; this build reads 1 and 2", key, v)
}

func (c *Catalog) encodeKey(k auth.Key) ([]byte, error) {
	sealed, err := c.seal(keysPrefix+k.Access, k.Secret)
	if err != nil {
		return nil, err
	}
	return json.Marshal(keyRecord{V: formatSealed, Access: k.Access, Sealed: sealed, Grants: k.Grants,
		ClusterAdmin: k.ClusterAdmin, Created: k.Created})
}

// CreateKey saves k, which must be new (ErrKeyExists), with its secret
// sealed.
func (c *Catalog) CreateKey(ctx context.Context, k auth.Key) (auth.Key, error) {
	if err := k.Validate(ValidSpaceName); err != nil {
		return auth.Key{}, err
	}
	k.Created = c.clock().UTC()
	b, err := c.encodeKey(k)
	if err != nil {
		return auth.Key{}, err
	}
	if _, err := c.store.Put(ctx, keysPrefix+k.Access, b, 0); err != nil {
		if errors.Is(err, ErrConflict) {
			return auth.Key{}, fmt.Errorf("%w: %s", ErrKeyExists, k.Access)
		}
		return auth.Key{}, err
	}
	return k, nil
}

// GetKey returns the key with access key id access, or ErrKeyNotFound.
func (c *Catalog) GetKey(ctx context.Context, access string) (auth.Key, error) {
	kv, err := c.store.Get(ctx, keysPrefix+access)
	if errors.Is(err, ErrNotFound) {
		return auth.Key{}, fmt.Errorf("%w: %s", ErrKeyNotFound, access)
	}
	if err != nil {
		return auth.Key{}, err
	}
	k, _, err := c.decodeKey(kv)
	return k, err
}

// ListKeys returns every stored key, by access key id. A record that
// cannot be read (damaged, or sealed under a key this node lacks) is left
// out and its error joined into the one returned with the others: one bad
// record must not keep the rest from being read.
func (c *Catalog) ListKeys(ctx context.Context) ([]auth.Key, error) {
	kvs, err := c.store.List(ctx, keysPrefix)
	if err != nil {
		return nil, err
	}
	out := make([]auth.Key, 0, len(kvs))
	var errs []error
	for _, kv := range kvs {
		k, _, err := c.decodeKey(kv)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, k)
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("%w: %w", ErrBadRecords, errors.Join(errs...))
	}
	return out, nil
}

// DeleteKey removes a key (ErrKeyNotFound if there is none).
func (c *Catalog) DeleteKey(ctx context.Context, access string) error {
	err := c.store.Delete(ctx, keysPrefix+access, AnyRev)
	if errors.Is(err, ErrNotFound) {
		return fmt.Errorf("%w: %s", ErrKeyNotFound, access)
	}
	return err
}

// decodeKey reads a key record; the record's format version comes back
// too (SealSecrets rewrites format 1).
func (c *Catalog) decodeKey(kv KV) (auth.Key, keyRecord, error) {
	var rec keyRecord
	if err := json.Unmarshal(kv.Value, &rec); err != nil || rec.Access == "" {
		return auth.Key{}, rec, fmt.Errorf("meta: access key record %s is damaged: %v", kv.Key, err)
	}
	secret, err := c.open(kv.Key, rec.V, rec.Secret, rec.Sealed)
	if err != nil {
		return auth.Key{}, rec, err
	}
	return auth.Key{Access: rec.Access, Secret: secret, Grants: maps.Clone(rec.Grants), ClusterAdmin: rec.ClusterAdmin,
		Created: rec.Created}, rec, nil
}

// SealSecrets rewrites the secret-holding records that are not sealed
// under the box's current key: records of format 1 (secrets in clear,
// written by earlier versions) and records sealed under an older cluster
// key (after a rotation). stale reports whether a sealed value needs it
// (nil: only format 1 records are rewritten). Each rewrite is conditional
// on the record being unchanged, so nodes may run it at once. It returns
// how many records it rewrote.
func (c *Catalog) SealSecrets(ctx context.Context, stale func(sealed []byte) bool) (int, error) {
	if c.box == nil {
		return 0, ErrNoSecretBox
	}
	n := 0
	kvs, err := c.store.List(ctx, keysPrefix)
	if err != nil {
		return 0, err
	}
	if root, err := c.store.Get(ctx, keyRoot); err == nil {
		kvs = append(kvs, root)
	} else if !errors.Is(err, ErrNotFound) {
		return 0, err
	}
	for _, p := range []string{tokensPrefix, kmsPrefix} {
		more, err := c.store.List(ctx, p)
		if err != nil {
			return 0, err
		}
		kvs = append(kvs, more...)
	}
	for _, kv := range kvs {
		b, err := c.reseal(kv, stale)
		if err != nil {
			return n, err
		}
		if b == nil {
			continue
		}
		if _, err := c.store.Put(ctx, kv.Key, b, kv.Rev); err != nil && !errors.Is(err, ErrConflict) {
			return n, err
		} else if err == nil {
			n++
		}
	}
	return n, nil
}

// reseal returns the record kv rewritten with its secret sealed under the
// current key, or nil if it needs no rewrite.
func (c *Catalog) reseal(kv KV, stale func([]byte) bool) ([]byte, error) {
	var probe struct {
		V      int    `json:"v"`
		Sealed []byte `json:"sealed"`
	}
	if err := json.Unmarshal(kv.Value, &probe); err != nil {
		return nil, fmt.Errorf("meta: %s is damaged: %v", kv.Key, err)
	}
	if probe.V == formatSealed && (stale == nil || !stale(probe.Sealed)) {
		return nil, nil
	}
	switch {
	case kv.Key == keyRoot:
		k, err := c.decodeRoot(kv)
		if err != nil {
			return nil, err
		}
		return c.encodeRoot(k)
	case strings.HasPrefix(kv.Key, kmsPrefix):
		k, err := c.decodeKMSKey(kv)
		if err != nil {
			return nil, err
		}
		return c.encodeKMSKey(k)
	case len(kv.Key) > len(tokensPrefix) && kv.Key[:len(tokensPrefix)] == tokensPrefix:
		t, err := c.decodeToken(kv)
		if err != nil {
			return nil, err
		}
		return c.encodeToken(t)
	default:
		k, _, err := c.decodeKey(kv)
		if err != nil {
			return nil, err
		}
		return c.encodeKey(k)
	}
}
