# shellcheck shell=bash
# Sourced by the bench scripts. bench_init PREFIX makes WORK, a temporary
# directory, and PIDS, the background processes a script starts (append
# to it); both are cleaned up when the script exits.
bench_init() {
  WORK=$(mktemp -d "/tmp/$1.XXXXXX")
  PIDS=()
  trap bench_cleanup EXIT
  # The servers a script starts take this root key (so none writes the
  # user's credentials file), and its cairn commands use it; a node that
  # joins uses the bootstrap join token BENCH_TOKEN.
  export CAIRN_ROOT_ACCESS_KEY=benchroot CAIRN_ROOT_SECRET_KEY=bench-root-secret-1
  export CAIRN_ACCESS_KEY=$CAIRN_ROOT_ACCESS_KEY CAIRN_SECRET_KEY=$CAIRN_ROOT_SECRET_KEY
  export CAIRN_CREDENTIALS_FILE="$WORK/credentials"
  export BENCH_TOKEN=cjt1.benchtok.abcdefghijklmnopqrstuvwxyz234567
}

bench_cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}

# MinIO, the S3 peer: the pinned release, built with the Go toolchain
# (about ten minutes the first time) into $(go env GOPATH)/bin unless
# MINIO names a binary or one is on the PATH.
MINIO_VERSION=v0.0.0-20260212201848-7aac2a2c5b7c
minio_ensure() {
  if [ -n "${MINIO:-}" ]; then return; fi
  MINIO=$(command -v minio || true)
  if [ -z "$MINIO" ]; then
    MINIO="$(go env GOPATH)/bin/minio"
    if [ ! -x "$MINIO" ]; then
      echo "building MinIO (github.com/minio/minio@$MINIO_VERSION) with go install; this takes a while" >&2
      go install "github.com/minio/minio@$MINIO_VERSION"
    fi
  fi
}

# minio_start DIR ADDR CONSOLE_ADDR ACCESS SECRET: starts MinIO on one
# drive, on loopback, and waits until it answers. Sets MINIO_PID (also
# appended to PIDS).
minio_start() {
  MINIO_ROOT_USER=$4 MINIO_ROOT_PASSWORD=$5 MINIO_BROWSER=off MINIO_UPDATE=off \
    "$MINIO" server "$1" --address "$2" --console-address "$3" --quiet > "$1.log" 2>&1 &
  MINIO_PID=$!; PIDS+=("$MINIO_PID")
  for _ in $(seq 300); do curl -sf "http://$2/minio/health/ready" >/dev/null && return; sleep 0.1; done
  echo "MinIO did not start:" >&2; cat "$1.log" >&2; return 1
}
