#!/usr/bin/python3
"""Presigned S3 URLs for a light load generator (wrk, scripts/wrk/s3.lua).

Prints one path?query per line: presigned SigV4 (UNSIGNED-PAYLOAD, host
signed) requests of METHOD for BUCKET/PREFIX/00000000 ... COUNT-1, valid
for --expires seconds. With --preload SIZE it first creates the bucket
(if missing) and PUTs every object with SIZE bytes, so a GET run finds
them. Standard library only.

  scripts/wrk/presign.py --endpoint http://127.0.0.1:7080 \\
      --access KEY --secret SECRET --bucket wrk --prefix get4k \\
      --count 2500 --method GET --preload 4096 > /tmp/get.urls
  wrk -t1 -c20 -d12s -s scripts/wrk/s3.lua http://127.0.0.1:7080 -- /tmp/get.urls GET
"""
import argparse
import datetime
import hashlib
import hmac
import os
import sys
import urllib.error
import urllib.parse
import urllib.request


def quote(s, slash=True):
    return urllib.parse.quote(s, safe="-_.~" + ("" if slash else "/"))


def signing_key(secret, date, region):
    k = ("AWS4" + secret).encode()
    for part in (date, region, "s3", "aws4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    return k


def presign(method, host, path, access, key, date, stamp, region, expires, extra=None):
    scope = f"{date}/{region}/s3/aws4_request"
    q = dict(extra or {})
    q |= {
        "X-Amz-Algorithm": "AWS4-HMAC-SHA256",
        "X-Amz-Credential": f"{access}/{scope}",
        "X-Amz-Date": stamp,
        "X-Amz-Expires": str(expires),
        "X-Amz-SignedHeaders": "host",
    }
    cq = "&".join(f"{quote(k)}={quote(v)}" for k, v in sorted(q.items()))
    uri = quote(path, slash=False)
    creq = f"{method}\n{uri}\n{cq}\nhost:{host}\n\nhost\nUNSIGNED-PAYLOAD"
    sts = f"AWS4-HMAC-SHA256\n{stamp}\n{scope}\n{hashlib.sha256(creq.encode()).hexdigest()}"
    sig = hmac.new(key, sts.encode(), hashlib.sha256).hexdigest()
    return f"{uri}?{cq}&X-Amz-Signature={sig}"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--endpoint", required=True, help="http://HOST:PORT of the S3 port")
    p.add_argument("--access", required=True)
    p.add_argument("--secret", required=True)
    p.add_argument("--bucket", required=True)
    p.add_argument("--prefix", required=True)
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--method", choices=["GET", "PUT", "HEAD", "DELETE"], default="GET")
    p.add_argument("--region", default="us-east-1")
    p.add_argument("--expires", type=int, default=3600)
    p.add_argument("--preload", type=int, metavar="SIZE", help="create the bucket and PUT every object with SIZE bytes first")
    a = p.parse_args()
    host = urllib.parse.urlsplit(a.endpoint).netloc
    now = datetime.datetime.now(datetime.timezone.utc)
    date, stamp = now.strftime("%Y%m%d"), now.strftime("%Y%m%dT%H%M%SZ")
    key = signing_key(a.secret, date, a.region)

    def url(method, path):
        return presign(method, host, path, a.access, key, date, stamp, a.region, a.expires)

    paths = [f"/{a.bucket}/{a.prefix}/{i:08d}" for i in range(a.count)]
    if a.preload is not None:
        req = urllib.request.Request(a.endpoint + url("PUT", f"/{a.bucket}"), method="PUT", data=b"")
        try:
            urllib.request.urlopen(req).close()
        except urllib.error.HTTPError as e:
            if e.code != 409:  # BucketAlreadyOwnedByYou
                sys.exit(f"presign.py: creating bucket {a.bucket}: HTTP {e.code}: {e.read()[:300]!r}")
        body = os.urandom(a.preload)
        for n, path in enumerate(paths):
            req = urllib.request.Request(a.endpoint + url("PUT", path), method="PUT", data=body)
            try:
                urllib.request.urlopen(req).close()
            except urllib.error.HTTPError as e:
                sys.exit(f"presign.py: preloading {path}: HTTP {e.code}: {e.read()[:300]!r}")
            if sys.stderr.isatty() and n % 500 == 0:
                print(f"\rpreloaded {n}/{len(paths)}", end="", file=sys.stderr)
        if sys.stderr.isatty():
            print(f"\rpreloaded {len(paths)}/{len(paths)}", file=sys.stderr)
    out = sys.stdout
    for path in paths:
        out.write(url(a.method, path) + "\n")


if __name__ == "__main__":
    main()
