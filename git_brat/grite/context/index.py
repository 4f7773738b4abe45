"""The code context index: the symbols of a commit's tracked files, derived locally.

Derived, never synced: its answer is a function of the tree and the parser's versions alone,
so every clone computes the same one. It lives in .git/grite/context/ (one SQLite file,
disposable like the cache) and is kept incrementally by blob id: a blob parsed once is never
parsed again, whatever path or commit it appears under, so moving to another commit re-parses
only the blobs that are new.

A tree is hostile input: a symlink is never followed (its target is a path, not code), a
submodule is not entered, a blob larger than MAX_BLOB is never read (its size comes from the
listing, and is checked again as it is read), one with a NUL byte is binary, and a tree of
more than MAX_FILES files is indexed up to that many (said so).
"""

from __future__ import annotations

import os
import re
import sqlite3
import time
from typing import NamedTuple

import msgspec

from git_brat.errors import GriteError, UsageError
from git_brat.files import FileLock, LockTimeout, private_dir
from git_brat.git import blobs as gitblobs
from git_brat.git.store import Store
from git_brat.grite.context.symbols import Parsers, Symbol, grammar_versions, language_of
from git_brat.grite.log.refs import grite_dir

FORMAT = "1"               # of the file below: a change rebuilds it
MAX_BLOB = 1 << 20         # bytes of one file parsed; a larger one is listed as too large
MAX_FILES = 200_000        # files of one tree looked at
BINARY_PROBE = 8_000       # bytes looked at for a NUL (as git's own binary test does)
READ_BYTES = 32 << 20      # bytes of blobs read per cat-file (memory stays near this)
LOCK_TIMEOUT = 120.0
SYMLINK, TOO_LARGE, BINARY, UNPARSED = ("symlink (not followed)", "too large", "binary",
                                        "not parsed")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS blobs(blob TEXT, lang TEXT, symbols BLOB, skipped TEXT,
                                 PRIMARY KEY(blob, lang)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS files(path TEXT PRIMARY KEY, blob TEXT, lang TEXT, skipped TEXT)
    WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS symbols(lname TEXT, name TEXT, kind TEXT, path TEXT, line INTEGER,
                                   last INTEGER, parent TEXT);
CREATE INDEX IF NOT EXISTS symbols_by_name ON symbols(lname);
CREATE INDEX IF NOT EXISTS symbols_by_path ON symbols(path);
"""


class IndexResult(msgspec.Struct):
    rev: str               # the revision asked for, as given
    tree: str
    files: int             # files of a known language in the tree
    parsed: int            # blobs parsed this run
    reused: int            # changed files whose blob was parsed before (another path, commit)
    changed: int           # files added, changed or removed since the last tree indexed
    skipped: int           # files not parsed: symlinks, too large, binary
    symbols: int
    truncated: bool        # the tree had more than MAX_FILES files
    ms: float


class Hit(msgspec.Struct):
    name: str
    kind: str
    path: str
    line: int
    end: int
    parent: str


class FileSymbols(msgspec.Struct):
    path: str
    blob: str
    language: str
    skipped: str           # why it was not parsed ("": it was)
    symbols: list[Hit]


def index_path(store: Store) -> str:
    return os.path.join(grite_dir(store), "context", "index.sqlite")


class Index:
    """The index file of one repository (shared by its work trees, kept for one tree at a time)."""

    def __init__(self, store: Store):
        self.store = store
        self.path = index_path(store)
        self._conn: sqlite3.Connection | None = None

    def connection(self) -> sqlite3.Connection:
        """The open index file; one that is not an SQLite file of ours is made anew (it is
        derived: nothing is lost)."""
        if self._conn is None:
            private_dir(os.path.dirname(self.path))
            try:
                self._conn = self._open()
            except sqlite3.DatabaseError:
                for suffix in ("", "-wal", "-shm"):
                    _unlink(self.path + suffix)
                try:
                    self._conn = self._open()
                except sqlite3.DatabaseError as exc:
                    raise GriteError(f"cannot make the context index {self.path}: {exc}")
        return self._conn

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=LOCK_TIMEOUT, isolation_level=None)
        try:
            conn.executescript(_SCHEMA)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("SELECT count(*) FROM meta").fetchone()
        except sqlite3.DatabaseError:
            conn.close()
            raise
        return conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _meta(self, key: str) -> str | None:
        row = self.connection().execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def fresh_for(self, tree: str) -> bool:
        """Whether the index holds this tree already (the parser's versions are checked when
        it is brought up to date: a query never pays for reading package metadata)."""
        return os.path.exists(self.path) and self._meta("tree") == tree

    # -- bringing it up to date -------------------------------------------------

    def update(self, rev: str = "HEAD") -> IndexResult:
        """Index the tree `rev` names: only files whose blob changed since the tree indexed
        last are looked at, and only blobs never parsed before are parsed."""
        start = time.perf_counter()
        tree = gitblobs.tree_id(self.store.git_dir, rev)
        if tree is None:
            raise UsageError(f"no commit {rev!r} to index" if rev != "HEAD" else
                             "nothing to index: this repository has no commit yet")
        private_dir(os.path.dirname(self.path))
        try:
            with FileLock(self.path + ".lock", LOCK_TIMEOUT):
                return self._update(rev, tree, start)
        except LockTimeout as exc:
            raise GriteError(str(exc))

    def _update(self, rev: str, tree: str, start: float) -> IndexResult:
        conn = self.connection()
        versions = f"{FORMAT} {grammar_versions()}"
        if self._meta("versions") != versions:   # another parser: every answer may differ
            conn.executescript("BEGIN; DELETE FROM blobs; DELETE FROM files; DELETE FROM symbols;"
                               "DELETE FROM meta; COMMIT;")
        listing, truncated = gitblobs.list_tree(self.store.git_dir, tree, MAX_FILES)
        wanted = _wanted(listing)
        # A file is the same when its blob, language and being a symlink are (a symlink and a
        # file may hold the same text, so the same blob); why a blob was not parsed is the
        # blob's own, kept with it.
        had = {row[0]: (row[1], row[2], row[3] == SYMLINK) for row in
               conn.execute("SELECT path, blob, lang, skipped FROM files")}
        changed = [p for p, (blob, lang, why) in wanted.items()
                   if had.get(p) != (blob, lang, why == SYMLINK)]
        gone = [p for p in had if p not in wanted]
        known = _parsed_blobs(conn, {(wanted[p][0], wanted[p][1]) for p in changed})
        todo = {(wanted[p][0], wanted[p][1]) for p in changed
                if not wanted[p][2] and (wanted[p][0], wanted[p][1]) not in known}
        sizes = {f.blob: f.size for f in listing}
        parsed = _parse(self.store.git_dir, todo, sizes)
        _write(conn, wanted, changed, gone + [p for p in changed if p in had],
               {**known, **parsed}, parsed,
               [("tree", tree), ("versions", versions)])
        skipped, symbols = conn.execute(
            "SELECT (SELECT count(*) FROM files WHERE skipped != ''), "
            "(SELECT count(*) FROM symbols)").fetchone()
        return IndexResult(rev, tree, len(wanted), len(parsed),
                           sum(1 for p in changed if (wanted[p][0], wanted[p][1]) in known),
                           len(changed) + len(gone), skipped, symbols, truncated,
                           round((time.perf_counter() - start) * 1000, 1))

    def ensure(self, rev: str = "HEAD") -> None:
        """Bring the index to `rev`'s tree unless it is there already (a query's warm path:
        one rev-parse and one lookup)."""
        tree = gitblobs.tree_id(self.store.git_dir, rev)
        if tree is None:
            raise UsageError("nothing indexed: this repository has no commit yet")
        if not self.fresh_for(tree):
            self.update(rev)

    # -- reading ---------------------------------------------------------------

    def query(self, term: str, limit: int = 20, kind: str | None = None,
              under: str | None = None) -> list[Hit]:
        """Symbols whose name holds `term` (any case): exact names first, then names that
        start with it (shorter first), then the rest (in name order); then by path and line.
        The first two come through the name index; the rest, a scan, only when they fall
        short."""
        needle = term.strip().lower()
        if not needle:
            raise UsageError("give a name (or part of one) to look for")
        where, args = [], []
        if kind:
            where.append("kind = ?")
            args.append(kind)
        if under:
            prefix = under.strip("/") + "/"
            where.append("substr(path, 1, ?) = ?")
            args += [len(prefix), prefix]
        starts = "lname >= ? AND lname < ?"
        bounds = [needle, needle + "\U0010ffff"]
        hits = self._select([starts, *where], [*bounds, *args],
                            "CASE WHEN lname = ? THEN 0 ELSE 1 END, length(name)", [needle],
                            limit)
        if len(hits) < limit:   # in the name index's order, so a common part stops early
            hits += self._select([f"instr(lname, ?) > 0 AND NOT ({starts})", *where],
                                 [needle, *bounds, *args], "lname", [], limit - len(hits))
        return hits

    def _select(self, where: list[str], args: list, order: str, order_args: list,
                limit: int) -> list[Hit]:
        sql = (f"SELECT name, kind, path, line, last, parent FROM symbols "
               f"WHERE {' AND '.join(where)} ORDER BY {order}, name, path, line LIMIT ?")
        try:
            rows = self.connection().execute(sql, [*args, *order_args, limit]).fetchall()
        except sqlite3.Error as exc:   # held by a writer past the timeout, a damaged page
            raise GriteError(f"cannot read the context index {self.path}: {exc}")
        return [Hit(*row) for row in rows]

    def named(self, names: list[str], limit: int) -> list[Hit]:
        """Symbols named exactly one of `names` (any case), through the name index only."""
        lowered = sorted({n.lower() for n in names if n})
        if not lowered:
            return []
        marks = ",".join("?" * len(lowered))
        rows = self.connection().execute(
            f"SELECT name, kind, path, line, last, parent FROM symbols WHERE lname IN ({marks}) "
            f"ORDER BY path, line, name LIMIT ?", [*lowered, limit])
        return [Hit(*row) for row in rows]

    def file(self, path: str) -> FileSymbols | None:
        conn = self.connection()
        row = conn.execute("SELECT blob, lang, skipped FROM files WHERE path = ?",
                           (path,)).fetchone()
        if row is None:
            return None
        hits = [Hit(*r) for r in conn.execute(
            "SELECT name, kind, path, line, last, parent FROM symbols WHERE path = ? "
            "ORDER BY line, rowid", (path,))]
        return FileSymbols(path, row[0], row[1], row[2], hits)


def _write(conn: sqlite3.Connection, wanted: dict, changed: list[str], dropped: list[str],
           rows: dict, parsed: dict, meta: list[tuple[str, str]]) -> None:
    """One transaction: the rows of the files dropped (gone or changed) out, the blobs parsed
    now, the changed files and their symbols in."""
    conn.execute("BEGIN")
    try:
        for path in dropped:
            conn.execute("DELETE FROM symbols WHERE path = ?", (path,))
            conn.execute("DELETE FROM files WHERE path = ?", (path,))
        conn.executemany("INSERT OR REPLACE INTO blobs VALUES (?, ?, ?, ?)",
                         [(b, lang, msgspec.msgpack.encode(syms), why)
                          for (b, lang), (syms, why) in parsed.items()])
        for path in changed:
            blob, lang, why = wanted[path]
            syms, blob_why = rows.get((blob, lang), ([], why))
            conn.execute("INSERT INTO files VALUES (?, ?, ?, ?)", (path, blob, lang,
                                                                   why or blob_why))
            conn.executemany("INSERT INTO symbols VALUES (?, ?, ?, ?, ?, ?, ?)",
                             [(s[0].lower(), s[0], s[1], path, s[2], s[3], s[4]) for s in syms])
        conn.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", meta)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
SPECIFIC = 5   # a word defined more often than this names nothing in particular ("run", "get")


def relevant(store: Store, text: str, limit: int) -> list[Hit]:
    """Definitions of the names a text mentions (a request to the mayor), in the order it
    mentions them; a name defined in more than SPECIFIC places is left out."""
    words = list(dict.fromkeys(_IDENTIFIER.findall(text)))[:500]
    ix = Index(store)
    try:
        ix.ensure()
        hits = ix.named(words, limit * SPECIFIC * 4)
    finally:
        ix.close()
    by_name: dict[str, list[Hit]] = {}
    for h in hits:
        by_name.setdefault(h.name.lower(), []).append(h)
    out: list[Hit] = []
    for word in dict.fromkeys(w.lower() for w in words):
        found = by_name.get(word, [])
        if len(found) <= SPECIFIC:
            out += found
    return out[:limit]


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _wanted(listing: list[gitblobs.TreeFile]) -> dict[str, tuple[str, str, str]]:
    """path -> (blob, language, why it is not parsed) of the files of a known language."""
    out = {}
    for f in listing:
        lang = language_of(f.path)
        if lang is None or f.mode == "160000":
            continue
        why = SYMLINK if f.mode == "120000" else TOO_LARGE if f.size > MAX_BLOB else ""
        out[f.path] = (f.blob, lang, why)
    return out


def _parsed_blobs(conn: sqlite3.Connection, keys: set[tuple[str, str]]
                  ) -> dict[tuple[str, str], tuple[list, str]]:
    out = {}
    for blob, lang in keys:
        row = conn.execute("SELECT symbols, skipped FROM blobs WHERE blob = ? AND lang = ?",
                           (blob, lang)).fetchone()
        if row is not None:
            out[(blob, lang)] = (msgspec.msgpack.decode(row[0]), row[1])
    return out


def _parse(git_dir: str, todo: set[tuple[str, str]], sizes: dict[str, int]
           ) -> dict[tuple[str, str], tuple[list, str]]:
    """Symbols of each (blob, language) never parsed before, as rows."""
    if not todo:
        return {}
    parsers = Parsers()
    langs: dict[str, list[str]] = {}
    for blob, lang in todo:
        langs.setdefault(blob, []).append(lang)
    out: dict[tuple[str, str], tuple[list, str]] = {}
    for batch in _batches(sorted(langs), sizes):
        for blob, data in gitblobs.read_blobs(git_dir, batch, MAX_BLOB):
            for lang in langs[blob]:
                if b"\0" in data[:BINARY_PROBE]:
                    out[(blob, lang)] = ([], BINARY)
                    continue
                out[(blob, lang)] = ([list(s) for s in parsers.symbols(lang, data)], "")
    for key in todo:   # listed small, found large (or gone): never read past the bound
        out.setdefault(key, ([], TOO_LARGE))
    return out


def _batches(blobs: list[str], sizes: dict[str, int]) -> list[list[str]]:
    out: list[list[str]] = [[]]
    total = 0
    for blob in blobs:
        if out[-1] and total + sizes.get(blob, MAX_BLOB) > READ_BYTES:
            out.append([])
            total = 0
        out[-1].append(blob)
        total += sizes.get(blob, MAX_BLOB)
    return out


__all__ = ["Index", "relevant", "IndexResult", "Hit", "FileSymbols", "Symbol", "index_path"]
