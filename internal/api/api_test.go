package api_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/cairn-db/cairn/internal/api"
	"github.com/cairn-db/cairn/internal/cluster"
	"github.com/cairn-db/cairn/internal/node"
	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/tstamp"
)

const (
	access = "APITESTKEY"
	secret = "api-test-secret-key"
)

func openNode(t *testing.T) (*node.Node, string) {
	t.Helper()
	n, err := node.Open(context.Background(), node.Config{
		Config: cluster.Config{DataDir: t.TempDir(), MetaPort: -1, PeerPort: -1, MetaClientPort: -1,
			RootAccessKey: access, RootSecretKey: secret, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
		NativePort: -1, HTTPPort: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	n.Serve()
	t.Cleanup(func() { _ = n.Close() })
	return n, "http://" + n.HTTPAddr()
}

// post signs body with SigV4 (service s3) and posts it to path; mangle may
// spoil the request after signing.
func post(t *testing.T, ep, path string, body any, mangle func(*http.Request)) (int, []byte) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, ep+path, bytes.NewReader(b))
	sum := sha256.Sum256(b)
	hash := hex.EncodeToString(sum[:])
	req.Header.Set("X-Amz-Content-Sha256", hash)
	err = v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: access, SecretAccessKey: secret}, req, hash, "s3", "us-east-1", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if mangle != nil {
		mangle(req)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

func must[T any](t *testing.T, status int, body []byte) T {
	t.Helper()
	var v T
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	return v
}

func begin(t *testing.T, ep string) string {
	t.Helper()
	st, b := post(t, ep, "/_cairn/v1/txn/begin", api.BeginRequest{}, nil)
	return must[api.BeginResponse](t, st, b).Start
}

// TestTransactionsOverJSON: begin, a batched read at the snapshot, a
// commit of writes across ranges, a commit whose read set went stale
// (409 naming the key), and requests the endpoints refuse.
func TestTransactionsOverJSON(t *testing.T) {
	ctx := context.Background()
	n, ep := openNode(t)
	if _, err := n.CreateSpace(ctx, "json", object.SpaceSettings{Ranges: 4}); err != nil {
		t.Fatal(err)
	}
	start := begin(t, ep)
	st, b := post(t, ep, "/_cairn/v1/txn/commit", api.CommitRequest{Start: start, Writes: []api.Write{
		{Ref: api.Ref{Space: "json", Key: "!a"}, Data: []byte("A"), ContentType: "text/plain"},
		{Ref: api.Ref{Space: "json", Key: "zb"}, Data: []byte("B"), IfNoneMatch: true},
	}}, nil)
	committed := must[api.CommitResponse](t, st, b).Committed

	snap := begin(t, ep)
	st, b = post(t, ep, "/_cairn/v1/txn/read", api.ReadRequest{At: snap, Objects: []api.Ref{{"json", "!a"}, {"json", "zb"}, {"json", "none"}}}, nil)
	rd := must[api.ReadResponse](t, st, b)
	if len(rd.Objects) != 3 || !rd.Objects[0].Found || string(rd.Objects[0].Data) != "A" || rd.Objects[0].Version != committed ||
		rd.Objects[0].ContentType != "text/plain" || string(rd.Objects[1].Data) != "B" || rd.Objects[2].Found {
		t.Fatalf("read: %s", b)
	}
	// An earlier snapshot does not see the commit.
	st, b = post(t, ep, "/_cairn/v1/txn/read", api.ReadRequest{At: start, Objects: []api.Ref{{"json", "!a"}}}, nil)
	if rd := must[api.ReadResponse](t, st, b); rd.Objects[0].Found {
		t.Fatalf("a snapshot before the commit saw it: %s", b)
	}

	// Optimistic: read !a at snap, someone else writes it, then commit a
	// write of zb with the read set: 409, naming !a.
	st, b = post(t, ep, "/_cairn/v1/txn/commit", api.CommitRequest{Start: begin(t, ep), Writes: []api.Write{{Ref: api.Ref{Space: "json", Key: "!a"}, Data: []byte("A2")}}}, nil)
	must[api.CommitResponse](t, st, b)
	st, b = post(t, ep, "/_cairn/v1/txn/commit", api.CommitRequest{Start: snap,
		Reads:  []api.ReadSeen{{Ref: api.Ref{Space: "json", Key: "!a"}, Version: committed}},
		Writes: []api.Write{{Ref: api.Ref{Space: "json", Key: "zb"}, Data: []byte("B2")}}}, nil)
	var conflict struct{ Error api.ErrorBody }
	if err := json.Unmarshal(b, &conflict); st != http.StatusConflict || err != nil || conflict.Error.Code != "TxnConflict" || !conflict.Error.Retryable ||
		len(conflict.Error.Conflicts) != 1 || conflict.Error.Conflicts[0] != (api.Ref{Space: "json", Key: "!a"}) {
		t.Fatalf("stale read set: %d %s", st, b)
	}
	// A read set that names a version replaced before the start (a client's
	// cache, read at an earlier snapshot) is a conflict too, for a key
	// written and for one only read: 409, not a failed condition.
	for _, w := range []api.Write{{Ref: api.Ref{Space: "json", Key: "!a"}, Data: []byte("A3")}, {Ref: api.Ref{Space: "json", Key: "zb"}, Data: []byte("B3")}} {
		st, b = post(t, ep, "/_cairn/v1/txn/commit", api.CommitRequest{Start: begin(t, ep),
			Reads:  []api.ReadSeen{{Ref: api.Ref{Space: "json", Key: "!a"}, Version: committed}},
			Writes: []api.Write{w}}, nil)
		conflict.Error = api.ErrorBody{}
		if err := json.Unmarshal(b, &conflict); st != http.StatusConflict || err != nil || conflict.Error.Code != "TxnConflict" || !conflict.Error.Retryable {
			t.Fatalf("read set older than the start, writing %s: %d %s", w.Key, st, b)
		}
	}
	// The same with a fresh snapshot commits; and a failed condition is 412.
	fresh := begin(t, ep)
	st, b = post(t, ep, "/_cairn/v1/txn/read", api.ReadRequest{At: fresh, Objects: []api.Ref{{"json", "!a"}}, NoData: true}, nil)
	seen := must[api.ReadResponse](t, st, b).Objects[0].Version
	st, b = post(t, ep, "/_cairn/v1/txn/commit", api.CommitRequest{Start: fresh,
		Reads:  []api.ReadSeen{{Ref: api.Ref{Space: "json", Key: "!a"}, Version: seen}},
		Writes: []api.Write{{Ref: api.Ref{Space: "json", Key: "zb"}, Data: []byte("B2")}, {Ref: api.Ref{Space: "json", Key: "!a"}, Delete: true}}}, nil)
	must[api.CommitResponse](t, st, b)
	st, b = post(t, ep, "/_cairn/v1/txn/commit", api.CommitRequest{Start: begin(t, ep), Writes: []api.Write{{Ref: api.Ref{Space: "json", Key: "zb"}, Data: []byte("x"), IfNoneMatch: true}}}, nil)
	if st != http.StatusPreconditionFailed {
		t.Fatalf("if_none_match on a live key: %d %s", st, b)
	}

	// Refused: no signature, a body that is not the signed one, a start
	// the server did not hand out, a malformed body, an unknown endpoint.
	for _, c := range []struct {
		name   string
		path   string
		body   any
		mangle func(*http.Request)
		status int
	}{
		{"unsigned", "/_cairn/v1/txn/begin", api.BeginRequest{}, func(r *http.Request) { r.Header.Del("Authorization") }, http.StatusForbidden},
		{"body swapped", "/_cairn/v1/txn/begin", api.BeginRequest{}, func(r *http.Request) {
			r.Body = io.NopCloser(bytes.NewReader([]byte("{ }")))
			r.ContentLength = 3
		}, http.StatusBadRequest},
		{"future start", "/_cairn/v1/txn/commit", api.CommitRequest{Start: tstamp.String(tstamp.FromTime(time.Now().Add(time.Hour))),
			Writes: []api.Write{{Ref: api.Ref{Space: "json", Key: "k"}, Data: []byte("x")}}}, nil, http.StatusBadRequest},
		{"unknown field", "/_cairn/v1/txn/read", map[string]any{"at": snap, "objects": []api.Ref{{"json", "zb"}}, "bogus": 1}, nil, http.StatusBadRequest},
		{"no such endpoint", "/_cairn/v1/txn/nope", api.BeginRequest{}, nil, http.StatusNotFound},
	} {
		if st, b := post(t, ep, c.path, c.body, c.mangle); st != c.status {
			t.Errorf("%s: status %d, want %d: %s", c.name, st, c.status, b)
		}
	}
}
