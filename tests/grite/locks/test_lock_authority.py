"""One hub decides every lease, whatever each clone calls its remotes (forks: `origin` differs)."""

from __future__ import annotations

from helpers import git, grite, grite_json
from sync_helpers import Daemon, clone, seeded_hub


def _fork(tmp_path, hub, name):
    """A fork of the hub: its branches, none of its grite refs (as a hosting site makes one)."""
    fork = tmp_path / f"{name}.git"
    git(tmp_path, "clone", "-q", "--bare", str(hub), str(fork))
    return fork


def _clone_of_fork(tmp_path, hub, name, upstream: str | None):
    c = clone(str(_fork(tmp_path, hub, f"fork-{name}")), tmp_path / name)
    if upstream is not None:
        git(c, "remote", "add", "upstream", upstream)
        grite(c, "remote", "add-sync", "upstream")
        grite(c, "sync")
    return c


def test_clones_whose_origins_are_different_forks_still_decide_leases_on_the_one_hub(tmp_path):
    hub = seeded_hub(tmp_path)
    alice = clone(str(hub), tmp_path / "alice")
    got = grite_json(alice, "lock", "acquire", "task:t1", "--holder", "alice", "--ttl", "600")
    assert got["remote"] == "origin" and got["token"] == 1
    authority = git(hub, "rev-parse", "refs/grite/authority")   # the hub's id, made at once
    grite(alice, "sync")

    # Bob's origin is his fork; the hub is `upstream`. Leases by name would go to his fork.
    bob = _clone_of_fork(tmp_path, hub, "bob", upstream=str(hub))
    refused = grite(bob, "lock", "acquire", "task:t1", "--holder", "bob", check=False)
    assert refused.returncode == 5 and "held by alice" in refused.err
    assert git(tmp_path / "fork-bob.git", "for-each-ref", "refs/grite/locks/") == ""
    mine = grite_json(bob, "lock", "acquire", "task:t2", "--holder", "bob")
    assert mine["remote"] == "upstream"
    assert git(hub, "rev-parse", "refs/grite/authority") == authority


def test_a_clone_that_cannot_reach_the_hub_under_any_name_is_refused_with_the_fix(tmp_path):
    hub = seeded_hub(tmp_path)
    alice = clone(str(hub), tmp_path / "alice")
    grite(alice, "lock", "acquire", "task:t1", "--holder", "alice", "--ttl", "600")
    grite(alice, "sync")
    # Carol reads the log from a mirror of the hub but has no remote that is the hub itself.
    mirror = tmp_path / "mirror.git"
    git(tmp_path, "clone", "-q", "--bare", str(hub), str(mirror))
    git(mirror, "fetch", "-q", str(hub), "+refs/grite/wal/*:refs/grite/wal/*",
        "+refs/grite/replicas/*:refs/grite/replicas/*")
    carol = clone(str(mirror), tmp_path / "carol")
    grite(carol, "sync")
    proc = grite(carol, "lock", "acquire", "task:t1", "--holder", "carol", check=False)
    assert proc.returncode == 2, (proc.out, proc.err)
    assert "leases are decided by the hub" in proc.err and "git remote add hub" in proc.err
    assert git(mirror, "for-each-ref", "refs/grite/locks/") == ""
    assert git(carol, "for-each-ref", "refs/grite/locks/") == ""


def test_the_hub_is_found_by_the_id_it_holds_when_a_clone_names_it_by_another_url(tmp_path):
    hub = seeded_hub(tmp_path)
    alice = clone(str(hub), tmp_path / "alice")
    grite(alice, "lock", "acquire", "task:t1", "--holder", "alice", "--ttl", "600")
    grite(alice, "sync")
    d = Daemon(tmp_path).start()
    try:
        dave = _clone_of_fork(tmp_path, hub, "dave", upstream=d.url("hub.git"))
        refused = grite(dave, "lock", "acquire", "task:t1", "--holder", "dave", check=False)
        assert refused.returncode == 5 and "held by alice" in refused.err
        assert git(tmp_path / "fork-dave.git", "for-each-ref", "refs/grite/locks/") == ""
    finally:
        d.stop()
