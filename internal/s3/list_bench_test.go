package s3

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

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
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = fmt.Sprintf("photos/2026/%08d.jpg", i)
	}
	h := listHandler(keys, now)
	for _, c := range []struct{ name, query string }{
		{"v2", "list-type=2&max-keys=1000"},
		{"v2-url", "list-type=2&max-keys=1000&encoding-type=url"},
		{"v1", "max-keys=1000"},
		{"versions", "versions=&max-keys=1000"},
	} {
		b.Run(c.name, func(b *testing.B) {
			r := signedGet(b, "http://s3.local/bench?"+c.query, now)
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
