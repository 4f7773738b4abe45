"""Clones cut at a snapshot: where a first fetch that brought only the events after it cut history.

A snapshot commit's parents are the log tips it covers. Once it is here (fetched with depth 1),
`git fetch --shallow-exclude=<its ref>` brings exactly the log commits after those tips, and the
first commit after each becomes a shallow boundary: a million events' history stays on the
remote. What came before the cut is then only in the snapshot. So `cut()` names the boundary,
a snapshot is used only if it explains all of it (`snapshot.contained`), and whatever reads
whole logs (a full replay, doctor, repair) refuses rather than take a part for the whole.
The fetches that make such a clone, and `git grite deepen`, are in `sync.first_fetch`.
"""

from __future__ import annotations

from typing import Iterable

from git_brat.errors import DEEPEN_HINT, HistoryCut
from git_brat.git.store import Store
from git_brat.grite.log.refs import events_blob

SETTING = "grite.shallowClone"
SNAPSHOTS = "refs/grite/snapshots/"
def enabled(store: Store) -> bool:
    """grite.shallowClone (default true): a first fetch starts from a snapshot when it can."""
    return store.config_bool(SETTING, True)


def cut(store: Store, tips: Iterable[str]) -> dict[str, list[str]]:
    """Log commits our tips reach that git holds without their parents -> those parents.

    Empty unless the repository is shallow; a shallow clone of the user's branches (or a
    snapshot commit fetched with depth 1) is not a cut in any log.
    """
    entries = store.remote.shallow_commits()
    if not entries:
        return {}
    missing = {}
    for sha in entries:
        if events_blob(store, sha) is None:
            continue   # not a log commit (a branch's boundary, a snapshot), or not here
        # git walks no further, whatever objects happen to be here (a clone from a local path
        # copies them all): each parent counts as absent.
        parents = store.objects.read_commit(sha.encode()).parents
        if parents:
            missing[sha] = [p.decode() for p in parents]
    if not missing:
        return {}
    unreached = store.objects.unreachable(missing, tips)
    return {b: ps for b, ps in missing.items() if b not in unreached}


def explained(store: Store, boundary: dict[str, list[str]], covers: list[str]) -> bool:
    """Whether a snapshot covering `covers` holds every event before the cut.

    A boundary commit is explained when each parent it lacks is a tip the snapshot covers, or
    when the snapshot's covered tips (here) reach it, so its whole history is in the snapshot.
    """
    covered = set(covers)
    rest = [b for b, absent in boundary.items() if not covered.issuperset(absent)]
    if not rest:
        return True
    cut_at = {p for absent in boundary.values() for p in absent}
    present = [c for c in covers if c not in cut_at and store.objects.has_object(c.encode())]
    return bool(present) and not store.objects.unreachable(rest, present)


def refuse_if_cut(store: Store, tips: Iterable[str], doing: str, why: str = "",
                  boundary: dict[str, list[str]] | None = None) -> None:
    """Raise HistoryCut when `doing` needs every log whole and this clone was cut (boundary:
    `cut()`'s answer, when the caller has it already)."""
    if boundary is None:
        boundary = cut(store, tips)
    if boundary:
        raise HistoryCut(f"cannot {doing}: this clone holds {len(boundary)} log(s) only from "
                         f"the snapshot it was cloned from on{why}; {DEEPEN_HINT}")
