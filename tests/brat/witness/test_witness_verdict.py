"""How a session ended decides its record, its task's move and its merge request: the table."""

from __future__ import annotations

import pytest

from git_brat.brat.board import TRANSITIONS
from git_brat.brat.config import Witness as Policy
from git_brat.brat.witness.verdict import Facts, decide, failure

SID = "5e55" + "0" * 28
POLICY = Policy(max_retries=2, backoff=10, backoff_max=15, allow_empty_done=False)
NOW = 1_000_000


def facts(**kw) -> Facts:
    return Facts(**{"session": SID, "branch": "brat/t", "task_session": SID, "now": NOW,
                    "tail": "last words", **kw})


# (what happened, facts, session status, task goes to, merge request)
TABLE = [
    ("commits and an exit 0", dict(exit_code=0, commits=2), "done", "needs-review", True),
    ("commits and task done", dict(exit_code=0, commits=1, done=True), "done", "needs-review", True),
    ("done with commits though killed", dict(exit_code=-15, stop_reason="done", done=True,
                                             commits=1), "done", "needs-review", True),
    ("exit 1 with commits, not done", dict(exit_code=1, commits=3), "failed", "queued", False),
    ("exit 1 with commits and done", dict(exit_code=1, commits=3, done=True), "done",
     "needs-review", True),
    ("exit 0 without commits", dict(exit_code=0), "failed", "queued", False),
    ("exit 0 without commits, last retry", dict(exit_code=0, failures=2), "failed", "failed",
     False),
    ("done without commits", dict(exit_code=0, done=True), "failed", "failed", False),
    ("timeout, retries left", dict(exit_code=-15, stop_reason="timeout", timeout=30),
     "timed-out", "queued", False),
    ("timeout, none left", dict(exit_code=-9, stop_reason="timeout", failures=5), "timed-out",
     "failed", False),
    ("engine error, commits but not done", dict(exit_code=0, engine_error="quota", commits=1),
     "failed", "queued", False),
    ("engine error, no commits", dict(exit_code=0, engine_error="quota"), "failed", "queued",
     False),
    ("setup failed", dict(setup_failed="setup `make` exited 2"), "failed", "queued", False),
    ("the witness stopped", dict(exit_code=-15, stop_reason="witness",
                                 witness_stopping="interrupted"), "stopped", "queued", False),
    ("a user asked it to stop", dict(exit_code=-15, stop_reason="stop-requested",
                                     stop_requested_by="ann"), "stopped", "blocked", False),
    ("its lease was lost", dict(exit_code=0, commits=2, stop_reason="lease-lost"), "failed", "",
     False),
    ("the agent blocked its task", dict(exit_code=0, stop_reason="blocked",
                                        task_status="blocked", task_reason="need a key"),
     "blocked", "", False),
    ("someone dropped the task", dict(exit_code=-15, stop_reason="moved", task_status="dropped"),
     "ended", "", False),
    ("another session runs the task", dict(exit_code=0, commits=1, task_session="other"), "ended",
     "", False),
]


@pytest.mark.parametrize("what,given,status,task_to,merge", TABLE, ids=[t[0] for t in TABLE])
def test_how_a_session_ended_decides_its_record_its_task_and_its_merge(what, given, status,
                                                                        task_to, merge):
    v = decide(facts(**given), POLICY)
    assert (v.status, v.task_to, v.merge) == (status, task_to, merge)
    assert v.reason
    if task_to:   # every move the witness makes is one the state machine allows from running
        assert task_to in TRANSITIONS["running"] and v.task_reason


def test_a_retry_waits_longer_each_time_up_to_the_cap_and_counts_the_attempt():
    waits = []
    for before in (0, 1):
        v = decide(facts(exit_code=1, failures=before), POLICY)
        assert v.task_fields["failures"] == before + 1
        waits.append(v.task_fields["retry_after"] - NOW)
    assert waits == [10_000, 15_000]
    last = decide(facts(exit_code=1, failures=2), POLICY)
    assert last.task_to == "failed" and "retry_after" not in last.task_fields
    assert "after 3 attempt(s)" in last.task_reason and "last words" in last.task_fields["last_failure"]


def test_a_handed_in_branch_clears_the_failure_count():
    v = decide(facts(exit_code=0, commits=1, failures=2), POLICY)
    assert v.task_fields == {"failures": 0, "last_failure": ""}


def test_an_empty_done_goes_to_review_when_the_policy_allows_it():
    v = decide(facts(exit_code=0, done=True), Policy(allow_empty_done=True))
    assert (v.status, v.task_to, v.merge) == ("done", "needs-review", False)


@pytest.mark.parametrize("given,why", [
    (dict(exit_code=3), "the engine exited 3"),
    (dict(exit_code=-9), "the engine was killed by signal 9"),
    (dict(exit_code=-15, stop_reason="done"), ""),
    (dict(exit_code=0, engine_error="x" * 400), "the engine reported an error: " + "x" * 300),
    (dict(stop_reason="timeout", timeout=1.5), "timed out after 1.5s (its process group was stopped)"),
    (dict(), ""),
])
def test_the_failure_named_in_the_record(given, why):
    assert failure(facts(**given)) == why
