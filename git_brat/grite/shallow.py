"""Clones cut at a snapshot: a first fetch that brings a snapshot and only the events after it.

A snapshot commit's parents are the log tips it covers. Once it is here (fetched with depth 1),
`git fetch --shallow-exclude=<its ref>` brings exactly the log commits after those tips, and the
first commit after each becomes a shallow boundary: a million events' history stays on the
remote. What came before the cut is then only in the snapshot. So `cut()` names the boundary,
a snapshot is used only if it explains all of it (`snapshot.contained`), and whatever reads
whole logs (a full replay, doctor, repair) refuses rather than take a part for the whole.
`deepen()` fetches the rest (`git grite deepen`).
"""

from __future__ import annotations

from typing import Iterable

from git_brat.grite.errors import GriteError
from git_brat.grite.gitstore import Store, is_log_ref

SETTING = "grite.shallowClone"
SNAPSHOTS = "refs/grite/snapshots/"
DEEPEN_HINT = "`git grite deepen` fetches the rest of the history"


class HistoryCut(GriteError):
    """Whole logs were needed, and this clone holds them only from a snapshot on."""


def enabled(store: Store) -> bool:
    """grite.shallowClone (default true): a first fetch starts from a snapshot when it can."""
    return store.config_bool(SETTING, True)


def cut(store: Store, tips: Iterable[str]) -> dict[str, list[str]]:
    """Log commits our tips reach that git holds without their parents -> those parents.

    Empty unless the repository is shallow; a shallow clone of the user's branches (or a
    snapshot commit fetched with depth 1) is not a cut in any log.
    """
    entries = store.shallow_commits()
    if not entries:
        return {}
    missing = {}
    for sha in entries:
        if store.events_blob(sha) is None:
            continue   # not a log commit (a branch's boundary, a snapshot), or not here
        # git walks no further, whatever objects happen to be here (a clone from a local path
        # copies them all): each parent counts as absent.
        parents = store.read_commit(sha.encode()).parents
        if parents:
            missing[sha] = [p.decode() for p in parents]
    if not missing:
        return {}
    unreached = store.unreachable(missing, tips)
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
    present = [c for c in covers if c not in cut_at and store.has_object(c.encode())]
    return bool(present) and not store.unreachable(rest, present)


def refuse_if_cut(store: Store, tips: Iterable[str], doing: str, why: str = "",
                  boundary: dict[str, list[str]] | None = None) -> None:
    """Raise HistoryCut when `doing` needs every log whole and this clone was cut (boundary:
    `cut()`'s answer, when the caller has it already)."""
    if boundary is None:
        boundary = cut(store, tips)
    if boundary:
        raise HistoryCut(f"cannot {doing}: this clone holds {len(boundary)} log(s) only from "
                         f"the snapshot it was cloned from on{why}; {DEEPEN_HINT}")


def first_fetch(store: Store, remote: str, refspec: str, env: dict, timeout: float):
    """The first fetch of a remote's grite refs, cut at its best snapshot: the fetch's result,
    or None when a plain fetch is the way (turned off, no usable snapshot there, git refused).

    Three fetches: every snapshot with depth 1 (to read what each covers), the logs whose tip
    the chosen one covers with depth 1 (a tip git would otherwise send with its whole history),
    then everything else but snapshots, excluding what the chosen snapshot reaches.
    """
    from git_brat.grite import snapshot
    from git_brat.grite.cache import CACHE_VERSION
    from git_brat.grite.errors import RemoteUnreachable
    if not enabled(store):
        return None
    try:
        advertised = {n.decode(): s.decode() for n, s in
                      store.ls_remote(remote, ["refs/grite/*"], timeout).items()}
    except RemoteUnreachable:
        return None   # the plain fetch then says what is wrong
    names = sorted(n for n in advertised if n.startswith(SNAPSHOTS))
    if not names:
        return None

    def track(name: str) -> str:
        return f"refs/remotes/{remote}/{name[len('refs/'):]}"

    got = store.fetch(remote, [f"+{n}:{track(n)}" for n in names], env, timeout,
                      options=["--depth=1"], keep_pack=True)
    if got.returncode != 0:
        return None
    refused = snapshot.rejected(store)
    usable = [(snap, n) for n in names
              if (snap := snapshot.read(store, track(n).encode())) is not None
              and snap.meta.version == CACHE_VERSION and snap.commit not in refused
              and snap.commit == advertised[n]]
    if not usable:
        return None
    chosen, name = max(usable, key=lambda u: (u[0].meta.events, u[1]))
    snapshot.prepare(store, chosen)   # while the logs arrive (best() takes it if it is still best)
    covers = set(chosen.meta.covers)
    quiet = [n for n, sha in advertised.items() if sha in covers and is_log_ref(n)]
    if quiet and store.fetch(remote, [f"+{n}:{track(n)}" for n in quiet], env, timeout,
                             options=["--depth=1"]).returncode != 0:
        return None
    proc = store.fetch(remote, [refspec, f"^{SNAPSHOTS}*"], env, timeout,
                       options=[f"--shallow-exclude={name}"])
    if proc.returncode != 0:
        return None
    if not snapshot.contained(store, chosen, store.log_tips().values()):
        # The remote's snapshot moved between our fetches, so the cut is not where the one we
        # hold ends: take the whole history rather than leave a gap.
        return deepen_from(store, remote, refspec, env, timeout)
    return proc


def deepen_from(store: Store, remote: str, refspec: str, env: dict, timeout: float):
    """Fetch the whole history of a remote's grite refs (git deepens every shallow ref)."""
    return store.fetch(remote, [refspec], env, timeout, options=["--unshallow"], keep_pack=True)
