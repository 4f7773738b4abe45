"""Lease locks: compare-and-swap on refs/grite/locks/*, locally or through a remote, with fencing tokens."""

from __future__ import annotations

import os
import random
import time
from datetime import datetime
from typing import TYPE_CHECKING, Callable, NamedTuple
from urllib.parse import quote, unquote

import msgspec

from git_brat.process import hostname, now_ms
from git_brat.grite.model import events as ev
from git_brat.errors import (Conflict, CorruptObject, GriteError, NotFound, RefLocked,
                                   RemoteUnreachable, UsageError)
from git_brat.grite.locks.memo import Memo, PackedLive, Seen
from git_brat.grite.log.wal import Appended, Draft, lock_timeout
from git_brat.grite.model.state import iso
from git_brat.grite.log.refs import grite_dir

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
# Rejected pushes that mean "someone else moved the ref first": look again, then decide.
_RACE_REASONS = ("stale info", "failed to update ref", "cannot lock ref", "failed to lock",
                 "incorrect old value", "fetch first", "non-fast-forward", "already exists")
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


class Settings(msgspec.Struct):
    remote: str | None
    ttl: float
    skew: float
    fallback: bool = True
    timeout: float = DEFAULT_REMOTE_TIMEOUT

    @property
    def skew_ms(self) -> int:
        return int(self.skew * 1000)


class Status(msgspec.Struct):
    leases: list[LeaseView]
    note: str = ""
    problems: list[str] = []


class RemoteFailed(GriteError):
    """The lock remote answered, then talking to it failed (this clone's git gave up on the
    fetch, or the connection dropped): what it holds is unknown, so unlike RemoteUnreachable
    this is never a reason to decide the lease locally."""

    def __init__(self, remote: str, what: str, detail: str):
        super().__init__(f"remote {remote} answered, then {what} failed: {detail}; "
                         f"the lease is unchanged here, try again")
        self.remote, self.detail = remote, detail


class LeaseHeld(Conflict):
    """Someone else holds a live lease."""

    def __init__(self, lease: Lease, now: int, skew_ms: int):
        left = max(0.0, (lease.expires_at - now) / 1000)
        super().__init__(f"{lease.resource} is held by {lease.holder.id} (token {lease.token}) "
                         f"for {left:.1f}s more, plus a {skew_ms / 1000:g}s clock-skew margin; "
                         f"wait (--wait SECONDS) or take it with --force")
        self.lease = lease


class _Plan(NamedTuple):
    lease: Lease
    grant: bool                  # a new token: record LeaseToken in the event log
    prev_end: int                # when the previous token's lease ended (for replay fencing)


Decide = Callable[[Lease | None, int, str], "_Plan | None"]

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


# -- settings and holders ------------------------------------------------------


def settings(store: "Store", remote: str | None = None, local: bool = False,
             ttl: float | None = None, skew: float | None = None,
             fallback: bool = True) -> Settings:
    """Flags override git config (grite.lockRemote/lockTtl/lockSkew/lockTimeout) over defaults."""
    cfg = store.config_matching(r"^(grite\.lock[a-z]*|remote\..*\.url)$")

    def seconds(key: str, flag: str, given: float | None, default: float, low: float) -> float:
        if given is not None:
            value, where = given, flag
        elif key.lower() in cfg:
            where = f"git config {key}={cfg[key.lower()]}"
            try:
                value = float(cfg[key.lower()])
            except ValueError:
                raise UsageError(f"bad {where}: expected seconds")
        else:
            return default
        if not (low <= value <= MAX_TTL):
            raise UsageError(f"bad {where}: expected seconds between {low:g} and {MAX_TTL:g}")
        return value

    ttl_s = seconds("grite.lockTtl", "--ttl", ttl, DEFAULT_TTL, 0.001)
    skew_s = seconds("grite.lockSkew", "--skew", skew, DEFAULT_SKEW, 0.0)
    timeout = seconds("grite.lockTimeout", "", None, DEFAULT_REMOTE_TIMEOUT, 0.1)
    if local:
        name, src = None, ""
    elif remote:
        name, src = remote, "--remote"
    else:
        name, src = lock_remote(store, cfg)
    if name is not None and f"remote.{name}.url" not in cfg:
        path = _local_path(name)
        # Relative to the top of the work tree, as `git push ../hub.git` takes it.
        if path is not None and not os.path.exists(os.path.join(store.toplevel() or store.git_dir,
                                                                path)):
            if "/" not in name and ":" not in name:
                raise NotFound(f"no remote named {name!r} ({src}); see `git remote -v`")
            # A configured path that is gone is unreachable (an unmounted share) and falls
            # back; a path typed on this command line that does not exist is a mistake.
            if remote:
                raise NotFound(f"{src} {name!r}: no such repository (the path does not exist)")
    return Settings(name, ttl_s, skew_s, fallback, timeout)


def _local_path(url: str) -> str | None:
    """The filesystem path a git URL names, or None for a network URL (as git tells them apart)."""
    if "://" in url:
        return url[len("file://"):] if url.startswith("file://") else None
    colon, slash = url.find(":"), url.find("/")
    if colon > 0 and (slash < 0 or colon < slash):
        return None   # scp-like host:path
    return url


BRAT_CONFIG = ".brat/config.toml"


def committed_locks_table(store: "Store") -> dict:
    """The `[locks]` table of `.brat/config.toml` as HEAD has it ({} when there is none).

    Read from the commit, not the work tree: a committed file is the same for every clone,
    which is the point of naming the lock remote there. (grite knows nothing else of brat's
    config; `git brat config` validates the rest.)
    """
    import tomllib
    data = store.objects.committed_file(BRAT_CONFIG)
    if data is None:
        return {}
    try:
        table = tomllib.loads(data.decode("utf-8")).get("locks", {})
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"{BRAT_CONFIG} (as committed at HEAD) is not valid TOML: {exc}; "
                         f"fix it and commit, or pass --remote / --local")
    if not isinstance(table, dict) or not isinstance(table.get("remote", ""), str):
        raise UsageError(f"{BRAT_CONFIG} (as committed at HEAD): [locks] remote must be "
                         f"a remote name")
    return table


def lock_remote(store: "Store", cfg: dict[str, str]) -> tuple[str | None, str]:
    """The remote leases are decided on, and where that came from (DESIGN.md section 6).

    `[locks] remote` in the committed .brat/config.toml, else git config grite.lockRemote,
    else the only remote syncing grite state, else `origin` among several. With remotes
    syncing and none of these, the command is refused: a lease taken locally there would let
    two clones hold it. No synced remote: local leases (None).
    """
    from git_brat.grite.log.refs import synced_remotes
    named = committed_locks_table(store).get("remote")
    if named:
        return named, f"[locks] remote in {BRAT_CONFIG}"
    if cfg.get("grite.lockremote"):
        return cfg["grite.lockremote"], "git config grite.lockRemote"
    remotes = synced_remotes(store)
    if len(remotes) == 1:
        return remotes[0], f"the only remote syncing grite state ({remotes[0]})"
    if "origin" in remotes:
        return "origin", "origin, among the remotes syncing grite state"
    if remotes:
        raise UsageError(f"which remote decides leases is ambiguous: {', '.join(remotes)} all "
                         f"sync grite state; name one in [locks] remote in {BRAT_CONFIG} "
                         f"(committed, so every clone agrees) or with `git config "
                         f"grite.lockRemote NAME`, or pass --remote NAME")
    return None, ""


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

_decoder = msgspec.json.Decoder(Lease)


def read_lease(store: "Store", sha: bytes) -> Lease:
    data, _parents = store.objects.read_record(sha, ENTRY)
    try:
        return _decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise CorruptObject(sha.decode(), f"lease record does not decode ({exc})") from exc


def current(g: "Grite", resource: str) -> Lease | None:
    """The lease record this clone has for resource (the local ref or the remote's mirror)."""
    sha = g.store.refs.read(ref_for(resource))
    return read_lease(g.store, sha) if sha else None


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


def _end_of(lease: Lease, now: int) -> int:
    """When a lease ended, on its holder's clock (a live lease taken by force ends now)."""
    if lease.state == "released":
        return lease.released_at
    return min(lease.expires_at, now)


def _decide_acquire(resource: str, holder: Holder, ttl_ms: int, skew_ms: int, force: bool) -> Decide:
    def decide(prev, now, remote):
        if prev is not None and prev.state == "held":
            if prev.holder.id == holder.id:   # already ours (even if lapsed: nobody took it)
                return _Plan(msgspec.structs.replace(
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
        return _Plan(lease, True, _end_of(prev, now) if prev else 0)
    return decide


def _decide_renew(resource: str, holder: Holder, ttl_ms: int | None, force: bool) -> Decide:
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
        return _Plan(msgspec.structs.replace(
            prev, holder=holder if mine else prev.holder, expires_at=now + ttl, ttl_ms=ttl,
            written_at=now, action="renew" if mine else "force-renew",
            by="" if mine else holder.id, remote=remote), False, 0)
    return decide


def _decide_release(resource: str, holder: Holder, force: bool) -> Decide:
    def decide(prev, now, remote):
        if prev is None:
            raise NotFound(f"no lease on {resource}")
        if prev.state == "released":
            return None
        mine = prev.holder.id == holder.id
        if not mine and not force:
            raise Conflict(f"{resource} is held by {prev.holder.id}, not {holder.id}: only the "
                           f"holder releases it (--force overrides, recorded in its history)")
        return _Plan(msgspec.structs.replace(
            prev, state="released", released_at=now, written_at=now,
            action="release" if mine else "force-release", by="" if mine else holder.id,
            remote=remote), False, 0)
    return decide


def _decide_expire(by: str, skew_ms: int) -> Decide:
    def decide(prev, now, remote):
        if prev is None or judge(prev, now, skew_ms) != "expired":
            return None
        return _Plan(msgspec.structs.replace(
            prev, state="released", released_at=prev.expires_at, written_at=now,
            action="expire", by=by, remote=remote), False, 0)
    return decide


# -- the compare-and-swap engine ----------------------------------------------------


def _apply(g: "Grite", resource: str, decide: Decide, st: Settings, record: bool = True) -> Outcome:
    ref = ref_for(resource)
    if st.remote:
        try:
            return _apply_remote(g, ref, resource, decide, st, record)
        except RemoteUnreachable as exc:
            if not st.fallback:
                raise GriteError(f"{exc.message}; lease on {resource} unchanged "
                                 f"(drop --no-fallback to use a local lease)")
            out = _apply_local(g, ref, resource, decide, st, record)
            out.note = f"remote {st.remote} unreachable"
            return out
    return _apply_local(g, ref, resource, decide, st, record)


def _apply_local(g, ref: bytes, resource: str, decide: Decide, st: Settings,
                 record: bool = True) -> Outcome:
    """CAS on the local ref: read, decide, write the next record, swap; retry if it moved."""
    store = g.store
    deadline = time.monotonic() + lock_timeout()
    attempt = 0
    while True:
        attempt += 1
        old = store.refs.read(ref)
        prev = read_lease(store, old) if old else None
        now = now_ms()
        plan = decide(prev, now, "")
        if plan is None:
            return _unchanged(resource, prev, now, st, ref)
        commit = _write(g, plan, old)
        try:
            won = store.refs.cas(ref, old, commit, message=_message(plan).encode())
        except RefLocked:
            if time.monotonic() > deadline:
                raise
            won = False
        if won:
            return _finish(g, ref, plan, st, record)
        if time.monotonic() > deadline:
            raise Conflict(f"the lease on {resource} kept changing under {attempt} attempts; try again")
        time.sleep(random.uniform(0, min(0.05, 0.001 * (2 ** min(attempt, 6)))))


def _apply_remote(g, ref: bytes, resource: str, decide: Decide, st: Settings,
                  record: bool = True) -> Outcome:
    """The remote's ref decides: push the next record with --force-with-lease=<ref>:<expected>.

    The first attempt trusts the local mirror (one round trip when it is current); a refusal
    or a rejected push makes it look at the remote and decide again on what is really there.
    """
    store, remote = g.store, st.remote
    deadline = time.monotonic() + lock_timeout()
    expected = base = store.refs.read(ref)
    fresh = False
    while True:
        prev = read_lease(store, base) if base else None
        now = now_ms()
        try:
            plan = decide(prev, now, remote)
        except (Conflict, NotFound):
            if fresh:
                raise
            plan = None
        if plan is None:
            if fresh:
                return _unchanged(resource, prev, now, st, ref)
            expected, base = _refresh(store, remote, ref, st)
            fresh = True
            continue
        commit = _write(g, plan, base)
        mirrored = store.refs.read(ref)
        try:
            won, reason = store.remote.push_lease(remote, commit, ref, expected, st.timeout)
        except RemoteUnreachable as exc:
            if not fresh:
                raise   # nothing heard from the remote yet: _apply may decide locally
            raise RemoteFailed(remote, f"the push of the lease on {resource}", exc.detail) from exc
        if won:
            _mirror(store, ref, mirrored, commit, _message(plan))
            return _finish(g, ref, plan, st, record)
        if not any(r in reason for r in _RACE_REASONS):
            raise GriteError(f"remote {remote} refused the lease update for {resource}: {reason}")
        if time.monotonic() > deadline:
            raise Conflict(f"the lease on {resource} kept changing on {remote}; try again")
        expected, base = _refresh(store, remote, ref, st)
        fresh = True


def _refresh(store: "Store", remote: str, ref: bytes, st: Settings) -> tuple[bytes | None, bytes | None]:
    """(the remote's lease commit or None, the record to decide on and build upon).

    When the remote has no lease but this clone has one (taken while the remote was down),
    that local history is what gets decided on and pushed: tokens stay monotonic.

    Raises RemoteUnreachable only when ls-remote could not reach the remote; a fetch that
    fails after it answered is RemoteFailed. (`git fetch` also fails on this clone's own
    account: its connectivity check walks every work tree's HEAD, and `git worktree add`
    leaves a new one's HEAD a null id for a moment. Taken for an unreachable remote, that
    made the caller decide the lease locally, while the remote held it for another clone.)
    """
    for _ in range(5):
        sha = store.remote.ls_remote(remote, [ref.decode()], st.timeout).get(ref)
        if sha is None:
            return None, store.refs.read(ref)
        if not store.objects.has_object(sha):
            try:
                store.remote.fetch_objects(remote, [ref.decode()], st.timeout)
            except RemoteUnreachable as exc:
                raise RemoteFailed(remote, f"the fetch of {ref.decode()}", exc.detail) from exc
            if not store.objects.has_object(sha):
                continue   # it moved between ls-remote and fetch: look again
        _mirror(store, ref, store.refs.read(ref), sha)
        return sha, sha
    raise Conflict(f"the lease {ref.decode()} kept moving on {remote}; try again")


def refresh_all(store: "Store", st: Settings) -> None:
    """Mirror every lease ref of the remote into the local refs (the remote is the truth)."""
    refs = {n: s for n, s in store.remote.ls_remote(st.remote, [LOCKS.decode() + "*"], st.timeout).items()
            if n.startswith(LOCKS)}
    missing = [n.decode() for n, s in refs.items() if not store.objects.has_object(s)]
    if missing:
        store.remote.fetch_objects(st.remote, missing, st.timeout)
    for name, sha in refs.items():
        if store.objects.has_object(sha):
            _mirror(store, name, store.refs.read(name), sha)


def _mirror(store: "Store", ref: bytes, old: bytes | None, new: bytes, why: str = "") -> None:
    """Copy what the remote holds into the local ref, unless another process moved it meanwhile
    (it saw something at least as recent); the mirror is a cache, the remote is the truth."""
    if old == new:
        return
    try:
        store.refs.cas(ref, old, new, message=(why or "grite: lock mirror").encode())
    except RefLocked:
        pass


def _message(plan: _Plan) -> str:
    lease = plan.lease
    by = f" by {lease.by}" if lease.by else ""
    return f"grite: lock.{lease.action} {lease.resource} token {lease.token} holder {lease.holder.id}{by}"


def _write(g, plan: _Plan, parent: bytes | None) -> bytes:
    payload = msgspec.json.encode(plan.lease)
    return g.store.objects.write_record_commit(ENTRY, payload, parent, _message(plan), g.identity.git_author,
                                       plan.lease.written_at // 1000)


def _finish(g, ref: bytes, plan: _Plan, st: Settings, record: bool = True) -> Outcome:
    lease = plan.lease
    note = ""
    if plan.grant and record:
        # Replay fences by this: events under older tokens written after prev_end are stale.
        try:
            g.append([Draft(lock_entity(lease.resource),
                            ev.LeaseToken(lease.resource, lease.token, lease.holder.id, plan.prev_end))],
                     f"grite: lease {lease.resource} token {lease.token} to {lease.holder.id}")
        except GriteError as exc:
            note = f"granted, but the token was not recorded in the event log: {exc.message}"
    return view(lease, now_ms(), st.skew_ms, ref, Outcome, action=lease.action, note=note)


def _unchanged(resource: str, prev: Lease | None, now: int, st: Settings, ref: bytes) -> Outcome:
    if prev is None:
        raise NotFound(f"no lease on {resource}")
    return view(prev, now, st.skew_ms, ref, Outcome, action="none")


# -- operations -------------------------------------------------------------------------


def acquire(g: "Grite", resource: str, st: Settings, holder: Holder | None = None,
            force: bool = False, wait: float = 0.0, record: bool = True) -> Outcome:
    """Take the lease (or extend it if this holder has it); wait up to `wait` seconds for it.

    record=False leaves the grant's LeaseToken event to the caller's first `append_fenced`,
    which adds it to that batch (one append instead of two).
    """
    holder = holder or holder_for(g)
    decide = _decide_acquire(resource, holder, int(st.ttl * 1000), st.skew_ms, force)
    deadline = time.monotonic() + wait
    while True:
        try:
            return _apply(g, resource, decide, st, record)
        except LeaseHeld as exc:
            left = deadline - time.monotonic()
            if left <= 0:
                raise
            due = (exc.lease.expires_at + st.skew_ms - now_ms()) / 1000
            time.sleep(min(left, max(0.02, min(1.0, due)) * random.uniform(0.8, 1.2)))


def renew(g: "Grite", resource: str, st: Settings, holder: Holder | None = None,
          ttl: float | None = None, force: bool = False) -> Outcome:
    """Extend a lease this holder has (same token); with force, extend whoever holds it."""
    holder = holder or holder_for(g)
    return _apply(g, resource, _decide_renew(resource, holder, int(ttl * 1000) if ttl else None,
                                             force), st)


def release(g: "Grite", resource: str, st: Settings, holder: Holder | None = None,
            force: bool = False) -> Outcome:
    """Write a released record (the token stays, so the next grant is token + 1)."""
    holder = holder or holder_for(g)
    return _apply(g, resource, _decide_release(resource, holder, force), st)


def status(g: "Grite", st: Settings, resource: str | None = None, refresh: bool = True,
           released: bool = True) -> Status:
    """Every lease (or one), after mirroring the remote's leases when a remote is in use.

    released=False leaves out leases whose newest record is a release without reading them
    again (a year of finished work is tens of thousands of such refs)."""
    store, note = g.store, ""
    if st.remote and refresh:
        try:
            if resource:
                _refresh(store, st.remote, ref_for(resource), st)
            else:
                refresh_all(store, st)
        except RemoteUnreachable:
            note = f"remote {st.remote} unreachable; showing this clone's records"
        except RemoteFailed as exc:
            note = f"could not read the leases of {st.remote} ({exc.detail}); showing this " \
                   f"clone's records"
    now, leases, problems = now_ms(), [], []
    memo = Memo(os.path.join(grite_dir(store), "cache")) if not released else None
    known = _known_records(store) if released else _unreleased_records(store, memo)
    seen = memo.seen([sha for shas in known.values() for sha in shas]) if memo else {}
    new: dict[bytes, Seen] = {}
    if memo:
        _learn(store, [sha for shas in known.values() for sha in shas], seen, new)
    for name, records in sorted(known.items()):
        if resource and name != ref_for(resource):
            continue
        try:
            if memo is None:   # every lease: each record read once
                newest = max((read_lease(store, sha) for sha in records),
                             key=lambda lease: (lease.token, lease.written_at))
                leases.append(view(newest, now, st.skew_ms, name))
                continue
            sha, was_released = _newest(store, records, seen, new)
            if not was_released:
                leases.append(view(read_lease(store, sha), now, st.skew_ms, name))
        except CorruptObject as exc:
            problems.append(f"{name.decode()}: {exc.message}")
    if memo:
        memo.remember(new)
    if resource and not leases and not problems:
        raise NotFound(f"no lease on {resource}")
    return Status(leases, note, problems)


def _learn(store: "Store", shas: list[bytes], seen: dict[bytes, Seen],
           new: dict[bytes, Seen]) -> None:
    """Add to `new` what the records not yet seen say, read through one git process when there
    are many (a fresh clone of a busy repository fetched a year of them). Unreadable ones are
    left out: reading them again names the problem."""
    unknown = [s for s in dict.fromkeys(shas) if s not in seen and s not in new]
    if len(unknown) < 32:
        return   # read one by one where needed: cheaper than starting git
    for sha, data in store.catfile.cat_blobs([s.decode() for s in unknown], ENTRY.decode()):
        try:
            lease = _decoder.decode(data) if data is not None else None
        except (msgspec.DecodeError, msgspec.ValidationError):
            lease = None
        if lease is not None:
            new[sha.encode()] = Seen(lease.token, lease.written_at, lease.state == "released")


def _newest(store: "Store", records: list[bytes], seen: dict[bytes, Seen],
            new: dict[bytes, Seen]) -> tuple[bytes, bool]:
    """The sha of the newest of a lock's records (by token, then time written) and whether it
    is a release. Records not in `seen` are read, and added to `new`."""
    order = {}
    for sha in records:
        known = seen.get(sha) or new.get(sha)
        if known is None:
            lease = read_lease(store, sha)
            known = new[sha] = Seen(lease.token, lease.written_at, lease.state == "released")
        order[sha] = known
    sha = max(records, key=lambda s: (order[s].token, order[s].written_at))
    return sha, order[sha].released


def _known_records(store: "Store") -> dict[bytes, list[bytes]]:
    """Lock ref -> every record of it this clone has: its own and those fetched from remotes.

    A plain `git fetch` brings other clones' lease changes to refs/remotes/<r>/grite/locks/;
    without them a released lease would still look held here.
    """
    out: dict[bytes, list[bytes]] = {}
    for name, sha in store.refs.under(LOCKS).items():
        out.setdefault(name, []).append(sha)
    for name, sha in store.refs.under(b"refs/remotes/").items():
        local = _local_name(name)
        if local:
            out.setdefault(local, []).append(sha)
    return out


def _local_name(ref: bytes) -> bytes | None:
    """refs/remotes/<remote>/grite/locks/X -> refs/grite/locks/X (None for any other ref)."""
    remote_part, sep, rest = ref.partition(b"/grite/locks/")
    if sep and ref.startswith(b"refs/remotes/") and remote_part.count(b"/") == 2:
        return LOCKS + rest
    return None


def _unreleased_records(store: "Store", memo: Memo) -> dict[bytes, list[bytes]]:
    """_known_records for the locks that may not be released: every loose lock ref (recent
    changes) and the packed ones a summary of the packed-refs file names (computed once per
    file: after `git gc` it holds a year of released leases)."""
    packed = store.refs.packed()
    live = memo.packed_live(packed.key)
    if live is None:
        live = _summarize_packed(store, packed, memo)
    loose = store.refs.loose_under(LOCKS)
    loose_remote = {n: s for n, s in store.refs.loose_under(b"refs/remotes/").items()
                    if _local_name(n)}
    remotes = set(live.remotes) | {n.partition(b"/grite/locks/")[0] for n in loose_remote}
    names = set(live.names) | set(loose) | {_local_name(n) for n in loose_remote}
    out: dict[bytes, list[bytes]] = {}
    for name in names:
        own = loose.get(name) or packed.get(name)
        shas = [own] if own else []
        for remote in remotes:
            copy = remote + b"/grite/locks/" + name[len(LOCKS):]
            sha = loose_remote.get(copy) or packed.get(copy)
            if sha:
                shas.append(sha)
        if shas:
            out[name] = shas
    return out


def _summarize_packed(store: "Store", packed, memo: Memo) -> PackedLive:
    by_name: dict[bytes, list[bytes]] = {}
    remotes = set()
    for name, sha in packed.under(LOCKS).items():
        by_name.setdefault(name, []).append(sha)
    for name, sha in packed.containing(b"/grite/locks/", within=b"refs/remotes/").items():
        local = _local_name(name)
        if local:
            by_name.setdefault(local, []).append(sha)
            remotes.add(name.partition(b"/grite/locks/")[0])
    seen = memo.seen([sha for shas in by_name.values() for sha in shas])
    new: dict[bytes, Seen] = {}
    _learn(store, [sha for shas in by_name.values() for sha in shas], seen, new)
    live = []
    for name, shas in by_name.items():
        try:
            if not _newest(store, shas, seen, new)[1]:
                live.append(name)
        except CorruptObject:
            live.append(name)   # status reads it again and reports the problem
    memo.remember(new)
    summary = PackedLive(sorted(live), sorted(remotes))
    memo.set_packed_live(packed.key, summary)
    return summary


def gc(g: "Grite", st: Settings, dry_run: bool = False) -> Status:
    """Mark leases whose holders let them expire as released (recorded, tokens kept)."""
    report = status(g, st)
    by = default_holder_id(g)
    unreachable = bool(report.note)
    done = []
    for lease in report.leases:
        if lease.state != "expired" or (unreachable and lease.remote):
            continue   # a remote-decided lease is only expired through its remote
        if dry_run:
            done.append(lease)
            continue
        local = Settings(None, st.ttl, st.skew, timeout=st.timeout) if unreachable else st
        out = _apply(g, lease.resource, _decide_expire(by, st.skew_ms), local)
        if out.action == "expire":
            done.append(out)
    return Status(done, report.note, report.problems)


# -- writing under a lease ------------------------------------------------------------


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
    """The LeaseToken event for `token`'s grant, rebuilt from the lease's own history."""
    records = history(g, resource)
    lease = next(r for r in records if r.token == token)
    prev = next((r for r in records if r.token < token), None)
    prev_end = _end_of(prev, lease.acquired_at) if prev else 0
    return Draft(lock_entity(resource), ev.LeaseToken(resource, token, lease.holder.id, prev_end))
