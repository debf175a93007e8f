package wire

import (
	"encoding/hex"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/cairn-db/cairn/internal/object"
)

// TestSessions replays scripts of raw frames against a server over TCP and
// prints every answer (testdata/sessions/*.txt; -rewrite regenerates).
// Requests sent together run concurrently, so scripts send dependent
// requests in separate steps.
//
//	send           one frame per input line: OP id=N [more] [end] [field=value...]
//	recv n=K       read K frames and print them in request id order
//	closed         report whether the server closed the connection
//	reconnect      open a fresh connection
func TestSessions(t *testing.T) {
	datadriven.Walk(t, "testdata/sessions", func(t *testing.T, path string) {
		svc := object.NewMemService()
		addr, _ := startServer(t, svc, ServerOptions{MaxFrame: MinMaxFrame})
		r := rawDial(t, addr)
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			r.t = t
			switch d.Cmd {
			case "send":
				for _, line := range strings.Split(d.Input, "\n") {
					if line = strings.TrimSpace(line); line != "" {
						r.write(scriptFrame(t, line))
					}
				}
				return ""
			case "recv":
				n := 1
				if d.HasArg("n") {
					d.ScanArgs(t, "n", &n)
				}
				// Requests sent together run concurrently and may be
				// answered in any order: print answers by request id.
				type answer struct {
					id   uint32
					line string
				}
				var as []answer
				for range n {
					h, body := r.read()
					as = append(as, answer{h.ID, showFrame(h, body)})
				}
				sort.SliceStable(as, func(i, j int) bool { return as[i].id < as[j].id })
				var b strings.Builder
				for _, a := range as {
					b.WriteString(a.line + "\n")
				}
				return b.String()
			case "closed":
				r.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
				var one [1]byte
				if _, err := io.ReadFull(r.br, one[:]); err != nil {
					return "closed\n"
				}
				return "open\n"
			case "reconnect":
				r = rawDial(t, addr)
				return ""
			}
			t.Fatalf("unknown command %q", d.Cmd)
			return ""
		})
	})
}

// scriptFrame builds a frame from a script line.
func scriptFrame(t *testing.T, line string) []byte {
	f := strings.Fields(line)
	args := map[string]string{}
	var flags uint16
	for _, a := range f[1:] {
		k, v, ok := strings.Cut(a, "=")
		switch {
		case ok:
			args[k] = v
		case a == "more":
			flags |= FlagMore
		case a == "end":
			flags |= FlagEnd
		case a == "response":
			flags |= FlagResponse
		default:
			t.Fatalf("bad token %q", a)
		}
	}
	num := func(k string, def int64) int64 {
		v, ok := args[k]
		if !ok {
			return def
		}
		n, err := strconv.ParseInt(v, 0, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", k, v, err)
		}
		return n
	}
	id := uint32(num("id", 1))
	get := func() *object.GetRequest {
		return &object.GetRequest{Space: args["space"], Key: args["key"], Version: uint64(num("version", 0)),
			AsOf: uint64(num("asof", 0)), Offset: num("offset", 0), Length: num("length", -1)}
	}
	var op Op
	var body []byte
	switch f[0] {
	case "RAW": // the whole frame, header included, in hex
		b, err := hex.DecodeString(args["hex"])
		if err != nil {
			t.Fatal(err)
		}
		return b
	case "OVERSIZE": // a header announcing len bytes, and no body
		var hb [HeaderLen]byte
		PutHeader(hb[:], Header{Version: Version, Op: OpPut, ID: id, Len: uint32(num("len", 0))})
		return hb[:]
	case "PING":
		op = OpPing
	case "CREATE_SPACE":
		op, body = OpCreateSpace, AppendCreateSpace(nil, args["name"], &object.SpaceSettings{Retention: args["retention"]})
	case "LIST_SPACES":
		op = OpListSpaces
	case "DELETE_SPACE":
		op, body = OpDeleteSpace, AppendName(nil, args["name"])
	case "PUT":
		op = OpPut
		body = AppendPutRequest(nil, &object.PutRequest{Space: args["space"], Key: args["key"], Size: num("size", -1),
			Mode: object.PutMode(num("mode", 0)), Offset: num("offset", 0), IfMatch: uint64(num("ifmatch", 0)),
			IfNoneMatch: args["ifnonematch"] == "true"})
		body = append(body, args["body"]...)
	case "DATA":
		op, body = OpData, []byte(args["body"])
	case "CANCEL":
		op = OpCancel
	case "GET":
		op, body = OpGet, AppendGetRequest(nil, get())
	case "STAT":
		op, body = OpStat, AppendGetRequest(nil, get())
	case "DELETE":
		op, body = OpDelete, AppendDeleteRequest(nil, &object.DeleteRequest{Space: args["space"], Key: args["key"], Version: uint64(num("version", 0))})
	case "LIST":
		op, body = OpList, AppendListRequest(nil, &object.ListRequest{Space: args["space"], Prefix: args["prefix"], Limit: uint32(num("limit", 0))})
	case "VERSIONS":
		op, body = OpVersions, AppendVersionsRequest(nil, &object.VersionsRequest{Space: args["space"], Key: args["key"]})
	case "OP": // any opcode with a hex body
		op = Op(num("code", 0))
		b, err := hex.DecodeString(args["hex"])
		if err != nil {
			t.Fatal(err)
		}
		body = b
	default:
		t.Fatalf("unknown frame %q", f[0])
	}
	return AppendFrame(nil, op, flags, id, body)
}

func showFlags(fl uint16) string {
	var s []string
	for _, f := range []struct {
		bit  uint16
		name string
	}{{FlagResponse, "response"}, {FlagError, "error"}, {FlagMore, "more"}, {FlagEnd, "end"}} {
		if fl&f.bit != 0 {
			s = append(s, f.name)
		}
	}
	return strings.Join(s, ",")
}

func showInfo(o *object.Info) string {
	s := fmt.Sprintf("%s/%s v%d parent=%d size=%d", o.Space, o.Key, o.Version, o.Parent, o.Size)
	if o.DeleteMarker {
		s += " delete-marker"
	}
	return s
}

// showFrame prints an answer frame and its decoded body.
func showFrame(h Header, body []byte) string {
	head := fmt.Sprintf("%s id=%d [%s]", h.Op, h.ID, showFlags(h.Flags))
	if h.Flags&FlagError != 0 {
		e, err := DecodeError(body)
		if err != nil {
			return head + " undecodable error: " + err.Error()
		}
		return fmt.Sprintf("%s error %d (%s): %s", head, e.Code, e.Code, e.Message)
	}
	var s string
	var err error
	switch h.Op {
	case OpPing:
		var p PingInfo
		p, err = DecodePingInfo(body)
		s = fmt.Sprintf("max-frame=%d max-inflight=%d", p.MaxFrame, p.MaxInflight)
	case OpCreateSpace:
		var sp object.SpaceInfo
		sp, err = DecodeSpaceInfo(body)
		s = fmt.Sprintf("space %d %s", sp.ID, sp.Name)
	case OpListSpaces:
		var l []object.SpaceInfo
		l, err = DecodeSpaceList(body)
		for _, sp := range l {
			s += sp.Name + " "
		}
	case OpDeleteSpace:
		s = fmt.Sprintf("%d bytes", len(body))
	case OpPut, OpStat, OpDelete:
		var o object.Info
		o, err = DecodeObjectInfo(body)
		s = showInfo(&o)
	case OpGet:
		var o object.Info
		var rest []byte
		o, rest, err = DecodeObjectInfoPrefix(body)
		s = fmt.Sprintf("%s data=%q", showInfo(&o), rest)
	case OpData:
		s = fmt.Sprintf("%d bytes", len(body))
	case OpList:
		var l object.ListResult
		l, err = DecodeListResult(body)
		for _, o := range l.Objects {
			s += o.Key + " "
		}
		s += fmt.Sprintf("truncated=%v next=%q", l.Truncated, l.Next)
	case OpVersions:
		var l object.VersionsResult
		l, err = DecodeVersionsResult(body)
		for _, o := range l.Versions {
			s += fmt.Sprintf("v%d ", o.Version)
		}
	}
	if err != nil {
		s = "undecodable: " + err.Error()
	}
	return strings.TrimSpace(head + " " + s)
}
