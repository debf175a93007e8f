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
