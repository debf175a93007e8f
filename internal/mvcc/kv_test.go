package mvcc

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/keys"
)

func TestMemKV(t *testing.T) {
	kv := NewMemKV()
	for _, k := range []string{"d", "b", "a", "c", "e"} {
		if err := kv.Set([]byte(k), []byte("v"+k)); err != nil {
			t.Fatal(err)
		}
	}
	_ = kv.Set([]byte("c"), []byte("vc2"))
	_ = kv.Delete([]byte("zz")) // absent: no error
	scan := func(lower, upper, seek string) string {
		var lo, hi []byte
		if lower != "" {
			lo = []byte(lower)
		}
		if upper != "" {
			hi = []byte(upper)
		}
		it, err := kv.NewIter(lo, hi)
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		var b strings.Builder
		for ok := it.SeekGE([]byte(seek)); ok; ok = it.Next() {
			fmt.Fprintf(&b, "%s=%s ", it.Key(), it.Value())
		}
		if it.Valid() || it.Error() != nil {
			t.Fatalf("after the end: valid=%t err=%v", it.Valid(), it.Error())
		}
		return b.String()
	}
	for _, c := range []struct{ lower, upper, seek, want string }{
		{"", "", "", "a=va b=vb c=vc2 d=vd e=ve "},
		{"b", "d", "", "b=vb c=vc2 "},
		{"b", "d", "bb", "c=vc2 "},
		{"", "", "f", ""},
		{"c", "", "a", "c=vc2 d=vd e=ve "},
	} {
		if got := scan(c.lower, c.upper, c.seek); got != c.want {
			t.Errorf("scan [%q,%q) from %q = %q, want %q", c.lower, c.upper, c.seek, got, c.want)
		}
	}

	// Writes made while an iterator is open are seen by its next move.
	it, _ := kv.NewIter(nil, nil)
	it.SeekGE([]byte("b"))
	_ = kv.Delete([]byte("c"))
	_ = kv.Set([]byte("bb"), nil)
	if !it.Next() || string(it.Key()) != "bb" || len(it.Value()) != 0 {
		t.Fatalf("after writes: at %q", it.Key())
	}
	if !it.Next() || string(it.Key()) != "d" {
		t.Fatalf("after writes: at %q", it.Key())
	}
	_ = it.Close()
	if it.Valid() || it.SeekGE(nil) {
		t.Fatal("closed iterator is valid")
	}
	if kv.Len() != 5 {
		t.Fatalf("Len = %d", kv.Len())
	}
}

func TestPutRejects(t *testing.T) {
	kv := NewMemKV()
	obj := keys.Object(1, nil, []byte("k"))
	if _, err := Put(kv, obj, &Record{Version: 1}, Retention{Mode: KeepLast}, 1); err == nil {
		t.Error("invalid retention accepted")
	}
	if _, err := Put(kv, obj, &Record{Version: 1}, Retention{Mode: 9, KeepFor: time.Second}, 1); err == nil {
		t.Error("unknown mode accepted")
	}
	if _, err := Put(kv, []byte("not an object key"), &Record{Version: 1}, Retention{}, 1); !errors.Is(err, keys.ErrMalformedKey) {
		t.Errorf("bad object key: %v", err)
	}
	if _, err := Latest(kv, obj[:3]); !errors.Is(err, keys.ErrMalformedKey) {
		t.Errorf("bad object key: %v", err)
	}
	if kv.Len() != 0 {
		t.Errorf("rejected puts wrote %d keys", kv.Len())
	}
}
