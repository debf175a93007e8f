package history

import (
	"strings"
	"testing"
	"time"
)

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		ops  []Op
		ok   bool
	}{
		{"sequential", []Op{
			{Kind: Put, Key: "a", Value: "1", Call: ms(0), Return: ms(1)},
			{Kind: Get, Key: "a", Value: "1", Call: ms(2), Return: ms(3)},
		}, true},
		{"stale read after a write returned", []Op{
			{Kind: Put, Key: "a", Value: "1", Call: ms(0), Return: ms(1)},
			{Kind: Put, Key: "a", Value: "2", Call: ms(2), Return: ms(3)},
			{Kind: Get, Key: "a", Value: "1", Call: ms(4), Return: ms(5)},
		}, false},
		{"lost acknowledged write", []Op{
			{Kind: Put, Key: "a", Value: "1", Call: ms(0), Return: ms(1)},
			{Kind: Get, Key: "a", Value: "", Call: ms(9), Return: ms(10)},
		}, false},
		{"concurrent write may be seen either way", []Op{
			{Client: 0, Kind: Put, Key: "a", Value: "1", Call: ms(0), Return: ms(10)},
			{Client: 1, Kind: Get, Key: "a", Value: "1", Call: ms(2), Return: ms(3)},
			{Client: 1, Kind: Get, Key: "a", Value: "1", Call: ms(4), Return: ms(5)},
		}, true},
		{"a read cannot go back", []Op{
			{Client: 0, Kind: Put, Key: "a", Value: "1", Call: ms(0), Return: ms(10)},
			{Client: 1, Kind: Get, Key: "a", Value: "1", Call: ms(2), Return: ms(3)},
			{Client: 1, Kind: Get, Key: "a", Value: "", Call: ms(4), Return: ms(5)},
		}, false},
		{"unknown write may apply late", []Op{
			{Kind: Put, Key: "a", Value: "1", Call: ms(0), Unknown: true},
			{Kind: Get, Key: "a", Value: "", Call: ms(5), Return: ms(6)},
			{Kind: Get, Key: "a", Value: "1", Call: ms(50), Return: ms(60)},
		}, true},
		{"keys are independent", []Op{
			{Kind: Put, Key: "a", Value: "1", Call: ms(0), Return: ms(1)},
			{Kind: Get, Key: "b", Value: "", Call: ms(2), Return: ms(3)},
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := Check(tc.ops, 10*time.Second)
			if res.Linearizable != tc.ok || res.Unknown {
				t.Fatalf("linearizable %v (unknown %v), want %v\n%s", res.Linearizable, res.Unknown, tc.ok, res.Bad)
			}
			if !tc.ok && !strings.Contains(res.Bad, `key "a"`) {
				t.Fatalf("report does not name the key: %q", res.Bad)
			}
		})
	}
}

// TestVerdict checks that a result passes only when fully checked,
// linearizable and with enough acknowledged writes.
func TestVerdict(t *testing.T) {
	ok := Result{Linearizable: true, Puts: 30, Pending: 5}
	if err := ok.Verdict(25); err != nil {
		t.Fatalf("a good result failed: %v", err)
	}
	for name, r := range map[string]Result{
		"unknown":      {Linearizable: true, Unknown: true, Puts: 30},
		"illegal":      {Bad: "key k", Puts: 30},
		"few writes":   {Linearizable: true, Puts: 30, Pending: 6},
		"no writes at": {Linearizable: true},
	} {
		if err := r.Verdict(25); err == nil {
			t.Errorf("%s: passed", name)
		}
	}
}
