"""Lease records and their pure decisions: names, holders, records; previous record in, next out."""

from __future__ import annotations

import os
from datetime import datetime
from typing import TYPE_CHECKING, Callable, NamedTuple
from urllib.parse import quote, unquote

import msgspec

from git_brat.process import hostname, now_ms
from git_brat.grite.model import events as ev
from git_brat.errors import Conflict, CorruptObject, NotFound, UsageError
from git_brat.grite.model.state import iso

if TYPE_CHECKING:
    from git_brat.git.store import Store
    from git_brat.grite.repo import Grite

LOCKS = b"refs/grite/locks/"
ENTRY = b"lease"                 # the one blob in each lease commit's tree
DEFAULT_TTL = 300.0              # seconds
DEFAULT_SKEW = 5.0               # seconds others wait past a holder's expiry before taking over
DEFAULT_REMOTE_TIMEOUT = 30.0
MAX_TTL = 30 * 86400.0
MAX_NAME = 200
_FORBIDDEN = set(" ~^:?*[\\")    # git check-ref-format: never in a ref name
_SAFE = "-_.+=,@!$&'()#"          # kept as-is in the ref component; everything else is %-encoded


class Holder(msgspec.Struct):
    """Who holds a lease: the holder id others compare against, and where it runs."""
    id: str
    actor: str = ""
    session: str = ""
    host: str = ""
    pid: int = 0


class Lease(msgspec.Struct):
    """One record of a lease's history: the `lease` blob of each commit on its ref."""
    resource: str
    holder: Holder
    token: int                   # fencing token: +1 on every grant, kept by renew and release
    state: str                   # "held" or "released"
    acquired_at: int             # ms, holder's clock: when this token was granted
    expires_at: int              # ms, holder's clock
    ttl_ms: int
    written_at: int              # ms, writer's clock
    released_at: int = 0         # ms: when a released lease ended
    action: str = ""             # acquire, extend, takeover, renew, release, expire; force-*
    by: str = ""                 # who wrote it when not the holder (--force, gc)
    remote: str = ""             # the remote that decided this record; "" = local lease
    v: int = 1


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


class Plan(NamedTuple):
    """A decision: the next record, and what replay needs to know of its grant."""
    lease: Lease
    grant: bool                  # a new token: record LeaseToken in the event log
    prev_end: int                # when the previous token's lease ended (for replay fencing)


Decide = Callable[[Lease | None, int, str], "Plan | None"]

# -- names -------------------------------------------------------------------


def parse_resource(resource: str) -> tuple[str, str]:
    """NAMESPACE:NAME -> (namespace, name), or a UsageError saying what is wrong."""
    def bad(why: str) -> UsageError:
        return UsageError(f"invalid resource {resource!r}: {why} "
                          f"(expected NAMESPACE:NAME, e.g. task:t-3f2a, path:src/parser, repo:global)")
    ns, sep, name = resource.partition(":")
    if not sep:
        raise bad("no namespace")
    if not ns or not ns[0].isascii() or not ns[0].isalpha() or len(ns) > 32 or any(
            not (c.isascii() and (c.islower() or c.isdigit() or c in "-_")) for c in ns):
        raise bad("the namespace must be lower-case letters, digits, '-' or '_'")
    problem = _name_problem(name)
    if problem:
        raise bad(problem)
    return ns, name


def _name_problem(name: str) -> str | None:
    import unicodedata
    if not name:
        return "empty name"
    if len(name) > MAX_NAME:
        return f"longer than {MAX_NAME} characters"
    for c in name:
        if ord(c) < 0x20 or ord(c) == 0x7f or unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp"):
            return "control characters are not allowed"
        if c.isspace():
            return "whitespace is not allowed"
        if c in _FORBIDDEN:
            return f"{c!r} is not allowed"
    if ".." in name:
        return "'..' is not allowed"
    if "@{" in name:
        return "'@{' is not allowed"
    if name == "@":
        return "'@' alone is not allowed"
    if name.endswith("."):
        return "may not end with '.'"
    parts = name.split("/")
    if any(not p for p in parts):
        return "empty path component ('/' at the start or end, or '//')"
    for p in parts:
        if p.startswith("."):
            return "a component may not start with '.'"
        if p.endswith(".lock"):
            return "a component may not end with '.lock'"
    return None


def refname_problem(ref: str) -> str | None:
    """The rules of `git check-ref-format` (for a full ref name); None when valid."""
    if ref == "@" or "@{" in ref or ".." in ref or ref.endswith(".") or ref.endswith("/"):
        return "forbidden sequence"
    for c in ref:
        if ord(c) < 0x20 or ord(c) == 0x7f or c in _FORBIDDEN:
            return f"forbidden character {c!r}"
    parts = ref.split("/")
    if len(parts) < 2:
        return "needs at least one '/'"
    for p in parts:
        if not p or p.startswith(".") or p.endswith(".lock"):
            return f"bad component {p!r}"
    return None


def ref_for(resource: str) -> bytes:
    """task:t-3f2a -> refs/grite/locks/task/t-3f2a; the name is one %-encoded ref component,
    so path:src and path:src/parser never collide as file and directory."""
    ns, name = parse_resource(resource)
    ref = f"{LOCKS.decode()}{ns}/{quote(name, safe=_SAFE)}"
    problem = refname_problem(ref)
    if problem:   # unreachable after parse_resource; kept as a guard on the mapping
        raise UsageError(f"invalid resource {resource!r}: maps to a bad ref name ({problem})")
    return ref.encode()


def resource_of(ref: bytes) -> str:
    ns, _, enc = ref[len(LOCKS):].decode().partition("/")
    return f"{ns}:{unquote(enc)}"


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

lease_decoder = msgspec.json.Decoder(Lease)


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


class Forged(msgspec.Struct):
    """A record on a lease ref that its history does not allow: ignored, and reported."""
    resource: str
    sha: str
    action: str
    holder: str
    token: int
    reason: str


def effective(store: "Store", sha: bytes, now: int) -> tuple[Lease, list[Forged]]:
    """The lease a ref's records really grant, and the records that do not count.

    Anyone who can push can append a record, and a record only claims who wrote it: "acquire"
    by another holder over a live lease would take it for as long as it says. So the records
    are folded from the oldest one read (CHAIN records back at most), each judged against the
    lease as it stood before it (_invalid); one that breaks the rules is skipped.
    """
    records: list[tuple[bytes, Lease]] = []
    at: bytes | None = sha
    while at and len(records) < CHAIN:
        try:
            lease, parent = _record(store, at)
        except CorruptObject:
            if not records:
                raise
            break   # an unreadable older record: fold from what came after it
        records.append((at, lease))
        at = parent
    records.reverse()
    # A record may claim a time no later than its reader's clock, nor than any record written
    # after it (plus a margin for clocks): "acquired after the lease expired", dated ahead, lies.
    latest, bound = [0] * len(records), now
    for i in range(len(records) - 1, -1, -1):
        latest[i] = bound + FUTURE_MS
        bound = min(bound, records[i][1].written_at)
    lease, forged = records[0][1], []
    for i in range(1, len(records)):
        rec_sha, rec = records[i]
        why = _invalid(lease, rec, latest[i])
        if why:
            forged.append(Forged(lease.resource, rec_sha.decode(), rec.action, rec.holder.id,
                                 rec.token, why))
        else:
            lease = rec
    return lease, forged


CHAIN = 100                      # records read back from a lease ref's tip to judge it
# Records are content-addressed: what a sha says never changes, so a long-lived process (a
# witness renewing every few seconds) reads each one once.
_RECORDS: dict[bytes, tuple[Lease, bytes | None]] = {}


def _record(store: "Store", sha: bytes) -> tuple[Lease, bytes | None]:
    """(the record, its parent's sha); CorruptObject when it does not read or decode."""
    got = _RECORDS.get(sha)
    if got is None:
        data, parents = store.objects.read_record(sha, ENTRY)
        try:
            got = (lease_decoder.decode(data), parents[0] if parents else None)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise CorruptObject(sha.decode(), f"lease record does not decode ({exc})") from exc
        if len(_RECORDS) > 50_000:
            _RECORDS.clear()
        _RECORDS[sha] = got
    return got
FUTURE_MS = int(DEFAULT_SKEW * 1000)   # how far a record's clock may run ahead of its reader's
_GRANTS = ("acquire", "takeover", "force-takeover")


def _invalid(prev: Lease, rec: Lease, latest: int) -> str:
    """Why rec cannot follow prev on a lease ref ("" when it can)."""
    if rec.resource != prev.resource:
        return f"names {rec.resource!r}, not {prev.resource!r}"
    grant = rec.action in _GRANTS
    if grant and rec.token != prev.token + 1:
        return f"grants token {rec.token}, not {prev.token + 1}"
    if not grant and rec.token != prev.token:
        return f"changes token {prev.token} to {rec.token} without a grant"
    if rec.action.startswith("force-"):
        return ""   # a recorded override (--force): allowed, and its history says who
    if prev.state == "released":
        return "" if grant else f"{rec.action} of a released lease"
    if rec.action == "expire":
        if prev.expires_at < rec.written_at <= latest:
            return ""
        return f"expires {prev.holder.id}'s lease before it ran out"
    if rec.holder.id == prev.holder.id:
        return ""
    if grant and prev.expires_at < rec.acquired_at <= latest:
        return ""   # a takeover of a lease its holder let run out
    return (f"{rec.action} by {rec.holder.id} while {prev.holder.id} held it "
            f"(token {prev.token}, until {iso(prev.expires_at).isoformat()})")


def history(g: "Grite", resource: str, limit: int = 1000) -> list[Lease]:
    """The lease's audit trail, newest first (follows the commit chain of its ref)."""
    out: list[Lease] = []
    sha = g.store.refs.read(ref_for(resource))
    while sha and len(out) < limit:
        out.append(read_lease(g.store, sha))
        _data, parents = g.store.objects.read_record(sha, ENTRY)
        sha = parents[0] if parents else None
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


def end_of(lease: Lease, now: int) -> int:
    """When a lease ended, on its holder's clock (a live lease taken by force ends now)."""
    if lease.state == "released":
        return lease.released_at
    return min(lease.expires_at, now)


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
