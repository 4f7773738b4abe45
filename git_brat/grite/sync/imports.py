"""Taking fetched logs in: relay other replicas' logs, keep what a rewind dropped, extend the cache."""

from __future__ import annotations

import os
import re

import msgspec

from git_brat.grite.log import attic
from git_brat.grite.log import identity
from git_brat.grite.log import verify
from git_brat.errors import UsageError
from git_brat.files import atomic_write
from git_brat.git.store import Store
from git_brat.grite.log.refs import STAMP_PATTERNS, events_blob, grite_dir, log_tips
from git_brat.grite.repo import Grite
from git_brat.grite.sync.install import sync_dir

class RefMove(msgspec.Struct):
    ref: str
    old: str | None
    new: str | None


class ImportResult(msgspec.Struct):
    moved: list[RefMove]
    rewrites: list[attic.Rewrite]
    rejected: list[verify.RejectedBatch] = []   # batches judged (and not believed) by this import
    erasures: list[verify.Erasure] = []         # logs shorter here than another replica saw them
    left: list[str] = []   # fetched log refs past grite.maxFetchRefs or grite.maxFetchBytes:
    cap: int = 0           # the next read takes them in
    max_bytes: int = 0
    disputed: dict[str, list[str]] = {}   # actors this import made disputed -> their claimants

    def left_warning(self) -> str | None:
        if not self.left:
            return None
        named = ", ".join(self.left[:LISTED]) + (f" and {len(self.left) - LISTED} more"
                                                  if len(self.left) > LISTED else "")
        caps = " or ".join([*([f"grite.maxFetchRefs={self.cap} new logs"] if self.cap else []),
                            *([f"grite.maxFetchBytes={self.max_bytes} bytes of new events"]
                              if self.max_bytes else [])])
        return (f"{len(self.left)} fetched log refs were left out of this fetch's import (over "
                f"{caps}): {named}; the next grite or brat command takes them in, "
                f"`git grite sync` at once")

    def warnings(self) -> list[str]:
        """One line for each kind of thing a user should look at after a fetch, bounded
        whatever the fetch brought: a pusher can make thousands of refs."""
        out = _bounded([f"{r.ref} was rewound or rewritten by its remote; what it had is kept"
                        for r in self.rewrites if r.kind == "rewrite"], "logs rewritten")
        out += _bounded([f"{r.ref}: batch {r.sha[:12]} not believed: {r.detail}"
                         for r in self.rejected], "batches not believed")
        out += _bounded([e.describe() for e in self.erasures], "logs shorter than seen")
        out += _bounded([f"actor {a} is disputed: {' and '.join(f'replica {r}' for r in who)} "
                         "speak as it (each one's events are shown as its own replica's words)"
                         for a, who in sorted(self.disputed.items())], "actors disputed")
        left = self.left_warning()
        return out + ([left] if left else [])


SHOWN = 3              # items of one kind a fetch's warning names; the rest counted
SHOWN_CHARS = 240      # of each item named


def _bounded(items: list[str], what: str) -> list[str]:
    """items as at most one line: all of them when few, else their count, the first SHOWN
    (each cut to SHOWN_CHARS) and how many more; doctor lists every one."""
    if not items:
        return []
    cut = [i if len(i) <= SHOWN_CHARS else i[:SHOWN_CHARS - 3] + "..." for i in items[:SHOWN]]
    if len(items) <= SHOWN:
        return ["; ".join(cut) + " (see `git grite doctor`)"]
    return [f"{len(items)} {what}: " + "; ".join(cut)
            + f"; and {len(items) - SHOWN} more (`git grite doctor` lists them)"]


def _stamp_path(store: Store) -> str:
    return os.path.join(sync_dir(store), "imported")


def _read_stamp(store: Store) -> dict[str, str]:
    try:
        with open(_stamp_path(store)) as f:
            return {ref: sha for sha, _, ref in (ln.partition(" ") for ln in f.read().splitlines())
                    if ref}
    except OSError:
        return {}


REPLICAS = "refs/grite/replicas/"
MAX_FETCH_REFS = 256   # new logs one fetch's import takes in (grite.maxFetchRefs; 0: no cap)
MAX_FETCH_BYTES = 256 << 20   # bytes of new events it takes in (grite.maxFetchBytes; 0: no cap)
LISTED = 10            # left refs named in the warning; the rest counted
_REPLICA_ID = re.compile(r"[0-9a-f]{1,64}\Z")


def _log_owner(store: Store, sha: str) -> str | None:
    """The replica that wrote a log's tip batch (a peer's wal fetched straight from it)."""
    from git_brat.grite.model import events as ev
    data = events_blob(store, sha)
    try:
        return ev.decode_head(data).replica if data is not None else None
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def relay_known(store: Store) -> list[RefMove]:
    """Move this clone's own `refs/grite/replicas/<X>` forward to every fetched log of X.

    They are what this clone relays: fetched by whoever clones or fetches it (under
    `refs/grite/`), and pushed to every remote it syncs. Forward only: a ref moves only to a
    commit that has its current tip in its history, so a remote that rewinds a log cannot
    make us relay less, and a relay is never a forced update.
    """
    own = identity.load_replica(grite_dir(store)).id
    tips = log_tips(store)
    want: dict[str, set[str]] = {}
    for name, sha in tips.items():
        if not name.startswith("refs/remotes/"):
            continue
        if "/grite/attic/" in name:
            continue   # what a remote kept of a rewritten log: its own attic, never relayed as a log
        if "/grite/replicas/" in name:
            owner = name.rpartition("/")[2]
        elif name.endswith("/grite/wal"):
            owner = _log_owner(store, sha)
        else:
            continue
        if owner and owner != own and _REPLICA_ID.fullmatch(owner):
            want.setdefault(owner, set()).add(sha)
    moved = []
    for owner, shas in sorted(want.items()):
        ref = REPLICAS + owner
        cur = first = tips.get(ref)
        for sha in sorted(shas):   # (one already in cur's history is no fast-forward either)
            if sha != cur and (cur is None or store.objects.is_ancestor(cur, sha)) and store.refs.cas(
                    ref.encode(), cur.encode() if cur else None, sha.encode(),
                    b"grite: relay a fetched log"):
                cur = sha
        if cur != first:
            moved.append(RefMove(ref, first, cur))
    return moved


def max_fetch_refs(store: Store) -> int:
    return _cap(store, "grite.maxFetchRefs", MAX_FETCH_REFS, "logs")


def max_fetch_bytes(store: Store) -> int:
    return _cap(store, "grite.maxFetchBytes", MAX_FETCH_BYTES, "bytes of new events")


def _cap(store: Store, key: str, default: int, what: str) -> int:
    """A per-fetch cap from git config: a whole number, 0 for none; UsageError otherwise."""
    raw = store.config_get(key)
    try:
        n = int(raw) if raw is not None else default
    except ValueError:
        n = -1
    if n < 0:
        raise UsageError(f"{key} is {raw!r}: it takes a whole number of {what} one fetch takes "
                         f"in, 0 for no cap (`git config {key} {default}`)")
    return n


def capped_tips(store: Store, frontier: dict[str, str], tips: dict[str, str], cap: int,
                max_bytes: int = 0) -> tuple[dict[str, str], list[str]]:
    """The log tips one fetch's import takes in, and the refs it leaves: at most `cap` new logs
    (a tip the cache has not taken in under any ref), in ref-name order, and of those what fits
    in `max_bytes` of new events blobs (sizes from git, unread). A left ref stays at the tip
    taken in before, or out if it is new. This clone's own log is never left."""
    known = set(frontier.values())
    new: dict[str, list[str]] = {}
    for ref, sha in sorted(tips.items()):
        if ref != verify.WAL and frontier.get(ref) != sha and sha not in known:
            new.setdefault(sha, []).append(ref)
    order = list(new)
    take, left_shas = (order[:cap], order[cap:]) if cap else (order, [])
    if max_bytes and take and _new_bytes(store, take, known) > max_bytes:
        kept, used, base = [], 0, list(known)
        for sha in take:   # (one at a time only when all of them are too many)
            size = _new_bytes(store, [sha], base)
            if used + size <= max_bytes:
                kept.append(sha)
                used += size
                base.append(sha)
            else:
                left_shas.append(sha)
        take = kept
    if not left_shas:
        return tips, []
    left = sorted(r for sha in left_shas for r in new[sha])
    out = dict(tips)
    for ref in left:
        if ref in frontier:
            out[ref] = frontier[ref]
        else:
            del out[ref]
    return out, left


def _new_bytes(store: Store, tips: list[str], known) -> int:
    """Bytes of the events blobs reachable from tips and not from known (0: git cannot tell,
    and replay then names what it cannot read)."""
    from git_brat.errors import GriteError
    try:
        return sum(store.catfile.sizes(store.catfile.rev_list(tips, known), "events"))
    except GriteError:
        return 0


def import_logs(g: Grite, before: dict[str, str] | None = None,
                hint: list[tuple[str, str]] = (), warm_list: bool = True,
                cap: bool = False) -> ImportResult:
    """Take fetched logs into the local view: keep whatever a ref stopped reaching, extend the cache.

    `before`: the log tips before a fetch; `hint`: (ref, old sha) pairs a hook was told about.
    These, the refs the last import saw and the cache's own frontier are all compared with now.
    `cap`: a fetch's own import (its hook) takes in at most grite.maxFetchRefs new logs, so
    that a fetch of a thousand logs returns; the rest are named, and any read takes them in
    (every read compares the cache with every log ref: state shown is never short of them).
    `warm_list`: also write the default `issue list --json`, so that the list after a sync is
    a warm read. Not from the fetch hook: git before 2.51 runs it once per fetched ref, and
    the list of a large repository would be written that many times over (0.17 s each at 1M
    events), for a list that brat's users may never ask for; the next read writes it once.
    """
    store = g.store
    # (A bad setting stops it before anything moves.)
    limit, max_bytes = (max_fetch_refs(store), max_fetch_bytes(store)) if cap else (0, 0)
    last = _read_stamp(store)
    known = len(attic.load(store))
    judged = verify.judged_rejected(store)
    was_disputed = verify.disputed(store)
    relay_known(store)
    tips = log_tips(store)
    attic.keep(store, [*hint, *last.items(), *(before or {}).items()], tips)
    taken, left = tips, []
    if limit or max_bytes:
        meta = g.cache._read_meta()
        taken, left = capped_tips(store, meta.frontier if meta else {}, tips, limit, max_bytes)
    if left:
        g.cache.extend_to(taken)
    else:
        # (Only what the default views need: a fresh clone's snapshot's cold part may follow.)
        g.state(refresh=True, hot_before=g.cold_before)
    if warm_list and not left:
        g.cache.issue_list_json("open", g.cold_before)
    stamp = store.refs.lines(STAMP_PATTERNS)
    atomic_write(_stamp_path(store), (stamp + "\n").encode() if stamp else b"")
    base = before if before is not None else last
    remote = {r: s for r, s in log_tips(store).items() if r.startswith("refs/remotes/")}
    names = sorted({r for r in base if r.startswith("refs/remotes/")} | set(remote))
    moved = [RefMove(r, base.get(r), remote.get(r)) for r in names if base.get(r) != remote.get(r)]
    verdicts = verify.check(store, tips=taken if left else None)
    return ImportResult(moved, attic.load(store)[known:],
                        [r for r in verdicts.rejected if r.sha not in judged],
                        verify.erasures(store) if moved else [], left, limit, max_bytes,
                        {a: verdicts.claims[a] for a, holder in verdicts.disputes.items()
                         if not holder and a not in was_disputed})


def keep_seen(store: Store) -> list[attic.Rewrite]:
    """Keep what the last import and the cache had seen, without refreshing anything."""
    from git_brat.grite.cache.projection import Cache
    meta = Cache(store)._read_meta()
    seen = [*_read_stamp(store).items(), *(meta.frontier.items() if meta else ())]
    return attic.keep(store, seen, log_tips(store))
