"""Replay: a CRDT projection of events into entities; same events in any order, same state."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Iterable

import msgspec

from git_brat.grite.model import events as ev
from git_brat.grite.model.kinds import GROUP_FIELDS, KINDS, STATUS_FIELDS


class Entity(msgspec.Struct):
    """Projected entity. Every field is a join of events, so application order never matters."""
    id: str
    kind: str = ""
    created: bool = False               # False while only later events have arrived (held)
    create_stamp: tuple[int, str, str] | None = None
    created_at: int = 0                 # ms
    created_by: str = ""
    updated_at: int = 0                 # ms: max over applied events
    fields: dict[str, tuple[Any, int, str, str]] = {}   # name -> (value, lamport, actor, eid)
    sets: dict[str, dict[str, list[str]]] = {}          # set -> value -> live add tags
    tombs: list[str] = []               # add tags cancelled by removes (kept sorted)
    comments: dict[str, tuple[int, str, int, str]] = {}  # eid -> (lamport, actor, ts, body)
    # Every status change, kept with the entity so its history never needs the whole log:
    # eid -> (lamport, actor, ts, the event's status, status_from, reason and forced fields).
    transitions: dict[str, tuple[int, str, int, dict[str, Any]]] = {}
    # Comments an agent made through its session: comment eid -> that session's id (Comment.via;
    # moves keep theirs in their transition's fields).
    vias: dict[str, str] = {}

    def get(self, name: str, default: Any = None) -> Any:
        cell = self.fields.get(name)
        return default if cell is None else cell[0]

    def members(self, set_name: str) -> list[str]:
        held = self.sets.get(set_name)   # (most entities have none: every list view asks)
        return sorted([v for v, tags in held.items() if tags]) if held else []

    def live_tags(self, set_name: str, value: str) -> list[str]:
        return list(self.sets.get(set_name, {}).get(value, ()))

    def sorted_comments(self) -> list[tuple[str, int, str, int, str]]:
        """(eid, lamport, actor, ts, body) in causal order."""
        return sorted(((eid, *c) for eid, c in self.comments.items()),
                      key=lambda c: (c[1], c[2], c[0]))


class Rejection(msgspec.Struct):
    event: str
    entity: str
    reason: str


class Held(msgspec.Struct):
    """A LeaseToken event replay did not apply as a fence (its lease's records do not grant it)."""
    resource: str
    token: int
    prev_end: int
    entity: str


# Judges a LeaseToken (resource, token, prev_end) by the lease records this clone has: (why it
# is not believed, or None; the records' tips when the answer may change as records arrive).
Judge = Callable[[str, int, int], "tuple[str | None, list[str] | None]"]


class State(msgspec.Struct):
    """Everything replay derives from the logs."""
    entities: dict[str, Entity] = {}
    kinds: dict[str, str] = {}              # id -> kind of every created entity (an index)
    # target -> entities that ever added a dependency edge to it (a superset: check membership)
    dep_sources: dict[str, list[str]] = {}
    max_lamport: int = 0
    fences: dict[str, int] = {}             # resource -> highest lease token seen
    # resource -> token -> when the lease before that token ended (LeaseToken.prev_end; 0 unknown)
    lease_ends: dict[str, dict[int, int]] = {}
    # resource -> token -> latest ts among applied events fenced with that token
    fenced_at: dict[str, dict[int, int]] = {}
    rejected: dict[str, Rejection] = {}
    # LeaseToken events not applied as fences (also in rejected), by id
    lease_held: dict[str, Held] = {}
    # resource -> the tips of its lease refs when a judgement of its tokens was made that more
    # records could change (none there yet, or a token past them): looked at again on load
    lease_basis: dict[str, list[str]] = {}
    # Events whose operation this version does not know (from a newer writer), by id: a set,
    # so reading one blob twice (two commits may share it) does not count it twice.
    unknown: dict[str, None] = {}
    event_count: int = 0

    def apply(self, e: ev.Event, judge: Judge | None = None) -> bool:
        """Apply one event; False means the state needs a full replay (a fence moved backwards).

        judge: the lease records' word on a LeaseToken; without one every token is believed."""
        self.event_count += 1
        why = ev.event_problem(e)
        if why is not None:   # (its clock never reaches max_lamport: writers stay in bounds)
            self.rejected[e.id] = Rejection(e.id, e.entity, why)
            return True
        if e.lamport > self.max_lamport:
            self.max_lamport = e.lamport
        op = e.op
        kind = type(op)
        if kind is ev.LeaseToken:
            if judge is not None:
                why, basis = judge(op.resource, op.token, op.prev_end)
                if basis is not None:
                    self.lease_basis[op.resource] = basis
                if why is not None:
                    self.rejected[e.id] = Rejection(e.id, e.entity, why)
                    self.lease_held[e.id] = Held(op.resource, op.token, op.prev_end, e.entity)
                    return True
            return self._grant(op.resource, op.token, op.prev_end)
        if e.fence is not None:
            res, tok = e.fence.resource, e.fence.token
            if self.stale(res, tok, e.ts):
                # No newer token in the reason: it would depend on arrival order.
                self.rejected[e.id] = Rejection(e.id, e.entity,
                                                f"stale fencing token {tok} for {res}")
                return True
            seen = self.fenced_at.setdefault(res, {})
            if e.ts > seen.get(tok, -1):
                seen[tok] = e.ts
        apply = _APPLY.get(kind)
        if apply is None:   # UnknownOp: an operation from a newer writer
            self.unknown[e.id] = None
            return True
        ent = self.entities.get(e.entity)
        if ent is None:
            ent = self.entities[e.entity] = Entity(e.entity)
        if e.ts > ent.updated_at:
            ent.updated_at = e.ts
        apply(ent, e, op)
        if (kind is ev.Create or kind is ev.SetFields) and ent.created and \
                (kind is ev.Create or any(f in op.fields for f in STATUS_FIELDS)):
            self._recheck(ent)
        if kind is ev.Create:
            self.kinds[e.entity] = ent.kind
        elif kind is ev.AddTo and op.name.startswith("dep:"):
            sources = self.dep_sources.setdefault(op.value, [])
            if e.entity not in sources:
                sources.append(e.entity)
        return True

    def _grant(self, res: str, tok: int, prev_end: int) -> bool:
        """A believed LeaseToken: False when an event applied under an older token is now stale."""
        if tok > self.fences.get(res, 0):
            self.fences[res] = tok
        ends = self.lease_ends.setdefault(res, {})
        if tok not in ends or prev_end < ends[tok]:
            ends[tok] = prev_end
            for old, ts in self.fenced_at.get(res, {}).items():
                if old < tok and (prev_end <= 0 or ts > prev_end):
                    return False   # an event already applied under an older token is now stale
        return True

    def rejudge(self, judge: Judge, moved: dict[str, list[str]]) -> bool:
        """Judge again the tokens of the resources whose lease records moved (resource -> tips
        now): a held one the records now grant is applied, one believed with no records that
        they now deny needs the full replay (False), as does a grant that stales an applied
        event. The basis is kept only where more records could still change an answer."""
        held = [(eid, h) for eid, h in self.lease_held.items() if h.resource in moved]
        pending = {res: False for res in moved}
        for res in moved:
            for tok, end in self.lease_ends.get(res, {}).items():
                why, basis = judge(res, tok, end)
                if why is not None:
                    return False
                pending[res] |= basis is not None
        whole = True
        for eid, h in held:
            why, basis = judge(h.resource, h.token, h.prev_end)
            pending[h.resource] |= basis is not None
            if why is None:
                self.lease_held.pop(eid)
                self.rejected.pop(eid)
                whole = self._grant(h.resource, h.token, h.prev_end) and whole
            else:
                cur = self.rejected.get(eid)
                if cur is None or cur.reason != why:
                    self.rejected[eid] = Rejection(eid, h.entity, why)
        for res, still in pending.items():
            if still:
                self.lease_basis[res] = moved[res]
            elif res in self.lease_basis:
                self.lease_basis.pop(res)
        return whole

    def _recheck(self, ent: Entity) -> None:
        """Walk an entity's status changes in stamp order through its kind's state machine:
        its status is where the legal ones lead, the others are rejected (with why).

        A function of the set of changes, so the same in any arrival order: a change that
        arrives late (lower stamp) may make a rejected later one legal, or the reverse.
        """
        rule = KINDS.get(ent.kind)
        if rule is None or rule.transitions is None:
            return
        table, field, initial = rule.transitions, rule.status, rule.initial
        changes = sorted((lam, actor, eid, f) for eid, (lam, actor, _ts, f) in ent.transitions.items()
                         if field in f)
        created = ent.create_stamp[2] if ent.create_stamp else ""
        cur, cell, bad, marks = None, None, {}, {}
        run = ""   # the session whose run the status "running" is (set by the move there)
        for lam, actor, eid, f in changes:
            new = f[field]
            if f.get("create") is True or eid == created:
                if new != initial:
                    bad[eid] = f"creates a {ent.kind} as {new!r}, not {initial!r}"
                elif cur is None:
                    cur, cell = initial, (initial, lam, actor, eid)
            elif cur is None:
                bad[eid] = f"changes the {ent.kind}'s {field} before it was created"
            elif new == cur:
                cell = (new, lam, actor, eid)
                if new == "running" and isinstance(f.get("session"), str):
                    run = f["session"]
            elif "ends" in f and (cur != "running" or f["ends"] != run):
                # A move decided on a view where another run was the current one (a crash
                # recovered on two clones at once, one of them after the task ran again):
                # applied, it would undo what the later run did.
                ended = f"session {f['ends'][:7]}'s run" if f["ends"] else "a run by hand"
                now = f"the task is {cur}" if cur != "running" else \
                    f"its run is session {run[:7]}'s" if run else "its run is by hand"
                bad[eid] = f"stale {ent.kind} move to {new}: it ends {ended}, but {now}"
            elif not isinstance(new, str) or new not in table:
                bad[eid] = f"unknown {ent.kind} {field} {new!r}"
            elif new in table.get(cur, ()) or (f.get("forced") is True and f.get("status_from") == cur):
                cur, cell = new, (new, lam, actor, eid)
                if new == "running":
                    run = f["session"] if isinstance(f.get("session"), str) else ""
            else:
                forced = " (a force recorded from another status)" if f.get("forced") is True else ""
                bad[eid] = f"illegal {ent.kind} transition {cur} -> {new}{forced}"
        if cell is None:   # no create gave it a legal start: it starts where they all must
            cell = (initial, *ent.create_stamp)
        ent.fields[field] = cell
        # What only a move writes (where it came from, whether forced) is the last legal
        # move's, never a rejected one's.
        for lam, actor, eid, f in changes:
            if eid not in bad:
                for name in _MOVE_ONLY:
                    if name in f:
                        marks[name] = (f[name], lam, actor, eid)
        for name in _MOVE_ONLY:
            if name in marks:
                ent.fields[name] = marks[name]
            else:
                ent.fields.pop(name, None)
        rejected = self.rejected
        prefetch = getattr(rejected, "prefetch", None)
        if prefetch is not None:
            prefetch([c[2] for c in changes])
        for _lam, _actor, eid, _f in changes:
            why = bad.get(eid)
            if why is not None:
                held = rejected.get(eid)
                if held is None or held.reason != why:
                    rejected[eid] = Rejection(eid, ent.id, why)
            elif eid in rejected:
                rejected.pop(eid)

    def of_kind(self, kind: str, settled: tuple[str, ...] = (), before: int = 0) -> list[Entity]:
        """Created entities of one kind, leaving out the cold ones when asked.

        Cold: in one of the `settled` statuses ("" for an entity without one) and last changed
        before `before` (ms). From the cache file this reads only the rows asked for.
        """
        cold = bool(settled and before)
        query = getattr(self.entities, "query", None)
        if query is not None:
            found = query(_hot_parts(kind, settled, before) if cold else [("kind=?", (kind,))], kind)
        else:
            found = [self.entities[i] for i, k in self.kinds.items() if k == kind]
        return [e for e in found if not is_cold(e, settled, before)] if cold else found

    def of_group(self, kind: str, group: str) -> list[Entity]:
        """Created entities of one kind that belong to `group` (their convoy, or their task)."""
        query = getattr(self.entities, "query", None)
        if query is not None:
            return [e for e in query([("kind=? AND grp=?", (kind, group))], kind)
                    if group_of(e) == group]
        return [e for e in self.of_kind(kind) if group_of(e) == group]

    def of_groups(self, kind: str, groups: list[str], cold: tuple[tuple[str, ...], int] = ((), 0)
                  ) -> list[Entity]:
        """of_group for many groups at once: a few queries, not one per group (a board of a
        thousand convoys reads their tasks in two). cold=(settled, before): only the cold
        ones (a caller holding the hot ones already reads no row twice)."""
        want, (settled, before) = set(groups), cold
        query = getattr(self.entities, "query", None)
        if query is None:
            found = [e for e in self.of_kind(kind) if group_of(e) in want]
        else:
            extra, args = "", ()
            if settled and before:
                vals = sorted(set(settled))
                extra = f" AND status IN ({','.join('?' * len(vals))}) AND updated < ?"
                args = (*vals, before)
            chunks = [sorted(want)[i:i + 500] for i in range(0, len(want), 500)]
            parts = [(f"kind=? AND grp IN ({','.join('?' * len(c))}){extra}", (kind, *c, *args))
                     for c in chunks]
            found = [e for e in query(parts, kind) if group_of(e) in want] if parts else []
        return [e for e in found if is_cold(e, settled, before)] if settled and before else found

    def with_prefix(self, prefix: str) -> list[tuple[str, str]]:
        """(id, kind) of created entities whose id starts with prefix."""
        find = getattr(self.kinds, "with_prefix", None)
        if find is not None:
            return find(prefix)
        return [(i, k) for i, k in self.kinds.items() if i.startswith(prefix)]

    def stale(self, resource: str, token: int, ts: int) -> bool:
        """Is an event under `token`, written at ts (holder's clock), from a lost lease?

        Yes once a newer token was granted and the event was written after the lease it
        claims had ended (released or expired, as recorded with the grant; unknown end: yes).
        Work done while the lease was still held stays valid.
        """
        ends = self.lease_ends.get(resource)
        if not ends:
            return False
        cutoffs = [end for t, end in ends.items() if t > token]
        if not cutoffs:
            return False
        cutoff = min(cutoffs)
        return cutoff <= 0 or ts > cutoff


def _hot_parts(kind: str, settled: tuple[str, ...], before: int) -> list[tuple[str, tuple]]:
    """SQL conditions, each one search of the (kind, status, updated) index, that together
    select the entities of a kind not cold: settled but changed since `before`, or with a
    status outside `settled` (the ranges between the settled values)."""
    vals = sorted(set(settled))
    parts = [(f"kind=? AND status IN ({','.join('?' * len(vals))}) AND updated >= ?",
              (kind, *vals, before))]
    for lo, hi in zip([None, *vals], [*vals, None]):
        where, args = "kind=?", (kind,)
        if lo is not None:
            where, args = where + " AND status > ?", args + (lo,)
        if hi is not None:
            where, args = where + " AND status < ?", args + (hi,)
        parts.append((where, args))
    return parts


def status_of(ent: Entity) -> str:
    for name in STATUS_FIELDS:
        value = ent.get(name)
        if isinstance(value, str):
            return value
    return ""


def group_of(ent: Entity) -> str | None:
    for name in GROUP_FIELDS:
        value = ent.get(name)
        if isinstance(value, str):
            return value
    return None


def is_cold(ent: Entity, settled: tuple[str, ...], before: int) -> bool:
    return bool(settled) and ent.updated_at < before and status_of(ent) in settled


def _create(ent: Entity, e: ev.Event, op: ev.Create) -> None:
    stamp = (e.lamport, e.actor, e.id)
    if ent.create_stamp is None or stamp < tuple(ent.create_stamp):
        ent.create_stamp = stamp
        ent.kind, ent.created_at, ent.created_by = op.kind, e.ts, e.actor
    ent.created = True
    _set_fields(ent, op.fields, stamp)
    _transition(ent, e, op.fields, create=True)


def _set(ent: Entity, e: ev.Event, op: ev.SetFields) -> None:
    _set_fields(ent, op.fields, (e.lamport, e.actor, e.id))
    _transition(ent, e, op.fields)


# "session": the run a move to running starts; "ends": the run a move out of running ends
# (see State._recheck: a move ending a run that is not the task's current one is stale).
TRANSITION_FIELDS = ("status_from", "reason", "forced", "via", "session", "ends")
_MOVE_ONLY = ("status_from", "forced", "ends")   # fields no event but a status change writes


def _transition(ent: Entity, e: ev.Event, fields: dict[str, Any], create: bool = False) -> None:
    if any(f in fields for f in STATUS_FIELDS):
        kept = {k: v for k, v in fields.items() if k in STATUS_FIELDS or k in TRANSITION_FIELDS}
        if create:   # (a create is where a status starts, never a move: see State._recheck)
            kept["create"] = True
        ent.transitions[e.id] = (e.lamport, e.actor, e.ts, kept)


def _add(ent: Entity, e: ev.Event, op: ev.AddTo) -> None:
    if e.id not in ent.tombs:
        tags = ent.sets.setdefault(op.name, {}).setdefault(op.value, [])
        if e.id not in tags:
            tags.append(e.id)
            tags.sort()


def _remove(ent: Entity, e: ev.Event, op: ev.RemoveFrom) -> None:
    tags = ent.sets.setdefault(op.name, {}).get(op.value)
    for tag in op.observed:
        if tag not in ent.tombs:
            ent.tombs.append(tag)
        if tags and tag in tags:
            tags.remove(tag)
    ent.tombs.sort()
    if tags is not None and not tags:
        del ent.sets[op.name][op.value]


def _comment(ent: Entity, e: ev.Event, op: ev.Comment) -> None:
    ent.comments[e.id] = (e.lamport, e.actor, e.ts, op.body)
    if op.via:
        ent.vias[e.id] = op.via


_APPLY = {ev.Create: _create, ev.SetFields: _set, ev.AddTo: _add, ev.RemoveFrom: _remove,
          ev.Comment: _comment}


def _set_fields(ent: Entity, fields: dict[str, Any], stamp: tuple[int, str, str]) -> None:
    for name, value in fields.items():
        cur = ent.fields.get(name)
        if cur is None or stamp > (cur[1], cur[2], cur[3]):
            ent.fields[name] = (value, *stamp)


def replay(events: Iterable[ev.Event], judge: Judge | None = None) -> State:
    """Full replay. Lease tokens are applied first so fencing never depends on arrival order."""
    with no_gc():
        events = list(events)
        state = State()
        lease = ev.LeaseToken
        for e in events:
            if type(e.op) is lease:
                state.apply(e, judge)
        apply = state.apply
        for e in events:
            if type(e.op) is not lease:
                apply(e)
    return state


class EncodedState(State):
    """State as a snapshot holds it: each entity still in its encoding (a cache row's body)."""
    entities: dict[str, msgspec.Raw] = {}


def replay_stream(chunks: Iterable[list[ev.Batch]], progress=None,
                  reread: Callable[[], Iterable[ev.Event]] | None = None,
                  start: State | None = None, judge: Judge | None = None) -> State:
    """Apply batches as they arrive (in chunks); the same state as replay() of their events.

    Arrival order is fine (the projection is a CRDT) unless a fence moves backwards; then the
    canonical replay of everything decides: of the events kept meanwhile, or, given `reread`
    (the same events again, from the start), of two passes over it, so that a million events
    are never held at once. `progress(events_so_far)` is told after each chunk. `start`: a
    snapshot's state the batches extend (then a fence that moves back cannot be decided here).
    `judge`: the lease records' word on each LeaseToken (State.apply).
    """
    state, events, in_order, seen = start or State(), [], True, 0
    apply = state.apply
    with no_gc():
        for chunk in chunks:
            if progress is not None:
                progress(seen)
            for batch in chunk:
                seen += len(batch.events)
                if reread is None:
                    events += batch.events
                if in_order:   # (read on to the end all the same: the reader names what it skips)
                    for e in batch.events:
                        if not apply(e, judge):
                            in_order = False
                            break
    if in_order:
        return state
    if start is not None:
        from git_brat.errors import DEEPEN_HINT, HistoryCut
        raise HistoryCut("a lease fence moved back after the snapshot this clone starts from, "
                         f"and only every event in order can decide it; {DEEPEN_HINT}")
    return replay(events, judge) if reread is None else _replay_twice(reread, judge)


def _replay_twice(read: Callable[[], Iterable[ev.Event]], judge: Judge | None = None) -> State:
    """replay() over a source read twice (lease tokens first), not kept in memory."""
    lease = ev.LeaseToken
    with no_gc():
        state = State()
        for e in read():
            if type(e.op) is lease:
                state.apply(e, judge)
        apply = state.apply
        for e in read():
            if type(e.op) is not lease:
                apply(e)
    return state


class no_gc:
    """Pause the cyclic GC while building many small objects (none of them form cycles).

    On exit the survivors are frozen out of the collector's generations: otherwise the first
    collection after re-enabling walks all of them (over 100 ms at 100k events) to find nothing.
    Reference counting still frees them as usual, but cyclic garbage that exists at that moment
    is never collected: a long-running loop calls gc.unfreeze() between rounds.
    """

    def __enter__(self):
        import gc
        self.was = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc):
        import gc
        if self.was:
            gc.freeze()
            gc.enable()


def _entity_key(ent: Entity) -> dict:
    return {
        "id": ent.id, "kind": ent.kind, "created": ent.created,
        "create_stamp": ent.create_stamp, "created_at": ent.created_at,
        "created_by": ent.created_by, "updated_at": ent.updated_at,
        "fields": ent.fields,
        "sets": {k: {v: sorted(t) for v, t in vals.items() if t} for k, vals in ent.sets.items()},
        "tombs": sorted(set(ent.tombs)),
        "comments": ent.comments,
        "transitions": ent.transitions,
        # (only when there are some: states written before attribution keep their digests)
        **({"vias": ent.vias} if ent.vias else {}),
    }


def _rest_key(state: State) -> dict:
    return {"max_lamport": state.max_lamport, "fences": dict(state.fences.items()),
            "rejected": dict(state.rejected.items()), "unknown": sorted(state.unknown.keys())}


def canonical(state: State) -> bytes:
    """Byte representation that is identical for equal states (used by tests and doctor)."""
    body = {"entities": {k: _entity_key(e) for k, e in state.entities.items()}, **_rest_key(state)}
    return msgspec.msgpack.encode(body, order="sorted")


def digest(state: State) -> bytes:
    """A hash equal for equal states, as canonical() is, built an entity at a time (from the
    cache file, rows are read in order and not kept): doctor compares whole states with it."""
    from git_brat.grite.model.events import blake2b
    h = blake2b(digest_size=32)
    encode = msgspec.msgpack.Encoder(order="sorted").encode
    stream = getattr(state.entities, "stream", None)
    for k, e in (stream() if stream is not None else sorted(state.entities.items())):
        h.update(encode((k, _entity_key(e))))
    h.update(encode(_rest_key(state)))
    return h.digest()


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MS = timedelta(milliseconds=1)
_MIN_MS = -62_135_596_800_000   # 0001-01-01


def iso(ms: int) -> datetime:
    """A stamp in ms as a UTC datetime (exact arithmetic: twice as fast as fromtimestamp, and a
    snapshot's check makes two per issue). Clamped to what a datetime can hold: a stamp read
    straight from a log (`git grite log`) may be anything a pusher wrote."""
    return _EPOCH + min(max(ms, _MIN_MS), ev.TS_MAX) * _MS
