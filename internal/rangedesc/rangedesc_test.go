package rangedesc

import "testing"

// TestRange: bounds, membership and copies.
func TestRange(t *testing.T) {
	r := Range{ID: 1, Start: []byte("b"), End: []byte("m"), Replicas: []uint64{1, 2}, Learners: []uint64{3}}
	for k, want := range map[string]bool{"a": false, "b": true, "l": true, "m": false, "z": false} {
		if r.ContainsKey([]byte(k)) != want {
			t.Errorf("ContainsKey(%q) = %v", k, !want)
		}
	}
	open := Range{}
	if !open.ContainsKey([]byte("anything")) || !open.ContainsKey(nil) {
		t.Error("a range without bounds does not contain every key")
	}
	if !r.Holds(1) || !r.Holds(3) || r.Holds(4) {
		t.Error("Holds does not count voters and learners only")
	}
	c := r.Clone()
	c.Start[0], c.Replicas[0], c.Learners[0] = 'x', 9, 9
	if r.Start[0] != 'b' || r.Replicas[0] != 1 || r.Learners[0] != 3 {
		t.Error("a clone shares memory with its original")
	}
}
