"""A snapshot's state as an SQLite file: the cache's tables, copied out by its writer and checked
by whoever adopts it.

Importing a snapshot is then putting a file in place and building two indexes: no entity is
encoded, no row is built in Python (at a million events that was 4 of a clone's 6 seconds).
The file is anyone's writing, so before it is used its schema must be exactly ours, its pages
must pass SQLite's check, and every row must agree with the entity its body decodes to.
"""

from __future__ import annotations

import os
import sqlite3
from typing import NamedTuple

import msgspec

from git_brat.grite import cachedb, issueview
from git_brat.grite.state import Entity


class Counts(msgspec.Struct):
    """What an adopter needs from the file's meta row (a cache Meta, read only this far)."""
    version: int
    max_lamport: int
    event_count: int = 0


class Adopted(NamedTuple):
    version: int
    max_lamport: int
    event_count: int
    entities: int


def counts_row(version: int, max_lamport: int, event_count: int) -> bytes:
    return msgspec.msgpack.encode(Counts(version, max_lamport, event_count))


class _Generation(msgspec.Struct):
    generation: str


def export(src: str, path: str, generation: str) -> bool:
    """Copy the cache file src's rows, as of `generation`, into a new file at path; False if
    src no longer holds that generation (a writer moved it on), and nothing is left at path.

    One read transaction holds the generation, so the copy is exactly the state the caller
    names, whatever writers do meanwhile."""
    cachedb.remove(path)
    conn = sqlite3.connect(src, isolation_level=None, timeout=60)
    try:
        conn.execute("ATTACH DATABASE ? AS snap", (path,))
        conn.execute(cachedb.PAGE_SIZE.replace("PRAGMA ", "PRAGMA snap."))
        conn.execute("PRAGMA snap.journal_mode=OFF")
        conn.execute("PRAGMA snap.synchronous=OFF")
        cachedb._make_tables(conn, "snap")
        conn.execute("BEGIN")
        raw = cachedb.read_meta(conn)
        try:
            held = msgspec.msgpack.decode(raw or b"", type=_Generation).generation
        except (msgspec.DecodeError, msgspec.ValidationError):
            held = None
        if held != generation:
            conn.execute("ROLLBACK")
            conn.close()
            cachedb.remove(path)
            return False
        # rowid kept: entities come back in the order the state holds them.
        cols = cachedb.ENTITY_COLUMNS
        conn.execute(f"INSERT INTO snap.entity ({cols}) SELECT {cols} FROM main.entity")
        conn.execute("INSERT INTO snap.kv SELECT * FROM main.kv")
        conn.execute("INSERT INTO snap.meta SELECT * FROM main.meta")
        conn.execute("COMMIT")
        return True
    except BaseException:
        conn.close()
        cachedb.remove(path)
        raise
    finally:
        conn.close()


def _reference_schema() -> set[tuple]:
    conn = sqlite3.connect(":memory:")
    cachedb._make_tables(conn)
    try:
        return set(conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master"))
    finally:
        conn.close()


def adopt(path: str) -> Adopted | None:
    """Check the file at path as an importer must, then build its indexes; None if it fails."""
    try:
        conn = sqlite3.connect(f"file:{path}?mode=rw", uri=True, isolation_level=None)
    except sqlite3.Error:
        return None
    try:
        conn.execute("PRAGMA trusted_schema=OFF")
        if set(conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master")) != \
                _reference_schema():
            return None   # (no triggers, views or indexes of anyone else's run here)
        if conn.execute("PRAGMA quick_check").fetchall() != [("ok",)]:
            return None
        metas = conn.execute("SELECT k, v FROM meta").fetchall()
        if len(metas) != 1 or metas[0][0] != "meta":
            return None
        counts = msgspec.msgpack.decode(metas[0][1], type=Counts)
        entities = _check_entities(conn)
        if entities is None or not _check_tables(conn):
            return None
        conn.execute("PRAGMA journal_mode=OFF")
        conn.execute("PRAGMA cache_size=-300000")
        conn.execute("BEGIN")
        for stmt in cachedb.INDEXES:
            conn.execute(stmt)
        conn.execute("COMMIT")
        return Adopted(counts.version, counts.max_lamport, counts.event_count, entities)
    except (sqlite3.Error, msgspec.DecodeError, msgspec.ValidationError):
        return None
    finally:
        conn.close()


def _check_entities(conn: sqlite3.Connection) -> int | None:
    """Every row's indexed columns and view agree with its body; the number of created ones."""
    decode = msgspec.msgpack.Decoder(Entity).decode
    names = None
    created = 0
    for eid, kind, status, grp, made, updated, body, shown in conn.execute(
            "SELECT id, kind, status, grp, created, updated, body, view FROM entity"):
        ent = decode(body)
        if ent.id != eid or cachedb.columns(ent) != (kind, status, grp, made, updated):
            return None
        issue = ent.created and ent.kind == "issue"
        if (issueview.stored(ent) if issue else None) != shown:
            # A cache written before views held ids names the author (its rows are exported
            # as they are): consistent too, given the actors' names.
            if names is None:
                names = {a.id: a.get("name", a.id) for (b,) in conn.execute(
                    "SELECT body FROM entity WHERE kind = 'actor'") for a in [decode(b)]}
            if not issue or msgspec.json.encode(issueview.issue_view(ent, names)) != shown:
                return None
        created += ent.created
    return created


def _check_tables(conn: sqlite3.Connection) -> bool:
    """Every other table's values decode as their type."""
    decoders = {name: msgspec.msgpack.Decoder(typ).decode for name, typ in cachedb.SPACES.items()}
    for space, _k, v in conn.execute("SELECT space, k, v FROM kv"):
        decode = decoders.get(space)
        if decode is None:
            return False
        decode(v)
    return True


def replace_rows(conn: sqlite3.Connection, path: str, meta: bytes) -> None:
    """One transaction: the cache file conn is open on takes every row of the adopted file at
    path, and meta (a cache that exists is rewritten in place: others may hold it open)."""
    if conn.in_transaction:
        conn.execute("ROLLBACK")
    conn.execute("ATTACH DATABASE ? AS snap", (path,))
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("DELETE FROM entity")
            conn.execute("DELETE FROM kv")
            conn.execute("PRAGMA cache_size=-300000")
            cachedb.drop_indexes(conn)
            cols = cachedb.ENTITY_COLUMNS
            conn.execute(f"INSERT INTO main.entity ({cols}) SELECT {cols} FROM snap.entity")
            for stmt in cachedb.INDEXES:
                conn.execute(stmt)
            conn.execute("INSERT INTO main.kv SELECT * FROM snap.kv")
            conn.execute("INSERT OR REPLACE INTO main.meta VALUES ('meta', ?)", (meta,))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        finally:
            conn.execute("PRAGMA cache_size=-2000")
    finally:
        conn.execute("DETACH DATABASE snap")
    cachedb._shrink_wal(conn)


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
