"""A snapshot's state as an SQLite file: the cache's tables, copied out by a writer, checked on adoption.

Importing a snapshot is then putting a file in place and building two indexes: no entity is
encoded, no row is built in Python (at a million events that was 4 of a clone's 6 seconds).
The file is anyone's writing, so before it is used its schema must be exactly ours, its pages
must pass SQLite's check, and every row must agree with the entity its body decodes to.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
from typing import NamedTuple

import msgspec

from git_brat import package_path
from git_brat.grite.cache import db as cachedb
from git_brat.grite.model import issueview
from git_brat.grite.model.kinds import ACTOR, ISSUE, KINDS
from git_brat.grite.model.state import Entity, no_gc

# The file being adopted is ours alone until it is put in place, so SQLite may read it mapped:
# pages come straight from the OS's cache instead of being copied into SQLite's own (at a
# million events that copy was most of the index build's time).
MAPPED = "PRAGMA mmap_size=4294967296"
COLD = cachedb.COLD


class Counts(msgspec.Struct):
    """What an adopter needs from the file's meta row (a cache Meta, read only this far)."""
    version: int
    max_lamport: int
    event_count: int = 0


class Adopted(NamedTuple):
    version: int
    max_lamport: int
    event_count: int
    entities: int       # created entities among its rows
    cold_ids: int = 0   # rows its cold part holds (a hot file lists their ids)


def counts_row(version: int, max_lamport: int, event_count: int) -> bytes:
    return msgspec.msgpack.encode(Counts(version, max_lamport, event_count))


class _Generation(msgspec.Struct):
    generation: str


def export(src: str, path: str, generation: str | None, cold_path: str | None = None,
           before: int = 0) -> int | None:
    """Copy the cache file src's rows, as of `generation` (None: whatever it holds), into a new
    file at path; None if src no longer holds that generation (a writer moved it on), and
    nothing is left at path.

    With cold_path and before: rows settled and unchanged since before go to a second file
    there instead (the snapshot's cold part), and path lists their ids; returns how many (0:
    no file at cold_path). One read transaction holds the generation, so the copy is exactly
    the state the caller names, whatever writers do meanwhile."""
    targets = [("snap", path)] + ([("cold", cold_path)] if cold_path and before else [])
    for _db, p in targets:
        cachedb.remove(p)
    conn = sqlite3.connect(src, isolation_level=None, timeout=60)
    cold, done = 0, False
    try:
        for db, p in targets:
            conn.execute(f"ATTACH DATABASE ? AS {db}", (p,))
            conn.execute(cachedb.PAGE_SIZE.replace("PRAGMA ", f"PRAGMA {db}."))
            conn.execute(f"PRAGMA {db}.journal_mode=OFF")
            conn.execute(f"PRAGMA {db}.synchronous=OFF")
            cachedb.make_tables(conn, db)
        conn.execute("BEGIN")
        if generation is not None:
            try:
                held = msgspec.msgpack.decode(cachedb.read_meta(conn) or b"", type=_Generation)
            except (msgspec.DecodeError, msgspec.ValidationError):
                held = None
            if held is None or held.generation != generation:
                return None
        # rowid kept: entities come back in the order the state holds them.
        cols = cachedb.ENTITY_COLUMNS
        is_cold, args = cold_condition(before) if len(targets) > 1 else ("0", ())
        conn.execute(f"INSERT INTO snap.entity ({cols}) SELECT {cols} FROM main.entity "
                     f"WHERE NOT ({is_cold})", args)
        conn.execute("INSERT INTO snap.kv SELECT * FROM main.kv")
        conn.execute("INSERT INTO snap.meta SELECT * FROM main.meta")
        cold = 0
        if len(targets) > 1:
            conn.execute(f"INSERT INTO cold.entity ({cols}) SELECT {cols} FROM main.entity "
                         f"WHERE {is_cold}", args)
            conn.execute("INSERT INTO cold.meta SELECT * FROM main.meta")
            conn.execute(f"INSERT INTO snap.kv SELECT '{COLD}', id, x'' FROM cold.entity")
            cold = conn.execute("SELECT COUNT(*) FROM cold.entity").fetchone()[0]
        conn.execute("COMMIT")
        done = True
        return cold
    finally:
        conn.close()
        if not done:
            for _db, p in targets:
                cachedb.remove(p)
        elif not cold and cold_path:
            cachedb.remove(cold_path)


def cold_condition(before: int) -> tuple[str, tuple]:
    """SQL over the entity table: rows a snapshot moves to its cold part, each of a kind in
    one of the statuses the kinds table calls settled, unchanged since before (a kind the
    table does not name is never moved)."""
    parts, args = [], [before]
    for kind in KINDS.values():
        if kind.settled:
            parts.append(f"kind = ? AND status IN ({','.join('?' * len(kind.settled))})")
            args += [kind.name, *kind.settled]
    return f"updated < ? AND ({' OR '.join(parts)})", tuple(args)


def _reference_schema() -> set[tuple]:
    conn = sqlite3.connect(":memory:")
    cachedb.make_tables(conn)
    try:
        return set(conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master"))
    finally:
        conn.close()


def adopt(path: str, durable: bool = True, cold: bool = False) -> Adopted | None:
    """Check the file at path as an importer must, then build its indexes; None if it fails.
    durable: it is to become the cache file (made durable meanwhile), not a scratch copy.
    cold: it is a snapshot's cold part (rows only: no kv, no indexes, merged by add_cold)."""
    try:
        conn = sqlite3.connect(f"file:{path}?mode=rw", uri=True, isolation_level=None)
    except sqlite3.Error:
        return None
    try:
        counts = _checked_file(conn)
        if counts is None:
            return None
        if cold:
            if conn.execute("SELECT 1 FROM kv LIMIT 1").fetchone() is not None:
                return None
            entities = _check_split(path, conn)
            return None if entities is None else Adopted(
                counts.version, counts.max_lamport, counts.event_count, entities)
        cold_ids = _check_tables(conn)
        if cold_ids is None:
            return None
        # The rows are checked in two processes (Python per row is the cost, and there are two
        # cores) while threads build the indexes (SQLite's own work, beside WAL readers) and
        # make the file durable (it must be before it is put in place; then little is left).
        conn.execute("PRAGMA journal_mode=WAL")
        built: list[BaseException | None] = []
        helpers = [threading.Thread(target=_build_indexes, args=(path, built))]
        if durable:   # (a scratch copy need not reach the disk: 276 MB at 1M, seconds there)
            helpers.append(threading.Thread(target=_sync, args=(path,)))
        for t in helpers:
            t.start()
        try:
            entities = _check_split(path, conn)
        finally:
            for t in helpers:
                t.join()
        if entities is None or built != [None]:
            return None
        return Adopted(counts.version, counts.max_lamport, counts.event_count, entities, cold_ids)
    except (sqlite3.Error, msgspec.DecodeError, msgspec.ValidationError):
        return None
    finally:
        conn.close()


def _checked_file(conn: sqlite3.Connection) -> Counts | None:
    """The file's counts if its schema is exactly ours, its pages pass SQLite's check and it has
    one meta row; else None."""
    conn.execute("PRAGMA trusted_schema=OFF")
    conn.execute(MAPPED)
    # Nothing here waits for the disk: switching to WAL would otherwise flush the whole
    # file first (half a second at a million events); _sync and cachedb.place do that.
    conn.execute("PRAGMA synchronous=OFF")
    if set(conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master")) != \
            _reference_schema():
        return None   # (no triggers, views or indexes of anyone else's run here)
    if conn.execute("PRAGMA quick_check").fetchall() != [("ok",)]:
        return None
    metas = conn.execute("SELECT k, v FROM meta").fetchall()
    if len(metas) != 1 or metas[0][0] != "meta":
        return None
    return msgspec.msgpack.decode(metas[0][1], type=Counts)


def _build_indexes(path: str, built: list) -> None:
    try:
        conn = sqlite3.connect(path, isolation_level=None)
        try:
            conn.execute(MAPPED)
            conn.execute("PRAGMA synchronous=OFF")
            conn.execute("PRAGMA cache_size=-300000")
            conn.execute("BEGIN")
            for stmt in cachedb.INDEXES:
                conn.execute(stmt)
            conn.execute("COMMIT")
        finally:
            conn.close()
        built.append(None)
    except BaseException as exc:   # noqa: BLE001 - reported to the checking thread
        built.append(exc)


def _sync(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass   # (cachedb.place makes it durable in any case)


SPLIT_ROWS = 20000   # fewer rows than this: a second process costs more than it saves


def _check_split(path: str, conn: sqlite3.Connection) -> int | None:
    """_check_entities over every row: the upper half by a child process when there are many."""
    lo, hi, n = conn.execute("SELECT MIN(rowid), MAX(rowid), COUNT(*) FROM entity").fetchone()
    if n < SPLIT_ROWS:
        return _check_entities(conn)
    mid = (lo + hi) // 2 + 1
    env = dict(os.environ, PYTHONPATH=package_path())
    try:
        child = subprocess.Popen([sys.executable, "-m", "git_brat.grite.cache.snapdb", path, str(mid)],
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    except OSError:
        return _check_entities(conn)
    try:
        mine = _check_entities(conn, f"WHERE rowid < {mid}")
    finally:
        out, _ = child.communicate()
    if mine is None or child.returncode != 0 or not out.strip().isdigit():
        return None
    return mine + int(out)


def _check_entities(conn: sqlite3.Connection, where: str = "") -> int | None:
    """Every row's (of those `where` selects) indexed columns and view agree with its body;
    the number of created ones; None at the first that does not."""
    # (Each body is dozens of objects and none outlives its row: the collector took a quarter
    # of the check's time at a million events.)
    with no_gc():
        return _checked(conn, where)


def _checked(conn: sqlite3.Connection, where: str) -> int | None:
    decode = msgspec.msgpack.Decoder(Entity).decode
    names = None
    created = 0
    for eid, kind, status, grp, made, updated, body, shown in conn.execute(
            f"SELECT id, kind, status, grp, created, updated, body, view FROM entity {where}"):
        ent = decode(body)
        if ent.id != eid or cachedb.columns(ent) != (kind, status, grp, made, updated):
            return None
        issue = ent.created and ent.kind == ISSUE
        if (issueview.stored(ent) if issue else None) != shown:
            # A cache written before views held ids names the author (its rows are exported
            # as they are): consistent too, given the actors' names.
            if names is None:
                names = {a.id: a.get("name", a.id) for (b,) in conn.execute(
                    "SELECT body FROM entity WHERE kind = ?", (ACTOR,)) for a in [decode(b)]}
            if not issue or msgspec.json.encode(issueview.issue_view(ent, names)) != shown:
                return None
        created += ent.created
    return created


def _check_tables(conn: sqlite3.Connection) -> int | None:
    """How many ids the cold list names if every other table's values decode as their type
    and no listed id is also a row here; else None."""
    decoders = {name: msgspec.msgpack.Decoder(typ).decode for name, typ in cachedb.SPACES.items()}
    for space, _k, v in conn.execute("SELECT space, k, v FROM kv WHERE space != ?", (COLD,)):
        decode = decoders.get(space)
        if decode is None:
            return None
        decode(v)
    # (The list is 71k ids at a million events: checked by SQLite, not row by row here.)
    listed, odd = conn.execute("SELECT COUNT(*), COUNT(*) FILTER (WHERE v IS NOT x'') FROM kv "
                               "WHERE space = ?", (COLD,)).fetchone()
    if odd or (listed and conn.execute("SELECT 1 FROM kv JOIN entity ON kv.k = entity.id "
                                       "WHERE kv.space = ? LIMIT 1", (COLD,)).fetchone()):
        return None
    return listed


class ColdMismatch(Exception):
    """A snapshot's cold part is not the rows its hot part lists."""


def add_cold(conn: sqlite3.Connection, path: str, meta: bytes | None) -> None:
    """One transaction: the file conn is open on (a hot part, adopted and extended since) takes
    the rows of the checked cold part at path, which must be exactly the ids it lists as
    cold, and forgets the list; meta, if given, replaces its meta row. ColdMismatch if not."""
    if conn.in_transaction:
        conn.execute("ROLLBACK")
    conn.execute("ATTACH DATABASE ? AS cold", (path,))
    try:
        with cachedb.transaction(conn):
            listed = conn.execute(f"SELECT COUNT(*) FROM main.kv WHERE space = '{COLD}'").fetchone()[0]
            rows, matched = conn.execute(
                f"SELECT COUNT(*), COUNT(kv.k) FROM cold.entity LEFT JOIN main.kv "
                f"ON kv.space = '{COLD}' AND kv.k = cold.entity.id").fetchone()
            clash = conn.execute("SELECT 1 FROM cold.entity JOIN main.entity USING (id) "
                                 "LIMIT 1").fetchone()
            if rows != listed or matched != rows or clash is not None:
                raise ColdMismatch(f"the cold part holds {rows} rows ({matched} of them listed), "
                                   f"the hot part lists {listed}")
            cols = cachedb.ENTITY_COLUMNS.replace("rowid, ", "")
            conn.execute(f"INSERT INTO main.entity ({cols}) SELECT {cols} FROM cold.entity "
                         f"ORDER BY rowid")
            conn.execute(f"DELETE FROM main.kv WHERE space = '{COLD}'")
            if meta is not None:
                conn.execute("INSERT OR REPLACE INTO main.meta VALUES ('meta', ?)", (meta,))
    finally:
        conn.execute("DETACH DATABASE cold")


def replace_rows(conn: sqlite3.Connection, path: str, meta: bytes) -> None:
    """One transaction: the cache file conn is open on takes every row of the adopted file at
    path, and meta (a cache that exists is rewritten in place: others may hold it open)."""
    if conn.in_transaction:
        conn.execute("ROLLBACK")
    conn.execute("ATTACH DATABASE ? AS snap", (path,))

    def fill():
        conn.execute("PRAGMA cache_size=-300000")
        cachedb.drop_indexes(conn)
        cols = cachedb.ENTITY_COLUMNS
        conn.execute(f"INSERT INTO main.entity ({cols}) SELECT {cols} FROM snap.entity")
        for stmt in cachedb.INDEXES:
            conn.execute(stmt)
        conn.execute("INSERT INTO main.kv SELECT * FROM snap.kv")
        conn.execute("INSERT OR REPLACE INTO main.meta VALUES ('meta', ?)", (meta,))
    try:
        cachedb.rewrite(conn, fill)
    finally:
        conn.execute("DETACH DATABASE snap")
    cachedb.shrink_wal(conn)


def set_meta(path: str, meta: bytes) -> None:
    """The adopted file's meta row, as the cache it becomes names its frontier."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=OFF")
        conn.execute("INSERT OR REPLACE INTO meta VALUES ('meta', ?)", (meta,))
    finally:
        conn.close()


def open_unlinked(path: str):
    """A read-only connection to the file at path, which is then deleted (gone when closed)."""
    conn = sqlite3.connect(f"file:{path}?immutable=1", uri=True, isolation_level=None,
                           check_same_thread=False)
    try:
        conn.execute("SELECT 1 FROM meta LIMIT 1").fetchall()
    finally:
        cachedb.remove(path)
    return conn


def _main(argv: list[str]) -> int:
    """`python -m git_brat.grite.cache.snapdb PATH ROWID`: check the rows from ROWID on (_check_split)."""
    try:
        conn = sqlite3.connect(f"file:{argv[0]}?mode=ro", uri=True)
        conn.execute(MAPPED)
        found = _check_entities(conn, f"WHERE rowid >= {int(argv[1])}")
    except (sqlite3.Error, msgspec.DecodeError, msgspec.ValidationError, ValueError):
        return 1
    if found is None:
        return 1
    print(found)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
