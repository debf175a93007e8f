package object

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime"
	"strings"
	"sync"
)

// Documents and references. An object whose content type is
// application/json is a document; a JSON object {"$ref": "SPACE/KEY"}
// anywhere in it (and with no other member) is a reference to the latest
// version of SPACE/KEY. Follow reads a document and what it references, to
// a depth, as of one snapshot, in one request (TODS's navigation by
// reference, without a round trip per hop).

// Limits of a Follow.
const (
	// MaxFollowDepth is the deepest a Follow goes.
	MaxFollowDepth = 16
	// MaxFollowObjects bounds the objects one Follow returns.
	MaxFollowObjects = 1000
	// followParallel bounds the reads of one depth in flight at once.
	followParallel = 16
)

// Follower is implemented by a Service that follows references (Store).
type Follower interface {
	Follow(ctx context.Context, req *FollowRequest, allow func(space string) error) (FollowResult, error)
}

// FollowRequest reads Space/Key and the objects its references reach.
type FollowRequest struct {
	Space, Key string
	// Version reads that version of the first object, and what it
	// references as of that version's time; AsOf reads everything as of
	// a time; neither reads the latest, all at one fresh snapshot.
	Version, AsOf uint64
	// Depth is how many references deep to go: 0 reads the first object
	// alone, 1 also those it references, and so on (at most
	// MaxFollowDepth).
	Depth int
	// Budget bounds the bytes of bodies returned (the answer's frame);
	// a body that would pass it comes without its data (TooLarge), and
	// what lies beyond it is not followed. 0: no bound but the objects'.
	Budget int64
}

// Followed is one object a Follow read.
type Followed struct {
	Space, Key string
	// Depth is how many references away from the first object it is.
	Depth int
	// Err, when set, says why it is not here: NotFound (no such object
	// at the snapshot, or it is deleted), AccessDenied (the caller may
	// not read its space), TooLarge (its body is over the budget).
	Err  error
	Info Info
	Data []byte
}

// FollowResult is what a Follow read.
type FollowResult struct {
	// At is the snapshot every object was read at.
	At uint64
	// Objects in the order they were reached (breadth first), each once.
	Objects []Followed
	// Truncated: MaxFollowObjects or the budget stopped it early.
	Truncated bool
}

// IsDocument reports whether a content type makes an object a document.
func IsDocument(contentType string) bool {
	t, _, err := mime.ParseMediaType(contentType)
	return err == nil && t == "application/json"
}

// References returns the "SPACE/KEY" of every reference in doc, in the
// order they appear, each once; nil if doc is not JSON.
func References(doc []byte) []string {
	d := json.NewDecoder(bytes.NewReader(doc))
	d.UseNumber()
	var refs []string
	seen := map[string]bool{}
	// valueOf reads the value that starts with token t; an object that
	// is a reference is recorded.
	var valueOf func(t json.Token) error
	value := func() error {
		t, err := d.Token()
		if err != nil {
			return err
		}
		return valueOf(t)
	}
	valueOf = func(t json.Token) error {
		switch t {
		case json.Delim('['):
			for d.More() {
				if err := value(); err != nil {
					return err
				}
			}
			_, err := d.Token()
			return err
		case json.Delim('{'):
			members, ref, isRef := 0, "", false
			for d.More() {
				k, err := d.Token()
				if err != nil {
					return err
				}
				members++
				v, err := d.Token()
				if err != nil {
					return err
				}
				if r, ok := v.(string); ok && k == "$ref" {
					ref, isRef = r, true
					continue
				}
				if err := valueOf(v); err != nil {
					return err
				}
			}
			if _, err := d.Token(); err != nil {
				return err
			}
			if isRef && members == 1 && !seen[ref] {
				seen[ref] = true
				refs = append(refs, ref)
			}
		}
		return nil
	}
	if value() != nil {
		return nil
	}
	if _, err := d.Token(); err != io.EOF {
		return nil // trailing data: not one JSON value
	}
	return refs
}

// Follow reads req's object and, breadth first, the objects its
// references reach, all as of one snapshot. allow says whether the
// caller may read a space (nil: every one); a reference into a space it
// may not read is reported, not read. A reference that is not
// "SPACE/KEY" is skipped.
func (st *Store) Follow(ctx context.Context, req *FollowRequest, allow func(space string) error) (FollowResult, error) {
	if req.Depth < 0 || req.Depth > MaxFollowDepth {
		return FollowResult{}, Errorf(InvalidArgument, "follow depth %d is outside 0..%d", req.Depth, MaxFollowDepth)
	}
	if allow == nil {
		allow = func(string) error { return nil }
	}
	if err := allow(req.Space); err != nil {
		return FollowResult{}, err
	}
	var res FollowResult
	budget := req.Budget
	take := func(f *Followed, body io.ReadCloser) {
		defer body.Close()
		if req.Budget > 0 && f.Info.Size > budget {
			f.Err = Errorf(TooLarge, "the body of %s/%s (%d bytes) is over what one answer carries; read it on its own", f.Space, f.Key, f.Info.Size)
			res.Truncated = true
			return
		}
		data, err := io.ReadAll(body)
		if err != nil {
			f.Err = err
			return
		}
		if data == nil {
			data = []byte{}
		}
		f.Data = data
		if req.Budget > 0 {
			budget -= int64(len(data))
			if budget <= 0 {
				budget = -1 // nothing more fits
			}
		}
	}

	// The first object: at its version, at a time, or at a fresh snapshot.
	var tx *Txn
	var err error
	first := Followed{Space: req.Space, Key: req.Key}
	switch {
	case req.Version != 0:
		var body io.ReadCloser
		first.Info, body, err = st.Get(ctx, &GetRequest{Space: req.Space, Key: req.Key, Version: req.Version, Length: -1})
		if err != nil {
			return FollowResult{}, err
		}
		take(&first, body)
		tx, err = st.BeginAt(req.Version, TxnOptions{})
	case req.AsOf != 0:
		tx, err = st.BeginAt(req.AsOf, TxnOptions{})
	default:
		tx, err = st.Begin(ctx, TxnOptions{})
	}
	if err != nil {
		return FollowResult{}, err
	}
	defer tx.Rollback()
	res.At = tx.StartTS()
	read := func(f *Followed) error {
		info, body, err := tx.Get(ctx, &GetRequest{Space: f.Space, Key: f.Key, Length: -1})
		if err != nil {
			return err
		}
		f.Info = info
		take(f, body)
		return nil
	}
	if req.Version == 0 {
		if err := read(&first); err != nil {
			return FollowResult{}, err
		}
	}
	res.Objects = append(res.Objects, first)
	seen := map[string]bool{req.Space + "/" + req.Key: true}
	// Level by level: the references of one depth, in order, then their
	// reads, started together (the ranges they live in answer in
	// parallel) and taken in order, so the budget falls the same way
	// whatever answers first.
	level, full := res.Objects, false
	for depth := 1; depth <= req.Depth && !full; depth++ {
		var next []Followed
	refs:
		for _, from := range level {
			if from.Data == nil || !IsDocument(from.Info.ContentType) || budget < 0 {
				continue
			}
			for _, ref := range References(from.Data) {
				space, key, ok := strings.Cut(ref, "/")
				if !ok || space == "" || key == "" || seen[ref] {
					continue
				}
				seen[ref] = true
				if len(res.Objects)+len(next) == MaxFollowObjects {
					res.Truncated, full = true, true
					break refs
				}
				f := Followed{Space: space, Key: key, Depth: depth}
				f.Err = allow(space)
				next = append(next, f)
			}
		}
		type opened struct {
			info Info
			body io.ReadCloser
			err  error
		}
		got := make([]opened, len(next))
		var wg sync.WaitGroup
		sem := make(chan struct{}, followParallel)
		for j := range next {
			if next[j].Err != nil {
				continue
			}
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				o := &got[j]
				o.info, o.body, o.err = tx.Get(ctx, &GetRequest{Space: next[j].Space, Key: next[j].Key, Length: -1})
			}()
		}
		wg.Wait()
		var failed error
		for j := range next {
			o := &got[j]
			switch {
			case next[j].Err != nil:
			case failed != nil:
				if o.body != nil {
					o.body.Close()
				}
			case o.err != nil:
				switch KindOf(o.err) {
				case NotFound, SpaceNotFound, Deleted:
					next[j].Err = o.err
				default:
					failed = o.err
				}
			default:
				next[j].Info = o.info
				take(&next[j], o.body)
			}
		}
		if failed != nil {
			return FollowResult{}, failed
		}
		res.Objects = append(res.Objects, next...)
		level = next
	}
	return res, nil
}
