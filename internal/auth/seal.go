package auth

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
)

// Secrets at rest: access-key secrets and join tokens are kept in the
// meta service sealed with AES-256-GCM under the cluster key, which every
// node keeps in its data directory (never in the meta service), so that a
// copy of the meta service's data, or a client of it, reads no secret.
//
// A sealed value names the key that sealed it, so the cluster key can be
// rotated: the newest key seals, every key still held opens.
//
//	sealed = version u8 (1) | key id u32 | nonce [12] | AES-GCM(plaintext) with tag
//
// The additional data is the caller's (the record's meta-service key), so
// a sealed value moved to another record does not open.

// KeySize is the size of one cluster key (AES-256).
const KeySize = 32

const (
	sealVersion  = 1
	sealOverhead = 1 + 4 + 12 + 16
)

// ErrSealed is the class of errors opening a sealed value: damaged,
// moved, or sealed under a key this node does not hold.
var ErrSealed = errors.New("auth: cannot open sealed secret")

// ErrUnknownClusterKey is the ErrSealed of a value sealed under a cluster
// key this node does not hold (another node rotated the key): the node
// can learn it from another.
var ErrUnknownClusterKey = fmt.Errorf("%w: sealed under a cluster key this node does not hold", ErrSealed)

// ClusterKeys are the cluster's keys by id, one of which seals (the
// current one); every one opens. A value is immutable: Rotate, Merge, Use
// and Drop return new ones.
type ClusterKeys struct {
	keys []clusterKey // by id, ascending
	cur  int          // index of the key that seals
}

type clusterKey struct {
	id  uint32
	key [KeySize]byte
	gcm cipher.AEAD
}

// NewClusterKeys makes the first key of a new cluster.
func NewClusterKeys() *ClusterKeys {
	var k [KeySize]byte
	_, _ = rand.Read(k[:])
	c, _ := buildClusterKeys([]clusterKey{{id: 1, key: k}}, 1)
	return c
}

// buildClusterKeys makes keys of ks, with key cur sealing.
func buildClusterKeys(ks []clusterKey, cur uint32) (*ClusterKeys, error) {
	if len(ks) == 0 {
		return nil, errors.New("auth: no cluster key")
	}
	slices.SortFunc(ks, func(a, b clusterKey) int { return int(int64(a.id) - int64(b.id)) })
	for i := range ks {
		if i > 0 && ks[i].id == ks[i-1].id {
			return nil, fmt.Errorf("auth: cluster key %d appears twice", ks[i].id)
		}
		block, err := aes.NewCipher(ks[i].key[:])
		if err != nil {
			return nil, err
		}
		if ks[i].gcm, err = cipher.NewGCM(block); err != nil {
			return nil, err
		}
	}
	i := slices.IndexFunc(ks, func(k clusterKey) bool { return k.id == cur })
	if i < 0 {
		return nil, fmt.Errorf("auth: the current cluster key %d is not among the keys", cur)
	}
	return &ClusterKeys{keys: ks, cur: i}, nil
}

// Current is the id of the key that seals.
func (c *ClusterKeys) Current() uint32 { return c.keys[c.cur].id }

// Newest is the highest key id held.
func (c *ClusterKeys) Newest() uint32 { return c.keys[len(c.keys)-1].id }

// IDs are the ids of the keys held, ascending.
func (c *ClusterKeys) IDs() []uint32 {
	ids := make([]uint32, len(c.keys))
	for i, k := range c.keys {
		ids[i] = k.id
	}
	return ids
}

// Rotate returns keys with a new random key that seals from now on; the
// old ones still open.
func (c *ClusterKeys) Rotate() *ClusterKeys {
	var k [KeySize]byte
	_, _ = rand.Read(k[:])
	id := c.Newest() + 1
	out, _ := buildClusterKeys(append(slices.Clone(c.keys), clusterKey{id: id, key: k}), id)
	return out
}

// Use returns the keys with key id sealing (it must be held).
func (c *ClusterKeys) Use(id uint32) (*ClusterKeys, error) {
	return buildClusterKeys(slices.Clone(c.keys), id)
}

// Merge returns the keys of c and o together (a node that learns keys
// from another), c's current key still sealing. A key id held by both
// must be the same key.
func (c *ClusterKeys) Merge(o *ClusterKeys) (*ClusterKeys, error) {
	ks := slices.Clone(c.keys)
	for _, k := range o.keys {
		i := slices.IndexFunc(ks, func(x clusterKey) bool { return x.id == k.id })
		switch {
		case i < 0:
			ks = append(ks, k)
		case ks[i].key != k.key:
			return nil, fmt.Errorf("auth: two different cluster keys have id %d", k.id)
		}
	}
	return buildClusterKeys(ks, c.Current())
}

// DropID returns the keys without key id (not the current one).
func (c *ClusterKeys) DropID(id uint32) *ClusterKeys {
	if id == c.Current() {
		return c
	}
	ks := slices.DeleteFunc(slices.Clone(c.keys), func(k clusterKey) bool { return k.id == id })
	out, err := buildClusterKeys(ks, c.Current())
	if err != nil {
		return c
	}
	return out
}

// Drop returns the keys without those older than id (after every value
// sealed with them has been sealed again).
func (c *ClusterKeys) Drop(before uint32) *ClusterKeys {
	ks := slices.DeleteFunc(slices.Clone(c.keys), func(k clusterKey) bool { return k.id < before })
	out, err := buildClusterKeys(ks, c.Current())
	if err != nil {
		return c
	}
	return out
}

func sealAD(ad []byte) []byte { return append([]byte("cairn-seal-v1\x00"), ad...) }

// Seal encrypts plaintext under the current key, bound to ad.
func (c *ClusterKeys) Seal(plaintext, ad []byte) ([]byte, error) {
	k := &c.keys[c.cur]
	out := make([]byte, 5, sealOverhead+len(plaintext))
	out[0] = sealVersion
	binary.BigEndian.PutUint32(out[1:], k.id)
	var nonce [12]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return nil, err
	}
	out = append(out, nonce[:]...)
	return k.gcm.Seal(out, nonce[:], plaintext, sealAD(ad)), nil
}

// SealedWith returns the id of the key that sealed b.
func SealedWith(b []byte) (uint32, bool) {
	if len(b) < sealOverhead || b[0] != sealVersion {
		return 0, false
	}
	return binary.BigEndian.Uint32(b[1:]), true
}

// Open decrypts a value Seal made with the same ad.
func (c *ClusterKeys) Open(sealed, ad []byte) ([]byte, error) {
	id, ok := SealedWith(sealed)
	if !ok {
		return nil, fmt.Errorf("%w: not a sealed value", ErrSealed)
	}
	i := slices.IndexFunc(c.keys, func(k clusterKey) bool { return k.id == id })
	if i < 0 {
		return nil, fmt.Errorf("%w (key %d)", ErrUnknownClusterKey, id)
	}
	p, err := c.keys[i].gcm.Open(nil, sealed[5:17], sealed[17:], sealAD(ad))
	if err != nil {
		return nil, fmt.Errorf("%w: damaged, or moved from another record", ErrSealed)
	}
	return p, nil
}

// The cluster keys' file in a node's data directory:
//
//	magic "CAIRNKEY" | version u16 (1) | current id u32 | count u16 |
//	count × (id u32 | key [32]) | CRC-32C u32 of all before
const (
	keysMagic   = "CAIRNKEY"
	keysVersion = 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Marshal encodes the keys in the file format.
func (c *ClusterKeys) Marshal() []byte {
	b := make([]byte, 0, len(keysMagic)+8+len(c.keys)*(4+KeySize)+4)
	b = append(b, keysMagic...)
	b = binary.BigEndian.AppendUint16(b, keysVersion)
	b = binary.BigEndian.AppendUint32(b, c.Current())
	b = binary.BigEndian.AppendUint16(b, uint16(len(c.keys)))
	for _, k := range c.keys {
		b = binary.BigEndian.AppendUint32(b, k.id)
		b = append(b, k.key[:]...)
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// ParseClusterKeys decodes Marshal's output, checking its magic, version
// and checksum.
func ParseClusterKeys(b []byte) (*ClusterKeys, error) {
	const head = len(keysMagic) + 8
	if len(b) < head+4 || string(b[:len(keysMagic)]) != keysMagic {
		return nil, errors.New("auth: not a cluster key file")
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, errors.New("auth: cluster key file is damaged (checksum mismatch)")
	}
	if v := binary.BigEndian.Uint16(b[len(keysMagic):]); v != keysVersion {
		return nil, fmt.Errorf("auth: cluster key file has format version %d; this build reads %d", v, keysVersion)
	}
	cur := binary.BigEndian.Uint32(b[len(keysMagic)+2:])
	n := int(binary.BigEndian.Uint16(b[len(keysMagic)+6:]))
	rest := body[head:]
	if len(rest) != n*(4+KeySize) {
		return nil, errors.New("auth: cluster key file is damaged (wrong length)")
	}
	ks := make([]clusterKey, n)
	for i := range ks {
		ks[i].id = binary.BigEndian.Uint32(rest)
		copy(ks[i].key[:], rest[4:4+KeySize])
		rest = rest[4+KeySize:]
	}
	return buildClusterKeys(ks, cur)
}
