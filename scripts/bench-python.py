#!/usr/bin/python3
"""Measures the Python SDK's transparent persistence against a node:
loading 1,000 persistent objects reachable from a root (round trips and
time, in a fresh connection each round), and committing 100 changed
objects (one transaction). Prints one line a measure with p50 and max.

  CAIRN_ENDPOINT=http://127.0.0.1:7080 CAIRN_ACCESS_KEY=... CAIRN_SECRET_KEY=... \\
    scripts/bench-python.py [--rounds 20] [--space bench-py]
"""

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import cairn  # noqa: E402
from cairn.persistent import Persistent, PersistentList  # noqa: E402


class Item(Persistent):
    def __init__(self, n):
        self.n, self.name, self.tags = n, f"item-{n}", ["a", "b"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--space", default="bench-py")
    args = ap.parse_args()
    c = cairn.Client()
    c.create_space(args.space)
    db = cairn.connect(client=c)
    root = db.root(args.space)
    with db.transaction():
        root["items"] = PersistentList(Item(i) for i in range(1000))

    loads, trips = [], []
    for _ in range(args.rounds):
        fresh = cairn.connect(client=cairn.Client())
        t0 = time.perf_counter()
        before = fresh.client.round_trips
        total = sum(it.n for it in fresh.root(args.space)["items"])
        loads.append(time.perf_counter() - t0)
        trips.append(fresh.client.round_trips - before)
        assert total == sum(range(1000))
        fresh.client.close()

    commits, txns = [], []
    for r in range(args.rounds):
        t0 = time.perf_counter()
        db.begin()
        for it in list(root["items"])[:100]:
            it.n += 1
        t1 = time.perf_counter()
        db.commit()
        t2 = time.perf_counter()
        commits.append(t2 - t1)
        txns.append(t2 - t0)

    def line(what, xs, unit="ms", scale=1000):
        print(f"{what}: p50 {statistics.median(xs) * scale:.1f} {unit}, max {max(xs) * scale:.1f} {unit} ({len(xs)} rounds)")
    line("load 1000 objects from the root (fresh connection)", loads)
    print(f"  round trips: {min(trips)}-{max(trips)}")
    line("commit of 100 changed objects (one transaction)", commits)
    line("transaction changing 100 objects, start to commit", txns)


if __name__ == "__main__":
    main()
