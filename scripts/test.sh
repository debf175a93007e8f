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
  echo "== installing docker-compose"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq && $SUDO DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-compose >/dev/null
fi

# The end-to-end S3 tests (cmd/cairn, deploy) run scripts/e2e-s3.sh, which
# drives Debian's S3 clients: awscli, rclone, s3cmd, and boto3 for Debian's
# python3 (not a python3 of pyenv's or a virtualenv's).
if ! scripts/e2e-s3.sh --check-clients >/dev/null 2>&1; then
  echo "== installing awscli rclone s3cmd python3-boto3"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq && $SUDO DEBIAN_FRONTEND=noninteractive apt-get install -y -qq awscli rclone s3cmd python3-boto3 curl >/dev/null
fi
export CAIRN_REQUIRE_S3_CLIENTS=1

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:" >&2
  echo "$unformatted" >&2
  exit 1
fi

echo "== go vet"
go vet ./...

echo "== go test -race"
# Two cores: two packages at a time keeps the embedded etcd and the
# multi-process tests from starving each other.
go test -race -p 2 -timeout 20m -count=1 "$@" ./...
