package transport

import (
	"fmt"

	"google.golang.org/grpc/mem"
)

// frame is the message of every stream of the peer service: bytes this
// package encodes itself.
type frame struct{ b []byte }

// rawCodec passes frames to and from gRPC unchanged.
type rawCodec struct{}

func (rawCodec) Name() string { return "cairn-raw" }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	f, ok := v.(*frame)
	if !ok {
		return nil, fmt.Errorf("transport: cannot encode %T", v)
	}
	return mem.BufferSlice{mem.SliceBuffer(f.b)}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	f, ok := v.(*frame)
	if !ok {
		return fmt.Errorf("transport: cannot decode into %T", v)
	}
	f.b = data.Materialize() // a copy: data is freed when this returns
	return nil
}
