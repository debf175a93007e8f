package s3

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/cairn-db/cairn/internal/tstamp"
	"github.com/cairn-db/cairn/internal/wire"
)

// listService answers List from a fixed set of versions, sorted by key
// and newest first within one; the other methods are not implemented.
type listService struct {
	wire.Service
	versions []wire.ObjectInfo
}

func (s *listService) List(_ context.Context, req *wire.ListRequest) (wire.ListResult, error) {
	i := sort.Search(len(s.versions), func(i int) bool {
		o := &s.versions[i]
		if req.AllVersions && req.AfterVersion != 0 && o.Key == req.StartAfter {
			return o.Version < req.AfterVersion
		}
		return o.Key > req.StartAfter
	})
	var res wire.ListResult
	for ; i < len(s.versions); i++ {
		o := s.versions[i]
		if !req.AllVersions && (o.DeleteMarker || (len(res.Objects) > 0 && res.Objects[len(res.Objects)-1].Key == o.Key)) {
			continue // only each key's newest version, if live
		}
		if len(res.Objects) == int(req.Limit) {
			last := res.Objects[len(res.Objects)-1]
			res.Truncated, res.Next = true, last.Key
			if req.AllVersions {
				res.NextVersion = last.Version
			}
			break
		}
		res.Objects = append(res.Objects, o)
	}
	return res, nil
}

// discardWriter is a ResponseWriter that keeps only the status and the
// number of body bytes.
type discardWriter struct {
	h      http.Header
	status int
	n      int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) WriteHeader(status int)      { w.status = status }
func (w *discardWriter) Write(b []byte) (int, error) { w.n += len(b); return len(b), nil }

// BenchmarkListObjects serves one listing page of 1,000 keys through the
// Handler (signature check, paging over the service, the XML document)
// from a service that answers from memory.
func BenchmarkListObjects(b *testing.B) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	svc := &listService{}
	for i := range 1000 {
		key := fmt.Sprintf("photos/2026/%08d.jpg", i)
		v := tstamp.Make(now.Add(-time.Duration(i)*time.Second).UnixNano(), 0)
		svc.versions = append(svc.versions, wire.ObjectInfo{Key: key, Version: v, Size: 1024,
			ETag: "9b2cf535f27731c974343645a3985328", Modified: tstamp.Time(v).UnixNano()})
	}
	h := New(Config{Service: svc, Credentials: StaticCredentials{"AK": "secret"}, Now: func() time.Time { return now }})
	for _, c := range []struct{ name, query string }{
		{"v2", "list-type=2&max-keys=1000"},
		{"v2-url", "list-type=2&max-keys=1000&encoding-type=url"},
		{"v1", "max-keys=1000"},
		{"versions", "versions=&max-keys=1000"},
	} {
		b.Run(c.name, func(b *testing.B) {
			r := httptest.NewRequest(http.MethodGet, "http://s3.local/bench?"+c.query, nil)
			empty := sha256.Sum256(nil)
			payload := hex.EncodeToString(empty[:])
			r.Header.Set("X-Amz-Content-Sha256", payload)
			creds := aws.Credentials{AccessKeyID: "AK", SecretAccessKey: "secret"}
			if err := v4.NewSigner().SignHTTP(context.Background(), creds, r, payload, "s3", "us-east-1", now); err != nil {
				b.Fatal(err)
			}
			w := &discardWriter{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				clear(w.h)
				w.status, w.n = 0, 0
				h.ServeHTTP(w, r)
				if w.status != http.StatusOK {
					b.Fatalf("status %d", w.status)
				}
			}
			b.ReportMetric(float64(w.n), "B/page")
		})
	}
}
