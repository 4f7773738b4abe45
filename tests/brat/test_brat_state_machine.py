"""The task state machine: every transition one atomic event; invalid ones refused; --force audited."""

from __future__ import annotations

import os
import subprocess

import pytest

from bratkit import PATH_TO, convoy, events_of, fail, log_commits, move, status_of, task
from git_brat.brat.board import STATES, TRANSITIONS
from helpers import brat, brat_json, wal_tip
from git_brat.grite.model import events as ev
from git_brat.grite.log.wal import Draft
from git_brat.grite.repo import Grite


def _task_in(repo, cid, state, title=None) -> str:
    """A task put straight into `state` (one forced move: two events in all)."""
    tid = task(repo, cid, title or f"in {state}")
    if state != "queued":
        brat(repo, "task", "update", tid, "--status", state, "--force")
    return tid


@pytest.mark.parametrize("old", STATES)
def test_every_transition_outside_the_table_is_refused_naming_the_allowed_ones(brepo, old):
    cid = convoy(brepo, "Invalid moves")
    tid = _task_in(brepo, cid, old)
    for new in STATES:
        if new in TRANSITIONS[old]:
            continue
        tip = wal_tip(brepo)
        code, msg = fail(brepo, "task", "update", tid, "--status", new)
        assert code == 5, msg
        if new == old:
            assert msg == f"refused: task {tid[:7]} is already {old}"
        else:
            allowed = ", ".join(TRANSITIONS[old]) or "nowhere (it is final)"
            assert f"task {tid[:7]} is {old}; from {old} it can go to {allowed}, not {new}" in msg
            assert "--force" in msg
        assert wal_tip(brepo) == tip, f"{old} -> {new} wrote something"
    assert status_of(brepo, tid) == old       # the log did not move, and the view agrees


@pytest.mark.parametrize("old", [s for s in STATES if TRANSITIONS[s]])
def test_every_transition_in_the_table_is_one_event_and_needs_no_force(brepo, old):
    cid = convoy(brepo, "Valid moves")
    for new in TRANSITIONS[old]:
        tid = _task_in(brepo, cid, old, f"{old} -> {new}")
        commits, events = log_commits(brepo), 1 if old == "queued" else 2
        out = brat_json(brepo, "task", "update", tid, "--status", new)
        assert out["status"] == new and out["allowed"] == list(TRANSITIONS[new])
        assert log_commits(brepo) == commits + 1
        [event] = events_of(brepo, tid)[events:]
        # (a move out of a run names the run it ends: here one by hand)
        ends = {"ends": ""} if old == "running" else {}
        assert event["detail"]["fields"] == {"status": new, "status_from": old, **ends}


def test_every_status_is_reachable_from_queued_without_force(brepo):
    cid = convoy(brepo, "Reachable")
    for state, path in PATH_TO.items():
        tid = task(brepo, cid, state)
        move(brepo, tid, *path)
        assert status_of(brepo, tid) == state
        assert not any(h["forced"] for h in brat_json(brepo, "task", "show", tid)["history"])


def test_running_needs_every_dependency_merged_unless_forced(brepo):
    cid = convoy(brepo, "Guard")
    dep = task(brepo, cid, "dependency")
    tid = task(brepo, cid, "dependent", "--needs", dep)
    code, msg = fail(brepo, "task", "update", tid, "--status", "running")
    assert code == 5 and f"task {tid[:7]} is not ready: it needs {dep[:7]} (queued)" in msg
    move(brepo, dep, "running", "needs-review", "merging", "merged")
    move(brepo, tid, "running")
    assert status_of(brepo, tid) == "running"


def test_force_overrides_the_machine_and_is_audited(brepo):
    cid = convoy(brepo, "Forced")
    tid = task(brepo, cid, "hotfix")
    out = brat(brepo, "task", "update", tid, "--status", "merged", "--force",
               "-m", "merged by hand during the outage").out
    assert "queued -> merged (forced)" in out
    [event] = events_of(brepo, tid)[-1:]
    assert event["detail"]["fields"] == {"status": "merged", "status_from": "queued",
                                         "forced": True,
                                         "reason": "merged by hand during the outage"}
    assert "forced" in event["summary"]
    log = brat_json(brepo, "task", "show", tid)["history"][-1]
    assert log["forced"] and log["reason"] == "merged by hand during the outage"
    assert "FORCED" in brat(brepo, "task", "show", tid).out
    # A final state is left only by force, and that is audited too.
    code, msg = fail(brepo, "task", "update", tid, "--status", "queued")
    assert code == 5 and "nowhere (it is final)" in msg
    brat(brepo, "task", "update", tid, "--status", "queued", "--force", "-m", "reopen")
    assert status_of(brepo, tid) == "queued"
    dep = task(brepo, cid, "needs the hotfix", "--needs", tid)
    brat(brepo, "task", "update", dep, "--status", "running", "--force")
    assert events_of(brepo, dep)[-1]["detail"]["fields"]["forced"] is True


def test_the_reason_belongs_to_the_transition_it_came_with(brepo):
    cid = convoy(brepo, "Reasons")
    tid = task(brepo, cid, "t")
    move(brepo, tid, "running")
    brat(brepo, "task", "update", tid, "--status", "blocked", "-m", "waiting for API keys")
    assert brat_json(brepo, "task", "show", tid)["reason"] == "waiting for API keys"
    move(brepo, tid, "queued")
    assert brat_json(brepo, "task", "show", tid)["reason"] == ""


def test_racing_claims_exactly_one_wins(brepo):
    """N processes move the same queued task to running at once: one event, one winner."""
    cid = convoy(brepo, "Race")
    tid = task(brepo, cid, "contended")
    n = 8
    env = dict(os.environ)
    procs = [subprocess.Popen(["git", "brat", "task", "update", tid, "--status", "running"],
                              cwd=brepo, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for _ in range(n)]
    results = [(p.wait(timeout=120), p.stderr.read().decode()) for p in procs]
    for p in procs:
        p.stdout.close()
        p.stderr.close()
    winners = [r for r in results if r[0] == 0]
    losers = [r for r in results if r[0] != 0]
    assert len(winners) == 1, results
    assert all(code == 5 and "already running" in err for code, err in losers), losers
    moves = [h for h in brat_json(brepo, "task", "show", tid)["history"]
             if h["to_status"] == "running"]
    assert len(moves) == 1


def test_a_needs_human_flag_is_cleared_by_the_next_move(brepo):
    tid = task(brepo, convoy(brepo, "C"), "T")
    brat(brepo, "task", "update", tid, "--status", "running")
    g = Grite.open(str(brepo))
    g.append([Draft(tid, ev.SetFields({"needs_human": "merge conflict in calc.py"}))], "refinery")
    kinds = [i["kind"] for i in brat_json(brepo, "status")["interventions"]]
    assert kinds == ["needs-human"]
    brat(brepo, "task", "update", tid, "--status", "queued", "-m", "resolved by hand")
    assert brat_json(brepo, "status")["interventions"] == []
