# shellcheck shell=bash
# Sourced by the bench scripts. bench_init PREFIX makes WORK, a temporary
# directory, and PIDS, the background processes a script starts (append
# to it); both are cleaned up when the script exits.
bench_init() {
  WORK=$(mktemp -d "/tmp/$1.XXXXXX")
  PIDS=()
  trap bench_cleanup EXIT
}

bench_cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
