"""A client for Cairn's HTTP port: the S3 API for objects and spaces, and
the JSON endpoints under /_cairn/v1/ for transactions, queries, SQL,
snapshots, branches and versions. Standard library only.

Credentials are found as the CLI finds them: the arguments; else
CAIRN_ACCESS_KEY and CAIRN_SECRET_KEY; else the profile (argument, else
CAIRN_PROFILE, else "default") of the credentials file (CAIRN_CREDENTIALS_FILE,
else ~/.config/cairn/credentials). The endpoint: the argument, else
CAIRN_ENDPOINT, else the profile's endpoint, else http://127.0.0.1:7080.
"""

import base64
import json
import os
import stat
import http.client
import time
import xml.etree.ElementTree as ET
from urllib.parse import urlsplit, quote

from . import _sigv4

DEFAULT_ENDPOINT = "http://127.0.0.1:7080"
DEFAULT_REGION = "us-east-1"
_S3NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"
_VERSIONING_ENABLED = b"<VersioningConfiguration><Status>Enabled</Status></VersioningConfiguration>"


class CairnError(Exception):
    """An error the server answered (or the client met). code is the
    server's error code ("NotFound", "TxnConflict", ...), status the HTTP
    status, retryable whether the same request may succeed if tried again
    (after a new begin, for a transaction)."""

    def __init__(self, code, message, status=0, retryable=False, conflicts=()):
        super().__init__(f"{code}: {message}")
        self.code, self.message, self.status = code, message, status
        self.retryable = retryable
        self.conflicts = list(conflicts)


class NotFound(CairnError):
    """No such object, version or space."""


class AccessDenied(CairnError):
    """The access key may not do this (or the request is not signed)."""


class PreconditionFailed(CairnError):
    """An if_match / if_none_match condition did not hold."""


class ConflictError(CairnError):
    """A transaction lost to another (TxnConflict, TxnAborted): begin
    again. conflicts lists the (space, key) pairs it lost on, if known."""


class CursorExpired(CairnError):
    """A watch's cursor is older than the server keeps changes for: drop
    what was cached from the watch and start again from now."""


_ERRORS = {"CursorExpired": CursorExpired,"NotFound": NotFound, "NoSuchKey": NotFound, "NoSuchBucket": NotFound,
           "SpaceNotFound": NotFound, "NoSuchVersion": NotFound,
           "AccessDenied": AccessDenied, "PreconditionFailed": PreconditionFailed,
           "TxnConflict": ConflictError, "TxnAborted": ConflictError}


def _error(code, message, status, retryable=False, conflicts=()):
    return _ERRORS.get(code, CairnError)(code, message, status, retryable, conflicts)


def _read_profile(path, profile):
    """Returns the profile's values from the credentials file at path, or
    None if the file does not exist."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    if stat.S_IMODE(st.st_mode) & 0o077:
        raise CairnError("InvalidCredentials",
                         f"the credentials file {path} may be read by others: chmod 600 {path}")
    profiles, cur = {}, None
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            t = line.strip()
            if not t or t[0] in "#;":
                continue
            if t.startswith("["):
                if not t.endswith("]"):
                    raise CairnError("InvalidCredentials", f"{path} line {n}: a profile header is [NAME]")
                name = t[1:-1].strip()
                if name.startswith("profile "):
                    name = name[len("profile "):].strip()
                cur = profiles.setdefault(name, {})
            elif "=" in t and cur is not None:
                k, v = t.split("=", 1)
                cur[k.strip()] = v.strip()
            else:
                raise CairnError("InvalidCredentials", f"{path} line {n}: expected KEY = VALUE under a [profile]")
    if profile not in profiles:
        raise CairnError("InvalidCredentials", f"{path} has no [{profile}] profile")
    return profiles[profile]


def find_credentials(access_key=None, secret_key=None, profile=None, endpoint=None):
    """Returns (access_key, secret_key, endpoint) as the CLI finds them."""
    if bool(access_key) != bool(secret_key):
        raise CairnError("InvalidCredentials", "an access key and its secret must be given together")
    prof = None
    path = os.environ.get("CAIRN_CREDENTIALS_FILE") or os.path.join(
        os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config"), "cairn", "credentials")
    name = profile or os.environ.get("CAIRN_PROFILE") or "default"
    if not access_key:
        ea, es = os.environ.get("CAIRN_ACCESS_KEY", ""), os.environ.get("CAIRN_SECRET_KEY", "")
        if ea and es:
            access_key, secret_key = ea, es
        elif ea or es:
            raise CairnError("InvalidCredentials", "CAIRN_ACCESS_KEY and CAIRN_SECRET_KEY must be set together")
        else:
            prof = _read_profile(path, name)
            if prof is None:
                raise CairnError("InvalidCredentials",
                                 f"no access key: set CAIRN_ACCESS_KEY and CAIRN_SECRET_KEY, pass access_key and "
                                 f"secret_key, or write {path} (cairn server writes it when it makes a new cluster's root key)")
            access_key, secret_key = prof.get("access_key", ""), prof.get("secret_key", "")
            if not access_key or not secret_key:
                raise CairnError("InvalidCredentials", f"profile {name} of {path} needs access_key and secret_key")
    if not endpoint:
        endpoint = os.environ.get("CAIRN_ENDPOINT")
    if not endpoint:
        if prof is None:
            try:
                prof = _read_profile(path, name)
            except CairnError:
                prof = None
        endpoint = (prof or {}).get("endpoint") or DEFAULT_ENDPOINT
    return access_key, secret_key, endpoint


def b64(data):
    return base64.b64encode(data).decode("ascii")


class Client:
    """One endpoint and one access key. Thread-compatible: use one Client
    per thread (it keeps one HTTP connection open)."""

    def __init__(self, endpoint=None, access_key=None, secret_key=None, profile=None, region=None, timeout=30.0):
        self.access_key, self._secret, endpoint = find_credentials(access_key, secret_key, profile, endpoint)
        u = urlsplit(endpoint if "://" in endpoint else "http://" + endpoint)
        if u.scheme not in ("http", "https"):
            raise CairnError("InvalidArgument", f"endpoint {endpoint!r}: http:// or https:// only")
        self.endpoint = f"{u.scheme}://{u.netloc}"
        self._https, self._host = u.scheme == "https", u.netloc
        self.region = region or os.environ.get("CAIRN_REGION") or DEFAULT_REGION
        self.timeout = timeout
        self._conn = None
        self.round_trips = 0  # requests sent: what a caller can measure

    # -- transport -------------------------------------------------------

    def close(self):
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _connection(self):
        if self._conn is None:
            cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
            self._conn = cls(self._host, timeout=self.timeout)
        return self._conn

    def request(self, method, path, params=(), body=b"", headers=None):
        """Sends one signed request; returns (status, headers, body). path
        is unencoded ("/space/key"). A dropped keep-alive connection is
        dialled again once."""
        params = list(params)
        wire_path = _sigv4.uri_encode(path, True)
        hdrs = _sigv4.sign(method, self._host, wire_path, params, headers or {}, body,
                           self.access_key, self._secret, self.region)
        target = wire_path + ("?" + _sigv4.canonical_query(params) if params else "")
        for attempt in (0, 1):
            reused = self._conn is not None
            conn = self._connection()
            try:
                conn.request(method, target, body=body, headers=hdrs)
                resp = conn.getresponse()
                data = resp.read()
                self.round_trips += 1
                return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                # A connection that sat idle may have been closed by the
                # server (its idle timeout): dial again, once; never for a
                # commit, which may have taken effect.
                self.close()
                if attempt == 1 or not reused or path.endswith("/txn/commit"):
                    raise
            except BaseException:
                self.close()  # a timeout leaves the connection unusable
                raise
        raise AssertionError("unreachable")

    def call(self, endpoint, req):
        """POSTs req (a dict) as JSON to /_cairn/v1/ENDPOINT and returns the
        decoded answer; an error answer raises its CairnError."""
        body = json.dumps(req, separators=(",", ":")).encode("utf-8")
        status, _, data = self.request("POST", "/_cairn/v1/" + endpoint, body=body,
                                       headers={"content-type": "application/json"})
        try:
            out = json.loads(data) if data else {}
        except ValueError:
            raise CairnError("InternalError", f"{endpoint}: HTTP {status}: {data[:200]!r}", status)
        if status != 200:
            e = out.get("error") or {}
            raise _error(e.get("code", "InternalError"), e.get("message", f"HTTP {status}"), status,
                         e.get("retryable", False), [(c.get("space"), c.get("key")) for c in e.get("conflicts") or ()])
        return out

    def _s3(self, method, path, params=(), body=b"", headers=None, ok=(200,)):
        status, hdrs, data = self.request(method, path, params, body, headers)
        if status not in ok:
            code, msg = "InternalError", f"HTTP {status}"
            if data:
                try:
                    root = ET.fromstring(data)
                    code = root.findtext("Code") or code
                    msg = root.findtext("Message") or msg
                except ET.ParseError:
                    msg = data[:200].decode("utf-8", "replace")
            elif status == 404:
                code = "NotFound"
            raise _error(code, msg, status, status in (500, 503))
        return hdrs, data

    # -- spaces and objects (S3) -----------------------------------------

    def create_space(self, space):
        """Creates a space (an S3 bucket, with versioning enabled: every
        write gets a version id of its own). An existing one of this key's
        is left as it is."""
        try:
            self._s3("PUT", f"/{space}")
        except CairnError as e:
            if e.code not in ("BucketAlreadyOwnedByYou",):
                raise
            return
        # A bucket made through S3 starts unversioned, as S3's do.
        self._s3("PUT", f"/{space}", [("versioning", "")], body=_VERSIONING_ENABLED)

    def delete_space(self, space):
        self._s3("DELETE", f"/{space}", ok=(200, 204))

    def spaces(self):
        _, data = self._s3("GET", "/")
        return [b.findtext(_S3NS + "Name") for b in ET.fromstring(data).iter(_S3NS + "Bucket")]

    def put(self, space, key, data, content_type=None, meta=None, tags=None, if_none_match=False, if_match=None):
        """Writes a new version and returns its id."""
        if isinstance(data, str):
            data = data.encode("utf-8")
        h = {"content-type": content_type or "application/octet-stream"}
        for k, v in (meta or {}).items():
            h["x-amz-meta-" + k] = v
        if tags:
            h["x-amz-tagging"] = "&".join(f"{quote(k, safe='')}={quote(v, safe='')}" for k, v in tags.items())
        if if_none_match:
            h["if-none-match"] = "*"
        if if_match:
            h["if-match"] = if_match
        hdrs, _ = self._s3("PUT", f"/{space}/{key}", body=data, headers=h)
        return hdrs.get("x-amz-version-id", "")

    def get(self, space, key, version=None):
        """Returns the object's body (of version, if given)."""
        params = [("versionId", version)] if version else []
        _, data = self._s3("GET", f"/{space}/{key}", params)
        return data

    def head(self, space, key, version=None):
        """Returns the version's record as a dict (version, size, etag,
        content_type, meta)."""
        params = [("versionId", version)] if version else []
        h, _ = self._s3("HEAD", f"/{space}/{key}", params)
        return {"version": h.get("x-amz-version-id", ""), "size": int(h.get("content-length", "0")),
                "etag": h.get("etag", "").strip('"'), "content_type": h.get("content-type", ""),
                "meta": {k[len("x-amz-meta-"):]: v for k, v in h.items() if k.startswith("x-amz-meta-")}}

    def delete(self, space, key, version=None):
        """Deletes the key (a delete marker), or removes one version."""
        params = [("versionId", version)] if version else []
        self._s3("DELETE", f"/{space}/{key}", params, ok=(200, 204))

    def list(self, space, prefix="", limit=None):
        """Yields the keys of the live objects under prefix, in key order."""
        token, n = None, 0
        while True:
            params = [("list-type", "2"), ("prefix", prefix)]
            if token:
                params.append(("continuation-token", token))
            _, data = self._s3("GET", f"/{space}", params)
            root = ET.fromstring(data)
            for c in root.iter(_S3NS + "Contents"):
                yield c.findtext(_S3NS + "Key")
                n += 1
                if limit is not None and n >= limit:
                    return
            token = root.findtext(_S3NS + "NextContinuationToken")
            if root.findtext(_S3NS + "IsTruncated") != "true" or not token:
                return

    def versions(self, space, key):
        """Returns the key's versions, newest first, as dicts (version,
        delete_marker, size, etag)."""
        out, km, vm = [], None, None
        while True:
            params = [("versions", ""), ("prefix", key)]
            if km:
                params += [("key-marker", km), ("version-id-marker", vm)]
            _, data = self._s3("GET", f"/{space}", params)
            root = ET.fromstring(data)
            for el in root:
                tag = el.tag[len(_S3NS):]
                if tag not in ("Version", "DeleteMarker") or el.findtext(_S3NS + "Key") != key:
                    continue
                out.append({"version": el.findtext(_S3NS + "VersionId"), "delete_marker": tag == "DeleteMarker",
                            "size": int(el.findtext(_S3NS + "Size") or 0), "etag": (el.findtext(_S3NS + "ETag") or "").strip('"')})
            if root.findtext(_S3NS + "IsTruncated") != "true":
                return out
            km, vm = root.findtext(_S3NS + "NextKeyMarker"), root.findtext(_S3NS + "NextVersionIdMarker")

    # -- transactions ----------------------------------------------------

    def begin(self):
        """Starts a transaction at a fresh snapshot."""
        return Transaction(self, self.call("txn/begin", {})["start"])

    def read(self, at, refs, data=True):
        """Reads [(space, key)...] as of the timestamp at, in batches of
        1000; returns the txn/read results in order (dicts with found,
        version, data as bytes, ...)."""
        out = []
        refs = list(refs)
        for i in range(0, len(refs), 1000):
            res = self.call("txn/read", {"at": at, "objects": [{"space": s, "key": k} for s, k in refs[i:i + 1000]],
                                         "no_data": not data})
            for o in res["objects"]:
                if "data" in o:
                    o["data"] = base64.b64decode(o["data"])
                if o.get("error"):
                    e = o["error"]
                    raise _error(e.get("code", "InternalError"), e.get("message", ""), 0)
                out.append(o)
        return out

    def transact(self, fn, retries=10):
        """Runs fn(txn) in a transaction and commits it; a conflict begins
        again (up to retries times, with a growing pause). Returns fn's
        result."""
        for attempt in range(retries + 1):
            tx = self.begin()
            result = fn(tx)
            try:
                tx.commit()
                return result
            except ConflictError:
                if attempt == retries:
                    raise
                time.sleep(min(0.2, 0.005 * 2 ** attempt))

    # -- queries, SQL, indexes -------------------------------------------

    def query(self, space, filter, as_of=None, order_by=None, desc=False, limit=None, docs=False):
        """Yields the matching objects' records (dicts; with docs, each
        with its "doc"), following pages at one snapshot."""
        req = {"space": space, "filter": filter, "docs": docs}
        if as_of:
            req["as_of"] = as_of
        if order_by:
            req["order_by"], req["desc"] = order_by, desc
        n = 0
        while True:
            if limit is not None:
                req["limit"] = min(limit - n, 1000)
            res = self.call("query", req)
            for o in res["objects"]:
                yield o
                n += 1
                if limit is not None and n >= limit:
                    return
            if not res.get("truncated"):
                return
            req["after"], req["as_of"] = res["next"], res["as_of"]

    def watch_page(self, space, cursor=None, from_=None, wait=0, limit=None):
        """One page of the space's committed changes after cursor (or the
        timestamp from_, or now): {"events": [{"key", "version",
        "delete_marker"}...], "cursor", "closed", "more"}. Every version
        committed after the position up to closed is in events or in the
        pages that follow. wait (seconds, up to 30) waits for a first
        event."""
        req = {"space": space, "wait": wait}
        if cursor:
            req["cursor"] = cursor
        elif from_:
            req["from"] = from_
        if limit:
            req["limit"] = limit
        return self.call("watch", req)

    def watch(self, space, cursor=None, from_=None, wait=25):
        """Yields (event, cursor) for every change committed to the space
        after cursor (or from_, or now), in commit order, forever (long
        polls of wait seconds). The last event of each page comes with the
        cursor that resumes after it (the others with None): resume a
        stopped watch from the last cursor it yielded."""
        while True:
            page = self.watch_page(space, cursor, from_, wait)
            evs = page["events"]
            for i, ev in enumerate(evs):
                # The cursor that resumes after a page comes with its last
                # event; the others carry None.
                yield ev, (page["cursor"] if i == len(evs) - 1 else None)
            cursor = page["cursor"]

    def sql(self, statement):
        """Runs a read-only SQL statement; returns (columns, rows)."""
        res = self.call("sql", {"statement": statement})
        return res["columns"], res["rows"]

    def add_index(self, space, field, type):
        return self.call("index/add", {"space": space, "field": field, "type": type})["indexes"]

    def drop_index(self, space, field):
        return self.call("index/drop", {"space": space, "field": field})["indexes"]

    def indexes(self, space):
        return self.call("index/list", {"space": space})["indexes"]

    def follow(self, space, key, depth=1, as_of=None, version=None):
        """Reads a document and what its references reach, to depth."""
        req = {"space": space, "key": key, "depth": depth}
        if as_of:
            req["as_of"] = as_of
        if version:
            req["version"] = version
        res = self.call("follow", req)
        for o in res["objects"]:
            if "data" in o:
                o["data"] = base64.b64decode(o["data"])
        return res

    # -- versions, snapshots, branches -----------------------------------

    def lineage(self, space, key, version=None):
        req = {"space": space, "key": key}
        if version:
            req["version"] = version
        return self.call("lineage", req)

    def diff(self, space, key, from_version=None, to_version=None):
        req = {"space": space, "key": key}
        if from_version:
            req["from"] = from_version
        if to_version:
            req["to"] = to_version
        return self.call("diff", req)

    def clone(self, space, key, to_space, to_key, version=None):
        req = {"space": space, "key": key, "to": {"space": to_space, "key": to_key}}
        if version:
            req["version"] = version
        return self.call("clone", req)

    def create_snapshot(self, space, name):
        return self.call("snapshot/create", {"space": space, "name": name})

    def snapshots(self, space=None):
        return self.call("snapshot/list", {"space": space} if space else {})["snapshots"]

    def delete_snapshot(self, name):
        self.call("snapshot/delete", {"name": name})

    def create_branch(self, space, name):
        return self.call("branch/create", {"space": space, "name": name})

    def branches(self, space=None):
        return self.call("branch/list", {"space": space} if space else {})["branches"]

    def merge_branch(self, name, strategy=None):
        req = {"name": name}
        if strategy:
            req["strategy"] = strategy
        return self.call("branch/merge", req)

    def delete_branch(self, name):
        self.call("branch/delete", {"name": name})


class Transaction:
    """An optimistic transaction: reads at start, writes held here and sent
    with the read set at commit (the server validates both)."""

    def __init__(self, client, start):
        self.client, self.start = client, start
        self.reads = {}   # (space, key) -> version seen ("" for none)
        self.writes = {}  # (space, key) -> write dict
        self.committed = None

    def get(self, space, key):
        """Returns the body of the key as of start (or as this transaction
        wrote it), or None if it has none."""
        w = self.writes.get((space, key))
        if w is not None:
            return None if w.get("delete") else base64.b64decode(w["data"])
        o = self.read([(space, key)])[0]
        return o["data"] if o["found"] else None

    def read(self, refs, data=True):
        """Reads many keys as of start in one round trip (per 1000); each
        read joins the read set."""
        res = self.client.read(self.start, refs, data)
        for o in res:
            self.reads.setdefault((o["space"], o["key"]), o.get("version", "") if o["found"] else "")
        return res

    def put(self, space, key, data, content_type=None, meta=None, tags=None):
        if isinstance(data, str):
            data = data.encode("utf-8")
        w = {"space": space, "key": key, "data": b64(data)}
        if content_type:
            w["content_type"] = content_type
        if meta:
            w["meta"] = meta
        if tags:
            w["tags"] = tags
        self.writes[(space, key)] = w

    def delete(self, space, key):
        self.writes[(space, key)] = {"space": space, "key": key, "delete": True}

    def commit(self):
        """Commits every write atomically, validating the read set; returns
        the commit's timestamp (the version of every write). Raises
        ConflictError if another transaction got there first."""
        if not self.writes and not self.reads:
            self.committed = self.start
            return self.committed
        req = {"start": self.start, "writes": list(self.writes.values()),
               "reads": [{"space": s, "key": k, "version": v} for (s, k), v in self.reads.items()]}
        self.committed = self.client.call("txn/commit", req)["committed"]
        return self.committed

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.commit()
        return False
