#!/usr/bin/env bash
# End-to-end test of Cairn's S3 API with real clients from Debian: awscli,
# rclone, s3cmd and boto3 (python3-boto3, through scripts/e2e-s3-boto3.py).
#
#   scripts/e2e-s3.sh ENDPOINT ACCESS_KEY SECRET_KEY [OTHER_ENDPOINT...]
#   scripts/e2e-s3.sh --check-clients    # exit 0 when every client is installed
#
# ENDPOINT is http://HOST:PORT of any Cairn node's HTTP port. Every
# OTHER_ENDPOINT (other nodes of the same cluster) adds cross-node steps:
# objects written through ENDPOINT are read through it and the other way
# round. The run makes a bucket of its own (e2e-...), removes it at the end,
# and touches nothing else. Each step prints "== client: step", runs under
# set -e in a subshell of its own and is checked (content by sha256sum,
# counts of listed keys, exit codes; steps that must fail are checked to
# fail); a failed step is reported and the run goes on, so one run shows
# every failure. The exit status is 1 when any step failed.
#
# Environment: E2E_DEBUG=1 runs the clients with their debug output (the
# HTTP requests and responses); E2E_BOTO3_MIB (default 100, at least 16) is
# the size of boto3's multipart object. Clients are configured by environment
# variables and temporary config files only; the user's own configuration is
# ignored.
# Every client makes one attempt per request (no retries), so a server error
# fails the step instead of being retried away.
set -euo pipefail

AWS_BIN=/usr/bin/aws # not the first aws on PATH (pyenv's shim)
RCLONE_BIN=/usr/bin/rclone
S3CMD_BIN=/usr/bin/s3cmd
PYTHON_BIN=/usr/bin/python3 # Debian's, which has python3-boto3
HERE=$(cd "$(dirname "$0")" && pwd)

missing_clients() {
  local m=()
  [ -x "$AWS_BIN" ] || m+=("$AWS_BIN (awscli)")
  [ -x "$RCLONE_BIN" ] || m+=("$RCLONE_BIN (rclone)")
  [ -x "$S3CMD_BIN" ] || m+=("$S3CMD_BIN (s3cmd)")
  if ! [ -x "$PYTHON_BIN" ] || ! "$PYTHON_BIN" -c 'import boto3' 2>/dev/null; then m+=("boto3 for $PYTHON_BIN (python3-boto3)"); fi
  command -v curl >/dev/null || m+=("curl")
  command -v sha256sum >/dev/null || m+=("sha256sum (coreutils)")
  if [ ${#m[@]} -gt 0 ]; then printf '%s\n' "${m[@]}"; fi
}

if [ "${1:-}" = "--check-clients" ]; then
  missing=$(missing_clients)
  if [ -n "$missing" ]; then
    echo "missing S3 clients (apt-get install awscli rclone s3cmd python3-boto3 curl):" >&2
    echo "$missing" >&2
    exit 1
  fi
  exit 0
fi
if [ $# -lt 3 ]; then
  echo "usage: $0 ENDPOINT ACCESS_KEY SECRET_KEY [OTHER_ENDPOINT...]" >&2
  echo "       $0 --check-clients" >&2
  exit 2
fi
ENDPOINT=${1%/}
ACCESS_KEY=$2
SECRET_KEY=$3
shift 3
OTHERS=()
for e in "$@"; do OTHERS+=("${e%/}"); done
case "$ENDPOINT" in
  http://*) ;;
  *) echo "e2e-s3: ENDPOINT must be http://HOST:PORT, not $ENDPOINT" >&2; exit 2 ;;
esac
missing=$(missing_clients)
if [ -n "$missing" ]; then
  echo "e2e-s3: missing clients:" >&2
  echo "$missing" >&2
  exit 2
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/cairn-e2e-s3.XXXXXX")
BUCKET="e2e-$(date +%Y%m%d-%H%M%S)-$$-$RANDOM"
FAILURES="$WORK/failures"
: >"$FAILURES"
DEBUG=${E2E_DEBUG:-}

# --- client configuration (environment and files under $WORK only) ---

# awscli: path-style addressing (a host name endpoint would otherwise get
# BUCKET.host), no user config, one attempt per request.
unset AWS_PROFILE AWS_SESSION_TOKEN AWS_SECURITY_TOKEN AWS_ENDPOINT_URL AWS_CA_BUNDLE AWS_REGION
export AWS_ACCESS_KEY_ID="$ACCESS_KEY" AWS_SECRET_ACCESS_KEY="$SECRET_KEY"
export AWS_DEFAULT_REGION=us-east-1
export AWS_CONFIG_FILE="$WORK/aws-config" AWS_SHARED_CREDENTIALS_FILE="$WORK/aws-credentials"
export AWS_PAGER="" AWS_EC2_METADATA_DISABLED=true AWS_MAX_ATTEMPTS=1 AWS_RETRY_MODE=standard
cat >"$AWS_CONFIG_FILE" <<'EOF'
[default]
s3 =
    addressing_style = path
EOF
# A stalled request fails in 30s rather than the CLI's 60s.
AWS_FLAGS=(--cli-read-timeout 30)
[ -n "$DEBUG" ] && AWS_FLAGS+=(--debug)
# aws against ENDPOINT; awsat ENDPOINT ... against another node.
awsat() {
  local ep=$1
  shift
  "$AWS_BIN" --endpoint-url "$ep" "${AWS_FLAGS[@]}" "$@"
}
aws() { awsat "$ENDPOINT" "$@"; }

# rclone: remote "cairn" on ENDPOINT; cairn2, cairn3... on the others.
export RCLONE_CONFIG="$WORK/rclone.conf"
: >"$RCLONE_CONFIG"
rclone_remote() { # NAME ENDPOINT
  local v
  v=$(echo "RCLONE_CONFIG_$1" | tr '[:lower:]' '[:upper:]')
  export "${v}_TYPE=s3" "${v}_PROVIDER=Other" "${v}_ENV_AUTH=false" \
    "${v}_ACCESS_KEY_ID=$ACCESS_KEY" "${v}_SECRET_ACCESS_KEY=$SECRET_KEY" \
    "${v}_ENDPOINT=$2" "${v}_REGION=us-east-1" "${v}_FORCE_PATH_STYLE=true"
}
rclone_remote cairn "$ENDPOINT"
RCLONE_FLAGS=(--retries 1 --low-level-retries 1)
[ -n "$DEBUG" ] && RCLONE_FLAGS+=(-vv --dump headers)
rclone() { "$RCLONE_BIN" "${RCLONE_FLAGS[@]}" "$@"; }

# s3cmd: a config file with the endpoint as both host_base and host_bucket
# (no %(bucket)s: path style), plain HTTP, SigV4.
s3cmd_config() { # FILE ENDPOINT
  cat >"$1" <<EOF
[default]
access_key = $ACCESS_KEY
secret_key = $SECRET_KEY
host_base = ${2#http://}
host_bucket = ${2#http://}
use_https = False
signature_v2 = False
bucket_location = us-east-1
check_ssl_certificate = False
guess_mime_type = True
progress_meter = False
max_retries = 1
EOF
}
s3cmd_config "$WORK/s3cmd.cfg" "$ENDPOINT"
S3CMD_FLAGS=(--config "$WORK/s3cmd.cfg")
[ -n "$DEBUG" ] && S3CMD_FLAGS+=(--debug)
s3cmd() { "$S3CMD_BIN" "${S3CMD_FLAGS[@]}" "$@"; }

# --- the step runner and checks ---

STEPS=0
# step NAME FUNCTION [ARGS...] runs FUNCTION under set -e in a subshell and
# records its failure.
# feature_step: a step of the S3 features (policies, ACLs, SSE, lifecycle,
# object lock, S3's versioning defaults). They read and write through one
# endpoint, so a run against a cluster (OTHER endpoints given) leaves
# them to the single-node run and keeps to the cross-node steps.
feature_step() {
  if [ "${#OTHERS[@]}" -gt 0 ]; then
    echo "== $1 (left to the single-node run)"
    return 0
  fi
  step "$@"
}

step() {
  local name=$1 t0=$SECONDS rc
  shift
  STEPS=$((STEPS + 1))
  echo "== $name"
  set +e
  (
    set -e
    "$@"
  )
  rc=$?
  set -e
  if [ "$rc" -eq 0 ]; then
    echo "   ok ($((SECONDS - t0))s)"
  else
    echo "FAIL: $name (exit $rc, $((SECONDS - t0))s)"
    echo "$name" >>"$FAILURES"
  fi
}

fail() {
  echo "   check failed: $*" >&2
  return 1
}
# expect_eq GOT WANT WHAT
expect_eq() { [ "$1" = "$2" ] || fail "$3: got '$1', want '$2'"; }
# same_file A B: equal content by SHA-256
same_file() {
  local a b
  [ -f "$1" ] || fail "$1 does not exist"
  [ -f "$2" ] || fail "$2 does not exist"
  a=$(sha256sum <"$1" | cut -d' ' -f1)
  b=$(sha256sum <"$2" | cut -d' ' -f1)
  [ "$a" = "$b" ] || fail "$2 (sha256 $b) differs from $1 (sha256 $a)"
}
# expect_fail WHAT CMD...: CMD must fail; its output is kept in $WORK/last-fail
expect_fail() {
  local what=$1
  shift
  if "$@" >"$WORK/last-fail" 2>&1; then
    cat "$WORK/last-fail" >&2
    fail "$what: succeeded but should have failed"
  fi
  echo "   failed as it should ($what): $(tr '\n' ' ' <"$WORK/last-fail" | cut -c1-300)"
}
# expect_output_has WHAT PATTERN: the last expect_fail's output matches PATTERN
expect_output_has() {
  grep -Eq "$2" "$WORK/last-fail" || fail "$1: output does not match /$2/"
}
randfile() { head -c "$2" /dev/urandom >"$1"; } # FILE BYTES
# http_get URL OUT: prints the HTTP status of a plain (unsigned) GET
http_get() { curl -sS -o "$2" -w '%{http_code}' "$1"; }

cleanup() {
  local rc=$?
  set +e
  if aws s3api head-bucket --bucket "$BUCKET" >/dev/null 2>&1; then
    echo "== cleanup: removing s3://$BUCKET"
    aws s3 rb --force "s3://$BUCKET" >/dev/null 2>&1 ||
      echo "e2e-s3: warning: could not remove bucket $BUCKET" >&2
  fi
  rm -rf "$WORK"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- test data ---

mkdir -p "$WORK/up" "$WORK/down" "$WORK/tree"
echo "hello from cairn e2e $(date)" >"$WORK/up/small.txt"
randfile "$WORK/up/big20.bin" $((20 * 1024 * 1024))
# A tree of 50 small files, some with names that need URL encoding.
for i in $(seq 1 44); do
  d="$WORK/tree/d$((i % 4))/sub$((i % 3))"
  mkdir -p "$d"
  randfile "$d/file$i.bin" $((i * 331))
done
mkdir -p "$WORK/tree/dir with space" "$WORK/tree/ünïcødé"
echo "space" >"$WORK/tree/dir with space/file name.txt"
echo "plus" >"$WORK/tree/plus+sign.txt"
echo "amp" >"$WORK/tree/a=b&c%20d.txt"
echo "unicode" >"$WORK/tree/ünïcødé/ファイル.txt"
echo "tilde" >"$WORK/tree/~tilde(1).txt"
TREE_FILES=$(find "$WORK/tree" -type f | wc -l)

echo "e2e-s3: endpoint $ENDPOINT${OTHERS[*]:+ (others: ${OTHERS[*]})}, bucket $BUCKET"
"$AWS_BIN" --version
"$RCLONE_BIN" version | sed -n 1p # not head: with pipefail, rclone may die of SIGPIPE
"$S3CMD_BIN" --version
"$PYTHON_BIN" -c 'import boto3, botocore; print("boto3", boto3.__version__, "botocore", botocore.__version__)'

# --- awscli ---

aws_mb() {
  aws s3 mb "s3://$BUCKET"
  aws s3api head-bucket --bucket "$BUCKET"
  local n
  n=$(aws s3 ls | grep -c " $BUCKET\$" || true)
  expect_eq "$n" 1 "buckets named $BUCKET in aws s3 ls"
}
step "aws: s3 mb, head-bucket, s3 ls" aws_mb

aws_unversioned() {
  local s v
  s=$(aws s3api get-bucket-versioning --bucket "$BUCKET" --query Status --output text)
  expect_eq "$s" None "a new bucket's versioning Status (unversioned, as S3's)"
  v=$(aws s3api put-object --bucket "$BUCKET" --key plain/k.txt --body "$WORK/up/small.txt" --query VersionId --output text)
  expect_eq "$v" None "the VersionId of a write to an unversioned bucket"
  aws s3api put-object --bucket "$BUCKET" --key plain/k.txt --body "$WORK/up/small.txt" >/dev/null
  v=$(aws s3api list-object-versions --bucket "$BUCKET" --prefix plain/ --query 'Versions[].VersionId' --output text)
  expect_eq "$v" null "the versions of an overwritten key in an unversioned bucket"
  aws s3api delete-object --bucket "$BUCKET" --key plain/k.txt --version-id null >/dev/null
  expect_fail "head-object after deleting the null version" aws s3api head-object --bucket "$BUCKET" --key plain/k.txt
}
feature_step "aws: a new bucket is unversioned: null versions, delete --version-id null" aws_unversioned

aws_small() {
  aws s3 cp --only-show-errors "$WORK/up/small.txt" "s3://$BUCKET/aws/small.txt"
  aws s3 cp --only-show-errors "s3://$BUCKET/aws/small.txt" "$WORK/down/small.txt"
  same_file "$WORK/up/small.txt" "$WORK/down/small.txt"
}
step "aws: s3 cp a small file up and down" aws_small

aws_big() {
  aws s3 cp --only-show-errors "$WORK/up/big20.bin" "s3://$BUCKET/aws/big20.bin"
  local etag
  etag=$(aws s3api head-object --bucket "$BUCKET" --key aws/big20.bin --query ETag --output text)
  # The CLI cuts 8 MiB parts: 20 MiB is 3 parts.
  [[ "$etag" =~ ^\"[0-9a-f]{32}-3\"$ ]] || fail "ETag of a 3-part upload: $etag"
  aws s3 cp --only-show-errors "s3://$BUCKET/aws/big20.bin" "$WORK/down/big20.bin"
  same_file "$WORK/up/big20.bin" "$WORK/down/big20.bin"
}
step "aws: s3 cp 20 MiB (multipart upload by the CLI) up and down" aws_big

aws_sync_up() {
  aws s3 sync --only-show-errors "$WORK/tree" "s3://$BUCKET/tree"
  local n
  n=$(aws s3 ls --recursive "s3://$BUCKET/tree/" | wc -l)
  expect_eq "$n" "$TREE_FILES" "keys listed by aws s3 ls --recursive"
  # A second sync finds nothing to do.
  n=$(aws s3 sync --dryrun "$WORK/tree" "s3://$BUCKET/tree" | wc -l)
  expect_eq "$n" 0 "files a repeated sync would upload"
}
step "aws: s3 sync a tree of $TREE_FILES files up, s3 ls --recursive" aws_sync_up

aws_sync_down() {
  aws s3 sync --only-show-errors "s3://$BUCKET/tree" "$WORK/down/tree"
  diff -r "$WORK/tree" "$WORK/down/tree"
}
step "aws: s3 sync the tree down, diff -r" aws_sync_down

# botocore sends Expect: 100-continue with every PutObject, even an empty
# one. If the server answers an empty PUT without a 100 Continue first, this
# botocore (1.29, Debian 12) misreads the next response on that pooled
# connection and stalls until its read timeout (boto/botocore#3755). With
# one request at a time the CLI uploads the empty file first and the other
# over the same connection.
aws_empty_then_data() {
  mkdir -p "$WORK/serial"
  : >"$WORK/serial/a-empty.txt"
  echo "after the empty one" >"$WORK/serial/b-data.txt"
  printf '[default]\ns3 =\n    addressing_style = path\n    max_concurrent_requests = 1\n' >"$WORK/aws-config-serial"
  AWS_CONFIG_FILE="$WORK/aws-config-serial" aws s3 cp --only-show-errors --recursive --cli-read-timeout 10 "$WORK/serial" "s3://$BUCKET/serial"
  aws s3 cp --only-show-errors --recursive "s3://$BUCKET/serial" "$WORK/down/serial"
  diff -r "$WORK/serial" "$WORK/down/serial"
}
step "aws: s3 cp an empty file, then another over the same connection" aws_empty_then_data

aws_versioning_on() {
  aws s3api put-bucket-versioning --bucket "$BUCKET" --versioning-configuration Status=Enabled
  local s
  s=$(aws s3api get-bucket-versioning --bucket "$BUCKET" --query Status --output text)
  expect_eq "$s" Enabled "get-bucket-versioning Status"
}
step "aws: s3api put-bucket-versioning Enabled, get-bucket-versioning" aws_versioning_on

VKEY=versioned/note.txt
aws_versions_put() {
  local i vid
  : >"$WORK/vids"
  for i in 1 2 3; do
    echo "version $i of the note, $RANDOM$RANDOM" >"$WORK/up/v$i.txt"
    vid=$(aws s3api put-object --bucket "$BUCKET" --key "$VKEY" --body "$WORK/up/v$i.txt" --query VersionId --output text)
    if [ -z "$vid" ] || [ "$vid" = None ]; then fail "put-object returned no VersionId"; fi
    echo "$vid" >>"$WORK/vids"
  done
  expect_eq "$(sort -u "$WORK/vids" | wc -l)" 3 "distinct version ids of 3 puts"
  aws s3api get-object --bucket "$BUCKET" --key "$VKEY" "$WORK/down/vlatest.txt" >/dev/null
  same_file "$WORK/up/v3.txt" "$WORK/down/vlatest.txt"
}
step "aws: s3api put-object the same key 3 times" aws_versions_put

aws_list_versions() {
  local n latest
  n=$(aws s3api list-object-versions --bucket "$BUCKET" --prefix "$VKEY" --query "length(Versions[?Key=='$VKEY'])" --output text)
  expect_eq "$n" 3 "versions of $VKEY in list-object-versions"
  latest=$(aws s3api list-object-versions --bucket "$BUCKET" --prefix "$VKEY" --query "Versions[?IsLatest].VersionId" --output text)
  expect_eq "$latest" "$(sed -n 3p "$WORK/vids")" "the IsLatest version"
}
step "aws: s3api list-object-versions shows 3 versions" aws_list_versions

aws_get_version() {
  local i
  for i in 1 2; do
    aws s3api get-object --bucket "$BUCKET" --key "$VKEY" --version-id "$(sed -n ${i}p "$WORK/vids")" "$WORK/down/v$i.txt" >/dev/null
    same_file "$WORK/up/v$i.txt" "$WORK/down/v$i.txt"
  done
}
step "aws: s3api get-object --version-id of older versions" aws_get_version

aws_delete_marker() {
  local dm n
  dm=$(aws s3api delete-object --bucket "$BUCKET" --key "$VKEY" --query DeleteMarker --output text)
  expect_eq "$dm" True "DeleteMarker in the delete-object answer"
  n=$(aws s3api list-object-versions --bucket "$BUCKET" --prefix "$VKEY" --query "length(DeleteMarkers[?Key=='$VKEY' && IsLatest])" --output text)
  expect_eq "$n" 1 "latest delete markers of $VKEY in list-object-versions"
  n=$(aws s3api list-object-versions --bucket "$BUCKET" --prefix "$VKEY" --query "length(Versions[?Key=='$VKEY'])" --output text)
  expect_eq "$n" 3 "versions of $VKEY kept after the delete"
  expect_fail "get-object of a deleted key" aws s3api get-object --bucket "$BUCKET" --key "$VKEY" "$WORK/down/deleted.txt"
  expect_output_has "get-object of a deleted key" 'NoSuchKey|404'
  aws s3api get-object --bucket "$BUCKET" --key "$VKEY" --version-id "$(sed -n 1p "$WORK/vids")" "$WORK/down/v1again.txt" >/dev/null
  same_file "$WORK/up/v1.txt" "$WORK/down/v1again.txt"
}
step "aws: s3api delete-object leaves a DeleteMarker in list-object-versions" aws_delete_marker

aws_presign() {
  local url bad sig c status
  aws s3 cp --only-show-errors "$WORK/up/small.txt" "s3://$BUCKET/presign/hello.txt"
  url=$(aws s3 presign "s3://$BUCKET/presign/hello.txt" --expires-in 300)
  status=$(http_get "$url" "$WORK/down/presigned.txt")
  expect_eq "$status" 200 "status of a GET by the presigned URL"
  same_file "$WORK/up/small.txt" "$WORK/down/presigned.txt"
  # One hex digit of the signature changed.
  sig=${url##*X-Amz-Signature=}
  sig=${sig%%&*}
  c=0
  [ "${sig:0:1}" = 0 ] && c=1
  bad=${url/X-Amz-Signature=$sig/X-Amz-Signature=$c${sig:1}}
  status=$(http_get "$bad" "$WORK/down/tampered.txt")
  expect_eq "$status" 403 "status of a GET by a presigned URL with a changed signature ($(cat "$WORK/down/tampered.txt"))"
  grep -q SignatureDoesNotMatch "$WORK/down/tampered.txt" || fail "no SignatureDoesNotMatch in: $(cat "$WORK/down/tampered.txt")"
  # The signature of one key used for another.
  bad=${url/presign\/hello.txt/aws\/small.txt}
  status=$(http_get "$bad" "$WORK/down/tampered.txt")
  expect_eq "$status" 403 "status of a GET of another key with a presigned URL ($(cat "$WORK/down/tampered.txt"))"
  # An expired URL.
  url=$(aws s3 presign "s3://$BUCKET/presign/hello.txt" --expires-in 1)
  sleep 2
  status=$(http_get "$url" "$WORK/down/expired.txt")
  expect_eq "$status" 403 "status of a GET by an expired presigned URL ($(cat "$WORK/down/expired.txt"))"
}
step "aws: s3 presign, GET with curl; changed signature, other key, expired: 403" aws_presign

aws_tagging() {
  local n v
  aws s3api put-object-tagging --bucket "$BUCKET" --key aws/small.txt \
    --tagging 'TagSet=[{Key=env,Value=e2e},{Key=team,Value=storage}]'
  n=$(aws s3api get-object-tagging --bucket "$BUCKET" --key aws/small.txt --query 'length(TagSet)' --output text)
  expect_eq "$n" 2 "tags from get-object-tagging"
  v=$(aws s3api get-object-tagging --bucket "$BUCKET" --key aws/small.txt --query "TagSet[?Key=='env'].Value" --output text)
  expect_eq "$v" e2e "tag env"
  aws s3api delete-object-tagging --bucket "$BUCKET" --key aws/small.txt >/dev/null
  n=$(aws s3api get-object-tagging --bucket "$BUCKET" --key aws/small.txt --query 'length(TagSet)' --output text)
  expect_eq "$n" 0 "tags after delete-object-tagging"
}
step "aws: s3api put-object-tagging, get-object-tagging, delete-object-tagging" aws_tagging

aws_tagging_header() {
  local n v
  aws s3api put-object --bucket "$BUCKET" --key aws/tagged.txt --body "$WORK/up/small.txt" --tagging 'color=blue&size=small' >/dev/null
  n=$(aws s3api get-object-tagging --bucket "$BUCKET" --key aws/tagged.txt --query 'length(TagSet)' --output text)
  expect_eq "$n" 2 "tags set by put-object --tagging"
  v=$(aws s3api get-object-tagging --bucket "$BUCKET" --key aws/tagged.txt --query "TagSet[?Key=='color'].Value" --output text)
  expect_eq "$v" blue "tag color"
}
step "aws: s3api put-object --tagging (x-amz-tagging), get-object-tagging" aws_tagging_header

aws_metadata() {
  local out
  aws s3api put-object --bucket "$BUCKET" --key aws/meta.txt --body "$WORK/up/small.txt" \
    --metadata k=v,color=blue --content-type text/x-e2e --cache-control max-age=60 >/dev/null
  out=$(aws s3api head-object --bucket "$BUCKET" --key aws/meta.txt \
    --query '[Metadata.k, Metadata.color, ContentType, CacheControl, ContentLength]' --output text)
  expect_eq "$out" "$(printf 'v\tblue\ttext/x-e2e\tmax-age=60\t%s' "$(stat -c %s "$WORK/up/small.txt")")" "head-object metadata, type, cache-control, length"
}
step "aws: s3api put-object --metadata, head-object" aws_metadata

aws_policy_acl() {
  local url status
  aws s3 cp --only-show-errors "$WORK/up/small.txt" "s3://$BUCKET/public/hello.txt"
  url="$ENDPOINT/$BUCKET/public/hello.txt"
  status=$(http_get "$url" "$WORK/down/anon.txt")
  expect_eq "$status" 403 "an anonymous GET before any policy"
  aws s3api put-bucket-policy --bucket "$BUCKET" --policy \
    '{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::'"$BUCKET"'/public/*"}]}'
  status=$(http_get "$url" "$WORK/down/anon.txt")
  expect_eq "$status" 200 "an anonymous GET the policy allows"
  same_file "$WORK/up/small.txt" "$WORK/down/anon.txt"
  status=$(http_get "$ENDPOINT/$BUCKET/aws/small.txt" "$WORK/down/anon.txt")
  expect_eq "$status" 403 "an anonymous GET outside the policy's resource"
  expect_eq "$(aws s3api get-bucket-policy-status --bucket "$BUCKET" --query PolicyStatus.IsPublic --output text)" True "get-bucket-policy-status IsPublic"
  aws s3api delete-bucket-policy --bucket "$BUCKET"
  status=$(http_get "$url" "$WORK/down/anon.txt")
  expect_eq "$status" 403 "an anonymous GET after delete-bucket-policy"
  aws s3api put-object-acl --bucket "$BUCKET" --key public/hello.txt --acl public-read
  status=$(http_get "$url" "$WORK/down/anon.txt")
  expect_eq "$status" 200 "an anonymous GET of an object with the public-read ACL"
  aws s3api put-object-acl --bucket "$BUCKET" --key public/hello.txt --acl private
  status=$(http_get "$url" "$WORK/down/anon.txt")
  expect_eq "$status" 403 "an anonymous GET after the ACL went back to private"
}
feature_step "aws: put-bucket-policy and put-object-acl open anonymous reads; removing them closes them" aws_policy_acl

aws_sse() {
  local s
  aws s3 cp --only-show-errors --sse AES256 "$WORK/up/small.txt" "s3://$BUCKET/sse/s3.txt"
  s=$(aws s3api head-object --bucket "$BUCKET" --key sse/s3.txt --query ServerSideEncryption --output text)
  expect_eq "$s" AES256 "head-object ServerSideEncryption of an SSE-S3 object"
  aws s3 cp --only-show-errors "s3://$BUCKET/sse/s3.txt" "$WORK/down/sse-s3.txt"
  same_file "$WORK/up/small.txt" "$WORK/down/sse-s3.txt"
  head -c 32 /dev/urandom >"$WORK/ssec.key"
  aws s3 cp --only-show-errors --sse-c AES256 --sse-c-key "fileb://$WORK/ssec.key" "$WORK/up/big20.bin" "s3://$BUCKET/sse/c.bin"
  expect_fail "a GET of an SSE-C object without its key" aws s3 cp --only-show-errors "s3://$BUCKET/sse/c.bin" "$WORK/down/ssec-nokey.bin"
  aws s3 cp --only-show-errors --sse-c AES256 --sse-c-key "fileb://$WORK/ssec.key" "s3://$BUCKET/sse/c.bin" "$WORK/down/ssec.bin"
  same_file "$WORK/up/big20.bin" "$WORK/down/ssec.bin"
}
feature_step "aws: cp --sse AES256 and --sse-c (multipart), head-object, get with and without the key" aws_sse

aws_lifecycle_attributes() {
  local id size
  aws s3api put-bucket-lifecycle-configuration --bucket "$BUCKET" --lifecycle-configuration \
    '{"Rules":[{"ID":"tmp-1d","Status":"Enabled","Filter":{"Prefix":"tmp/"},"Expiration":{"Days":1},"AbortIncompleteMultipartUpload":{"DaysAfterInitiation":2}}]}'
  id=$(aws s3api get-bucket-lifecycle-configuration --bucket "$BUCKET" --query 'Rules[0].ID' --output text)
  expect_eq "$id" tmp-1d "the rule of get-bucket-lifecycle-configuration"
  expect_fail "a lifecycle rule with Days 0" aws s3api put-bucket-lifecycle-configuration --bucket "$BUCKET" --lifecycle-configuration \
    '{"Rules":[{"ID":"bad","Status":"Enabled","Filter":{"Prefix":""},"Expiration":{"Days":0}}]}'
  aws s3api delete-bucket-lifecycle --bucket "$BUCKET"
  size=$(aws s3api get-object-attributes --bucket "$BUCKET" --key aws/small.txt --object-attributes ObjectSize ETag --query ObjectSize --output text)
  expect_eq "$size" "$(stat -c %s "$WORK/up/small.txt")" "get-object-attributes ObjectSize"
}
feature_step "aws: lifecycle configuration put, get, refused, delete; get-object-attributes" aws_lifecycle_attributes

aws_object_lock() {
  local lb v until
  lb="$BUCKET-lock"
  aws s3api create-bucket --bucket "$lb" --object-lock-enabled-for-bucket >/dev/null
  expect_eq "$(aws s3api get-bucket-versioning --bucket "$lb" --query Status --output text)" Enabled "a lock-enabled bucket's versioning"
  until=$(date -u -d '+1 hour' +%Y-%m-%dT%H:%M:%SZ)
  v=$(aws s3api put-object --bucket "$lb" --key kept.txt --body "$WORK/up/small.txt" \
    --object-lock-mode GOVERNANCE --object-lock-retain-until-date "$until" --query VersionId --output text)
  expect_eq "$(aws s3api get-object-retention --bucket "$lb" --key kept.txt --query Retention.Mode --output text)" GOVERNANCE "get-object-retention Mode"
  expect_fail "deleting a retained version" aws s3api delete-object --bucket "$lb" --key kept.txt --version-id "$v"
  expect_fail "deleting the lock bucket while a version is retained" aws s3api delete-bucket --bucket "$lb"
  aws s3api delete-object --bucket "$lb" --key kept.txt --version-id "$v" --bypass-governance-retention >/dev/null
  aws s3 rb --force "s3://$lb" >/dev/null
}
feature_step "aws: object lock: create-bucket --object-lock-enabled-for-bucket, retention, refused deletes, bypass" aws_object_lock

# --- rclone ---

cp -r "$WORK/tree" "$WORK/rtree"
: >"$WORK/rtree/empty.txt"
rclone_sync() {
  rclone sync "$WORK/rtree" "cairn:$BUCKET/rclone"
  rclone check "$WORK/rtree" "cairn:$BUCKET/rclone"
}
step "rclone: sync a tree to rclone/, check" rclone_sync

rclone_resync() {
  local n
  randfile "$WORK/rtree/d1/sub1/file1.bin" 331 # same size, new content
  echo "grown $RANDOM" >>"$WORK/rtree/plus+sign.txt"
  rm "$WORK/rtree/d2/sub2/file2.bin"
  echo "new file" >"$WORK/rtree/d3/new.txt"
  expect_fail "rclone check of the changed tree before the sync" rclone check "$WORK/rtree" "cairn:$BUCKET/rclone"
  rclone sync "$WORK/rtree" "cairn:$BUCKET/rclone"
  rclone check "$WORK/rtree" "cairn:$BUCKET/rclone"
  n=$(rclone lsf -R --files-only "cairn:$BUCKET/rclone" | wc -l)
  expect_eq "$n" "$(find "$WORK/rtree" -type f | wc -l)" "files listed by rclone lsf -R"
  rclone lsf -R --files-only "cairn:$BUCKET/rclone" >"$WORK/rclone-lsf"
  grep -qx 'd2/sub2/file2.bin' "$WORK/rclone-lsf" && fail "d2/sub2/file2.bin was not removed by sync"
  rclone cat "cairn:$BUCKET/rclone/d1/sub1/file1.bin" >"$WORK/down/rfile1.bin"
  same_file "$WORK/rtree/d1/sub1/file1.bin" "$WORK/down/rfile1.bin"
}
step "rclone: change files, check fails, sync again, check, lsf count" rclone_resync

# --- s3cmd ---

s3cmd_steps() {
  local n md5
  s3cmd put --no-progress "$WORK/up/small.txt" "s3://$BUCKET/s3cmd/small.txt"
  n=$(s3cmd ls "s3://$BUCKET/s3cmd/" | grep -c "s3://$BUCKET/s3cmd/small.txt\$" || true)
  expect_eq "$n" 1 "s3cmd ls lines for s3cmd/small.txt"
  s3cmd get --no-progress "s3://$BUCKET/s3cmd/small.txt" "$WORK/down/s3cmd-small.txt"
  same_file "$WORK/up/small.txt" "$WORK/down/s3cmd-small.txt"
  s3cmd info "s3://$BUCKET/s3cmd/small.txt" >"$WORK/s3cmd-info"
  cat "$WORK/s3cmd-info"
  md5=$(md5sum <"$WORK/up/small.txt" | cut -d' ' -f1)
  grep -q "MD5 sum: *$md5" "$WORK/s3cmd-info" || fail "s3cmd info does not show MD5 $md5"
  s3cmd info "s3://$BUCKET" >"$WORK/s3cmd-binfo"
  cat "$WORK/s3cmd-binfo"
  grep -q "Policy: *none" "$WORK/s3cmd-binfo" || fail "s3cmd info of the bucket does not show 'Policy: none'"
  grep -q "ACL: .*FULL_CONTROL" "$WORK/s3cmd-binfo" || fail "s3cmd info of the bucket does not show the owner's FULL_CONTROL"
  # ACLs: public-read lets anonymous readers in, private shuts them out.
  s3cmd setacl --acl-public "s3://$BUCKET/s3cmd/small.txt"
  code=$(curl -s -o /dev/null -w '%{http_code}' "$ENDPOINT/$BUCKET/s3cmd/small.txt")
  expect_eq "$code" 200 "anonymous GET of the object s3cmd setacl --acl-public opened"
  s3cmd setacl --acl-private "s3://$BUCKET/s3cmd/small.txt"
  code=$(curl -s -o /dev/null -w '%{http_code}' "$ENDPOINT/$BUCKET/s3cmd/small.txt")
  expect_eq "$code" 403 "anonymous GET after s3cmd setacl --acl-private"
  s3cmd del "s3://$BUCKET/s3cmd/small.txt"
  n=$(s3cmd ls "s3://$BUCKET/s3cmd/" | wc -l)
  expect_eq "$n" 0 "s3cmd ls lines after del"
  expect_fail "s3cmd get of a deleted object" s3cmd get --no-progress "s3://$BUCKET/s3cmd/small.txt" "$WORK/down/s3cmd-gone.txt"
}
step "s3cmd: put, ls, get, info (object and bucket), del" s3cmd_steps

s3cmd_multipart() {
  randfile "$WORK/up/s3cmd12.bin" $((12 * 1024 * 1024))
  s3cmd put --no-progress --multipart-chunk-size-mb=5 "$WORK/up/s3cmd12.bin" "s3://$BUCKET/s3cmd/multi.bin"
  s3cmd get --no-progress "s3://$BUCKET/s3cmd/multi.bin" "$WORK/down/s3cmd12.bin"
  same_file "$WORK/up/s3cmd12.bin" "$WORK/down/s3cmd12.bin"
}
step "s3cmd: multipart put (5 MiB parts), get" s3cmd_multipart

# --- boto3 ---

boto3_steps() {
  E2E_FAILURES="$FAILURES" E2E_WORK="$WORK" E2E_DEBUG="$DEBUG" \
    "$PYTHON_BIN" "$HERE/e2e-s3-boto3.py" "$ENDPOINT" "$ACCESS_KEY" "$SECRET_KEY" "$BUCKET" "${OTHERS[@]}"
}
step "boto3: scripts/e2e-s3-boto3.py" boto3_steps

# --- across nodes ---

cross_aws() { # OTHER
  local o=$1 etag1 etag2
  randfile "$WORK/up/x-small.bin" 5000
  randfile "$WORK/up/x-multi.bin" $((12 * 1024 * 1024))
  aws s3 cp --only-show-errors "$WORK/up/x-small.bin" "s3://$BUCKET/cross/small.bin"
  aws s3 cp --only-show-errors "$WORK/up/x-multi.bin" "s3://$BUCKET/cross/multi.bin"
  awsat "$o" s3 cp --only-show-errors "s3://$BUCKET/cross/small.bin" "$WORK/down/x-small.bin"
  awsat "$o" s3 cp --only-show-errors "s3://$BUCKET/cross/multi.bin" "$WORK/down/x-multi.bin"
  same_file "$WORK/up/x-small.bin" "$WORK/down/x-small.bin"
  same_file "$WORK/up/x-multi.bin" "$WORK/down/x-multi.bin"
  etag1=$(aws s3api head-object --bucket "$BUCKET" --key cross/multi.bin --query ETag --output text)
  etag2=$(awsat "$o" s3api head-object --bucket "$BUCKET" --key cross/multi.bin --query ETag --output text)
  expect_eq "$etag2" "$etag1" "ETag through the other node"
  # And the other way round: written there, read and removed here.
  awsat "$o" s3 cp --only-show-errors "$WORK/up/small.txt" "s3://$BUCKET/cross/back.txt"
  aws s3 cp --only-show-errors "s3://$BUCKET/cross/back.txt" "$WORK/down/x-back.txt"
  same_file "$WORK/up/small.txt" "$WORK/down/x-back.txt"
  aws s3 rm --only-show-errors "s3://$BUCKET/cross/back.txt"
  expect_fail "head-object through the other node of a key removed here" awsat "$o" s3api head-object --bucket "$BUCKET" --key cross/back.txt
  expect_eq "$(awsat "$o" s3 ls --recursive "s3://$BUCKET/tree/" | wc -l)" "$TREE_FILES" "keys of tree/ listed through the other node"
}
cross_rclone() { # OTHER
  rclone_remote cairnx "$1"
  rclone check "$WORK/rtree" "cairnx:$BUCKET/rclone"
  aws s3 sync --only-show-errors "s3://$BUCKET/tree" "$WORK/down/xtree"
  diff -r "$WORK/tree" "$WORK/down/xtree"
  rm -rf "$WORK/down/xtree"
}
cross_versions() { # OTHER
  local n
  awsat "$1" s3api get-object --bucket "$BUCKET" --key "$VKEY" --version-id "$(sed -n 2p "$WORK/vids")" "$WORK/down/xv2.txt" >/dev/null
  same_file "$WORK/up/v2.txt" "$WORK/down/xv2.txt"
  n=$(awsat "$1" s3api list-object-versions --bucket "$BUCKET" --prefix "$VKEY" --query "length(Versions[?Key=='$VKEY'])" --output text)
  expect_eq "$n" 3 "versions of $VKEY listed through the other node"
}
for o in "${OTHERS[@]}"; do
  step "cross-node: aws cp up through $ENDPOINT, down through $o, and back" cross_aws "$o"
  step "cross-node: rclone check and aws sync down through $o" cross_rclone "$o"
  step "cross-node: get-object --version-id, list-object-versions through $o" cross_versions "$o"
done

# --- the end ---

aws_rb() {
  aws s3 rb --force "s3://$BUCKET" >/dev/null
  expect_fail "head-bucket of the removed bucket" aws s3api head-bucket --bucket "$BUCKET"
}
step "aws: s3 rb --force" aws_rb

echo "== summary: $STEPS steps run (boto3's counted as one), $(grep -c . "$FAILURES" || true) failures"
if [ -s "$FAILURES" ]; then
  sed 's/^/FAILED: /' "$FAILURES"
  exit 1
fi
echo "e2e-s3: all steps passed"
