"""Repair damaged logs (`git grite doctor --fix`): back to a repository git itself is happy with.

A log ref whose history holds a record that cannot be read (a commit, tree or events blob that
is gone or damaged: `git gc --prune=now` while grite wrote, a disk fault) makes `git gc` and
`git fsck` fail from then on, and a replica that publishes it spreads the damage. Repair:

- the local log `refs/grite/wal` is rebuilt on its newest commit whose whole history reads
  (its current tip, else what its reflog names), and every batch still readable in the damaged
  part of any log (ours, fetched ones, the attic) is carried onto it, events unchanged (the
  batch header names us), so every such event keeps its id (replay is idempotent: one that is also elsewhere counts once);
- damaged refs other than ours are deleted once their readable batches are carried (a fetch
  brings a remote's copy back whole), and so are snapshots that cover unreadable records
  (their content is kept, parentless, under `refs/grite/salvage/<replica>/<commit>`);
- reflog entries that name objects that are gone are dropped (`git gc` reads them too);
- each damaged tip is recorded in `.git/grite/rewrites.json` (kind `damaged`), and what could
  not be read anywhere is reported record by record, with what its commit message or the
  reflog still says about it.
"""

from __future__ import annotations


import msgspec

from git_brat import process
from git_brat.grite.model import events as ev
from git_brat.errors import CorruptObject
from git_brat.git.store import Store
from git_brat.grite.log.refs import log_tips, read_log_blob, write_log_commit
from git_brat.grite.log.wal import signature_body

WAL = b"refs/grite/wal"
SALVAGE = b"refs/grite/salvage/"   # snapshots that covered lost records, cut loose


class Lost(msgspec.Struct):
    commit: str
    detail: str


class Repair(msgspec.Struct):
    damaged: list[str]              # refs whose history held unreadable records
    old_tip: str | None             # refs/grite/wal before (None: untouched)
    new_tip: str | None
    carried: int                    # readable batches carried onto the rebuilt log
    dropped: list[str]              # refs deleted (their readable batches carried)
    lost: list[Lost]


class _Rec:
    __slots__ = ("sha", "parents", "payload", "message", "author", "time", "lamport")

    def __init__(self, sha, parents, payload, message, author, when, lamport):
        self.sha, self.parents, self.payload = sha, parents, payload
        self.message, self.author, self.time, self.lamport = message, author, when, lamport


def _survey(store: Store, starts: list[str], recs: dict[str, _Rec | None]) -> None:
    """Read every record reachable from starts in-process (None: the commit itself is gone).

    A record whose commit reads but whose events do not keeps its parents (payload None).
    """
    stack = [s for s in starts if s not in recs]
    while stack:
        sha = stack.pop()
        if sha in recs:
            continue
        try:
            c = store.objects.read_commit(sha.encode())
        except CorruptObject:
            recs[sha] = None
            continue
        payload, lamport = None, 0
        try:
            payload = read_log_blob(store, c)
            lamport = ev.decode_batch(payload).lamport
        except (CorruptObject, msgspec.DecodeError, msgspec.ValidationError):
            payload = None
        recs[sha] = _Rec(sha, [p.decode() for p in c.parents], payload, c.message, c.author,
                         c.time, lamport)
        stack.extend(p.decode() for p in c.parents if p.decode() not in recs)


def _healthy(recs: dict[str, _Rec | None], sha: str, memo: dict[str, bool],
             aside: frozenset[str] = frozenset()) -> bool:
    """Whether sha and its whole history read (iterative: logs are long); a quarantined
    commit (aside) counts as read: git reads it, grite skips it."""
    stack = [sha]
    while stack:
        top = stack[-1]
        if top in memo:
            stack.pop()
            continue
        rec = recs.get(top)
        if rec is None or (rec.payload is None and top not in aside):
            memo[top] = False
            stack.pop()
            continue
        pending = [p for p in rec.parents if p not in memo]
        if pending:
            stack.extend(pending)
            continue
        memo[top] = all(memo[p] for p in rec.parents)
        stack.pop()
    return memo[sha]


def _reachable(recs: dict[str, _Rec | None], starts) -> set[str]:
    seen: set[str] = set()
    stack = list(starts)
    while stack:
        sha = stack.pop()
        if sha in seen:
            continue
        seen.add(sha)
        rec = recs.get(sha)
        if rec is not None:
            stack.extend(rec.parents)
    return seen


def _as_ours(payload: bytes, replica: str) -> bytes:
    """A batch carried from another replica's log, with our replica in its header: a log's
    batches name its owner (a peer reads the owner of a fetched wal from its tip). The events,
    and so their ids, are unchanged."""
    batch = ev.decode_batch(payload)
    if batch.replica == replica or any(isinstance(e.op, ev.UnknownOp) for e in batch.events):
        return payload
    return ev.encode_batch(ev.Batch(batch.v, replica, batch.lamport, batch.events))


def repair(store: Store, replica: str) -> Repair:
    """Rebuild the local log from what is readable anywhere; drop what git cannot read.

    The rebuilt log starts from the newest healthy commit of this replica's log that any ref
    or the reflog names (our published copies first), so what was published stays an
    ancestor whenever the damage came after it, and the next push is a fast-forward.
    """
    from git_brat.grite.log import attic
    from git_brat.grite.log import cut
    from git_brat.grite.cache import snapshot
    tips = {name: sha for name, sha in log_tips(store).items()}
    # Where history was cut, every log would look damaged below the cut and be dropped.
    cut.refuse_if_cut(store, tips.values(), "repair logs")
    reflog = store.refs.reflog(WAL)
    said = {sha: msg for sha, msg in reflog}   # what the reflog says a commit was
    wal_tip = tips.get(WAL.decode())
    published = [sha for n, sha in tips.items() if n.endswith(f"/grite/replicas/{replica}")]
    candidates = list(dict.fromkeys([*([wal_tip] if wal_tip else []),
                                     *(sha for sha, _m in reversed(reflog))]))
    recs: dict[str, _Rec | None] = {}
    _survey(store, [*tips.values(), *candidates], recs)
    memo: dict[str, bool] = {}
    from git_brat.grite.log import quarantine
    aside = frozenset(quarantine.commits(store))
    damaged = sorted(n for n, sha in tips.items() if not _healthy(recs, sha, memo, aside))
    snaps = []
    for snap in snapshot.listed(store):
        _survey(store, snap.meta.covers, recs)
        if not all(_healthy(recs, c, memo, aside) for c in snap.meta.covers):
            snaps.append(snap)
    if not damaged and not snaps:
        return Repair([], None, None, 0, [], [])

    # The base: the newest commit of our log whose whole history reads, preferring one that
    # contains what we published (the wal is the published copy plus what came after).
    base = None
    for cand in [*candidates, *published]:
        sha = cand
        while sha is not None:
            if _healthy(recs, sha, memo, aside):
                base = sha
                break
            rec = recs.get(sha)
            sha = rec.parents[0] if rec is not None and rec.parents else None
        if base is not None:
            break
    for pub in published:   # a healthy published copy ahead of that base is the better base
        if base is not None and _healthy(recs, pub, memo, aside) and base in _reachable(recs, [pub]):
            base = pub
    healthy_tips = [sha for n, sha in tips.items() if n not in damaged]
    kept = _reachable(recs, [*healthy_tips, *([base] if base else [])])
    broken_starts = [tips[n] for n in damaged] + [c for c in candidates if c not in kept]
    suspect = _reachable(recs, broken_starts) - kept
    carry = sorted((recs[s] for s in suspect if recs.get(s) is not None and recs[s].payload),
                   key=lambda r: (r.lamport, r.time, r.sha))
    # Records two commits share (the same blob) are carried once.
    seen_payloads: set[bytes] = set()
    lost = []
    for sha in sorted(suspect):
        rec = recs.get(sha)
        if rec is not None and (rec.payload is not None or sha in aside):
            continue
        if rec is None:
            what = said.get(sha)
            detail = ("commit gone" + (f"; the reflog says it was: {what}" if what else "") +
                      "; history behind it is read from other logs and the reflog")
        else:
            detail = f"events unreadable; its commit says: {rec.message.strip()}"
        lost.append(Lost(sha, detail))

    new_tip = base
    carried = 0
    for rec in carry:
        if rec.payload in seen_payloads:
            continue
        seen_payloads.add(rec.payload)
        payload = _as_ours(rec.payload, replica)
        new_tip = write_log_commit(store, payload, new_tip.encode() if new_tip else None,
                                   (rec.message.strip().splitlines() or [""])[0],
                                   rec.author.encode(), rec.time,
                                   signature_body(store, replica, payload)).decode()
        carried += 1
    old_tip = wal_tip
    now = process.now_ms()
    records = []
    if new_tip != wal_tip:
        if new_tip is None:
            if wal_tip:
                store.refs.delete_if(WAL, wal_tip.encode())
        elif not store.refs.cas(WAL, wal_tip.encode() if wal_tip else None, new_tip.encode(),
                               b"grite: doctor --fix rebuilt the log from every readable record"):
            from git_brat.errors import Conflict
            raise Conflict("refs/grite/wal moved while doctor repaired it; run `git grite "
                           "doctor --fix` again")
        if wal_tip:
            records.append(attic.Rewrite(WAL.decode(), wal_tip, new_tip, None, now, True,
                                         "damaged"))
    dropped = []
    for name in damaged:
        if name == WAL.decode():
            continue
        store.refs.delete_if(name.encode(), tips[name].encode())
        dropped.append(name)
        records.append(attic.Rewrite(name, tips[name], None, None, now, True, "damaged"))
    for snap in snaps:
        # Its state may be the only trace of events no log has any more: its content is kept,
        # cut loose from the records git cannot read (used by nothing; there to be looked at).
        try:
            keep = store.objects.reparent(snap.commit.encode(), f"grite: snapshot {snap.commit} kept "
                                  f"by doctor --fix; it covered records that are gone")
            store.refs.cas(SALVAGE + f"{snap.meta.replica}/{snap.commit}".encode(), None, keep)
        except Exception:   # noqa: BLE001 - its own tree is damaged: nothing to keep
            pass
        snapshot.reject(store, snap.commit)
        store.refs.delete_if(snap.ref.encode(), snap.commit.encode())
        dropped.append(snap.ref)
    if records:
        attic.note(store, records)
    store.refs.drop_broken_reflog_entries()
    return Repair(damaged, old_tip if new_tip != wal_tip else None,
                  new_tip if new_tip != wal_tip else None, carried, dropped, lost)
