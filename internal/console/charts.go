package console

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/cairn-db/cairn/internal/admin"
)

// Stats counts the node's requests for the console's charts: the
// protocols report each request (Observe), and a sampler turns the counts
// into a point every SampleEvery (requests per second, and latency
// percentiles from a log-scaled histogram), keeping the last
// SampleWindow of them.
type Stats struct {
	mu      sync.Mutex
	cur     [2]bucketCounts // reads, writes since the last sample
	samples []Sample
	stop    chan struct{}
	once    sync.Once
}

// Sample is one point of the charts.
type Sample struct {
	At                 time.Time
	Reads, Writes      float64 // requests per second
	ReadP50, ReadP99   float64 // milliseconds
	WriteP50, WriteP99 float64
}

const (
	// SampleEvery is the charts' resolution.
	SampleEvery = 5 * time.Second
	// SampleWindow is what they show: the last 10 minutes.
	SampleWindow = 120
)

// Request kinds.
const (
	Read  = 0
	Write = 1
)

// latency buckets: 2^(i/4) microseconds, i < nBuckets (up to ~ 30 s).
const nBuckets = 100

type bucketCounts struct {
	n       int64
	buckets [nBuckets]int64
}

// NewStats starts the sampler; Close stops it.
func NewStats() *Stats {
	s := &Stats{stop: make(chan struct{})}
	go s.run()
	return s
}

// Close stops the sampler.
func (s *Stats) Close() { s.once.Do(func() { close(s.stop) }) }

// Observe records a request of kind (Read or Write) that took d.
func (s *Stats) Observe(kind int, d time.Duration) {
	us := float64(d.Microseconds())
	i := 0
	if us > 1 {
		i = min(int(4*math.Log2(us)), nBuckets-1)
	}
	s.mu.Lock()
	s.cur[kind].n++
	s.cur[kind].buckets[i]++
	s.mu.Unlock()
}

func (s *Stats) run() {
	t := time.NewTicker(SampleEvery)
	defer t.Stop()
	prev := time.Now()
	for {
		select {
		case <-s.stop:
			return
		case now := <-t.C:
			s.sample(now, now.Sub(prev))
			prev = now
		}
	}
}

func (s *Stats) sample(now time.Time, dt time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.cur
	s.cur = [2]bucketCounts{}
	sec := dt.Seconds()
	p := Sample{At: now, Reads: float64(c[Read].n) / sec, Writes: float64(c[Write].n) / sec,
		ReadP50: quantile(&c[Read], 0.5), ReadP99: quantile(&c[Read], 0.99),
		WriteP50: quantile(&c[Write], 0.5), WriteP99: quantile(&c[Write], 0.99)}
	s.samples = append(s.samples, p)
	if len(s.samples) > SampleWindow {
		s.samples = s.samples[len(s.samples)-SampleWindow:]
	}
}

// quantile is the upper bound, in milliseconds, of the bucket holding the
// q-quantile.
func quantile(c *bucketCounts, q float64) float64 {
	if c.n == 0 {
		return 0
	}
	want := int64(math.Ceil(q * float64(c.n)))
	var seen int64
	for i, n := range c.buckets {
		seen += n
		if seen >= want {
			return math.Pow(2, float64(i+1)/4) / 1000
		}
	}
	return 0
}

// Samples returns the points kept, oldest first.
func (s *Stats) Samples() []Sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Sample(nil), s.samples...)
}

func lastSample(ss []Sample) *Sample {
	if len(ss) == 0 {
		return nil
	}
	return &ss[len(ss)-1]
}

func clusterReport(ctx context.Context, cs admin.ClusterService) (admin.ClusterReport, error) {
	var rep admin.ClusterReport
	b, err := cs.ClusterStatus(ctx)
	if err != nil {
		return rep, err
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		return rep, fmt.Errorf("the cluster report: %w", err)
	}
	return rep, nil
}

// chart draws one chart of the samples as SVG (an <img> on the cluster
// page: no script needed): ?what=ops (reads and writes per second) or
// ?what=latency (p50 and p99 of each, in milliseconds).
func (h *Handler) chart(w http.ResponseWriter, r *http.Request, s *session) {
	if !h.clusterAdmin(w, r, s) {
		return
	}
	var ss []Sample
	if h.cfg.Stats != nil {
		ss = h.cfg.Stats.Samples()
	}
	type series struct {
		name, color string
		v           func(Sample) float64
	}
	var lines []series
	unit := "requests/s"
	if r.FormValue("what") == "latency" {
		unit = "ms"
		lines = []series{{"read p50", "#2a7ab0", func(x Sample) float64 { return x.ReadP50 }}, {"read p99", "#8fc1e3", func(x Sample) float64 { return x.ReadP99 }},
			{"write p50", "#c0392b", func(x Sample) float64 { return x.WriteP50 }}, {"write p99", "#eba59e", func(x Sample) float64 { return x.WriteP99 }}}
	} else {
		lines = []series{{"reads", "#2a7ab0", func(x Sample) float64 { return x.Reads }}, {"writes", "#c0392b", func(x Sample) float64 { return x.Writes }}}
	}
	const W, H, left, bottom = 600.0, 200.0, 50.0, 20.0
	top := 1.0
	for _, x := range ss {
		for _, l := range lines {
			top = max(top, l.v(x))
		}
	}
	top = niceCeil(top)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="11">`, W, H, W, H)
	fmt.Fprintf(&b, `<rect x="%.0f" y="0" width="%.0f" height="%.0f" fill="#fafafa" stroke="#ddd"/>`, left, W-left, H-bottom)
	for i := 0; i <= 4; i++ {
		y := (H - bottom) * (1 - float64(i)/4)
		fmt.Fprintf(&b, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#eee"/><text x="%.0f" y="%.1f" text-anchor="end">%s</text>`,
			left, W, y, y, left-4, y+4, trim(top*float64(i)/4))
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f">%s, last %d min (a point every %s)</text>`, left+4, H-4, unit, SampleWindow*int(SampleEvery/time.Second)/60, SampleEvery)
	for li, l := range lines {
		var pts []string
		for i, x := range ss {
			px := left + (W-left)*float64(SampleWindow-len(ss)+i)/float64(SampleWindow-1)
			py := (H - bottom) * (1 - l.v(x)/top)
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px, py))
		}
		if len(pts) > 0 {
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`, l.color, strings.Join(pts, " "))
		}
		fmt.Fprintf(&b, `<rect x="%.0f" y="%d" width="10" height="10" fill="%s"/><text x="%.0f" y="%d">%s</text>`, left+10+float64(li)*110, 6, l.color, left+24+float64(li)*110, 15, l.name)
	}
	b.WriteString(`</svg>`)
	w.Header().Set("Content-Type", "image/svg+xml")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write([]byte(b.String()))
}

func niceCeil(v float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func trim(v float64) string {
	if v >= 100 || v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.2g", v)
}
