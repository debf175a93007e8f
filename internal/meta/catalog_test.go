package meta

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/cairn-db/cairn/internal/rangedesc"
)

func TestValidSpaceName(t *testing.T) {
	for _, tc := range []struct {
		name string
		rule string // a fragment of the error; "" = valid
	}{
		{"abc", ""},
		{"my-space.v2", ""},
		{"0day", ""},
		{strings.Repeat("a", 63), ""},
		{"1.2.3", ""}, // not an address: three parts
		{"ab", "3 to 63"},
		{strings.Repeat("a", 64), "3 to 63"},
		{"MySpace", "lower case"},
		{"my_space", "only lower-case letters"},
		{"spa ce", "only lower-case letters"},
		{"-abc", "start with"},
		{".abc", "start with"},
		{"abc-", "end with"},
		{"abc.", "end with"},
		{"a..b", `".."`},
		{"192.168.1.1", "IP address"},
		{"é-abc", "only lower-case letters"},
		{"xn--bcher-kva", `start with "xn--"`},
		{"sthree-configurator", `start with "sthree-"`},
		{"amzn-s3-demo-bucket", `start with "amzn-s3-demo-"`},
		{"photos-s3alias", `end with "-s3alias"`},
		{"photos--ol-s3", `end with "--ol-s3"`},
		{"photos.mrap", `end with ".mrap"`},
		{"photos--x-s3", `end with "--x-s3"`},
		{"photos--table-s3", `end with "--table-s3"`},
		{"xn-single", ""},
		{"my-s3alias-not", ""},
	} {
		err := ValidNewSpaceName(tc.name)
		switch {
		case tc.rule == "" && err != nil:
			t.Errorf("ValidSpaceName(%q) = %v, want valid", tc.name, err)
		case tc.rule != "" && err == nil:
			t.Errorf("ValidSpaceName(%q) accepted, want %q", tc.name, tc.rule)
		case tc.rule != "" && (!errors.Is(err, ErrBadSpaceName) || !strings.Contains(err.Error(), tc.rule)):
			t.Errorf("ValidSpaceName(%q) = %v, want ErrBadSpaceName saying %q", tc.name, err, tc.rule)
		}
	}
}

func FuzzValidSpaceName(f *testing.F) {
	for _, s := range []string{"abc", "a..b", "192.168.1.1", "-x-", "my.space-1", "A"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if ValidSpaceName(name) != nil {
			return
		}
		// Whatever is accepted satisfies the rules checked independently.
		if len(name) < 3 || len(name) > 63 || strings.Contains(name, "..") {
			t.Fatalf("accepted %q", name)
		}
		for _, r := range name {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '.') {
				t.Fatalf("accepted %q with %q", name, r)
			}
		}
		if name[0] == '-' || name[0] == '.' || name[len(name)-1] == '-' || name[len(name)-1] == '.' {
			t.Fatalf("accepted %q", name)
		}
	})
}

func TestSpaceSettingsValidate(t *testing.T) {
	for _, tc := range []struct {
		set  SpaceSettings
		want string // error fragments, ";"-separated; "" = valid
	}{
		{SpaceSettings{}, ""},
		{SpaceSettings{Retention: RetainLast, KeepLast: 3, Ranges: 16, Placement: PlaceHash}, ""},
		{SpaceSettings{Retention: RetainDuration, KeepFor: time.Hour}, ""},
		{SpaceSettings{Retention: RetainLast}, "keep_last >= 1"},
		{SpaceSettings{Retention: RetainDuration}, "positive keep_for"},
		{SpaceSettings{Retention: RetainAll, KeepLast: 2}, "takes neither"},
		{SpaceSettings{Retention: "some"}, `retention "some"`},
		{SpaceSettings{Ranges: -1, Placement: "tag:"}, "ranges -1;placement"},
		{SpaceSettings{Placement: "tag:user"}, ""},
		{SpaceSettings{Placement: "random"}, "placement"},
		{SpaceSettings{Ranges: MaxInitialRanges + 1}, "ranges 4097"},
	} {
		set := tc.set
		set.EnsureDefaults()
		err := set.Validate()
		if tc.want == "" {
			if err != nil {
				t.Errorf("%+v: %v", tc.set, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%+v accepted, want %q", tc.set, tc.want)
			continue
		}
		for _, frag := range strings.Split(tc.want, ";") {
			if !strings.Contains(err.Error(), frag) {
				t.Errorf("%+v: %v; want it to mention %q", tc.set, err, frag)
			}
		}
	}
}

// testCatalog runs the catalog and range table through s.
func testCatalog(t *testing.T, s Store) {
	ctx := context.Background()
	c := NewCatalog(s)

	a, err := c.CreateSpace(ctx, "photos", SpaceSettings{})
	if err != nil {
		t.Fatal(err)
	}
	if a.ID == 0 || a.State != SpaceActive || a.Settings.Retention != RetainAll ||
		a.Settings.Ranges != 1 || a.Settings.Placement != PlaceOrdered || a.Created.IsZero() {
		t.Fatalf("created %+v", a)
	}
	if _, err := c.CreateSpace(ctx, "photos", SpaceSettings{}); !errors.Is(err, ErrSpaceExists) {
		t.Fatalf("second CreateSpace: %v, want ErrSpaceExists", err)
	}
	if _, err := c.CreateSpace(ctx, "Bad_Name", SpaceSettings{}); !errors.Is(err, ErrBadSpaceName) {
		t.Fatalf("CreateSpace with a bad name: %v", err)
	}
	if _, err := c.CreateSpace(ctx, "docs", SpaceSettings{Retention: RetainLast}); err == nil {
		t.Fatal("CreateSpace with bad settings succeeded")
	}
	b, err := c.CreateSpace(ctx, "archive", SpaceSettings{Retention: RetainDuration, KeepFor: 90 * 24 * time.Hour, Ranges: 4, Placement: PlaceHash})
	if err != nil {
		t.Fatal(err)
	}
	if b.ID <= a.ID {
		t.Fatalf("IDs not increasing: %d then %d", a.ID, b.ID)
	}
	got, err := c.GetSpace(ctx, "archive")
	if err != nil || got.ID != b.ID || got.Settings != b.Settings || !got.Created.Equal(b.Created) || got.State != SpaceActive {
		t.Fatalf("GetSpace = %+v, %v; want %+v", got, err, b)
	}
	if _, err := c.GetSpace(ctx, "nope"); !errors.Is(err, ErrSpaceNotFound) {
		t.Fatalf("GetSpace of a missing space: %v", err)
	}
	list, err := c.ListSpaces(ctx)
	if err != nil || len(list) != 2 || list[0].Name != "archive" || list[1].Name != "photos" {
		t.Fatalf("ListSpaces = %+v, %v", list, err)
	}

	if err := c.MoveSpaceState(ctx, "photos", SpaceActive, SpaceDeleting); err != nil {
		t.Fatal(err)
	}
	if sp, _ := c.GetSpace(ctx, "photos"); sp.State != SpaceDeleting || sp.ID != a.ID {
		t.Fatalf("after MoveSpaceState: %+v", sp)
	}
	if err := c.MoveSpaceState(ctx, "photos", SpaceDeleting, "gone"); err == nil {
		t.Fatal("MoveSpaceState accepted an unknown state")
	}
	if err := c.MoveSpaceState(ctx, "photos", SpaceActive, SpaceFencing); !errors.Is(err, ErrSpaceState) {
		t.Fatalf("MoveSpaceState from a state the space is not in: %v", err)
	}
	if err := c.MoveSpaceState(ctx, "nope", SpaceActive, SpaceFencing); !errors.Is(err, ErrSpaceNotFound) {
		t.Fatalf("MoveSpaceState of a missing space: %v", err)
	}
	if err := c.DeleteSpace(ctx, "photos"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteSpace(ctx, "photos"); !errors.Is(err, ErrSpaceNotFound) {
		t.Fatalf("second DeleteSpace: %v", err)
	}
	// A re-created space gets a new ID: IDs are never reused.
	a2, err := c.CreateSpace(ctx, "photos", SpaceSettings{})
	if err != nil || a2.ID <= b.ID {
		t.Fatalf("re-created space %+v, %v; want an ID above %d", a2, err, b.ID)
	}

	// Ranges.
	bounds := [][2][]byte{{{}, []byte("g")}, {[]byte("g"), []byte("p")}, {[]byte("p"), nil}}
	rs, err := c.CreateRanges(ctx, b.ID, bounds, []uint64{1, 2, 3})
	if err != nil || len(rs) != 3 {
		t.Fatalf("CreateRanges = %+v, %v", rs, err)
	}
	other, err := c.CreateRanges(ctx, a2.ID, [][2][]byte{{{}, nil}}, []uint64{7})
	if err != nil {
		t.Fatal(err)
	}
	if other[0].ID != rs[2].ID+1 || rs[1].ID != rs[0].ID+1 {
		t.Fatalf("range IDs not consecutive: %d %d %d then %d", rs[0].ID, rs[1].ID, rs[2].ID, other[0].ID)
	}
	for _, bad := range [][][2][]byte{
		nil,
		{{[]byte("b"), []byte("a")}},
		{{[]byte("a"), nil}, {[]byte("b"), nil}},
		{{[]byte("a"), []byte("m")}, {[]byte("c"), nil}},
	} {
		if _, err := c.CreateRanges(ctx, b.ID, bad, []uint64{1}); err == nil {
			t.Errorf("CreateRanges accepted bounds %q", bad)
		}
	}
	if _, err := c.CreateRanges(ctx, b.ID, bounds, nil); err == nil {
		t.Error("CreateRanges accepted no replicas")
	}
	sr, err := c.SpaceRanges(ctx, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(describe(sr)) != fmt.Sprint(describe(rs)) {
		t.Fatalf("SpaceRanges = %v, want %v", describe(sr), describe(rs))
	}
	if sr[2].End != nil || sr[0].Start == nil || len(sr[0].Start) != 0 || sr[0].Epoch != 1 {
		t.Fatalf("bounds did not round-trip: %+v", sr)
	}
	all, err := c.ListRanges(ctx)
	if err != nil || len(all) != 4 {
		t.Fatalf("ListRanges = %v, %v", describe(all), err)
	}
	if err := c.DeleteRanges(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	if sr, _ := c.SpaceRanges(ctx, b.ID); len(sr) != 0 {
		t.Fatalf("ranges left after DeleteRanges: %v", describe(sr))
	}
	if all, _ := c.ListRanges(ctx); len(all) != 1 || all[0].SpaceID != a2.ID {
		t.Fatalf("DeleteRanges touched another space: %v", describe(all))
	}
}

func describe(rs []rangedesc.Range) []string {
	var out []string
	for _, r := range rs {
		out = append(out, fmt.Sprintf("r%d/s%d[%q,%q)%v@%d", r.ID, r.SpaceID, r.Start, r.End, r.Replicas, r.Epoch))
	}
	return out
}

func TestCatalog(t *testing.T) { testCatalog(t, NewMemStore(nil)) }

// TestCatalogConcurrentCreate: racing creators of one name get one winner,
// and racing creators of many names get distinct IDs.
func TestCatalogConcurrentCreate(t *testing.T) {
	ctx := context.Background()
	c := NewCatalog(NewMemStore(nil))
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins, ids := 0, map[uint32]string{}
	for i := range 8 {
		wg.Go(func() {
			if _, err := c.CreateSpace(ctx, "same", SpaceSettings{}); err == nil {
				mu.Lock()
				wins++
				mu.Unlock()
			} else if !errors.Is(err, ErrSpaceExists) {
				t.Error(err)
			}
			sp, err := c.CreateSpace(ctx, fmt.Sprintf("space-%d", i), SpaceSettings{})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			if prev, dup := ids[sp.ID]; dup {
				t.Errorf("ID %d given to %s and %s", sp.ID, prev, sp.Name)
			}
			ids[sp.ID] = sp.Name
			mu.Unlock()
		})
	}
	wg.Wait()
	if wins != 1 {
		t.Fatalf("%d creators of one name won", wins)
	}
}

// TestCatalogFormat pins the stored JSON of each record kind: a change here
// is a format change and needs a new "v".
func TestCatalogFormat(t *testing.T) {
	sp := Space{ID: 7, Name: "photos", Created: time.Date(2026, 11, 21, 6, 30, 0, 0, time.UTC),
		Settings: SpaceSettings{Retention: RetainLast, KeepLast: 3, Ranges: 2, Placement: PlaceHash}, State: SpaceActive}
	want := `{"v":1,"id":7,"name":"photos","created":"2026-11-21T06:30:00Z","settings":{"retention":"last","keep_last":3,"ranges":2,"placement":"hash"},"state":"active"}`
	if got := string(encodeSpace(sp)); got != want {
		t.Errorf("space record\n got %s\nwant %s", got, want)
	}
	r := rangedesc.Range{ID: 1 << 60, SpaceID: 7, Start: []byte("a"), Replicas: []uint64{1, 2}, Epoch: 3}
	want = `{"v":1,"id":"1152921504606846976","space_id":7,"start":"YQ==","end":null,"replicas":[1,2],"epoch":"3"}`
	if got := string(encodeRange(r)); got != want {
		t.Errorf("range record\n got %s\nwant %s", got, want)
	}
	want = `{"v":1,"last":"42"}`
	if got := string(encodeCounter(42)); got != want {
		t.Errorf("counter record\n got %s\nwant %s", got, want)
	}
	want = `{"v":1,"high":"469237760000000000","time":"2026-09-21T14:13:20Z"}`
	if got := string(encodeTSO(uint64(1_790_000_000_000) << 18)); got != want {
		t.Errorf("tso record\n got %s\nwant %s", got, want)
	}
	// A record from a future format is refused, not misread.
	if _, err := decodeSpace(KV{Key: "k", Value: []byte(`{"v":2,"id":1}`)}); err == nil {
		t.Error("decoded a v2 space record")
	}
	if _, err := decodeTSO([]byte(`{"v":2,"high":"1"}`)); err == nil {
		t.Error("decoded a v2 tso record")
	}
}

// TestSetRangeMembers: membership changes are compare-and-set on the
// epoch, so two writers working from the same descriptor cannot both win.
func TestSetRangeMembers(t *testing.T) {
	ctx := context.Background()
	c := NewCatalog(NewMemStore(nil))
	rs, err := c.CreateRanges(ctx, 5, [][2][]byte{{{}, nil}}, []uint64{1, 2, 3})
	if err != nil {
		t.Fatal(err)
	}
	d := rs[0]
	next, err := c.SetRangeMembers(ctx, d, []uint64{1, 2, 3}, []uint64{4})
	if err != nil || next.Epoch != d.Epoch+1 || !next.Holds(4) || next.Holds(9) {
		t.Fatalf("add learner: %+v, %v", next, err)
	}
	if _, err := c.SetRangeMembers(ctx, d, []uint64{1, 2}, nil); !errors.Is(err, ErrConflict) {
		t.Fatalf("write from a stale descriptor: %v", err)
	}
	if _, err := c.SetRangeMembers(ctx, next, nil, nil); err == nil {
		t.Fatal("a range without voters was accepted")
	}
	final, err := c.SetRangeMembers(ctx, next, []uint64{1, 2, 4}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.SpaceRanges(ctx, 5)
	if err != nil || len(got) != 1 || got[0].Epoch != final.Epoch || !slices.Equal(got[0].Replicas, []uint64{1, 2, 4}) || got[0].Learners != nil {
		t.Fatalf("stored %+v, %v", got, err)
	}
}

// oneRangeAndID makes a catalog whose space 5 has one range, [a, z) on
// nodes 1-3, and reserves a second range id.
func oneRangeAndID(t *testing.T) (context.Context, *Catalog, []rangedesc.Range, uint64) {
	t.Helper()
	ctx := context.Background()
	c := NewCatalog(NewMemStore(nil))
	rs, err := c.CreateRanges(ctx, 5, [][2][]byte{{[]byte("a"), []byte("z")}}, []uint64{1, 2, 3})
	if err != nil {
		t.Fatal(err)
	}
	rid, err := c.NewRangeID(ctx)
	if err != nil || rid == rs[0].ID {
		t.Fatalf("new range id %d, %v", rid, err)
	}
	return ctx, c, rs, rid
}

// TestSplitRange: a split shrinks the range and adds the split-off one
// (epoch 1, its parent named); recording it again changes nothing; a key
// outside the range is refused.
func TestSplitRange(t *testing.T) {
	ctx, c, rs, rid := oneRangeAndID(t)
	for _, bad := range []string{"a", "z", "0"} {
		if _, _, err := c.SplitRange(ctx, 5, rs[0].ID, []byte(bad), []byte("z"), rid, []uint64{1, 2, 3}); err == nil || errors.Is(err, ErrNotFound) || errors.Is(err, ErrConflict) {
			t.Fatalf("split at %q: %v, want a refusal for the key", bad, err)
		}
	}
	if _, _, err := c.SplitRange(ctx, 5, rs[0].ID, []byte("m"), []byte("y"), rid, []uint64{1, 2, 3}); !errors.Is(err, ErrConflict) {
		t.Fatalf("split recorded against a table that ends elsewhere: %v", err)
	}
	for range 2 {
		l, r, err := c.SplitRange(ctx, 5, rs[0].ID, []byte("m"), []byte("z"), rid, []uint64{1, 2, 3})
		if err != nil {
			t.Fatal(err)
		}
		if string(l.End) != "m" || l.Epoch != 2 || string(r.Start) != "m" || string(r.End) != "z" || r.Epoch != 1 || r.Parent != l.ID || r.ID != rid {
			t.Fatalf("after the split: left %+v right %+v", l, r)
		}
	}
	got, err := c.SpaceRanges(ctx, 5)
	if err != nil || len(got) != 2 || got[0].ID != rs[0].ID || got[1].ID != rid || got[1].Parent != rs[0].ID {
		t.Fatalf("stored %+v, %v", got, err)
	}
}

// TestMergeRange: a merge is recorded once (again is a no-op), against a
// table whose ranges do not adjoin it is refused, and the table then
// has the one merged range.
func TestMergeRange(t *testing.T) {
	ctx, c, rs, rid := oneRangeAndID(t)
	if _, _, err := c.SplitRange(ctx, 5, rs[0].ID, []byte("m"), []byte("z"), rid, []uint64{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.MergeRange(ctx, 5, rs[0].ID, rid, []byte("n"), []byte("z")); !errors.Is(err, ErrConflict) {
		t.Fatalf("merge of a range that starts elsewhere: %v, want ErrConflict", err)
	}
	for range 2 {
		l, err := c.MergeRange(ctx, 5, rs[0].ID, rid, []byte("m"), []byte("z"))
		if err != nil {
			t.Fatal(err)
		}
		if string(l.Start) != "a" || string(l.End) != "z" || l.Epoch != 3 {
			t.Fatalf("after the merge: %+v", l)
		}
	}
	got, err := c.SpaceRanges(ctx, 5)
	if err != nil || len(got) != 1 || got[0].ID != rs[0].ID || string(got[0].End) != "z" {
		t.Fatalf("stored %+v, %v", got, err)
	}
	if _, err := c.MergeRange(ctx, 5, rs[0].ID, rid, []byte("q"), []byte("y")); !errors.Is(err, ErrConflict) {
		t.Fatalf("merge recorded against a table that ends elsewhere: %v, want ErrConflict", err)
	}
}

// timeoutStore applies every put but reports the first fails of them as
// timed out, as etcd does when it applied a write it could not confirm.
type timeoutStore struct {
	Store
	fails int
}

func (s *timeoutStore) Put(ctx context.Context, key string, value []byte, rev int64) (int64, error) {
	r, err := s.Store.Put(ctx, key, value, rev)
	if err == nil && s.fails > 0 {
		s.fails--
		return 0, fmt.Errorf("meta: put %s: %w", key, rpctypes.ErrGRPCTimeout)
	}
	return r, err
}

// TestCounterOutcomeUnknown: an ID write that applied but was reported as
// timed out is retried from a fresh read, so the IDs handed out stay
// unique (the ones the lost answer reserved are skipped).
func TestCounterOutcomeUnknown(t *testing.T) {
	ts := &timeoutStore{Store: NewMemStore(nil)}
	c := NewCatalog(ts)
	ctx := context.Background()
	a, err := c.NewRangeID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ts.fails = 2
	b, err := c.NewRangeID(ctx)
	if err != nil {
		t.Fatalf("an ID write reported as timed out was not retried: %v", err)
	}
	d, err := c.NewRangeID(ctx)
	if err != nil || b <= a || d <= b {
		t.Fatalf("IDs %d, %d, %d (%v): not increasing", a, b, d, err)
	}
	if b != a+3 {
		t.Fatalf("ID after two unconfirmed writes %d, want %d (the two lost ones skipped)", b, a+3)
	}
}

// TestRegisterOutcomeUnknown: a node registration that applied but was
// reported as timed out (as while the meta service's members change) is
// retried from a fresh read and succeeds; the map has the node.
func TestRegisterOutcomeUnknown(t *testing.T) {
	ts := &timeoutStore{Store: NewMemStore(nil)}
	c := NewCatalog(ts)
	ctx := context.Background()
	ts.fails = 2
	if err := c.RegisterNode(ctx, NodeInfo{ID: 4, Native: "n4:7070", Started: time.Now()}); err != nil {
		t.Fatalf("a registration reported as timed out was not retried: %v", err)
	}
	nodes, err := c.Nodes(ctx)
	if err != nil || len(nodes) != 1 || nodes[0].ID != 4 || nodes[0].State != NodeUp {
		t.Fatalf("cluster map %+v, %v", nodes, err)
	}
}

// TestCreateSpaceOutcomeUnknown: a space create that applied but was
// reported as timed out (the meta service changed leaders under it) is
// settled by reading back: the create succeeds, once, with its own id;
// one that did not apply is written again.
func TestCreateSpaceOutcomeUnknown(t *testing.T) {
	ts := &timeoutStore{Store: NewMemStore(nil)}
	c := NewCatalog(ts)
	ctx := context.Background()
	ts.fails = 1
	sp, err := c.CreateSpace(ctx, "photos", SpaceSettings{})
	if err != nil {
		t.Fatalf("a create reported as timed out was not settled: %v", err)
	}
	got, err := c.GetSpace(ctx, "photos")
	if err != nil || got.ID != sp.ID {
		t.Fatalf("space after the create: %+v, %v (created %+v)", got, err, sp)
	}
	if _, err := c.CreateSpace(ctx, "photos", SpaceSettings{}); !errors.Is(err, ErrSpaceExists) {
		t.Fatalf("a second create of the same name: %v, want ErrSpaceExists", err)
	}
}

// TestCreateRangesOnce: nodes that open a new space at once make one set
// of ranges between them, not overlapping sets; a creation stopped
// half-way is finished from its claimed layout; deleting the ranges
// deletes the layout.
func TestCreateRangesOnce(t *testing.T) {
	c := NewCatalog(NewMemStore(nil))
	ctx := context.Background()
	bounds := [][2][]byte{{{}, []byte("m")}, {[]byte("m"), nil}}
	var wg sync.WaitGroup
	results := make([][]rangedesc.Range, 8)
	errs := make([]error, 8)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = c.CreatePlacedRanges(ctx, 3, bounds, func(uint64) []uint64 { return []uint64{uint64(i + 1)} })
		}()
	}
	wg.Wait()
	all, err := c.SpaceRanges(ctx, 3)
	if err != nil || len(all) != 2 {
		t.Fatalf("ranges of the space after 8 concurrent creates: %+v, %v", all, err)
	}
	for i := range results {
		if errs[i] != nil || len(results[i]) != 2 || results[i][0].ID != all[0].ID || results[i][1].ID != all[1].ID {
			t.Fatalf("create %d: %+v, %v; the space holds %+v", i, results[i], errs[i], all)
		}
	}

	// A creation that claimed its layout and wrote one range before it
	// stopped: the next call writes the other.
	if err := c.store.Delete(ctx, rangeKey(3, all[1].ID), AnyRev); err != nil {
		t.Fatal(err)
	}
	kv, err := c.store.Get(ctx, layoutKey(3))
	if err != nil {
		t.Fatal(err)
	}
	l, _ := decodeLayout(kv)
	l.Done = false
	if _, err := c.store.Put(ctx, layoutKey(3), encodeLayout(l), kv.Rev); err != nil {
		t.Fatal(err)
	}
	again, err := c.CreatePlacedRanges(ctx, 3, bounds, func(uint64) []uint64 { return []uint64{9} })
	if err != nil || len(again) != 2 || again[1].ID != all[1].ID {
		t.Fatalf("finishing an interrupted creation: %+v, %v", again, err)
	}
	if err := c.DeleteRanges(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := c.store.Get(ctx, layoutKey(3)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the layout outlived the space's ranges: %v", err)
	}
}
