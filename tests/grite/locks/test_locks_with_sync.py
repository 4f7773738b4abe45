"""Leases and sync together: what one clone does to a lease shows up in another after a fetch."""

from __future__ import annotations

from helpers import git, grite, grite_json
from sync_helpers import clone, seeded_hub


def test_a_lease_released_elsewhere_shows_released_after_a_plain_fetch(tmp_path):
    hub = seeded_hub(tmp_path)
    alice, bob = clone(str(hub), tmp_path / "alice"), clone(str(hub), tmp_path / "bob")
    grite(alice, "lock", "acquire", "task:one", "--remote", "origin", "--ttl", "600")
    refused = grite(bob, "lock", "acquire", "task:one", "--remote", "origin", check=False)
    assert refused.returncode == 5
    assert grite_json(bob, "lock", "status", "--local")[0]["state"] == "held"
    grite(alice, "lock", "release", "task:one", "--remote", "origin")

    git(bob, "fetch", "-q")
    leases = grite_json(bob, "lock", "status", "--local")
    assert [(l["resource"], l["state"]) for l in leases] == [("task:one", "released")]
    report = grite_json(bob, "doctor")
    assert report["ok"], report["findings"]
    assert not git(bob, "for-each-ref", "refs/grite/attic/"), "lease refs are not event logs"


def test_lease_refs_moving_back_and_forth_are_never_mistaken_for_logs(tmp_path):
    hub = seeded_hub(tmp_path)
    alice, bob = clone(str(hub), tmp_path / "alice"), clone(str(hub), tmp_path / "bob")
    for _ in range(2):
        grite(alice, "lock", "acquire", "task:two", "--remote", "origin")
        git(bob, "fetch", "-q")
        grite(alice, "lock", "release", "task:two", "--remote", "origin")
        git(bob, "fetch", "-q", "--prune")
    assert grite_json(bob, "doctor")["ok"]
    assert grite_json(bob, "issue", "list") == []


def test_with_one_synced_remote_leases_are_decided_there_by_default(tmp_path):
    hub = seeded_hub(tmp_path)
    alice, bob = clone(str(hub), tmp_path / "alice"), clone(str(hub), tmp_path / "bob")
    won = grite_json(alice, "lock", "acquire", "task:shared")
    assert won["mode"] == "remote" and won["remote"] == "origin"
    refused = grite(bob, "lock", "acquire", "task:shared", check=False)
    assert refused.returncode == 5 and "held by" in refused.err
    assert grite_json(bob, "lock", "acquire", "task:mine", "--local")["mode"] == "local"
