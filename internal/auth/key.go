package auth

import (
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"
)

// Permissions a key may hold on a space. Each includes the ones before it.
const (
	Read  = "read"  // list, get, head
	Write = "write" // and put, delete, tag, multipart
	Admin = "admin" // and create, delete and configure the space
)

// AllSpaces is the space name of a grant on every space.
const AllSpaces = "*"

// Key is an access key: its id, its secret and what it may do.
type Key struct {
	Access, Secret string
	// Grants are permissions (Read, Write, Admin) by space name, or
	// AllSpaces.
	Grants map[string]string
	// ClusterAdmin allows managing keys, join tokens and nodes, and
	// reading the cluster's state and profiles. It implies Admin on
	// every space.
	ClusterAdmin bool
	Created      time.Time
}

// Rank orders permissions: 0 for none or an unknown one.
func Rank(p string) int {
	switch p {
	case Read:
		return 1
	case Write:
		return 2
	case Admin:
		return 3
	}
	return 0
}

// Allows reports whether k may do what needs permission need on space.
// An unknown permission is never allowed.
func (k *Key) Allows(space, need string) bool {
	r := Rank(need)
	if r == 0 {
		return false
	}
	if k.ClusterAdmin {
		return true
	}
	return max(Rank(k.Grants[space]), Rank(k.Grants[AllSpaces])) >= r
}

// Sees reports whether k holds any grant on space (a listing of spaces
// shows it those).
func (k *Key) Sees(space string) bool { return k.Allows(space, Read) }

// Clone returns a copy of k that shares nothing with it.
func (k Key) Clone() Key {
	k.Grants = maps.Clone(k.Grants)
	return k
}

// ErrInvalidKey is the class of Validate's errors.
var ErrInvalidKey = errors.New("invalid access key")

// Validate checks a key before it is saved. validSpace checks a space
// name of a grant (nil: any name).
func (k *Key) Validate(validSpace func(string) error) error {
	var errs []error
	if len(k.Access) < 3 || len(k.Access) > 128 || strings.ContainsAny(k.Access, "/ \t\n\r") {
		errs = append(errs, fmt.Errorf("access key %q must be 3-128 characters without '/' or spaces", k.Access))
	}
	if len(k.Secret) < 8 || len(k.Secret) > 128 {
		errs = append(errs, errors.New("the secret must be 8-128 characters"))
	}
	if len(k.Grants) == 0 && !k.ClusterAdmin {
		errs = append(errs, errors.New("a key needs a grant on a space, or the cluster-admin grant"))
	}
	for sp, p := range k.Grants {
		if sp != AllSpaces && validSpace != nil {
			if err := validSpace(sp); err != nil {
				errs = append(errs, err)
			}
		}
		if Rank(p) == 0 {
			errs = append(errs, fmt.Errorf("grant %q on %s is not read, write or admin", p, sp))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidKey, err)
	}
	return nil
}

// NewKey makes a random key: a 20-character access key id of upper-case
// letters and digits starting "CAIRN" and a 40-character secret (the
// lengths and alphabets AWS uses), with no grants.
func NewKey() Key {
	const idChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	const secretChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	return Key{Access: "CAIRN" + randomString(15, idChars), Secret: randomString(40, secretChars)}
}

// randomString is n characters drawn uniformly from alphabet (whose
// length divides 256).
func randomString(n int, alphabet string) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}
