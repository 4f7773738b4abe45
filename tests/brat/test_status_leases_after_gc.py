"""`git brat status` after `git gc` packed a year of released leases: it shows exactly the live
ones, and does not read the released ones again."""

from __future__ import annotations

import os
from pathlib import Path

from helpers import brat_json, git, grite_json


def _leases(repo) -> tuple[list[tuple[str, str]], list[str]]:
    got = brat_json(repo, "status")
    return (sorted((l["resource"], l["state"]) for l in got["leases"]),
            got["recovery"]["unreadable_leases"])


def _acquire(repo, resource, holder="alice"):
    return grite_json(repo, "lock", "acquire", resource, "--holder", holder, "--ttl", "600")


def _release(repo, resource, holder="alice"):
    return grite_json(repo, "lock", "release", resource, "--holder", holder)


def _drop_object(repo: Path, sha: str) -> None:
    os.unlink(repo / ".git" / "objects" / sha[:2] / sha[2:])


def test_status_after_gc_does_not_read_released_leases_again(brepo):
    names = [f"task:{i:032x}" for i in range(5)]
    for r in names:
        _acquire(brepo, r)
        _release(brepo, r)
    git(brepo, "pack-refs", "--all")
    assert _leases(brepo) == ([], [])
    # The records are gone from the object store: a status that read them would say so.
    for sha in git(brepo, "for-each-ref", "--format=%(objectname)", "refs/grite/locks/").split():
        _drop_object(brepo, sha)
    assert _leases(brepo) == ([], [])
    # Without what it remembered, status reads them again (and reports each unreadable one).
    os.unlink(brepo / ".git" / "grite" / "cache" / "leases.db")
    leases, unreadable = _leases(brepo)
    assert leases == [] and len(unreadable) == 5


def test_status_shows_the_leases_live_now_across_gc_and_later_changes(brepo):
    a, b = "task:" + "a" * 32, "task:" + "b" * 32
    _acquire(brepo, a)
    _acquire(brepo, b)
    _release(brepo, a)
    git(brepo, "pack-refs", "--all")
    assert _leases(brepo)[0] == [(b, "held")]
    _release(brepo, b)       # loose records now shadow the packed ones
    _acquire(brepo, a)
    assert _leases(brepo)[0] == [(a, "held")]
    git(brepo, "pack-refs", "--all")   # a new packed-refs file: summarised again
    assert _leases(brepo)[0] == [(a, "held")]
    _acquire(brepo, "repo:global")     # another namespace, loose
    assert _leases(brepo)[0] == [("repo:global", "held"), (a, "held")]


def test_a_fetched_copy_older_than_the_release_here_does_not_show_as_held(brepo):
    res = "task:" + "c" * 32
    ref = "refs/grite/locks/task/" + "c" * 32
    copy = "refs/remotes/origin/grite/locks/task/" + "c" * 32
    _acquire(brepo, res)
    held = git(brepo, "rev-parse", ref)
    _release(brepo, res)
    released = git(brepo, "rev-parse", ref)
    git(brepo, "update-ref", copy, held)   # the remote still has the held record
    assert _leases(brepo)[0] == []
    git(brepo, "pack-refs", "--all")
    assert _leases(brepo)[0] == []
    # The other way round: the remote's copy is newer (taken again there) than the release here.
    _acquire(brepo, res, holder="bob")
    again = git(brepo, "rev-parse", ref)
    git(brepo, "update-ref", ref, released)
    git(brepo, "update-ref", copy, again)
    assert _leases(brepo)[0] == [(res, "held")]
    git(brepo, "pack-refs", "--all")
    assert _leases(brepo)[0] == [(res, "held")]


def test_a_fresh_memo_reads_many_records_at_once_and_still_names_the_unreadable(brepo):
    """A fresh clone of a busy repository: many lease records never seen here (read through one
    git process), three of them damaged."""
    from git_brat.grite import locks
    from git_brat.grite.repo import Grite
    g = Grite.open(str(brepo))
    st = locks.settings(g.store, local=True)
    names = [f"task:{i:032x}" for i in range(40)]
    for r in names:
        locks.acquire(g, r, st, record=False)
        locks.release(g, r, st)
    git(brepo, "pack-refs", "--all")
    shas = git(brepo, "for-each-ref", "--format=%(objectname)", "refs/grite/locks/").split()
    for sha in shas[:3]:
        _drop_object(brepo, sha)
    leases, unreadable = _leases(brepo)
    assert leases == [] and len(unreadable) == 3
    assert _leases(brepo) == ([], unreadable)   # the summary keeps them in view
