package meta

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/cairn-db/cairn/internal/auth"
)

// TestKMSKeys makes, reads and lists KMS keys: the material is sealed in
// the meta service, survives a cluster key rotation (resealed by
// SealSecrets), and a listing never carries it.
func TestKMSKeys(t *testing.T) {
	ctx := context.Background()
	store := NewMemStore(nil)
	c, keys := sealedCatalog(store)
	material := bytes.Repeat([]byte{0x5a}, 32)
	if _, err := c.CreateKMSKey(ctx, "k1", material); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateKMSKey(ctx, "k1", material); !errors.Is(err, ErrKMSKeyExists) {
		t.Fatalf("making a key twice: %v", err)
	}
	if _, err := c.GetKMSKey(ctx, "k2"); !errors.Is(err, ErrKMSKeyNotFound) {
		t.Fatalf("a missing key: %v", err)
	}
	kv, _ := store.Get(ctx, kmsPrefix+"k1")
	if bytes.Contains(kv.Value, material) {
		t.Fatalf("the record holds the material in clear: %s", kv.Value)
	}
	// Rotate the cluster key: the record is resealed under the new one
	// and still opens once the old key is dropped.
	rotated := keys.Rotate()
	c2 := NewCatalog(store).WithSecrets(rotated)
	cur := rotated.Current()
	if n, err := c2.SealSecrets(ctx, func(s []byte) bool { id, _ := auth.SealedWith(s); return id != cur }); err != nil || n != 1 {
		t.Fatalf("resealing: %d records, %v", n, err)
	}
	c3 := NewCatalog(store).WithSecrets(rotated.Drop(cur))
	got, err := c3.GetKMSKey(ctx, "k1")
	if err != nil || !bytes.Equal(got.Material, material) || got.Created.IsZero() {
		t.Fatalf("after rotation: %+v %v", got, err)
	}
	l, err := c3.ListKMSKeys(ctx)
	if err != nil || len(l) != 1 || l[0].ID != "k1" || l[0].Material != nil {
		t.Fatalf("list: %+v %v", l, err)
	}
	for id, ok := range map[string]bool{"testkey-1": true, "arn:aws:kms:us-east-1:1:key/ab-c": true, "_sse-s3": false, "": false, "a b": false} {
		if ValidKMSKeyID(id) != ok {
			t.Errorf("ValidKMSKeyID(%q) = %v", id, !ok)
		}
	}
}
