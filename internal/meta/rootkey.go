package meta

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
)

// keyRoot holds the S3 root access key of a cluster that was not given
// one in its configuration.
const keyRoot = Prefix + "rootkey"

// AccessKey is an S3 access key and its secret.
type AccessKey struct {
	Access, Secret string
}

type rootKeyRecord struct {
	V      int    `json:"v"`
	Access string `json:"access"`
	Secret string `json:"secret"`
}

// RootKey returns the cluster's saved root key, making and saving one if
// there is none yet; created says this call made it (so that it is shown
// once). Concurrent callers on several nodes all get the same key.
func (c *Catalog) RootKey(ctx context.Context) (k AccessKey, created bool, err error) {
	for {
		kv, err := c.store.Get(ctx, keyRoot)
		if err == nil {
			var rec rootKeyRecord
			if err := json.Unmarshal(kv.Value, &rec); err != nil || rec.Access == "" || rec.Secret == "" {
				return AccessKey{}, false, fmt.Errorf("meta: root key record is damaged: %v", err)
			}
			return AccessKey{rec.Access, rec.Secret}, false, nil
		}
		if !errors.Is(err, ErrNotFound) {
			return AccessKey{}, false, err
		}
		k = NewAccessKey()
		b, _ := json.Marshal(rootKeyRecord{V: formatVersionOne, Access: k.Access, Secret: k.Secret})
		_, err = c.store.Put(ctx, keyRoot, b, 0)
		if err == nil {
			return k, true, nil
		}
		if !errors.Is(err, ErrConflict) {
			return AccessKey{}, false, err
		}
		// Another node saved one first: read it.
	}
}

// NewAccessKey makes a random key: a 20-character access key id of
// upper-case letters and digits and a 40-character secret (the lengths
// and alphabets AWS uses).
func NewAccessKey() AccessKey {
	const idChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	const secretChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	pick := func(n int, alphabet string) string {
		b := make([]byte, n)
		_, _ = rand.Read(b)
		for i := range b {
			b[i] = alphabet[int(b[i])%len(alphabet)]
		}
		return string(b)
	}
	return AccessKey{Access: "CAIRN" + pick(15, idChars), Secret: pick(40, secretChars)}
}
