"""Snapshots: the projected state at a frontier, committed so a rebuild replays only what came after.

A snapshot is a commit on `refs/grite/snapshots/<replica-id>` (moved only by its replica, and
published beside its log) whose tree holds `meta` and `state.db.zst` (the cache file's tables at
that frontier, see snapdb), and whose parents are the log tips it covers: whoever has the
snapshot has every event in it. It is used only if its format matches
and every tip it covers is reachable from our own logs, so it can never add an event our logs do
not have; `git grite doctor` replays each one in full and reports any that disagree.
"""

from __future__ import annotations

import io
import os
import time
import zlib
from typing import Annotated, NamedTuple

import msgspec

from git_brat.errors import CorruptObject, GriteError
from git_brat.files import atomic_write
from git_brat.git.store import Store
from git_brat.grite.model.state import EncodedState, State
from git_brat.grite.log.refs import grite_dir

PREFIX = b"refs/grite/snapshots/"
REMOTE_INFIX = b"/grite/snapshots/"
DEFAULT_EVERY = 10000   # events a replica replays past its last snapshot before writing another
MIN_EVERY = 1000
STATE_DB = b"state.db.zst"   # the tree entry holding the state: a cache file, zstd-compressed
COLD_DB = b"cold.db.zst"     # the cold part's tree entry: the settled rows the state lists
FRAME = 16 << 20   # bytes of the state file per zstd frame
MAX_FRAMES = 1 << 16
MAX_FRAME_BYTES = 1 << 30
STATE_Z = b"state.z"   # what snapshots held before: the state's msgpack, zlib-compressed


# Fetched snapshots are anyone's writing: what reaches git's command line or a terminal is checked.
# (\Z, not $: $ also matches before a final newline.)
ObjectId = Annotated[str, msgspec.Meta(pattern="^[0-9a-f]{40}([0-9a-f]{24})?\\Z")]
ReplicaId = Annotated[str, msgspec.Meta(pattern="^[0-9a-f]{1,64}\\Z")]


class ColdPart(msgspec.Struct):
    """Rows a snapshot holds apart: settled and unchanged since `before`. A fresh clone is ready
    on the rest and fetches these after (see cold): the commit holding them is a parent of the
    snapshot commit, so a depth-1 fetch leaves it on the remote, and gc there keeps it."""
    commit: ObjectId
    rows: Annotated[int, msgspec.Meta(gt=0)]
    before: Annotated[int, msgspec.Meta(ge=0)]   # ms
    frames: list[Annotated[int, msgspec.Meta(gt=0)]] = []


class SnapshotMeta(msgspec.Struct):
    version: int          # cache format of `state`; snapshots in any other format are ignored
    replica: ReplicaId    # the replica that wrote it
    events: Annotated[int, msgspec.Meta(ge=0)]       # events replayed into it
    entities: Annotated[int, msgspec.Meta(ge=0)]
    covers: list[ObjectId]   # log tips whose whole history it includes (also the commit's parents)
    # state.db.zst is these zstd frames one after another (their compressed sizes), so that
    # they are inflated on every core at once; none: one stream.
    frames: list[Annotated[int, msgspec.Meta(gt=0)]] = []
    cold: ColdPart | None = None   # rows held apart, counted in `entities` (all are created)


class Snapshot(msgspec.Struct):
    ref: str
    commit: str
    meta: SnapshotMeta


class Settings(msgspec.Struct):
    enabled: bool = True          # grite.snapshots: use and write snapshots
    every: int = DEFAULT_EVERY    # grite.snapshotEvery: 0 never writes one automatically


def own_ref(replica_id: str) -> bytes:
    return PREFIX + replica_id.encode()


def settings(store: Store) -> Settings:
    """grite.snapshots and grite.snapshotEvery, as git reads them (all config files)."""
    found = store.config_matching(r"^grite\.snapshot")
    out = Settings(enabled=store.config_bool("grite.snapshots", True))
    every = found.get("grite.snapshotevery")
    if every is not None:
        try:
            out.every = int(every)
        except ValueError:
            raise GriteError(f"grite.snapshotEvery must be a number of events, not {every!r}")
        if out.every != 0 and out.every < MIN_EVERY:
            raise GriteError(f"grite.snapshotEvery must be 0 (never) or at least {MIN_EVERY}")
    return out


def read(store: Store, ref: bytes, sha: bytes | None = None) -> Snapshot | None:
    """The snapshot a ref points at, or None if there is none or its meta is unreadable."""
    sha = sha or store.refs.read(ref)
    if sha is None:
        return None
    try:
        meta = msgspec.msgpack.decode(store.objects.read_record(sha, b"meta")[0], type=SnapshotMeta)
    except (CorruptObject, msgspec.DecodeError, msgspec.ValidationError):
        return None
    return Snapshot(ref.decode(), sha.decode(), meta)


def listed(store: Store) -> list[Snapshot]:
    """Every snapshot we have (ours, and fetched ones), most events first; unreadable ones skipped."""
    refs = store.refs.under(PREFIX)
    refs.update({n: s for n, s in store.refs.under(b"refs/remotes/").items() if REMOTE_INFIX in n})
    found = [snap for name, sha in sorted(refs.items()) if (snap := read(store, name, sha))]
    found.sort(key=lambda s: (-s.meta.events, s.ref))
    return found


class Start(NamedTuple):
    """A snapshot to start from, adopted as a cache file (see snapdb) at the path asked for:
    its hot rows, with the ids of its cold part (snap.meta.cold) listed, not yet its rows."""
    snap: Snapshot
    max_lamport: int
    events: int


def best(store: Store, tips: dict[str, str], version: int, path: str,
         durable: bool = True) -> Start | None:
    """The snapshot covering the most events that our logs fully contain, adopted at path
    (durable: to become the cache file, see snapdb.adopt)."""
    seen = rejected(store)
    for snap in listed(store):
        if snap.meta.version != version or snap.commit in seen:
            continue
        seen.add(snap.commit)
        if not contained(store, snap, tips.values()):
            continue   # it has events our logs do not reach: using it would invent them
        start = adopted(store, snap, path, durable)
        if start is not None:
            return start
    return None


def best_state(store: Store, tips: dict[str, str], version: int) -> tuple[Snapshot, State] | None:
    """best(), its whole state (cold part too, which must be here) read from a file nobody
    else sees (doctor; a read-only repository)."""
    path = temp_path(store)
    start = best(store, tips, version, path, durable=False)
    if start is None:
        return None
    state = opened(store, path, start)
    return None if state is None else (start.snap, state)


def load(store: Store, snap: Snapshot) -> State | None:
    """The snapshot's whole state (read from a file nobody else sees), or None if it is
    unusable or its cold part is not here."""
    path = temp_path(store)
    start = adopted(store, snap, path, durable=False)
    return None if start is None else opened(store, path, start)


def remote_of(snap: Snapshot) -> str:
    """The remote a fetched snapshot came from ("" for this replica's own)."""
    ref = snap.ref
    if ref.startswith("refs/remotes/") and REMOTE_INFIX.decode() in ref:
        return ref[len("refs/remotes/"):ref.index(REMOTE_INFIX.decode())]
    return ""


def opened(store: Store, path: str, start: Start) -> State | None:
    """The adopted file at path, its cold part merged in, as a read-only state (path is then
    gone); None, and nothing left, if that part is not here or not what the file lists."""
    import sqlite3
    from git_brat.grite.cache import db as cachedb
    from git_brat.grite.cache import snapdb
    if start.snap.meta.cold is not None:
        conn = sqlite3.connect(path, isolation_level=None)
        try:
            merged = merge_cold(store, start.snap, conn)
        finally:
            conn.close()
        if not merged:
            cachedb.remove(path)
            return None
    return cachedb.open_state(snapdb.open_unlinked(path), start.max_lamport, start.events)


def merge_cold(store: Store, snap: Snapshot, conn, meta: bytes | None = None) -> bool:
    """Check the snapshot's cold part (its commit must be here) and merge it into the file conn
    is open on (see snapdb.add_cold), with meta; False, nothing merged, if it is absent, fails
    a check or is not the rows the file lists."""
    from git_brat.grite.cache import db as cachedb
    from git_brat.grite.cache import snapdb
    path = temp_path(store)
    try:
        if not adopt_cold(store, snap, path):
            return False
        try:
            snapdb.add_cold(conn, path, meta)
        except snapdb.ColdMismatch:
            return False
        return True
    finally:
        cachedb.remove(path)


def adopt_cold(store: Store, snap: Snapshot, path: str) -> bool:
    """The snapshot's cold part (its commit must be here) checked at path, to be merged by
    snapdb.add_cold; False, nothing left at path, if it is absent or fails a check."""
    from git_brat.grite.cache import db as cachedb
    from git_brat.grite.cache import snapdb
    part = snap.meta.cold
    try:
        ok = part is not None and _unpack_blob(store, part.commit.encode(), COLD_DB,
                                               part.frames, path)
        got = snapdb.adopt(path, durable=False, cold=True) if ok else None
    except CorruptObject:
        got = None
    except BaseException:
        cachedb.remove(path)
        raise
    # Every row is created (kind set): rows and entities are the same count.
    if got is None or got.version != snap.meta.version or got.event_count != snap.meta.events \
            or got.entities != part.rows:
        cachedb.remove(path)
        return False
    return True


def temp_path(store: Store) -> str:
    """A new file's name: beside the cache if that can be written (one filesystem), else $TMPDIR."""
    import tempfile
    for where in (os.path.join(grite_dir(store), "cache"), None):
        try:
            fd, path = tempfile.mkstemp(prefix="snapshot-", suffix=".db", dir=where)
        except OSError:
            continue
        os.close(fd)
        return path
    raise GriteError("no directory here can hold a snapshot's state (the cache directory and "
                     "$TMPDIR are not writable)")


def contained(store: Store, snap: Snapshot, tips) -> bool:
    """Whether every tip the snapshot covers is a commit our logs reach (no if git cannot tell).

    In a clone cut at a snapshot (see log/cut.py), a covered tip may be absent yet provably ours:
    the parent of a boundary commit our logs reach. Then the snapshot must also explain the
    whole cut, or starting from it would leave out what came before.
    """
    from git_brat.grite.log import cut
    covers = snap.meta.covers
    if not covers:
        return False
    tips = list(tips)
    # A first fetch asks, then the cache again: what our tips reach (where no deepen moved the
    # cut) only grows, so a yes stays a yes.
    key = (store.common_dir, snap.commit, frozenset(tips), tuple(store.remote.shallow_commits()))
    if key in _contained:
        return True
    try:
        boundary = cut.cut(store, tips)
        cut_at = {p for absent in boundary.values() for p in absent}
        here = [c for c in covers if c not in cut_at]
        if not all(store.objects.is_commit(c) for c in here) or store.objects.unreachable(here, tips):
            return False
        if boundary and not cut.explained(store, boundary, covers):
            return False
    except GriteError:   # a damaged commit on the way: not provably contained
        return False
    _contained.add(key)
    return True


_contained: set[tuple] = set()   # contained() answers that were yes, in this process


def adopted(store: Store, snap: Snapshot, path: str, durable: bool = True) -> Start | None:
    """The snapshot's state written at path as a checked cache file; None (nothing left at
    path) if it does not decode, fails a check, or its counts are not its meta's."""
    from git_brat.grite.cache import db as cachedb
    early = _early.pop(snap.commit, None)
    got = early.take(path) if early is not None else _NOT_YET
    if got is _NOT_YET:
        got = _adopt_at(store, snap, path, durable)
    # Its counts are its writer's word too: impossible ones disqualify it (doctor checks the rest).
    held_apart = snap.meta.cold.rows if snap.meta.cold is not None else 0
    if got is None or got.version != snap.meta.version or got.event_count != snap.meta.events \
            or got.max_lamport < 0 or got.entities + held_apart != snap.meta.entities \
            or got.cold_ids != held_apart:
        cachedb.remove(path)
        return None
    return Start(snap, got.max_lamport, got.event_count)


def _adopt_at(store: Store, snap: Snapshot, path: str, durable: bool, old_formats: bool = True):
    """snapdb.adopt of the snapshot's state unpacked at path (nothing left there if None);
    _NOT_YET if it holds no state.db.zst and old_formats is False."""
    from git_brat.grite.cache import db as cachedb
    from git_brat.grite.cache import snapdb
    try:
        unpacked = _unpack(store, snap, path, old_formats)
        if unpacked is _NOT_YET:
            return _NOT_YET
        got = snapdb.adopt(path, durable) if unpacked else None
    except BaseException:
        cachedb.remove(path)
        raise
    if got is None:
        cachedb.remove(path)
    return got


_NOT_YET = object()


class _Early:
    """A snapshot being adopted in a thread of this process, ahead of the adopted() call that
    will want it (see prepare)."""

    def __init__(self, store: Store, snap: Snapshot):
        import threading
        self.path = temp_path(store)
        self.outcome: list = []
        self.thread = threading.Thread(target=self._run, args=(store, snap), daemon=True)
        self.thread.start()

    def _run(self, store: Store, snap: Snapshot) -> None:
        try:
            # (Only what needs no dulwich: its objects are not for two threads at once.)
            self.outcome.append(_adopt_at(store, snap, self.path, True, old_formats=False))
        except BaseException as exc:   # noqa: BLE001 - raised again by take()
            self.outcome.append(exc)

    def take(self, path: str):
        """What adopting it came to, its file moved to path; _NOT_YET: do it here after all.
        Nothing is left at its own path either way."""
        from git_brat.grite.cache import db as cachedb
        self.thread.join()
        got = self.outcome[0]
        try:
            if isinstance(got, BaseException):
                raise got
            if got is None or got is _NOT_YET:
                return got
            try:
                os.replace(self.path, path)
            except OSError:   # (another filesystem: cheaper to adopt it again than to copy it)
                return _NOT_YET
            return got
        finally:
            cachedb.remove(self.path)   # (its empty temp file, when nothing was unpacked)

    def discard(self) -> None:
        from git_brat.grite.cache import db as cachedb
        self.thread.join()
        cachedb.remove(self.path)


_early: dict[str, _Early] = {}
_discard_at_exit: list[bool] = []


def prepare(store: Store, snap: Snapshot) -> None:
    """Start adopting a snapshot now, in a thread, so that adopted() of it in this process
    later only waits for what is left: a first fetch starts it before the logs after the
    snapshot arrive, and the two share the machine's cores."""
    if snap.commit in _early:
        return
    if not _discard_at_exit:
        import atexit
        atexit.register(_discard_early)
        _discard_at_exit.append(True)
    try:
        _early[snap.commit] = _Early(store, snap)
    except GriteError:
        pass   # nowhere to write it: adopted() says so, if it comes to that


def _discard_early() -> None:
    """At exit: preparations nobody took leave no file behind."""
    while _early:
        _early.popitem()[1].discard()


def _unpack(store: Store, snap: Snapshot, path: str, old_formats: bool = True):
    """Write the snapshot's state at path as a cache file's tables, unchecked; False if it
    cannot be read. `state.db.zst` is that file; older snapshots held the msgpack of State
    (read only if old_formats, else _NOT_YET)."""
    from git_brat.grite.cache import db as cachedb
    from git_brat.grite.cache import snapdb
    try:
        return _unpack_blob(store, snap.commit.encode(), STATE_DB, snap.meta.frames, path)
    except CorruptObject:
        if not old_formats:
            return _NOT_YET
    loaded = load_rows(store, snap)
    if loaded is None:
        return False
    state, bodies = loaded
    cachedb.write_file(path, state, snapdb.counts_row(snap.meta.version, state.max_lamport,
                                                      state.event_count),
                       (bodies, set()), indexes=False)
    return True


def _unpack_blob(store: Store, commit: bytes, entry: bytes, frames: list[int], path: str) -> bool:
    """Inflate a commit's zstd file entry (in frames of the sizes given, on every core) at
    path; False if it is not what they say. Raise CorruptObject if it cannot be read."""
    import zstandard
    packed = store.objects.read_large_blob(commit, entry)
    if frames and (sum(frames) != len(packed) or len(frames) > MAX_FRAMES):
        return False
    try:
        with open(path, "wb") as out:
            if not frames:
                zstandard.ZstdDecompressor().copy_stream(io.BytesIO(packed), out,
                                                          write_size=1 << 20)
                return True
            view, at, parts = memoryview(packed), 0, []
            for size in frames:
                parts.append(view[at:at + size])
                at += size
            # Each frame says how much it inflates to: more than a writer makes is refused
            # before anything is allocated for it.
            if not all(0 < zstandard.frame_content_size(p) <= MAX_FRAME_BYTES for p in parts):
                return False
            for part in zstandard.ZstdDecompressor().multi_decompress_to_buffer(
                    parts, threads=min(len(parts), os.cpu_count() or 1)):
                out.write(part)
    except zstandard.ZstdError:   # (also a frame whose header does not give its size)
        return False
    return True


def load_rows(store: Store, snap: Snapshot) -> tuple[State, dict[str, msgspec.Raw]] | None:
    """The snapshot's state and each entity's encoding, or None if it does not decode.

    Decoded and validated whole, unlike the cache: it may come from another replica, and an
    entity that failed to decode later, on first use, would break a command far from here.
    """
    from git_brat.grite.model.state import Entity
    try:
        held = msgspec.msgpack.decode(_state_bytes(store, snap.commit.encode()), type=EncodedState)
        entity = msgspec.msgpack.Decoder(Entity).decode
        entities = {k: entity(v) for k, v in held.entities.items()}
    except (CorruptObject, msgspec.DecodeError, msgspec.ValidationError, zlib.error):
        return None
    bodies, held.entities = held.entities, entities
    state = State(**{f: getattr(held, f) for f in State.__struct_fields__})
    # Its counts are its writer's word too: impossible ones disqualify it (doctor checks the rest).
    if state.event_count < 0 or state.event_count != snap.meta.events or state.max_lamport < 0:
        return None
    if any(e.id != k for k, e in entities.items()):
        return None
    return state, bodies


def _state_bytes(store: Store, commit: bytes) -> bytes:
    """The msgpack of a snapshot's state: `state.z` (zlib: git then moves and hashes a third of
    the bytes), or `state` as snapshots were first written."""
    try:
        return zlib.decompress(store.objects.read_record(commit, STATE_Z)[0])
    except CorruptObject:
        return store.objects.read_record(commit, b"state")[0]


def write(store: Store, replica_id: str, author: bytes, events: int, entities: int, path: str,
          covers: list[str], version: int, cold: tuple[str, int, int] | None = None
          ) -> Snapshot | None:
    """Commit the state in the file at path (see snapdb.export) as this replica's snapshot;
    None if another process moved it meanwhile. cold: (the file of its cold part, its rows,
    the `before` they were chosen by), committed first and made a parent."""
    covers = sorted(set(covers))
    meta = SnapshotMeta(version, replica_id, events, entities, covers)
    when = int(time.time())
    parents = [c.encode() for c in covers]
    if cold is not None:
        cold_path, rows, before = cold
        with open(cold_path, "rb") as f:
            packed, frames = pack(f.read())
        part = store.objects.write_tree_commit({COLD_DB: packed}, [],
                                       f"grite: a snapshot's cold part, {rows} settled entities",
                                       author, when)
        meta.cold = ColdPart(part.decode(), rows, before, frames)
        parents.append(part)
    message = f"grite: snapshot of {meta.events} events, {meta.entities} entities"
    with open(path, "rb") as f:
        packed, meta.frames = pack(f.read())
    commit = store.objects.write_tree_commit({b"meta": msgspec.msgpack.encode(meta), STATE_DB: packed},
                                     parents, message, author, when)
    ref = own_ref(replica_id)
    old = store.refs.read(ref)
    if not store.refs.cas(ref, old, commit, b"grite: snapshot"):
        return None
    return Snapshot(ref.decode(), commit.decode(), meta)


def pack(data: bytes) -> tuple[bytes, list[int]]:
    """data as state.db.zst holds it, and its frames' sizes. zstd: every clone inflates it, 5x
    faster than zlib, and it is as small as zlib's level 6; in frames of FRAME bytes, compressed
    and later inflated on every core."""
    import zstandard
    view = memoryview(data)
    parts = [view[i:i + FRAME] for i in range(0, len(data), FRAME)] or [view]
    frames = zstandard.ZstdCompressor(level=3).multi_compress_to_buffer(parts, threads=-1)
    return b"".join(f.tobytes() for f in frames), [len(f) for f in frames]


def write_from(store: Store, replica_id: str, author: bytes, events: int, entities: int,
               src: str, covers: list[str], version: int, before: int = 0,
               generation: str | None = None) -> Snapshot | None | bool:
    """write() of the state in the cache file src (as of `generation`, if given: False if src
    holds another by now), its rows settled before `before` (ms; 0: none) held apart."""
    from git_brat.grite.cache import db as cachedb
    from git_brat.grite.cache import snapdb
    hot, cold = temp_path(store), temp_path(store)
    try:
        rows = snapdb.export(src, hot, generation, cold, before)
        if rows is None:
            return False
        return write(store, replica_id, author, events, entities, hot, covers, version,
                     (cold, rows, before) if rows else None)
    finally:
        cachedb.remove(hot)
        cachedb.remove(cold)


def write_state(store: Store, replica_id: str, author: bytes, state: State, covers: list[str],
                version: int, before: int = 0) -> Snapshot | None:
    """write_from() of a state held in memory (its file made here first)."""
    from git_brat.grite.cache import db as cachedb
    from git_brat.grite.cache import snapdb
    path = temp_path(store)
    try:
        cachedb.write_file(path, state, snapdb.counts_row(version, state.max_lamport,
                                                          state.event_count),
                           indexes=False)
        return write_from(store, replica_id, author, state.event_count, len(state.kinds), path,
                          covers, version, before) or None
    finally:
        cachedb.remove(path)


def _rejected_path(store: Store) -> str:
    return os.path.join(grite_dir(store), "snapshots-rejected")


def rejected(store: Store) -> set[str]:
    """Snapshot commits doctor found wrong: never used again, even if a fetch brings them back."""
    try:
        with open(_rejected_path(store), encoding="ascii") as f:
            return set(f.read().split())
    except (OSError, UnicodeDecodeError):
        return set()


def reject(store: Store, commit: str) -> None:
    atomic_write(_rejected_path(store), "".join(f"{c}\n" for c in sorted(rejected(store) | {commit}))
                 .encode())
