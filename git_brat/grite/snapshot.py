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

from git_brat.grite.errors import CorruptObject, GriteError
from git_brat.grite.files import atomic_write
from git_brat.grite.gitstore import Store
from git_brat.grite.state import EncodedState, State

PREFIX = b"refs/grite/snapshots/"
REMOTE_INFIX = b"/grite/snapshots/"
DEFAULT_EVERY = 10000   # events a replica replays past its last snapshot before writing another
MIN_EVERY = 1000
STATE_DB = b"state.db.zst"   # the tree entry holding the state: a cache file, zstd-compressed
FRAME = 16 << 20   # bytes of the state file per zstd frame
MAX_FRAMES = 1 << 16
MAX_FRAME_BYTES = 1 << 30
STATE_Z = b"state.z"   # what snapshots held before: the state's msgpack, zlib-compressed


# Fetched snapshots are anyone's writing: what reaches git's command line or a terminal is checked.
# (\Z, not $: $ also matches before a final newline.)
ObjectId = Annotated[str, msgspec.Meta(pattern="^[0-9a-f]{40}([0-9a-f]{24})?\\Z")]
ReplicaId = Annotated[str, msgspec.Meta(pattern="^[0-9a-f]{1,64}\\Z")]


class SnapshotMeta(msgspec.Struct):
    version: int          # cache format of `state`; snapshots in any other format are ignored
    replica: ReplicaId    # the replica that wrote it
    events: Annotated[int, msgspec.Meta(ge=0)]       # events replayed into it
    entities: Annotated[int, msgspec.Meta(ge=0)]
    covers: list[ObjectId]   # log tips whose whole history it includes (also the commit's parents)
    # state.db.zst is these zstd frames one after another (their compressed sizes), so that
    # they are inflated on every core at once; none: one stream.
    frames: list[Annotated[int, msgspec.Meta(gt=0)]] = []


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
    sha = sha or store.read_ref(ref)
    if sha is None:
        return None
    try:
        meta = msgspec.msgpack.decode(store.read_record(sha, b"meta")[0], type=SnapshotMeta)
    except (CorruptObject, msgspec.DecodeError, msgspec.ValidationError):
        return None
    return Snapshot(ref.decode(), sha.decode(), meta)


def listed(store: Store) -> list[Snapshot]:
    """Every snapshot we have (ours, and fetched ones), most events first; unreadable ones skipped."""
    refs = store.refs_under(PREFIX)
    refs.update({n: s for n, s in store.refs_under(b"refs/remotes/").items() if REMOTE_INFIX in n})
    found = [snap for name, sha in sorted(refs.items()) if (snap := read(store, name, sha))]
    found.sort(key=lambda s: (-s.meta.events, s.ref))
    return found


class Start(NamedTuple):
    """A snapshot to start from, adopted as a cache file (see snapdb) at the path asked for."""
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
    """best(), its state read from a file nobody else sees (doctor; a read-only repository)."""
    path = temp_path(store)
    start = best(store, tips, version, path, durable=False)
    return None if start is None else (start.snap, _opened(path, start))


def load(store: Store, snap: Snapshot) -> State | None:
    """The snapshot's state (read from a file nobody else sees), or None if it is unusable."""
    path = temp_path(store)
    start = adopted(store, snap, path, durable=False)
    return None if start is None else _opened(path, start)


def _opened(path: str, start: Start) -> State:
    from git_brat.grite import cachedb, snapdb
    return cachedb.open_state(snapdb.open_unlinked(path), start.max_lamport, start.events)


def temp_path(store: Store) -> str:
    """A new file's name: beside the cache if that can be written (one filesystem), else $TMPDIR."""
    import tempfile
    for where in (os.path.join(store.grite_dir, "cache"), None):
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

    In a clone cut at a snapshot (see shallow), a covered tip may be absent yet provably ours:
    the parent of a boundary commit our logs reach. Then the snapshot must also explain the
    whole cut, or starting from it would leave out what came before.
    """
    from git_brat.grite import shallow
    covers = snap.meta.covers
    if not covers:
        return False
    tips = list(tips)
    try:
        boundary = shallow.cut(store, tips)
        cut_at = {p for absent in boundary.values() for p in absent}
        here = [c for c in covers if c not in cut_at]
        if not all(store.is_commit(c) for c in here) or store.unreachable(here, tips):
            return False
        return not boundary or shallow.explained(store, boundary, covers)
    except GriteError:   # a damaged commit on the way: not provably contained
        return False


def adopted(store: Store, snap: Snapshot, path: str, durable: bool = True) -> Start | None:
    """The snapshot's state written at path as a checked cache file; None (nothing left at
    path) if it does not decode, fails a check, or its counts are not its meta's."""
    from git_brat.grite import cachedb
    early = _early.pop(snap.commit, None)
    got = early.take(path) if early is not None else _NOT_YET
    if got is _NOT_YET:
        got = _adopt_at(store, snap, path, durable)
    # Its counts are its writer's word too: impossible ones disqualify it (doctor checks the rest).
    if got is None or got.version != snap.meta.version or got.event_count != snap.meta.events \
            or got.max_lamport < 0 or got.entities != snap.meta.entities:
        cachedb.remove(path)
        return None
    return Start(snap, got.max_lamport, got.event_count)


def _adopt_at(store: Store, snap: Snapshot, path: str, durable: bool, old_formats: bool = True):
    """snapdb.adopt of the snapshot's state unpacked at path (nothing left there if None);
    _NOT_YET if it holds no state.db.zst and old_formats is False."""
    from git_brat.grite import cachedb, snapdb
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
        from git_brat.grite import cachedb
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
        from git_brat.grite import cachedb
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
    import zstandard
    from git_brat.grite import cachedb, snapdb
    commit = snap.commit.encode()
    try:
        packed = store.read_large_blob(commit, STATE_DB)
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
    frames = snap.meta.frames
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
    from git_brat.grite.state import Entity
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
        return zlib.decompress(store.read_record(commit, STATE_Z)[0])
    except CorruptObject:
        return store.read_record(commit, b"state")[0]


def write(store: Store, replica_id: str, author: bytes, events: int, entities: int, path: str,
          covers: list[str], version: int) -> Snapshot | None:
    """Commit the state in the file at path (see snapdb.export) as this replica's snapshot;
    None if another process moved it meanwhile."""
    covers = sorted(set(covers))
    meta = SnapshotMeta(version, replica_id, events, entities, covers)
    message = f"grite: snapshot of {meta.events} events, {meta.entities} entities"
    with open(path, "rb") as f:
        packed, meta.frames = pack(f.read())
    commit = store.write_tree_commit({b"meta": msgspec.msgpack.encode(meta), STATE_DB: packed},
                                     [c.encode() for c in covers], message, author,
                                     int(time.time()))
    ref = own_ref(replica_id)
    old = store.read_ref(ref)
    if not store.cas_ref(ref, old, commit, b"grite: snapshot"):
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


def write_state(store: Store, replica_id: str, author: bytes, state: State, covers: list[str],
                version: int) -> Snapshot | None:
    """write() of a state held in memory (its file made here first)."""
    from git_brat.grite import cachedb, snapdb
    path = temp_path(store)
    try:
        cachedb.write_file(path, state, snapdb.counts_row(version, state.max_lamport,
                                                          state.event_count),
                           indexes=False)
        return write(store, replica_id, author, state.event_count, len(state.kinds), path,
                     covers, version)
    finally:
        cachedb.remove(path)


def _rejected_path(store: Store) -> str:
    return os.path.join(store.grite_dir, "snapshots-rejected")


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
