"""Issue 35, item 4: why a check failed is readable where people look (refinery status, task
show, status's needs-attention list, JSON), the whole output by `git brat refinery log`."""

from __future__ import annotations

import re
import sys

import pytest

from bratkit import fail
from helpers import brat, brat_json
from refinerykit import commit_on, configure, outcomes, refine, request

TOKEN = "ghp_aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5"   # made up (tests/secret_shapes.py)
CALC = "def add(a, b):\n    return a + b\n"
TESTS = f"""from calc import add


def test_adds():
    print("gh auth: {TOKEN}")
    assert add(2, 2) == 4


def test_zero():
    assert add(0, 0) == 0
"""
PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider"


def _project_with_a_wrong_fix(queue) -> tuple:
    repo, cid = queue
    commit_on(repo, "main", {"calc.py": CALC, "test_calc.py": TESTS}, "calc and its tests")
    configure(repo, check=PYTEST, on_fail="fail")
    tid = request(repo, cid, "Faster add", {"calc.py": "def add(a, b):\n    return a - b\n"})
    assert outcomes(refine(repo)) == {tid: "failed"}
    return repo, tid


def test_the_failing_test_its_output_and_the_whole_log_are_shown_redacted(queue):
    repo, tid = _project_with_a_wrong_fix(queue)
    check = brat_json(repo, "task", "show", tid)["check"]
    assert check["failing_tests"] == ["test_calc.py::test_adds"] and check["exit"] == 1
    assert re.fullmatch(r"[0-9a-f]{40}", check["commit"])
    assert "test_calc.py::test_adds failed" in check["result"]
    assert any("1 failed, 1 passed" in ln for ln in check["tail"])
    assert not any(TOKEN in ln for ln in check["tail"])     # what syncs is redacted
    assert check["log_command"] == f"git brat refinery log {tid[:7]}" and check["log"]
    text = brat(repo, "task", "show", tid).out
    assert "failing: test_calc.py::test_adds" in text and "refinery log" in text
    status = brat(repo, "refinery", "status").out
    assert "test_calc.py::test_adds" in status and "1 failed, 1 passed" in status
    recent = brat_json(repo, "refinery", "status")["recent"][0]["check"]
    assert recent["failing_tests"] == ["test_calc.py::test_adds"]
    whole = brat(repo, "refinery", "log", tid[:7]).out
    assert "def test_adds" in whole and TOKEN in whole   # the local file, 0600, is whole
    assert brat_json(repo, "refinery", "log", tid)["text"].count("assert add(2, 2) == 4") >= 1


def test_status_says_which_test_failed_rather_than_stopping_at_the_exit_code(queue):
    repo, tid = _project_with_a_wrong_fix(queue)
    failed = [i for i in brat_json(repo, "status")["interventions"] if i["task"] == tid]
    assert "test_calc.py::test_adds failed" in failed[0]["detail"]
    assert not failed[0]["detail"].rstrip().endswith(":")
    assert "test_adds failed" in brat(repo, "status").out


def test_refinery_log_of_a_task_never_checked_says_so(queue):
    repo, cid = queue
    from refinerykit import task
    tid = task(repo, cid, "Untouched")
    code, msg = fail(repo, "refinery", "log", tid)
    assert code != 0 and "has no check output" in msg


@pytest.mark.slow
def test_the_boards_review_screen_shows_the_failing_test_and_the_outputs_last_lines(queue):
    import sys as _sys
    from pathlib import Path
    _sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ui"))
    import boardkit
    repo, tid = _project_with_a_wrong_fix(queue)
    board = boardkit.start(repo)
    try:
        _c, _h, page = board.request("GET", f"/task/{tid}")
    finally:
        board.stop()
    text = page.decode()
    assert "failing: test_calc.py::test_adds" in text and "1 failed, 1 passed" in text
    assert f"git brat refinery log {tid[:7]}" in text
    assert TOKEN not in text                                   # redacted, as it syncs
