package meta

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/auth"
)

func sealedCatalog(s Store) (*Catalog, *auth.ClusterKeys) {
	keys := auth.NewClusterKeys()
	return NewCatalog(s).WithSecrets(keys), keys
}

func TestAccessKeys(t *testing.T) {
	ctx := context.Background()
	store := NewMemStore(nil)
	c, _ := sealedCatalog(store)
	k := auth.Key{Access: "reader", Secret: "reader-secret", Grants: map[string]string{"photos": auth.Read, "logs": auth.Admin}}
	if _, err := c.CreateKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateKey(ctx, k); !errors.Is(err, ErrKeyExists) {
		t.Fatalf("creating a key twice: %v", err)
	}
	got, err := c.GetKey(ctx, "reader")
	if err != nil || got.Secret != "reader-secret" || got.Created.IsZero() || got.Grants["logs"] != auth.Admin {
		t.Fatalf("get: %+v %v", got, err)
	}
	// The secret is sealed in the meta service: its record holds no
	// trace of it.
	kv, _ := store.Get(ctx, keysPrefix+"reader")
	if bytes.Contains(kv.Value, []byte("reader-secret")) {
		t.Fatalf("the record holds the secret in clear: %s", kv.Value)
	}
	for _, bad := range []auth.Key{
		{Access: "ab", Secret: "long-enough", Grants: map[string]string{"photos": auth.Read}},
		{Access: "okay", Secret: "short", Grants: map[string]string{"photos": auth.Read}},
		{Access: "okay", Secret: "long-enough", Grants: map[string]string{"photos": "owner"}},
		{Access: "okay", Secret: "long-enough", Grants: map[string]string{"Bad_Name": auth.Read}},
		{Access: "okay", Secret: "long-enough"},
	} {
		if _, err := c.CreateKey(ctx, bad); err == nil {
			t.Errorf("key %+v was accepted", bad)
		}
	}
	if _, err := c.CreateKey(ctx, auth.Key{Access: "writer", Secret: "writer-secret", ClusterAdmin: true}); err != nil {
		t.Fatal(err)
	}
	keys, err := c.ListKeys(ctx)
	if err != nil || len(keys) != 2 || keys[0].Access != "reader" || keys[1].Access != "writer" || !keys[1].ClusterAdmin {
		t.Fatalf("list: %+v %v", keys, err)
	}
	// Another cluster's key (a copy of this meta data elsewhere) opens
	// nothing; a catalog without one keeps nothing.
	if _, err := NewCatalog(store).WithSecrets(auth.NewClusterKeys()).GetKey(ctx, "reader"); !errors.Is(err, auth.ErrSealed) {
		t.Fatalf("read with another cluster key: %v", err)
	}
	if _, err := NewCatalog(store).CreateKey(ctx, auth.Key{Access: "nobox", Secret: "secret-123", ClusterAdmin: true}); !errors.Is(err, ErrNoSecretBox) {
		t.Fatalf("create without a box: %v", err)
	}
	if err := c.DeleteKey(ctx, "reader"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteKey(ctx, "reader"); !errors.Is(err, ErrKeyNotFound) {
		t.Fatalf("deleting twice: %v", err)
	}
	if _, err := c.GetKey(ctx, "reader"); !errors.Is(err, ErrKeyNotFound) {
		t.Fatalf("a deleted key: %v", err)
	}
}

// TestSealSecretsUpgrade: records written in clear by earlier versions
// (format 1) read as before and are sealed by SealSecrets; a rotation
// reseals what the old key sealed.
func TestSealSecretsUpgrade(t *testing.T) {
	ctx := context.Background()
	store := NewMemStore(nil)
	old := func(key string, v any) {
		b, _ := json.Marshal(v)
		if _, err := store.Put(ctx, key, b, 0); err != nil {
			t.Fatal(err)
		}
	}
	old(keysPrefix+"OLDKEY", map[string]any{"v": 1, "access": "OLDKEY", "secret": "old-secret-1", "grants": map[string]string{"*": "write"}, "created": time.Now()})
	old(keyRoot, map[string]any{"v": 1, "access": "OLDROOT", "secret": "old-root-secret"})
	c, keys := sealedCatalog(store)
	if k, err := c.GetKey(ctx, "OLDKEY"); err != nil || k.Secret != "old-secret-1" {
		t.Fatalf("a format 1 key: %+v %v", k, err)
	}
	if k, _, err := c.RootKey(ctx); err != nil || k.Secret != "old-root-secret" || !k.ClusterAdmin {
		t.Fatalf("a format 1 root key: %+v %v", k, err)
	}
	n, err := c.SealSecrets(ctx, nil)
	if err != nil || n != 2 {
		t.Fatalf("SealSecrets: %d %v", n, err)
	}
	for _, key := range []string{keysPrefix + "OLDKEY", keyRoot} {
		kv, _ := store.Get(ctx, key)
		if bytes.Contains(kv.Value, []byte("old-")) || !strings.Contains(string(kv.Value), `"v":2`) {
			t.Fatalf("%s after SealSecrets: %s", key, kv.Value)
		}
	}
	if k, err := c.GetKey(ctx, "OLDKEY"); err != nil || k.Secret != "old-secret-1" {
		t.Fatalf("the key after sealing: %+v %v", k, err)
	}
	if n, _ := c.SealSecrets(ctx, nil); n != 0 {
		t.Fatalf("a second SealSecrets rewrote %d records", n)
	}
	// Rotation: a new key seals, the old ones are resealed under it.
	rotated := keys.Rotate()
	c2 := NewCatalog(store).WithSecrets(rotated)
	if err := c2.CreateToken(ctx, JoinToken{ID: "tok1", Secret: "token-secret", Expires: time.Now().Add(time.Hour), Uses: 1}); err != nil {
		t.Fatal(err)
	}
	n, err = c2.SealSecrets(ctx, func(sealed []byte) bool { id, _ := auth.SealedWith(sealed); return id != rotated.Current() })
	if err != nil || n != 2 {
		t.Fatalf("resealing after rotation: %d %v", n, err)
	}
	onlyNew := rotated.Drop(rotated.Current())
	c3 := NewCatalog(store).WithSecrets(onlyNew)
	if k, err := c3.GetKey(ctx, "OLDKEY"); err != nil || k.Secret != "old-secret-1" {
		t.Fatalf("read with the new key alone: %+v %v", k, err)
	}
	if tok, _, err := c3.GetToken(ctx, "tok1"); err != nil || tok.Secret != "token-secret" {
		t.Fatalf("token with the new key alone: %+v %v", tok, err)
	}
}

// TestJoinTokens: a token is usable until it expires or its uses run out;
// a failed admission gives the use back; a revoked token is gone.
func TestJoinTokens(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	c, _ := sealedCatalog(NewMemStore(nil))
	c.clock = func() time.Time { return now }
	if err := c.CreateToken(ctx, JoinToken{ID: "once", Secret: "s1", Expires: now.Add(time.Hour), Uses: 1}); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateToken(ctx, JoinToken{ID: "boot", Secret: "s2", Expires: now.Add(time.Hour), Uses: -1}); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateToken(ctx, JoinToken{ID: "zero", Secret: "s3", Expires: now.Add(time.Hour)}); err == nil {
		t.Fatal("a token without uses was made")
	}
	tok, rev, err := c.GetToken(ctx, "once")
	if err != nil || tok.Secret != "s1" {
		t.Fatalf("get: %+v %v", tok, err)
	}
	if err := c.UseToken(ctx, tok, rev); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.GetToken(ctx, "once"); !errors.Is(err, ErrTokenInvalid) {
		t.Fatalf("a used one-time token: %v", err)
	}
	if err := c.RestoreToken(ctx, "once"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.GetToken(ctx, "once"); err != nil {
		t.Fatalf("a restored token: %v", err)
	}
	// A token revoked while its use was out is not brought back.
	tok, rev, _ = c.GetToken(ctx, "once")
	if err := c.UseToken(ctx, tok, rev); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteToken(ctx, "once"); !errors.Is(err, ErrTokenInvalid) {
		t.Fatalf("revoking a used-up token: %v", err)
	}
	if err := c.RestoreToken(ctx, "once"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.GetToken(ctx, "once"); !errors.Is(err, ErrTokenInvalid) {
		t.Fatalf("a revoked token came back: %v", err)
	}
	if err := c.CreateToken(ctx, JoinToken{ID: "once", Secret: "s1", Expires: now.Add(time.Hour), Uses: 1}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		b, rev, err := c.GetToken(ctx, "boot")
		if err != nil {
			t.Fatal(err)
		}
		if err := c.UseToken(ctx, b, rev); err != nil {
			t.Fatal(err)
		}
	}
	if l, err := c.ListTokens(ctx); err != nil || len(l) != 2 {
		t.Fatalf("list: %+v %v", l, err)
	}

	now = now.Add(2 * time.Hour)
	if _, _, err := c.GetToken(ctx, "boot"); !errors.Is(err, ErrTokenInvalid) {
		t.Fatalf("an expired token: %v", err)
	}
	if l, _ := c.ListTokens(ctx); len(l) != 0 {
		t.Fatalf("expired tokens listed: %+v", l)
	}
	if err := c.DeleteToken(ctx, "once"); !errors.Is(err, ErrTokenInvalid) {
		t.Fatalf("revoking a token removed when it expired: %v", err)
	}
}
