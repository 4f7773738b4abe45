"""Who may name the lock remote: a pushed main never does on a hub, and a pulled one only once approved."""

from __future__ import annotations

import json

from helpers import brat, brat_json, git, grite, grite_json
from sync_helpers import clone, seeded_hub

LOCKS_REMOTE = '[locks]\nremote = "no-such-remote"\n'


def _push_locks_remote(hub, tmp_path):
    pusher = clone(str(hub), tmp_path / "pusher", init=False)
    if (pusher / ".brat" / "config.toml").exists():
        brat(pusher, "config", "set", "locks.remote", "no-such-remote")
    else:
        (pusher / ".brat").mkdir()
        (pusher / ".brat" / "config.toml").write_text(LOCKS_REMOTE)
    git(pusher, "add", ".brat")
    git(pusher, "commit", "-q", "-m", "brat: lock remote")
    git(pusher, "-c", "core.hooksPath=/dev/null", "push", "-q", "origin", "main")


def test_a_hub_decides_leases_by_its_own_settings_never_by_the_pushed_main(tmp_path):
    hub = seeded_hub(tmp_path)
    brat(hub, "init", "--hub")
    brat(hub, "config", "set", "hub.land_unchecked", "true")   # (its admin's choice: no check)
    _push_locks_remote(hub, tmp_path)
    got = grite_json(hub, "lock", "acquire", "refinery:hub")
    assert got["mode"] == "local"                           # the hub is the authority itself
    grite(hub, "lock", "release", "refinery:hub")
    report = brat_json(hub, "refinery", "run", "--once")    # the pusher stops nothing
    assert report["busy"] == "" and not report["passes"][0]["outcomes"]
    # The admin's own setting is the hub's to make.
    git(hub, "config", "grite.lockRemote", "no-such-admin-remote")
    proc = grite(hub, "lock", "status", check=False)
    assert proc.returncode == 3 and "no-such-admin-remote" in proc.stderr.decode()


def test_an_unapproved_pulled_locks_remote_waits_and_the_lock_commands_and_the_deacon_work(
        tmp_path):
    hub = seeded_hub(tmp_path)
    victim = clone(str(hub), tmp_path / "victim", init=False)
    brat(victim, "init")
    git(victim, "add", ".brat")
    git(victim, "commit", "-q", "-m", "brat")
    git(victim, "push", "-q", "origin", "main")
    _push_locks_remote(hub, tmp_path)
    git(victim, "pull", "-q", "--no-rebase")
    proc = grite(victim, "lock", "status")
    assert "[locks] remote = 'no-such-remote'" in proc.err, proc.err and "waits for approval" in proc.err
    assert "git brat trust" in proc.err
    got = grite_json(victim, "lock", "acquire", "task:t1")
    assert got["mode"] == "remote" and got["remote"] == "origin"   # as without the line
    deacon = brat_json(victim, "deacon", "run", "--once")
    assert deacon["duties"]["leases"].startswith("ok") and "waits for approval" in \
        deacon["duties"]["leases"]
    # Approved, it takes effect (and this one names no remote of the clone: refused).
    brat(victim, "trust")
    proc = grite(victim, "lock", "status", check=False)
    assert proc.returncode == 2 and "not a remote of this clone" in proc.err
    assert json.loads(brat(victim, "trust", "--show", "--json").out)["approved"]
