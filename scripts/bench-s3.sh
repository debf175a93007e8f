#!/usr/bin/env bash
# Measures the S3 API on one node against MinIO on one drive, side by side
# in one run, with the same load generators for both (docs/benchmarks.md,
# "S3 against MinIO"): 4 KiB GET and PUT with wrk (a light C client
# sending presigned requests) and with `cairn bench --s3` (aws-sdk-go-v2),
# 16 MiB PUT (unsigned and signed payload) and GET, LIST of 10,000 keys
# with list.py and with the SDK, and a mixed 4 KiB workload. Each round
# starts both servers on fresh data directories and runs every workload
# against one, then the other (Cairn first in odd rounds, MinIO first in
# even ones); the end prints each workload's figures, the servers' CPU per
# request and the ratios, with the targets.
#
#   scripts/bench-s3.sh               # DURATION=12 ROUNDS=2 by default
#   ONLY="get16 put16" scripts/bench-s3.sh   # a subset of the workloads
#
# Installs wrk from Debian if missing, and builds MinIO's pinned release
# with `go install` unless MINIO names a binary (bench-lib.sh). The
# servers and the load generators share this machine's cores; the data
# directories are temporary and removed after each round (a round writes
# about 15 GB to each server).
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-12}
ROUNDS=${ROUNDS:-2}
ALL="get4k_wrk put4k_wrk put4k get4k put16 put16s get16 list list_py mixed"
ONLY=${ONLY:-$ALL}
source scripts/bench-lib.sh
bench_init cairn-s3bench

if ! command -v wrk >/dev/null; then
  echo "installing wrk from Debian" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq >/dev/null
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null
fi
PY=/usr/bin/python3 # Debian's, as scripts/wrk/*.py use only its standard library
minio_ensure

echo "== building"
CGO_ENABLED=0 go build -o "$WORK/cairn" ./cmd/cairn
C="$WORK/cairn"
AK=benchadmin SK=bench-secret-key-1
export AWS_ACCESS_KEY_ID=$AK AWS_SECRET_ACCESS_KEY=$SK
CE=http://127.0.0.1:37080 ME=http://127.0.0.1:37180
RES="$WORK/results.tsv"
: > "$RES"
W=scripts/wrk
CLK=$(getconf CLK_TCK)

start_servers() {
  "$C" server --data-dir "$WORK/cairn-data" --port 37070 --http-port 37080 --peer-port 37071 \
    --meta-port 37090 --meta-client-port 37091 --log-level warn \
    --root-access-key "$AK" --root-secret-key "$SK" > "$WORK/cairn.log" 2>&1 &
  CAIRN_PID=$!; PIDS+=("$CAIRN_PID")
  for _ in $(seq 300); do curl -sf "$CE/healthz" >/dev/null && break; sleep 0.1; done
  curl -sf "$CE/healthz" >/dev/null || { echo "Cairn did not start:" >&2; cat "$WORK/cairn.log" >&2; exit 1; }
  mkdir -p "$WORK/minio-data"
  minio_start "$WORK/minio-data" 127.0.0.1:37180 127.0.0.1:37181 "$AK" "$SK"
}

stop_servers() {
  kill "$CAIRN_PID" "$MINIO_PID" 2>/dev/null || true
  wait "$CAIRN_PID" "$MINIO_PID" 2>/dev/null || true
  rm -rf "$WORK/cairn-data" "$WORK/minio-data"
}

ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
field() { $PY -c "import json,sys; d=json.loads(sys.stdin.readline()); print(d['$1'])"; }

# record ROUND SERVER WORKLOAD VALUE UNIT OPS TICKS: one result line; the
# server's CPU per request is TICKS over OPS.
record() {
  local us=""
  if [ "$6" != "" ] && [ "$6" != 0 ]; then us=$($PY -c "print(round($7/$CLK*1e6/$6, 1))"); fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" "$us" >> "$RES"
  printf '  %-7s %-10s %s %s%s\n' "$2" "$3" "$4" "$5" "${us:+, server CPU $us us/request}"
}

# run ROUND SERVER WORKLOAD: one workload against one server.
run() {
  local round=$1 name=$2 wl=$3 e pid t0 out r n
  if [ "$name" = cairn ]; then e=$CE pid=$CAIRN_PID; else e=$ME pid=$MINIO_PID; fi
  local A=(--endpoint "$e" --access "$AK" --secret "$SK")
  local sdk=("$C" bench --s3 "$e" --duration "${DURATION}s" --json)
  case $wl in
  get4k_wrk | put4k_wrk)
    if [ "$wl" = get4k_wrk ]; then
      $PY $W/presign.py "${A[@]}" --bucket wrk --prefix get4k --count 2500 --method GET --preload 4096 > "$WORK/urls"
    else
      $PY $W/presign.py "${A[@]}" --bucket wrk --prefix put4k --count 300000 --method PUT > "$WORK/urls"
    fi
    t0=$(ticks "$pid")
    if [ "$wl" = get4k_wrk ]; then
      out=$(wrk -t1 -c20 -d"${DURATION}s" -s "$W/s3.lua" "$e" -- "$WORK/urls" GET | grep '^requests ')
    else
      out=$(wrk -t1 -c20 -d"${DURATION}s" -s "$W/s3.lua" "$e" -- "$WORK/urls" PUT 4096 | grep '^requests ')
    fi
    n=${out#requests }; n=${n%%,*}
    r=$(echo "$out" | sed 's/.* \([0-9]*\) req\/s.*/\1/')
    record "$round" "$name" "$wl" "$r" obj/s "$n" $(($(ticks "$pid") - t0))
    ;;
  put4k | get4k | mixed)
    local op=${wl%4k}
    [ "$wl" = mixed ] && op=mixed
    t0=$(ticks "$pid")
    out=$("${sdk[@]}" --op "$op" --size 4KiB --concurrency 20 --keys 2500)
    record "$round" "$name" "$wl" "$(echo "$out" | field ops_per_sec | cut -d. -f1)" obj/s "$(echo "$out" | field ops)" $(($(ticks "$pid") - t0))
    ;;
  put16 | put16s)
    local u=(--unsigned-payload)
    [ "$wl" = put16s ] && u=()
    t0=$(ticks "$pid")
    out=$("${sdk[@]}" --op put --size 16MiB --concurrency 8 "${u[@]}")
    record "$round" "$name" "$wl" "$(echo "$out" | field mib_per_sec | cut -d. -f1)" MiB/s "$(echo "$out" | field ops)" $(($(ticks "$pid") - t0))
    ;;
  get16)
    # No CPU figure: the run's preload (128 PUTs) is inside the window.
    out=$("${sdk[@]}" --op get --size 16MiB --concurrency 8 --keys 128)
    record "$round" "$name" "$wl" "$(echo "$out" | field mib_per_sec | cut -d. -f1)" MiB/s "" ""
    ;;
  list)
    out=$("${sdk[@]}" --op list --size 1KiB --concurrency 1 --keys 10000)
    record "$round" "$name" "$wl" "$(echo "$out" | field p50_ms)" "ms p50" "" ""
    ;;
  list_py)
    out=$($PY $W/list.py "${A[@]}" --bucket wrkl --prefix l10k --preload 10000 --runs 40)
    r=${out#*p50 }
    record "$round" "$name" "$wl" "${r%% ms*}" "ms p50" "" ""
    ;;
  esac
}

for round in $(seq "$ROUNDS"); do
  echo "== round $round of $ROUNDS: fresh servers"
  start_servers
  order="cairn minio"
  [ $((round % 2)) -eq 0 ] && order="minio cairn"
  for wl in $ALL; do
    case " $ONLY " in *" $wl "*) ;; *) continue ;; esac
    for name in $order; do run "$round" "$name" "$wl"; done
  done
  stop_servers
done

echo "== Cairn against MinIO (ratios of each round's pair; LIST: MinIO's time over Cairn's)"
$PY - "$RES" <<'PY'
import sys, collections
rows = collections.defaultdict(dict)
cpu = collections.defaultdict(dict)
units = {}
for line in open(sys.argv[1]):
    rnd, name, wl, val, unit, us = line.rstrip("\n").split("\t")
    rows[wl].setdefault(name, []).append(float(val))
    if us:
        cpu[wl].setdefault(name, []).append(float(us))
    units[wl] = unit
targets = {"put4k": 5, "get4k": 5, "put16": 2, "get16": 1.2}
labels = {
    "get4k_wrk": "4 KiB GET, wrk", "put4k_wrk": "4 KiB PUT, wrk",
    "put4k": "4 KiB PUT, SDK", "get4k": "4 KiB GET, SDK",
    "put16": "16 MiB PUT, SDK, unsigned", "put16s": "16 MiB PUT, SDK, signed",
    "get16": "16 MiB GET, SDK", "list": "LIST 10,000 keys, SDK",
    "list_py": "LIST 10,000 keys, list.py", "mixed": "mixed 4 KiB, SDK",
}
for wl in labels:
    if wl not in rows:
        continue
    c, m = rows[wl].get("cairn", []), rows[wl].get("minio", [])
    lower_better = units[wl].startswith("ms")
    ratios = [(b / a if lower_better else a / b) for a, b in zip(c, m) if a and b]
    fmt = lambda v: ", ".join(f"{x:,.1f}" if lower_better else f"{x:,.0f}" for x in v)
    line = f"{labels[wl]:28} cairn {fmt(c)} | minio {fmt(m)} {units[wl]} | {', '.join(f'{r:.2f}x' for r in ratios)}"
    if wl in targets and ratios:
        line += f" (target >= {targets[wl]}x: {'met' if min(ratios) >= targets[wl] else 'MISSED'})"
    if wl in cpu:
        line += f" | server CPU us/request: cairn {fmt(cpu[wl].get('cairn', []))}, minio {fmt(cpu[wl].get('minio', []))}"
    print(line)
PY
