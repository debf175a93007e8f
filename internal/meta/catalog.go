package meta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Space states.
const (
	SpaceActive   = "active"
	SpaceDeleting = "deleting"
	// SpaceFencing: a delete is stopping writes on every node before it
	// checks that the space is empty; it moves on to deleting, or back
	// to active.
	SpaceFencing = "fencing"
)

// Retention policies and placements.
const (
	RetainAll      = "all"
	RetainLast     = "last"
	RetainDuration = "duration"

	PlaceOrdered = "ordered"
	PlaceHash    = "hash"
	// PlaceTagPrefix starts a "tag:NAME" placement: objects that share
	// tag NAME's value live together (PlacementTag).
	PlaceTagPrefix = "tag:"
)

// maxPlacementTag bounds the NAME of a "tag:NAME" placement (S3's tag
// key limit).
const maxPlacementTag = 128

// PlacementTag returns NAME for a "tag:NAME" placement, and "" for any
// other.
func PlacementTag(placement string) string {
	name, ok := strings.CutPrefix(placement, PlaceTagPrefix)
	if !ok {
		return ""
	}
	return name
}

// MaxInitialRanges bounds SpaceSettings.Ranges.
const MaxInitialRanges = 4096

// SpaceSettings are a space's user-chosen settings. The zero value means the
// defaults (EnsureDefaults).
type SpaceSettings struct {
	// Retention is the history policy: "all" (default), "last" (keep the
	// KeepLast newest versions of each key) or "duration" (keep versions
	// newer than KeepFor).
	Retention string `json:"retention"`
	// KeepLast is the number of versions kept under "last"; at least 1.
	KeepLast int `json:"keep_last,omitempty"`
	// KeepFor is how long versions are kept under "duration"; positive.
	KeepFor time.Duration `json:"keep_for,omitempty"`
	// Ranges is how many ranges the space starts with. Default: 1.
	Ranges int `json:"ranges"`
	// Placement is "ordered" (default: key order, cheap listing), "hash"
	// (keys spread uniformly) or "tag:NAME" (objects that share tag
	// NAME's value live together).
	Placement string `json:"placement"`
	// Replicas is how many nodes hold each range (capped by the number of
	// nodes when the ranges are created). 0 means DefaultReplicas.
	Replicas int `json:"replicas,omitempty"`
}

// EnsureDefaults fills in zero fields.
func (s *SpaceSettings) EnsureDefaults() {
	if s.Retention == "" {
		s.Retention = RetainAll
	}
	if s.Ranges == 0 {
		s.Ranges = 1
	}
	if s.Placement == "" {
		s.Placement = PlaceOrdered
	}
}

// Validate reports every problem with s at once.
func (s SpaceSettings) Validate() error {
	var errs []error
	switch s.Retention {
	case RetainAll:
		if s.KeepLast != 0 || s.KeepFor != 0 {
			errs = append(errs, errors.New(`retention "all" takes neither keep_last nor keep_for`))
		}
	case RetainLast:
		if s.KeepLast < 1 {
			errs = append(errs, fmt.Errorf(`retention "last" needs keep_last >= 1, not %d`, s.KeepLast))
		}
		if s.KeepFor != 0 {
			errs = append(errs, errors.New(`retention "last" does not take keep_for`))
		}
	case RetainDuration:
		if s.KeepFor <= 0 {
			errs = append(errs, fmt.Errorf(`retention "duration" needs a positive keep_for, not %v`, s.KeepFor))
		}
		if s.KeepLast != 0 {
			errs = append(errs, errors.New(`retention "duration" does not take keep_last`))
		}
	default:
		errs = append(errs, fmt.Errorf(`retention %q is not "all", "last" or "duration"`, s.Retention))
	}
	if s.Ranges < 1 || s.Ranges > MaxInitialRanges {
		errs = append(errs, fmt.Errorf("ranges %d is not in [1, %d]", s.Ranges, MaxInitialRanges))
	}
	switch name := PlacementTag(s.Placement); {
	case s.Placement == PlaceOrdered, s.Placement == PlaceHash:
	case name != "" && len(name) <= maxPlacementTag && utf8.ValidString(name):
	case strings.HasPrefix(s.Placement, PlaceTagPrefix):
		errs = append(errs, fmt.Errorf(`placement %q: the tag name is 1-%d bytes of UTF-8`, s.Placement, maxPlacementTag))
	default:
		errs = append(errs, fmt.Errorf(`placement %q is not "ordered", "hash" or "tag:NAME"`, s.Placement))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("meta: space settings: %w", err)
	}
	return nil
}

// Space is one entry of the catalog.
type Space struct {
	ID       uint32
	Name     string
	Created  time.Time
	Settings SpaceSettings
	State    string    // SpaceActive, SpaceFencing or SpaceDeleting
	Since    time.Time // when State last changed (zero: never recorded)
	// Base, BaseID and BaseAt make the space a branch of space Base (id
	// BaseID) as of BaseAt, its branch point; BaseAt is 0 while the
	// branch is being made (every node holds Base's history from then
	// on, as for a pending snapshot).
	Base   string
	BaseID uint32
	BaseAt uint64
	// MergedAt is, for a branch, the timestamp its last merge read it at
	// (0: never merged): where the next merge compares the two sides from.
	MergedAt uint64
	// Indexes are the space's field indexes.
	Indexes []FieldIndex
}

// FieldIndex is a field index a space declares: doc.Path, of Type.
type FieldIndex struct {
	Path    string    `json:"path"`
	Type    string    `json:"type"`  // string, number or time
	State   string    `json:"state"` // IndexBuilding or IndexReady
	Created time.Time `json:"created"`
	// Progress of a build: the ranges filled of how many, the objects
	// read, and why it stopped if it failed (run the add again).
	RangesDone int    `json:"ranges_done,omitempty"`
	Ranges     int    `json:"ranges,omitempty"`
	Objects    int64  `json:"objects,omitempty"`
	Error      string `json:"error,omitempty"`
}

// Field index states.
const (
	IndexBuilding = "building"
	IndexReady    = "ready"
)

// Branch reports whether the space is a branch.
func (sp Space) Branch() bool { return sp.BaseID != 0 }

// Catalog is the space catalog and range table, kept in a Store. Its methods
// may be called concurrently (from any number of nodes): every
// read-modify-write is a compare-and-swap on the key's revision.
type Catalog struct {
	store Store
	clock func() time.Time
	box   SecretBox // seals secrets; nil: none can be kept (WithSecrets)
}

// NewCatalog returns a Catalog over s.
func NewCatalog(s Store) *Catalog { return &Catalog{store: s, clock: time.Now} }

// spaceRecord is the value under /cairn/spaces/<name>.
type spaceRecord struct {
	V        int           `json:"v"`
	ID       uint32        `json:"id"`
	Name     string        `json:"name"`
	Created  time.Time     `json:"created"`
	Settings SpaceSettings `json:"settings"`
	State    string        `json:"state"`
	Since    *time.Time    `json:"state_since,omitempty"`
	Base     string        `json:"base,omitempty"`
	BaseID   uint32        `json:"base_id,omitempty"`
	BaseAt   uint64        `json:"base_at,omitempty"`
	MergedAt uint64        `json:"merged_at,omitempty"`
	Indexes  []FieldIndex  `json:"indexes,omitempty"`
}

func encodeSpace(sp Space) []byte {
	rec := spaceRecord{V: formatVersionOne, ID: sp.ID, Name: sp.Name,
		Created: sp.Created.UTC(), Settings: sp.Settings, State: sp.State,
		Base: sp.Base, BaseID: sp.BaseID, BaseAt: sp.BaseAt, MergedAt: sp.MergedAt, Indexes: sp.Indexes}
	if !sp.Since.IsZero() {
		since := sp.Since.UTC()
		rec.Since = &since
	}
	b, _ := json.Marshal(rec)
	return b
}

func decodeSpace(kv KV) (Space, error) {
	var r spaceRecord
	if err := json.Unmarshal(kv.Value, &r); err != nil {
		return Space{}, fmt.Errorf("meta: decode %s: %w", kv.Key, err)
	}
	if r.V != formatVersionOne {
		return Space{}, fmt.Errorf("meta: %s has format version %d, want %d", kv.Key, r.V, formatVersionOne)
	}
	sp := Space{ID: r.ID, Name: r.Name, Created: r.Created, Settings: r.Settings, State: r.State,
		Base: r.Base, BaseID: r.BaseID, BaseAt: r.BaseAt, MergedAt: r.MergedAt, Indexes: r.Indexes}
	if r.Since != nil {
		sp.Since = *r.Since
	}
	return sp, nil
}

// CreateSpace adds an active space. Zero settings take their defaults. It
// returns ErrBadSpaceName, a settings error, or ErrSpaceExists. The space's
// ID comes from a counter and is never reused, even after deletion.
func (c *Catalog) CreateSpace(ctx context.Context, name string, set SpaceSettings) (Space, error) {
	return c.createSpace(ctx, name, set, "", 0)
}

// CreateBranch adds a pending branch of space base (id baseID) named
// name (CreateSpace's errors); SetBranchPoint completes it.
func (c *Catalog) CreateBranch(ctx context.Context, name string, set SpaceSettings, base string, baseID uint32) (Space, error) {
	if baseID == 0 {
		return Space{}, errors.New("meta: a branch needs the id of its base")
	}
	return c.createSpace(ctx, name, set, base, baseID)
}

// SetBranchPoint completes pending branch name: it branches from its base
// as of at.
func (c *Catalog) SetBranchPoint(ctx context.Context, name string, at uint64) (Space, error) {
	sp, rev, err := c.getSpace(ctx, name)
	if err != nil {
		return Space{}, err
	}
	if !sp.Branch() || sp.BaseAt != 0 {
		return Space{}, fmt.Errorf("meta: %q is not a pending branch", name)
	}
	sp.BaseAt = at
	_, err = c.store.Put(ctx, spaceKey(name), encodeSpace(sp), rev)
	return sp, err
}

// SetBranchMerged records that a merge read branch name (id) at at; an
// older merge's record does not replace a newer one's.
func (c *Catalog) SetBranchMerged(ctx context.Context, name string, id uint32, at uint64) error {
	for {
		sp, rev, err := c.getSpace(ctx, name)
		if err != nil {
			return err
		}
		if !sp.Branch() || sp.ID != id {
			return fmt.Errorf("%w: no branch %q with id %d", ErrSpaceNotFound, name, id)
		}
		if sp.MergedAt >= at {
			return nil
		}
		sp.MergedAt = at
		if _, err = c.store.Put(ctx, spaceKey(name), encodeSpace(sp), rev); !errors.Is(err, ErrConflict) {
			return err
		}
	}
}

func (c *Catalog) createSpace(ctx context.Context, name string, set SpaceSettings, base string, baseID uint32) (Space, error) {
	if err := ValidNewSpaceName(name); err != nil {
		return Space{}, err
	}
	set.EnsureDefaults()
	if err := set.Validate(); err != nil {
		return Space{}, err
	}
	if _, err := c.store.Get(ctx, spaceKey(name)); err == nil {
		return Space{}, fmt.Errorf("%w: %q", ErrSpaceExists, name)
	} else if !errors.Is(err, ErrNotFound) {
		return Space{}, err
	}
	if snap, err := c.snapshotNamed(ctx, name); err != nil || snap {
		if err != nil {
			return Space{}, err
		}
		return Space{}, fmt.Errorf("%w: %q is a snapshot", ErrSpaceExists, name)
	}
	first, err := c.allocIDs(ctx, keySpaceCounter, 1, 1<<32-1)
	if err != nil {
		return Space{}, err
	}
	sp := Space{ID: uint32(first), Name: name, Created: c.clock().UTC(), Settings: set, State: SpaceActive, Base: base, BaseID: baseID}
	// A write whose outcome is unknown (the meta service changed leaders
	// under it) is settled by reading: the space is ours if it carries the
	// id allocated above, which no other create can have.
	deadline := time.Now().Add(counterRetry)
	for {
		_, err := c.store.Put(ctx, spaceKey(name), encodeSpace(sp), 0)
		if err == nil {
			if snap, _ := c.snapshotNamed(ctx, name); snap {
				// A snapshot took the name at the same moment (it checks
				// for spaces after writing itself, too).
				_ = c.store.Delete(ctx, spaceKey(name), AnyRev)
				return Space{}, fmt.Errorf("%w: %q is a snapshot", ErrSpaceExists, name)
			}
			return sp, nil
		}
		if errors.Is(err, ErrConflict) {
			if got, gerr := c.GetSpace(ctx, name); gerr == nil && got.ID == sp.ID {
				return got, nil // an earlier attempt of ours applied
			}
			return Space{}, fmt.Errorf("%w: %q", ErrSpaceExists, name)
		}
		if retry, werr := againAfterUnknown(ctx, err, deadline); werr != nil {
			return Space{}, werr
		} else if !retry {
			return Space{}, err
		}
	}
}

// snapshotNamed reports whether a snapshot is called name.
func (c *Catalog) snapshotNamed(ctx context.Context, name string) (bool, error) {
	_, err := c.store.Get(ctx, snapKey(name))
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// GetSpace returns the space called name, or ErrSpaceNotFound.
func (c *Catalog) GetSpace(ctx context.Context, name string) (Space, error) {
	sp, _, err := c.getSpace(ctx, name)
	return sp, err
}

func (c *Catalog) getSpace(ctx context.Context, name string) (Space, int64, error) {
	kv, err := c.store.Get(ctx, spaceKey(name))
	if errors.Is(err, ErrNotFound) {
		return Space{}, 0, fmt.Errorf("%w: %q", ErrSpaceNotFound, name)
	}
	if err != nil {
		return Space{}, 0, err
	}
	sp, err := decodeSpace(kv)
	return sp, kv.Rev, err
}

// ListSpaces returns every space in name order.
func (c *Catalog) ListSpaces(ctx context.Context) ([]Space, error) {
	kvs, err := c.store.List(ctx, keySpacePrefix)
	if err != nil {
		return nil, err
	}
	out := make([]Space, 0, len(kvs))
	for _, kv := range kvs {
		sp, err := decodeSpace(kv)
		if err != nil {
			return nil, err
		}
		out = append(out, sp)
	}
	return out, nil
}

// ErrSpaceState is returned by MoveSpaceState when the space is not in
// the state the move starts from.
var ErrSpaceState = errors.New("meta: the space is not in the expected state")

// MoveSpaceState moves space name from state from to state to, and
// records when; ErrSpaceState (with the state it is in) if it is not in
// from, ErrSpaceNotFound if it does not exist.
func (c *Catalog) MoveSpaceState(ctx context.Context, name, from, to string) error {
	return c.MoveSpaceStateSince(ctx, name, from, to, time.Time{})
}

// MoveSpaceStateSince is MoveSpaceState that also requires the state to
// have last changed at since (unless since is zero): a move decided on a
// read does not undo a change made after it.
func (c *Catalog) MoveSpaceStateSince(ctx context.Context, name, from, to string, since time.Time) error {
	if !validSpaceState(from) || !validSpaceState(to) {
		return fmt.Errorf("meta: space state %q or %q is not one of %q, %q, %q", from, to, SpaceActive, SpaceFencing, SpaceDeleting)
	}
	// A write whose outcome is unknown (a timeout, a leader change) is
	// settled by reading again: the move is ours if the space is in state
	// to since the moment we wrote.
	deadline := time.Now().Add(counterRetry)
	var wrote time.Time
	for {
		sp, rev, err := c.getSpace(ctx, name)
		if err != nil {
			return err
		}
		if !wrote.IsZero() && sp.State == to && sp.Since.Equal(wrote) {
			return nil // an earlier attempt of ours applied
		}
		if sp.State != from || !since.IsZero() && !sp.Since.Equal(since) {
			return fmt.Errorf("%w: space %q is %s (since %v), not %s", ErrSpaceState, name, sp.State, sp.Since, from)
		}
		wrote = c.clock().UTC()
		sp.State, sp.Since = to, wrote
		_, err = c.store.Put(ctx, spaceKey(name), encodeSpace(sp), rev)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, ErrConflict):
			continue
		}
		if retry, werr := againAfterUnknown(ctx, err, deadline); werr != nil {
			return werr
		} else if !retry {
			return err
		}
	}
}

func validSpaceState(s string) bool {
	return s == SpaceActive || s == SpaceFencing || s == SpaceDeleting
}

// SetRetention changes the history policy of space name (the Retention,
// KeepLast and KeepFor of its settings; the rest stay) and returns the
// space as changed. Writes take the new policy once their node has read
// it (see node's refresh of space settings); versions pruned under the old
// policy stay pruned.
func (c *Catalog) SetRetention(ctx context.Context, name string, set SpaceSettings) (Space, error) {
	for {
		sp, rev, err := c.getSpace(ctx, name)
		if err != nil {
			return Space{}, err
		}
		sp.Settings.Retention, sp.Settings.KeepLast, sp.Settings.KeepFor = set.Retention, set.KeepLast, set.KeepFor
		if sp.Settings.Retention == "" {
			sp.Settings.Retention = RetainAll
		}
		if err := sp.Settings.Validate(); err != nil {
			return Space{}, err
		}
		_, err = c.store.Put(ctx, spaceKey(name), encodeSpace(sp), rev)
		if !errors.Is(err, ErrConflict) {
			return sp, err
		}
		// Lost a race with another writer (or a delete): read again.
	}
}

// UpdateIndexes changes space name's field indexes with fn (which may
// be called again after a lost race) and returns the space.
func (c *Catalog) UpdateIndexes(ctx context.Context, name string, fn func([]FieldIndex) ([]FieldIndex, error)) (Space, error) {
	for {
		sp, rev, err := c.getSpace(ctx, name)
		if err != nil {
			return Space{}, err
		}
		ixs, err := fn(slices.Clone(sp.Indexes))
		if err != nil {
			return Space{}, err
		}
		sp.Indexes = ixs
		_, err = c.store.Put(ctx, spaceKey(name), encodeSpace(sp), rev)
		if !errors.Is(err, ErrConflict) {
			return sp, err
		}
	}
}

// DeleteSpace removes space name from the catalog (its ranges stay until
// DeleteRanges). It returns ErrSpaceNotFound if there is none.
func (c *Catalog) DeleteSpace(ctx context.Context, name string) error {
	err := c.store.Delete(ctx, spaceKey(name), AnyRev)
	if errors.Is(err, ErrNotFound) {
		return fmt.Errorf("%w: %q", ErrSpaceNotFound, name)
	}
	return err
}

// allocIDs reserves n consecutive IDs from the counter at key (starting at 1)
// with a compare-and-swap, and returns the first. IDs above limit are refused.
func (c *Catalog) allocIDs(ctx context.Context, key string, n, limit uint64) (uint64, error) {
	last, err := c.updateCounter(ctx, key, func(last uint64) (uint64, error) {
		if last > limit || n > limit-last {
			return 0, fmt.Errorf("meta: counter %s exhausted at %d", key, last)
		}
		return last + n, nil
	})
	if err != nil {
		return 0, err
	}
	return last + 1, nil
}

// updateCounter moves the counter at key (0 when absent) from last to
// next(last) with a compare-and-swap, retrying on conflict, and returns the
// last it moved from. A next equal to last writes nothing.
//
// A write whose outcome is unknown (the meta service timed out or changed
// leader while it was out, as it may while members join) is retried from
// the read for up to counterRetry: if it did apply, the retry hands out the
// IDs after it, and the ones it reserved are never used (IDs may have
// gaps; they are never reused).
func (c *Catalog) updateCounter(ctx context.Context, key string, next func(last uint64) (uint64, error)) (uint64, error) {
	deadline := time.Now().Add(counterRetry)
	for {
		var last uint64
		var rev int64
		kv, err := c.store.Get(ctx, key)
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			return 0, err
		default:
			if last, err = decodeCounter(kv); err != nil {
				return 0, err
			}
			rev = kv.Rev
		}
		to, err := next(last)
		if err != nil || to == last {
			return last, err
		}
		_, err = c.store.Put(ctx, key, encodeCounter(to), rev)
		if err == nil {
			return last, nil
		}
		if retry, werr := againAfterUnknown(ctx, err, deadline); retry {
			continue
		} else if werr != nil {
			return 0, werr
		}
		if !errors.Is(err, ErrConflict) {
			return 0, err
		}
	}
}

// counterRetry bounds how long a compare-and-swap loop (updateCounter,
// RegisterNode) retries writes whose outcome is unknown.
const counterRetry = 15 * time.Second

// againAfterUnknown, for a compare-and-swap loop whose write failed with
// err, reports whether to go round again from a fresh read: err left the
// write's outcome unknown (unsettled) and the deadline has not passed. It
// waits a little first, and returns ctx's error if ctx ends meanwhile.
func againAfterUnknown(ctx context.Context, err error, deadline time.Time) (bool, error) {
	if !unsettled(err) || !time.Now().Before(deadline) {
		return false, nil
	}
	select {
	case <-ctx.Done():
		return false, ctx.Err()
	case <-time.After(100 * time.Millisecond):
		return true, nil
	}
}

// counterRecord is the value of a counter key: the last ID handed out.
type counterRecord struct {
	V    int    `json:"v"`
	Last uint64 `json:"last,string"` // a string: JSON numbers lose uint64 precision in many readers
}

func encodeCounter(last uint64) []byte {
	b, _ := json.Marshal(counterRecord{V: formatVersionOne, Last: last})
	return b
}

func decodeCounter(kv KV) (uint64, error) {
	var r counterRecord
	if err := json.Unmarshal(kv.Value, &r); err != nil {
		return 0, fmt.Errorf("meta: decode %s: %w", kv.Key, err)
	}
	if r.V != formatVersionOne {
		return 0, fmt.Errorf("meta: %s has format version %d, want %d", kv.Key, r.V, formatVersionOne)
	}
	return r.Last, nil
}
