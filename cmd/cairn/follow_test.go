package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/internal/testenv"
)

// TestCLIFollow: `cairn get --follow` reads a document and what its
// references reach over the native protocol, in one answer; a reference
// into a space the key may not read comes back denied, not read.
func TestCLIFollow(t *testing.T) {
	bin := cairnBinary(t)
	srv := startServer(t, bin, t.TempDir(), [5]int{testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t)})
	defer srv.kill()
	must, fails := cliChecks(t, bin, srv)
	must("", "space", "create", "shop")
	must("", "space", "create", "vault")
	doc := func(target, body string) {
		must(body, "put", target, "-", "--content-type", "application/json")
	}
	doc("shop/order-1", `{"item": {"$ref": "shop/book-7"}, "buyer": {"$ref": "shop/alice"}}`)
	doc("shop/book-7", `{"title": "Persistent Objects", "supplier": {"$ref": "vault/supplier"}}`)
	doc("shop/alice", `{"name": "Alice", "card": {"$ref": "vault/card"}}`)
	doc("vault/card", `{"number": "4111"}`)
	doc("vault/supplier", `{"name": "Acme"}`)

	type answer struct {
		At        string `json:"at"`
		Truncated bool   `json:"truncated"`
		Objects   []struct {
			Space, Key, Version, Error string
			Depth                      int
			Doc                        json.RawMessage
		} `json:"objects"`
	}
	parse := func(out string) answer {
		t.Helper()
		var a answer
		if err := json.Unmarshal([]byte(out), &a); err != nil {
			t.Fatalf("get --follow printed %q: %v", out, err)
		}
		return a
	}
	a := parse(must("", "get", "shop/order-1", "--follow", "2"))
	var got []string
	for _, o := range a.Objects {
		got = append(got, o.Space+"/"+o.Key)
		if o.Error != "" || o.Version == "" || !json.Valid(o.Doc) {
			t.Fatalf("%s/%s: %+v", o.Space, o.Key, o)
		}
	}
	if strings.Join(got, " ") != "shop/order-1 shop/book-7 shop/alice vault/supplier vault/card" || a.At == "" || a.Truncated {
		t.Fatalf("get --follow 2 read %v (at %q)", got, a.At)
	}
	if a := parse(must("", "get", "shop/order-1", "--follow", "1")); len(a.Objects) != 3 {
		t.Fatalf("get --follow 1 read %d objects", len(a.Objects))
	}
	fails(1, "depth", "get", "shop/order-1", "--follow", "17")

	// A key that reads the shop but not the vault.
	out := must("", "key", "create", "--access", "clerk", "--grant", "shop=read")
	secret := regexp.MustCompile(`secret key: (\S+)`).FindStringSubmatch(out)[1]
	out, errs, code := run(t, bin, srv, "", "get", "shop/order-1", "--follow", "2", "--access-key", "clerk", "--secret-key", secret)
	if code != 0 {
		t.Fatalf("get --follow as the clerk: exit %d, %s", code, errs)
	}
	a = parse(out)
	denied := 0
	for _, o := range a.Objects {
		if o.Space == "vault" {
			if !strings.Contains(o.Error, "may not read") || o.Doc != nil {
				t.Fatalf("the clerk got %s/%s: %+v", o.Space, o.Key, o)
			}
			denied++
		}
	}
	if denied != 2 || len(a.Objects) != 5 {
		t.Fatalf("the clerk's answer: %+v", a)
	}
	if _, errs, code := run(t, bin, srv, "", "get", "vault/card", "--follow", "1", "--access-key", "clerk", "--secret-key", secret); code != 1 || !strings.Contains(errs, "may not read") {
		t.Fatalf("get --follow of a document the clerk may not read: exit %d, %s", code, errs)
	}
}
