package cluster

import (
	"bytes"
	"testing"

	"github.com/cairn-db/cairn/internal/keys"
)

// TestSplitBoundsSpreadOrdinaryKeys: a new space's ranges cover it without
// gaps or overlaps, and keys that begin with lowercase letters or digits
// (most keys) spread over most of them, not into one.
func TestSplitBoundsSpreadOrdinaryKeys(t *testing.T) {
	const space = 9
	for _, count := range []int{1, 2, 4, 8, 16, 256} {
		b := splitBounds(space, count)
		if len(b) != count {
			t.Fatalf("%d ranges asked, %d made", count, len(b))
		}
		if !bytes.Equal(b[0][0], keys.SpaceStart(space)) || !bytes.Equal(b[len(b)-1][1], keys.SpaceEnd(space)) {
			t.Fatalf("%d ranges do not cover the space", count)
		}
		for i := 1; i < len(b); i++ {
			if !bytes.Equal(b[i-1][1], b[i][0]) || bytes.Compare(b[i][0], b[i][1]) >= 0 {
				t.Fatalf("%d ranges: range %d [%x, %x) does not follow [%x, %x)", count, i, b[i][0], b[i][1], b[i-1][0], b[i-1][1])
			}
		}
		used := map[int]bool{}
		for _, k := range []string{"2026/11/26.log", "9f86d081", "alpha", "backup/x", "docs/a", "images/b.png", "logs/1",
			"music", "photos/2", "queue", "reports", "src/main.go", "tmp/x", "users/7", "video", "zeta"} {
			obj := keys.ObjectPrefix(space, nil, []byte(k))
			for i, r := range b {
				if bytes.Compare(obj, r[0]) >= 0 && bytes.Compare(obj, r[1]) < 0 {
					used[i] = true
				}
			}
		}
		if want := min(count, 16) * 3 / 4; len(used) < want {
			t.Errorf("%d ranges: 16 ordinary keys land in %d of them, want at least %d", count, len(used), want)
		}
	}
}
