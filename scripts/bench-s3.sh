#!/usr/bin/env bash
# Measures the S3 API's targets on one node, in one run, in the order of
# docs/benchmarks.md ("every S3 target in one run"): 4 KiB GET and PUT
# with wrk (a light C client sending presigned requests) and with
# `cairn bench --s3` (aws-sdk-go-v2), 16 MiB PUT (unsigned and signed
# payload) and GET, LIST of 10,000 keys with list.py and with the SDK,
# and warp's mixed workload. Prints one line per workload with its target.
#
#   scripts/bench-s3.sh               # DURATION=12 by default
#
# Installs wrk from Debian if missing. The server and the load generators
# share this machine's cores; the server's data directory is a fresh
# temporary one, removed at the end (the run writes about 13 GB). The
# server's log (requests cut off when a timed run ends are logged as
# failed) is not shown.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-12}
source scripts/bench-lib.sh
bench_init cairn-s3bench

if ! command -v wrk >/dev/null; then
  echo "installing wrk from Debian" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq >/dev/null
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null
fi
PY=/usr/bin/python3 # Debian's, as scripts/wrk/*.py use only its standard library

echo "== building"
CGO_ENABLED=0 go build -o "$WORK/cairn" ./cmd/cairn
C="$WORK/cairn"
E=http://127.0.0.1:37080
AK=benchadmin SK=bench-secret-key-1
"$C" server --data-dir "$WORK/data" --port 37070 --http-port 37080 --peer-port 37071 \
  --meta-port 37090 --meta-client-port 37091 --log-level warn \
  --root-access-key "$AK" --root-secret-key "$SK" > "$WORK/server.log" 2>&1 &
SP=$!; PIDS+=("$SP")
for _ in $(seq 300); do curl -sf "$E/healthz" >/dev/null && break; sleep 0.1; done
curl -sf "$E/healthz" >/dev/null || { echo "the server did not start:" >&2; cat "$WORK/server.log" >&2; exit 1; }
export AWS_ACCESS_KEY_ID=$AK AWS_SECRET_ACCESS_KEY=$SK

W=scripts/wrk
A=(--endpoint "$E" --access "$AK" --secret "$SK")
cpu_ticks() { awk '{print $14+$15}' "/proc/$SP/stat"; }
# wrk prints a summary line of its own (scripts/wrk/s3.lua); its latency
# percentiles are not per request (see docs/benchmarks.md), so only the
# rate and the server's CPU per request are kept.
wrk_run() { # METHOD URLS [SIZE]
  local t0 out n
  t0=$(cpu_ticks)
  out=$(wrk -t1 -c20 -d"${DURATION}s" -s "$W/s3.lua" "$E" -- "$2" "$1" ${3:+"$3"} | grep '^requests ')
  n=${out#requests }
  n=${n%%,*}
  echo "$out" | sed "s/, p50.*, \([0-9]* req\/s\)/, \1/; s/$/, server $(( ($(cpu_ticks) - t0) * 10000000 / (n > 0 ? n : 1) / 1000 )) us\/request/"
}
sdk() { "$C" bench --s3 "$E" --duration "${DURATION}s" --json "$@"; }
field() { $PY -c "import json,sys; d=json.loads(sys.stdin.readline()); print(round(d['$1'], 1))"; }

echo "== preloading for wrk"
$PY $W/presign.py "${A[@]}" --bucket wrk --prefix get4k --count 2500 --method GET --preload 4096 > "$WORK/get4k.urls"
$PY $W/presign.py "${A[@]}" --bucket wrk --prefix put4k --count 300000 --method PUT > "$WORK/put4k.urls"

echo "== 4 KiB GET, 20 connections (target >= 19,000 obj/s)"
echo "wrk: $(wrk_run GET "$WORK/get4k.urls")"
echo "== 4 KiB PUT, 20 connections (target >= 5,000 obj/s)"
echo "wrk: $(wrk_run PUT "$WORK/put4k.urls" 4096)"
r=$(sdk --op put --size 4KiB --concurrency 20)
echo "sdk PUT: $(echo "$r" | field ops_per_sec) obj/s, p99 $(echo "$r" | field p99_ms) ms"
r=$(sdk --op get --size 4KiB --concurrency 20 --keys 2500)
echo "sdk GET: $(echo "$r" | field ops_per_sec) obj/s, p99 $(echo "$r" | field p99_ms) ms"
echo "== 16 MiB PUT, 8 workers (target >= 360 MiB/s)"
r=$(sdk --op put --size 16MiB --concurrency 8 --unsigned-payload)
echo "sdk unsigned payload: $(echo "$r" | field mib_per_sec) MiB/s, p99 $(echo "$r" | field p99_ms) ms"
r=$(sdk --op put --size 16MiB --concurrency 8)
echo "sdk signed payload: $(echo "$r" | field mib_per_sec) MiB/s, p99 $(echo "$r" | field p99_ms) ms"
echo "== 16 MiB GET, 8 workers, 128 objects (target >= 1,200 MiB/s)"
r=$(sdk --op get --size 16MiB --concurrency 8 --keys 128)
echo "sdk: $(echo "$r" | field mib_per_sec) MiB/s, first byte p50 $(echo "$r" | field ttfb_p50_ms) ms"
echo "== LIST of 10,000 keys (target < 100 ms)"
r=$(sdk --op list --size 1KiB --concurrency 1 --keys 10000)
echo "sdk: p50 $(echo "$r" | field p50_ms) ms, p99 $(echo "$r" | field p99_ms) ms"
echo "list.py: $($PY $W/list.py "${A[@]}" --bucket wrkl --prefix l10k --preload 10000 --runs 40)"
echo "== mixed 4 KiB, 20 workers, 2,500 objects"
r=$(sdk --op mixed --size 4KiB --concurrency 20 --keys 2500)
echo "sdk: $(echo "$r" | field ops_per_sec) obj/s, p99 $(echo "$r" | field p99_ms) ms"
echo "== data written: $(du -sh "$WORK/data" | cut -f1)"
