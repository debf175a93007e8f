package cluster

import (
	"github.com/cockroachdb/pebble/v2"
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
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "cairn_record_cache_lookup_hits_total", Help: "Lookups of a latest version the record cache answered: reads (cairn_record_cache_hits_total) and the writes applied.",
		}, func() float64 { h, _ := n.cache.Stats(); return float64(h) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "cairn_record_cache_lookup_misses_total", Help: "Lookups of a latest version the record cache did not answer (pebble was read): reads (cairn_record_cache_misses_total) and the writes applied.",
		}, func() float64 { _, m := n.cache.Stats(); return float64(m) }),
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
			Name: "cairn_chunk_cache_bytes", Help: "Bytes of verified chunks in the chunk cache.",
		}, func() float64 { return float64(n.chunks.DataCacheStats().Bytes) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "cairn_chunk_cache_memory_bytes", Help: "Bytes of the chunk cache's memory in use: its chunks, chunks it let go that readers still hold, reads under way and writes in flight.",
		}, func() float64 { return float64(n.chunks.DataCacheStats().Used) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "cairn_chunk_cache_hits_total", Help: "Chunk reads served from the chunk cache (no disk read, no hash).",
		}, func() float64 { return float64(n.chunks.DataCacheStats().Hits) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "cairn_chunk_cache_misses_total", Help: "Chunk reads that read and verified the chunk from a segment.",
		}, func() float64 { return float64(n.chunks.DataCacheStats().Misses) }),
		raftLoopCollector{n},
		storageCollector{n},
		gcCollector{n},
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

// raftLoopCollector exports the replica loop's running totals.
type raftLoopCollector struct{ n *Node }

var raftLoopDescs = struct {
	cycles, syncs, appended, applied, sent, skipped, persist, apply, cycle *prometheus.Desc
}{
	cycles:   prometheus.NewDesc("cairn_raft_cycles_total", "Turns of the replica loop that had raft work.", nil, nil),
	syncs:    prometheus.NewDesc("cairn_raft_syncs_total", "Synced writes of raft state (one per log writer batch, for all ranges).", nil, nil),
	appended: prometheus.NewDesc("cairn_raft_entries_appended_total", "Raft log entries persisted.", nil, nil),
	applied:  prometheus.NewDesc("cairn_raft_entries_applied_total", "Committed raft entries applied.", nil, nil),
	sent:     prometheus.NewDesc("cairn_raft_messages_sent_total", "Raft messages handed to the transport.", nil, nil),
	skipped:  prometheus.NewDesc("cairn_raft_commit_messages_skipped_total", "Messages that would only have told a follower the commit index, not sent: a later append carried it.", nil, nil),
	persist:  prometheus.NewDesc("cairn_raft_persist_seconds_total", "Time the log writer spent writing raft state (off the replica loop).", nil, nil),
	apply:    prometheus.NewDesc("cairn_raft_apply_seconds_total", "Time the replica loop spent applying committed entries.", nil, nil),
	cycle:    prometheus.NewDesc("cairn_raft_cycle_seconds_total", "Time the replica loop spent in turns that had raft work.", nil, nil),
}

func (c raftLoopCollector) Describe(ch chan<- *prometheus.Desc) {
	d := raftLoopDescs
	for _, x := range []*prometheus.Desc{d.cycles, d.syncs, d.appended, d.applied, d.sent, d.skipped, d.persist, d.apply, d.cycle} {
		ch <- x
	}
}

func (c raftLoopCollector) Collect(ch chan<- prometheus.Metric) {
	st, d := c.n.ranges.Stats(), raftLoopDescs
	counter := func(desc *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, v)
	}
	counter(d.cycles, float64(st.Cycles))
	counter(d.syncs, float64(st.Syncs))
	counter(d.appended, float64(st.Appended))
	counter(d.applied, float64(st.Applied))
	counter(d.sent, float64(st.MessagesSent))
	counter(d.skipped, float64(st.CommitsSkipped))
	counter(d.persist, st.PersistTime.Seconds())
	counter(d.apply, st.ApplyTime.Seconds())
	counter(d.cycle, st.CycleTime.Seconds())
}

// storageCollector exports the state store's (pebble's) own figures: what
// a profile of the write path needs to read (memtables, L0 sublevels and
// read amplification, the block cache, compactions and their debt, WAL
// bytes).
type storageCollector struct{ n *Node }

var storageDescs = struct {
	memtables, memtableBytes, l0Sublevels, l0Tables, tables, readAmp,
	cacheBytes, cacheHits, cacheMisses, compactions, compactionDebt, flushes, walBytes *prometheus.Desc
	flushedBytes, compactedBytes               *prometheus.Desc
	logWALBytes, logFlushedBytes, logCompacted *prometheus.Desc
}{
	memtables:       prometheus.NewDesc("cairn_storage_memtables", "Memtables of the state store (the mutable one and those waiting to be flushed).", nil, nil),
	memtableBytes:   prometheus.NewDesc("cairn_storage_memtable_bytes", "Bytes allocated by the state store's memtables.", nil, nil),
	l0Sublevels:     prometheus.NewDesc("cairn_storage_l0_sublevels", "Sublevels of the state store's level 0 (each one a table a read may check).", nil, nil),
	l0Tables:        prometheus.NewDesc("cairn_storage_l0_tables", "Tables in the state store's level 0.", nil, nil),
	tables:          prometheus.NewDesc("cairn_storage_tables", "Tables in the state store, all levels.", nil, nil),
	readAmp:         prometheus.NewDesc("cairn_storage_read_amplification", "Table sources a read of the state store may consult (level 0 sublevels and the other levels holding tables; the memtables come on top).", nil, nil),
	cacheBytes:      prometheus.NewDesc("cairn_storage_block_cache_bytes", "Bytes in the state store's block cache.", nil, nil),
	cacheHits:       prometheus.NewDesc("cairn_storage_block_cache_hits_total", "Block reads the block cache answered.", nil, nil),
	cacheMisses:     prometheus.NewDesc("cairn_storage_block_cache_misses_total", "Block reads that went to the tables' files.", nil, nil),
	compactions:     prometheus.NewDesc("cairn_storage_compactions_total", "Compactions of the state store.", nil, nil),
	compactionDebt:  prometheus.NewDesc("cairn_storage_compaction_debt_bytes", "Bytes the state store estimates it must compact to reach its level shape.", nil, nil),
	flushes:         prometheus.NewDesc("cairn_storage_flushes_total", "Memtable flushes of the state store.", nil, nil),
	walBytes:        prometheus.NewDesc("cairn_storage_wal_bytes_total", "Bytes written to the state store's write-ahead log.", nil, nil),
	flushedBytes:    prometheus.NewDesc("cairn_storage_flushed_bytes_total", "Bytes of tables the state store wrote flushing memtables.", nil, nil),
	compactedBytes:  prometheus.NewDesc("cairn_storage_compacted_bytes_total", "Bytes of tables the state store wrote compacting (its write amplification beyond the flushes).", nil, nil),
	logWALBytes:     prometheus.NewDesc("cairn_raft_log_wal_bytes_total", "Bytes written to the raft log store's write-ahead log (the entries, as appended).", nil, nil),
	logFlushedBytes: prometheus.NewDesc("cairn_raft_log_flushed_bytes_total", "Bytes of tables the raft log store wrote flushing memtables: entries not yet truncated when their memtable filled.", nil, nil),
	logCompacted:    prometheus.NewDesc("cairn_raft_log_compacted_bytes_total", "Bytes of tables the raft log store wrote compacting.", nil, nil),
}

func (c storageCollector) Describe(ch chan<- *prometheus.Desc) {
	d := storageDescs
	for _, x := range []*prometheus.Desc{d.memtables, d.memtableBytes, d.l0Sublevels, d.l0Tables, d.tables, d.readAmp,
		d.cacheBytes, d.cacheHits, d.cacheMisses, d.compactions, d.compactionDebt, d.flushes, d.walBytes, d.flushedBytes, d.compactedBytes,
		d.logWALBytes, d.logFlushedBytes, d.logCompacted} {
		ch <- x
	}
}

func (c storageCollector) Collect(ch chan<- prometheus.Metric) {
	if c.n.eng == nil {
		return
	}
	m, d := c.n.eng.Metrics(), storageDescs
	gauge := func(desc *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v)
	}
	counter := func(desc *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, v)
	}
	tables := int64(0)
	for i := range m.Levels {
		tables += m.Levels[i].TablesCount
	}
	gauge(d.memtables, float64(m.MemTable.Count))
	gauge(d.memtableBytes, float64(m.MemTable.Size))
	gauge(d.l0Sublevels, float64(m.Levels[0].Sublevels))
	gauge(d.l0Tables, float64(m.Levels[0].TablesCount))
	gauge(d.tables, float64(tables))
	gauge(d.readAmp, float64(m.ReadAmp()))
	gauge(d.cacheBytes, float64(m.BlockCache.Size))
	counter(d.cacheHits, float64(m.BlockCache.Hits))
	counter(d.cacheMisses, float64(m.BlockCache.Misses))
	counter(d.compactions, float64(m.Compact.Count))
	gauge(d.compactionDebt, float64(m.Compact.EstimatedDebt))
	counter(d.flushes, float64(m.Flush.Count))
	counter(d.walBytes, float64(m.WAL.BytesWritten))
	flushed, compacted := writtenBytes(m)
	counter(d.flushedBytes, float64(flushed))
	counter(d.compactedBytes, float64(compacted))
	lm := c.n.eng.LogMetrics()
	flushed, compacted = writtenBytes(lm)
	counter(d.logWALBytes, float64(lm.WAL.BytesWritten))
	counter(d.logFlushedBytes, float64(flushed))
	counter(d.logCompacted, float64(compacted))
}

// writtenBytes returns the bytes of tables a pebble instance wrote
// flushing and compacting.
func writtenBytes(m *pebble.Metrics) (flushed, compacted uint64) {
	for i := range m.Levels {
		flushed += m.Levels[i].TableBytesFlushed + m.Levels[i].BlobBytesFlushed
		compacted += m.Levels[i].TableBytesCompacted + m.Levels[i].BlobBytesCompacted
	}
	return flushed, compacted
}
