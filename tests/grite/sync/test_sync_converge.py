"""Clones that edit the same issues concurrently converge through plain fetch / pull / push."""

from __future__ import annotations

import json

from helpers import git, grite, grite_json, make_repo, run
from sync_helpers import clone, issue_json, seeded_hub


def _id(repo, title):
    return next(i["id"] for i in grite_json(repo, "issue", "list", "--state", "all")
                if i["title"] == title)


def _concurrent_edits(a, b, c, shared: str) -> None:
    """The same issue edited in three clones that have not seen each other's edits."""
    grite(a, "issue", "update", shared, "--title", "title from a")
    grite(a, "issue", "label", shared, "--add", "bug", "--add", "ui")
    grite(a, "issue", "comment", shared, "-m", "a says hi")
    grite(b, "issue", "update", shared, "--title", "title from b")
    grite(b, "issue", "label", shared, "--remove", "triage", "--add", "p1")
    grite(b, "issue", "close", shared)
    grite(b, "issue", "comment", shared, "-m", "b closed it")
    grite(c, "issue", "label", shared, "--add", "bug", "--remove", "triage")
    grite(c, "issue", "label", shared, "--remove", "bug")
    grite(c, "issue", "comment", shared, "-m", "c was here")
    grite(c, "issue", "create", "only in c", "-l", "c")


def test_three_clones_through_a_hub_converge_whatever_the_order(tmp_path):
    hub = seeded_hub(tmp_path)
    a = clone(str(hub), tmp_path / "a")
    b = clone(str(hub), tmp_path / "b")
    c = clone(str(hub), tmp_path / "c")
    grite(a, "issue", "create", "shared", "-l", "triage")
    git(a, "push", "-q")                      # plain push publishes a's log
    git(b, "fetch", "-q")
    git(c, "pull", "-q", "--rebase")
    shared = _id(a, "shared")
    assert _id(b, "shared") == _id(c, "shared") == shared

    _concurrent_edits(a, b, c, shared)
    # Interleaved publication and fetches, each clone by a different route.
    git(a, "commit", "-q", "--allow-empty", "-m", "a")
    git(a, "push", "-q")                      # a: plain push of its branch
    git(b, "pull", "-q", "--rebase")          # b: sees a
    grite(b, "sync")                          # b: explicit sync
    git(c, "fetch", "-q")                     # c: sees a and b
    git(c, "pull", "-q", "--rebase")
    git(c, "push", "-q")                      # c: plain push (publishes c)
    git(a, "pull", "-q", "--no-rebase")       # a: merge pull sees b and c
    git(b, "fetch", "-q")                     # b: sees c

    views = [issue_json(r) for r in (a, b, c)]
    assert views[0] == views[1] == views[2]
    issue = json.loads(views[0][1][0])
    assert issue["title"] in ("title from a", "title from b")
    assert issue["state"] == "closed"
    # Observed-remove: c removed only the "bug" it had added; a's "bug" survives.
    assert issue["labels"] == ["bug", "p1", "ui"]
    assert sorted(c["body"] for c in issue["comments"]) == ["a says hi", "b closed it", "c was here"]

    # A fresh clone plus `git grite init` sees all of it.
    d = clone(str(hub), tmp_path / "d")
    assert issue_json(d) == views[0]


def test_peers_fetching_each_other_in_different_orders_converge(tmp_path):
    peers = {n: make_repo(tmp_path / n) for n in "abc"}
    for n, repo in peers.items():
        for m in "abc":
            if m != n:
                git(repo, "remote", "add", m, str(tmp_path / m))
    for repo in peers.values():
        grite(repo, "init")
    a, b, c = peers["a"], peers["b"], peers["c"]
    grite(a, "issue", "create", "shared", "-l", "triage")
    git(b, "fetch", "-q", "a")
    git(c, "fetch", "-q", "a")
    shared = _id(a, "shared")
    _concurrent_edits(a, b, c, shared)

    for repo, order in ((a, "bc"), (b, "ca"), (c, "ba")):
        for peer in order:
            git(repo, "fetch", "-q", peer)
    views = [issue_json(r) for r in (a, b, c)]
    assert views[0] == views[1] == views[2]
    assert len(json.loads(views[0][0])) == 2


def test_offline_work_is_published_when_the_remote_comes_back(tmp_path):
    hub = seeded_hub(tmp_path)
    a = clone(str(hub), tmp_path / "a")
    b = clone(str(hub), tmp_path / "b")
    away = tmp_path / "hub-away"
    hub.rename(away)                                        # the network is gone

    grite(a, "issue", "create", "written offline")         # everything local still works
    grite(a, "issue", "comment", _id(a, "written offline"), "-m", "still offline")
    proc = grite(a, "sync", "--json", check=False)
    assert proc.returncode == 1
    assert json.loads(proc.out)["ok"] is False
    assert proc.err.count("\n") == 1 and proc.err.startswith("git-grite: error: sync incomplete")
    # A clone made now (from a copy) can still init while its remote is unreachable.
    late = tmp_path / "late"
    git(tmp_path, "clone", "-q", str(away), str(late))
    git(late, "remote", "set-url", "origin", str(tmp_path / "nowhere.git"))
    proc = grite(late, "init")
    assert "could not fetch grite state from origin" in proc.err

    away.rename(hub)                                        # back online
    out = grite_json(a, "sync")
    assert out["ok"] is True and out["remotes"][0]["published"]["status"] == "pushed"
    git(b, "fetch", "-q")
    assert [i["title"] for i in grite_json(b, "issue", "list")] == ["written offline"]
    assert run(["git", "grite", "issue", "show", _id(b, "written offline"), "--json"], b).out == \
        run(["git", "grite", "issue", "show", _id(a, "written offline"), "--json"], a).out
