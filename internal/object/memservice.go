package object

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"io"
	"sort"
	"strings"
	"sync"
)

// MemService is an in-memory Service for tests of the protocol and of its
// clients: a map of spaces, each a map from key to its versions (oldest
// first). Hooks let tests slow it down and watch what bodies look like from
// the Service's side. It is not a store: nothing is durable or verified.
type MemService struct {
	mu struct {
		sync.Mutex
		spaces  map[string]*memSpace
		nextID  uint32
		clock   uint64
		putErrs []error // every body-read error a Put saw
	}
	// Gates: a Get/Stat of a key with a gate waits until it is closed.
	Gates map[string]chan struct{}
	// SinkSize, SinkSeen: Puts to space "sink" read and count the body but
	// store nothing (for big streams), sending the count to SinkSeen if set;
	// reads of it generate SinkSize bytes (key "corrupt": half of them, then
	// Corrupt).
	SinkSize int64
	SinkSeen chan int64
	PutSeen  chan struct{} // if set, gets a value once a Put starts reading
}

type memSpace struct {
	info SpaceInfo
	objs map[string][]memVersion
}

type memVersion struct {
	info Info
	data []byte
}

func NewMemService() *MemService {
	m := &MemService{Gates: map[string]chan struct{}{}}
	m.mu.spaces = map[string]*memSpace{}
	return m
}

func (m *MemService) PutErrors() []error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]error(nil), m.mu.putErrs...)
}

func (m *MemService) CreateSpace(ctx context.Context, name string, s SpaceSettings) (SpaceInfo, error) {
	if name == "" || strings.ContainsAny(name, "/ ") {
		return SpaceInfo{}, Errorf(BadSpaceName, "%q", name)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.mu.spaces[name]; ok {
		return SpaceInfo{}, Errorf(SpaceExists, "%q", name)
	}
	m.mu.nextID++
	m.mu.clock++
	sp := &memSpace{info: SpaceInfo{ID: m.mu.nextID, Name: name, Created: int64(m.mu.clock), Settings: s},
		objs: map[string][]memVersion{}}
	m.mu.spaces[name] = sp
	return sp.info, nil
}

func (m *MemService) ListSpaces(ctx context.Context) ([]SpaceInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var l []SpaceInfo
	for _, sp := range m.mu.spaces {
		l = append(l, sp.info)
	}
	sort.Slice(l, func(i, j int) bool { return l[i].Name < l[j].Name })
	return l, nil
}

func (m *MemService) DeleteSpace(ctx context.Context, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	sp, ok := m.mu.spaces[name]
	if !ok {
		return Errorf(SpaceNotFound, "%q", name)
	}
	for _, vs := range sp.objs {
		if !vs[len(vs)-1].info.DeleteMarker {
			return Errorf(SpaceNotEmpty, "%q", name)
		}
	}
	delete(m.mu.spaces, name)
	return nil
}

func (m *MemService) spaceLocked(name string) (*memSpace, error) {
	sp, ok := m.mu.spaces[name]
	if !ok {
		return nil, Errorf(SpaceNotFound, "%q", name)
	}
	return sp, nil
}

func (m *MemService) Put(ctx context.Context, req *PutRequest, body io.Reader) (Info, error) {
	if len(req.Key) > 1024 {
		return Info{}, Errorf(KeyTooLong, "%d bytes", len(req.Key))
	}
	if m.PutSeen != nil {
		m.PutSeen <- struct{}{}
	}
	if req.Space == "sink" {
		n, err := io.Copy(io.Discard, body)
		if err != nil {
			m.mu.Lock()
			m.mu.putErrs = append(m.mu.putErrs, err)
			m.mu.Unlock()
			return Info{}, Errorf(Truncated, "%v", err)
		}
		if m.SinkSeen != nil {
			m.SinkSeen <- n
		}
		return Info{Space: req.Space, Key: req.Key, Size: n}, nil
	}
	data, err := io.ReadAll(body)
	if err != nil {
		m.mu.Lock()
		m.mu.putErrs = append(m.mu.putErrs, err)
		m.mu.Unlock()
		return Info{}, Errorf(Truncated, "%v", err)
	}
	if req.Size >= 0 && int64(len(data)) != req.Size {
		return Info{}, Errorf(Truncated, "got %d of %d bytes", len(data), req.Size)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	sp, err := m.spaceLocked(req.Space)
	if err != nil {
		return Info{}, err
	}
	vs := sp.objs[req.Key]
	var cur *memVersion
	if len(vs) > 0 && !vs[len(vs)-1].info.DeleteMarker {
		cur = &vs[len(vs)-1]
	}
	if req.IfMatch != 0 && (cur == nil || cur.info.Version != req.IfMatch) {
		return Info{}, Errorf(PreconditionFailed, "if-match %d", req.IfMatch)
	}
	if req.IfNoneMatch && cur != nil {
		return Info{}, Errorf(PreconditionFailed, "if-none-match")
	}
	var old []byte
	if cur != nil {
		old = cur.data
	}
	switch req.Mode {
	case PutWriteAt:
		n := max(int64(len(old)), req.Offset+int64(len(data)))
		nb := make([]byte, n)
		copy(nb, old)
		copy(nb[req.Offset:], data)
		data = nb
	case PutAppend:
		data = append(append([]byte(nil), old...), data...)
	}
	m.mu.clock++
	sum := md5.Sum(data)
	info := Info{Space: req.Space, Key: req.Key, Version: m.mu.clock, Size: int64(len(data)),
		ETag: hex.EncodeToString(sum[:]), ContentType: req.ContentType, Modified: int64(m.mu.clock),
		Meta: req.Meta, Tags: req.Tags, Headers: req.Headers}
	if len(vs) > 0 {
		info.Parent = vs[len(vs)-1].info.Version
	}
	copy(info.Hash[:], sum[:])
	if req.ETag != "" && req.Mode == PutReplace {
		info.ETag = req.ETag
	}
	sp.objs[req.Key] = append(vs, memVersion{info: info, data: data})
	return info, nil
}

func (m *MemService) find(ctx context.Context, req *GetRequest) (memVersion, error) {
	if g := m.Gates[req.Key]; g != nil {
		select {
		case <-g:
		case <-ctx.Done():
			return memVersion{}, ctx.Err()
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	sp, err := m.spaceLocked(req.Space)
	if err != nil {
		return memVersion{}, err
	}
	vs := sp.objs[req.Key]
	for i := len(vs) - 1; i >= 0; i-- {
		v := vs[i]
		if req.Version != 0 && v.info.Version != req.Version {
			continue
		}
		if req.AsOf != 0 && v.info.Version > req.AsOf {
			continue
		}
		if v.info.DeleteMarker {
			if req.Version != 0 {
				return memVersion{}, Errorf(Deleted, "%d", v.info.Version)
			}
			return memVersion{}, Errorf(NotFound, "%q", req.Key)
		}
		return v, nil
	}
	return memVersion{}, Errorf(NotFound, "%q", req.Key)
}

func (m *MemService) Get(ctx context.Context, req *GetRequest) (Info, io.ReadCloser, error) {
	if req.Space == "sink" {
		var r io.Reader = io.LimitReader(&PatternReader{}, m.SinkSize)
		if req.Key == "corrupt" {
			// Half the bytes, then a checksum failure.
			r = io.MultiReader(io.LimitReader(&PatternReader{}, m.SinkSize/2), errReader{Errorf(Corrupt, "chunk 7")})
		}
		return Info{Space: "sink", Key: req.Key, Size: m.SinkSize}, io.NopCloser(r), nil
	}
	v, err := m.find(ctx, req)
	if err != nil {
		return Info{}, nil, err
	}
	size := int64(len(v.data))
	if req.Offset > size {
		return Info{}, nil, Errorf(InvalidRange, "offset %d past %d", req.Offset, size)
	}
	end := size
	if req.Length >= 0 && req.Offset+req.Length < size {
		end = req.Offset + req.Length
	}
	return v.info, io.NopCloser(bytes.NewReader(v.data[req.Offset:end])), nil
}

func (m *MemService) Stat(ctx context.Context, req *GetRequest) (Info, error) {
	v, err := m.find(ctx, req)
	return v.info, err
}

func (m *MemService) Delete(ctx context.Context, req *DeleteRequest) (Info, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	sp, err := m.spaceLocked(req.Space)
	if err != nil {
		return Info{}, err
	}
	vs := sp.objs[req.Key]
	if req.Version != 0 {
		for i, v := range vs {
			if v.info.Version == req.Version {
				sp.objs[req.Key] = append(vs[:i:i], vs[i+1:]...)
				return v.info, nil
			}
		}
		return Info{}, Errorf(NotFound, "version %d", req.Version)
	}
	if len(vs) == 0 {
		return Info{}, Errorf(NotFound, "%q", req.Key)
	}
	m.mu.clock++
	info := Info{Space: req.Space, Key: req.Key, Version: m.mu.clock, Parent: vs[len(vs)-1].info.Version,
		Modified: int64(m.mu.clock), DeleteMarker: true}
	sp.objs[req.Key] = append(vs, memVersion{info: info})
	return info, nil
}

func (m *MemService) List(ctx context.Context, req *ListRequest) (ListResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	sp, err := m.spaceLocked(req.Space)
	if err != nil {
		return ListResult{}, err
	}
	limit := int(req.Limit)
	if limit == 0 {
		limit = 1000
	}
	var keys []string
	for k, vs := range sp.objs {
		if !strings.HasPrefix(k, req.Prefix) || k < req.StartAfter || (k == req.StartAfter && (req.AfterVersion == 0 || !req.AllVersions)) {
			continue
		}
		if req.AllVersions || !vs[len(vs)-1].info.DeleteMarker {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var res ListResult
	for _, k := range keys {
		vs := sp.objs[k]
		for i := len(vs) - 1; i >= 0; i-- {
			v := vs[i].info
			if req.AllVersions && k == req.StartAfter && v.Version >= req.AfterVersion {
				continue
			}
			if len(res.Objects) == limit {
				res.Truncated = true
				return res, nil
			}
			res.Objects = append(res.Objects, v)
			res.Next = k
			if !req.AllVersions {
				break
			}
			res.NextVersion = v.Version
		}
	}
	res.Next, res.NextVersion = "", 0
	return res, nil
}

func (m *MemService) Versions(ctx context.Context, req *VersionsRequest) (VersionsResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	sp, err := m.spaceLocked(req.Space)
	if err != nil {
		return VersionsResult{}, err
	}
	vs := sp.objs[req.Key]
	var res VersionsResult
	for i := len(vs) - 1; i >= 0; i-- {
		if req.Before != 0 && vs[i].info.Version >= req.Before {
			continue
		}
		if req.Limit != 0 && len(res.Versions) == int(req.Limit) {
			res.Truncated = true
			break
		}
		res.Versions = append(res.Versions, vs[i].info)
	}
	return res, nil
}

// PatternReader yields byte n%251 at offset n, forever; the sink space
// serves it.
type PatternReader struct{ n int64 }

func (p *PatternReader) Read(b []byte) (int, error) {
	for i := range b {
		b[i] = byte((p.n + int64(i)) % 251)
	}
	p.n += int64(len(b))
	return len(b), nil
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
