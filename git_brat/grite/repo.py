"""One grite repository: store + identity + cache + log, and id resolution by unique prefix."""

from __future__ import annotations

from typing import Callable

from git_brat.grite.model import events as ev
from git_brat.grite.log import identity
from git_brat.grite.cache.projection import Cache
from git_brat.errors import NotFound, UsageError
from git_brat.git.store import Store
from git_brat.grite.log.wal import WAL, Appended, Draft, append
from git_brat.grite.model.state import Entity, State
from git_brat.grite.log.refs import grite_dir

MIN_PREFIX = 4
ID_LENGTH = 32   # entity ids are 128-bit hex: anything longer names nothing


class Grite:
    """The entry point library code and commands use; layers below never call back up."""

    def __init__(self, store: Store):
        self.store = store
        self.cache = Cache(store)
        self._identity: identity.Identity | None = None
        self._state: State | None = None
        self._state_wal: str | None = None   # wal tip the loaded state was projected at
        self._cold_before: int | None = None
        self._state_hot = False   # the loaded state may lack a snapshot's cold rows

    @classmethod
    def open(cls, cwd: str | None = None, require_init: bool = True) -> "Grite":
        store = Store.discover(cwd)
        g = cls(store)
        if require_init:
            identity.load_replica(grite_dir(store))   # raises a clear "run git grite init"
        return g

    @property
    def identity(self) -> identity.Identity:
        if self._identity is None:
            self._identity = identity.load(grite_dir(self.store))
        return self._identity

    @property
    def cold_before(self) -> int:
        """ms before which settled entities are cold: out of default lists and scans (0: never)."""
        if self._cold_before is None:
            from git_brat.grite.cache.projection import cold_cutoff
            self._cold_before = cold_cutoff(self.store)
        return self._cold_before

    def state(self, refresh: bool = False, hot_before: int = 0) -> State:
        """The projection; hot_before: the caller reads nothing settled before then (ms), so a
        fresh clone need not wait for its snapshot's cold part (see Cache.state)."""
        if self._state is None or refresh or (self._state_hot and not hot_before):
            self._state = self.cache.state(hot_before)
            self._state_wal = self.cache.frontier.get(WAL.decode())
            self._state_hot = bool(hot_before)
        return self._state

    def append(self, build: Callable[[], list[Draft]] | list[Draft],
               summary: Callable[[list[ev.Event]], str] | str) -> Appended:
        """Append one atomic batch.

        A callable `build` sees `self.state()` at exactly the log tip the batch is swapped
        against (refreshed when another writer moved it), so a validation inside `build` can
        never be decided on stale state; on a conflict it is simply run again.
        """
        def drafts(tip: bytes | None) -> list[Draft]:
            if not callable(build):
                return build
            if self._state is None or self._state_wal != (tip.decode() if tip else None):
                self.state(refresh=True)
            return build()

        def seen() -> int:
            return self._state.max_lamport if self._state is not None else self.cache.seen_lamport()

        result = append(self.store, self.identity, drafts,
                        summary if callable(summary) else (lambda _e: summary), seen)
        self._state = None   # stale now; the next read extends the cache incrementally
        return result

    # -- ids -----------------------------------------------------------------

    def resolve(self, ref: str, kind: str | None = None) -> Entity:
        """An entity by full id or unique prefix (like git's abbreviated object names)."""
        return resolve(self.state(), ref, kind)


def resolve(state: State, ref: str, kind: str | None = None) -> Entity:
    what = kind or "entity"
    ref = ref.strip().lower()
    if ref.startswith("#"):
        ref = ref[1:]
    if len(ref) < MIN_PREFIX or len(ref) > ID_LENGTH or any(c not in "0123456789abcdef" for c in ref):
        raise UsageError(f"{ref!r} is not a valid {what} id ({MIN_PREFIX} to {ID_LENGTH} hex digits)")
    ent = state.entities.get(ref)
    if ent is not None and ent.created and (kind is None or ent.kind == kind):
        return ent
    matches = [state.entities[eid] for eid, k in state.with_prefix(ref)
               if kind is None or k == kind]
    if not matches:
        raise NotFound(f"no {what} with id {ref}")
    if len(matches) > 1:
        shown = ", ".join(sorted(m.id[:12] for m in matches)[:5])
        raise UsageError(f"{what} id {ref} is ambiguous: matches {shown}")
    return matches[0]


def short_ids(ids: list[str], minimum: int = 7) -> dict[str, str]:
    """Shortest unique prefix (at least `minimum`) for each id, computed over sorted neighbours."""
    order = sorted(ids)
    out = {}
    for i, x in enumerate(order):
        n = minimum
        for j in (i - 1, i + 1):
            if 0 <= j < len(order):
                y = order[j]
                k = 0
                while k < len(x) and k < len(y) and x[k] == y[k]:
                    k += 1
                n = max(n, k + 1)
        out[x] = x[:n]
    return out
