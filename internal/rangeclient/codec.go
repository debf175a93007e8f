package rangeclient

import (
	"encoding/binary"

	"github.com/cairn-db/cairn/internal/codec"
	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/mvcc"
)

// The cairn.Range message encodings: big-endian integers, u32-length
// prefixed byte strings, and version records with their version.

// AppendRecord encodes a version record with its version (which its own
// encoding leaves to the key).
func AppendRecord(b []byte, rec *mvcc.Record) []byte {
	b = binary.BigEndian.AppendUint64(b, rec.Version)
	return AppendBytes(b, rec.Marshal())
}

// AppendBytes appends v with a u32 length prefix.
func AppendBytes(b, v []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
	return append(b, v...)
}

// AppendOptBytes keeps nil apart from empty (nil bounds are unbounded).
func AppendOptBytes(b, v []byte) []byte {
	if v == nil {
		return append(b, 0)
	}
	return AppendBytes(append(b, 1), v)
}

// appendPage starts a listing reply: whether more follow, and the count.
func appendPage(b []byte, more bool, count int) []byte {
	flag := byte(0)
	if more {
		flag = 1
	}
	return binary.BigEndian.AppendUint32(append(b, flag), uint32(count))
}

func encodeResult(res *kv.Result) []byte {
	var out []byte
	if res.Rec != nil {
		out = AppendRecord(append(out, 1), res.Rec)
	} else {
		out = append(out, 0)
	}
	out = binary.BigEndian.AppendUint32(out, uint32(len(res.Pruned)))
	for _, p := range res.Pruned {
		out = AppendRecord(out, p)
	}
	if len(res.Recs) == 0 && res.Status == (mvcc.TxnStatus{}) && res.Next == nil {
		return out
	}
	// A transaction command's result: the versions per key, the status.
	out = binary.BigEndian.AppendUint32(out, uint32(len(res.Recs)))
	for _, r := range res.Recs {
		if r == nil {
			out = append(out, 0)
		} else {
			out = AppendRecord(append(out, 1), r)
		}
	}
	out = append(out, byte(res.Status.State))
	out = binary.BigEndian.AppendUint64(out, res.Status.CommitTS)
	out = binary.BigEndian.AppendUint64(out, uint64(res.Status.Expires))
	if res.Next != nil {
		// Where an index fill stopped.
		out = AppendOptBytes(out, res.Next)
	}
	return out
}

func decodeResult(b []byte) (*kv.Result, error) {
	d := NewDecoder(b)
	res := &kv.Result{}
	if d.U8() == 1 {
		res.Rec = d.Record()
	}
	res.Pruned = make([]*mvcc.Record, d.Count32(12))
	for i := range res.Pruned {
		res.Pruned[i] = d.Record()
	}
	if d.Err() == nil && d.Len() > 0 {
		res.Recs = make([]*mvcc.Record, d.Count32(1))
		for i := range res.Recs {
			if d.U8() == 1 {
				res.Recs[i] = d.Record()
			}
		}
		res.Status.State = mvcc.TxnState(d.U8())
		res.Status.CommitTS = d.U64()
		res.Status.Expires = int64(d.U64())
		if d.Err() == nil && d.Len() > 0 {
			res.Next = d.OptBytes()
		}
	}
	return res, d.Done()
}

// Decoder reads the encodings above (codec.Decoder): a read that fails is
// ErrMalformed; a version record that fails its own checks, ErrCorrupt.
type Decoder struct{ codec.Decoder }

// NewDecoder decodes b.
func NewDecoder(b []byte) Decoder {
	return Decoder{codec.NewDecoder(b, func(msg string) error {
		return errorf(CodeMalformed, "peer message: %s", msg)
	})}
}

// Bytes reads a u32-length-prefixed field into a copy (never nil).
func (d *Decoder) Bytes() []byte {
	v := d.Bytes32()
	if d.Err() != nil {
		return nil
	}
	return append([]byte{}, v...)
}

// OptBytes reads what AppendOptBytes wrote: nil stays apart from empty.
func (d *Decoder) OptBytes() []byte {
	if d.U8() == 0 {
		return nil
	}
	return d.Bytes()
}

// Record reads what AppendRecord wrote.
func (d *Decoder) Record() *mvcc.Record {
	v := d.U64()
	b := d.Bytes()
	if d.Err() != nil {
		return nil
	}
	rec, err := mvcc.Unmarshal(b)
	if err != nil {
		d.FailWith(errorf(CodeCorrupt, "version record from a peer: %v", err))
		return nil
	}
	rec.Version = v
	return rec
}
