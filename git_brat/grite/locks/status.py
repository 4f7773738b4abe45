"""Every lease this clone knows of, its own and those fetched from remotes; gc of the expired ones."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import msgspec

from git_brat.process import now_ms
from git_brat.errors import CorruptObject, NotFound, RemoteUnreachable
from git_brat.grite.locks import authority, cas
from git_brat.grite.locks.lease import (
    ENTRY, LOCKS, Forged, LeaseView, decide_expire, default_holder_id, effective, lease_decoder,
    read_lease, ref_for, view)
from git_brat.grite.locks.memo import Memo, PackedLive, Seen
from git_brat.grite.locks.settings import Settings
from git_brat.grite.log.refs import grite_dir

if TYPE_CHECKING:
    from git_brat.git.store import Store
    from git_brat.grite.model.leases import Lease
    from git_brat.grite.repo import Grite


class Status(msgspec.Struct):
    leases: list[LeaseView]
    note: str = ""
    problems: list[str] = []
    forged: list[Forged] = []    # records on the lease refs that do not count (lease.effective)


def status(g: "Grite", st: Settings, resource: str | None = None, refresh: bool = True,
           released: bool = True) -> Status:
    """Every lease (or one), after mirroring the remote's leases when a remote is in use.

    released=False leaves out leases whose newest record is a release without reading them
    again (a year of finished work is tens of thousands of such refs)."""
    store, note = g.store, ""
    if st.remote and refresh:
        st = authority.resolve(g, st)
        try:
            if resource:
                cas.refresh(store, st.remote, ref_for(resource), st)
            else:
                cas.refresh_all(store, st)
        except RemoteUnreachable:
            note = f"remote {st.remote} unreachable; showing this clone's records"
        except cas.RemoteFailed as exc:
            note = f"could not read the leases of {st.remote} ({exc.detail}); showing this " \
                   f"clone's records"
    now, leases, problems, forged = now_ms(), [], [], []

    def judged(sha: bytes, name: bytes):
        lease, bad = effective(store, sha, now)
        forged.extend(bad)
        return view(lease, now, st.skew_ms, name)

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
                newest = max(records, key=lambda sha: (lambda lease: (
                    lease.token, lease.written_at))(_ordered_by(store, sha)))
                leases.append(judged(newest, name))
                continue
            sha, was_released = _newest(store, records, seen, new)
            if was_released and sha in new:
                # Anyone can push a release: one not seen before is judged once, and only a
                # believed one is remembered (a held lease under a forged release stays shown).
                shown = judged(sha, name)
                if shown.state != "released":
                    leases.append(shown)
                    del new[sha]
            elif not was_released:
                leases.append(judged(sha, name))
        except CorruptObject as exc:
            problems.append(f"{name.decode()}: {exc.message}")
    if memo:
        memo.remember(new)
    if resource and not leases and not problems:
        raise NotFound(f"no lease on {resource}")
    return Status(leases, note, problems, forged)


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
            lease = lease_decoder.decode(data) if data is not None else None
        except (msgspec.DecodeError, msgspec.ValidationError):
            lease = None
        if lease is not None:
            new[sha.encode()] = Seen(lease.token, lease.written_at, lease.state == "released")


def _ordered_by(store: "Store", sha: bytes) -> Lease:
    """The record a ref's tip is ordered by among its copies: the tip, or when it does not
    decode (anyone can push one) the lease its readable records grant."""
    try:
        return read_lease(store, sha)
    except CorruptObject:
        return effective(store, sha, now_ms())[0]


def _newest(store: "Store", records: list[bytes], seen: dict[bytes, Seen],
            new: dict[bytes, Seen]) -> tuple[bytes, bool]:
    """The sha of the newest of a lock's records (by token, then time written) and whether it
    is a release. Records not in `seen` are read, and added to `new`."""
    order = {}
    for sha in records:
        known = seen.get(sha) or new.get(sha)
        if known is None:
            lease = _ordered_by(store, sha)
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


def ungrounded_tokens(g: "Grite") -> list[Forged]:
    """The log's lease tokens replay did not apply as fences: the lease's records here do not
    grant them (past every record: not fetched yet, or forged; a grant with another end than
    its record's: forged). Anyone who can push writes events, and one such token believed would
    make every clone reject the genuine holder's events; replay ignores it, this names it."""
    state = g.state()
    out = []
    for eid, held in sorted(state.lease_held.items()):
        why = state.rejected.get(eid)
        out.append(Forged(held.resource, eid, "lease-token", "", held.token,
                          f"{why.reason if why else 'not granted by its records'}; rejected, "
                          f"not applied (nothing for --fix to do: replay already ignores it)"))
    return out


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
        out = cas.apply(g, lease.resource, decide_expire(by, st.skew_ms), local)
        if out.action == "expire":
            done.append(out)
    return Status(done, report.note, report.problems, report.forged)
