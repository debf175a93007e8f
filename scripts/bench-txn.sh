#!/usr/bin/env bash
# Measures Cairn's transactions on this machine, in one run: TODS's
# workload (each transaction inserts OBJECTS objects of SIZE bytes, CONC
# concurrent) with the keys in one range and spread over four, against
# Debian's etcd-server running the same transactions (one Txn of OBJECTS
# puts); and a read-only transaction of 10 objects against 10 single GETs.
# Prints each figure and the ratios.
#
#   scripts/bench-txn.sh            # DURATION=10 CONC=50 OBJECTS=4 SIZE=512
#
# Installs etcd-server from Debian if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
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

echo "== cairn (single node, $WORK/cairn-data)"
"$WORK/cairn" server --data-dir "$WORK/cairn-data" --port 17270 --http-port 17280 --meta-port 17290 --peer-port 17271 --meta-client-port 17291 --log-level warn &
PIDS+=("$!")
for _ in $(seq 100); do curl -sf http://127.0.0.1:17280/healthz >/dev/null && break; sleep 0.1; done
CB="$WORK/cairn bench --server 127.0.0.1:17270 --duration ${DURATION}s --json"
local_txn=$($CB --op txn --objects "$OBJECTS" --size "$SIZE" --concurrency "$CONC" --space local --ranges 1)
spread_txn=$($CB --op txn --objects "$OBJECTS" --size "$SIZE" --concurrency "$CONC" --space spread --ranges 4)
read_txn=$($CB --op txn-read --objects 10 --size 1KiB --concurrency 1 --keys 1000 --space reads --ranges 4)
gets=$($CB --op gets --objects 10 --size 1KiB --concurrency 1 --keys 1000 --space reads --ranges 4)
echo "cairn txn, one range:   $local_txn"
echo "cairn txn, four ranges: $spread_txn"
echo "cairn read-only txn of 10: $read_txn"
echo "cairn 10 GETs:             $gets"

echo "== etcd (Debian etcd-server)"
ETCD=$(command -v etcd || echo /usr/bin/etcd)
"$ETCD" --data-dir "$WORK/etcd" --listen-client-urls http://127.0.0.1:12479 --advertise-client-urls http://127.0.0.1:12479 \
  --listen-peer-urls http://127.0.0.1:12480 >/dev/null 2>&1 &
PIDS+=("$!")
sleep 2
etcd_txn=$("$WORK/peerbench" etcd-txn -endpoint 127.0.0.1:12479 -size "$SIZE" -objects "$OBJECTS" -concurrency "$CONC" -duration "${DURATION}s")
echo "etcd txn: $etcd_txn"

echo "== ratios"
python3 - "$local_txn" "$spread_txn" "$read_txn" "$gets" "$etcd_txn" <<'PY'
import json, sys
lt, st, rt, g, et = (json.loads(a) for a in sys.argv[1:6])
print(f"txn, one range     {lt['ops_per_sec']:.0f} tx/s, p50 {lt['p50_ms']:.1f} ms (target >= 10000 tx/s)")
print(f"txn, four ranges   {st['ops_per_sec']:.0f} tx/s = {st['ops_per_sec']/lt['ops_per_sec']:.2f}x of one range (target >= 0.5x)")
print(f"vs etcd Txn        {et['ops_per_sec']:.0f} tx/s: cairn one range {lt['ops_per_sec']/et['ops_per_sec']:.2f}x (target >= 2x)")
print(f"read-only txn of 10 p50 {rt['p50_ms']:.3f} ms vs 10 GETs p50 {g['p50_ms']:.3f} ms: {rt['p50_ms']/g['p50_ms']:.2f}x (target <= 1.5x)")
PY
