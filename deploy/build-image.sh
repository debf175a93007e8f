#!/usr/bin/env bash
# Builds the cairn Docker image FROM scratch with the static binary.
#   deploy/build-image.sh [TAG]     # default tag: cairn:dev
set -euo pipefail
cd "$(dirname "$0")/.."
TAG=${1:-cairn:dev}
CTX=$(mktemp -d)
trap 'rm -rf "$CTX"' EXIT
CGO_ENABLED=0 go build -trimpath -o "$CTX/cairn" ./cmd/cairn
cp deploy/Dockerfile "$CTX/Dockerfile"
docker build -q -t "$TAG" "$CTX" >/dev/null
echo "$TAG"
