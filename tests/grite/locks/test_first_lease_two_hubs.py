"""Before any lease names the lock authority, a clone syncing with two hubs does not pick one by name."""

from __future__ import annotations

from helpers import git, grite, grite_json
from sync_helpers import clone, seeded_hub


def _also_syncs(repo, name: str, url) -> None:
    git(repo, "remote", "add", name, str(url))
    grite(repo, "remote", "add-sync", name)


def test_clones_whose_origins_are_different_hubs_are_refused_the_first_lease_until_told(tmp_path):
    hub = seeded_hub(tmp_path)
    fork = tmp_path / "fork.git"
    git(tmp_path, "clone", "-q", "--bare", str(hub), str(fork))   # a second hub, its own refs
    alice = clone(str(hub), tmp_path / "alice")        # origin: the hub; fork: bob's hub
    _also_syncs(alice, "fork", fork)
    bob = clone(str(fork), tmp_path / "bob")           # origin: his fork; upstream: the hub
    _also_syncs(bob, "upstream", hub)
    for who in (alice, bob):
        proc = grite(who, "lock", "acquire", "task:t1", check=False)
        assert proc.returncode == 2, (proc.out, proc.err)
        assert "no lease has named the lock authority yet" in proc.err
        assert "git config grite.lockRemote NAME" in proc.err
    for h in (hub, fork):
        assert git(h, "for-each-ref", "refs/grite/") == ""            # nothing decided, anywhere
    # Told which hub they share, exactly one of them wins.
    git(alice, "config", "grite.lockRemote", "origin")
    git(bob, "config", "grite.lockRemote", "upstream")
    assert grite_json(alice, "lock", "acquire", "task:t1")["remote"] == "origin"
    proc = grite(bob, "lock", "acquire", "task:t1", check=False)
    assert proc.returncode == 5 and "held by" in proc.err
    assert git(fork, "for-each-ref", "refs/grite/locks/") == ""


def test_two_names_for_one_hub_are_one_hub(tmp_path):
    hub = seeded_hub(tmp_path)
    carol = clone(str(hub), tmp_path / "carol")
    _also_syncs(carol, "same", f"file://{hub}/")
    assert grite_json(carol, "lock", "acquire", "task:t1")["remote"] == "origin"
