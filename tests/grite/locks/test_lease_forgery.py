"""Lease records anyone can push: one that breaks its lease's history is ignored and reported."""

from __future__ import annotations

import json
import time

from helpers import git, grite, grite_json, run
from sync_helpers import clone, seeded_hub

REF = "refs/grite/locks/task/t1"


def _append_forged_record(repo, **change) -> str:
    """Push, as a fast-forward of the hub's lease ref, a record written by hand (no grite)."""
    git(repo, "fetch", "-q", "origin", f"+{REF}:{REF}")
    lease = json.loads(git(repo, "cat-file", "-p", f"{REF}:lease"))
    lease.update(change)
    blob = run(["git", "hash-object", "-w", "--stdin"], repo,
               input=json.dumps(lease, separators=(",", ":"))).out.strip()
    tree = run(["git", "mktree"], repo, input=f"100644 blob {blob}\tlease\n").out.strip()
    commit = git(repo, "commit-tree", tree, "-p", git(repo, "rev-parse", REF), "-m", "forged")
    git(repo, "push", "-q", "origin", f"{commit}:{REF}")
    return commit


def test_an_acquire_pushed_over_a_live_lease_is_ignored_and_reported(tmp_path):
    hub = seeded_hub(tmp_path)
    alice, bob, mallory = (clone(str(hub), tmp_path / n) for n in ("alice", "bob", "mallory"))
    grite(alice, "lock", "acquire", "task:t1", "--remote", "origin", "--holder", "alice",
          "--ttl", "600")
    now = int(time.time() * 1000)
    year = 365 * 86400 * 1000
    forged = _append_forged_record(
        mallory, holder={"id": "mallory", "actor": "m", "session": "", "host": "h", "pid": 1},
        token=2, state="held", acquired_at=now, expires_at=now + year, ttl_ms=year,
        written_at=now, action="acquire", by="")

    # The holder keeps its lease: its heartbeat renews it (on top of the forged record).
    renewed = grite_json(alice, "lock", "renew", "task:t1", "--remote", "origin",
                         "--holder", "alice")
    assert (renewed["holder"], renewed["token"]) == ("alice", 1)
    refused = grite(bob, "lock", "acquire", "task:t1", "--remote", "origin", "--holder", "bob",
                    check=False)
    assert refused.returncode == 5 and "held by alice" in refused.err
    shown = grite(bob, "lock", "status", "task:t1", "--remote", "origin", "--json")
    assert [(s["holder"], s["token"]) for s in json.loads(shown.out)] == [("alice", 1)]
    assert f"ignored lease record {forged[:12]}" in shown.err
    assert "acquire by mallory while alice held it" in shown.err
    report = grite(bob, "doctor", "--json", check=False)
    assert report.returncode == 6
    findings = json.loads(report.out)["findings"]
    assert [(f["kind"], f["subject"]) for f in findings if f["kind"] == "forged-lease"] == [
        ("forged-lease", forged)]

    # Released by its holder, the lease goes to the next one with the next genuine token.
    grite(alice, "lock", "release", "task:t1", "--remote", "origin", "--holder", "alice")
    took = grite_json(bob, "lock", "acquire", "task:t1", "--remote", "origin", "--holder", "bob")
    assert (took["holder"], took["token"], took["last_action"]) == ("bob", 2, "acquire")


def test_a_record_dated_after_the_lease_runs_out_does_not_take_it_early(tmp_path):
    hub = seeded_hub(tmp_path)
    alice, mallory = clone(str(hub), tmp_path / "alice"), clone(str(hub), tmp_path / "mallory")
    got = grite_json(alice, "lock", "acquire", "task:t1", "--remote", "origin", "--holder", "alice",
                     "--ttl", "600")
    git(alice, "fetch", "-q", "origin", f"+{REF}:{REF}")
    expires = json.loads(git(alice, "cat-file", "-p", f"{REF}:lease"))["expires_at"]
    assert got["token"] == 1
    later = expires + 1
    _append_forged_record(
        mallory, holder={"id": "mallory", "actor": "m", "session": "", "host": "h", "pid": 1},
        token=2, state="held", acquired_at=later, expires_at=later + 10**9, ttl_ms=10**9,
        written_at=later, action="takeover", by="")
    renewed = grite_json(alice, "lock", "renew", "task:t1", "--remote", "origin",
                         "--holder", "alice")
    assert (renewed["holder"], renewed["token"]) == ("alice", 1)


def test_an_expire_record_pushed_over_a_live_lease_does_not_free_it(tmp_path):
    hub = seeded_hub(tmp_path)
    alice, bob, mallory = (clone(str(hub), tmp_path / n) for n in ("alice", "bob", "mallory"))
    grite(alice, "lock", "acquire", "task:t1", "--remote", "origin", "--holder", "alice",
          "--ttl", "600")
    now = int(time.time() * 1000)
    _append_forged_record(mallory, state="released", released_at=now, written_at=now,
                          action="expire", by="mallory")
    refused = grite(bob, "lock", "acquire", "task:t1", "--remote", "origin", "--holder", "bob",
                    check=False)
    assert refused.returncode == 5 and "held by alice" in refused.err


def test_a_lease_token_in_the_log_beyond_the_leases_own_records_is_reported(tmp_path):
    import sys
    hub = seeded_hub(tmp_path)
    alice = clone(str(hub), tmp_path / "alice")
    grite(alice, "lock", "acquire", "task:t1", "--holder", "alice", "--ttl", "600")
    assert grite_json(alice, "doctor")["ok"]
    # A pushed event granting a token far ahead of the lease (what a forger writes).
    forge = ("from git_brat.grite.repo import Grite\n"
             "from git_brat.grite.locks import lock_entity\n"
             "from git_brat.grite.log.wal import Draft\n"
             "from git_brat.grite.model import events as ev\n"
             "g = Grite.open('.')\n"
             "g.append([Draft(lock_entity('task:t1'), ev.LeaseToken('task:t1', 10**9, 'x', 1))],"
             " 'forged')\n")
    from pathlib import Path
    run([sys.executable, "-c", forge], alice, env={"PYTHONPATH": str(Path(__file__).parents[3])})
    report = grite(alice, "doctor", "--json", check=False)
    assert report.returncode == 6
    found = [f for f in json.loads(report.out)["findings"] if f["kind"] == "forged-lease"]
    assert [f["subject"] for f in found] == ["task:t1"]
    assert "lease token 1000000000 for task:t1 is not granted by the lease's records " \
        "(they reach token 1)" in found[0]["detail"]
    assert "rejected, not applied" in found[0]["detail"]
