package node

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the node's Prometheus series, on a registry the node owns.
type metrics struct {
	reg        *prometheus.Registry
	chunkBytes prometheus.Counter
	corrupt    prometheus.Counter
	cacheHits  prometheus.Counter
	cacheMiss  prometheus.Counter
	// repairBytes counts chunk bytes copied to other nodes by the repairer.
	repairBytes prometheus.Counter
	// forwards counts range operations this node passed to the leaseholder.
	forwards prometheus.Counter
	// rangeOps counts the splits and merges this node made as leaseholder
	// (label op: split, merge, merge_aborted).
	rangeOps *prometheus.CounterVec
}

func newMetrics(n *Node) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.chunkBytes = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "cairn_chunk_bytes_written_total",
		Help: "Bytes of object bodies written as chunks (before dedup).",
	})
	m.corrupt = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "cairn_corruption_detected_total",
		Help: "Reads that found stored bytes failing their checksum (never returned to clients).",
	})
	m.cacheHits = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "cairn_record_cache_hits_total",
		Help: "Reads of a latest version answered by the record cache.",
	})
	m.cacheMiss = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "cairn_record_cache_misses_total",
		Help: "Reads of a latest version that went to pebble.",
	})
	m.repairBytes = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "cairn_repair_bytes_total",
		Help: "Chunk bytes copied to other nodes to restore their replication.",
	})
	m.forwards = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "cairn_forwarded_total",
		Help: "Range operations passed on to the range's leaseholder on another node (clients that route by the route table cause few).",
	})
	m.rangeOps = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cairn_range_ops_total",
		Help: "Range splits and merges this node made as the range's leaseholder, and merges it aborted.",
	}, []string{"op"})
	m.reg.MustRegister(
		m.cacheHits, m.cacheMiss, m.repairBytes, m.forwards, m.rangeOps,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "cairn_record_cache_records", Help: "Records in the latest-version cache.",
		}, func() float64 { return float64(n.cache.Len()) }),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.chunkBytes, m.corrupt,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "cairn_segment_bytes", Help: "Bytes in segment files.",
		}, func() float64 { return float64(n.chunks.Stats().Bytes) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "cairn_segments", Help: "Segment files.",
		}, func() float64 { return float64(n.chunks.Stats().Segments) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "cairn_spaces", Help: "Spaces served by this node.",
		}, func() float64 {
			n.mu.RLock()
			defer n.mu.RUnlock()
			return float64(len(n.mu.spaces))
		}),
	)
	return m
}
