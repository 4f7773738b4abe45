"""A forced takeover counts the same on every clone, whatever keys each trusts: an override is
believed only from a key the lease's holder named (its clone's trusted keys, written into its
grant and each renewal), so the clone that forced and the clone that holds never both run."""

from __future__ import annotations

import json

import pytest

from helpers import grite
from sync_helpers import clone, seeded_hub
from witnesskit import kill_group, make_bench


def _two_clones(tmp_path):
    hub = seeded_hub(tmp_path)
    a = clone(str(hub), tmp_path / "a", init=False)
    b = clone(str(hub), tmp_path / "b", init=False)
    # (one record of every run: the fake agent's state, writable in either clone's sandbox)
    ba, bb = make_bench(a, tmp_path / "runs"), make_bench(b, tmp_path / "runs")
    for bench in (ba, bb):
        bench.config(witness__heartbeat="0.5", witness__lease_ttl="4")
    # (A runs a task whose last session's lease it sees taken at once: no wait for its log)
    ba.config(witness__expired_wait="0")
    return a, b, ba, bb


@pytest.mark.slow
def test_a_forced_takeover_the_holders_clone_does_not_allow_is_refused_and_only_one_clone_runs(
        tmp_path):
    a, b, ba, bb = _two_clones(tmp_path)
    t = ba.task(ba.convoy(), "Long", "sleep 12", "write w.txt w", "commit w")
    grite(a, "sync")
    grite(b, "sync")
    holder = bb.start_witness("--once", "--json")
    try:
        bb.wait_for(lambda: bb.runs(), 60, every=0.2)   # B's agent runs the task
        # A trusts its own key; B's clone never named it: A's override must count nowhere
        forced = grite(a, "lock", "acquire", f"task:{t}", "--remote", "origin", "--force",
                       check=False)
        assert forced.returncode == 5, forced.out + forced.err
        assert "does not let" in forced.err and "wait" in forced.err
        grite(a, "lock", "release", f"task:{t}", "--remote", "origin", check=False)
        other = ba.start_witness("--once", "--json")   # A's witness, while B's agent runs
        try:
            out, err = other.communicate(timeout=120)
            assert other.returncode == 0, err.decode()
        finally:
            kill_group(other)
        assert [r["task"] for r in ba.runs()] == [t]   # nobody else ran it meanwhile
        out, err = holder.communicate(timeout=120)
        assert holder.returncode == 0, err.decode()
    finally:
        kill_group(holder)
    assert json.loads(out)["started"] == 1
    assert bb.show(t)["status"] == "needs-review"   # B's session ended as itself, lease kept
    [run] = ba.runs()
    assert bb.session(run["session"])["status"] == "done"
