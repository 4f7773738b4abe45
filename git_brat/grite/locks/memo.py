"""What lease records said, kept by sha: a year of released leases is not read again by status."""

from __future__ import annotations

import os
import sqlite3

import msgspec

SCHEMA = """
CREATE TABLE IF NOT EXISTS seen (sha BLOB PRIMARY KEY, token INTEGER, written_at INTEGER,
                                 released INTEGER) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS packed (k TEXT PRIMARY KEY, v BLOB) WITHOUT ROWID;
"""


class Seen(msgspec.Struct, array_like=True):
    """A record's order among its ref's records (token, then time written) and its state."""
    token: int
    written_at: int
    released: bool


class PackedLive(msgspec.Struct):
    """Of one packed-refs file: the locks whose newest packed record is not a release, and
    the remotes it holds lease copies of."""
    names: list[bytes]
    remotes: list[bytes]


class Memo:
    """`.git/grite/cache/leases.db`. Records are content-addressed, so what a sha said never
    changes; the file only saves reads, and any trouble with it (deleted, read-only, damaged)
    only costs them."""

    def __init__(self, cache_dir: str):
        self.path = os.path.join(cache_dir, "leases.db")
        self._conn: sqlite3.Connection | None = None
        self.usable = True

    def _db(self) -> sqlite3.Connection | None:
        if self._conn is None and self.usable:
            try:
                os.makedirs(os.path.dirname(self.path), exist_ok=True)
                conn = sqlite3.connect(self.path, isolation_level=None, timeout=5)
                if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                    conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=OFF")   # lost rows are read again, that is all
                conn.executescript(SCHEMA)
                self._conn = conn
            except (OSError, sqlite3.Error):
                self.usable = False
        return self._conn

    def _run(self, fn, default):
        db = self._db()
        if db is None:
            return default
        try:
            return fn(db)
        except sqlite3.Error:
            self.usable = False
            return default

    def seen(self, shas: list[bytes]) -> dict[bytes, Seen]:
        def read(db):
            out = {}
            for i in range(0, len(shas), 500):
                chunk = shas[i:i + 500]
                for sha, token, at, rel in db.execute(
                        f"SELECT sha, token, written_at, released FROM seen WHERE sha IN "
                        f"({','.join('?' * len(chunk))})", chunk):
                    out[sha] = Seen(token, at, bool(rel))
            return out
        return self._run(read, {})

    def remember(self, rows: dict[bytes, Seen]) -> None:
        if rows:
            self._run(lambda db: db.executemany(
                "INSERT OR IGNORE INTO seen VALUES (?, ?, ?, ?)",
                [(sha, s.token, s.written_at, int(s.released)) for sha, s in rows.items()]), None)

    def packed_live(self, key) -> PackedLive | None:
        """What set_packed_live kept for the packed-refs file `key`, if it is that file."""
        row = self._run(lambda db: db.execute("SELECT v FROM packed WHERE k = ?",
                                              (repr(key),)).fetchone(), None)
        try:
            return None if row is None else msgspec.msgpack.decode(row[0], type=PackedLive)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return None

    def set_packed_live(self, key, live: PackedLive) -> None:
        def write(db):
            with db:
                db.execute("BEGIN IMMEDIATE")
                db.execute("DELETE FROM packed")
                db.execute("INSERT INTO packed VALUES (?, ?)",
                           (repr(key), msgspec.msgpack.encode(live)))
        self._run(write, None)
