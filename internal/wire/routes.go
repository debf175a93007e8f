package wire

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
