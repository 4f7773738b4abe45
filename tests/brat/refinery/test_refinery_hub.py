"""Hooks start the refinery: a fetch in a clone, and a hub merging pushes over `git daemon`."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from bratkit import convoy, move, status_of, task
from helpers import brat, brat_json, git, grite, run, status
from refinerykit import commit_on, configure, request
from sync_helpers import Daemon, clone, seeded_hub


def _pid(git_dir: Path) -> int | None:
    try:
        return int((git_dir / "brat" / "refinery.pid").read_text().strip())
    except (OSError, ValueError):
        return None


def _alive(pid: int) -> bool:
    from refinerykit import alive
    return alive(pid)


def _wait_for(pred, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def refineries():
    """Git dirs whose detached refineries the test must see stopped (killed by pid if not)."""
    dirs: list[Path] = []
    yield dirs
    for d in dirs:
        pid = _pid(d)
        if pid and _alive(pid):
            os.kill(pid, signal.SIGTERM)
            _wait_for(lambda: not _alive(pid), 30, f"refinery {pid} to stop")


def _idle(git_dir: Path) -> bool:
    pid = _pid(git_dir)
    return pid is None or not _alive(pid)


def _has(repo, rev: str, path: str) -> bool:
    return run(["git", "cat-file", "-e", f"{rev}:{path}"], repo, check=False).returncode == 0


def test_a_fetch_starts_the_refinery_and_git_pull_never_fails_because_of_it(tmp_path, refineries):
    hub = seeded_hub(tmp_path)
    user = clone(str(hub), tmp_path / "user", init=False)
    brat(user, "init")
    configure(user, trigger="hook")
    agent = clone(str(hub), tmp_path / "agent", init=False)
    brat(agent, "init")
    refineries.append(user / ".git")
    cid = convoy(user, "Hooked")
    tid = task(user, cid, "Agent work")
    grite(user, "sync")
    grite(agent, "sync")
    commit_on(agent, f"brat/{tid}", {"agent.txt": "done\n"}, "Agent work")
    move(agent, tid, "running", "needs-review")
    brat(agent, "task", "approve", tid)
    git(agent, "push", "-q", "origin", f"brat/{tid}")      # the agent's push ...
    proc = run(["git", "fetch", "-q", "origin"], user)      # ... and the user's fetch
    assert proc.returncode == 0 and proc.err == ""
    _wait_for(lambda: _has(hub, "main", "agent.txt"), 60, "the refinery to land and push")
    _wait_for(lambda: _idle(user / ".git"), 30, "the refinery to exit")
    assert status_of(user, tid) == "merged"
    assert _has(user, "main", "agent.txt")                  # user's main fast-forwarded
    git(agent, "fetch", "-q", "origin")                     # the outcome was published
    assert status_of(agent, tid) == "merged"
    assert (user / "agent.txt").read_text() == "done\n"
    log = (user / ".git" / "brat" / "refinery.log").read_text()
    assert "Traceback" not in log
    # A pull that brings new work on main and a new request: the refinery it starts waits for
    # the pull to finish before it touches the checkout, so the pull never fails because of it.
    tid2 = task(user, cid, "Second")
    grite(user, "sync")
    grite(agent, "sync")
    commit_on(agent, f"brat/{tid2}", {"second.txt": "2\n"}, "Second")
    move(agent, tid2, "running", "needs-review")
    brat(agent, "task", "approve", tid2)
    git(agent, "pull", "-q", "--no-rebase", "origin", "main")
    commit_on(agent, "main", {"main2.txt": "m\n"}, "More on main")
    git(agent, "push", "-q", "origin", f"brat/{tid2}", "main")
    t0 = time.monotonic()
    pull = run(["git", "pull", "-q", "--no-rebase"], user, check=False)
    assert pull.returncode == 0 and pull.err == "", pull.err
    assert time.monotonic() - t0 < 20
    assert (user / "main2.txt").exists()
    _wait_for(lambda: status_of(user, tid2) == "merged", 60, "the second request to land")
    _wait_for(lambda: _idle(user / ".git"), 30, "the refinery to exit")
    assert (user / "second.txt").read_text() == "2\n" and status(user) == "?? .brat/config.toml"
    # A refinery that fails (a broken check) never fails the user's git pull either.
    configure(user, check="exit 1")
    tid3 = task(user, cid, "Third")
    grite(user, "sync")
    grite(agent, "sync")
    commit_on(agent, f"brat/{tid3}", {"third.txt": "3\n"}, "Third")
    move(agent, tid3, "running", "needs-review")
    brat(agent, "task", "approve", tid3)
    git(agent, "push", "-q", "origin", f"brat/{tid3}")
    pull = run(["git", "pull", "-q", "--no-rebase"], user, check=False)
    assert pull.returncode == 0 and pull.err == ""
    _wait_for(lambda: status_of(user, tid3) == "queued", 60, "the failed check to requeue")
    _wait_for(lambda: _idle(user / ".git"), 30, "the refinery to exit")


def test_hub_mode_merges_branches_pushed_by_two_clones_over_git_daemon(tmp_path, refineries):
    srv = tmp_path / "srv"
    srv.mkdir()
    hub = seeded_hub(srv)
    init = brat_json(hub, "init", "--hub")
    assert [h["hook"] for h in init["hooks"]] == ["post-receive"]
    refineries.append(hub)
    daemon = Daemon(srv).start()
    try:
        url = daemon.url("hub.git")
        a = clone(url, tmp_path / "a", init=False)
        b = clone(url, tmp_path / "b", init=False)
        brat(a, "init")
        brat(b, "init")
        cid = convoy(a, "Across machines")
        ta, tb = task(a, cid, "From A"), task(a, cid, "From B")
        grite(a, "sync")
        grite(b, "sync")
        for repo, tid, name in ((a, ta, "a.txt"), (b, tb, "b.txt")):
            commit_on(repo, f"brat/{tid}", {name: f"{name}\n"}, f"Work {name}")
            move(repo, tid, "running", "needs-review")
            brat(repo, "task", "approve", tid)
            push = run(["git", "push", "-q", "origin", f"brat/{tid}"], repo)
            assert "error" not in push.err.lower()
        _wait_for(lambda: _has(hub, "main", "a.txt") and _has(hub, "main", "b.txt"), 90,
                  "the hub to merge both branches")
        # Its worktree was temporary (a run a late push started may still be finishing).
        _wait_for(lambda: _idle(hub) and not (hub / "brat" / "refinery").exists(), 30,
                  "the hub's refinery to exit and remove its worktree")
        for repo in (a, b):
            git(repo, "fetch", "-q", "origin")
            assert status_of(repo, ta) == "merged" and status_of(repo, tb) == "merged"
            assert brat_json(repo, "convoy", "show", cid)["status"] == "landed"
            assert _has(repo, "origin/main", "a.txt") and _has(repo, "origin/main", "b.txt")
    finally:
        daemon.stop()


def test_a_rebase_or_a_merge_in_the_users_checkout_starts_the_refinery(brepo, refineries):
    refineries.append(brepo / ".git")
    git(brepo, "checkout", "-q", "-b", "work")
    cid = convoy(brepo)
    first = request(brepo, cid, "First", {"one.txt": "1\n"})    # (no trigger while it is made)
    git(brepo, "commit", "-q", "--allow-empty", "-m", "wip")
    configure(brepo, trigger="hook")
    git(brepo, "commit", "-q", "--amend", "--allow-empty", "-m", "wip, reworded")  # post-rewrite
    _wait_for(lambda: status_of(brepo, first) == "merged", 60, "post-rewrite to start it")
    _wait_for(lambda: _idle(brepo / ".git"), 30, "the refinery to exit")
    configure(brepo, trigger="manual")
    second = request(brepo, cid, "Second", {"two.txt": "2\n"})
    commit_on(brepo, "side", {"side.txt": "s\n"}, "Side work", start="work")
    _wait_for(lambda: _idle(brepo / ".git"), 30, "any refinery to exit")
    assert status_of(brepo, second) == "needs-review"
    configure(brepo, trigger="hook")
    git(brepo, "merge", "-q", "--no-edit", "--no-ff", "side")                       # post-merge
    _wait_for(lambda: status_of(brepo, second) == "merged", 60, "post-merge to start it")
    _wait_for(lambda: _idle(brepo / ".git"), 30, "the refinery to exit")
    assert _has(brepo, "main", "one.txt") and _has(brepo, "main", "two.txt")


def test_an_approval_synced_to_a_hub_over_a_path_remote_starts_its_refinery(tmp_path, refineries):
    """`git grite sync` pushes the log with grite's own hooks off on this side; over a path
    remote git ran the hub's hooks with that same environment, so the hub's post-receive took
    the switch as its own and an approval reached the hub without starting its refinery: the
    approved task never landed (over git daemon or ssh it did)."""
    srv = tmp_path / "srv"
    srv.mkdir()
    hub = seeded_hub(srv)
    brat_json(hub, "init", "--hub")
    refineries.append(hub)
    a = clone(str(hub), tmp_path / "a", init=False)
    brat(a, "init")
    tid = task(a, convoy(a, "Over a path"), "Waits for review")
    commit_on(a, f"brat/{tid}", {"p.txt": "p\n"}, "Work p")
    move(a, tid, "running", "needs-review")
    grite(a, "sync")
    push = run(["git", "push", "-q", "origin", f"brat/{tid}"], a)
    assert "error" not in push.err.lower()
    # The hub's refinery ran for the branch and landed nothing: nobody approved it.
    _wait_for(lambda: (hub / "brat" / "refinery.log").exists() and _idle(hub), 60,
              "the hub's refinery to run for the pushed branch and exit")
    assert not _has(hub, "main", "p.txt")
    brat(a, "task", "approve", tid)
    grite(a, "sync")
    _wait_for(lambda: _has(hub, "main", "p.txt"), 90, "the hub to land the approved task")
    _wait_for(lambda: _idle(hub), 30, "the hub's refinery to exit")
