"""The cache's file and what sits beside it: the SQLite connection, its meta row, the writers' lock.

Under .git/grite/cache/: `state.db` (see cachedb) with a meta row naming the frontier it was
projected at; `meta`, a copy of that row written after each commit (a hint for the cheapest reads,
never trusted for more); `lock`, held by writers. Losing the directory or write access costs only
speed: answers then come from memory (read_only).
"""

from __future__ import annotations

import errno
import os

import msgspec

from git_brat.files import FileLock, atomic_write, ensure_dir
from git_brat.git.store import Store
from git_brat.grite.log.wal import Problem
from git_brat.grite.model.state import State
from git_brat.grite.log.refs import grite_dir

# 2: entities decoded lazily, kinds index; 3: dep_sources index; 4: snapshot_events;
# 5: issue views updated lazily (views, dirty); 6: unknown operations kept by event id;
# 7: an SQLite file, a row per entity; 8: snapshots hold settled rows apart, and a cache
# may wait for them. Snapshots carry it too: bump it whenever the same events would give a
# different State. 9: replay rejects illegal task moves and events past the bounds (a cache or
# snapshot made before may hold what they did). 10: a batch whose clock jumps past
# grite.maxClockJump is not believed (one made before may hold its events). 11: a lease token
# is believed only from its lease's records (lease_held, lease_basis). 12: an event not of its
# kind's schema (grite.model.schema) is rejected (one made before may hold its mistyped values).
# 13: a comment keeps the session it came through (Entity.vias, Comment.via).
# 14: a move out of running that ends another run than the task's current one is stale
# (a cache made before kept no run in its transitions).
CACHE_VERSION = 14
DB = "state.db"


class ColdPending(msgspec.Struct):
    """The rows this cache still lacks: the cold part of the snapshot it started from (its
    ids are listed in the file, see cachedb.COLD). Only answers that leave out what is settled
    and unchanged since `before` are given without them (see Cache.state)."""
    snapshot: str        # the snapshot commit (here); its meta names the part's commit
    rows: int
    before: int          # ms
    remote: str = ""     # the remote it came from ("": ours, or any synced remote)


class Meta(msgspec.Struct):
    version: int
    generation: str
    frontier: dict[str, str]
    max_lamport: int
    event_count: int = 0
    problems: list[Problem] = []
    snapshot_events: int = 0    # events covered by the newest snapshot this cache started from or wrote
    cold: ColdPending | None = None
    disputes: str = ""          # which actors were disputed, and held by whom (see disputes_mark)


class CacheFile:
    """The file a Cache projects into: opened, read and written here, by a writer under the lock.

    What the projection answers (Cache, in projection.py) is built on these; nothing here
    replays a log.
    """

    def __init__(self, store: Store):
        self.store = store
        self.dir = os.path.join(grite_dir(store), "cache")
        self.path = os.path.join(self.dir, DB)
        self.problems: list[Problem] = []
        self.disputes = ""                    # the disputes the last answer was replayed under
        self.frontier: dict[str, str] = {}   # the log tips the last answer was projected at
        self.generation = ""                  # the cache generation the last answer came from
        # True once the cache directory could not be written (a read-only .git, a full disk):
        # answers are then computed in memory and nothing is written.
        self.read_only = False
        self._conn = None
        self._stored = False   # the last state() answer is the file's, unchanged in memory

    def _path(self, name: str) -> str:
        return os.path.join(self.dir, name)

    # -- the file ----------------------------------------------------------------

    def _db(self, create: bool = False):
        """The open cache file, or None when there is none usable here (answers from memory).

        Only a writer holding the lock makes the file (create): readers open one that exists.
        """
        from git_brat.grite.cache import db as cachedb
        if self._conn is not None:
            return self._conn
        if not create and not os.path.exists(self.path):
            return None
        if not self.read_only:
            try:
                ensure_dir(self.dir)
                self._conn = cachedb.connect(self.path)
                return self._conn
            except cachedb.Unusable as exc:
                if exc.damaged:   # replaced, never trusted
                    cachedb.remove(self.path)
                    try:
                        self._conn = cachedb.connect(self.path)
                        return self._conn
                    except cachedb.Unusable:
                        pass
                self.read_only = True
            except OSError as exc:
                if exc.errno not in UNWRITABLE:
                    raise
                self.read_only = True
        if os.path.exists(self.path):
            try:
                self._conn = cachedb.connect(self.path, read_only=True)
            except cachedb.Unusable:
                return None
        return self._conn

    def _unusable(self) -> None:
        """The file failed mid-use (deleted, damaged, unwritable): serve from memory from now on."""
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:   # noqa: BLE001 - closing a broken handle must not fail the answer
                pass
        self._conn, self.read_only = None, True

    def _meta_of(self, conn, fresh: bool = False) -> Meta | None:
        """The file's meta row; fresh: end the open read (a new one starts with this query)."""
        import sqlite3
        from git_brat.grite.cache import db as cachedb
        try:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            if not fresh:
                conn.execute("BEGIN")   # one generation for every row this answer reads
            raw = cachedb.read_meta(conn)
        except sqlite3.Error:
            self._unusable()
            return None
        try:
            meta = msgspec.msgpack.decode(raw, type=Meta) if raw else None
        except (msgspec.DecodeError, msgspec.ValidationError):
            return None
        return meta if meta is not None and meta.version == CACHE_VERSION else None

    def _read_meta(self) -> Meta | None:
        """The frontier the file was projected at (None: no usable cache)."""
        conn = self._db()
        return self._meta_of(conn, fresh=True) if conn is not None else None

    def stored(self) -> tuple[Meta, State] | None:
        """What the file holds, at whatever frontier it was projected (None: no usable cache)."""
        from git_brat.grite.cache import db as cachedb
        conn = self._db()
        meta = self._meta_of(conn) if conn is not None else None
        if meta is None or self._conn is None:
            return None
        return meta, cachedb.open_state(conn, meta.max_lamport, meta.event_count)

    def _hint(self) -> Meta | None:
        """The copy of meta beside the file: cheap, and trusted only as far as stamps match."""
        try:
            with open(self._path("meta"), "rb") as f:
                meta = msgspec.msgpack.decode(f.read(), type=Meta)
            return meta if meta.version == CACHE_VERSION else None
        except (OSError, msgspec.DecodeError, msgspec.ValidationError):
            return None

    def _answered(self, meta: Meta) -> None:
        self.problems, self.frontier, self.generation = meta.problems, meta.frontier, meta.generation
        self.disputes = meta.disputes

    def seen_lamport(self) -> int:
        """Highest Lamport clock the cache has seen, without loading the state (cheap)."""
        meta = self._hint()
        return meta.max_lamport if meta else 0

    def cold_pending(self) -> ColdPending | None:
        """What of its snapshot this cache still lacks (cheap: the hint beside the file)."""
        meta = self._hint()
        return meta.cold if meta is not None else None

    # -- writing -------------------------------------------------------------------

    def _locked(self):
        """The writers' lock; a null context when the cache cannot be written (read-only)."""
        import contextlib
        if self.read_only:
            return contextlib.nullcontext()
        for _attempt in range(5):
            try:
                ensure_dir(self.dir)
                lock = _lock(self._path("lock"))
                lock.acquire()
            except FileNotFoundError:   # the directory was deleted meanwhile: make it again
                continue
            except OSError as exc:
                if exc.errno in UNWRITABLE:
                    self.read_only = True
                    return contextlib.nullcontext()
                raise
            return _Held(lock)
        self.read_only = True   # deleted over and over while we looked: serve from memory
        return contextlib.nullcontext()

    def _write(self, name: str, data: bytes) -> None:
        """Replace one file beside the cache; losing the directory or write access only costs speed."""
        if self.read_only:
            return
        for _attempt in range(2):
            try:
                atomic_write(self._path(name), data)
                return
            except FileNotFoundError:   # deleted while we wrote: atomic_write makes it again
                continue
            except OSError as exc:
                if exc.errno not in UNWRITABLE:
                    raise
                break
        self.read_only = True

    def _store(self, meta: Meta, state: State, touched: set[str] | None) -> None:
        """Write what changed (touched: those entities; None: everything) and meta, in one go."""
        import sqlite3
        from git_brat.grite.cache import db as cachedb
        self._stored = False
        raw = msgspec.msgpack.encode(meta)
        if self._conn is None and not self.read_only and touched is None and \
                self._create(state, raw):
            self._write("meta", raw)
            return
        conn = None if self.read_only else self._db(create=True)
        if conn is None or self.read_only:
            return
        try:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            if touched is not None and cachedb.is_stored(state):
                cachedb.write_changes(conn, state, touched, raw)
            else:
                cachedb.write_all(conn, state, raw)
        except sqlite3.Error:
            self._unusable()
            return
        self._stored = cachedb.is_stored(state)
        self._write("meta", raw)

    def _create(self, state: State, raw: bytes) -> bool:
        """Write the cache file whole where there is none (under the lock); whether it was."""
        from git_brat.grite.cache import db as cachedb
        return self._put(lambda: cachedb.create(self.path, state, raw))

    def _put(self, make) -> bool:
        """self._conn = make(), the new cache file it puts in place; whether that was done or
        cannot be (then answers come from memory): False if another file appeared meanwhile."""
        import sqlite3
        from git_brat.grite.cache import db as cachedb
        if os.path.exists(self.path):
            return False
        try:
            ensure_dir(self.dir)
            self._conn = make()
        except FileExistsError:   # made meanwhile by a version that lets readers make it
            return False
        except (sqlite3.Error, cachedb.Unusable, FileNotFoundError):
            # (the directory deleted while it was written: this answer comes from memory)
            self._unusable()
            return True
        except OSError as exc:
            if exc.errno not in UNWRITABLE:
                raise
            self.read_only = True
            return True
        return True

    def _store_meta(self, meta: Meta) -> None:
        """Record meta again (a snapshot was written after the rows were)."""
        import sqlite3
        if self._conn is None:
            return
        raw = msgspec.msgpack.encode(meta)
        try:
            self._conn.execute("INSERT OR REPLACE INTO meta VALUES ('meta', ?)", (raw,))
        except sqlite3.Error:
            self._unusable()
            return
        self._write("meta", raw)


UNWRITABLE = {errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EDQUOT}


class _Held:
    """Context manager releasing an already acquired lock."""

    def __init__(self, lock):
        self.lock = lock

    def __enter__(self):
        return self.lock

    def __exit__(self, *exc):
        try:
            self.lock.release()
        except OSError:
            pass
        return False


def _lock(path: str) -> FileLock:
    """Exclusive lock on the cache (polling, so a wedged holder gives an error, not a hang)."""
    return FileLock(path, timeout=60)
