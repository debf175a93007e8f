#!/usr/bin/python3
"""Times whole ListObjectsV2 listings of a prefix with a light client.

Each run lists BUCKET/PREFIX page by page (max-keys 1000, presigned GETs
over one keep-alive connection), taking only the continuation token and
the key count out of each page (no XML parsing), and its time runs from
the first request to the last byte of the last page. Prints the runs'
p50, p99 and the keys seen. With --preload N it first PUTs N objects of
1 KiB under the prefix (if the bucket lacks them).

  scripts/wrk/list.py --endpoint http://127.0.0.1:7080 --access KEY \\
      --secret SECRET --bucket wrk --prefix list10k --preload 10000 --runs 30
"""
import argparse
import datetime
import http.client
import os
import re
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from presign import presign, signing_key  # noqa: E402

TOKEN = re.compile(rb"<NextContinuationToken>([^<]*)</NextContinuationToken>")
KEYS = re.compile(rb"<KeyCount>(\d+)</KeyCount>")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for f in ("endpoint", "access", "secret", "bucket", "prefix"):
        p.add_argument("--" + f, required=True)
    p.add_argument("--region", default="us-east-1")
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--preload", type=int, default=0, metavar="N")
    a = p.parse_args()
    u = urllib.parse.urlsplit(a.endpoint)
    now = datetime.datetime.now(datetime.timezone.utc)
    date, stamp = now.strftime("%Y%m%d"), now.strftime("%Y%m%dT%H%M%SZ")
    key = signing_key(a.secret, date, a.region)
    conn = http.client.HTTPConnection(u.hostname, u.port)

    def call(method, path, extra=None, body=None):
        conn.request(method, presign(method, u.netloc, path, a.access, key, date, stamp, a.region, 3600, extra), body=body)
        r = conn.getresponse()
        data = r.read()
        if r.status // 100 != 2 and not (method == "PUT" and path.count("/") == 1 and r.status == 409):
            sys.exit(f"list.py: {method} {path}: HTTP {r.status}: {data[:300]!r}")
        return data

    if a.preload:
        call("PUT", f"/{a.bucket}", body=b"")
        body = os.urandom(1024)
        for i in range(a.preload):
            call("PUT", f"/{a.bucket}/{a.prefix}/{i:08d}", body=body)
    times, seen = [], 0
    for _ in range(a.runs):
        start, token, seen = time.perf_counter(), None, 0
        while True:
            q = {"list-type": "2", "max-keys": "1000", "prefix": a.prefix + "/"}
            if token:
                q["continuation-token"] = token
            page = call("GET", f"/{a.bucket}", q)
            seen += int(KEYS.search(page).group(1))
            m = TOKEN.search(page)
            if not m:
                break
            token = m.group(1).decode()
        times.append(time.perf_counter() - start)
    times.sort()
    p50, p99 = times[len(times) // 2], times[min(len(times) - 1, int(len(times) * 0.99))]
    print(f"list {seen} keys: p50 {p50 * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms over {len(times)} runs")


if __name__ == "__main__":
    main()
