"""Lease records and their pure decisions: names, holders, records; previous record in, next out."""

from __future__ import annotations

import os
from datetime import datetime
from typing import TYPE_CHECKING, Callable, NamedTuple

import msgspec

from git_brat.process import hostname, now_ms
from git_brat.grite.model import events as ev
from git_brat.errors import Conflict, CorruptObject, NotFound, UsageError
from git_brat.grite.model.leases import (  # noqa: F401  (their home before; names kept here)
    DEFAULT_SKEW, ENTRY, FUTURE_MS, HOLDERS_OWN, LOCKS, MAX_FORCERS, MAX_NAME, Forged, Grants,
    Holder, Lease, _name_problem, end_of, fold, invalid as _invalid, lease_decoder,
    override_refused, parse_resource, ref_for, refname_problem, resource_of)
from git_brat.grite.model.state import iso
from git_brat.grite.cache import seals
from git_brat.grite.cache.leases import CHAIN, Undecodable, chain, record

if TYPE_CHECKING:
    from git_brat.git.store import Store
    from git_brat.grite.repo import Grite

DEFAULT_TTL = 300.0              # seconds
DEFAULT_REMOTE_TIMEOUT = 30.0
MAX_TTL = 30 * 86400.0


class LeaseView(msgspec.Struct):
    """A lease as `lock status` shows it (times judged now, with the skew margin)."""
    resource: str
    holder: str
    state: str                   # held / expired / released
    token: int
    expires_at: datetime
    remaining: float             # seconds until expires_at, 0 once past
    acquired_at: datetime
    actor: str
    session: str
    host: str
    pid: int
    mode: str                    # "remote" or "local": who decided the current record
    remote: str
    ref: str
    last_action: str
    by: str


class Outcome(LeaseView):
    """The result of acquire/renew/release/expire."""
    action: str                  # what was written ("none" when nothing needed writing)
    note: str = ""               # e.g. "remote origin unreachable" after a local fallback


class LeaseHeld(Conflict):
    """Someone else holds a live lease."""

    def __init__(self, lease: Lease, now: int, skew_ms: int):
        left = max(0.0, (lease.expires_at - now) / 1000)
        super().__init__(f"{lease.resource} is held by {lease.holder.id} (token {lease.token}) "
                         f"for {left:.1f}s more, plus a {skew_ms / 1000:g}s clock-skew margin; "
                         f"wait (--wait SECONDS) or take it with --force")
        self.lease = lease


class OverrideRefused(Conflict):
    """This clone's key is not one the lease's holder named as allowed to override it."""

    def __init__(self, lease: Lease, now: int, key: str, replica: str):
        left = max(0.0, (lease.expires_at - now) / 1000)
        super().__init__(
            f"{lease.resource} is held by {lease.holder.id} (token {lease.token}) for {left:.1f}s "
            f"more, and its holder's clone does not let this clone's key ({key[:12]}…) override "
            f"it: a forced takeover would count on no clone, so nothing was written. Wait for "
            f"its release or expiry (--wait SECONDS), or have the holder's clone trust this key "
            f"(`git grite trust add {replica}` there; it counts from its next renewal)")
        self.lease = lease


class Plan(NamedTuple):
    """A decision: the next record, and what replay needs to know of its grant."""
    lease: Lease
    grant: bool                  # a new token: record LeaseToken in the event log
    prev_end: int                # when the previous token's lease ended (for replay fencing)


Decide = Callable[[Lease | None, int, str], "Plan | None"]

# -- names -------------------------------------------------------------------


def lock_entity(resource: str) -> str:
    """The entity id lease-token events are recorded under (stable per resource)."""
    return ev.blake2b(b"lock\0" + resource.encode(), digest_size=16).hexdigest()


# -- holders -----------------------------------------------------------------------


def default_holder_id(g: "Grite") -> str:
    return os.environ.get("GRITE_HOLDER") or g.identity.actor.id


def holder_for(g: "Grite", holder_id: str | None = None, session: str | None = None) -> Holder:
    """This process as a holder: --holder, else $GRITE_HOLDER, else the current actor."""
    hid = holder_id if holder_id is not None else default_holder_id(g)
    if not hid.strip() or len(hid) > MAX_NAME or any(ord(c) < 0x20 or ord(c) == 0x7f for c in hid):
        raise UsageError(f"invalid holder id {hid!r}: non-empty, printable, at most {MAX_NAME} chars")
    return Holder(hid, g.identity.actor.id, session if session is not None
                  else os.environ.get("GRITE_SESSION", ""), hostname(), os.getpid())


# -- records ---------------------------------------------------------------------

def read_lease(store: "Store", sha: bytes) -> Lease:
    data, _parents = store.objects.read_record(sha, ENTRY)
    try:
        return lease_decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise CorruptObject(sha.decode(), f"lease record does not decode ({exc})") from exc


def current(g: "Grite", resource: str) -> Lease | None:
    """The lease record this clone has for resource (the local ref or the remote's mirror)."""
    sha = g.store.refs.read(ref_for(resource))
    return effective(g.store, sha, now_ms())[0] if sha else None


def effective(store: "Store", sha: bytes, now: int) -> tuple[Lease, list[Forged]]:
    """The lease a ref's records really grant, and the records that do not count: the last
    CHAIN records folded from the oldest (model.leases.fold judges each against the lease as
    it stood before it; one that breaks the rules is skipped)."""
    records, root, unreadable = chain(store, sha, CHAIN)
    lease, forged, _grants = fold(records, now, root, *seals.judges(store))
    return lease, [Forged(lease.resource, bad.decode(), "", "", 0, why)
                   for bad, why in reversed(unreadable)] + forged


def history(g: "Grite", resource: str, limit: int = 1000) -> list[Lease]:
    """The lease's audit trail, newest first (follows the commit chain of its ref)."""
    out: list[Lease] = []
    sha = g.store.refs.read(ref_for(resource))
    while sha and len(out) < limit:
        try:
            lease, sha = record(g.store, sha)
        except Undecodable as exc:   # no part of the trail (status names it): on to its parent
            sha = exc.parent
            continue
        out.append(lease)
    return out


def judge(lease: Lease, now: int, skew_ms: int) -> str:
    """held / expired / released; a lease stays held for skew_ms past the holder's expiry."""
    if lease.state == "released":
        return "released"
    return "held" if now <= lease.expires_at + skew_ms else "expired"


def view(lease: Lease, now: int, skew_ms: int, ref: bytes, cls=LeaseView, **extra):
    state = judge(lease, now, skew_ms)
    remaining = max(0.0, (lease.expires_at - now) / 1000) if state == "held" else 0.0
    h = lease.holder
    return cls(lease.resource, h.id, state, lease.token, iso(lease.expires_at),
               round(remaining, 3), iso(lease.acquired_at), h.actor, h.session, h.host, h.pid,
               "remote" if lease.remote else "local", lease.remote, ref.decode(), lease.action,
               lease.by, **extra)


# -- decisions (pure: previous record in, next record out) -------------------------


def naming_forcers(decide: Decide, key: str, forcers: list[str], replica: str) -> Decide:
    """decide, as written by this clone (key): a record of the holder's own names the keys that
    may override its lease (forcers: those this clone trusts), and an override of a lease whose
    holder did not name this key is refused here, before anything is written."""
    def named(prev, now, remote):
        plan = decide(prev, now, remote)
        if plan is None:
            return None
        lease = plan.lease
        if lease.action.startswith("force-") and prev is not None and \
                override_refused(prev, key):
            raise OverrideRefused(prev, now, key, replica)
        if lease.action in HOLDERS_OWN:
            plan = plan._replace(lease=msgspec.structs.replace(lease, forcers=forcers))
        return plan
    return named


def decide_acquire(resource: str, holder: Holder, ttl_ms: int, skew_ms: int, force: bool) -> Decide:
    def decide(prev, now, remote):
        if prev is not None and prev.state == "held":
            if prev.holder.id == holder.id:   # already ours (even if lapsed: nobody took it)
                return Plan(msgspec.structs.replace(
                    prev, holder=holder, expires_at=now + ttl_ms, ttl_ms=ttl_ms, written_at=now,
                    action="extend", by="", remote=remote), False, 0)
            live = judge(prev, now, skew_ms) == "held"
            if live and not force:
                raise LeaseHeld(prev, now, skew_ms)
            action = "force-takeover" if live else "takeover"
        else:
            action = "acquire"
        token = (prev.token if prev else 0) + 1
        lease = Lease(resource, holder, token, "held", now, now + ttl_ms, ttl_ms, now,
                      action=action, by=holder.id if action == "force-takeover" else "",
                      remote=remote)
        return Plan(lease, True, end_of(prev, now) if prev else 0)
    return decide


def decide_renew(resource: str, holder: Holder, ttl_ms: int | None, force: bool) -> Decide:
    def decide(prev, now, remote):
        if prev is None:
            raise NotFound(f"no lease on {resource}; acquire it first")
        if prev.state != "held":
            raise Conflict(f"{resource} is not held (released, token {prev.token}); acquire it again")
        mine = prev.holder.id == holder.id
        if not mine and not force:
            raise Conflict(f"{resource} is held by {prev.holder.id}, not {holder.id}: only the "
                           f"holder renews it (--force overrides, recorded in its history)")
        ttl = ttl_ms or prev.ttl_ms
        return Plan(msgspec.structs.replace(
            prev, holder=holder if mine else prev.holder, expires_at=now + ttl, ttl_ms=ttl,
            written_at=now, action="renew" if mine else "force-renew",
            by="" if mine else holder.id, remote=remote), False, 0)
    return decide


def decide_release(resource: str, holder: Holder, force: bool, unused: bool = False) -> Decide:
    """`unused`: the holder gives back a grant it never acted under ("withdraw"), so whoever
    takes the lease next knows no work was done under that token."""
    def decide(prev, now, remote):
        if prev is None:
            raise NotFound(f"no lease on {resource}")
        if prev.state == "released":
            return None
        mine = prev.holder.id == holder.id
        if not mine and not force:
            raise Conflict(f"{resource} is held by {prev.holder.id}, not {holder.id}: only the "
                           f"holder releases it (--force overrides, recorded in its history)")
        return Plan(msgspec.structs.replace(
            prev, state="released", released_at=now, written_at=now,
            action=("withdraw" if unused else "release") if mine else "force-release",
            by="" if mine else holder.id,
            remote=remote), False, 0)
    return decide


def decide_expire(by: str, skew_ms: int) -> Decide:
    def decide(prev, now, remote):
        if prev is None or judge(prev, now, skew_ms) != "expired":
            return None
        return Plan(msgspec.structs.replace(
            prev, state="released", released_at=prev.expires_at, written_at=now,
            action="expire", by=by, remote=remote), False, 0)
    return decide
