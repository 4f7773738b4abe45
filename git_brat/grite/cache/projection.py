"""Materialized view keyed by the frontier (tips read); disposable: deleting it changes no answer.

The cache's answers: the projection at the current frontier, kept in the file of cachefile.py (one
row per entity, updated in place, in one transaction, for just the entities a batch touched) and
`list-*.json` beside it, `issue list --json` answers stamped with the generation they came from.
A cache with no usable file starts from the best snapshot, and takes in that snapshot's settled
(cold) part when an answer needs it. Writers hold a file lock; readers take none.
"""

from __future__ import annotations

import hashlib
import os
from typing import TYPE_CHECKING

import msgspec

from git_brat import process
from git_brat.grite.log import attic
from git_brat.errors import GriteError
from git_brat.files import ensure_dir
from git_brat.git.store import Store
from git_brat.grite.cache.cachefile import (CACHE_VERSION, UNWRITABLE, CacheFile, ColdPending,
                                            Meta)
from git_brat.grite.log.wal import LogReader, LogUnreadable, Problem
from git_brat.grite.model.kinds import ACTOR, ISSUE, settled
from git_brat.grite.model.issueview import IssueView, decode_stored, issue_view, join_stored
from git_brat.grite.model.state import State, no_gc, replay_stream
from git_brat.grite.log.refs import grite_dir, log_tips

if TYPE_CHECKING:
    from git_brat.grite.cache import snapshot

__all__ = ["CACHE_VERSION", "Cache", "ColdPending", "ColdUnavailable", "Meta", "actor_names",
           "cold_cutoff", "in_memory"]

DEFAULT_COLD_DAYS = 30   # grite.coldAfterDays: closed issues untouched this long leave the lists
DAY_MS = 86_400_000


class Cache(CacheFile):
    """Loads the projection for the current frontier, reading only what changed since last time."""

    def __init__(self, store: Store):
        super().__init__(store)
        self._leases = None
        self.rebuilt = False   # True when this call replayed every log from scratch
        self.progress = None   # told the events replayed so far during a full replay (a TTY line)
        self.from_snapshot: snapshot.Snapshot | None = None   # what the last rebuild started from
        self.from_snapshot_events = 0                          # and how many events that gave it
        # Entities kept between states by a long-lived reader (db.Decoded; the board's): None
        # for everyone else.
        self.decoded = None

    @property
    def leases(self):
        """The lease records replay believes a lease token from (made when first needed: a
        warm answer never judges one)."""
        if self._leases is None:
            from git_brat.grite.cache.leases import LeaseRecords
            self._leases = LeaseRecords(self.store)
        return self._leases

    # -- answers -------------------------------------------------------------------

    def state(self, hot_before: int = 0) -> State:
        """The projection at the current frontier (a warm call reads one row, takes no lock).

        hot_before (ms): the caller reads no entity that is settled and unchanged since then,
        so a cache still waiting for its snapshot's cold part answers without it; otherwise
        that part is fetched and merged first (see cold)."""
        warm = self._warm(hot_before)
        if warm is not None:
            return warm
        with self._locked():
            state = self._current(hot_before)[1]
        if self.decoded is not None and self._stored:
            # A reader keeping decoded entities is given the file's committed rows, never a
            # state replay wrote into (Decoded hands out an entity only for the bytes it was
            # decoded from).
            return self._warm(hot_before) or state
        return state

    def _warm(self, hot_before: int) -> State | None:
        """The file's state, if it is projected at the current frontier (no lock taken)."""
        from git_brat.grite.cache import db as cachedb
        conn = self._db()
        if conn is not None:
            meta = self._meta_of(conn)
            if meta is not None and meta.frontier == log_tips(self.store) and \
                    _enough(meta, hot_before):
                state = cachedb.open_state(conn, meta.max_lamport, meta.event_count,
                                           self.decoded)
                if not self.leases_moved(state):
                    self._answered(meta)
                    self._stored = True
                    return state
        return None

    def issues(self, cold_before: int = 0) -> list[IssueView]:
        """Every issue's list view, oldest first; closed ones untouched since cold_before left out."""
        state, stored = self._stored_views(cold_before)
        if stored is not None:
            return decode_stored(stored, actor_names(state))
        names = actor_names(state)
        ents = state.of_kind(ISSUE, settled(ISSUE), cold_before)
        return sorted((issue_view(e, names) for e in ents), key=lambda v: (v.created_at, v.id))

    def _stored_views(self, cold_before: int) -> tuple[State, list[bytes] | None]:
        """The state, and the file's pre-encoded views of issues() (None: compute them)."""
        import sqlite3
        from git_brat.grite.cache import db as cachedb
        state = self.state(hot_before=cold_before)
        conn = self._conn
        if self._stored and conn is not None:
            done = settled(ISSUE)
            where, args = (f"AND NOT (status IN ({','.join('?' * len(done))}) AND updated < ?)",
                           (*done, cold_before)) if cold_before else ("", ())
            try:
                views = cachedb.issue_views(conn, where, args)
                if all(v is not None for v in views):
                    return state, views
            except sqlite3.Error:
                self._unusable()
        return state, None

    def issue_list_json(self, state_filter: str, cold_before: int = 0) -> bytes:
        """`issue list --json` output for open/closed/all, kept pre-encoded beside the file.

        A warm call is one frontier check and one file read, whatever the number of issues.
        """
        path = self._path(f"list-{state_filter}-{cold_before}.json")
        meta = self._hint()
        if meta is not None and meta.frontier == log_tips(self.store):
            try:
                with open(path, "rb") as f:
                    data = f.read()
                head = meta.generation.encode() + b"\n"
                if data.startswith(head):
                    self._answered(meta)
                    return data[len(head):]
            except OSError:
                pass
        state, stored = self._stored_views(cold_before)
        if stored is not None:   # (spliced as they are: decoding 31k views to encode them again
            body = join_stored(stored, actor_names(state), state_filter)   # took 0.3 s)
        else:
            views = self.issues(cold_before)
            if state_filter != "all":
                views = [v for v in views if v.state == state_filter]
            body = msgspec.json.encode(views)
        body += b"\n"
        # Stamped with the generation it came from (not whatever is current by now: a writer may
        # have moved the cache on meanwhile, and then this file must not match it).
        if self._stored:
            for old in _stale_lists(self.dir, path):
                _unlink(old)
            self._write(os.path.basename(path), self.generation.encode() + b"\n" + body)
        return body

    def rebuild(self, full: bool = False) -> State:
        """Rewrite the cache from the logs: from the best snapshot on, or (full) every event."""
        with self._locked():
            return self._update(None, None, log_tips(self.store), full)[1]

    def snapshot_if_due(self, settings: snapshot.Settings) -> snapshot.Snapshot | None:
        """Write this replica's snapshot if grite.snapshotEvery events came since the last one."""
        if not (settings.enabled and settings.every):
            return None
        state = self.state()
        if self.problems or self.disputes:   # (see take_snapshot)
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
        from git_brat.grite.log import identity
        from git_brat.grite.cache import snapshot
        rid = identity.load_replica(grite_dir(self.store)).id
        own = snapshot.read(self.store, snapshot.own_ref(rid))
        return own.meta.events if own is not None and own.meta.version == CACHE_VERSION else 0

    def take_snapshot(self) -> tuple[snapshot.Snapshot | None, bool]:
        """Commit the state at the current frontier as this replica's snapshot: (it, written?).

        Nothing is written when ours already covers exactly this frontier, or when there are
        no events at all.
        """
        from git_brat.grite.log import identity
        from git_brat.grite.cache import snapshot
        state = self.state()
        if self.problems:
            raise GriteError(f"{len(self.problems)} log records could not be read, and a snapshot "
                             f"now would leave their events out for good (see `git grite doctor`; "
                             f"once repaired, `git grite rebuild`)")
        if self.disputes:   # (replay here shows a disputed actor's words as their writers')
            raise GriteError("an actor is disputed on this clone (`git grite doctor` names it and how "
                             "it ends): a snapshot now would carry this clone's reading of its "
                             "words to clones that see no dispute; settle it first")
        covers = sorted(set(self.frontier.values()))
        rid = identity.load_replica(grite_dir(self.store)).id
        ours = snapshot.read(self.store, snapshot.own_ref(rid))
        if ours and ours.meta.covers == covers and ours.meta.version == CACHE_VERSION:
            return ours, False
        if not covers:
            return None, False
        snap = self._write_snapshot(state, covers, self.generation)
        if snap is None:
            raise GriteError("another process moved this replica's snapshot meanwhile; try again")
        return snap, True

    # -- projecting ---------------------------------------------------------------

    def _current(self, hot_before: int = 0) -> tuple[Meta, State]:
        """Under the lock: meta and state at the current frontier, extending the cache if needed
        (and taking in its snapshot's cold part, unless hot_before says it is not needed)."""
        from git_brat.grite.cache import db as cachedb
        tips = log_tips(self.store)
        conn = self._db()
        meta = self._meta_of(conn, fresh=True) if conn is not None else None   # caught up meanwhile?
        state = cachedb.open_state(conn, meta.max_lamport, meta.event_count) \
            if meta is not None and self._conn is not None else None
        if state is not None and meta.frontier == tips and _enough(meta, hot_before):
            moved = self.leases_moved(state)
            if not moved:
                self._answered(meta)
                self._stored = True
                return meta, state
            return self._rejudge(meta, state, tips, moved)
        meta, state = self._update(meta if state is not None else None, state, tips,
                                   hot_before=hot_before)
        moved = self.leases_moved(state)   # (a snapshot's judgements were made on its writer's)
        return self._rejudge(meta, state, tips, moved) if moved else (meta, state)

    def leases_moved(self, state: State) -> dict[str, list[str]]:
        """The resources whose lease tokens were judged on records that have changed since
        (resource -> their tips now): few, only those whose judgement more records could change."""
        basis = state.lease_basis
        if not basis:   # (a stored state: one query of an empty space)
            return {}
        moved = {}
        for res, was in basis.items():
            now = self.leases.tips(res)
            if now != was:
                moved[res] = now
        return moved

    def _rejudge(self, meta: Meta, state: State, tips: dict[str, str],
                 moved: dict[str, list[str]]) -> tuple[Meta, State]:
        """Under the lock: judge those resources' tokens again, on the records now here; what
        cannot be decided that way (an applied event turns stale, a token believed before is
        denied now) is replayed in full."""
        with self.leases.many():
            judged = state.rejudge(self.leases.judge, moved)
        if not judged:
            return self._update(None, None, tips, full=True)
        new = Meta(CACHE_VERSION, os.urandom(8).hex(), meta.frontier, state.max_lamport,
                   state.event_count, meta.problems, meta.snapshot_events, meta.cold,
                   meta.disputes)
        self._store(new, state, set())
        self._answered(new)
        return new, state

    def extend_to(self, tips: dict[str, str]) -> None:
        """Take in these log tips only: a fetch's import capped by grite.maxFetchRefs. Any
        later read compares the frontier with every log ref, so it takes in the rest."""
        from git_brat.grite.cache import db as cachedb
        with self._locked():
            conn = self._db()
            meta = self._meta_of(conn, fresh=True) if conn is not None else None
            state = cachedb.open_state(conn, meta.max_lamport, meta.event_count) \
                if meta is not None and self._conn is not None else None
            if state is None or meta.frontier != tips:
                self._update(meta if state is not None else None, state, tips)

    def _update(self, meta: Meta | None, state: State | None, tips: dict[str, str],
                full: bool = False, hot_before: int = 0) -> tuple[Meta, State]:
        # Replay builds millions of small acyclic objects; a cyclic-GC pass over them (several
        # would run otherwise) costs more than the work itself.
        with no_gc():
            return self._project(meta, state, tips, full, hot_before)

    def _project(self, meta: Meta | None, state: State | None, tips: dict[str, str],
                 full: bool, hot_before: int = 0) -> tuple[Meta, State]:
        prior = meta or self._read_meta()
        if prior is not None:   # a log ref that went backwards must not take seen events with it
            try:
                attic.keep(self.store, prior.frontier.items(), tips)
            except OSError as exc:   # a read-only repository: nothing can be kept, or lost
                if exc.errno not in UNWRITABLE:
                    raise
        reader = LogReader(self.store, tips=tips)   # (judged up to these tips, no further)
        touched: set[str] | None = None
        pending: ColdPending | None = None
        disputed = disputes_mark(reader)
        if meta is not None and meta.disputes != disputed:
            full = True   # an actor's words already applied are now another's, or the reverse
        if meta is None or state is None or full:
            from git_brat.grite.cache import snapshot   # (not for an extension: every write is one)
            settings = snapshot.settings(self.store)
            # (A snapshot's writer may not see the disputes this clone sees: replayed here.)
            start = None if full or not settings.enabled or disputed else \
                self._adopt_snapshot(tips)
            if start is None:
                why = "" if full else (" and no snapshot here covers what came before (off by "
                                       "grite.snapshots, refused by doctor, in another format, "
                                       "or failing its checks)")
                state, covered = self._full(reader, tips, why), 0
            else:
                self.from_snapshot, state, frontier, pending = start
                # Counted from its state, not taken from its meta (anyone's writing).
                self.rebuilt, covered = True, state.event_count
                self.from_snapshot_events = covered
                state, touched, pending = self._extend_hot(reader, state, frontier, tips,
                                                           pending, hot_before)
                if touched is None:   # a fence moved, or the cold part failed: replayed in full
                    self.from_snapshot, self.from_snapshot_events, covered = None, 0, 0
            problems = reader.problems
        else:
            settings, covered = None, meta.snapshot_events
            state, touched, pending = self._extend_hot(reader, state, meta.frontier, tips,
                                                       meta.cold, hot_before)
            problems = _merge_problems(meta.problems, reader.problems)
        new = Meta(CACHE_VERSION, os.urandom(8).hex(), tips, state.max_lamport, state.event_count,
                   problems, covered, pending, disputed)
        self._store(new, state, touched)
        # (A snapshot of a cache that lacks its cold rows would leave them out for good.)
        if settings is not None and settings.every and not (problems or disputed) and \
                not self.read_only and pending is None and state.event_count - covered >= settings.every:
            covered = max(covered, self._own_snapshot_events())
            if state.event_count - covered >= settings.every and \
                    self._snapshot(state, tips, new.generation):
                new.snapshot_events = state.event_count
                self._store_meta(new)
        self._answered(new)
        return new, state

    def _extend_hot(self, reader: LogReader, state: State, frontier: dict[str, str],
                    tips: dict[str, str], pending: ColdPending | None, hot_before: int
                    ) -> tuple[State, set[str] | None, ColdPending | None]:
        """_extend, taking in the cold part first unless hot_before leaves it out and no new
        event touches a row in it: (state, touched, what is still pending)."""
        from git_brat.grite.cache import db as cachedb
        changed = [sha for ref, sha in tips.items() if frontier.get(ref) != sha]
        # (Only this replica's own log moved, by its own writes: read in-process, faster.)
        batches = reader.batches(reader.new_commits(changed, frontier.values()),
                                 fetched=any(ref != "refs/grite/wal" for ref in changed))
        if pending is not None:   # (read whole only then: a long absence streams)
            batches = list(batches)
            if not _enough_for(pending, hot_before) or cachedb.listed_cold(
                    self._conn, {e.entity for _sha, b in batches for e in b.events}):
                try:
                    state = self._take_cold(pending, tips)
                except _ReplayInstead as why:
                    return self._full(reader, tips, str(why)), None, None
                pending = None
        state, touched = self._extend(reader, state, tips, batches)
        return state, touched, pending if touched is not None else None

    def _take_cold(self, pending: ColdPending, tips: dict[str, str]) -> State:
        """Under the lock: fetch the cold part if need be and merge its rows into the file, in
        one transaction with a meta that no longer waits for it; the file's state then.
        ColdUnavailable if it cannot be fetched; _ReplayInstead if it cannot be used."""
        import sqlite3
        from git_brat.grite.cache import db as cachedb
        from git_brat.grite.cache import cold
        from git_brat.grite.log import cut
        from git_brat.grite.cache import snapshot
        snap = snapshot.read(self.store, b"", pending.snapshot.encode())
        if self._conn is None or self.read_only:
            raise _ReplayInstead(" (the cache file cannot be written here)")
        if snap is None or snap.meta.cold is None or snap.commit in snapshot.rejected(self.store):
            raise _ReplayInstead(" (the snapshot this cache started from is gone or refused)")
        why = cold.fetch(self.store, snap.meta.cold.commit, pending.remote)
        if why is not None:
            if not cut.cut(self.store, tips.values()):   # (deepened since: replay it all)
                raise _ReplayInstead(f" (the snapshot's cold part cannot be fetched: {why})")
            raise ColdUnavailable(
                f"this clone has the recent part of the snapshot it was made from; its "
                f"{pending.rows} settled entities are still on the remote and could not be "
                f"fetched ({why}); commands that list only recent work still answer, and "
                f"`git grite fetch-cold` fetches them when the remote can be reached")
        meta = self._meta_of(self._conn, fresh=True)
        if meta is None or meta.cold is None:
            raise _ReplayInstead(" (the cache changed under its lock)")
        meta.cold, meta.generation = None, os.urandom(8).hex()
        raw = msgspec.msgpack.encode(meta)
        try:
            merged = snapshot.merge_cold(self.store, snap, self._conn, raw)
        except sqlite3.Error as exc:
            raise _ReplayInstead(f" (the cache file could not take the cold part: {exc})")
        if not merged:
            snapshot.reject(self.store, snap.commit)
            raise _ReplayInstead(" (the snapshot's cold part failed its checks)")
        self._write("meta", raw)
        return cachedb.open_state(self._conn, meta.max_lamport, meta.event_count)

    def _adopt_snapshot(self, tips: dict[str, str]):
        """The best snapshot made this cache's content, at the frontier of the tips it covers:
        (it, the state, that frontier, its cold part if still to come), or None. A new cache
        file is the snapshot's own file; one that exists takes its rows. Either way a crash
        after this leaves a cache that is simply behind: the next command extends it from
        that frontier (and takes in the cold part)."""
        import sqlite3
        from git_brat.grite.cache import db as cachedb
        from git_brat.grite.cache import snapdb
        from git_brat.grite.cache import snapshot
        if self.read_only:
            found = snapshot.best_state(self.store, tips, CACHE_VERSION)
            if found is None:
                return None
            return found[0], found[1], {c: c for c in found[0].meta.covers}, None
        ensure_dir(self.dir)
        tmp = self.path + ".snapshot"
        try:
            start = snapshot.best(self.store, tips, CACHE_VERSION, tmp)
            if start is None:
                return None
            snap = start.snap
            frontier = {c: c for c in snap.meta.covers}
            pending = None if snap.meta.cold is None else ColdPending(
                snap.commit, snap.meta.cold.rows, snap.meta.cold.before, snapshot.remote_of(snap))
            raw = msgspec.msgpack.encode(Meta(CACHE_VERSION, os.urandom(8).hex(), frontier,
                                              start.max_lamport, start.events, [], start.events,
                                              pending))
            snapdb.set_meta(tmp, raw)
            if not self._put(lambda: cachedb.place(tmp, self.path)):
                conn = self._db(create=True)
                if conn is not None and not self.read_only:
                    try:
                        snapdb.replace_rows(conn, tmp, raw)
                    except sqlite3.Error:
                        self._unusable()
            if self._conn is None or self.read_only:   # nothing written: read it from tmp
                state = snapshot.opened(self.store, tmp, start)   # (cold part and all)
                return None if state is None else (snap, state, frontier, None)
            self._write("meta", raw)
            return snap, cachedb.open_state(self._conn, start.max_lamport, start.events), \
                frontier, pending
        finally:
            cachedb.remove(tmp)

    def _extend(self, reader: LogReader, state: State, tips: dict[str, str],
                batches) -> tuple[State, set[str] | None]:
        """Apply the batches past the frontier: (state, touched entity ids, None if replayed)."""
        touched: set[str] = set()
        judge = self.leases.judge
        with self.leases.many():
            for _sha, batch in batches:
                for e in batch.events:
                    touched.add(e.entity)
                    if not state.apply(e, judge):   # a fence moved: replay all in order
                        return self._full(reader, tips, " (a lease fence moved back: the order "
                                          "of every event decides)"), None
        return state, touched

    def _snapshot(self, state: State, tips: dict[str, str], generation: str) -> bool:
        """Commit a snapshot of state; whether it was written."""
        try:   # only speed is at stake: a snapshot that cannot be written is not an error
            return self._write_snapshot(state, list(tips.values()), generation) is not None
        except (GriteError, OSError):
            return False

    def _write_snapshot(self, state: State, covers: list[str], generation: str):
        """Commit state, which the cache file holds as `generation` (else it is written out
        from memory), as this replica's snapshot; what is cold by grite.coldAfterDays held
        apart, so that a clone made from it is ready before that arrives."""
        import sqlite3
        from git_brat.grite.log import identity
        from git_brat.grite.cache import snapshot
        ident = identity.load(grite_dir(self.store))
        args = (self.store, ident.replica.id, ident.git_author)
        before = cold_cutoff(self.store)
        if not self.read_only and os.path.exists(self.path):
            try:
                written = snapshot.write_from(*args, state.event_count, len(state.kinds),
                                              self.path, covers, CACHE_VERSION, before, generation)
                if written is not False:
                    return written
            except sqlite3.Error:
                pass   # written out from memory instead
        return snapshot.write_state(*args, in_memory(state), covers, CACHE_VERSION, before)

    def _full(self, reader: LogReader, tips: dict[str, str], why: str = "") -> State:
        from git_brat.grite.log import cut
        cut.refuse_if_cut(self.store, tips.values(), "replay every log from its start", why)
        self.rebuilt = True
        with self.leases.many():
            try:
                return replay_stream(reader.all_batches(tips.values()), self.progress,
                                     judge=self.leases.judge)
            except LogUnreadable:   # start again commit by commit, naming what is skipped
                return replay_stream(reader.careful_batches(tips.values()), self.progress,
                                     judge=self.leases.judge)


def in_memory(state: State) -> State:
    """state with every table a plain dict (a stored state's rows read whole)."""
    from git_brat.grite.cache import db as cachedb
    if not cachedb.is_stored(state):
        return state
    tables = {name: dict(getattr(state, name).items()) for name in cachedb.SPACES}
    return State(entities=dict(state.entities.items()), kinds=dict(state.kinds.items()),
                 max_lamport=state.max_lamport, event_count=state.event_count, **tables)


def _stale_lists(directory: str, keep: str) -> list[str]:
    """Pre-encoded lists for other cutoffs of the same filter (a day has passed since)."""
    prefix = os.path.basename(keep).rsplit("-", 1)[0] + "-"
    try:
        return [os.path.join(directory, n) for n in os.listdir(directory)
                if n.startswith(prefix) and n.endswith(".json") and os.path.join(directory, n) != keep]
    except OSError:
        return []


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


class ColdUnavailable(GriteError):
    """The cold part of the snapshot this cache started from was needed and cannot be had."""


class _ReplayInstead(Exception):
    """The cold part cannot be used: replay every log instead (the reason follows `why`)."""


def _enough_for(pending: ColdPending, hot_before: int) -> bool:
    """Whether an answer that leaves out what is settled before hot_before needs none of the
    pending rows (they are settled before pending.before)."""
    return bool(hot_before) and hot_before >= pending.before


def _enough(meta: Meta, hot_before: int) -> bool:
    return meta.cold is None or _enough_for(meta.cold, hot_before)


def cold_cutoff(store: Store, now_ms: int | None = None) -> int:
    """ms before which a closed issue is cold (0: none is), by whole days (grite.coldAfterDays)."""
    found = store.config_matching(r"^grite\.coldafterdays$").get("grite.coldafterdays")
    try:
        days = DEFAULT_COLD_DAYS if found is None else int(found)
    except ValueError:
        raise GriteError(f"grite.coldAfterDays must be a number of days, not {found!r}")
    if days <= 0:
        return 0
    today = (now_ms if now_ms is not None else process.now_ms()) // DAY_MS * DAY_MS
    return today - days * DAY_MS


def actor_names(state: State) -> dict[str, str]:
    """Actor id -> display name, from actor entities recorded in the log. The words of a
    disputed actor are shown as their writer's (model/disputes), whatever name it declared."""
    from git_brat.grite.model import disputes
    names = {ent.id: ent.get("name", ent.id) for ent in state.of_kind(ACTOR)}
    attributed = [i for i in names if disputes.is_attributed(i)]
    if not attributed:   # (the common case: a plain dict, read once per row of a long list)
        return names
    names.update((i, disputes.describe(i)) for i in attributed)
    return _Names(names)


class _Names(dict):
    """Actor names; an attributed id its writer never declared is described all the same."""

    def get(self, key, default=None):
        found = super().get(key, self)
        if found is not self:
            return found
        from git_brat.grite.model import disputes
        return disputes.describe(key) if disputes.is_attributed(key) else default


def disputes_mark(reader: LogReader) -> str:
    """Which actors the reader's verdicts hold disputed, and by whom ("" for none): a cache
    built under other disputes is replayed again (applied words would belong to another)."""
    reader.skip()
    if not reader.disputes:
        return ""
    text = " ".join(f"{a}={h}" for a, h in sorted(reader.disputes.items()))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _merge_problems(old: list[Problem], new: list[Problem]) -> list[Problem]:
    seen = {p.sha for p in old}
    return old + [p for p in new if p.sha not in seen]
