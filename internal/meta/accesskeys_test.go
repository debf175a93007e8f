package meta

import (
	"context"
	"errors"
	"testing"
)

func TestAccessKeys(t *testing.T) {
	ctx := context.Background()
	c := NewCatalog(NewMemStore(nil))
	k := Key{AccessKey: AccessKey{"reader", "reader-secret"}, Grants: map[string]string{"photos": GrantRead, "logs": GrantAdmin}}
	if _, err := c.CreateKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateKey(ctx, k); !errors.Is(err, ErrKeyExists) {
		t.Fatalf("creating a key twice: %v", err)
	}
	got, err := c.GetKey(ctx, "reader")
	if err != nil || got.Secret != "reader-secret" || got.Created.IsZero() {
		t.Fatalf("get: %+v %v", got, err)
	}
	for _, c := range []struct {
		space, need string
		ok          bool
	}{
		{"photos", GrantRead, true}, {"photos", GrantWrite, false}, {"logs", GrantWrite, true},
		{"logs", GrantAdmin, true}, {"other", GrantRead, false},
	} {
		if got.Allows(c.space, c.need) != c.ok {
			t.Errorf("%s on %s: allowed %v", c.need, c.space, !c.ok)
		}
	}
	all := Key{Grants: map[string]string{GrantAll: GrantWrite}}
	if !all.Allows("any", GrantWrite) || all.Allows("any", GrantAdmin) {
		t.Error("a grant on * must cover every space, up to its permission")
	}
	for _, bad := range []Key{
		{AccessKey: AccessKey{"ab", "long-enough"}},
		{AccessKey: AccessKey{"okay", "short"}},
		{AccessKey: AccessKey{"okay", "long-enough"}, Grants: map[string]string{"photos": "owner"}},
		{AccessKey: AccessKey{"okay", "long-enough"}, Grants: map[string]string{"Bad_Name": GrantRead}},
	} {
		if _, err := c.CreateKey(ctx, bad); err == nil {
			t.Errorf("key %+v was accepted", bad)
		}
	}
	if _, err := c.CreateKey(ctx, Key{AccessKey: AccessKey{"writer", "writer-secret"}}); err != nil {
		t.Fatal(err)
	}
	keys, err := c.ListKeys(ctx)
	if err != nil || len(keys) != 2 || keys[0].Access != "reader" || keys[1].Access != "writer" {
		t.Fatalf("list: %+v %v", keys, err)
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
