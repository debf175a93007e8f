#!/usr/bin/env bash
# Measures 1 KiB durable PUT and GET on one node and on three nodes of this
# machine, in one run, with the same binary and flags, and prints the
# ratios (the issue's targets: PUT >= 0.5x, GET >= 0.8x), and the server
# CPU per PUT from /proc (user + system time of every server process
# across the PUT run): the three nodes' sum against the single node's
# (target: at most 3.5x) and each node's, and the raft loop's work per PUT from /metrics
# (cycles, syncs, messages sent, entries appended and applied, WAL bytes,
# record cache lookups that hit and missed),
# single node and the three nodes summed.
#
#   scripts/bench-cluster.sh          # DURATION=8 CONC=50 by default
#   WARM=1 scripts/bench-cluster.sh   # an unmeasured PUT run first, on one node and on three
#   PROFILE=1 scripts/bench-cluster.sh  # also CPU profiles of the three nodes during the 3-node PUT run
#                                       # (PROFILE_DIR/cairn-node9.pprof, -10, -11; PROFILE_DIR defaults to /tmp)
#
# The three nodes listen on 127.0.0.9, .10 and .11 and share this
# machine's cores with each other and the load generator. Each server gets
# a 64 MiB chunk cache (CHUNK_CACHE, bytes): 1 KiB objects are inline and
# never use it, and a server faults its whole cache in at start (an
# eighth of memory by default), CPU that would land in the figures.
#
# WARM=1: the measured PUT runs overwrite keys that exist. Without it the
# first write of each of the 10,000 keys falls in the measured run, and
# that share differs between the single node's run and the slower three
# nodes' (each replica seeks pebble for a key's first write: 0.1 against
# 0.3-0.4 record-cache misses a PUT per replica); with it both runs also
# start on a longer history (KeepAll), which costs the single node more.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-8}
CONC=${CONC:-50}
source scripts/bench-lib.sh
bench_init cairn-cbench

echo "== building"
CGO_ENABLED=0 go build -o "$WORK/cairn" ./cmd/cairn
C="$WORK/cairn"
healthy() { for _ in $(seq 300); do curl -sf "http://$1:7080/healthz" >/dev/null && return; sleep 0.1; done; echo "node $1 did not start" >&2; exit 1; }
CACHE=(--chunk-cache "${CHUNK_CACHE:-67108864}")
cpu_ticks() { local t=0; for p in "$@"; do t=$((t + $(awk '{print $14+$15}' "/proc/$p/stat"))); done; echo "$t"; }
clk=$(getconf CLK_TCK)
# A node's counters of the write path (its /metrics: the raft loop, both
# stores' WAL bytes, the record cache's lookups), to divide by the PUTs.
counters() { curl -sf "http://$1:7080/metrics" | grep -E '^cairn_raft_(cycles|syncs|messages_sent|entries_appended|entries_applied)_total |^cairn_(raft_log|storage)_wal_bytes_total |^cairn_record_cache_lookup_(hits|misses)_total ' || true; }
bench() { "$C" bench --server "$1" --duration "${DURATION}s" --json --size 1KiB --concurrency "$CONC" --keys 10000 --op "$2"; }

echo "== single node"
"$C" server --data-dir "$WORK/s1" --listen 127.0.0.9 --log-level warn "${CACHE[@]}" &
SP=$!; PIDS+=("$SP")
healthy 127.0.0.9
[ -z "${WARM:-}" ] || bench 127.0.0.9:7070 put >/dev/null
t0=$(cpu_ticks "$SP")
counters 127.0.0.9 >"$WORK/s.m0"
s_put=$(bench 127.0.0.9:7070 put)
s_cpu=$(($(cpu_ticks "$SP") - t0))
counters 127.0.0.9 >"$WORK/s.m1"
s_get=$(bench 127.0.0.9:7070 get)
kill "$SP"; wait "$SP" 2>/dev/null || true
echo "put: $s_put"
echo "get: $s_get"

echo "== three nodes"
"$C" server --data-dir "$WORK/n1" --listen 127.0.0.9 --log-level warn --token "$BENCH_TOKEN" "${CACHE[@]}" &
NODES=($!); PIDS+=($!)
healthy 127.0.0.9
for i in 10 11; do
  "$C" server --data-dir "$WORK/n$i" --listen "127.0.0.$i" --join 127.0.0.9:7071 --token "$BENCH_TOKEN" --log-level warn "${CACHE[@]}" &
  NODES+=($!); PIDS+=($!)
  healthy "127.0.0.$i"
done
SEEDS=127.0.0.9:7070,127.0.0.10:7070,127.0.0.11:7070
"$C" --server "$SEEDS" space create bench >/dev/null
# Let the ranges get their three replicas and the leases spread.
sleep "${SETTLE:-20}"
[ -z "${WARM:-}" ] || bench "$SEEDS" put >/dev/null
PROF=()
if [ -n "${PROFILE:-}" ]; then
  for i in 9 10 11; do
    (sleep 2; curl -s --aws-sigv4 "aws:amz:us-east-1:s3" --user "$CAIRN_ACCESS_KEY:$CAIRN_SECRET_KEY" \
      -o "${PROFILE_DIR:-/tmp}/cairn-node$i.pprof" "http://127.0.0.$i:7080/_cairn/debug/pprof/profile?seconds=$((DURATION-3))") &
    PROF+=($!)
  done
fi
t0=$(cpu_ticks "${NODES[@]}")
n0=(); for p in "${NODES[@]}"; do n0+=("$(cpu_ticks "$p")"); done
for i in 9 10 11; do counters "127.0.0.$i" >"$WORK/c$i.m0"; done
c_put=$(bench "$SEEDS" put)
c_cpu=$(($(cpu_ticks "${NODES[@]}") - t0))
n_cpu=""; for k in 0 1 2; do n_cpu+="$(($(cpu_ticks "${NODES[$k]}") - n0[k])) "; done
for i in 9 10 11; do counters "127.0.0.$i" >"$WORK/c$i.m1"; done
[ ${#PROF[@]} -eq 0 ] || wait "${PROF[@]}"
c_get=$(bench "$SEEDS" get)
echo "put: $c_put"
echo "get: $c_get"
"$C" --server "$SEEDS" cluster status || true

python3 - "$s_put" "$c_put" "$s_get" "$c_get" "$s_cpu" "$c_cpu" "$clk" "$WORK" "$n_cpu" <<'EOF'
import json, sys
sp, cp, sg, cg = (json.loads(a) for a in sys.argv[1:5])
s_cpu, c_cpu, clk = (int(a) for a in sys.argv[5:8])
work = sys.argv[8]
def counters(f):
    out = {}
    for line in open(f):
        k, v = line.split()
        out[k.removeprefix("cairn_").removesuffix("_total")] = float(v)
    return out
def per_put(files, ops):
    d = {}
    for a, b in files:
        m0, m1 = counters(a), counters(b)
        for k in m1:
            d[k] = d.get(k, 0) + m1[k] - m0.get(k, 0)
    return "  ".join(f"{k} {v / max(ops, 1):.3f}" for k, v in sorted(d.items()))
print("write-path work per PUT, single:", per_put([(f"{work}/s.m0", f"{work}/s.m1")], sp["ops"]))
print("write-path work per PUT, 3 nodes (all three):", per_put([(f"{work}/c{i}.m0", f"{work}/c{i}.m1") for i in (9, 10, 11)], cp["ops"]))
def row(name, s, c, target):
    r = c["ops_per_sec"] / s["ops_per_sec"]
    print(f"{name}: single {s['ops_per_sec']:,.0f} ops/s (p50 {s['p50_ms']} ms, p99 {s['p99_ms']} ms), 3 nodes {c['ops_per_sec']:,.0f} ops/s (p50 {c['p50_ms']} ms, p99 {c['p99_ms']} ms) = {r:.2f}x (target >= {target}x: {'MET' if r >= target else 'MISSED'})")
row("1 KiB durable PUT", sp, cp, 0.5)
row("1 KiB GET", sg, cg, 0.8)
s_us, c_us = s_cpu / clk * 1e6 / max(sp["ops"], 1), c_cpu / clk * 1e6 / max(cp["ops"], 1)
r = c_us / s_us
print(f"server CPU per PUT: single {s_us:.1f} us, 3 nodes {c_us:.1f} us (all three) = {r:.2f}x (target <= 3.5x: {'MET' if r <= 3.5 else 'MISSED'})")
per_node = [int(t) / clk * 1e6 / max(cp["ops"], 1) for t in sys.argv[9].split()]
print("  each node (127.0.0.9, .10, .11):", ", ".join(f"{u:.1f} us" for u in per_node))
EOF
