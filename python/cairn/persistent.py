"""Transparent persistence: Python objects that live in Cairn.

    import cairn
    from cairn.persistent import Persistent, PersistentList

    class Account(Persistent):
        def __init__(self, owner, balance=0):
            self.owner, self.balance = owner, balance

    db = cairn.connect()                      # credentials as the CLI finds them
    root = db.root("bank")                    # a PersistentDict kept at bank/_root
    with db.transaction():
        root["alice"] = Account("alice", 100) # reachable from root: stored too

    def pay(tx):                              # retried on conflict
        root["alice"].balance -= 10
    db.transact(pay)

Objects are stored as JSON documents, one object per key, so the
queries, indexes and SQL of the space see them: an object's attributes
are its document's fields, with "$class" (module:QualName) and "type"
(the class's name, unless the object has its own attribute "type") added,
and a reference to another persistent object is {"$ref": "SPACE/KEY"}.

Reads: a reference becomes a ghost, loaded when an attribute is first
read. A ghost's load takes every other ghost waiting to load with it (up
to 1000) in the same round trip, so walking a collection of references
costs one read per thousand objects, not one per object.

Writes: setting an attribute marks the object changed; a plain list or
dict changed in place is found too (at commit, each object used in the
transaction is compared with the state it was read with). A commit
writes every changed object and every new object reachable from one
(persistence by reachability) in one Cairn transaction, with the versions
of every object the transaction read: if any of them changed since, the
commit fails with ConflictError and changes nothing; db.transact(fn)
begins again. Objects are cached between transactions; the commit's
validation catches an object changed by another client since it was
read, and the conflicting objects are loaded again on the next try.
"""

import base64
import importlib
import json
import sys
import threading
import uuid
import weakref

from .client import Client, CairnError, ConflictError, CursorExpired, NotFound

__all__ = ["Persistent", "PersistentList", "PersistentDict", "SortedMap", "DB", "connect", "load", "ref"]

ROOT_KEY = "_root"
_MAX_BATCH = 1000


def connect(endpoint=None, access_key=None, secret_key=None, profile=None, region=None, client=None, watch=True):
    """Returns a DB over a Client made from the arguments (or the one
    given). With watch, each transaction starts by reading the changes
    committed to the DB's spaces since the last one, so no cached object
    is older than the transaction's snapshot."""
    return DB(client or Client(endpoint, access_key, secret_key, profile, region), watch=watch)


def _internal(name):
    return name.startswith("_p_") or name.startswith("_v_") or name.startswith("__")


class Persistent:
    """The base class of objects that persist. Attributes whose names start
    with _v_ are volatile (never stored); _p_ names are the machinery's.
    Subclasses must not use __slots__."""

    _p_db = None
    _p_space = None
    _p_key = None
    _p_version = ""      # the version loaded or last written ("" if none)
    _p_ghost = False     # state not loaded yet
    _p_missing = False   # the key had no live object when loaded
    _p_saved = None      # the JSON state as loaded or last written
    _p_serial = -1       # the DB transaction that last used it
    _p_dirty = False

    def __getattribute__(self, name):
        if not _internal(name):
            db = object.__getattribute__(self, "_p_db")
            if db is not None:
                db._use(self)
        return object.__getattribute__(self, name)

    def __getattr__(self, name):
        # Only reached when the attribute is not found: a ghost's class
        # is not known before it loads (Ghost), nor its attributes.
        if _internal(name):
            raise AttributeError(name)
        if object.__getattribute__(self, "_p_ghost"):
            object.__getattribute__(self, "_p_db")._use(self)
            return getattr(self, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __setattr__(self, name, value):
        if _internal(name):
            object.__setattr__(self, name, value)
            return
        db = object.__getattribute__(self, "_p_db")
        if db is not None:
            db._use(self)
        object.__setattr__(self, name, value)
        self._p_changed()

    def __delattr__(self, name):
        db = object.__getattribute__(self, "_p_db")
        if db is not None and not _internal(name):
            db._use(self)
        object.__delattr__(self, name)
        if not _internal(name):
            self._p_changed()

    def _p_changed(self):
        """Marks the object changed (for changes made where no attribute is
        set, such as in a container the object keeps outside its state)."""
        object.__setattr__(self, "_p_dirty", True)
        db = object.__getattribute__(self, "_p_db")
        if db is not None:
            db._changed(self)

    # The state: what is stored, and how it comes back.

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if not _internal(k)}

    def __setstate__(self, state):
        self.__dict__.update(state)

    def __repr__(self):
        d = self.__dict__
        where = f" {d['_p_space']}/{d['_p_key']}" if d.get("_p_key") else " (new)"
        if d.get("_p_ghost"):
            return f"<ghost{where}>"
        return f"<{type(self).__name__}{where}>"


class Ghost(Persistent):
    """What a reference is before its object loads: the load gives it its
    class. Python looks special methods up on the class, past attribute
    access, so the ones below load the object first and then run its
    own; isinstance() sees the class only once the object has loaded
    (cairn.persistent.load(obj) loads it)."""


def load(obj):
    """Loads obj if it is a ghost, and returns it."""
    db = obj.__dict__.get("_p_db")
    if db is not None:
        db._use(obj)
    return obj


def _forward(name):
    def method(self, *args):
        load(self)
        if type(self) is Ghost:
            raise TypeError(f"{self!r} has no {name}")
        impl = getattr(type(self), name, None)
        if impl is None and name == "__bool__":
            impl = getattr(type(self), "__len__", None)
            return True if impl is None else impl(self) != 0
        if impl is None:
            raise TypeError(f"{type(self).__name__!r} object has no {name}")
        return impl(self, *args)
    method.__name__ = name
    return method


for _name in ("__iter__", "__len__", "__getitem__", "__setitem__", "__delitem__", "__contains__",
              "__bool__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__str__",
              "__call__", "__enter__", "__exit__", "__reversed__"):
    setattr(Ghost, _name, _forward(_name))
Ghost.__hash__ = object.__hash__


def ref(obj):
    """Returns "SPACE/KEY" of a stored persistent object."""
    d = obj.__dict__
    if not d.get("_p_key"):
        raise ValueError(f"{obj!r} is not stored yet")
    return f"{d['_p_space']}/{d['_p_key']}"


def _class_name(cls):
    return f"{cls.__module__}:{cls.__qualname__}"


def _find_class(name, where):
    mod, _, qual = name.partition(":")
    m = sys.modules.get(mod)
    if m is None and mod.startswith("cairn."):
        m = importlib.import_module(mod)
    if m is None:
        raise CairnError("UnknownClass", f"{where} holds a {name}: import module {mod} before loading it "
                                         "(modules are not imported on a document's say)")
    obj = m
    for part in qual.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            raise CairnError("UnknownClass", f"{where} holds a {name}, which module {mod} does not define")
    if not (isinstance(obj, type) and issubclass(obj, Persistent)):
        raise CairnError("UnknownClass", f"{where} holds a {name}, which is not a Persistent class")
    return obj


class _Txn:
    """One DB transaction's bookkeeping."""

    def __init__(self, serial):
        self.serial = serial
        self.start = None   # the snapshot, taken at the first read
        self.used = {}      # id -> object used (read or written)
        self.changed = {}   # id -> object marked changed
        self.extra = {}     # (space, key) -> write dict (SortedMap entries)
        self.reads = {}     # (space, key) -> version seen, besides objects


class DB:
    """A connection's objects. Not safe for concurrent use from several
    threads: give each thread its own DB (connect())."""

    def __init__(self, client, watch=True):
        self.client = client
        self.watch = watch
        self._cursors = {}  # space -> watch cursor: changes after it are not yet applied to the cache
        self.invalidations = 0  # cached objects dropped because another client changed them
        self._objects = weakref.WeakValueDictionary()  # (space, key) -> object
        self._pending = {}  # (space, key) -> ghost waiting to load (an insertion-ordered set)
        self._serial = 0
        self._txn = _Txn(0)
        self._owner = threading.get_ident()

    # -- transactions ----------------------------------------------------

    def _start(self):
        t = self._txn
        if t.start is None:
            if self.watch and self._cursors:
                t.start = self._catch_up()
            else:
                t.start = self.client.call("txn/begin", {})["start"]
        return t.start

    def _catch_up(self):
        """Reads the changes committed to the DB's spaces since their
        cursors and drops the cached objects they changed; returns a
        snapshot no change is missing from (the first space's closed
        timestamp: one round trip a space)."""
        import time
        start = None
        for space in list(self._cursors):
            deadline = time.monotonic() + 2
            while True:
                try:
                    page = self.client.watch_page(space, self._cursors[space])
                except CursorExpired:
                    # Too far behind: what changed is not known any more.
                    # Forget the space's objects and watch from now.
                    self.invalidate(space)
                    self._cursors[space] = self.client.watch_page(space)["cursor"]
                    continue
                for ev in page["events"]:
                    self._invalidate_key(space, ev["key"], ev["version"])
                self._cursors[space] = page["cursor"]
                if page.get("more"):
                    continue
                if start is None:
                    start = page["closed"]
                if page["closed"] >= start:  # 16 hex digits: compares as the numbers
                    if page["closed"] > start:
                        # This space was read past the snapshot: changes
                        # after the snapshot are read again next time.
                        self._cursors[space] = start
                    break
                if time.monotonic() > deadline:
                    # Held back by a long transaction: forget the space's
                    # cache rather than wait longer.
                    self.invalidate(space)
                    break
                time.sleep(0.01)
        return start

    def _invalidate_key(self, space, key, version):
        obj = self._objects.get((space, key))
        if obj is None:
            return
        d = obj.__dict__
        if d.get("_p_ghost") or d.get("_p_version") == version or id(obj) in self._txn.changed:
            return  # not loaded; this very version; changed here (the commit will conflict)
        self.invalidations += 1
        self._ghostify(obj)

    def begin(self):
        """Ends the current transaction (dropping its changes) and begins
        another."""
        self.abort()

    def commit(self):
        """Commits the current transaction: every changed object, and every
        new object reachable from one, in one Cairn transaction. Returns
        its timestamp (None if it wrote nothing). A ConflictError aborts."""
        t = self._txn
        try:
            writes, reads, done = self._collect(t)
            committed = None
            if writes:
                req = {"start": self._start(), "writes": writes,
                       "reads": [{"space": s, "key": k, "version": v} for (s, k), v in reads.items()]}
                committed = self.client.call("txn/commit", req)["committed"]
            for obj, state in done:
                d = obj.__dict__
                d["_p_saved"], d["_p_dirty"], d["_p_missing"] = state, False, False
                d["_p_version"] = committed
            for (space, key), w in t.extra.items():
                obj = self._objects.get((space, key))
                if w.get("delete") and obj is not None:
                    self._ghostify(obj)  # it loads again: as missing
        except ConflictError as e:
            # What the transaction lost on loads again: the objects named,
            # or, if none is named, every object it used.
            self._abort(t, e.conflicts or [(o.__dict__["_p_space"], o.__dict__["_p_key"]) for o in t.used.values()])
            raise
        except BaseException:
            self._abort(t, ())
            raise
        self._next()
        return committed

    def abort(self):
        """Drops the current transaction's changes: the objects it changed
        load again when next used."""
        self._abort(self._txn, ())

    def _abort(self, t, conflicts):
        # Every object the transaction used: one changed in place (a
        # plain list) is not marked changed, and must not keep it.
        for obj in list(t.changed.values()) + list(t.used.values()):
            d = obj.__dict__
            if d.get("_p_key") and not d.get("_p_version") and not d.get("_p_missing") and not d.get("_p_ghost"):
                # New in this transaction: never stored. It keeps its
                # state (the caller's object) and gets a key again when a
                # commit reaches it.
                self._objects.pop((d["_p_space"], d["_p_key"]), None)
                d["_p_key"] = d["_p_space"] = None
                continue
            try:
                same = d.get("_p_saved") is not None and self._encode_state(obj, None) == d.get("_p_saved")
            except CairnError:
                same = False  # it holds what cannot be stored: not what was loaded
            if not same or id(obj) in t.changed:
                self._ghostify(obj)
        for space, key in conflicts:
            obj = self._objects.get((space, key))
            if obj is not None:
                self._ghostify(obj)
        self._next()

    def _next(self):
        self._serial += 1
        self._txn = _Txn(self._serial)

    def invalidate(self, space=None, key=None):
        """Forgets the state of cached objects (of space, or one key): they
        load again when next used. With no arguments, every object."""
        for (s, k), obj in list(self._objects.items()):
            if (space is None or s == space) and (key is None or k == key):
                self._ghostify(obj)

    def _ghostify(self, obj):
        d = obj.__dict__
        if d.get("_p_ghost") or not d.get("_p_key"):
            if not d.get("_p_key"):  # new: it was never stored
                d["_p_dirty"] = False
            return
        for k in [k for k in d if not _internal(k)]:
            del d[k]
        d["_p_ghost"], d["_p_dirty"], d["_p_saved"] = True, False, None
        self._pending[(d["_p_space"], d["_p_key"])] = obj

    def transaction(self):
        """A context manager: a fresh transaction, committed at the end of
        the block (aborted if it raises)."""
        return _TxnContext(self)

    def transact(self, fn, retries=10):
        """Runs fn() in a fresh transaction and commits; on a conflict,
        begins again (the conflicting objects load anew; after two
        conflicts in a row, every cached object). Returns fn's result."""
        import time
        for attempt in range(retries + 1):
            self.abort()
            try:
                try:
                    result = fn()
                except BaseException:
                    self.abort()  # what fn changed before it failed is undone
                    raise
                self.commit()
                return result
            except ConflictError:
                if attempt == retries:
                    raise
                if attempt >= 1:
                    self.invalidate()
                time.sleep(min(0.2, 0.005 * 2 ** attempt))

    # -- objects ---------------------------------------------------------

    def root(self, space):
        """The space's root: a PersistentDict at key _root, made (and stored
        at the next commit) if the space has none."""
        obj = self.get(space, ROOT_KEY)
        self._use(obj)
        return obj

    def get(self, space, key):
        """The object at space/key: cached, or a ghost that loads when
        used (NotFound then if there is none)."""
        obj = self._objects.get((space, key))
        if obj is None:
            obj = Ghost.__new__(Ghost)
            d = obj.__dict__
            d["_p_db"], d["_p_space"], d["_p_key"], d["_p_ghost"] = self, space, key, True
            self._objects[(space, key)] = obj
            self._pending[(space, key)] = obj
        return obj

    def add(self, obj, space, key=None):
        """Stores a new object at space/key (default: its class's name and
        a random id) at the next commit, reachable or not."""
        self._assign(obj, space, key)
        obj._p_changed()
        return obj

    def delete(self, obj):
        """Deletes the object's key at the next commit (its other changes
        in the transaction are not written)."""
        d = obj.__dict__
        self._txn.extra[(d["_p_space"], d["_p_key"])] = {"space": d["_p_space"], "key": d["_p_key"], "delete": True}
        self._txn.changed[id(obj)] = obj  # reloaded (as missing) after the commit

    def query(self, space, filter, order_by=None, desc=False, limit=None):
        """The objects of space whose documents match the CEL filter, as of
        the transaction's snapshot, loaded from the query's answer."""
        at = self._start()
        if self.watch:
            self._cursors.setdefault(space, at)
        out = []
        for m in self.client.query(space, filter, as_of=at, order_by=order_by, desc=desc, limit=limit, docs=True):
            obj = self.get(space, m["key"])
            d = obj.__dict__
            if d.get("_p_ghost") and "doc" in m:
                self._pending.pop((space, m["key"]), None)
                self._load_state(obj, m["doc"], m["version"])
            self._use(obj)
            out.append(obj)
        return out

    def _assign(self, obj, space, key=None):
        d = obj.__dict__
        if d.get("_p_key"):
            return
        if d.get("_p_db") not in (None, self):
            raise CairnError("InvalidArgument", f"{obj!r} belongs to another DB")
        key = key or f"{type(obj).__name__}/{uuid.uuid4().hex}"
        d["_p_db"], d["_p_space"], d["_p_key"], d["_p_version"] = self, space, key, ""
        if (space, key) in self._objects:
            raise CairnError("InvalidArgument", f"{space}/{key} is another object already")
        self._objects[(space, key)] = obj
        self._txn.changed[id(obj)] = obj

    # -- the machinery ---------------------------------------------------

    def _use(self, obj):
        d = obj.__dict__
        t = self._txn
        if t.start is None and self.watch and self._cursors:
            self._start()  # catch up first: a cached object may have changed
        if d.get("_p_ghost"):
            self._load(obj)
        if d.get("_p_serial") != t.serial and d.get("_p_key"):
            d["_p_serial"] = t.serial
            t.used[id(obj)] = obj
        if d.get("_p_missing") and d.get("_p_key") != ROOT_KEY and not d.get("_p_dirty"):
            raise NotFound("NotFound", f"{d['_p_space']}/{d['_p_key']} has no object (deleted, or never stored)", 404)

    def _changed(self, obj):
        d = obj.__dict__
        if d.get("_p_db") is self and d.get("_p_key"):
            self._txn.changed[id(obj)] = obj
            self._txn.used[id(obj)] = obj

    def _load(self, obj):
        """Loads obj's state and, in the same read, every other ghost
        waiting (up to 1000 objects a read), at the transaction's
        snapshot."""
        at = self._start()
        d = obj.__dict__
        me = (d["_p_space"], d["_p_key"])
        self._pending.pop(me, None)
        batch = [me]
        for k in list(self._pending):
            if len(batch) >= _MAX_BATCH:
                break
            batch.append(k)
        res = self.client.read(at, batch)
        for (space, key), o in zip(batch, res):
            if self.watch:
                self._cursors.setdefault(space, at)
            g = self._pending.pop((space, key), None) if (space, key) != me else obj
            if g is None or not g.__dict__.get("_p_ghost"):
                continue
            if not o["found"]:
                gd = g.__dict__
                gd["_p_ghost"], gd["_p_missing"], gd["_p_version"], gd["_p_saved"] = False, True, "", None
                if key == ROOT_KEY:  # a space's root starts empty
                    object.__setattr__(g, "__class__", PersistentDict)
                    gd["data"] = {}
                continue
            try:
                doc = json.loads(o["data"])
            except ValueError:
                raise CairnError("NotADocument", f"{space}/{key} is not a JSON document")
            self._load_state(g, doc, o["version"])

    def _load_state(self, obj, doc, version):
        d = obj.__dict__
        where = f"{d['_p_space']}/{d['_p_key']}"
        if not isinstance(doc, dict) or "$class" not in doc:
            raise CairnError("NotAPersistentObject", f"{where} is not a persistent object's document (no $class)")
        cls = _find_class(doc["$class"], where)
        state = {}
        for k, v in doc.items():
            if k in ("$class", "$type") or (k == "type" and doc.get("$type")):
                continue
            state[k] = self._decode(v, d["_p_space"])
        object.__setattr__(obj, "__class__", cls)
        d["_p_ghost"], d["_p_missing"], d["_p_version"], d["_p_dirty"] = False, False, version, False
        obj.__setstate__(state)
        d["_p_saved"] = self._encode_state(obj, None)

    def _decode(self, v, space):
        if isinstance(v, list):
            return [self._decode(x, space) for x in v]
        if isinstance(v, dict):
            if len(v) == 1 and "$ref" in v and isinstance(v["$ref"], str):
                s, _, k = v["$ref"].partition("/")
                return self.get(s, k)
            if len(v) == 1 and "$bytes" in v:
                return base64.b64decode(v["$bytes"])
            return {k: self._decode(x, space) for k, x in v.items()}
        return v

    def _encode(self, v, space, new):
        """The JSON form of a value; persistent objects not stored yet are
        given a key in space and queued on new (persistence by
        reachability). new None: encoding only to compare."""
        if v is None or isinstance(v, (bool, int, float, str)):
            if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
                raise CairnError("InvalidArgument", f"{v} cannot be stored in a JSON document")
            return v
        if isinstance(v, Persistent):
            d = v.__dict__
            if not d.get("_p_key"):
                if new is None:
                    return {"$ref": f"(new {id(v)})"}
                self._assign(v, space)
                new.append(v)
            elif d.get("_p_db") is not self:
                raise CairnError("InvalidArgument", f"{v!r} belongs to another DB")
            return {"$ref": f"{d['_p_space']}/{d['_p_key']}"}
        if isinstance(v, (list, tuple)):
            return [self._encode(x, space, new) for x in v]
        if isinstance(v, dict):
            out = {}
            for k, x in v.items():
                if not isinstance(k, str):
                    raise CairnError("InvalidArgument", f"a stored dict's keys are strings, not {type(k).__name__} ({k!r}): use a PersistentDict or SortedMap")
                if k.startswith("$"):
                    raise CairnError("InvalidArgument", f"a stored dict's keys may not start with $ ({k!r})")
                out[k] = self._encode(x, space, new)
            return out
        if isinstance(v, (bytes, bytearray)):
            return {"$bytes": base64.b64encode(v).decode("ascii")}
        raise CairnError("InvalidArgument", f"a {type(v).__name__} cannot be stored: make it a Persistent subclass or a JSON value")

    def _encode_state(self, obj, new):
        d = obj.__dict__
        state = obj.__getstate__()
        doc = {"$class": _class_name(type(obj))}
        for k, v in state.items():
            if k.startswith("$"):
                raise CairnError("InvalidArgument", f"attribute names may not start with $ ({k!r})")
            doc[k] = self._encode(v, d["_p_space"], new)
        if "type" not in doc:
            doc["type"], doc["$type"] = type(obj).__name__, True
        return json.dumps(doc, separators=(",", ":"), sort_keys=True)

    def _collect(self, t):
        """The commit's writes and reads, and the objects it stores (with
        their new state)."""
        writes, done, seen = [], [], set()
        queue = list(t.changed.values()) + [o for o in t.used.values() if id(o) not in t.changed]
        reads = dict(t.reads)
        while queue:
            obj = queue.pop(0)
            d = obj.__dict__
            if id(obj) in seen or d.get("_p_ghost") or not d.get("_p_key"):
                continue
            seen.add(id(obj))
            if (d["_p_space"], d["_p_key"]) in t.extra:
                continue  # deleted (db.delete) or an entry's write: that write wins
            if d.get("_p_missing") and not d.get("_p_dirty"):
                reads[(d["_p_space"], d["_p_key"])] = ""
                continue
            new = []
            state = self._encode_state(obj, new)
            queue.extend(new)
            if state == d.get("_p_saved") and not d.get("_p_dirty"):
                reads[(d["_p_space"], d["_p_key"])] = d.get("_p_version", "")
                continue
            w = {"space": d["_p_space"], "key": d["_p_key"], "data": base64.b64encode(state.encode("utf-8")).decode("ascii"),
                 "content_type": "application/json"}
            if not d.get("_p_version") and not d.get("_p_missing"):
                w["if_none_match"] = True
            writes.append(w)
            done.append((obj, state))
            if d.get("_p_version"):
                reads[(d["_p_space"], d["_p_key"])] = d["_p_version"]
        for k, w in t.extra.items():
            writes.append(w)
        written = {(w["space"], w["key"]) for w in writes}
        reads = {k: v for k, v in reads.items() if k not in written or v}
        return writes, reads, done


class _TxnContext:
    def __init__(self, db):
        self.db = db

    def __enter__(self):
        self.db.abort()
        return self.db

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.db.commit()
        else:
            self.db.abort()
        return False


class PersistentList(Persistent):
    """A list that persists, and notices its changes."""

    def __init__(self, items=()):
        self.data = list(items)

    def __len__(self):
        return len(self.data)

    def __getitem__(self, i):
        return self.data[i]

    def __setitem__(self, i, v):
        self.data[i] = v
        self._p_changed()

    def __delitem__(self, i):
        del self.data[i]
        self._p_changed()

    def __iter__(self):
        return iter(self.data)

    def __contains__(self, v):
        return v in self.data

    def __eq__(self, other):
        return list(self) == list(other)

    __hash__ = None

    def append(self, v):
        self.data.append(v)
        self._p_changed()

    def extend(self, vs):
        self.data.extend(vs)
        self._p_changed()

    def insert(self, i, v):
        self.data.insert(i, v)
        self._p_changed()

    def pop(self, i=-1):
        v = self.data.pop(i)
        self._p_changed()
        return v

    def remove(self, v):
        self.data.remove(v)
        self._p_changed()

    def index(self, v):
        return self.data.index(v)

    def sort(self, **kw):
        self.data.sort(**kw)
        self._p_changed()


class PersistentDict(Persistent):
    """A dict (of string keys) that persists, and notices its changes."""

    def __init__(self, items=None, **kw):
        self.data = dict(items or {}, **kw)

    def __len__(self):
        return len(self.data)

    def __getitem__(self, k):
        return self.data[k]

    def __setitem__(self, k, v):
        self.data[k] = v
        self._p_changed()

    def __delitem__(self, k):
        del self.data[k]
        self._p_changed()

    def __iter__(self):
        return iter(self.data)

    def __contains__(self, k):
        return k in self.data

    def keys(self):
        return self.data.keys()

    def values(self):
        return self.data.values()

    def items(self):
        return self.data.items()

    def get(self, k, default=None):
        return self.data.get(k, default)

    def setdefault(self, k, default=None):
        if k not in self.data:
            self[k] = default
        return self.data[k]

    def pop(self, k, *default):
        v = self.data.pop(k, *default)
        self._p_changed()
        return v

    def update(self, other=(), **kw):
        self.data.update(other, **kw)
        self._p_changed()


_INT_BIAS = 1 << 63


def _encode_key(k):
    """An entry key's form in the store: its order is the keys' (ints, in
    the 64-bit range, before strings)."""
    if isinstance(k, bool) or not isinstance(k, (int, str)):
        raise CairnError("InvalidArgument", f"a SortedMap's keys are ints or strings, not {type(k).__name__}")
    if isinstance(k, int):
        if not -_INT_BIAS <= k < _INT_BIAS:
            raise CairnError("InvalidArgument", f"an int key is within 64 bits ({k})")
        return "i%020d" % (k + _INT_BIAS)
    return "s" + k


class SortedMap(Persistent):
    """A sorted mapping for collections too large to rewrite: each entry is
    its own object (KEY/e/ENCODED-KEY, a document {"k": key, "v": value}),
    so setting one entry writes one small object and concurrent writers
    of different entries do not conflict. The map's own document holds
    no entries. Keys are ints or strings; values are JSON values or
    persistent objects. Iteration is in key order, through a query at
    the transaction's snapshot (with this transaction's changes applied).
    A map must be stored (reachable, or db.add) before entries are set."""

    def __init__(self):
        self.kind = "sorted-map"

    def _p_prefix(self):
        d = self.__dict__
        db = d.get("_p_db")
        if db is None or not d.get("_p_key"):
            raise CairnError("InvalidArgument", "store the SortedMap first (db.add, or make it reachable and commit)")
        db._use(self)
        return db, d["_p_space"], d["_p_key"] + "/e/"

    def _p_entry(self, k):
        db, space, prefix = self._p_prefix()
        return db, space, prefix + _encode_key(k)

    def __setitem__(self, k, v):
        db, space, key = self._p_entry(k)
        new = []
        doc = {"k": k, "v": db._encode(v, space, new)}
        for obj in new:  # reachable from the entry: stored with it
            db._txn.changed[id(obj)] = obj
        db._txn.extra[(space, key)] = {"space": space, "key": key, "content_type": "application/json",
                                        "data": base64.b64encode(json.dumps(doc).encode("utf-8")).decode("ascii")}

    def _p_read(self, k):
        db, space, key = self._p_entry(k)
        w = db._txn.extra.get((space, key))
        if w is not None:
            return (False, None) if w.get("delete") else (True, json.loads(base64.b64decode(w["data"]))["v"])
        o = db.client.read(db._start(), [(space, key)])[0]
        db._txn.reads.setdefault((space, key), o["version"] if o["found"] else "")
        if not o["found"]:
            return False, None
        return True, json.loads(o["data"])["v"]

    def __getitem__(self, k):
        found, v = self._p_read(k)
        if not found:
            raise KeyError(k)
        return self.__dict__["_p_db"]._decode(v, self.__dict__["_p_space"])

    def get(self, k, default=None):
        try:
            return self[k]
        except KeyError:
            return default

    def __contains__(self, k):
        return self._p_read(k)[0]

    def __delitem__(self, k):
        if not self._p_read(k)[0]:
            raise KeyError(k)
        db, space, key = self._p_entry(k)
        db._txn.extra[(space, key)] = {"space": space, "key": key, "delete": True}

    def items(self, lo=None, hi=None):
        """Yields (key, value) in key order, lo <= key < hi."""
        db, space, prefix = self._p_prefix()
        filt = f"key.startsWith({json.dumps(prefix)})"
        if lo is not None:
            filt += f" && key >= {json.dumps(prefix + _encode_key(lo))}"
        if hi is not None:
            filt += f" && key < {json.dumps(prefix + _encode_key(hi))}"
        mine = {}
        for (s, key), w in db._txn.extra.items():
            if s == space and key.startswith(prefix):
                if (lo is None or key >= prefix + _encode_key(lo)) and (hi is None or key < prefix + _encode_key(hi)):
                    mine[key] = w
        stored = []
        for m in db.client.query(space, filt, as_of=db._start(), order_by="key", docs=True):
            db._txn.reads.setdefault((space, m["key"]), m["version"])
            if m["key"] not in mine:
                stored.append((m["key"], m["doc"]))
        for key, w in mine.items():
            if not w.get("delete"):
                stored.append((key, json.loads(base64.b64decode(w["data"]))))
        stored.sort(key=lambda e: e[0])
        for _, doc in stored:
            yield doc["k"], db._decode(doc["v"], space)

    def keys(self, lo=None, hi=None):
        for k, _ in self.items(lo, hi):
            yield k

    def values(self, lo=None, hi=None):
        for _, v in self.items(lo, hi):
            yield v

    def __iter__(self):
        return self.keys()

    def __len__(self):
        return sum(1 for _ in self.items())
