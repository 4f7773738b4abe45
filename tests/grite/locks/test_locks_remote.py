"""Distributed leases: clones racing through one bare remote (file path and git daemon)."""

from __future__ import annotations

import shutil
import time

import pytest

from helpers import git, grite, grite_json, status
from lock_workers import run_race
from sync_helpers import Daemon


def _clones(tmp_path, url: str, n: int) -> list:
    out = []
    for i in range(n):
        c = tmp_path / f"clone{i}"
        git(tmp_path, "clone", "-q", url, str(c))
        git(c, "commit", "-q", "--allow-empty", "-m", f"clone {i}")
        grite(c, "init")
        out.append(c)
    return out


@pytest.fixture
def hub(tmp_path):
    path = tmp_path / "hub.git"
    git(tmp_path, "init", "-q", "--bare", str(path))
    return path


@pytest.fixture
def daemon(hub):
    """`git daemon` serving the hub with receive-pack on 127.0.0.1; stopped at teardown."""
    d = Daemon(hub.parent).start()
    try:
        yield d.url(hub.name)
    finally:
        d.stop()


def _check_one_winner_per_round(rounds: dict, n_rounds: int, n_clones: int) -> None:
    assert sorted(rounds) == list(range(n_rounds))
    tokens = []
    for r in range(n_rounds):
        assert len(rounds[r]) == n_clones
        winners = [(h, t) for h, t in rounds[r] if t]
        assert len(winners) == 1, f"round {r}: winners {winners}"
        tokens.append(winners[0][1])
    assert tokens == list(range(1, n_rounds + 1))


def test_four_clones_racing_through_a_file_remote_get_exactly_one_winner(tmp_path, hub):
    clones = _clones(tmp_path, str(hub), 4)
    rounds = run_race([str(c) for c in clones], "task:t-dist", 30, remote="origin", timeout=600)
    _check_one_winner_per_round(rounds, 30, 4)
    # The hub's ref is the whole story: 30 grants and 30 releases, one linear chain.
    log = git(hub, "log", "--format=%s", "refs/grite/locks/task/t-dist").splitlines()
    assert len(log) == 60 and log[0].startswith("grite: lock.release task:t-dist token 30")


def test_four_clones_racing_through_git_daemon_get_exactly_one_winner(tmp_path, hub, daemon):
    clones = _clones(tmp_path, daemon, 4)
    rounds = run_race([str(c) for c in clones], "repo:global", 20, remote="origin", timeout=600)
    _check_one_winner_per_round(rounds, 20, 4)
    assert len(git(hub, "rev-list", "refs/grite/locks/repo/global").split()) == 40


def test_distributed_acquire_refuse_release_and_mirror(tmp_path, hub):
    a, b = _clones(tmp_path, str(hub), 2)
    got = grite_json(a, "lock", "acquire", "task:t-1", "--remote", "origin", "--holder", "alice")
    assert (got["mode"], got["remote"], got["token"], got["note"]) == ("remote", "origin", 1, "")
    hub_sha = git(hub, "rev-parse", "refs/grite/locks/task/t-1")
    assert git(a, "rev-parse", "refs/grite/locks/task/t-1") == hub_sha   # mirrored locally

    refused = grite(b, "lock", "acquire", "task:t-1", "--remote", "origin", "--holder", "bob",
                    check=False)
    assert refused.returncode == 5 and "is held by alice" in refused.err
    # b never saw the lease before; refusing taught it the remote's record.
    seen = grite_json(b, "lock", "status", "task:t-1", "--local")[0]
    assert (seen["holder"], seen["state"], seen["mode"]) == ("alice", "held", "remote")
    for cmd in ("renew", "release"):
        proc = grite(b, "lock", cmd, "task:t-1", "--remote", "origin", "--holder", "bob", check=False)
        assert proc.returncode == 5 and "only the holder" in proc.err
    assert git(hub, "rev-parse", "refs/grite/locks/task/t-1") == hub_sha   # nothing moved

    renewed = grite_json(a, "lock", "renew", "task:t-1", "--remote", "origin", "--holder", "alice")
    assert renewed["token"] == 1 and renewed["last_action"] == "renew"
    grite(a, "lock", "release", "task:t-1", "--remote", "origin", "--holder", "alice")
    took = grite_json(b, "lock", "acquire", "task:t-1", "--remote", "origin", "--holder", "bob")
    assert took["token"] == 2 and took["mode"] == "remote"
    # a's mirror is stale (it shows its own release); status asks the remote.
    shown = grite_json(a, "lock", "status", "--remote", "origin")
    assert [(s["resource"], s["holder"], s["token"]) for s in shown] == [("task:t-1", "bob", 2)]
    assert status(a) == "" and status(b) == ""


def test_configured_lock_remote_decides_and_local_opts_out(tmp_path, hub):
    a, b = _clones(tmp_path, str(hub), 2)
    for c in (a, b):
        git(c, "config", "grite.lockRemote", "origin")
    assert grite_json(a, "lock", "acquire", "path:src/parser", "--holder", "alice")["mode"] == "remote"
    assert grite(b, "lock", "acquire", "path:src/parser", "--holder", "bob", check=False).returncode == 5
    local = grite_json(b, "lock", "acquire", "path:docs", "--holder", "bob", "--local")
    assert local["mode"] == "local" and local["token"] == 1
    assert git(hub, "for-each-ref", "refs/grite/locks/path/") == git(
        hub, "for-each-ref", "refs/grite/locks/path/src%2Fparser")          # never pushed
    bad = grite(a, "lock", "status", "--remote", "nosuchremote", check=False)
    assert bad.returncode == 3 and "no remote named 'nosuchremote'" in bad.err


def test_unreachable_remote_falls_back_to_a_local_lease_and_says_so(tmp_path, hub):
    a, b = _clones(tmp_path, str(hub), 2)
    git(a, "config", "grite.lockRemote", "origin")
    grite(a, "lock", "acquire", "task:t-9", "--holder", "alice")                  # token 1, remote
    grite(a, "lock", "release", "task:t-9", "--holder", "alice")
    shutil.move(str(hub), str(tmp_path / "away.git"))                           # the remote is gone

    strict = grite(a, "lock", "acquire", "task:t-9", "--holder", "alice", "--no-fallback", check=False)
    assert strict.returncode == 1 and "remote origin unreachable" in strict.err
    assert grite_json(a, "lock", "status", "task:t-9", "--local")[0]["state"] == "released"

    proc = grite(a, "lock", "acquire", "task:t-9", "--holder", "alice")
    assert "mode: local (remote origin unreachable)" in proc.out
    offline = grite_json(a, "lock", "status", "task:t-9")[0]
    assert (offline["mode"], offline["token"], offline["state"]) == ("local", 2, "held")

    shutil.move(str(tmp_path / "away.git"), str(hub))                           # back online
    # The remote still shows the release of token 1; it is the truth now, so bob can take it,
    # and the token keeps increasing past everything either side granted.
    took = grite_json(b, "lock", "acquire", "task:t-9", "--remote", "origin", "--holder", "bob")
    assert took["mode"] == "remote" and took["token"] == 2
    mine = grite(a, "lock", "renew", "task:t-9", "--holder", "alice", check=False)
    assert mine.returncode == 5 and "held by bob" in mine.err


def test_lease_taken_offline_is_published_with_its_history_when_the_remote_returns(tmp_path, hub):
    (a,) = _clones(tmp_path, str(hub), 1)
    shutil.move(str(hub), str(tmp_path / "away.git"))
    got = grite_json(a, "lock", "acquire", "task:t-5", "--remote", "origin", "--holder", "alice")
    assert got["mode"] == "local" and got["note"] == "remote origin unreachable"
    shutil.move(str(tmp_path / "away.git"), str(hub))
    out = grite_json(a, "lock", "release", "task:t-5", "--remote", "origin", "--holder", "alice")
    assert out["mode"] == "remote" and out["token"] == 1
    assert len(git(hub, "rev-list", "refs/grite/locks/task/t-5").split()) == 2


def test_lock_gc_expires_dead_leases_on_the_remote(tmp_path, hub):
    a, b = _clones(tmp_path, str(hub), 2)
    grite(a, "lock", "acquire", "task:t-gc", "--remote", "origin", "--holder", "alice",
          "--ttl", "0.2", "--skew", "0")
    time.sleep(0.4)
    done = grite_json(b, "lock", "gc", "--remote", "origin", "--skew", "0")
    assert [(d["resource"], d["state"], d["last_action"]) for d in done] == [
        ("task:t-gc", "released", "expire")]
    assert git(hub, "log", "-1", "--format=%s", "refs/grite/locks/task/t-gc").startswith(
        "grite: lock.expire task:t-gc token 1 holder alice by ")
    assert grite_json(a, "lock", "acquire", "task:t-gc", "--remote", "origin")["token"] == 2


def test_relative_remote_paths_resolve_like_git_and_worktrees_share_leases(tmp_path, hub):
    (a,) = _clones(tmp_path, str(hub), 1)
    sub = a / "src"
    sub.mkdir()
    # As with `git push ../hub.git`, a relative path is taken from the top of the work tree.
    got = grite_json(sub, "lock", "acquire", "task:rel", "--remote", "../hub.git", "--no-fallback",
                     "--holder", "alice")
    assert got["mode"] == "remote" and git(hub, "rev-parse", "refs/grite/locks/task/rel")
    git(a, "worktree", "add", "-q", str(tmp_path / "wt"))
    refused = grite(tmp_path / "wt", "lock", "acquire", "task:rel", "--remote", "origin",
                    "--holder", "bob", check=False)
    assert refused.returncode == 5 and "held by alice" in refused.err
    grite(tmp_path, "lock", "release", "task:rel", "--remote", "origin", "--holder", "alice",
          env={"GIT_DIR": str(a / ".git")})
    [shown] = grite_json(tmp_path / "wt", "lock", "status", "task:rel", "--remote", "origin")
    assert shown["state"] == "released"


def test_a_remote_path_that_does_not_exist_is_refused_not_used_as_an_outage(tmp_path, hub):
    (a,) = _clones(tmp_path, str(hub), 1)
    for typo in ("../hbu.git", str(tmp_path / "nowhere.git"), "file:///nowhere/at/all.git"):
        proc = grite(a, "lock", "acquire", "task:t-1", "--remote", typo, check=False)
        assert proc.returncode == 3 and "no such repository" in proc.err and proc.out == ""
    assert git(a, "for-each-ref", "refs/grite/locks/") == ""          # nothing taken locally
    proc = grite(a, "lock", "acquire", "task:t-1", "--remote", "nosuchremote", check=False)
    assert proc.returncode == 3 and "no remote named 'nosuchremote'" in proc.err


def test_a_configured_lock_remote_path_that_vanished_falls_back_like_an_outage(tmp_path, hub):
    (a,) = _clones(tmp_path, str(hub), 1)
    git(a, "config", "grite.lockRemote", str(tmp_path / "unmounted" / "hub.git"))
    got = grite_json(a, "lock", "acquire", "task:t-7", "--holder", "alice")
    assert got["mode"] == "local" and "unreachable" in got["note"]


def test_a_fetch_failing_on_this_clone_is_no_outage_and_never_grants_a_local_lease(tmp_path, hub):
    """The remote answers, then this clone's `git fetch` of the lease fails on its own account:
    its connectivity check walks every work tree's HEAD, and `git worktree add` writes a new
    one's HEAD as a null id before it sets it (a witness adds work trees while its other
    workers take leases). That used to count as "remote unreachable": a local lease, granted
    while the remote held it for another clone, and the task ran on both."""
    a, b = _clones(tmp_path, str(hub), 2)
    for c in (a, b):
        git(c, "config", "grite.lockRemote", "origin")
    assert grite_json(b, "lock", "acquire", "task:t-1", "--holder", "bob")["mode"] == "remote"
    adding = a / ".git" / "worktrees" / "adding"   # as `git worktree add` leaves it at first
    adding.mkdir(parents=True)
    (adding / "HEAD").write_text("0" * 40 + "\n")
    (adding / "commondir").write_text("../..\n")
    (adding / "gitdir").write_text(f"{tmp_path / 'adding' / '.git'}\n")
    (adding / "locked").write_text("initializing\n")
    proc = grite(a, "lock", "acquire", "task:t-1", "--holder", "alice", check=False)
    assert proc.returncode != 0, proc.out
    assert "remote origin answered, then the fetch of refs/grite/locks/task/t-1 failed" in proc.err
    assert "bad object worktrees/adding/HEAD" in proc.err
    assert git(a, "for-each-ref", "refs/grite/locks/") == ""        # nothing decided here
    shutil.rmtree(adding)                                            # the work tree is made
    refused = grite(a, "lock", "acquire", "task:t-1", "--holder", "alice", check=False)
    assert refused.returncode == 5 and "held by bob" in refused.err
    mirrored = grite_json(a, "lock", "status", "task:t-1", "--local")[0]
    assert (mirrored["holder"], mirrored["mode"], mirrored["token"]) == ("bob", "remote", 1)
