package meta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"
)

// keysPrefix holds the S3 access keys made with `cairn key create`, one
// record per access key id.
const keysPrefix = Prefix + "keys/"

// Permissions a key may hold on a space. Each includes the ones before it.
const (
	GrantRead  = "read"  // list, get, head
	GrantWrite = "write" // and put, delete, tag, multipart
	GrantAdmin = "admin" // and create, delete and configure the bucket
)

// GrantAll is the space name of a grant on every space.
const GrantAll = "*"

// ErrKeyExists and ErrKeyNotFound are returned by the key calls.
var (
	ErrKeyExists   = errors.New("meta: access key exists")
	ErrKeyNotFound = errors.New("meta: no such access key")
)

// Key is a stored access key: its secret and what it may do, by space
// name (or GrantAll).
type Key struct {
	AccessKey
	Grants  map[string]string
	Created time.Time
}

type keyRecord struct {
	V       int               `json:"v"`
	Access  string            `json:"access"`
	Secret  string            `json:"secret"`
	Grants  map[string]string `json:"grants"`
	Created time.Time         `json:"created"`
}

// GrantRank orders permissions: 0 for none or an unknown one.
func GrantRank(p string) int {
	switch p {
	case GrantRead:
		return 1
	case GrantWrite:
		return 2
	case GrantAdmin:
		return 3
	}
	return 0
}

// Allows reports whether k may do what needs permission need on space.
func (k *Key) Allows(space, need string) bool {
	return max(GrantRank(k.Grants[space]), GrantRank(k.Grants[GrantAll])) >= GrantRank(need)
}

// ValidateKey checks a key before it is saved.
func ValidateKey(k Key) error {
	var errs []error
	if len(k.Access) < 3 || len(k.Access) > 128 || strings.ContainsAny(k.Access, "/ \t\n") {
		errs = append(errs, fmt.Errorf("access key %q must be 3-128 characters without '/' or spaces", k.Access))
	}
	if len(k.Secret) < 8 || len(k.Secret) > 128 {
		errs = append(errs, errors.New("the secret must be 8-128 characters"))
	}
	for sp, p := range k.Grants {
		if sp != GrantAll {
			if err := ValidSpaceName(sp); err != nil {
				errs = append(errs, err)
			}
		}
		if GrantRank(p) == 0 {
			errs = append(errs, fmt.Errorf("grant %q on %s is not read, write or admin", p, sp))
		}
	}
	return errors.Join(errs...)
}

// CreateKey saves k, which must be new (ErrKeyExists).
func (c *Catalog) CreateKey(ctx context.Context, k Key) (Key, error) {
	if err := ValidateKey(k); err != nil {
		return Key{}, err
	}
	k.Created = c.clock().UTC()
	b, _ := json.Marshal(keyRecord{V: formatVersionOne, Access: k.Access, Secret: k.Secret, Grants: k.Grants, Created: k.Created})
	if _, err := c.store.Put(ctx, keysPrefix+k.Access, b, 0); err != nil {
		if errors.Is(err, ErrConflict) {
			return Key{}, fmt.Errorf("%w: %s", ErrKeyExists, k.Access)
		}
		return Key{}, err
	}
	return k, nil
}

// GetKey returns the key with access key id access, or ErrKeyNotFound.
func (c *Catalog) GetKey(ctx context.Context, access string) (Key, error) {
	kv, err := c.store.Get(ctx, keysPrefix+access)
	if errors.Is(err, ErrNotFound) {
		return Key{}, fmt.Errorf("%w: %s", ErrKeyNotFound, access)
	}
	if err != nil {
		return Key{}, err
	}
	return decodeKey(kv.Value)
}

// ListKeys returns every stored key, by access key id.
func (c *Catalog) ListKeys(ctx context.Context) ([]Key, error) {
	kvs, err := c.store.List(ctx, keysPrefix)
	if err != nil {
		return nil, err
	}
	out := make([]Key, 0, len(kvs))
	for _, kv := range kvs {
		k, err := decodeKey(kv.Value)
		if err != nil {
			return nil, err
		}
		out = append(out, k)
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

func decodeKey(b []byte) (Key, error) {
	var rec keyRecord
	if err := json.Unmarshal(b, &rec); err != nil || rec.Access == "" {
		return Key{}, fmt.Errorf("meta: access key record is damaged: %v", err)
	}
	return Key{AccessKey: AccessKey{rec.Access, rec.Secret}, Grants: maps.Clone(rec.Grants), Created: rec.Created}, nil
}
