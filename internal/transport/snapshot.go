package transport

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/cairn-db/cairn/internal/replica"
)

// Snapshots travel on their own client stream per snapshot, so a large one
// never holds up the raft messages of the batch stream:
//
//	header frame: magic, version, uvarint range id, uvarint length and the
//	              raftpb.Message (a MsgSnap, metadata only), uvarint SST
//	              count, then uvarint size of each SST
//	data frames:  the SSTs' bytes back to back, at most snapChunk per frame
//
// then the client half-closes and the server answers one empty frame once
// the snapshot is installed, or fails the stream with the reason.
const (
	snapMethod = "/" + ServiceName + "/Snapshot"
	snapChunk  = 1 << 20
	// snapTimeout bounds one snapshot transfer end to end.
	snapTimeout = 30 * time.Minute
)

var snapStream = &grpc.StreamDesc{StreamName: "Snapshot", ClientStreams: true}

// SendSnapshot implements replica.SnapshotTransport.
func (t *Transport) SendSnapshot(ctx context.Context, m replica.Message, ssts []replica.SnapshotSST) error {
	to := m.Msg.GetTo()
	if !t.reachable(to) {
		return fmt.Errorf("transport: node %d is unreachable", to)
	}
	addr, ok := t.opts.Resolve(to)
	if !ok {
		return fmt.Errorf("transport: node %d has no known address", to)
	}
	hdr, err := appendSnapHeader(nil, m, ssts)
	if err != nil {
		return err
	}
	cc, err := newClientConn(addr, t.tlsConfig())
	if err != nil {
		return err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(ctx, snapTimeout)
	defer cancel()
	stream, err := cc.NewStream(ctx, snapStream, snapMethod)
	if err != nil {
		return err
	}
	if err := stream.SendMsg(&frame{b: hdr}); err != nil {
		return fmt.Errorf("transport: snapshot to node %d: %w", to, err)
	}
	// The SSTs stream from their files in snapChunk frames: a range's
	// snapshot is never in memory whole.
	for i, sst := range ssts {
		if err := sendSST(stream, sst); err != nil {
			return fmt.Errorf("transport: snapshot to node %d: SST %d: %w", to, i, err)
		}
	}
	if err := stream.CloseSend(); err != nil {
		return err
	}
	var ack frame
	if err := stream.RecvMsg(&ack); err != nil {
		return fmt.Errorf("transport: snapshot to node %d: %w", to, err)
	}
	return nil
}

// serveSnapshot receives one snapshot and hands it to ReceiveSnapshot.
func (t *Transport) serveSnapshot(ss grpc.ServerStream) error {
	if t.opts.ReceiveSnapshot == nil {
		return errors.New("transport: this node takes no snapshots")
	}
	var f frame
	if err := ss.RecvMsg(&f); err != nil {
		return err
	}
	m, sizes, err := decodeSnapHeader(f.b)
	if err != nil {
		return err
	}
	src := &streamReader{ss: ss}
	if err := t.opts.ReceiveSnapshot(ss.Context(), m, sizes, src); err != nil {
		return err
	}
	if err := ss.RecvMsg(&f); !errors.Is(err, io.EOF) {
		if err == nil {
			err = fmt.Errorf("%w: data after the snapshot's SSTs", ErrBadFrame)
		}
		return err
	}
	return ss.SendMsg(&frame{})
}

// streamReader reads the data frames of a snapshot stream as one stream of
// bytes.
type streamReader struct {
	ss  grpc.ServerStream
	buf []byte
}

func (r *streamReader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		var f frame
		if err := r.ss.RecvMsg(&f); err != nil {
			return 0, err // io.EOF when the sender half-closed
		}
		r.buf = f.b
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

// sendSST sends sst's file, exactly Size bytes, in frames of at most
// snapChunk bytes. Each frame has its own buffer: gRPC writes a frame's
// bytes after SendMsg returns (the raw codec does not copy them).
func sendSST(stream grpc.ClientStream, sst replica.SnapshotSST) error {
	rc, err := sst.Open()
	if err != nil {
		return err
	}
	defer rc.Close()
	left := sst.Size
	for left > 0 {
		buf := make([]byte, min(snapChunk, left))
		n, err := io.ReadFull(rc, buf)
		if err != nil {
			return fmt.Errorf("read the SST file: %w", err)
		}
		if err := stream.SendMsg(&frame{b: buf}); err != nil {
			return err
		}
		left -= int64(n)
	}
	return nil
}

func appendSnapHeader(b []byte, m replica.Message, ssts []replica.SnapshotSST) ([]byte, error) {
	b = append(b, frameMagic, frameVersion)
	b = binary.AppendUvarint(b, m.RangeID)
	b = binary.AppendUvarint(b, uint64(proto.Size(m.Msg)))
	b, err := proto.MarshalOptions{}.MarshalAppend(b, m.Msg)
	if err != nil {
		return nil, err
	}
	b = binary.AppendUvarint(b, uint64(len(ssts)))
	for _, s := range ssts {
		b = binary.AppendUvarint(b, uint64(s.Size))
	}
	return b, nil
}

// maxSnapSSTs bounds the SST count in a header (a range has a few spans).
const maxSnapSSTs = 64

func decodeSnapHeader(b []byte) (replica.Message, []int64, error) {
	bad := func(what string) (replica.Message, []int64, error) {
		return replica.Message{}, nil, fmt.Errorf("%w: snapshot header: %s", ErrBadFrame, what)
	}
	if len(b) < 2 || b[0] != frameMagic || b[1] != frameVersion {
		return bad("bad magic or version")
	}
	b = b[2:]
	rangeID, k := binary.Uvarint(b)
	if k <= 0 {
		return bad("bad range id")
	}
	b = b[k:]
	size, k := binary.Uvarint(b)
	if k <= 0 || size > uint64(len(b)-k) {
		return bad("bad message length")
	}
	b = b[k:]
	msg := &raftpb.Message{}
	if err := proto.Unmarshal(b[:size], msg); err != nil {
		return bad(err.Error())
	}
	if msg.GetType() != raftpb.MsgSnap {
		return bad(fmt.Sprintf("message of type %v", msg.GetType()))
	}
	b = b[size:]
	n, k := binary.Uvarint(b)
	if k <= 0 || n > maxSnapSSTs {
		return bad("bad SST count")
	}
	b = b[k:]
	sizes := make([]int64, n)
	for i := range sizes {
		s, k := binary.Uvarint(b)
		if k <= 0 || s > replica.MaxSnapshotBytes {
			return bad(fmt.Sprintf("bad size of SST %d", i))
		}
		sizes[i], b = int64(s), b[k:]
	}
	if len(b) != 0 {
		return bad("trailing bytes")
	}
	return replica.Message{RangeID: rangeID, Msg: msg}, sizes, nil
}
