#!/usr/bin/env bash
# Measures Cairn's transactions on this machine, in one run: TODS's
# workload (each transaction inserts OBJECTS objects of SIZE bytes, CONC
# concurrent) with the keys in one range and spread over four, against
# Debian's etcd-server running the same transactions (one Txn of OBJECTS
# puts); and a read-only transaction of 10 objects against 10 single GETs.
# Both run throughout; the figures are taken in ROUNDS rounds, the systems
# alternating, and the ratios are of the medians. Prints each figure and
# the ratios.
#
#   scripts/bench-txn.sh            # ROUNDS=3 DURATION=10 CONC=50 OBJECTS=4 SIZE=512
#
# Installs etcd-server from Debian if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10}
CONC=${CONC:-50}
OBJECTS=${OBJECTS:-4}
SIZE=${SIZE:-512}
source scripts/bench-lib.sh
bench_init cairn-bench-txn

if ! command -v etcd >/dev/null && [ ! -x /usr/bin/etcd ]; then
  echo "installing etcd-server from Debian" >&2
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server >/dev/null
fi

echo "== building"
CGO_ENABLED=0 go build -o "$WORK/cairn" ./cmd/cairn
go build -o "$WORK/peerbench" ./scripts/peerbench

echo "== cairn (single node, $WORK/cairn-data) and etcd (Debian etcd-server), both running"
"$WORK/cairn" server --data-dir "$WORK/cairn-data" --port 17270 --http-port 17280 --meta-port 17290 --peer-port 17271 --meta-client-port 17291 --log-level warn &
PIDS+=("$!")
ETCD=$(command -v etcd || echo /usr/bin/etcd)
"$ETCD" --data-dir "$WORK/etcd" --listen-client-urls http://127.0.0.1:12479 --advertise-client-urls http://127.0.0.1:12479 \
  --listen-peer-urls http://127.0.0.1:12480 >/dev/null 2>&1 &
PIDS+=("$!")
for _ in $(seq 100); do curl -sf http://127.0.0.1:17280/healthz >/dev/null && break; sleep 0.1; done
sleep 1
CB="$WORK/cairn bench --server 127.0.0.1:17270 --duration ${DURATION}s --json"
# The machine's speed drifts (other tenants, the disk's fsync latency), so
# each figure is taken in every round, the systems alternating, and the
# ratios are of the rounds' medians. Each round writes new spaces and keys.
: > "$WORK/results"
for r in $(seq "$ROUNDS"); do
  echo "== round $r of $ROUNDS"
  local_txn=$($CB --op txn --objects "$OBJECTS" --size "$SIZE" --concurrency "$CONC" --space "local$r" --ranges 1)
  echo "cairn txn, one range:   $local_txn"
  etcd_txn=$("$WORK/peerbench" etcd-txn -endpoint 127.0.0.1:12479 -size "$SIZE" -objects "$OBJECTS" -concurrency "$CONC" -duration "${DURATION}s")
  echo "etcd txn:               $etcd_txn"
  spread_txn=$($CB --op txn --objects "$OBJECTS" --size "$SIZE" --concurrency "$CONC" --space "spread$r" --ranges 4)
  echo "cairn txn, four ranges: $spread_txn"
  read_txn=$($CB --op txn-read --objects 10 --size 1KiB --concurrency 1 --keys 1000 --space reads --ranges 4)
  echo "cairn read-only txn of 10: $read_txn"
  gets=$($CB --op gets --objects 10 --size 1KiB --concurrency 1 --keys 1000 --space reads --ranges 4)
  echo "cairn 10 GETs:             $gets"
  printf '%s\t%s\t%s\t%s\t%s\n' "$local_txn" "$spread_txn" "$read_txn" "$gets" "$etcd_txn" >> "$WORK/results"
done

echo "== ratios (medians of $ROUNDS rounds; each round's in brackets)"
python3 - "$WORK/results" <<'PY'
import json, statistics, sys
rounds = [[json.loads(c) for c in line.rstrip("\n").split("\t")] for line in open(sys.argv[1])]
lt, st, rt, g, et = ([r[i] for r in rounds] for i in range(5))
med = lambda xs, f: statistics.median(f(x) for x in xs)
ops = lambda x: x["ops_per_sec"]
p50 = lambda x: x["p50_ms"]
each = lambda vals: "[" + " ".join(f"{v:.2f}" for v in vals) + "]"
L, S, E = med(lt, ops), med(st, ops), med(et, ops)
print(f"txn, one range     {L:.0f} tx/s, p50 {med(lt, p50):.1f} ms (target >= 10000 tx/s) {each([ops(x) for x in lt])}")
print(f"txn, four ranges   {S:.0f} tx/s = {S/L:.2f}x of one range (target >= 0.5x) {each([ops(a)/ops(b) for a, b in zip(st, lt)])}")
print(f"vs etcd Txn        {E:.0f} tx/s: cairn one range {L/E:.2f}x (target >= 2x) {each([ops(a)/ops(b) for a, b in zip(lt, et)])}")
R, G = med(rt, p50), med(g, p50)
print(f"read-only txn of 10 p50 {R:.3f} ms vs 10 GETs p50 {G:.3f} ms: {R/G:.2f}x (target <= 1.5x) {each([p50(a)/p50(b) for a, b in zip(rt, g)])}")
PY
