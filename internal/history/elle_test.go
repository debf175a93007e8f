package history

import "testing"

func ap(k, v string) Mop              { return Mop{Kind: Append, Key: k, Value: v} }
func rd(k string, vs ...string) Mop   { return Mop{Kind: Read, Key: k, List: vs} }
func ok(id int, mops ...Mop) Txn      { return Txn{ID: id, Mops: mops, Outcome: Committed} }
func failed(id int, mops ...Mop) Txn  { return Txn{ID: id, Mops: mops, Outcome: Failed} }
func unknown(id int, mops ...Mop) Txn { return Txn{ID: id, Mops: mops, Outcome: Unknown} }

// TestListAppend: each anomaly, seen in a history made to have it and
// only it; a serial history has none.
func TestListAppend(t *testing.T) {
	for _, c := range []struct {
		name string
		txns []Txn
		want string // "" for none
	}{
		{"serial", []Txn{
			ok(0, rd("x"), ap("x", "1")),
			ok(1, rd("x", "1"), ap("x", "2"), ap("y", "1")),
			ok(2, rd("x", "1", "2"), rd("y", "1")),
			failed(3, ap("x", "9")),
			unknown(4, ap("y", "8")),
		}, ""},
		{"G0", []Txn{
			ok(0, ap("x", "1"), ap("y", "1")),
			ok(1, ap("x", "2"), ap("y", "2")),
			ok(2, rd("x", "1", "2"), rd("y", "2", "1")),
		}, "G0"},
		{"G1a", []Txn{
			failed(0, ap("x", "1")),
			ok(1, rd("x", "1")),
		}, "G1a"},
		{"G1b", []Txn{
			ok(0, ap("x", "1"), ap("x", "2")),
			ok(1, rd("x", "1")),
			ok(2, rd("x", "1", "2")),
		}, "G1b"},
		{"G1c", []Txn{
			ok(0, ap("x", "1"), rd("y", "1")),
			ok(1, ap("y", "1"), rd("x", "1")),
		}, "G1c"},
		{"G-single", []Txn{
			ok(0, ap("x", "1"), ap("y", "1")),
			ok(1, rd("x"), rd("y", "1")),
			ok(2, rd("x", "1")),
		}, "G-single"},
		{"G2 (write skew)", []Txn{
			ok(0, rd("x"), rd("y"), ap("x", "1")),
			ok(1, rd("x"), rd("y"), ap("y", "1")),
			ok(2, rd("x", "1"), rd("y", "1")),
		}, "G2"},
		{"incompatible order", []Txn{
			ok(0, ap("x", "1")),
			ok(1, ap("x", "2")),
			ok(2, rd("x", "1", "2")),
			ok(3, rd("x", "2")),
		}, "incompatible-order"},
		{"an unknown transaction seen to commit joins the graph", []Txn{
			unknown(0, ap("x", "1"), ap("y", "1")),
			ok(1, rd("x"), rd("y", "1")),
			ok(2, rd("x", "1")),
		}, "G-single"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rep := CheckListAppend(c.txns)
			if c.want == "" {
				if len(rep.Anomalies) > 0 {
					t.Fatalf("anomalies in a valid history: %v", rep)
				}
				return
			}
			if rep.Count(c.want) == 0 || len(rep.Anomalies) != rep.Count(c.want) {
				t.Fatalf("want only %s: %v", c.want, rep)
			}
		})
	}
}
