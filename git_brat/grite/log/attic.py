"""Never forget a seen log: tips that a rewound, rewritten or deleted log ref left behind are kept.

A remote may rewind or rewrite a replica ref (by accident or on purpose) and a `+` fetch refspec
will follow it. Whatever this clone had already seen stays reachable under
`refs/grite/attic/<ref without refs/>/<old sha>` (an event-log ref, so replay keeps reading it),
and the rewrite is recorded in `.git/grite/rewrites.json` for `git grite doctor`.
"""

from __future__ import annotations

import os
from typing import Iterable

import msgspec

from git_brat import process
from git_brat.errors import CorruptObject, GriteError
from git_brat.files import FileLock, atomic_write
from git_brat.git.refs import ZERO
from git_brat.git.store import Store
from git_brat.grite.log.refs import grite_dir, is_log_ref

ATTIC = "refs/grite/attic/"


class Rewrite(msgspec.Struct):
    ref: str                 # the log ref that no longer reaches what we had seen
    old: str                 # the tip we had seen
    new: str | None          # where the ref points now (None: deleted)
    attic: str | None        # where the old tip is kept (None: its objects were already gone)
    detected_at: int         # ms since the epoch
    acknowledged: bool = False
    kind: str = "rewrite"    # rewrite (moved to a history without it) | deleted (the ref is gone)
    #                          | damaged (unreadable records; repaired by doctor --fix)

    def describe(self) -> str:
        if self.kind == "damaged":
            return (f"held records git could not read; rebuilt from every readable record "
                    f"(was {self.old[:12]}" + (f", now {self.new[:12]})" if self.new else ")"))
        kept = f"its events are kept as {self.attic}" if self.attic else "its objects were already gone"
        if self.kind == "deleted":   # a removed remote, a pruned or hand-deleted ref: not an attack
            return f"deleted (remote removed, pruned or deleted by hand); {kept}"
        return (f"rewound or rewritten (possible tampering): {self.old[:12]} is no longer in its "
                f"history; {kept}" + ("; acknowledged" if self.acknowledged else ""))


def attic_ref(ref: str, old: str) -> str:
    return ATTIC + ref.removeprefix("refs/") + "/" + old


def keep(store: Store, seen: Iterable[tuple[str, str]], tips: dict[str, str]) -> list[Rewrite]:
    """Keep every seen (ref, sha) that no current tip reaches; return the rewrites found.

    `tips` is the current frontier (log_tips(store)); attic refs created here are added to it.
    """
    pending: dict[str, str] = {}   # old sha -> a ref that had it
    for ref, old in seen:
        if not old or old == ZERO.decode() or ref.startswith(ATTIC) or tips.get(ref) == old:
            continue
        if not is_log_ref(ref):   # lease refs move back and forth by design; only logs are kept
            continue
        if old in pending or _appended_to(store, old, tips.get(ref)) or \
                _grown_from(store, old, tips.get(ref)):
            continue
        pending[old] = ref
    if not pending:
        return []
    # A tip doctor --fix replaced because git could not read it is not kept: it would break gc.
    for r in load(store):
        if r.kind == "damaged":
            pending.pop(r.old, None)
    if not pending:
        return []
    # Judged without this clone's relay copies (local refs/grite/replicas/*): they keep the
    # events anyway, but a remote that rewound a log must still be reported.
    lost = store.objects.unreachable(pending, [sha for r, sha in tips.items()
                                       if not r.startswith("refs/grite/replicas/")])
    found = []
    now = process.now_ms()
    for old in sorted(lost):
        ref = pending[old]
        kept = None
        if store.objects.has_object(old.encode()):
            kept = attic_ref(ref, old)
            store.refs.cas(kept.encode(), None, old.encode(), b"grite: keep a rewritten log's old tip")
            tips[kept] = old
        new = tips.get(ref)
        found.append(Rewrite(ref, old, new, kept, now, acknowledged=new is None,
                             kind="deleted" if new is None else "rewrite"))
    _record(store, found)
    return found


def _grown_from(store: Store, old: str, new: str | None) -> bool:
    """The ref itself still reaches old: several appends at once (a push of a few batches). On
    a hub the pushed logs are its refs/grite/replicas/*, which the check below leaves out."""
    if not new:
        return False
    try:
        return store.objects.is_ancestor(old, new)
    except (CorruptObject, GriteError):
        return False


def _appended_to(store: Store, old: str, new: str | None) -> bool:
    """Cheap common case: `new` is one commit on top of `old` (an ordinary append)."""
    if not new:
        return False
    try:
        return old.encode() in store.objects.read_commit(new.encode()).parents
    except CorruptObject:
        return False


# -- the record doctor reports from --------------------------------------------------

def _path(store: Store) -> str:
    return os.path.join(grite_dir(store), "rewrites.json")


def load(store: Store) -> list[Rewrite]:
    try:
        with open(_path(store), "rb") as f:
            return msgspec.json.decode(f.read(), type=list[Rewrite])
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return []


def _record(store: Store, new: list[Rewrite], acknowledge: bool = False) -> list[Rewrite]:
    os.makedirs(grite_dir(store), exist_ok=True)
    with FileLock(_path(store) + ".lock", timeout=10):
        records = load(store)
        known = {(r.ref, r.old) for r in records}
        records += [r for r in new if (r.ref, r.old) not in known]
        if acknowledge:
            for r in records:
                r.acknowledged = True
        atomic_write(_path(store), msgspec.json.encode(records))
        return records


def note(store: Store, records: list[Rewrite]) -> None:
    """Record rewrites grite made itself (a repair), acknowledged."""
    _record(store, records)


def rewrites(store: Store, acknowledge: bool = False) -> list[Rewrite]:
    """Every rewrite seen so far, including attic refs whose record was lost."""
    records = load(store)
    recorded = {r.attic for r in records if r.attic}
    extra = [Rewrite(_origin(name), sha, None, name, 0)   # reason unknown: assume the worst
             for name, sha in ((n.decode(), s.decode())
                               for n, s in store.refs.under(ATTIC.encode()).items())
             if name not in recorded]
    if extra or (acknowledge and any(not r.acknowledged for r in records)):
        records = _record(store, extra, acknowledge)
    return records


def _origin(attic_name: str) -> str:
    """The log ref an attic ref was kept for (its name minus the attic prefix and the sha)."""
    return "refs/" + attic_name[len(ATTIC):].rsplit("/", 1)[0]
