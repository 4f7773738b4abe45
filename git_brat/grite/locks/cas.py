"""The compare-and-swap engine applying lease decisions, here or on a remote; acquire, renew, release."""

from __future__ import annotations

import random
import time
from typing import TYPE_CHECKING

import msgspec

from git_brat.process import now_ms
from git_brat.grite.model import events as ev
from git_brat.errors import Conflict, CorruptObject, GriteError, NotFound, RefLocked, RemoteUnreachable
from git_brat.grite.locks.lease import (
    ENTRY, LOCKS, MAX_FORCERS, Decide, Holder, Lease, LeaseHeld, Outcome, Plan, decide_acquire,
    decide_release, decide_renew, effective, holder_for, lock_entity, naming_forcers, ref_for, view)
from git_brat.grite.cache import seals
from git_brat.grite.locks import authority
from git_brat.grite.log import sign
from git_brat.grite.log.refs import grite_dir
from git_brat.grite.locks.settings import Settings
from git_brat.grite.log.wal import Draft, lock_timeout

if TYPE_CHECKING:
    from git_brat.git.store import Store
    from git_brat.grite.repo import Grite

# Rejected pushes that mean "someone else moved the ref first": look again, then decide.
_RACE_REASONS = ("stale info", "failed to update ref", "cannot lock ref", "failed to lock",
                 "incorrect old value", "fetch first", "non-fast-forward", "already exists")


class RemoteFailed(GriteError):
    """The lock remote answered, then talking to it failed (this clone's git gave up on the
    fetch, or the connection dropped): what it holds is unknown, so unlike RemoteUnreachable
    this is never a reason to decide the lease locally."""

    def __init__(self, remote: str, what: str, detail: str):
        super().__init__(f"remote {remote} answered, then {what} failed: {detail}; "
                         f"the lease is unchanged here, try again")
        self.remote, self.detail = remote, detail


# -- the compare-and-swap engine ----------------------------------------------------


def apply(g: "Grite", resource: str, decide: Decide, st: Settings, record: bool = True) -> Outcome:
    """Apply a decision to the lease on resource: on st.remote when there is one (locally when
    it is unreachable and st.fallback allows), else on this clone's ref."""
    ref = ref_for(resource)
    # (the key and its crypto loaded before any tip is read: the CAS window stays short)
    decide = naming_forcers(decide, _signer(g).key, _forcers(g), g.identity.replica.id)
    if st.remote:
        st = authority.resolve(g, st)
        try:
            return _apply_remote(g, ref, resource, decide, st, record)
        except RemoteUnreachable as exc:
            if not st.fallback:
                # Still a RemoteUnreachable: a caller that never decides locally (the witness)
                # tells an outage from a refusal by its type, and waits it out.
                raise RemoteUnreachable(st.remote, f"{exc.detail}; lease on {resource} unchanged "
                                        f"(drop --no-fallback to use a local lease)") from exc
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
        now = now_ms()
        prev = _granted(store, old, now)
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


def _granted(store, sha: bytes | None, now: int):
    """The lease a ref's records grant; None for no ref, or for one of which no record can be
    read: a pusher's junk grants nothing, so the lease is free and the next record goes on
    top of it (status and doctor name the junk)."""
    if not sha:
        return None
    try:
        return effective(store, sha, now)[0]
    except CorruptObject:
        return None


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
        now = now_ms()
        prev = _granted(store, base, now)
        try:
            plan = decide(prev, now, remote)
        except (Conflict, NotFound):
            if fresh:
                raise
            plan = None
        if plan is None:
            if fresh:
                return _unchanged(resource, prev, now, st, ref)
            expected, base = refresh(store, remote, ref, st)
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
            out = _finish(g, ref, plan, st, record)
            if plan.grant and authority.recorded(g) is None:
                authority.establish(g, st)
            return out
        if not any(r in reason for r in _RACE_REASONS):
            raise GriteError(f"remote {remote} refused the lease update for {resource}: {reason}")
        if time.monotonic() > deadline:
            raise Conflict(f"the lease on {resource} kept changing on {remote}; try again")
        expected, base = refresh(store, remote, ref, st)
        fresh = True


def refresh(store: "Store", remote: str, ref: bytes, st: Settings) -> tuple[bytes | None, bytes | None]:
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


def _message(plan: Plan) -> str:
    lease = plan.lease
    by = f" by {lease.by}" if lease.by else ""
    return f"grite: lock.{lease.action} {lease.resource} token {lease.token} holder {lease.holder.id}{by}"


_SIGNERS: dict[str, sign.Signer] = {}   # grite dir -> its replica's key, loaded once a process


def _signer(g) -> sign.Signer:
    where = grite_dir(g.store)
    if where not in _SIGNERS:
        _SIGNERS[where] = sign.Signer(where)
    return _SIGNERS[where]


def _forcers(g) -> list[str]:
    """The keys this clone lets override the leases it holds: the keys it trusts (its own
    first; at most MAX_FORCERS, the rest left out in a stable order)."""
    from git_brat.grite.log.verify import trusted_keys
    own = _signer(g).key
    return [own, *sorted(trusted_keys(g.store) - {own})][:MAX_FORCERS]


def _write(g, plan: Plan, parent: bytes | None) -> bytes:
    """The next record, signed like a batch (by this replica's key, over the record it follows):
    a reader believes an override only from a key it trusts, a holder's renew or release only
    from the key that signed the grant."""
    payload = msgspec.json.encode(plan.lease)
    signer = _signer(g)
    commit = g.store.objects.write_record_commit(
        ENTRY, payload, parent, _message(plan), g.identity.git_author,
        plan.lease.written_at // 1000, body=signer.lease_trailers(payload, parent))
    seals.remember(g.store, commit, signer.key)
    return commit


def _finish(g, ref: bytes, plan: Plan, st: Settings, record: bool = True) -> Outcome:
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
    decide = decide_acquire(resource, holder, int(st.ttl * 1000), st.skew_ms, force)
    deadline = time.monotonic() + wait
    while True:
        try:
            return apply(g, resource, decide, st, record)
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
    return apply(g, resource, decide_renew(resource, holder, int(ttl * 1000) if ttl else None,
                                             force), st)


def release(g: "Grite", resource: str, st: Settings, holder: Holder | None = None,
            force: bool = False, unused: bool = False) -> Outcome:
    """Write a released record (the token stays, so the next grant is token + 1); `unused`:
    a grant given back before anything was done under it."""
    holder = holder or holder_for(g)
    return apply(g, resource, decide_release(resource, holder, force, unused), st)
