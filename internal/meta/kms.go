package meta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"
)

// kmsPrefix holds the keys of the cluster's key management service
// (`cairn kms key create`), one record per key id. A key's material is
// sealed under the cluster key as an access key's secret is; objects
// encrypted with SSE-KMS keep their data keys wrapped under it.
const kmsPrefix = Prefix + "kms/"

// ErrKMSKeyExists and ErrKMSKeyNotFound are returned by the KMS key calls.
var (
	ErrKMSKeyExists   = errors.New("meta: KMS key exists")
	ErrKMSKeyNotFound = errors.New("meta: no such KMS key")
)

// KMSKey is a key of the cluster's KMS.
type KMSKey struct {
	ID       string
	Material []byte // 32 bytes; nil in listings
	Created  time.Time
}

type kmsRecord struct {
	V       int       `json:"v"`
	ID      string    `json:"id"`
	Sealed  []byte    `json:"sealed"`
	Created time.Time `json:"created"`
}

// ServerKMSKeyID is the KMS key S3's SSE-S3 wraps data keys under: made
// by the cluster the first time it is needed, named by no client.
const ServerKMSKeyID = "_sse-s3"

var kmsKeyID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:/+=@-]{0,255}$`)

// ValidKMSKeyID reports whether id may name a KMS key a client makes: 1
// to 256 letters, digits and _.:/+=@- (an AWS key id, alias or ARN
// fits), not starting with punctuation. Ids that start otherwise are the
// cluster's own (ServerKMSKeyID).
func ValidKMSKeyID(id string) bool { return kmsKeyID.MatchString(id) }

func (c *Catalog) encodeKMSKey(k KMSKey) ([]byte, error) {
	sealed, err := c.seal(kmsPrefix+k.ID, string(k.Material))
	if err != nil {
		return nil, err
	}
	return json.Marshal(kmsRecord{V: formatSealed, ID: k.ID, Sealed: sealed, Created: k.Created})
}

func (c *Catalog) decodeKMSKey(kv KV) (KMSKey, error) {
	var r kmsRecord
	if err := json.Unmarshal(kv.Value, &r); err != nil {
		return KMSKey{}, fmt.Errorf("meta: %s is damaged: %v", kv.Key, err)
	}
	if r.V != formatSealed {
		return KMSKey{}, fmt.Errorf("meta: %s has format version %d; this build reads 2", kv.Key, r.V)
	}
	m, err := c.open(kv.Key, r.V, "", r.Sealed)
	if err != nil {
		return KMSKey{}, err
	}
	return KMSKey{ID: r.ID, Material: []byte(m), Created: r.Created}, nil
}

// CreateKMSKey saves a new KMS key with the given material (ErrKMSKeyExists
// if the id is taken).
func (c *Catalog) CreateKMSKey(ctx context.Context, id string, material []byte) (KMSKey, error) {
	if id == "" {
		return KMSKey{}, fmt.Errorf("meta: a KMS key needs an id")
	}
	k := KMSKey{ID: id, Material: material, Created: c.clock().UTC()}
	b, err := c.encodeKMSKey(k)
	if err != nil {
		return KMSKey{}, err
	}
	if _, err := c.store.Put(ctx, kmsPrefix+id, b, 0); err != nil {
		if errors.Is(err, ErrConflict) {
			return KMSKey{}, fmt.Errorf("%w: %s", ErrKMSKeyExists, id)
		}
		return KMSKey{}, err
	}
	return k, nil
}

// GetKMSKey returns the key id with its material, or ErrKMSKeyNotFound.
func (c *Catalog) GetKMSKey(ctx context.Context, id string) (KMSKey, error) {
	if id == "" {
		return KMSKey{}, fmt.Errorf("%w: %q", ErrKMSKeyNotFound, id)
	}
	kv, err := c.store.Get(ctx, kmsPrefix+id)
	if errors.Is(err, ErrNotFound) {
		return KMSKey{}, fmt.Errorf("%w: %s", ErrKMSKeyNotFound, id)
	}
	if err != nil {
		return KMSKey{}, err
	}
	return c.decodeKMSKey(kv)
}

// ListKMSKeys lists the KMS keys in id order, without their material.
func (c *Catalog) ListKMSKeys(ctx context.Context) ([]KMSKey, error) {
	kvs, err := c.store.List(ctx, kmsPrefix)
	if err != nil {
		return nil, err
	}
	out := make([]KMSKey, 0, len(kvs))
	for _, kv := range kvs {
		var r kmsRecord
		if err := json.Unmarshal(kv.Value, &r); err != nil {
			return out, fmt.Errorf("meta: %s is damaged: %v", kv.Key, err)
		}
		out = append(out, KMSKey{ID: r.ID, Created: r.Created})
	}
	return out, nil
}
