"""Materialized view keyed by the frontier (tips read); disposable: deleting it changes no answer.

Files under .git/grite/cache/: `meta` (frontier, generation), `state` (the projection, for
incremental replay) and `issues` (the issue list, ready to print). `state` carries meta's
generation and `issues` the stamp meta names for it, so a reader never mixes files from two
writers; writers hold a portalocker lock and replace each file atomically. Issue views are
brought up to date only when asked for: a write records which entities it touched, and the next
list recomputes just those.
"""

from __future__ import annotations

import errno
import os
from datetime import datetime

import msgspec

from git_brat.grite import attic, snapshot
from git_brat.grite.errors import GriteError
from git_brat.grite.files import atomic_write, ensure_dir
from git_brat.grite.gitstore import Store
from git_brat.grite.log import LogReader, LogUnreadable, Problem
from git_brat.grite.state import Entity, State, StoredState, iso, no_gc, replay_stream

# 2: entities decoded lazily, kinds index; 3: dep_sources index; 4: snapshot_events;
# 5: issue views updated lazily (views, dirty); 6: unknown operations kept by event id.
# Snapshots carry it too: bump it whenever the same events would give a different State.
CACHE_VERSION = 6


class IssueView(msgspec.Struct):
    id: str
    title: str
    state: str
    labels: list[str]
    assignees: list[str]
    created_at: datetime
    updated_at: datetime
    author: str
    comments: int


class Meta(msgspec.Struct):
    version: int
    generation: str
    frontier: dict[str, str]
    max_lamport: int
    problems: list[Problem] = []
    snapshot_events: int = 0    # events covered by the newest snapshot this cache started from or wrote
    views: str = ""             # stamp of the `issues` file the views are based on ("" none)
    dirty: list[str] | None = None   # entities touched since those views (None: all of them)


class _Stamped(msgspec.Struct, array_like=True):
    generation: str
    body: msgspec.Raw


def issue_view(ent: Entity, actor_names: dict[str, str] | None = None) -> IssueView:
    return IssueView(ent.id, ent.get("title", ""), ent.get("state", "open"),
                     ent.members("labels"), ent.members("assignees"),
                     iso(ent.created_at), iso(ent.updated_at),
                     (actor_names or {}).get(ent.created_by, ent.created_by), len(ent.comments))


class Cache:
    """Loads the projection for the current frontier, reading only what changed since last time."""

    def __init__(self, store: Store):
        self.store = store
        self.dir = os.path.join(store.grite_dir, "cache")
        self.problems: list[Problem] = []
        self.rebuilt = False   # True when this call replayed every log from scratch
        self.progress = None   # told the events replayed so far during a full replay (a TTY line)
        self.from_snapshot: snapshot.Snapshot | None = None   # what the last rebuild started from
        self.from_snapshot_events = 0                          # and how many events that gave it
        self.frontier: dict[str, str] = {}   # the log tips the last answer was projected at
        self.generation = ""                  # the cache generation the last answer came from
        self.views_stamp = ""                 # the issue views the last issues() answer came from
        # True once the cache directory could not be written (a read-only .git, a full disk):
        # answers are then computed in memory and nothing is written.
        self.read_only = False

    def _path(self, name: str) -> str:
        return os.path.join(self.dir, name)

    def _read_meta(self) -> Meta | None:
        try:
            with open(self._path("meta"), "rb") as f:
                meta = msgspec.msgpack.decode(f.read(), type=Meta)
            return meta if meta.version == CACHE_VERSION else None
        except (OSError, msgspec.DecodeError, msgspec.ValidationError):
            return None

    def _read(self, name: str, stamp: str, typ):
        """A cache file's content if it carries `stamp`, else None."""
        try:
            with open(self._path(name), "rb") as f:
                stamped = msgspec.msgpack.decode(f.read(), type=_Stamped)
            if not stamp or stamped.generation != stamp:
                return None
            if typ is State:   # entities stay bytes until used: see state.Entities
                return msgspec.msgpack.decode(stamped.body, type=StoredState).loaded()
            with no_gc():   # millions of small acyclic objects: GC passes only cost time
                return msgspec.msgpack.decode(stamped.body, type=typ)
        except (OSError, msgspec.DecodeError, msgspec.ValidationError):
            return None

    def _answered(self, meta: Meta) -> None:
        self.problems, self.frontier, self.generation = meta.problems, meta.frontier, meta.generation

    def seen_lamport(self) -> int:
        """Highest Lamport clock the cache has seen, without loading the state (cheap)."""
        meta = self._read_meta()
        return meta.max_lamport if meta else 0

    def state(self) -> State:
        """The projection at the current frontier (a warm call reads one file, takes no lock)."""
        meta = self._read_meta()
        if meta is not None and meta.frontier == self.store.log_tips():
            state = self._read("state", meta.generation, State)
            if state is not None:
                self._answered(meta)
                return state
        with self._locked():
            return self._current()[1]

    def issues(self) -> list[IssueView]:
        """Every issue's list view, oldest first; recomputes only what writes touched."""
        meta = self._read_meta()
        if meta is not None and meta.dirty == [] and meta.frontier == self.store.log_tips():
            views = self._read("issues", meta.views, list[IssueView])
            if views is not None:
                self._answered(meta)
                self.views_stamp = meta.views
                return views
        with self._locked():
            meta, state = self._current()
            views = self._read("issues", meta.views, list[IssueView])
            if views is None or meta.dirty != []:
                views = self._refresh_views(meta, state, views)
            self.views_stamp = meta.views
            return views

    def issue_list_json(self, state_filter: str) -> bytes:
        """`issue list --json` output for open/closed/all, kept pre-encoded beside the views.

        A warm call is one frontier check and one file read, whatever the number of issues.
        """
        path = self._path(f"list-{state_filter}.json")
        meta = self._read_meta()
        if meta is not None and meta.dirty == [] and meta.views and \
                meta.frontier == self.store.log_tips():
            try:
                with open(path, "rb") as f:
                    data = f.read()
                head = meta.views.encode() + b"\n"
                if data.startswith(head):
                    self._answered(meta)
                    return data[len(head):]
            except OSError:
                pass
        views = self.issues()
        if state_filter != "all":
            views = [v for v in views if v.state == state_filter]
        body = msgspec.json.encode(views) + b"\n"
        # Stamped with the views it came from (not whatever is current by now: a writer may
        # have moved the cache on meanwhile, and then this file must not match it).
        self._write(os.path.basename(path), self.views_stamp.encode() + b"\n" + body)
        return body

    def rebuild(self, full: bool = False) -> State:
        """Rewrite the cache from the logs: from the best snapshot on, or (full) every event."""
        with self._locked():
            return self._update(None, None, self.store.log_tips(), full)[1]

    def snapshot_if_due(self, settings: snapshot.Settings) -> snapshot.Snapshot | None:
        """Write this replica's snapshot if grite.snapshotEvery events came since the last one."""
        if not (settings.enabled and settings.every):
            return None
        state = self.state()
        if self.problems:   # a snapshot would hide the skipped records for good
            return None
        meta = self._read_meta()
        covered = meta.snapshot_events if meta and meta.generation == self.generation else 0
        if state.event_count - max(covered, self._own_snapshot_events()) < settings.every:
            return None
        try:
            return self.take_snapshot()[0]
        except (GriteError, OSError):   # only speed is at stake
            return None

    def _own_snapshot_events(self) -> int:
        """Events in this replica's current snapshot (0 if none usable)."""
        from git_brat.grite import identity
        rid = identity.load_replica(self.store.grite_dir).id
        own = snapshot.read(self.store, snapshot.own_ref(rid))
        return own.meta.events if own is not None and own.meta.version == CACHE_VERSION else 0

    def take_snapshot(self) -> tuple[snapshot.Snapshot | None, bool]:
        """Commit the state at the current frontier as this replica's snapshot: (it, written?).

        Nothing is written when ours already covers exactly this frontier, or when there are
        no events at all.
        """
        from git_brat.grite import identity
        state = self.state()
        if self.problems:
            raise GriteError(f"{len(self.problems)} log records could not be read, and a snapshot "
                             f"now would leave their events out for good (see `git grite doctor`; "
                             f"once repaired, `git grite rebuild`)")
        covers = sorted(set(self.frontier.values()))
        rid = identity.load_replica(self.store.grite_dir).id
        ours = snapshot.read(self.store, snapshot.own_ref(rid))
        if ours and ours.meta.covers == covers and ours.meta.version == CACHE_VERSION:
            return ours, False
        if not covers:
            return None, False
        snap = self._write_snapshot(state, msgspec.msgpack.encode(state), covers)
        if snap is None:
            raise GriteError("another process moved this replica's snapshot meanwhile; try again")
        return snap, True

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
                if exc.errno in _UNWRITABLE:
                    self.read_only = True
                    return contextlib.nullcontext()
                raise
            return _Held(lock)
        self.read_only = True   # deleted over and over while we looked: serve from memory
        return contextlib.nullcontext()

    def _write(self, name: str, data: bytes) -> None:
        """Replace one cache file; losing the directory or write access only costs speed."""
        if self.read_only:
            return
        for _attempt in range(2):
            try:
                atomic_write(self._path(name), data)
                return
            except FileNotFoundError:   # deleted while we wrote: atomic_write makes it again
                continue
            except OSError as exc:
                if exc.errno not in _UNWRITABLE:
                    raise
                break
        self.read_only = True

    def _current(self) -> tuple[Meta, State]:
        """Under the lock: meta and state at the current frontier, extending the cache if needed."""
        tips = self.store.log_tips()
        meta = self._read_meta()   # another process may have caught up meanwhile
        state = self._read("state", meta.generation, State) if meta else None
        if state is not None and meta.frontier == tips:
            self._answered(meta)
            return meta, state
        return self._update(meta if state is not None else None, state, tips)

    def _refresh_views(self, meta: Meta, state: State, old: list[IssueView] | None) -> list[IssueView]:
        """Under the lock: bring the issue views up to date with state and record them in meta."""
        touched = set(meta.dirty) if old is not None and meta.dirty is not None else None
        views = self._issue_views(state, touched, old)
        meta.views, meta.dirty = os.urandom(8).hex(), []
        enc = msgspec.msgpack.encode
        self._write("issues", enc(_Stamped(meta.views, msgspec.Raw(enc(views)))))
        self._write("meta", enc(meta))
        return views

    def _update(self, meta: Meta | None, state: State | None, tips: dict[str, str],
                full: bool = False) -> tuple[Meta, State]:
        # Replay builds millions of small acyclic objects; a cyclic-GC pass over them (several
        # would run otherwise) costs more than the work itself.
        with no_gc():
            return self._project(meta, state, tips, full)

    def _project(self, meta: Meta | None, state: State | None, tips: dict[str, str],
                 full: bool) -> tuple[Meta, State]:
        prior = meta or self._read_meta()
        if prior is not None:   # a log ref that went backwards must not take seen events with it
            try:
                attic.keep(self.store, prior.frontier.items(), tips)
            except OSError as exc:   # a read-only repository: nothing can be kept, or lost
                if exc.errno not in _UNWRITABLE:
                    raise
        reader = LogReader(self.store)
        touched: set[str] | None = None
        if meta is None or state is None:
            settings = snapshot.settings(self.store)
            start = None if full or not settings.enabled else \
                snapshot.best(self.store, tips, CACHE_VERSION)
            if start is None:
                state, covered = self._full(reader, tips), 0
            else:
                self.from_snapshot, state = start
                # Counted from its state, not taken from its meta (anyone's writing).
                self.rebuilt, covered = True, state.event_count
                self.from_snapshot_events = covered
                covers = {c: c for c in self.from_snapshot.meta.covers}
                state, extended = self._extend(reader, state, covers, tips)
                if extended is None:   # a fence moved: replayed in full after all
                    self.from_snapshot, self.from_snapshot_events, covered = None, 0, 0
            problems = reader.problems
        else:
            settings, covered = None, meta.snapshot_events
            state, touched = self._extend(reader, state, meta.frontier, tips)
            problems = _merge_problems(meta.problems, reader.problems)
        enc = msgspec.msgpack.encode
        encoded = enc(state)
        if settings is not None and settings.every and not problems and not self.read_only and \
                state.event_count - covered >= settings.every:
            covered = max(covered, self._own_snapshot_events())
            if state.event_count - covered >= settings.every:
                covered = self._snapshot(state, encoded, tips) or covered
        # The issue views stay as they were; what this update touched is owed to them.
        views, dirty = "", None
        if meta is not None and touched is not None and meta.dirty is not None:
            views, dirty = meta.views, sorted(touched.union(meta.dirty))
        new = Meta(CACHE_VERSION, os.urandom(8).hex(), tips, state.max_lamport, problems, covered,
                   views, dirty)
        self._write("state", enc(_Stamped(new.generation, msgspec.Raw(encoded))))
        self._write("meta", enc(new))
        self._answered(new)
        return new, state

    def _extend(self, reader: LogReader, state: State, frontier: dict[str, str],
                tips: dict[str, str]) -> tuple[State, set[str] | None]:
        """Apply what tips have beyond frontier: (state, touched entity ids, None if replayed)."""
        changed = [sha for ref, sha in tips.items() if frontier.get(ref) != sha]
        touched: set[str] = set()
        for _sha, batch in reader.batches(reader.new_commits(changed, frontier.values())):
            for e in batch.events:
                touched.add(e.entity)
                if not state.apply(e):   # a fence moved: replay everything in canonical order
                    return self._full(reader, tips), None
        return state, touched

    def _snapshot(self, state: State, encoded: bytes, tips: dict[str, str]) -> int:
        """Commit a snapshot of state; the events it covers (0 if it could not be written)."""
        try:   # only speed is at stake: a snapshot that cannot be written is not an error
            snap = self._write_snapshot(state, encoded, list(tips.values()))
        except (GriteError, OSError):
            return 0
        return snap.meta.events if snap else 0

    def _write_snapshot(self, state: State, encoded: bytes, covers: list[str]):
        from git_brat.grite import identity
        ident = identity.load(self.store.grite_dir)
        return snapshot.write(self.store, ident.replica.id, ident.git_author, state, encoded,
                              covers, CACHE_VERSION)

    def _full(self, reader: LogReader, tips: dict[str, str]) -> State:
        self.rebuilt = True
        try:
            return replay_stream(reader.all_batches(tips.values()), self.progress)
        except LogUnreadable:   # start again commit by commit, naming what is skipped
            return replay_stream(reader.careful_batches(tips.values()), self.progress)

    def _issue_views(self, state: State, touched: set[str] | None,
                     old: list[IssueView] | None) -> list[IssueView]:
        names = actor_names(state)
        if old is not None and touched is not None and not any(
                state.kinds.get(t) == "actor" for t in touched):
            by_id = {v.id: v for v in old}
            for eid in touched:
                ent = state.entities.get(eid)
                if ent is not None and ent.created and ent.kind == "issue":
                    by_id[eid] = issue_view(ent, names)
            views = list(by_id.values())
        else:
            views = [issue_view(ent, names) for ent in state.of_kind("issue")]
        views.sort(key=lambda v: (v.created_at, v.id))
        return views


_UNWRITABLE = {errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EDQUOT}


class _Held:
    """Context manager releasing an already acquired portalocker lock."""

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


def _lock(path: str):
    """Exclusive lock on the cache (polling, so a wedged holder gives an error, not a hang)."""
    import portalocker
    return portalocker.Lock(path, mode="a", timeout=60, check_interval=0.01,
                            flags=portalocker.LOCK_EX | portalocker.LOCK_NB)


def actor_names(state: State) -> dict[str, str]:
    """Actor id -> display name, from actor entities recorded in the log."""
    return {ent.id: ent.get("name", ent.id) for ent in state.of_kind("actor")}


def _merge_problems(old: list[Problem], new: list[Problem]) -> list[Problem]:
    seen = {p.sha for p in old}
    return old + [p for p in new if p.sha not in seen]
