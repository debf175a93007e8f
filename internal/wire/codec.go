package wire

import (
	"encoding/binary"

	"github.com/cairn-db/cairn/internal/codec"
	"github.com/cairn-db/cairn/internal/object"
)

// Message bodies use a small hand-written binary encoding:
//
//	str    uvarint length, then that many bytes
//	map    uvarint count, then count × (str key, str value)
//	u8/u16/u32/u64   fixed width, big-endian; i64 is the u64 of its two's complement
//	bool   u8, 0 or 1 (anything else is malformed)
//
// Decoders bound every length by the bytes left in the frame and never panic.

func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendBytes(b []byte, p []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(p)))
	return append(b, p...)
}

func appendUvarint(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }

func appendU16(b []byte, v uint16) []byte { return binary.BigEndian.AppendUint16(b, v) }
func appendU32(b []byte, v uint32) []byte { return binary.BigEndian.AppendUint32(b, v) }
func appendU64(b []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(b, v) }
func appendI64(b []byte, v int64) []byte  { return binary.BigEndian.AppendUint64(b, uint64(v)) }

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

func appendMap(b []byte, m map[string]string) []byte {
	b = binary.AppendUvarint(b, uint64(len(m)))
	for k, v := range m {
		b = appendStr(b, k)
		b = appendStr(b, v)
	}
	return b
}

// decoder reads fields from a body (codec.Decoder). The first error
// sticks; later reads return zero values. A failure is CodeMalformed,
// naming the field ("bad key").
type decoder struct{ codec.Decoder }

func newDecoder(b []byte) decoder {
	return decoder{codec.NewDecoder(b, func(msg string) error { return Errorf(CodeMalformed, "%s", msg) })}
}

// fault is the first failure as the protocol's error, or nil.
func (d *decoder) fault() *Error {
	if err := d.Err(); err != nil {
		return err.(*Error)
	}
	return nil
}

func (d *decoder) fail(what string) {
	d.What = what
	d.Fail("bad %s", what)
}

func (d *decoder) uvarint(what string) uint64 { d.What = what; return d.Uvarint() }

func (d *decoder) take(n uint64, what string) []byte { d.What = what; return d.Take(n) }

func (d *decoder) str(what string) string {
	n := d.uvarint(what)
	return string(d.take(n, what))
}

func (d *decoder) bytes(what string) []byte {
	n := d.uvarint(what)
	return d.take(n, what)
}

func (d *decoder) u8(what string) uint8   { d.What = what; return d.U8() }
func (d *decoder) u16(what string) uint16 { d.What = what; return d.U16() }
func (d *decoder) u32(what string) uint32 { d.What = what; return d.U32() }
func (d *decoder) u64(what string) uint64 { d.What = what; return d.U64() }
func (d *decoder) i64(what string) int64  { return int64(d.u64(what)) }

func (d *decoder) boolean(what string) bool { d.What = what; return d.Bool() }

// count reads an element count and bounds it by the bytes left, given the
// smallest encoding of one element.
func (d *decoder) count(minElem int, what string) int { d.What = what; return d.Count(minElem) }

func (d *decoder) strMap(what string) map[string]string {
	n := d.count(2, what)
	if n == 0 {
		return nil
	}
	m := make(map[string]string, n)
	for i := 0; i < n && d.Err() == nil; i++ {
		k := d.str(what)
		v := d.str(what)
		if _, dup := m[k]; dup {
			d.fail(what + " (duplicate key)")
			return nil
		}
		m[k] = v
	}
	if d.Err() != nil {
		return nil
	}
	return m
}

// done fails unless every byte was consumed.
func (d *decoder) done() *Error {
	_ = d.Done()
	return d.fault()
}

// --- errors ---

// AppendError appends an error body: code u16, message str.
func AppendError(b []byte, e *Error) []byte {
	b = appendU16(b, uint16(e.Code))
	return appendStr(b, e.Message)
}

// DecodeError decodes an error body.
func DecodeError(b []byte) (*Error, error) {
	d := newDecoder(b)
	e := &Error{Code: Code(d.u16("error code")), Message: d.str("error message")}
	if err := d.done(); err != nil {
		return nil, err
	}
	return e, nil
}

// --- spaces ---

func appendSettings(b []byte, s *object.SpaceSettings) []byte {
	b = appendStr(b, s.Retention)
	b = appendU32(b, s.KeepLast)
	b = appendU64(b, s.KeepForSeconds)
	b = appendU32(b, s.Ranges)
	b = appendStr(b, s.Placement)
	return appendU32(b, s.Replicas)
}

func (d *decoder) settings() object.SpaceSettings {
	return object.SpaceSettings{
		Retention:      d.str("retention"),
		KeepLast:       d.u32("keep last"),
		KeepForSeconds: d.u64("keep for"),
		Ranges:         d.u32("ranges"),
		Placement:      d.str("placement"),
		Replicas:       d.u32("replicas"),
	}
}

// AppendCreateSpace encodes a CREATE_SPACE request.
func AppendCreateSpace(b []byte, name string, s *object.SpaceSettings) []byte {
	b = appendStr(b, name)
	return appendSettings(b, s)
}

// DecodeCreateSpace decodes a CREATE_SPACE request.
func DecodeCreateSpace(b []byte) (string, object.SpaceSettings, error) {
	d := newDecoder(b)
	name := d.str("space name")
	s := d.settings()
	if err := d.done(); err != nil {
		return "", object.SpaceSettings{}, err
	}
	return name, s, nil
}

func appendSpaceInfo(b []byte, s *object.SpaceInfo) []byte {
	b = appendU32(b, s.ID)
	b = appendStr(b, s.Name)
	b = appendI64(b, s.Created)
	return appendSettings(b, &s.Settings)
}

func (d *decoder) spaceInfo() object.SpaceInfo {
	return object.SpaceInfo{ID: d.u32("space id"), Name: d.str("space name"), Created: d.i64("created"), Settings: d.settings()}
}

// AppendSpaceInfo encodes a CREATE_SPACE response.
func AppendSpaceInfo(b []byte, s *object.SpaceInfo) []byte { return appendSpaceInfo(b, s) }

// DecodeSpaceInfo decodes a CREATE_SPACE response.
func DecodeSpaceInfo(b []byte) (object.SpaceInfo, error) {
	d := newDecoder(b)
	s := d.spaceInfo()
	if err := d.done(); err != nil {
		return object.SpaceInfo{}, err
	}
	return s, nil
}

// AppendSpaceList encodes a LIST_SPACES response.
func AppendSpaceList(b []byte, l []object.SpaceInfo) []byte {
	b = binary.AppendUvarint(b, uint64(len(l)))
	for i := range l {
		b = appendSpaceInfo(b, &l[i])
	}
	return b
}

// DecodeSpaceList decodes a LIST_SPACES response.
func DecodeSpaceList(b []byte) ([]object.SpaceInfo, error) {
	d := newDecoder(b)
	n := d.count(4+1+8+1+4+8+4+1+4, "space count")
	l := make([]object.SpaceInfo, 0, n)
	for i := 0; i < n && d.Err() == nil; i++ {
		l = append(l, d.spaceInfo())
	}
	if err := d.done(); err != nil {
		return nil, err
	}
	return l, nil
}

// AppendName encodes a DELETE_SPACE request.
func AppendName(b []byte, name string) []byte { return appendStr(b, name) }

// DecodeName decodes a DELETE_SPACE request.
func DecodeName(b []byte) (string, error) {
	d := newDecoder(b)
	s := d.str("name")
	if err := d.done(); err != nil {
		return "", err
	}
	return s, nil
}

// --- objects ---

// minObjectInfo is the smallest encoding of an ObjectInfo.
const minObjectInfo = 1 + 1 + 8 + 8 + 8 + 1 + 32 + 1 + 8 + 1 + 1 + 1

func mapSize(m map[string]string) int {
	n := 10
	for k, v := range m {
		n += len(k) + len(v) + 20
	}
	return n
}

// ObjectInfoSize is an upper bound of the encoded size of o, for sizing
// buffers.
func ObjectInfoSize(o *object.Info) int {
	return 6*10 + 5*8 + 32 + 1 + len(o.Space) + len(o.Key) + len(o.ETag) + len(o.ContentType) +
		mapSize(o.Meta) + mapSize(o.Tags) + mapSize(o.Headers)
}

// AppendObjectInfo encodes an ObjectInfo.
func AppendObjectInfo(b []byte, o *object.Info) []byte {
	b = appendStr(b, o.Space)
	b = appendStr(b, o.Key)
	b = appendU64(b, o.Version)
	b = appendU64(b, o.Parent)
	b = appendI64(b, o.Size)
	b = appendStr(b, o.ETag)
	b = append(b, o.Hash[:]...)
	b = appendStr(b, o.ContentType)
	b = appendI64(b, o.Modified)
	b = appendBool(b, o.DeleteMarker)
	b = appendMap(b, o.Meta)
	b = appendMap(b, o.Tags)
	return appendMap(b, o.Headers)
}

func (d *decoder) objectInfo() object.Info {
	var o object.Info
	o.Space = d.str("space")
	o.Key = d.str("key")
	o.Version = d.u64("version")
	o.Parent = d.u64("parent")
	o.Size = d.i64("size")
	o.ETag = d.str("etag")
	copy(o.Hash[:], d.take(32, "hash"))
	o.ContentType = d.str("content type")
	o.Modified = d.i64("modified")
	o.DeleteMarker = d.boolean("delete marker")
	o.Meta = d.strMap("meta")
	o.Tags = d.strMap("tags")
	o.Headers = d.strMap("headers")
	return o
}

// DecodeObjectInfo decodes an ObjectInfo that fills b.
func DecodeObjectInfo(b []byte) (object.Info, error) {
	d := newDecoder(b)
	o := d.objectInfo()
	if err := d.done(); err != nil {
		return object.Info{}, err
	}
	return o, nil
}

// DecodeObjectInfoPrefix decodes an ObjectInfo at the start of b and returns
// the bytes after it (the inline body of a GET response).
func DecodeObjectInfoPrefix(b []byte) (object.Info, []byte, error) {
	d := newDecoder(b)
	o := d.objectInfo()
	if d.Err() != nil {
		return object.Info{}, nil, d.fault()
	}
	return o, d.Rest(), nil
}

// AppendPutRequest encodes a PutRequest. In a PUT frame the inline body
// bytes follow it.
func AppendPutRequest(b []byte, r *object.PutRequest) []byte {
	b = appendStr(b, r.Space)
	b = appendStr(b, r.Key)
	b = append(b, byte(r.Mode))
	b = appendI64(b, r.Offset)
	b = appendI64(b, r.Size)
	b = appendStr(b, r.ContentType)
	b = appendMap(b, r.Meta)
	b = appendMap(b, r.Tags)
	b = appendMap(b, r.Headers)
	b = appendU64(b, r.IfMatch)
	return appendBool(b, r.IfNoneMatch)
}

func (d *decoder) putRequest(r *object.PutRequest) {
	r.Space = d.str("space")
	r.Key = d.str("key")
	r.Mode = object.PutMode(d.u8("mode"))
	if r.Mode > object.PutAppend {
		d.fail("put mode")
	}
	r.Offset = d.i64("offset")
	r.Size = d.i64("size")
	if r.Size < -1 || r.Offset < 0 {
		d.fail("size or offset")
	}
	r.ContentType = d.str("content type")
	r.Meta = d.strMap("meta")
	r.Tags = d.strMap("tags")
	r.Headers = d.strMap("headers")
	r.IfMatch = d.u64("if-match")
	r.IfNoneMatch = d.boolean("if-none-match")
}

// DecodePutRequest decodes the PutRequest at the start of a PUT frame body
// and returns the inline body bytes after it.
func DecodePutRequest(b []byte) (object.PutRequest, []byte, error) {
	d := newDecoder(b)
	var r object.PutRequest
	d.putRequest(&r)
	if d.Err() != nil {
		return object.PutRequest{}, nil, d.fault()
	}
	return r, d.Rest(), nil
}

func getRequestSize(r *object.GetRequest) int { return 2*10 + 4*8 + len(r.Space) + len(r.Key) }

func putRequestSize(r *object.PutRequest) int {
	return 4*10 + 4*8 + 3 + len(r.Space) + len(r.Key) + len(r.ContentType) + mapSize(r.Meta) + mapSize(r.Tags) +
		mapSize(r.Headers)
}

// AppendGetRequest encodes a GetRequest (GET and STAT).
func AppendGetRequest(b []byte, r *object.GetRequest) []byte {
	b = appendStr(b, r.Space)
	b = appendStr(b, r.Key)
	b = appendU64(b, r.Version)
	b = appendU64(b, r.AsOf)
	b = appendI64(b, r.Offset)
	return appendI64(b, r.Length)
}

func (d *decoder) getRequest(r *object.GetRequest) {
	r.Space = d.str("space")
	r.Key = d.str("key")
	r.Version = d.u64("version")
	r.AsOf = d.u64("as-of")
	r.Offset = d.i64("offset")
	r.Length = d.i64("length")
	if r.Offset < 0 || r.Length < -1 {
		d.fail("range")
	}
}

// DecodeGetRequest decodes a GetRequest.
func DecodeGetRequest(b []byte) (object.GetRequest, error) {
	d := newDecoder(b)
	var r object.GetRequest
	d.getRequest(&r)
	if err := d.done(); err != nil {
		return object.GetRequest{}, err
	}
	return r, nil
}

// AppendDeleteRequest encodes a DeleteRequest.
func AppendDeleteRequest(b []byte, r *object.DeleteRequest) []byte {
	b = appendStr(b, r.Space)
	b = appendStr(b, r.Key)
	return appendU64(b, r.Version)
}

func (d *decoder) deleteRequest(r *object.DeleteRequest) {
	r.Space = d.str("space")
	r.Key = d.str("key")
	r.Version = d.u64("version")
}

// DecodeDeleteRequest decodes a DeleteRequest.
func DecodeDeleteRequest(b []byte) (object.DeleteRequest, error) {
	d := newDecoder(b)
	var r object.DeleteRequest
	d.deleteRequest(&r)
	if err := d.done(); err != nil {
		return object.DeleteRequest{}, err
	}
	return r, nil
}

// AppendListRequest encodes a ListRequest. A listing of live keys ends
// at as_of, as before versions listings existed; an AllVersions one adds
// all_versions and after_version.
func AppendListRequest(b []byte, r *object.ListRequest) []byte {
	b = appendStr(b, r.Space)
	b = appendStr(b, r.Prefix)
	b = appendStr(b, r.StartAfter)
	b = appendU32(b, r.Limit)
	b = appendU64(b, r.AsOf)
	if r.AllVersions || r.AfterVersion != 0 {
		b = appendBool(b, r.AllVersions)
		b = appendU64(b, r.AfterVersion)
	}
	return b
}

// DecodeListRequest decodes a ListRequest.
func DecodeListRequest(b []byte) (object.ListRequest, error) {
	d := newDecoder(b)
	r := object.ListRequest{Space: d.str("space"), Prefix: d.str("prefix"), StartAfter: d.str("start after"),
		Limit: d.u32("limit"), AsOf: d.u64("as-of")}
	if d.Err() == nil && d.Len() > 0 {
		r.AllVersions = d.boolean("all versions")
		r.AfterVersion = d.u64("after version")
	}
	if err := d.done(); err != nil {
		return object.ListRequest{}, err
	}
	return r, nil
}

func appendInfos(b []byte, l []object.Info) []byte {
	b = binary.AppendUvarint(b, uint64(len(l)))
	for i := range l {
		b = AppendObjectInfo(b, &l[i])
	}
	return b
}

func (d *decoder) infos() []object.Info {
	n := d.count(minObjectInfo, "object count")
	if n == 0 {
		return nil
	}
	l := make([]object.Info, 0, n)
	for i := 0; i < n && d.Err() == nil; i++ {
		l = append(l, d.objectInfo())
	}
	return l
}

// AppendListResult encodes a LIST response; next_version follows only
// when it is set (an AllVersions page that ends inside a history).
func AppendListResult(b []byte, r *object.ListResult) []byte {
	b = appendInfos(b, r.Objects)
	b = appendBool(b, r.Truncated)
	b = appendStr(b, r.Next)
	if r.NextVersion != 0 {
		b = appendU64(b, r.NextVersion)
	}
	return b
}

// DecodeListResult decodes a LIST response.
func DecodeListResult(b []byte) (object.ListResult, error) {
	d := newDecoder(b)
	r := object.ListResult{Objects: d.infos(), Truncated: d.boolean("truncated"), Next: d.str("next")}
	if d.Err() == nil && d.Len() > 0 {
		r.NextVersion = d.u64("next version")
	}
	if err := d.done(); err != nil {
		return object.ListResult{}, err
	}
	return r, nil
}

// AppendVersionsRequest encodes a VersionsRequest.
func AppendVersionsRequest(b []byte, r *object.VersionsRequest) []byte {
	b = appendStr(b, r.Space)
	b = appendStr(b, r.Key)
	b = appendU64(b, r.Before)
	return appendU32(b, r.Limit)
}

// DecodeVersionsRequest decodes a VersionsRequest.
func DecodeVersionsRequest(b []byte) (object.VersionsRequest, error) {
	d := newDecoder(b)
	r := object.VersionsRequest{Space: d.str("space"), Key: d.str("key"), Before: d.u64("before"), Limit: d.u32("limit")}
	if err := d.done(); err != nil {
		return object.VersionsRequest{}, err
	}
	return r, nil
}

// AppendVersionsResult encodes a VERSIONS response.
func AppendVersionsResult(b []byte, r *object.VersionsResult) []byte {
	b = appendInfos(b, r.Versions)
	return appendBool(b, r.Truncated)
}

// DecodeVersionsResult decodes a VERSIONS response.
func DecodeVersionsResult(b []byte) (object.VersionsResult, error) {
	d := newDecoder(b)
	r := object.VersionsResult{Versions: d.infos(), Truncated: d.boolean("truncated")}
	if err := d.done(); err != nil {
		return object.VersionsResult{}, err
	}
	return r, nil
}

// PingInfo is the body of a PING response: the server's limits, so a client
// can size its frames.
type PingInfo struct {
	MaxFrame    uint32
	MaxInflight uint32
}

// AppendPingInfo encodes a PING response.
func AppendPingInfo(b []byte, p PingInfo) []byte {
	b = appendU32(b, p.MaxFrame)
	return appendU32(b, p.MaxInflight)
}

// DecodePingInfo decodes a PING response.
func DecodePingInfo(b []byte) (PingInfo, error) {
	d := newDecoder(b)
	p := PingInfo{MaxFrame: d.u32("max frame"), MaxInflight: d.u32("max inflight")}
	if err := d.done(); err != nil {
		return PingInfo{}, err
	}
	return p, nil
}
