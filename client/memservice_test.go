package client

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"io"
	"sort"
	"strings"
	"sync"

	"github.com/cairn-db/cairn/internal/wire"
)

// memService is an in-memory wire.Service (a copy of the one in package
// wire's tests): a map of spaces, each a map from key
// to its versions (oldest first). Hooks let tests slow it down and watch
// what bodies look like from the Service's side.
type memService struct {
	mu struct {
		sync.Mutex
		spaces  map[string]*memSpace
		nextID  uint32
		clock   uint64
		putErrs []error // every body-read error a Put saw
	}
	// gates: a Get/Stat of a key with a gate waits until it is closed.
	gates map[string]chan struct{}
	// sink: Puts to this space read and count the body but store nothing
	// (for big streams); reads of it generate sinkSize bytes.
	sinkSize int64
	sinkSeen chan int64
	putSeen  chan struct{} // if set, gets a value once a Put starts reading
}

type memSpace struct {
	info wire.SpaceInfo
	objs map[string][]memVersion
}

type memVersion struct {
	info wire.ObjectInfo
	data []byte
}

func newMemService() *memService {
	m := &memService{gates: map[string]chan struct{}{}}
	m.mu.spaces = map[string]*memSpace{}
	return m
}

func (m *memService) putErrors() []error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]error(nil), m.mu.putErrs...)
}

func (m *memService) CreateSpace(ctx context.Context, name string, s wire.SpaceSettings) (wire.SpaceInfo, error) {
	if name == "" || strings.ContainsAny(name, "/ ") {
		return wire.SpaceInfo{}, wire.Errorf(wire.CodeBadSpaceName, "%q", name)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.mu.spaces[name]; ok {
		return wire.SpaceInfo{}, wire.Errorf(wire.CodeSpaceExists, "%q", name)
	}
	m.mu.nextID++
	m.mu.clock++
	sp := &memSpace{info: wire.SpaceInfo{ID: m.mu.nextID, Name: name, Created: int64(m.mu.clock), Settings: s},
		objs: map[string][]memVersion{}}
	m.mu.spaces[name] = sp
	return sp.info, nil
}

func (m *memService) ListSpaces(ctx context.Context) ([]wire.SpaceInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var l []wire.SpaceInfo
	for _, sp := range m.mu.spaces {
		l = append(l, sp.info)
	}
	sort.Slice(l, func(i, j int) bool { return l[i].Name < l[j].Name })
	return l, nil
}

func (m *memService) DeleteSpace(ctx context.Context, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	sp, ok := m.mu.spaces[name]
	if !ok {
		return wire.Errorf(wire.CodeSpaceNotFound, "%q", name)
	}
	for _, vs := range sp.objs {
		if !vs[len(vs)-1].info.DeleteMarker {
			return wire.Errorf(wire.CodeSpaceNotEmpty, "%q", name)
		}
	}
	delete(m.mu.spaces, name)
	return nil
}

func (m *memService) spaceLocked(name string) (*memSpace, error) {
	sp, ok := m.mu.spaces[name]
	if !ok {
		return nil, wire.Errorf(wire.CodeSpaceNotFound, "%q", name)
	}
	return sp, nil
}

func (m *memService) Put(ctx context.Context, req *wire.PutRequest, body io.Reader) (wire.ObjectInfo, error) {
	if len(req.Key) > 1024 {
		return wire.ObjectInfo{}, wire.Errorf(wire.CodeKeyTooLong, "%d bytes", len(req.Key))
	}
	if m.putSeen != nil {
		m.putSeen <- struct{}{}
	}
	if req.Space == "sink" {
		n, err := io.Copy(io.Discard, body)
		if err != nil {
			m.mu.Lock()
			m.mu.putErrs = append(m.mu.putErrs, err)
			m.mu.Unlock()
			return wire.ObjectInfo{}, wire.Errorf(wire.CodeTruncated, "%v", err)
		}
		if m.sinkSeen != nil {
			m.sinkSeen <- n
		}
		return wire.ObjectInfo{Space: req.Space, Key: req.Key, Size: n}, nil
	}
	data, err := io.ReadAll(body)
	if err != nil {
		m.mu.Lock()
		m.mu.putErrs = append(m.mu.putErrs, err)
		m.mu.Unlock()
		return wire.ObjectInfo{}, wire.Errorf(wire.CodeTruncated, "%v", err)
	}
	if req.Size >= 0 && int64(len(data)) != req.Size {
		return wire.ObjectInfo{}, wire.Errorf(wire.CodeTruncated, "got %d of %d bytes", len(data), req.Size)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	sp, err := m.spaceLocked(req.Space)
	if err != nil {
		return wire.ObjectInfo{}, err
	}
	vs := sp.objs[req.Key]
	var cur *memVersion
	if len(vs) > 0 && !vs[len(vs)-1].info.DeleteMarker {
		cur = &vs[len(vs)-1]
	}
	if req.IfMatch != 0 && (cur == nil || cur.info.Version != req.IfMatch) {
		return wire.ObjectInfo{}, wire.Errorf(wire.CodePreconditionFailed, "if-match %d", req.IfMatch)
	}
	if req.IfNoneMatch && cur != nil {
		return wire.ObjectInfo{}, wire.Errorf(wire.CodePreconditionFailed, "if-none-match")
	}
	var old []byte
	if cur != nil {
		old = cur.data
	}
	switch req.Mode {
	case wire.PutWriteAt:
		n := max(int64(len(old)), req.Offset+int64(len(data)))
		nb := make([]byte, n)
		copy(nb, old)
		copy(nb[req.Offset:], data)
		data = nb
	case wire.PutAppend:
		data = append(append([]byte(nil), old...), data...)
	}
	m.mu.clock++
	sum := md5.Sum(data)
	info := wire.ObjectInfo{Space: req.Space, Key: req.Key, Version: m.mu.clock, Size: int64(len(data)),
		ETag: hex.EncodeToString(sum[:]), ContentType: req.ContentType, Modified: int64(m.mu.clock),
		Meta: req.Meta, Tags: req.Tags}
	if len(vs) > 0 {
		info.Parent = vs[len(vs)-1].info.Version
	}
	copy(info.Hash[:], sum[:])
	sp.objs[req.Key] = append(vs, memVersion{info: info, data: data})
	return info, nil
}

func (m *memService) find(ctx context.Context, req *wire.GetRequest) (memVersion, error) {
	if g := m.gates[req.Key]; g != nil {
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
				return memVersion{}, wire.Errorf(wire.CodeDeleted, "%d", v.info.Version)
			}
			return memVersion{}, wire.Errorf(wire.CodeNotFound, "%q", req.Key)
		}
		return v, nil
	}
	return memVersion{}, wire.Errorf(wire.CodeNotFound, "%q", req.Key)
}

func (m *memService) Get(ctx context.Context, req *wire.GetRequest) (wire.ObjectInfo, io.ReadCloser, error) {
	if req.Space == "sink" {
		return wire.ObjectInfo{Space: "sink", Key: req.Key, Size: m.sinkSize},
			io.NopCloser(io.LimitReader(&patternReader{}, m.sinkSize)), nil
	}
	v, err := m.find(ctx, req)
	if err != nil {
		return wire.ObjectInfo{}, nil, err
	}
	size := int64(len(v.data))
	if req.Offset > size {
		return wire.ObjectInfo{}, nil, wire.Errorf(wire.CodeInvalidRange, "offset %d past %d", req.Offset, size)
	}
	end := size
	if req.Length >= 0 && req.Offset+req.Length < size {
		end = req.Offset + req.Length
	}
	return v.info, io.NopCloser(bytes.NewReader(v.data[req.Offset:end])), nil
}

func (m *memService) Stat(ctx context.Context, req *wire.GetRequest) (wire.ObjectInfo, error) {
	v, err := m.find(ctx, req)
	return v.info, err
}

func (m *memService) Delete(ctx context.Context, req *wire.DeleteRequest) (wire.ObjectInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	sp, err := m.spaceLocked(req.Space)
	if err != nil {
		return wire.ObjectInfo{}, err
	}
	vs := sp.objs[req.Key]
	if req.Version != 0 {
		for i, v := range vs {
			if v.info.Version == req.Version {
				sp.objs[req.Key] = append(vs[:i:i], vs[i+1:]...)
				return v.info, nil
			}
		}
		return wire.ObjectInfo{}, wire.Errorf(wire.CodeNotFound, "version %d", req.Version)
	}
	if len(vs) == 0 {
		return wire.ObjectInfo{}, wire.Errorf(wire.CodeNotFound, "%q", req.Key)
	}
	m.mu.clock++
	info := wire.ObjectInfo{Space: req.Space, Key: req.Key, Version: m.mu.clock, Parent: vs[len(vs)-1].info.Version,
		Modified: int64(m.mu.clock), DeleteMarker: true}
	sp.objs[req.Key] = append(vs, memVersion{info: info})
	return info, nil
}

func (m *memService) List(ctx context.Context, req *wire.ListRequest) (wire.ListResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	sp, err := m.spaceLocked(req.Space)
	if err != nil {
		return wire.ListResult{}, err
	}
	limit := int(req.Limit)
	if limit == 0 {
		limit = 1000
	}
	var keys []string
	for k, vs := range sp.objs {
		if strings.HasPrefix(k, req.Prefix) && k > req.StartAfter && !vs[len(vs)-1].info.DeleteMarker {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var res wire.ListResult
	for i, k := range keys {
		if i == limit {
			res.Truncated = true
			break
		}
		vs := sp.objs[k]
		res.Objects = append(res.Objects, vs[len(vs)-1].info)
		res.Next = k
	}
	if !res.Truncated {
		res.Next = ""
	}
	return res, nil
}

func (m *memService) Versions(ctx context.Context, req *wire.VersionsRequest) (wire.VersionsResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	sp, err := m.spaceLocked(req.Space)
	if err != nil {
		return wire.VersionsResult{}, err
	}
	vs := sp.objs[req.Key]
	var res wire.VersionsResult
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

// patternReader yields byte n%251 at offset n, forever.
type patternReader struct{ n int64 }

func (p *patternReader) Read(b []byte) (int, error) {
	for i := range b {
		b[i] = byte((p.n + int64(i)) % 251)
	}
	p.n += int64(len(b))
	return len(b), nil
}
