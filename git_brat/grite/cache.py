"""Materialized view keyed by the frontier (tips read); disposable: deleting it changes no answer.

Files under .git/grite/cache/: `meta` (frontier, generation), `state` (the projection, for
incremental replay) and `issues` (the issue list, ready to print). All carry the same generation
so a reader never mixes files from two writers; writers hold a portalocker lock and replace
each file atomically.
"""

from __future__ import annotations

import os
from datetime import datetime

import msgspec

from git_brat.grite import attic
from git_brat.grite.files import atomic_write
from git_brat.grite.gitstore import Store
from git_brat.grite.log import LogReader, Problem
from git_brat.grite.state import Entity, State, StoredState, iso, no_gc, replay

CACHE_VERSION = 3   # 2: entities decoded lazily, kinds index; 3: dep_sources index


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
        self.frontier: dict[str, str] = {}   # the log tips the last answer was projected at
        self.generation = ""                  # the cache generation the last answer came from

    def _path(self, name: str) -> str:
        return os.path.join(self.dir, name)

    def _read_meta(self) -> Meta | None:
        try:
            with open(self._path("meta"), "rb") as f:
                meta = msgspec.msgpack.decode(f.read(), type=Meta)
            return meta if meta.version == CACHE_VERSION else None
        except (OSError, msgspec.DecodeError, msgspec.ValidationError):
            return None

    def _read(self, name: str, meta: Meta, typ):
        try:
            with open(self._path(name), "rb") as f:
                stamped = msgspec.msgpack.decode(f.read(), type=_Stamped)
            if stamped.generation != meta.generation:
                return None
            if typ is State:   # entities stay bytes until used: see state.Entities
                return msgspec.msgpack.decode(stamped.body, type=StoredState).loaded()
            with no_gc():   # millions of small acyclic objects: GC passes only cost time
                return msgspec.msgpack.decode(stamped.body, type=typ)
        except (OSError, msgspec.DecodeError, msgspec.ValidationError):
            return None

    def seen_lamport(self) -> int:
        """Highest Lamport clock the cache has seen, without loading the state (cheap)."""
        meta = self._read_meta()
        return meta.max_lamport if meta else 0

    def state(self) -> State:
        return self._load("state", State)

    def issues(self) -> list[IssueView]:
        return self._load("issues", list[IssueView])

    def issue_list_json(self, state_filter: str) -> bytes:
        """`issue list --json` output for open/closed/all, kept pre-encoded beside the views.

        A warm call is one frontier check and one file read, whatever the number of issues.
        """
        path = self._path(f"list-{state_filter}.json")
        meta = self._read_meta()
        if meta is not None and meta.frontier == self.store.log_tips():
            try:
                with open(path, "rb") as f:
                    data = f.read()
                head = meta.generation.encode() + b"\n"
                if data.startswith(head):
                    self.problems = meta.problems
                    return data[len(head):]
            except OSError:
                pass
        views = self.issues()
        if state_filter != "all":
            views = [v for v in views if v.state == state_filter]
        body = msgspec.json.encode(views) + b"\n"
        # Stamped with the generation the views came from (not whatever is current by now: a
        # writer may have moved the cache on meanwhile, and then this file must not match it).
        atomic_write(path, self.generation.encode() + b"\n" + body)
        return body

    def rebuild(self) -> State:
        """Replay every log from scratch and rewrite the cache."""
        os.makedirs(self.dir, exist_ok=True)
        with _lock(self._path("lock")):
            return self._update(None, None, self.store.log_tips())[0]

    def _load(self, part: str, typ):
        tips = self.store.log_tips()
        meta = self._read_meta()
        if meta is not None and meta.frontier == tips:
            value = self._read(part, meta, typ)
            if value is not None:
                self.problems, self.frontier, self.generation = meta.problems, tips, meta.generation
                return value
        os.makedirs(self.dir, exist_ok=True)
        with _lock(self._path("lock")):
            tips = self.store.log_tips()
            meta = self._read_meta()   # another process may have caught up meanwhile
            state = self._read("state", meta, State) if meta else None
            if state is not None and meta.frontier == tips:
                value = state if part == "state" else self._read(part, meta, typ)
                if value is not None:
                    self.problems, self.frontier, self.generation = meta.problems, tips, meta.generation
                    return value
            state, issues = self._update(meta if state is not None else None, state, tips)
            return state if part == "state" else issues

    def _update(self, meta: Meta | None, state: State | None, tips: dict[str, str]):
        # Replay builds millions of small acyclic objects; a cyclic-GC pass over them (several
        # would run otherwise) costs more than the work itself.
        with no_gc():
            return self._project(meta, state, tips)

    def _project(self, meta: Meta | None, state: State | None, tips: dict[str, str]):
        prior = meta or self._read_meta()
        if prior is not None:   # a log ref that went backwards must not take seen events with it
            attic.keep(self.store, prior.frontier.items(), tips)
        reader = LogReader(self.store)
        if meta is None or state is None:
            state, touched = self._full(reader, tips), None
            problems = reader.problems
        else:
            changed = [sha for ref, sha in tips.items() if meta.frontier.get(ref) != sha]
            commits = reader.new_commits(changed, meta.frontier.values())
            touched = set()
            for _sha, batch in reader.batches(commits):
                for e in batch.events:
                    touched.add(e.entity)
                    if not state.apply(e):
                        touched = None
                        break
                if touched is None:
                    break
            if touched is None:   # a fence moved: replay everything in canonical order
                reader = LogReader(self.store)
                state = self._full(reader, tips)
            problems = _merge_problems(meta.problems, reader.problems)
        self.problems, self.frontier = problems, tips
        old = self._read("issues", meta, list[IssueView]) if meta and touched is not None else None
        issues = self._issue_views(state, touched, old)
        generation = self.generation = os.urandom(8).hex()
        enc = msgspec.msgpack.encode
        atomic_write(self._path("state"), enc(_Stamped(generation, msgspec.Raw(enc(state)))))
        atomic_write(self._path("issues"), enc(_Stamped(generation, msgspec.Raw(enc(issues)))))
        atomic_write(self._path("meta"), enc(Meta(CACHE_VERSION, generation, tips,
                                                  state.max_lamport, problems)))
        return state, issues

    def _full(self, reader: LogReader, tips: dict[str, str]) -> State:
        self.rebuilt = True
        # Apply while git is still streaming blobs; arrival order is fine (the projection is a
        # CRDT) unless a fence moves backwards, and then the canonical replay decides.
        state, events, in_order = State(), [], True
        with no_gc():
            for _sha, batch in reader.all_batches(tips.values()):
                events += batch.events
                if in_order:
                    for e in batch.events:
                        if not state.apply(e):
                            in_order = False
                            break
        return state if in_order else replay(events)

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
