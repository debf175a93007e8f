package wire

import "context"

// RouteTable is a space's ranges with the node holding each one's lease:
// the answer to ROUTES, which lets a client send a keyed request straight
// to the node that serves it.
type RouteTable struct {
	// Space is the space's id. A key's position among the ranges is its
	// object key, internal/keys.Object(Space, nil, key); Start and End are
	// object keys too.
	Space uint32
	// Routes are the ranges, sorted by Start, together covering the space.
	Routes []Route
}

// Route is one range of a RouteTable.
type Route struct {
	Range uint64
	Epoch uint64 // the range descriptor's epoch
	// Start and End bound the range's object keys, [Start, End); a nil End
	// is the end of the space.
	Start, End []byte
	// Leaseholder is the native address of the node holding the lease as
	// far as the answering node knows; empty when it does not know.
	Leaseholder string
	// Replicas are the native addresses of the range's voters.
	Replicas []string
}

// RouteService is implemented by a Service that can tell where a space's
// ranges are served (the ROUTES op); a Service without it answers
// CodeUnknownOp, and a client then sends every request to any node.
type RouteService interface {
	Routes(ctx context.Context, space string) (RouteTable, error)
}

// AppendRouteTable encodes t:
//
//	space u32, count uvarint, then count routes of
//	range u64, epoch u64, start bytes, has_end bool, end bytes,
//	leaseholder str, replicas (count uvarint, then str each)
func AppendRouteTable(b []byte, t *RouteTable) []byte {
	b = appendU32(b, t.Space)
	b = appendUvarint(b, uint64(len(t.Routes)))
	for _, r := range t.Routes {
		b = appendU64(b, r.Range)
		b = appendU64(b, r.Epoch)
		b = appendBytes(b, r.Start)
		b = appendBool(b, r.End != nil)
		b = appendBytes(b, r.End)
		b = appendStr(b, r.Leaseholder)
		b = appendUvarint(b, uint64(len(r.Replicas)))
		for _, a := range r.Replicas {
			b = appendStr(b, a)
		}
	}
	return b
}

// DecodeRouteTable decodes an AppendRouteTable encoding.
func DecodeRouteTable(b []byte) (RouteTable, error) {
	d := newDecoder(b)
	t := RouteTable{Space: d.u32("space")}
	n := d.count(8+8+1+1+1+1+1, "routes")
	for range n {
		if d.Err() != nil {
			break
		}
		r := Route{Range: d.u64("range"), Epoch: d.u64("range epoch")}
		r.Start = d.bytes("start")
		hasEnd := d.boolean("has end")
		end := d.bytes("end")
		if hasEnd {
			r.End = append([]byte{}, end...)
		}
		r.Start = append([]byte{}, r.Start...)
		r.Leaseholder = d.str("leaseholder")
		k := d.count(1, "replicas")
		for range k {
			r.Replicas = append(r.Replicas, d.str("replica"))
		}
		t.Routes = append(t.Routes, r)
	}
	if err := d.done(); err != nil {
		return RouteTable{}, err
	}
	return t, nil
}
