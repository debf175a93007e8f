import datetime
import json
import time

import pytest

import cairn
from cairn import _sigv4


@pytest.mark.offline
def test_sigv4_known_answer():
    # The GET Object example of the S3 SigV4 documentation.
    now = datetime.datetime(2013, 5, 24, tzinfo=datetime.timezone.utc)
    h = _sigv4.sign("GET", "examplebucket.s3.amazonaws.com", "/test.txt", [], {"range": "bytes=0-9"}, b"",
                    "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "us-east-1", now)
    assert h["Authorization"] == (
        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
        "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
        "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")


@pytest.mark.offline
def test_credentials_file(tmp_path, monkeypatch):
    for k in ("CAIRN_ACCESS_KEY", "CAIRN_SECRET_KEY", "CAIRN_ENDPOINT", "CAIRN_PROFILE"):
        monkeypatch.delenv(k, raising=False)
    f = tmp_path / "credentials"
    f.write_text("# made by cairn server\n[default]\naccess_key = AK1\nsecret_key = SK1\nendpoint = http://127.0.0.9:9\n"
                 "[profile other]\naccess_key = AK2\nsecret_key = SK2\n")
    monkeypatch.setenv("CAIRN_CREDENTIALS_FILE", str(f))
    f.chmod(0o644)
    with pytest.raises(cairn.CairnError, match="chmod 600"):
        cairn.find_credentials()
    f.chmod(0o600)
    assert cairn.find_credentials() == ("AK1", "SK1", "http://127.0.0.9:9")
    assert cairn.find_credentials(profile="other") == ("AK2", "SK2", "http://127.0.0.1:7080")
    monkeypatch.setenv("CAIRN_ACCESS_KEY", "AK3")
    with pytest.raises(cairn.CairnError, match="together"):
        cairn.find_credentials()
    monkeypatch.setenv("CAIRN_SECRET_KEY", "SK3")
    assert cairn.find_credentials()[:2] == ("AK3", "SK3")
    with pytest.raises(cairn.CairnError, match="no \\[nope\\] profile"):
        monkeypatch.delenv("CAIRN_ACCESS_KEY")
        monkeypatch.delenv("CAIRN_SECRET_KEY")
        cairn.find_credentials(profile="nope")


def test_objects(client, space):
    v1 = client.put(space, "dir/a b+c", b"one", content_type="text/plain", meta={"who": "me"}, tags={"color": "red"})
    v2 = client.put(space, "dir/a b+c", "two")
    assert v1 and v2 and v1 != v2
    assert client.get(space, "dir/a b+c") == b"two"
    assert client.get(space, "dir/a b+c", version=v1) == b"one"
    h = client.head(space, "dir/a b+c", version=v1)
    assert h["version"] == v1 and h["size"] == 3 and h["meta"] == {"who": "me"} and h["content_type"] == "text/plain"
    assert [v["version"] for v in client.versions(space, "dir/a b+c")] == [v2, v1]
    client.put(space, "dir/z", b"z")
    assert list(client.list(space, prefix="dir/")) == ["dir/a b+c", "dir/z"]
    client.delete(space, "dir/z")
    assert list(client.list(space)) == ["dir/a b+c"]
    with pytest.raises(cairn.NotFound):
        client.get(space, "dir/z")
    with pytest.raises(cairn.NotFound):
        client.get("py-no-such-space", "x")
    assert space in client.spaces()


def test_transactions(client, space):
    tx = client.begin()
    tx.put(space, "a", b"A")
    tx.put(space, "b", b"B")
    committed = tx.commit()
    assert client.head(space, "a")["version"] == committed == client.head(space, "b")["version"]

    # Optimistic: a read that another commit replaced fails the commit,
    # which then changes nothing.
    t1 = client.begin()
    assert t1.get(space, "a") == b"A"
    client.put(space, "a", b"A2")
    t1.put(space, "b", b"B2")
    with pytest.raises(cairn.ConflictError) as e:
        t1.commit()
    assert e.value.retryable and e.value.status == 409
    assert client.get(space, "b") == b"B"

    # transact retries: the increments all land.
    client.put(space, "n", b"0")

    def incr(tx):
        tx.put(space, "n", str(int(tx.get(space, "n")) + 1))
    for _ in range(5):
        client.transact(incr)
    assert client.get(space, "n") == b"5"

    # A batched read at one snapshot.
    res = client.begin().read([(space, "a"), (space, "nope")])
    assert res[0]["found"] and res[0]["data"] == b"A2" and not res[1]["found"]


def test_queries_sql_and_indexes(client, space):
    ix = client.add_index(space, "doc.n", "number")
    assert [i["field"] for i in ix] == ["doc.n"]
    for _ in range(100):
        if client.indexes(space)[0]["state"] == "ready":
            break
        time.sleep(0.05)
    assert client.indexes(space)[0]["state"] == "ready"
    for i in range(20):
        client.put(space, f"p{i:02d}", json.dumps({"n": i, "kind": "even" if i % 2 == 0 else "odd"}),
                   content_type="application/json", tags={"parity": "even" if i % 2 == 0 else "odd"})
    got = [o["key"] for o in client.query(space, 'tags.parity == "odd" && doc.n > 10')]
    assert got == ["p11", "p13", "p15", "p17", "p19"]
    docs = list(client.query(space, "doc.n >= 18", docs=True))
    assert [d["doc"]["n"] for d in docs] == [18, 19]
    # Pages of one snapshot.
    assert len(list(client.query(space, 'doc.kind == "even"', limit=7))) == 7
    assert len(list(client.query(space, "size > 0"))) == 20
    cols, rows = client.sql(f"SELECT `key` FROM `{space}` WHERE doc_n = 7")
    assert cols == ["key"] and rows == [["p07"]]
    with pytest.raises(cairn.CairnError):
        client.query(space, "this is not CEL").__next__()


def test_snapshots_branches_versions(client, space):
    v1 = client.put(space, "k", json.dumps({"v": 1}), content_type="application/json")
    snap = space + "-snap"
    client.create_snapshot(space, snap)
    client.put(space, "k", json.dumps({"v": 2}), content_type="application/json")
    assert client.get(snap, "k") == b'{"v": 1}'
    assert any(s["name"] == snap for s in client.snapshots(space))
    br = space + "-dev"
    client.create_branch(space, br)
    client.put(br, "k", json.dumps({"v": 3}), content_type="application/json")
    assert client.get(space, "k") == b'{"v": 2}'
    client.merge_branch(br)
    assert client.get(space, "k") == b'{"v": 3}'
    client.delete_branch(br)
    client.delete_snapshot(snap)
    d = client.diff(space, "k", from_version=v1)
    assert d["from"]["version"] == v1
    client.clone(space, "k", space, "k2", version=v1)
    assert client.get(space, "k2") == b'{"v": 1}'
    assert client.lineage(space, "k2")["ancestors"]


def test_follow(client, space):
    client.put(space, "order", json.dumps({"item": {"$ref": f"{space}/book"}}), content_type="application/json")
    client.put(space, "book", json.dumps({"title": "T"}), content_type="application/json")
    res = client.follow(space, "order", depth=1)
    assert [o["key"] for o in res["objects"]] == ["order", "book"]
    assert json.loads(res["objects"][1]["data"]) == {"title": "T"}


def test_bad_secret(client, space):
    c = cairn.Client(endpoint=client.endpoint, access_key=client.access_key, secret_key="wrong-secret-000000")
    with pytest.raises(cairn.AccessDenied):
        c.begin()
