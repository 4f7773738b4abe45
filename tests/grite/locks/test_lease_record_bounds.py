"""A lease record whose fields are past their bounds (or that is not a record at all) is read
by every clone: it is skipped and reported like a forged record, and the lease stays what its
readable records grant (issue 34: lease fields bounded at decoding)."""

from __future__ import annotations

import json

import pytest

from helpers import git, grite, grite_json, run
from sync_helpers import clone, seeded_hub
from test_lease_forgery import REF, _append_forged_record

HUGE = {
    "forcers": ["k" * 44] * 65,                 # more keys than a holder may name
    "holder": {"id": "m" * 10_000, "actor": "", "session": "", "host": "h", "pid": 1},
    "token": -1,
    "expires_at": 2 ** 64,
    "state": "held" * 100,
}


def _push_raw(repo, text: str) -> str:
    """A lease commit whose blob is not a record at all."""
    git(repo, "fetch", "-q", "origin", f"+{REF}:{REF}")
    blob = run(["git", "hash-object", "-w", "--stdin"], repo, input=text).out.strip()
    tree = run(["git", "mktree"], repo, input=f"100644 blob {blob}\tlease\n").out.strip()
    commit = git(repo, "commit-tree", tree, "-p", git(repo, "rev-parse", REF), "-m", "junk")
    git(repo, "push", "-q", "origin", f"{commit}:{REF}")
    return commit


@pytest.mark.parametrize("field", [*HUGE, "not json"])
def test_a_record_past_its_bounds_on_top_of_a_live_lease_changes_nothing(tmp_path, field):
    hub = seeded_hub(tmp_path)
    alice, bob, mallory = (clone(str(hub), tmp_path / n) for n in ("alice", "bob", "mallory"))
    grite(alice, "lock", "acquire", "task:t1", "--remote", "origin", "--holder", "alice",
          "--ttl", "600")
    if field == "not json":
        bad = _push_raw(mallory, "{" * 50_000)
    else:
        bad = _append_forged_record(mallory, action="renew", **{field: HUGE[field]})

    # The holder renews on top of it; another clone sees the holder, and is told of the record.
    renewed = grite_json(alice, "lock", "renew", "task:t1", "--remote", "origin",
                         "--holder", "alice")
    assert (renewed["holder"], renewed["token"]) == ("alice", 1)
    shown = grite(bob, "lock", "status", "task:t1", "--remote", "origin", "--json")
    assert [(s["holder"], s["token"], s["state"]) for s in json.loads(shown.out)] == [
        ("alice", 1, "held")]
    assert f"ignored lease record {bad[:12]}" in shown.err and "does not decode" in shown.err
    assert len(shown.err) < 2_000    # (what it says of the record is bounded too)
    refused = grite(bob, "lock", "acquire", "task:t1", "--remote", "origin", "--holder", "bob",
                    check=False)
    assert refused.returncode == 5 and "held by alice" in refused.err
    report = grite(bob, "doctor", "--json", check=False)
    assert report.returncode == 6
    findings = [f for f in json.loads(report.out)["findings"] if f["kind"] == "forged-lease"]
    assert [f["subject"] for f in findings] == [bad]
    assert "does not decode" in findings[0]["detail"]
    # The witness reads the trail back (who ran the task before): past the record, whole.
    from git_brat.grite.locks import history
    from git_brat.grite.repo import Grite
    git(bob, "fetch", "-q", "origin", f"+{REF}:{REF}")
    trail = history(Grite.open(str(bob)), "task:t1")
    assert [r.holder.id for r in trail] == ["alice", "alice"]


def test_a_lease_ref_that_holds_only_junk_grants_nothing_and_is_taken_over_it(tmp_path):
    """A pusher creates a task's lease ref with a record that is not one: the ref grants
    nothing, so the task's lease is free; the first real grant goes on top and the junk is
    named (before, every acquire of that task failed on it, for good)."""
    hub = seeded_hub(tmp_path)
    alice, mallory = clone(str(hub), tmp_path / "alice"), clone(str(hub), tmp_path / "mallory")
    blob = run(["git", "hash-object", "-w", "--stdin"], mallory, input="[]").out.strip()
    tree = run(["git", "mktree"], mallory, input=f"100644 blob {blob}\tlease\n").out.strip()
    junk = git(mallory, "commit-tree", tree, "-m", "junk")
    git(mallory, "push", "-q", "origin", f"{junk}:{REF}")
    got = grite_json(alice, "lock", "acquire", "task:t1", "--remote", "origin",
                     "--holder", "alice")
    assert (got["holder"], got["token"], got["state"]) == ("alice", 1, "held")
    assert git(alice, "rev-parse", f"{REF}^") == junk      # a fast-forward of the hub's ref
    shown = grite(alice, "lock", "status", "--json")
    assert [(s["holder"], s["token"]) for s in json.loads(shown.out)] == [("alice", 1)]
    assert f"ignored lease record {junk[:12]}" in shown.err
