import json
import time

import pytest

import cairn
from cairn.persistent import Persistent, PersistentList, PersistentDict, SortedMap, load, ref


class Account(Persistent):
    def __init__(self, owner, balance=0):
        self.owner, self.balance = owner, balance

    def deposit(self, n):
        self.balance += n


class Node(Persistent):
    def __init__(self, name, children=()):
        self.name = name
        self.children = list(children)


def fresh_db(client, watch=True):
    return cairn.connect(client=cairn.Client(endpoint=client.endpoint), watch=watch)


def test_reachability_and_documents(client, space):
    db = fresh_db(client)
    root = db.root(space)
    assert len(root) == 0
    with db.transaction():
        root["alice"] = Account("alice", 100)
        root["tree"] = Node("top", [Node("left"), Node("right", [Node("leaf")])])
    # Every object reachable from the root is stored, each as a document.
    doc = json.loads(client.get(space, "_root"))
    alice_key = doc["data"]["alice"]["$ref"].split("/", 1)[1]
    alice = json.loads(client.get(space, alice_key))
    assert alice["owner"] == "alice" and alice["balance"] == 100 and alice["type"] == "Account"
    assert alice["$class"].endswith(":Account")
    # Another connection sees them, loading lazily.
    db2 = fresh_db(client)
    r2 = db2.root(space)
    assert r2["alice"].balance == 100
    assert [c.name for c in r2["tree"].children] == ["left", "right"]
    assert r2["tree"].children[1].children[0].name == "leaf"
    # Queries see the objects' fields, and return objects.
    assert [o["key"] for o in client.query(space, 'doc.type == "Account" && doc.balance >= 100')] == [alice_key]
    found = db2.query(space, 'doc.type == "Node" && doc.name == "leaf"')
    assert len(found) == 1 and found[0].name == "leaf" and found[0] is r2["tree"].children[1].children[0]


def test_batched_loading(client, space):
    db = fresh_db(client)
    root = db.root(space)
    with db.transaction():
        root["many"] = PersistentList(Account(f"u{i}", i) for i in range(1000))
    db2 = fresh_db(client)
    before = db2.client.round_trips
    t0 = time.monotonic()
    total = sum(a.balance for a in db2.root(space)["many"])
    took = time.monotonic() - t0
    trips = db2.client.round_trips - before
    assert total == sum(range(1000))
    # begin, the root, the list, and the 1000 accounts in one read.
    assert trips <= 5, trips
    print(f"loaded 1000 objects in {trips} round trips, {took * 1000:.1f} ms")


def test_in_place_changes_are_found(client, space):
    db = fresh_db(client)
    root = db.root(space)
    with db.transaction():
        root["a"] = Account("a")
        root["a"].history = []
        root["a"].settings = {"x": 1}
    with db.transaction():
        a = root["a"]
        a.history.append("opened")   # a plain list, changed in place
        a.settings["y"] = 2          # a plain dict, changed in place
        a.deposit(5)
    r2 = fresh_db(client).root(space)
    assert r2["a"].history == ["opened"] and r2["a"].settings == {"x": 1, "y": 2} and r2["a"].balance == 5


def test_abort_drops_changes(client, space):
    db = fresh_db(client)
    root = db.root(space)
    with db.transaction():
        root["a"] = Account("a", 1)
    with pytest.raises(RuntimeError):
        with db.transaction():
            root["a"].balance = 99
            raise RuntimeError("changed my mind")
    assert root["a"].balance == 1
    assert json.loads(client.get(space, ref(root["a"]).split("/", 1)[1]))["balance"] == 1


def test_conflicts_retry(client, space):
    # Without the watch, the cache is only checked by the commit.
    db1, db2 = fresh_db(client, watch=False), fresh_db(client, watch=False)
    with db1.transaction():
        db1.root(space)["acct"] = Account("shared", 0)
    r1, r2 = db1.root(space), db2.root(space)
    assert r2["acct"].balance == 0  # cached in db2 from here on

    # db1 commits; db2's cached copy is now stale, and its commit must not
    # overwrite db1's: it fails, loads again, and retries.
    db1.transact(lambda: r1["acct"].deposit(10))
    tries = []

    def add():
        tries.append(1)
        r2["acct"].deposit(1)
    db2.transact(add)
    assert len(tries) == 2
    assert r2["acct"].balance == 11
    assert fresh_db(client).root(space)["acct"].balance == 11

    # A conflict without retry raises, and changes nothing.
    db1.invalidate()
    r1["acct"].balance  # load in db1
    db2.transact(lambda: r2["acct"].deposit(1))
    with pytest.raises(cairn.ConflictError):
        with db1.transaction():
            r1["acct"].deposit(100)
    assert fresh_db(client).root(space)["acct"].balance == 12

    # With it, a transaction starts from fresh objects: no retry.
    db4, db5 = fresh_db(client), fresh_db(client)
    r4, r5 = db4.root(space), db5.root(space)
    assert r5["acct"].balance == 12
    db4.transact(lambda: r4["acct"].deposit(1))
    tries.clear()

    def add5():
        tries.append(1)
        r5["acct"].deposit(1)
    db5.transact(add5)
    assert len(tries) == 1 and r5["acct"].balance == 14


def test_commit_100_changes_is_one_transaction(client, space):
    db = fresh_db(client)
    root = db.root(space)
    with db.transaction():
        root["accts"] = PersistentList(Account(f"u{i}") for i in range(100))
    commits = []
    orig = db.client.call

    def spy(endpoint, req):
        if endpoint == "txn/commit":
            commits.append(len(req["writes"]))
        return orig(endpoint, req)
    db.client.call = spy
    with db.transaction():
        for a in root["accts"]:
            a.deposit(1)
    assert commits == [100]
    assert sum(a.balance for a in fresh_db(client).root(space)["accts"]) == 100


def test_containers(client, space):
    db = fresh_db(client)
    root = db.root(space)
    with db.transaction():
        root["l"] = PersistentList([1, 2])
        root["d"] = PersistentDict(a=1)
    with db.transaction():
        root["l"].append(3)
        root["d"]["b"] = Account("b")
    r2 = fresh_db(client).root(space)
    assert list(r2["l"]) == [1, 2, 3] and len(r2["l"]) == 3 and 2 in r2["l"]
    assert r2["d"]["a"] == 1 and r2["d"]["b"].owner == "b" and sorted(r2["d"].keys()) == ["a", "b"]
    assert isinstance(load(r2["d"]), PersistentDict)


def test_sorted_map(client, space):
    db = fresh_db(client)
    root = db.root(space)
    with db.transaction():
        root["idx"] = SortedMap()
    m = root["idx"]
    with db.transaction():
        for i in range(-3, 30):
            m[i] = {"sq": i * i}
        m["name"] = Account("named")
    # Each entry is its own object: setting one writes one small object.
    writes = []
    orig = db.client.call

    def spy(endpoint, req):
        if endpoint == "txn/commit":
            writes.extend(w["key"] for w in req["writes"])
        return orig(endpoint, req)
    db.client.call = spy
    with db.transaction():
        m[5] = {"sq": -1}
    assert len(writes) == 1 and writes[0].startswith(ref(m).split("/", 1)[1] + "/e/")
    db.client.call = orig

    m2 = fresh_db(client).root(space)["idx"]
    keys = list(m2.keys())
    assert keys[:4] == [-3, -2, -1, 0] and keys[-2:] == [29, "name"] and len(keys) == 34
    assert m2[5] == {"sq": -1} and m2["name"].owner == "named"
    assert list(m2.keys(lo=10, hi=13)) == [10, 11, 12]
    with db.transaction():
        del m[0]
        m[100] = 1
        # The transaction's own changes show in its iteration.
        assert 0 not in list(m.keys()) and 100 in list(m.keys())
    with pytest.raises(KeyError):
        fresh_db(client).root(space)["idx"][0]


def test_unstorable_values_are_refused(client, space):
    db = fresh_db(client)
    root = db.root(space)
    root["bad"] = object()
    with pytest.raises(cairn.CairnError, match="cannot be stored"):
        db.commit()
    assert "bad" not in fresh_db(client).root(space)


def test_watch_invalidates_the_cache(client, space):
    db1, db2 = fresh_db(client), fresh_db(client)
    with db1.transaction():
        db1.root(space)["acct"] = Account("w", 1)
    r2 = db2.root(space)
    assert r2["acct"].balance == 1  # cached in db2
    with db1.transaction():
        db1.root(space)["acct"].balance = 2
    # The next transaction in db2 starts after db1's commit: it must not
    # see the cached balance.
    with db2.transaction():
        assert r2["acct"].balance == 2
    assert db2.invalidations >= 1
    # Without the watch, a cached object is only caught when a commit
    # validates it.
    db3 = cairn.connect(client=cairn.Client(endpoint=client.endpoint), watch=False)
    r3 = db3.root(space)
    assert r3["acct"].balance == 2
    with db1.transaction():
        db1.root(space)["acct"].balance = 3
    with db3.transaction():
        assert r3["acct"].balance == 2  # stale, read-only: not validated


def test_watch_stream(client, space):
    first = client.watch_page(space)
    assert first["events"] == []
    client.put(space, "a", b"1")
    client.delete(space, "a")
    with client.begin() as tx:
        tx.put(space, "x", b"x")
        tx.put(space, "y", b"y")
    page = client.watch_page(space, first["cursor"])
    evs = [(e["key"], e.get("delete_marker", False)) for e in page["events"]]
    assert evs == [("a", False), ("a", True), ("x", False), ("y", False)]
    assert page["events"][2]["version"] == page["events"][3]["version"]  # one commit
    # Pages resume where they stop, and the long poll waits for a change.
    small = client.watch_page(space, first["cursor"], limit=1)
    assert small["more"] and [e["key"] for e in small["events"]] == ["a"]
    rest = client.watch_page(space, small["cursor"])
    assert [e["key"] for e in rest["events"]] == ["a", "x", "y"]
    import threading
    threading.Timer(0.2, lambda: cairn.Client(endpoint=client.endpoint).put(space, "late", b"l")).start()
    t0 = time.monotonic()
    late = client.watch_page(space, page["cursor"], wait=10)
    assert [e["key"] for e in late["events"]] == ["late"] and time.monotonic() - t0 < 5
    with pytest.raises(cairn.CairnError, match="cursor"):
        client.watch_page(space, "not-a-cursor")


@pytest.mark.offline
def test_expired_cursor_drops_the_cache():
    # A client whose watch fell behind what the server keeps: the DB
    # forgets the space's objects and watches from now.
    class FakeClient:
        round_trips = 0

        def __init__(self):
            self.pages = 0

        def watch_page(self, space, cursor=None, from_=None, wait=0, limit=None):
            self.pages += 1
            if cursor == "old":
                raise cairn.CursorExpired("CursorExpired", "too far behind", 410)
            return {"events": [], "cursor": "0000000000000009", "closed": "0000000000000009"}

    db = cairn.connect(client=FakeClient())
    acct = db.get("sp", "Account/1")
    d = acct.__dict__
    d.update({"_p_ghost": False, "_p_version": "0000000000000001", "owner": "x", "balance": 1})
    object.__setattr__(acct, "__class__", Account)
    db._cursors["sp"] = "old"
    assert db._start() == "0000000000000009"
    assert acct.__dict__["_p_ghost"] and db._cursors["sp"] == "0000000000000009"


def test_failed_transactions_leave_nothing_behind(client, space):
    db = fresh_db(client)
    root = db.root(space)
    with db.transaction():
        root["a"] = Account("a")
        root["a"].history = []

    def bad():
        root["a"].history.append("x")  # in place: not marked changed
        raise RuntimeError("no")
    with pytest.raises(RuntimeError):
        db.transact(bad)
    with db.transaction():
        root["a"].balance = 1  # a later, unrelated change
    assert fresh_db(client).root(space)["a"].history == []

    # A new object added before a transaction that aborts is stored when a
    # later commit reaches it, not left as a dangling reference.
    x = Account("x")
    db.add(x, space, "acct-x")
    with db.transaction():
        root["x"] = x
    assert fresh_db(client).root(space)["x"].owner == "x"
    with pytest.raises(cairn.CairnError, match="inf"):
        with db.transaction():
            root["a"].balance = float("inf")


def test_delete_wins_over_changes(client, space):
    db = fresh_db(client)
    root = db.root(space)
    with db.transaction():
        root["gone"] = Account("g")
    g = root["gone"]
    key = ref(g).split("/", 1)[1]
    writes = []
    orig = db.client.call

    def spy(endpoint, req):
        if endpoint == "txn/commit":
            writes.extend((w["key"], bool(w.get("delete"))) for w in req["writes"])
        return orig(endpoint, req)
    db.client.call = spy
    with db.transaction():
        g.balance = 5
        db.delete(g)
        del root["gone"]
    assert writes.count((key, True)) == 1 and (key, False) not in writes
    with pytest.raises(cairn.NotFound):
        client.get(space, key)
