"""The cache's SQLite file: a row per entity, updated in place for just what a batch touched.

A write then costs what it touches, not what the repository holds. The file is WAL mode, so
readers never wait for the writer and each reader sees one committed generation throughout.
Every table of State is a `Rows` mapping here: loaded on first use, written back when changed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
import threading
from typing import Any, Iterator

import msgspec

from git_brat.grite.model import issueview
from git_brat.grite.model.kinds import ACTOR, ISSUE
from git_brat.grite.model.state import Entity, Held, Rejection, State, group_of, status_of

TABLES = ("CREATE TABLE IF NOT EXISTS {db}.meta (k TEXT PRIMARY KEY, v BLOB) WITHOUT ROWID",
          "CREATE TABLE IF NOT EXISTS {db}.entity (id TEXT PRIMARY KEY, kind TEXT, status TEXT, "
          "grp TEXT, created INTEGER NOT NULL, updated INTEGER NOT NULL, body BLOB NOT NULL, "
          "view BLOB)",
          "CREATE TABLE IF NOT EXISTS {db}.kv (space TEXT, k TEXT, v BLOB, PRIMARY KEY (space, k)) "
          "WITHOUT ROWID")
ENTITY_COLUMNS = "rowid, id, kind, status, grp, created, updated, body, view"
# A row is ~2 KB at a year of history: with 4 KB pages only one fits in each, and the file is
# half empty (340 MB for 220 MB of rows at 1M events; 235 MB with 16 KB pages, written 1.5x
# faster).
PAGE_SIZE = "PRAGMA page_size=16384"
INDEXES = ("CREATE INDEX IF NOT EXISTS entity_kind ON entity (kind, status, updated)",
           "CREATE INDEX IF NOT EXISTS entity_grp ON entity (grp) WHERE grp IS NOT NULL")

# The other tables of State, by name: (kv space, value type). Keys are strings throughout.
SPACES = {"dep_sources": list[str], "fences": int, "lease_ends": dict[int, int],
          "fenced_at": dict[int, int], "rejected": Rejection, "unknown": None,
          "lease_held": Held, "lease_basis": list[str]}

# The kv space listing the ids a snapshot's cold part holds (empty values): in its hot file,
# and in a cache adopted from one until that part is merged (see snapdb.add_cold).
COLD = "cold"

_MISSING = object()
_encode = msgspec.msgpack.encode
_entity = msgspec.msgpack.Decoder(Entity)


class Unusable(Exception):
    """The file cannot be opened or written here (read-only, deleted) or is damaged."""

    def __init__(self, message: str, damaged: bool = False):
        super().__init__(message)
        self.damaged = damaged


def connect(path: str, read_only: bool = False) -> sqlite3.Connection:
    """Open (creating unless read_only) the cache file; raise Unusable if that cannot be done."""
    try:
        if read_only:   # a read-only .git: no -shm can be made, so no locking either
            conn = sqlite3.connect(f"file:{path}?immutable=1", uri=True, isolation_level=None,
                                   check_same_thread=False)
        else:
            conn = sqlite3.connect(path, isolation_level=None, timeout=60, check_same_thread=False)
            conn.execute(PAGE_SIZE)   # (only a file with no tables yet takes it)
            if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")   # disposable: git holds the truth
            # A rebuild goes through the WAL whole; once checkpointed, the next write shrinks it.
            conn.execute("PRAGMA journal_size_limit=8388608")
            if conn.execute("SELECT 1 FROM sqlite_master WHERE name='kv'").fetchone() is None:
                make_tables(conn)
                for stmt in INDEXES:
                    conn.execute(stmt)
        conn.execute("SELECT 1 FROM meta LIMIT 1").fetchall()
        return conn
    except sqlite3.OperationalError as exc:   # cannot open, read-only, deleted meanwhile
        raise Unusable(str(exc)) from exc
    except sqlite3.DatabaseError as exc:      # not a database: garbage where the file was
        raise Unusable(str(exc), damaged=True) from exc


def columns(ent: Entity) -> tuple:
    """(kind, status, group, created, updated) as indexed in the entity table."""
    return (ent.kind if ent.created else None, status_of(ent), group_of(ent), ent.created_at,
            ent.updated_at)


class Rows:
    """One kv space as a dict: values fetched on first use and kept; changed keys remembered."""

    def __init__(self, conn: sqlite3.Connection, space: str, typ):
        self.conn, self.space = conn, space
        self._decode = msgspec.msgpack.Decoder(typ).decode
        self.loaded: dict[str, Any] = {}
        self.dirty: set[str] = set()

    def _fetch(self, key: str):
        row = self.conn.execute("SELECT v FROM kv WHERE space=? AND k=?", (self.space, key)).fetchone()
        return _MISSING if row is None else self._decode(row[0])

    def _fetch_many(self, keys: list[str]):
        marks = ",".join("?" * len(keys))
        return self.conn.execute(f"SELECT k, v FROM kv WHERE space=? AND k IN ({marks})",
                                 (self.space, *keys))

    def prefetch(self, keys) -> None:
        """Load many keys in a few queries (instead of one query each)."""
        want = [k for k in dict.fromkeys(keys) if k not in self.loaded]
        for i in range(0, len(want), 500):
            chunk = want[i:i + 500]
            found = dict(self._fetch_many(chunk))
            for k in chunk:
                self.loaded[k] = self._from_row(k, found[k]) if k in found else _MISSING

    def _from_row(self, key: str, raw: bytes):
        return self._decode(raw)

    def get(self, key: str, default=None):
        value = self.loaded.get(key, _MISSING)
        if value is _MISSING and key not in self.loaded:
            value = self.loaded[key] = self._fetch(key)
        return default if value is _MISSING else value

    def __getitem__(self, key: str):
        value = self.get(key, _MISSING)
        if value is _MISSING:
            raise KeyError(key)
        return value

    def __contains__(self, key) -> bool:
        return self.get(key, _MISSING) is not _MISSING

    def __setitem__(self, key: str, value) -> None:
        self.loaded[key] = value
        self.dirty.add(key)

    def pop(self, key: str, default=None):
        """Remove a key (replay takes back a rejection a late event made legal)."""
        value = self.get(key, _MISSING)
        if value is _MISSING:
            return default
        self.loaded[key] = _MISSING
        self.dirty.add(key)
        return value

    def setdefault(self, key: str, default):
        value = self.get(key, _MISSING)
        if value is _MISSING:
            value = self.loaded[key] = default
        self.dirty.add(key)   # the caller changes it in place
        return value

    def _stored(self) -> Iterator[tuple[str, bytes]]:
        return self.conn.execute("SELECT k, v FROM kv WHERE space=?", (self.space,))

    def _stored_in_order(self) -> Iterator[tuple[str, bytes]]:
        return self.conn.execute("SELECT k, v FROM kv WHERE space=? ORDER BY k", (self.space,))

    def stream(self) -> Iterator[tuple[str, Any]]:
        """(key, value) in key order, decoded one at a time and not kept: a whole state at a
        million events is gigabytes as Python objects. What memory holds (changed or read)
        is merged in by key (keys are ASCII: SQLite's order is Python's)."""
        held = sorted(((k, v) for k, v in self.loaded.items() if v is not _MISSING or
                       k in self.dirty), key=lambda kv: kv[0])   # (dirty and missing: removed)
        i = 0
        for k, raw in self._stored_in_order():
            while i < len(held) and held[i][0] < k:
                if held[i][1] is not _MISSING:
                    yield held[i]
                i += 1
            if i < len(held) and held[i][0] == k:
                if held[i][1] is not _MISSING:
                    yield held[i]
                i += 1
            else:
                yield k, self._decode(raw)
        yield from (kv for kv in held[i:] if kv[1] is not _MISSING)

    def items(self) -> list[tuple[str, Any]]:
        """Every stored key, with what memory changed on top (a full scan: not for hot paths)."""
        out = {}
        for k, v in self._stored():
            cur = self.loaded.get(k, _MISSING)
            if cur is not _MISSING:
                out[k] = cur
            elif k not in self.dirty:   # (dirty and missing: removed)
                out[k] = self._decode(v)
        out.update((k, v) for k, v in self.loaded.items() if v is not _MISSING)
        return list(out.items())

    def keys(self) -> list[str]:
        return [k for k, _v in self.items()]

    def values(self) -> list[Any]:
        return [v for _k, v in self.items()]

    def __iter__(self):
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self.items())

    def flush_rows(self) -> list[tuple[str, str, bytes | None]]:
        """The changed rows; a removed key's value is None."""
        rows = [(self.space, k, None if self.loaded[k] is _MISSING else _encode(self.loaded[k]))
                for k in self.dirty]
        self.dirty = set()
        return rows


class Decoded:
    """Entities decoded from the file, kept by a long-lived reader (the board) from one state
    to the next: a row whose bytes are unchanged gives back the entity decoded from them before,
    so after a write only the rows it touched are decoded again (at 10k tasks decoding every
    row was a third of a board's render). Keyed by the row's bytes, never by a log tip, so it
    cannot go stale: a changed row is a different key.

    Only states read whole from committed rows use it (Cache.state's answers to such a reader,
    never one replay writes into), and their entities are read, not changed. What the last
    two generations (turn(): one per log tip) used is kept, so it holds what is read now."""

    def __init__(self):
        self.lock = threading.Lock()
        self.now: dict[str, tuple[bytes, Entity]] = {}
        self.before: dict[str, tuple[bytes, Entity]] = {}
        self.decodes = 0   # rows decoded (not given back): what a test of it counts

    def entity(self, eid: str, raw: bytes) -> Entity:
        with self.lock:
            return self._take(eid, raw)

    def entities(self, loaded: dict, rows) -> list[Entity]:
        """The entities of (id, bytes) rows, each one already loaded kept as it is."""
        out = []
        with self.lock:
            for eid, raw in rows:
                ent = loaded.get(eid, _MISSING)
                if ent is _MISSING:
                    ent = loaded[eid] = self._take(eid, raw)
                out.append(ent)
        return out

    def _take(self, eid: str, raw: bytes) -> Entity:
        """(Under the lock.) The entity kept for these bytes, else decoded from them."""
        kept = self.now.get(eid) or self.before.get(eid)
        if kept is None or kept[0] != raw:
            kept = (bytes(raw), _entity.decode(raw))
            self.decodes += 1
        self.now[eid] = kept
        return kept[1]

    def turn(self) -> None:
        """A new generation (the log moved): what the one before last used and this one has
        not is let go."""
        with self.lock:
            self.before, self.now = self.now, {}


class EntityRows(Rows):
    """The entity table as a dict id -> Entity, with kind/settled/group queries."""

    def __init__(self, conn: sqlite3.Connection, decoded: Decoded | None = None):
        super().__init__(conn, "", Entity)
        self._decode = _entity.decode
        self.decoded = decoded

    def _from_row(self, key: str, raw: bytes) -> Entity:
        return self._decode(raw) if self.decoded is None else self.decoded.entity(key, raw)

    def _fetch(self, key: str):
        row = self.conn.execute("SELECT body FROM entity WHERE id=?", (key,)).fetchone()
        return _MISSING if row is None else self._from_row(key, row[0])

    def _fetch_many(self, keys: list[str]):
        marks = ",".join("?" * len(keys))
        return self.conn.execute(f"SELECT id, body FROM entity WHERE id IN ({marks})", keys)

    def _stored(self):
        return self.conn.execute("SELECT id, body FROM entity")

    def _stored_in_order(self):
        return self.conn.execute("SELECT id, body FROM entity ORDER BY id")

    def __len__(self) -> int:
        if not self.dirty:
            return self.conn.execute("SELECT COUNT(*) FROM entity").fetchone()[0]
        return len(self.items())

    def _decoded(self, rows) -> list[Entity]:
        if self.decoded is not None:
            return self.decoded.entities(self.loaded, rows)
        out = []
        for eid, body in rows:
            ent = self.loaded.get(eid, _MISSING)
            if ent is _MISSING:
                ent = self.loaded[eid] = self._decode(body)
            out.append(ent)
        return out

    def query(self, parts: list[tuple[str, tuple]], kind: str | None) -> list[Entity]:
        """Created entities matching any of the SQL conditions (each one an index search: an OR
        or a NOT in one condition makes SQLite scan the index); ones changed in memory are
        judged by kind only."""
        sql = " UNION ALL ".join(f"SELECT rowid, id, body FROM entity WHERE {w}" for w, _ in parts)
        found = self._decoded((eid, body) for _r, eid, body in self.conn.execute(
            sql + " ORDER BY 1", sum((a for _, a in parts), ())))
        ids = {e.id for e in found}
        extra = [e for k in self.dirty if k not in ids
                 for e in [self.loaded[k]] if e.created and (kind is None or e.kind == kind)]
        return found + extra

    def flush_rows(self) -> list[tuple]:
        rows = [(k, *columns(self.loaded[k]), _encode(self.loaded[k])) for k in self.dirty]
        self.dirty = set()
        return rows


class KindRows:
    """id -> kind of every created entity, read from the entity table (a view, never written)."""

    def __init__(self, entities: EntityRows):
        self.entities = entities

    def get(self, key: str, default=None):
        ent = self.entities.get(key)
        return ent.kind if ent is not None and ent.created else default

    def __contains__(self, key) -> bool:
        return self.get(key) is not None

    def __getitem__(self, key):
        kind = self.get(key)
        if kind is None:
            raise KeyError(key)
        return kind

    def __setitem__(self, key: str, value: str) -> None:
        pass   # the entity row carries its kind; the entity itself is written back

    def items(self) -> list[tuple[str, str]]:
        stored = dict(self.entities.conn.execute(
            "SELECT id, kind FROM entity WHERE kind IS NOT NULL ORDER BY rowid"))
        for k in self.entities.dirty:
            ent = self.entities.loaded[k]
            if ent.created:
                stored[k] = ent.kind
        return list(stored.items())

    def __iter__(self):
        return iter([k for k, _v in self.items()])

    def __len__(self) -> int:
        return len(self.items())

    def with_prefix(self, prefix: str) -> list[tuple[str, str]]:
        hi = prefix + "g"   # ids are lower-case hex: "g" sorts after every continuation
        return [(k, v) for k, v in self.entities.conn.execute(
            "SELECT id, kind FROM entity WHERE id >= ? AND id < ?", (prefix, hi)) if v is not None]


def open_state(conn: sqlite3.Connection, max_lamport: int, event_count: int,
               decoded: Decoded | None = None) -> State:
    """A State whose tables are read from (and written back to) the file (decoded: entities
    kept from an earlier state, for a state that is only read)."""
    entities = EntityRows(conn, decoded)
    tables = {name: Rows(conn, name, typ) for name, typ in SPACES.items()}
    return State(entities=entities, kinds=KindRows(entities), max_lamport=max_lamport,
                 event_count=event_count, **tables)


def is_stored(state: State) -> bool:
    return isinstance(state.entities, EntityRows)


def write_changes(conn: sqlite3.Connection, state: State, touched: set[str], meta: bytes) -> None:
    """One transaction: the rows a batch changed, their list views, and the new meta."""
    ents: EntityRows = state.entities   # type: ignore[assignment]
    ents.dirty |= {t for t in touched if ents.get(t) is not None}
    changed = [ents.loaded[k] for k in ents.dirty]
    rows = ents.flush_rows()
    kv = [r for name in SPACES for r in getattr(state, name).flush_rows()]
    with transaction(conn):
        if _renamed(conn, changed):   # views written before they held ids hold names
            changed = state.of_kind(ISSUE)
        _upsert(conn, rows, kv)
        conn.executemany("UPDATE entity SET view=? WHERE id=?", [
            (issueview.stored(e), e.id) for e in changed if e.created and e.kind == ISSUE])
        conn.execute("INSERT OR REPLACE INTO meta VALUES ('meta', ?)", (meta,))


@contextlib.contextmanager
def transaction(conn: sqlite3.Connection):
    """A write transaction, committed if the block ends normally, else rolled back."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _renamed(conn: sqlite3.Connection, changed: list[Entity]) -> bool:
    """Whether an actor the file already held a name for is named otherwise now (read before
    the new rows are written). An actor's first record renames nobody: views hold its id."""
    for ent in changed:
        if ent.kind != ACTOR:
            continue
        row = conn.execute("SELECT body FROM entity WHERE id=?", (ent.id,)).fetchone()
        old = _entity.decode(row[0]).get("name") if row is not None else None
        if old is not None and old != ent.get("name"):
            return True
    return False


def write_all(conn: sqlite3.Connection, state: State, meta: bytes) -> None:
    """One transaction: every row of a state held in memory (after a full replay)."""
    rewrite(conn, lambda: _insert_all(conn, state, meta))
    shrink_wal(conn)


def rewrite(conn: sqlite3.Connection, fill) -> None:
    """One transaction: the entity and kv tables emptied, then fill() writes every row."""
    try:
        with transaction(conn):
            conn.execute("DELETE FROM entity")
            conn.execute("DELETE FROM kv")
            fill()
    finally:
        conn.execute("PRAGMA cache_size=-2000")


def create(path: str, state: State, meta: bytes) -> sqlite3.Connection:
    """A new cache file holding state, put where none is; FileExistsError if one appeared."""
    tmp = path + ".new"
    write_file(tmp, state, meta)
    return place(tmp, path)


def write_file(path: str, state: State, meta: bytes,
               copied: tuple[dict, set[str]] | None = None, indexes: bool = True) -> None:
    """A new file at path holding state (replacing whatever was there), with no journal.

    Nobody can have open a file that does not exist yet, so it is written without a journal
    (going through the WAL writes every page twice: 3.5 s instead of 1.4 s at 1M events).
    copied: (bodies, changed) as a snapshot held them: bodies not changed are copied as they are.
    indexes: False for a snapshot's file (whoever adopts it builds them from its rows).
    """
    remove(path)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute(PAGE_SIZE)
        conn.execute("PRAGMA journal_mode=OFF")
        conn.execute("PRAGMA synchronous=OFF")
        make_tables(conn)
        conn.execute("BEGIN")
        _insert_all(conn, state, meta, copied, indexes)
        conn.execute("COMMIT")
    finally:
        conn.close()


def place(tmp: str, path: str) -> sqlite3.Connection:
    """Make the finished file tmp the cache file at path, if none is there (FileExistsError).

    It is made durable, switched to WAL (how every later opener finds it) and linked into
    place only if the place is still free, so nobody ever holds a file that then changes under
    them."""
    conn = sqlite3.connect(tmp, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
    finally:
        conn.close()
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    for suffix in ("-wal", "-shm"):   # left by a file deleted under them: never this one's
        try:
            os.unlink(path + suffix)
        except FileNotFoundError:
            pass
    try:
        _put_in_place(tmp, path)
    finally:
        remove(tmp)   # (FileNotFoundError-safe: the directory may have gone with it)
    return connect(path)


def _put_in_place(tmp: str, path: str) -> None:
    """Link tmp to path unless path exists (FileExistsError); rename where links are not had."""
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV,
                             errno.EMLINK):
            raise
        if os.path.exists(path):   # (a narrow race: only under our lock does anyone write)
            raise FileExistsError(path) from exc
        os.replace(tmp, path)


def make_tables(conn: sqlite3.Connection, db: str = "main") -> None:
    for stmt in TABLES:
        conn.execute(stmt.format(db=db))


def _insert_all(conn: sqlite3.Connection, state: State, meta: bytes,
                copied: tuple[dict, set[str]] | None = None, indexes: bool = True) -> None:
    """Every row of state, its indexes, and meta, inside the caller's transaction."""
    bodies, changed = copied if copied is not None else ({}, set())

    def body(e: Entity):
        held = bodies.get(e.id)
        return memoryview(held) if held is not None and e.id not in changed else _encode(e)
    # Each row written once, its view with it (an UPDATE after the INSERT wrote it twice).
    rows = ((e.id, *columns(e), body(e), issueview.stored(e) if e.created and e.kind == ISSUE else None)
            for e in state.entities.values())
    kv = [(name, k, _encode(v)) for name in SPACES for k, v in getattr(state, name).items()]
    # A few hundred MB in one go: the indexes built once at the end, not kept row by row,
    # and pages kept in memory until the commit rather than spilled and read back.
    conn.execute("PRAGMA cache_size=-300000")
    drop_indexes(conn)
    conn.executemany("INSERT INTO entity (id, kind, status, grp, created, updated, body, view) "
                     "VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
    if indexes:
        for stmt in INDEXES:
            conn.execute(stmt)
    conn.executemany("INSERT OR REPLACE INTO kv VALUES (?, ?, ?)", kv)
    conn.execute("INSERT OR REPLACE INTO meta VALUES ('meta', ?)", (meta,))


def drop_indexes(conn: sqlite3.Connection) -> None:
    conn.execute("DROP INDEX IF EXISTS entity_kind")
    conn.execute("DROP INDEX IF EXISTS entity_grp")


def shrink_wal(conn: sqlite3.Connection) -> None:
    """After a bulk write (the whole state went through the WAL, twice the file's size): copy it
    into the file and truncate it, unless a reader is in the way for long (a later writer will)."""
    try:
        conn.execute("PRAGMA busy_timeout=100")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    except sqlite3.OperationalError:
        pass
    finally:
        conn.execute("PRAGMA busy_timeout=60000")


def _upsert(conn, rows, kv) -> None:
    conn.executemany("INSERT OR REPLACE INTO entity (id, kind, status, grp, created, updated, body) "
                     "VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    conn.executemany("INSERT OR REPLACE INTO kv VALUES (?, ?, ?)", [r for r in kv if r[2] is not None])
    conn.executemany("DELETE FROM kv WHERE space=? AND k=?", [r[:2] for r in kv if r[2] is None])


def read_meta(conn: sqlite3.Connection) -> bytes | None:
    row = conn.execute("SELECT v FROM meta WHERE k='meta'").fetchone()
    return row[0] if row else None


def listed_cold(conn: sqlite3.Connection | None, ids) -> bool:
    """Whether any of these entity ids is one the file lists as still to come with its
    snapshot's cold part (COLD)."""
    ids = list(ids)
    if conn is None or not ids:
        return False
    for i in range(0, len(ids), 500):
        chunk = ids[i:i + 500]
        if conn.execute(f"SELECT 1 FROM kv WHERE space = '{COLD}' AND k IN "
                        f"({','.join('?' * len(chunk))}) LIMIT 1", chunk).fetchone():
            return True
    return False


def issue_views(conn: sqlite3.Connection, where: str = "", args: tuple = ()) -> list[bytes]:
    """Pre-encoded issue views, oldest first."""
    return [v for (v,) in conn.execute(
        f"SELECT view FROM entity WHERE kind=? {where} ORDER BY created, id", (ISSUE, *args))]


def remove(path: str) -> None:
    """Delete the file and its WAL companions (a damaged cache is replaced, never trusted)."""
    for suffix in ("", "-wal", "-shm"):
        try:
            os.unlink(path + suffix)
        except FileNotFoundError:
            pass
