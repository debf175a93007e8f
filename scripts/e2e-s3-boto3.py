#!/usr/bin/python3
"""boto3 steps of scripts/e2e-s3.sh (run by Debian's /usr/bin/python3 with
python3-boto3; standard library and boto3 only).

    e2e-s3-boto3.py ENDPOINT ACCESS_KEY SECRET_KEY BUCKET [OTHER_ENDPOINT...]

In the existing BUCKET: posts a browser upload with a presigned POST
policy, writes and reads an object with SSE-C, uploads E2E_BOTO3_MIB (default 100) MiB of random
data with upload_file in 8 MiB parts on several threads, checks the
multipart ETag, downloads it whole (download_file, and one streamed GET)
and by byte ranges (through ENDPOINT and every OTHER_ENDPOINT), compares
everything by SHA-256 or byte for byte, lists with a paginator and deletes.
Each step prints "== boto3: step"; a failed step is printed with the
server's answer and appended to the file $E2E_FAILURES; the exit status is
1 when any step failed.
"""

import hashlib
import os
import re
import shutil
import sys
import tempfile
import time
import traceback
import urllib.request

import boto3
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
from botocore.exceptions import ClientError

MiB = 1 << 20
PART = 8 * MiB
SIZE = max(16, int(os.environ.get("E2E_BOTO3_MIB", "100"))) * MiB  # at least two parts
KEY = "boto3/big.bin"
LIST_PREFIX = "boto3/list/"
LIST_KEYS = 25


def client(endpoint, access, secret):
    return boto3.session.Session(
        aws_access_key_id=access,
        aws_secret_access_key=secret,
        region_name="us-east-1",
    ).client(
        "s3",
        endpoint_url=endpoint,
        config=Config(
            signature_version="s3v4",
            s3={"addressing_style": "path"},
            # One attempt: a server error must fail the step, not be retried.
            retries={"total_max_attempts": 1, "mode": "standard"},
            max_pool_connections=16,
        ),
    )


class Skip(Exception):
    pass


class Run:
    def __init__(self):
        self.failed = []
        self.skipped = []

    def step(self, name, fn, *args):
        print("== boto3: " + name, flush=True)
        t0 = time.monotonic()
        try:
            fn(*args)
        except Skip as e:
            print("   skipped: %s" % e, flush=True)
            self.skipped.append(name)
            return False
        except ClientError as e:
            err = e.response.get("Error", {})
            meta = e.response.get("ResponseMetadata", {})
            print(
                "FAIL: boto3: %s: HTTP %s, %s: %s (operation %s)"
                % (name, meta.get("HTTPStatusCode"), err.get("Code"), err.get("Message"), e.operation_name),
                flush=True,
            )
            self.failed.append(name)
            return False
        except Exception as e:  # noqa: BLE001 - every failure is reported
            traceback.print_exc()
            print("FAIL: boto3: %s: %s" % (name, e), flush=True)
            self.failed.append(name)
            return False
        print("   ok (%.1fs)" % (time.monotonic() - t0), flush=True)
        return True


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(MiB)
            if not b:
                return h.hexdigest()
            h.update(b)


def main():
    if len(sys.argv) < 5:
        print(__doc__, file=sys.stderr)
        return 2
    endpoint, access, secret, bucket = sys.argv[1:5]
    others = sys.argv[5:]
    if os.environ.get("E2E_DEBUG"):
        boto3.set_stream_logger("botocore", 10)
    s3 = client(endpoint, access, secret)
    readers = [(endpoint, s3)] + [(o, client(o, access, secret)) for o in others]
    work = tempfile.mkdtemp(prefix="boto3-", dir=os.environ.get("E2E_WORK"))
    src = os.path.join(work, "big.bin")
    run = Run()
    state = {}

    def make_data():
        h = hashlib.sha256()
        parts = []
        with open(src, "wb") as f:
            left = SIZE
            while left > 0:
                b = os.urandom(min(PART, left))
                f.write(b)
                h.update(b)
                parts.append(hashlib.md5(b).digest())
                left -= len(b)
        state["sha256"] = h.hexdigest()
        # S3's multipart ETag: the MD5 of the parts' MD5s, then -N.
        state["etag"] = '"%s-%d"' % (hashlib.md5(b"".join(parts)).hexdigest(), len(parts))
        print("   %d bytes, sha256 %s, expected ETag %s" % (SIZE, state["sha256"], state["etag"]))

    def upload():
        cfg = TransferConfig(multipart_threshold=PART, multipart_chunksize=PART, max_concurrency=4, use_threads=True)
        s3.upload_file(src, bucket, KEY, Config=cfg)
        state["uploaded"] = True

    def need_upload():
        if not state.get("uploaded"):
            raise Skip("the upload failed")

    def head():
        need_upload()
        h = s3.head_object(Bucket=bucket, Key=KEY)
        expect(h["ContentLength"] == SIZE, "ContentLength %s, want %d" % (h["ContentLength"], SIZE))
        expect(re.fullmatch(r'"[0-9a-f]{32}-\d+"', h["ETag"]) is not None, "ETag %s is not a multipart ETag" % h["ETag"])
        expect(h["ETag"] == state["etag"], "ETag %s, want %s" % (h["ETag"], state["etag"]))
        print("   ETag %s" % h["ETag"])

    def download():
        need_upload()
        dst = os.path.join(work, "down.bin")
        # Over 8 MiB, download_file fetches the object in ranged parts on
        # several threads.
        cfg = TransferConfig(multipart_threshold=PART, multipart_chunksize=PART, max_concurrency=4, use_threads=True)
        s3.download_file(bucket, KEY, dst, Config=cfg)
        got = sha256_file(dst)
        os.remove(dst)
        expect(got == state["sha256"], "downloaded sha256 %s, want %s" % (got, state["sha256"]))

    def get_stream():
        need_upload()
        r = s3.get_object(Bucket=bucket, Key=KEY)
        expect(r["ContentLength"] == SIZE, "ContentLength %s, want %d" % (r["ContentLength"], SIZE))
        h = hashlib.sha256()
        n = 0
        for b in r["Body"].iter_chunks(MiB):
            h.update(b)
            n += len(b)
        expect(n == SIZE, "read %d bytes, want %d" % (n, SIZE))
        expect(h.hexdigest() == state["sha256"], "sha256 %s, want %s" % (h.hexdigest(), state["sha256"]))

    # (Range header, first byte, last byte) against the local file.
    ranges = [
        ("bytes=0-0", 0, 0),
        ("bytes=0-1023", 0, 1023),
        ("bytes=%d-%d" % (PART - 8, PART + 7), PART - 8, PART + 7),  # across parts 1 and 2
        ("bytes=%d-%d" % (12345678 % SIZE, min(SIZE - 1, 12345678 % SIZE + 3 * MiB)), 12345678 % SIZE, min(SIZE - 1, 12345678 % SIZE + 3 * MiB)),
        ("bytes=%d-%d" % (SIZE - 100, SIZE - 1), SIZE - 100, SIZE - 1),  # the last bytes
        ("bytes=-4096", SIZE - 4096, SIZE - 1),  # suffix
        ("bytes=%d-" % (SIZE - 10), SIZE - 10, SIZE - 1),  # open ended
        ("bytes=%d-%d" % (SIZE - 5, SIZE + 1000), SIZE - 5, SIZE - 1),  # past the end: clamped
    ]

    def ranged(c):
        need_upload()
        with open(src, "rb") as f:
            for rng, a, b in ranges:
                r = c.get_object(Bucket=bucket, Key=KEY, Range=rng)
                data = r["Body"].read()
                f.seek(a)
                want = f.read(b - a + 1)
                status = r["ResponseMetadata"]["HTTPStatusCode"]
                expect(status == 206, "%s: status %s, want 206" % (rng, status))
                expect(r.get("ContentRange") == "bytes %d-%d/%d" % (a, b, SIZE), "%s: Content-Range %r, want 'bytes %d-%d/%d'" % (rng, r.get("ContentRange"), a, b, SIZE))
                expect(r["ContentLength"] == len(want), "%s: Content-Length %s, want %d" % (rng, r["ContentLength"], len(want)))
                expect(data == want, "%s: %d bytes that differ from the file's bytes %d-%d" % (rng, len(data), a, b))
        try:
            c.get_object(Bucket=bucket, Key=KEY, Range="bytes=%d-" % SIZE)
        except ClientError as e:
            status = e.response["ResponseMetadata"]["HTTPStatusCode"]
            code = e.response["Error"].get("Code")
            expect(status == 416 and code == "InvalidRange", "unsatisfiable range: HTTP %s %s, want 416 InvalidRange" % (status, code))
        else:
            raise AssertionError("a range starting at the size was served")

    def listing():
        for i in range(LIST_KEYS):
            s3.put_object(Bucket=bucket, Key="%sk%03d" % (LIST_PREFIX, i), Body=b"item %d" % i)
        pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=LIST_PREFIX, PaginationConfig={"PageSize": 10})
        keys, counts = [], []
        for p in pages:
            counts.append(p["KeyCount"])
            keys += [o["Key"] for o in p.get("Contents", [])]
        want = ["%sk%03d" % (LIST_PREFIX, i) for i in range(LIST_KEYS)]
        expect(keys == want, "listed keys %s, want %s" % (keys, want))
        expect(counts == [10, 10, 5], "KeyCount of the pages %s, want [10, 10, 5]" % counts)
        r = s3.list_objects_v2(Bucket=bucket, Prefix="boto3/", Delimiter="/")
        prefixes = [p["Prefix"] for p in r.get("CommonPrefixes", [])]
        expect(prefixes == [LIST_PREFIX], "CommonPrefixes %s, want [%s]" % (prefixes, LIST_PREFIX))
        contents = [o["Key"] for o in r.get("Contents", [])]
        want_contents = [KEY] if state.get("uploaded") else []
        expect(contents == want_contents, "Contents %s, want %s" % (contents, want_contents))

    def delete():
        r = s3.delete_objects(
            Bucket=bucket,
            Delete={"Objects": [{"Key": "%sk%03d" % (LIST_PREFIX, i)} for i in range(LIST_KEYS)] + [{"Key": KEY}]},
        )
        expect(not r.get("Errors"), "delete_objects errors: %s" % r.get("Errors"))
        expect(len(r.get("Deleted", [])) == LIST_KEYS + 1, "%d deleted, want %d" % (len(r.get("Deleted", [])), LIST_KEYS + 1))
        try:
            s3.head_object(Bucket=bucket, Key=KEY)
        except ClientError as e:
            status = e.response["ResponseMetadata"]["HTTPStatusCode"]
            expect(status == 404, "head_object of a deleted key: HTTP %s, want 404" % status)
        else:
            raise AssertionError("head_object of a deleted key succeeded")
        r = s3.list_objects_v2(Bucket=bucket, Prefix="boto3/")
        expect(r["KeyCount"] == 0, "%d keys left under boto3/" % r["KeyCount"])

    def post_upload():
        # A browser upload: a presigned POST policy, sent as the
        # multipart/form-data a browser makes.
        key = "boto3/posted.txt"
        body = os.urandom(1000)
        p = s3.generate_presigned_post(bucket, key, Fields={"Content-Type": "text/plain"},
                                       Conditions=[{"Content-Type": "text/plain"}, ["content-length-range", 1, 4096]], ExpiresIn=300)
        boundary = "----e2e%s" % os.urandom(8).hex()
        parts = []
        for k, v in p["fields"].items():
            parts.append(('--%s\r\nContent-Disposition: form-data; name="%s"\r\n\r\n%s\r\n' % (boundary, k, v)).encode())
        parts.append(('--%s\r\nContent-Disposition: form-data; name="file"; filename="posted.txt"\r\n'
                      'Content-Type: text/plain\r\n\r\n' % boundary).encode() + body + b"\r\n")
        parts.append(("--%s--\r\n" % boundary).encode())
        req = urllib.request.Request(p["url"], data=b"".join(parts), method="POST",
                                     headers={"Content-Type": "multipart/form-data; boundary=" + boundary})
        with urllib.request.urlopen(req) as r:
            expect(r.status == 204, "POST upload: HTTP %s, want 204" % r.status)
        got = s3.get_object(Bucket=bucket, Key=key)
        expect(got["Body"].read() == body and got["ContentType"] == "text/plain", "the posted object differs (%s)" % got["ContentType"])
        s3.delete_object(Bucket=bucket, Key=key)

    def sse_c():
        key = "boto3/ssec.bin"
        ck = os.urandom(32)
        body = os.urandom(100000)
        s3.put_object(Bucket=bucket, Key=key, Body=body, SSECustomerAlgorithm="AES256", SSECustomerKey=ck)
        try:
            s3.get_object(Bucket=bucket, Key=key)
        except ClientError as e:
            status = e.response["ResponseMetadata"]["HTTPStatusCode"]
            expect(status == 400, "a GET of an SSE-C object without its key: HTTP %s, want 400" % status)
        else:
            raise AssertionError("an SSE-C object was read without its key")
        got = s3.get_object(Bucket=bucket, Key=key, SSECustomerAlgorithm="AES256", SSECustomerKey=ck)
        expect(got["Body"].read() == body, "the SSE-C object read with its key differs")
        s3.delete_object(Bucket=bucket, Key=key)

    try:
        run.step("generate_presigned_post, a browser's multipart/form-data upload", post_upload)
        run.step("put_object and get_object with SSE-C; without the key: 400", sse_c)
        run.step("make %d MiB of random data" % (SIZE // MiB), make_data)
        run.step("upload_file %d MiB in %d MiB parts, 4 threads" % (SIZE // MiB, PART // MiB), upload)
        run.step("head_object: size and the multipart ETag", head)
        run.step("download_file (ranged parts, 4 threads), sha256", download)
        run.step("get_object streamed whole, sha256", get_stream)
        for ep, c in readers:
            run.step("get_object Range (%d ranges, suffix, open, past the end; 416) through %s" % (len(ranges), ep), ranged, c)
        run.step("list_objects_v2 paginator (page size 10) and delimiter", listing)
        run.step("delete_objects, head_object 404", delete)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    failures = os.environ.get("E2E_FAILURES")
    if failures:
        with open(failures, "a") as f:
            for name in run.failed:
                f.write("boto3: %s\n" % name)
    if run.failed:
        print("boto3: %d steps failed" % len(run.failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
