"""Writing under a lease: the fence of events a holder appends, and the grant's token event."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from git_brat.process import now_ms
from git_brat.grite.model import events as ev
from git_brat.errors import Conflict, NotFound
from git_brat.grite.cache import seals
from git_brat.grite.cache.leases import GRANTS_CHAIN, chain
from git_brat.grite.locks.lease import current, default_holder_id, fold, lock_entity, ref_for
from git_brat.grite.log.wal import Appended, Draft
from git_brat.grite.model.state import iso

if TYPE_CHECKING:
    from git_brat.grite.repo import Grite


def fence(g: "Grite", resource: str, holder_id: str | None = None) -> ev.Fence:
    """The fence for events written under a lease this holder holds now; Conflict otherwise."""
    hid = holder_id or default_holder_id(g)
    lease = current(g, resource)
    if lease is None:
        raise NotFound(f"no lease on {resource}")
    if lease.state != "held" or lease.holder.id != hid:
        raise Conflict(f"{resource} is not held by {hid} "
                       f"({lease.state} by {lease.holder.id}, token {lease.token})")
    if now_ms() > lease.expires_at:
        raise Conflict(f"the lease on {resource} held by {hid} expired at "
                       f"{iso(lease.expires_at).isoformat()}; renew it first")
    return ev.Fence(resource, lease.token)


def append_fenced(g: "Grite", resource: str, build: Callable[[], list[Draft]] | list[Draft],
                  summary: Callable[[list[ev.Event]], str] | str,
                  holder_id: str | None = None) -> Appended:
    """Append events that act under a lease: each carries its fencing token, so if the lease
    was lost before they land, replay records them as rejected instead of applying them."""
    f = fence(g, resource, holder_id)
    token_event = _token_event(g, resource, f.token)

    def drafts() -> list[Draft]:
        out = [d._replace(fence=f) for d in (build() if callable(build) else build)]
        # The grant's LeaseToken may be missing (the acquire could not append it, or crashed
        # right after swapping the lease ref): without it replay could not fence the previous
        # holder, so it travels in the same batch as the first events written under the token.
        if g.state().fences.get(resource, 0) < f.token:
            out.insert(0, token_event)
        return out
    return g.append(drafts, summary)


def _token_event(g: "Grite", resource: str, token: int) -> Draft:
    """The LeaseToken event for `token`'s grant, rebuilt from the lease's own records as every
    clone's replay reads them (the grant's prev_end must be what they say, or it is refused)."""
    sha = g.store.refs.read(ref_for(resource))
    records, root, _skipped = chain(g.store, sha, GRANTS_CHAIN) if sha else ([], True, [])
    holder = next((r.holder.id for _s, r in reversed(records) if r.token == token), "")
    prev_end = fold(records, now_ms(), root, *seals.judges(g.store))[2].ends.get(token, 0) \
        if records else 0
    return Draft(lock_entity(resource), ev.LeaseToken(resource, token, holder, prev_end))
