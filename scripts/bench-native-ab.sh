#!/usr/bin/env bash
# A/B of two cairn binaries on native 1 KiB PUT and GET (cairn bench, 50
# workers, 10,000 keys): each round runs both, OLD first in odd rounds and
# NEW first in even ones, each on a fresh single node and data directory, and prints ops/s, p99 and the server's
# CPU per operation; the medians and ratios come last. Each binary drives
# its own server (a build from before authentication talks to its server
# unauthenticated).
#
#   scripts/bench-native-ab.sh OLD_BINARY NEW_BINARY    # ROUNDS=5 DURATION=10
#   PIN=1 scripts/bench-native-ab.sh OLD NEW            # server on CPU 0, load on CPU 1
#
# With PIN=1 the server (GOMAXPROCS=1) and the load generator each have a
# core of their own (taskset): the throughput is then the server's alone,
# and runs vary less than when the two share both cores.
#
# The servers get a 64 MiB chunk cache (CHUNK_CACHE, in bytes): 1 KiB
# objects are stored inline and never use it, and a server faults the
# whole of its cache in at start (an eighth of memory by default), CPU
# that would otherwise land in the first run's figure.
#
# Build the old one from a commit with: git worktree add /tmp/old REV &&
# (cd /tmp/old && go build -o /tmp/cairn-old ./cmd/cairn).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 2 ] || { echo "usage: $0 OLD_BINARY NEW_BINARY" >&2; exit 2; }
OLD=$(realpath "$1") NEW=$(realpath "$2")
ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-10}
source scripts/bench-lib.sh
bench_init cairn-ab
cpu_ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
clk=$(getconf CLK_TCK)
: >"$WORK/results"
for round in $(seq "$ROUNDS"); do
  order=(old new)
  [ $((round % 2)) -eq 0 ] && order=(new old)
  for which in "${order[@]}"; do
    bin=$OLD; [ "$which" = new ] && bin=$NEW
    srv=() load=()
    if [ -n "${PIN:-}" ]; then srv=(env GOMAXPROCS=1 taskset -c 0); load=(taskset -c 1); fi
    "${srv[@]}" "$bin" server --data-dir "$WORK/$which-$round" --port 18070 --http-port 18080 --meta-port 18090 \
      --peer-port 18071 --meta-client-port 18091 --log-level warn --chunk-cache "${CHUNK_CACHE:-67108864}" >"$WORK/server.log" 2>&1 &
    sp=$!; PIDS+=("$sp")
    for _ in $(seq 300); do curl -sf http://127.0.0.1:18080/healthz >/dev/null && break; sleep 0.1; done
    b=("${load[@]}" "$bin" bench --server 127.0.0.1:18070 --duration "${DURATION}s" --json --size 1KiB --concurrency 50 --keys 10000)
    t0=$(cpu_ticks "$sp"); put=$("${b[@]}" --op put)
    t1=$(cpu_ticks "$sp"); get=$("${b[@]}" --op get)
    t2=$(cpu_ticks "$sp")
    kill "$sp"; wait "$sp" 2>/dev/null || true
    python3 - "$round" "$which" "$put" "$get" "$((t1 - t0))" "$((t2 - t1))" "$clk" <<'PY' | tee -a "$WORK/results"
import json, sys
r, w, p, g, tp, tg, clk = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
cpu = lambda t, d: t / clk * 1e6 / max(d["ops"], 1)
print(json.dumps({"round": int(r), "build": w, "put": p["ops_per_sec"], "put_p99": p["p99_ms"], "put_cpu_us": cpu(tp, p),
                  "get": g["ops_per_sec"], "get_p99": g["p99_ms"], "get_cpu_us": cpu(tg, g)}))
PY
  done
done
python3 - "$WORK/results" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for k, unit in (("put", "ops/s"), ("get", "ops/s"), ("put_cpu_us", "us/op server CPU"), ("get_cpu_us", "us/op server CPU")):
    o = statistics.median(r[k] for r in rows if r["build"] == "old")
    n = statistics.median(r[k] for r in rows if r["build"] == "new")
    print(f"{k:11s} median old {o:9.1f}  new {n:9.1f}  new/old {n / o:.3f}  ({unit})")
PY
