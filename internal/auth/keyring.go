package auth

import (
	"sync/atomic"
)

// Keyring is the set of access keys a node checks requests against: the
// root key and the keys made since. It is replaced whole (Set) and read
// without locks; a key removed from it stops working on the next request
// that looks it up. The zero value holds no key.
type Keyring struct {
	set atomic.Pointer[keySet]
}

type keySet struct {
	gen  uint64
	keys map[string]*Key
}

// Set replaces the keys. Later keys with an access id seen before are
// ignored, so the root key, listed first, cannot be shadowed.
func (r *Keyring) Set(keys []Key) {
	m := make(map[string]*Key, len(keys))
	for i := range keys {
		if _, dup := m[keys[i].Access]; dup {
			continue
		}
		k := keys[i].Clone()
		m[k.Access] = &k
	}
	var gen uint64
	if old := r.set.Load(); old != nil {
		gen = old.gen
	}
	r.set.Store(&keySet{gen: gen + 1, keys: m})
}

// Gen changes whenever Set is called: a cached lookup older than the
// current generation must be looked up again.
func (r *Keyring) Gen() uint64 {
	if s := r.set.Load(); s != nil {
		return s.gen
	}
	return 0
}

// Lookup returns the key with access id access. The key is shared: the
// caller must not modify it.
func (r *Keyring) Lookup(access string) (*Key, bool) {
	s := r.set.Load()
	if s == nil {
		return nil, false
	}
	k, ok := s.keys[access]
	return k, ok
}

// Len is the number of keys.
func (r *Keyring) Len() int {
	if s := r.set.Load(); s != nil {
		return len(s.keys)
	}
	return 0
}

// Secret returns the secret of access (the S3 API's signature check).
func (r *Keyring) Secret(access string) (string, bool) {
	k, ok := r.Lookup(access)
	if !ok {
		return "", false
	}
	return k.Secret, true
}

// Allowed reports whether access may do need on space.
func (r *Keyring) Allowed(access, space, need string) bool {
	k, ok := r.Lookup(access)
	return ok && k.Allows(space, need)
}

// IsClusterAdmin reports whether access holds the cluster-admin grant.
func (r *Keyring) IsClusterAdmin(access string) bool {
	k, ok := r.Lookup(access)
	return ok && k.ClusterAdmin
}
