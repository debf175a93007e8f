#!/usr/bin/env bash
# Runs Cairn's whole test suite on a fresh machine: installs what the tests
# need, checks formatting and vet, then runs every test with the race
# detector. Usage: scripts/test.sh [extra go test flags]
set -euo pipefail
cd "$(dirname "$0")/.."

# Tools the tests use. Go modules come through the module proxy on first use.
if ! command -v go >/dev/null; then
  echo "test.sh: Go is not installed; install Go 1.26 or newer" >&2
  exit 1
fi

# Debian packages are installed as root, or through sudo for another user.
# The variable goes through env: "$SUDO VAR=value cmd" with SUDO empty would
# run a command named VAR=value.
SUDO=()
if [ "$(id -u)" -ne 0 ]; then
  if ! command -v sudo >/dev/null; then
    echo "test.sh: installing Debian packages needs root or sudo; run as root, or install sudo" >&2
    exit 1
  fi
  SUDO=(sudo)
fi
apt_updated=""
apt_install() {
  echo "== installing $*"
  if [ -z "$apt_updated" ]; then
    "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    apt_updated=1
  fi
  "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# The image and cluster tests run containers on the machine's Docker engine
# (no registry is needed: the image is built FROM scratch).
if ! docker info >/dev/null 2>&1; then
  echo "test.sh: the Docker engine is not reachable (docker info failed); the image and cluster tests need it" >&2
  exit 1
fi
export CAIRN_REQUIRE_DOCKER=1
# deploy/compose.yaml is exercised with the Compose tool: the docker compose
# plugin where it exists, else docker-compose, installed from Debian.
if ! docker compose version >/dev/null 2>&1 && ! command -v docker-compose >/dev/null; then
  apt_install docker-compose
fi

# The end-to-end S3 tests (cmd/cairn, deploy) run scripts/e2e-s3.sh, which
# drives Debian's S3 clients: awscli, rclone, s3cmd, and boto3 for Debian's
# python3 (not a python3 of pyenv's or a virtualenv's).
if ! scripts/e2e-s3.sh --check-clients >/dev/null 2>&1; then
  apt_install awscli rclone s3cmd python3-boto3 curl ca-certificates
  scripts/e2e-s3.sh --check-clients
fi
export CAIRN_REQUIRE_S3_CLIENTS=1

# The SQL port is tested with Debian's MariaDB client (internal/node).
command -v mariadb >/dev/null || apt_install mariadb-client
export CAIRN_REQUIRE_MARIADB=1

# The Python SDK's tests (python/tests, run by internal/node) use Debian's
# pytest for Debian's python3.
/usr/bin/python3 -c "import pytest, setuptools, wheel, pip" 2>/dev/null || apt_install python3-pytest python3-pip python3-setuptools python3-wheel
export CAIRN_REQUIRE_PYTEST=1

# The console is tested in Debian's headless chromium (internal/node).
command -v chromium >/dev/null || apt_install chromium
export CAIRN_REQUIRE_CHROMIUM=1

# The scripts are checked as the Go code is.
command -v shellcheck >/dev/null || apt_install shellcheck

echo "== shellcheck"
mapfile -t scripts < <(git ls-files '*.sh')
shellcheck "${scripts[@]}"

echo "== gofmt"
mapfile -t gofiles < <(git ls-files '*.go')
unformatted=$(gofmt -l "${gofiles[@]}")
if [ -n "$unformatted" ]; then
  echo "gofmt would change:" >&2
  echo "$unformatted" >&2
  exit 1
fi

echo "== go vet"
go vet ./...

echo "== house rules"
# The layering and the pure packages' limits (internal/houserules), first,
# so a broken rule is named before the long run.
go test -count=1 ./internal/houserules

echo "== go test -race"
# Two cores: two packages at a time keeps the embedded etcd and the
# multi-process tests from starving each other.
go test -race -p 2 -timeout 20m -count=1 "$@" ./...
