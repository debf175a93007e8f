#!/usr/bin/env bash
# Measures Cairn against its peers on this machine, in one run, with the
# same sizes and concurrency: redis-server (redis-benchmark), Debian's
# etcd-server (a put driver on the etcd v3 Go client), MinIO on one drive
# (against Cairn's S3 API, both driven by `cairn bench --s3`), raw fsync'd
# disk writes (dd) and loopback TCP bandwidth. Prints each figure and the
# ratios.
#
#   scripts/bench-peers.sh            # DURATION=10 CONC=50 by default
#
# Installs redis-server, redis-tools and etcd-server from Debian if
# missing, and builds MinIO's pinned release unless MINIO names a binary
# (bench-lib.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-10}
CONC=${CONC:-50}
source scripts/bench-lib.sh
bench_init cairn-bench

need=()
command -v redis-server >/dev/null || need+=(redis-server)
command -v redis-benchmark >/dev/null || need+=(redis-tools)
command -v etcd >/dev/null || [ -x /usr/bin/etcd ] || need+=(etcd-server)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing ${need[*]} from Debian" >&2
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

minio_ensure

echo "== building"
CGO_ENABLED=0 go build -o "$WORK/cairn" ./cmd/cairn
go build -o "$WORK/peerbench" ./scripts/peerbench

json() { python3 -c "import json,sys; d=json.loads(sys.stdin.readline()); print(d['$1'])"; }
cpu_ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }

echo "== cairn (single node, $WORK/cairn-data)"
"$WORK/cairn" server --data-dir "$WORK/cairn-data" --port 17070 --http-port 17080 --meta-port 17090 --peer-port 17071 --meta-client-port 17091 --log-level warn &
CPID=$!; PIDS+=("$CPID")
for _ in $(seq 100); do curl -sf http://127.0.0.1:17080/healthz >/dev/null && break; sleep 0.1; done
CB="$WORK/cairn bench --server 127.0.0.1:17070 --duration ${DURATION}s --json"
cairn_put=$($CB --op put --size 1KiB --concurrency "$CONC" --keys 10000)
t0=$(cpu_ticks "$CPID")
cairn_get=$($CB --op get --size 1KiB --concurrency "$CONC" --keys 10000)
t1=$(cpu_ticks "$CPID")
cairn_put16=$($CB --op put --size 16MiB --concurrency 4 --keys 16 --space big)
cairn_get16=$($CB --op get --size 16MiB --concurrency 4 --keys 16 --space big)
get_ops=$(echo "$cairn_get" | json ops)
clk=$(getconf CLK_TCK)
# Server CPU per GET includes the one-off preload PUTs of the GET run; the
# figure is therefore an upper bound.
cpu_us=$(python3 -c "print(round(($t1-$t0)/$clk*1e6/$get_ops, 2))")
echo "cairn 1KiB put: $cairn_put"
echo "cairn 1KiB get: $cairn_get"
echo "cairn 16MiB put: $cairn_put16"
echo "cairn 16MiB get: $cairn_get16"
echo "cairn server CPU per 1KiB GET (upper bound): ${cpu_us} us"
kill "$CPID"; wait "$CPID" 2>/dev/null || true

echo "== redis (appendfsync always for SET)"
redis-server --port 16379 --save '' --appendonly yes --appendfsync always --dir "$WORK" --daemonize no >/dev/null &
PIDS+=("$!")
sleep 0.5
n=$((DURATION * 20000))
redis_set=$(redis-benchmark -p 16379 -t set -d 1024 -c "$CONC" -n "$n" -r 10000 -P 1 -q --csv | tail -1 | cut -d, -f2 | tr -d '"')
redis_get=$(redis-benchmark -p 16379 -t get -d 1024 -c "$CONC" -n "$((n * 5))" -r 10000 -P 1 -q --csv | tail -1 | cut -d, -f2 | tr -d '"')
echo "redis SET (appendfsync always) ops/s: $redis_set"
echo "redis GET ops/s: $redis_get"

echo "== etcd (Debian etcd-server)"
ETCD=$(command -v etcd || echo /usr/bin/etcd)
"$ETCD" --data-dir "$WORK/etcd" --listen-client-urls http://127.0.0.1:12379 --advertise-client-urls http://127.0.0.1:12379 \
  --listen-peer-urls http://127.0.0.1:12380 >/dev/null 2>&1 &
PIDS+=("$!")
sleep 2
etcd_put=$("$WORK/peerbench" etcd-put -endpoint 127.0.0.1:12379 -size 1024 -concurrency "$CONC" -duration "${DURATION}s")
echo "etcd put: $etcd_put"

echo "== S3: Cairn and MinIO (cairn bench --s3, aws-sdk-go-v2)"
export AWS_ACCESS_KEY_ID=$CAIRN_ROOT_ACCESS_KEY AWS_SECRET_ACCESS_KEY=$CAIRN_ROOT_SECRET_KEY
"$WORK/cairn" server --data-dir "$WORK/cairn-s3" --port 17070 --http-port 17080 --meta-port 17090 --peer-port 17071 --meta-client-port 17091 --log-level warn &
CPID=$!; PIDS+=("$CPID")
for _ in $(seq 100); do curl -sf http://127.0.0.1:17080/healthz >/dev/null && break; sleep 0.1; done
mkdir -p "$WORK/minio"
minio_start "$WORK/minio" 127.0.0.1:17180 127.0.0.1:17181 "$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY"
s3run() { "$WORK/cairn" bench --s3 "$1" --duration "${DURATION}s" --json "${@:2}"; }
for e in http://127.0.0.1:17080 http://127.0.0.1:17180; do
  s3_put+=("$(s3run "$e" --op put --size 1KiB --concurrency "$CONC")")
  s3_get+=("$(s3run "$e" --op get --size 1KiB --concurrency "$CONC" --keys 10000)")
  s3_get16+=("$(s3run "$e" --op get --size 16MiB --concurrency 4 --keys 16)")
done
echo "cairn S3 1KiB put: ${s3_put[0]}"
echo "minio 1KiB put: ${s3_put[1]}"
echo "cairn S3 1KiB get: ${s3_get[0]}"
echo "minio 1KiB get: ${s3_get[1]}"
echo "cairn S3 16MiB get: ${s3_get16[0]}"
echo "minio 16MiB get: ${s3_get16[1]}"
kill "$CPID" "$MINIO_PID"; wait "$CPID" "$MINIO_PID" 2>/dev/null || true

echo "== disk and loopback"
dd_out=$(dd if=/dev/zero of="$WORK/dd.bin" bs=16M count=32 conv=fsync 2>&1 | tail -1)
echo "dd (16 MiB blocks, fsync): $dd_out"
loop=$("$WORK/peerbench" loopback -size 16777216 -duration 3s)
echo "loopback: $loop"

echo "== ratios"
python3 - "$cairn_put" "$cairn_get" "$cairn_put16" "$cairn_get16" "$redis_set" "$redis_get" "$etcd_put" "$loop" "$dd_out" "$cpu_us" \
  "${s3_put[0]}" "${s3_put[1]}" "${s3_get[0]}" "${s3_get[1]}" "${s3_get16[0]}" "${s3_get16[1]}" <<'PY'
import json, re, sys
cp, cg, cp16, cg16 = (json.loads(a) for a in sys.argv[1:5])
sp, mp, sg, mg, sg16, mg16 = (json.loads(a) for a in sys.argv[11:17])
rset, rget = float(sys.argv[5]), float(sys.argv[6])
ep, lo = json.loads(sys.argv[7]), json.loads(sys.argv[8])
m = re.search(r"([\d.]+) ([GMk]B)/s", sys.argv[9])
disk = float(m.group(1)) * {"GB": 1000, "MB": 1, "kB": 0.001}[m.group(2)] * 1e6 / 2**20 if m else float("nan")
print(f"1KiB GET  cairn {cg['ops_per_sec']:.0f} ops/s vs redis GET {rget:.0f}: {cg['ops_per_sec']/rget:.2f}x (target >= 1.0x)")
print(f"1KiB PUT  cairn {cp['ops_per_sec']:.0f} ops/s vs redis SET always {rset:.0f}: {cp['ops_per_sec']/rset:.2f}x (target >= 1.0x)")
print(f"1KiB PUT  cairn vs etcd put {ep['ops_per_sec']:.0f}: {cp['ops_per_sec']/ep['ops_per_sec']:.2f}x (target >= 2x)")
print(f"16MiB PUT {cp16['mib_per_sec']:.0f} MiB/s = {cp16['mib_per_sec']/disk:.2f}x of fsync'd dd {disk:.0f} MiB/s (aim >= 0.5x)")
print(f"16MiB GET {cg16['mib_per_sec']:.0f} MiB/s = {cg16['mib_per_sec']/lo['mib_per_sec']:.2f}x of loopback {lo['mib_per_sec']:.0f} MiB/s (aim >= 0.5x)")
print(f"server CPU per 1KiB GET <= {sys.argv[10]} us (target <= 13 us)")
print(f"S3 1KiB PUT  cairn {sp['ops_per_sec']:.0f} ops/s vs minio {mp['ops_per_sec']:.0f}: {sp['ops_per_sec']/mp['ops_per_sec']:.2f}x")
print(f"S3 1KiB GET  cairn {sg['ops_per_sec']:.0f} ops/s vs minio {mg['ops_per_sec']:.0f}: {sg['ops_per_sec']/mg['ops_per_sec']:.2f}x")
print(f"S3 16MiB GET cairn {sg16['mib_per_sec']:.0f} MiB/s vs minio {mg16['mib_per_sec']:.0f}: {sg16['mib_per_sec']/mg16['mib_per_sec']:.2f}x")
PY
