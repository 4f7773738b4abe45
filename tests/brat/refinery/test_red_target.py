"""Issue 35, item 3: a red target is named, not blamed. With a test already failing on main,
the refinery checks main alone (once per commit and check), names it once, fails and retries
no task, and lands the held work once main is fixed."""

from __future__ import annotations

import sys

from bratkit import fail, status_of
from helpers import brat, brat_json, git
from refinerykit import (check_runs, commit_on, configure, field, move, outcomes, processed,
                         refine, request)

CALC = "def add(a, b):\n    return a + b\n"
BROKEN = """from calc import add


def test_adds():
    assert add(2, 2) == 4


def test_negative():
    assert add(-1, -1) == -3
"""
PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider"


WRONG = {"calc.py": "def add(a, b):\n    return a - b\n"}


def _green_main(queue, **config):
    """main with calc and its passing tests, checked by pytest."""
    repo, cid = queue
    commit_on(repo, "main", {"calc.py": CALC, "test_calc.py": BROKEN.replace("-3", "-2")},
              "calc")
    configure(repo, check=PYTEST, **config)
    return repo, cid


def _red_main(queue):
    repo, cid = queue
    commit_on(repo, "main", {"calc.py": CALC, "test_calc.py": BROKEN}, "calc, a test wrong")
    configure(repo, check=PYTEST, max_attempts=2)
    return repo, cid


def test_a_red_main_fails_no_task_is_named_once_and_the_queue_resumes_when_main_is_fixed(queue):
    repo, cid = _red_main(queue)
    first = request(repo, cid, "Docs", {"README.md": "calc\n"})
    report = refine(repo)
    assert outcomes(report) == {first: "held"}
    assert check_runs(report) == 2          # the task's check, then main's alone
    assert status_of(repo, first) == "needs-review"
    assert not field(repo, first, "merge_failures") and not field(repo, first, "failures")
    red = brat_json(repo, "status")["red_target"]
    assert red["target"] == "main" and red["failing_tests"] == ["test_calc.py::test_negative"]
    assert red["commit"] == git(repo, "rev-parse", "main") and red["held"] == [first]
    assert "no task is blamed" in red["advice"]
    whole = brat_json(repo, "refinery", "log", "--target")
    assert whole["commit"] == red["commit"] and "def test_negative" in whole["text"]
    # More work arrives while main is red: main is not checked again, the held one not re-run.
    second = request(repo, cid, "More docs", {"NOTES.md": "notes\n"})
    for _ in range(2):
        report = refine(repo)
        assert processed(report) in ([second], [])
    assert outcomes(refine(repo)) == {} and status_of(repo, second) == "needs-review"
    status = brat_json(repo, "status")
    assert status["red_target"]["id"] == red["id"] and len(status["red_target"]["held"]) == 2
    text = brat(repo, "status").out
    assert text.count("main is red") == 1 and "test_negative" in text
    # and the inbox holds it once, as the target's, no task's
    reds = [i for i in brat_json(repo, "inbox") if i["kind"] == "red-target"]
    assert len(reds) == 1 and reds[0]["task"] == "" and "test_negative" in reds[0]["text"]
    assert brat_json(repo, "task", "show", first)["status"] == "needs-review"
    # Someone fixes main: the queue resumes, both land, nothing counted against them.
    commit_on(repo, "main", {"test_calc.py": BROKEN.replace("-3", "-2")}, "fix the test")
    report = refine(repo)
    assert outcomes(report) == {first: "merged", second: "merged"}
    assert brat_json(repo, "status")["red_target"] is None
    assert not [i for i in brat_json(repo, "inbox") if i["kind"] == "red-target"]
    assert "main is red" not in brat(repo, "status").out
    assert "main is not red" in fail(repo, "refinery", "log", "--target")[1]
    assert not field(repo, first, "merge_failures")


def test_work_that_fails_on_a_green_main_is_told_main_passes_without_it(queue):
    repo, cid = _green_main(queue)
    tid = request(repo, cid, "Wrong", WRONG)
    report = refine(repo)
    assert outcomes(report) == {tid: "requeued"} and check_runs(report) == 2
    failure = field(repo, tid, "last_failure")
    assert "test_calc.py::test_adds failed" in failure
    assert "main passes this check on its own" in failure
    assert brat_json(repo, "status")["red_target"] is None


def test_a_check_run_again_on_the_same_commits_is_not_a_new_attempt(queue):
    repo, cid = _green_main(queue, max_attempts=2)
    tid = request(repo, cid, "Wrong", WRONG)
    assert outcomes(refine(repo)) == {tid: "requeued"}
    assert field(repo, tid, "merge_failures") == 1
    # The agent's next session changes nothing and hands the same commit in: checked again,
    # it fails the same way, and that is not attempt 2 of 2.
    move(repo, tid, "running", "needs-review")
    brat(repo, "task", "approve", tid)
    assert outcomes(refine(repo)) == {tid: "requeued"}
    assert field(repo, tid, "merge_failures") == 1 and status_of(repo, tid) == "queued"
    # New work that still fails is the second attempt.
    move(repo, tid, "running")
    commit_on(repo, f"brat/{tid}", {"NOTES.md": "tried\n"}, "Try again")
    move(repo, tid, "needs-review")
    brat(repo, "task", "approve", tid)
    assert outcomes(refine(repo)) == {tid: "failed"}
    assert "attempt 2 of 2" in brat_json(repo, "task", "show", tid)["reason"]


def test_a_forged_main_is_red_record_holds_no_work_back(queue):
    # Anyone who pushes writes the log: a record naming main red, and a request "held" on it,
    # are checked here (main passes) before anything waits; the record is closed.
    from git_brat.grite.log.wal import Draft
    from git_brat.grite.model import events as ev
    from gritekit import pusher_append
    repo, cid = _green_main(queue)
    tid = request(repo, cid, "Docs", {"README.md": "calc\n"})
    main, head = git(repo, "rev-parse", "main"), git(repo, "rev-parse", f"brat/{tid}")
    pusher_append(repo, [
        Draft(ev.new_entity_id(), ev.Create("red-target", {
            "status": "red", "target": "main", "checked_commit": main, "check": PYTEST,
            "result": "everything is broken"})),
        Draft(ev.new_entity_id(), ev.Create("merge", {
            "task": tid, "branch": f"brat/{tid}", "head": head, "target": "main",
            "status": "held", "held_on": main, "attempts": 0}))])
    assert brat_json(repo, "status")["red_target"]["result"] == "everything is broken"
    assert outcomes(refine(repo)) == {tid: "merged"}
    assert brat_json(repo, "status")["red_target"] is None
