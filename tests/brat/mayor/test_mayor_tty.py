"""`git brat mayor ask` at a terminal: the plan is shown and confirmed (or declined) first."""

from __future__ import annotations

import os
import time

import pexpect
import pytest

from helpers import brat, brat_json, status, wal_tip
from mayorkit import mrepo, record, runs  # noqa: F401  (fixtures)

QUESTION = "Create this convoy and its 3 tasks? [y/N]"


def _ask(repo, *args) -> pexpect.spawn:
    return pexpect.spawn("git-brat", ["mayor", "ask", "Plan the tab fix", *args], cwd=str(repo),
                         env=dict(os.environ), encoding="utf-8", timeout=60,
                         dimensions=(50, 100))


def _finish(child: pexpect.spawn) -> int:
    child.expect(pexpect.EOF)
    child.close()
    assert "Traceback" not in child.before
    return child.exitstatus


def test_at_a_terminal_the_plan_is_shown_and_created_once_accepted(mrepo):
    child = _ask(mrepo)
    try:
        child.expect_exact('would create convoy "Fix the parser": 3 tasks')
        child.expect_exact("(needs tabs, tests)")
        child.expect_exact(QUESTION)
        assert wal_tip(mrepo) is not None and brat_json(mrepo, "convoy", "list") == []
        child.sendline("y")
        child.expect_exact('created convoy')
        assert _finish(child) == 0
    finally:
        child.close(force=True)
    (c,) = brat_json(mrepo, "convoy", "list")
    assert c["title"] == "Fix the parser" and c["total"] == 3
    assert brat_json(mrepo, "mayor", "status")["conversation"]["exchanges"] == 1
    assert status(mrepo) == ""


@pytest.mark.parametrize("reply", ["n", ""])
def test_declining_or_just_enter_creates_nothing(mrepo, reply):
    tip = wal_tip(mrepo)
    child = _ask(mrepo)
    try:
        child.expect_exact(QUESTION)
        child.sendline(reply)
        child.expect_exact("nothing created (the answer is in .git/brat/mayor/")
        assert _finish(child) == 0
    finally:
        child.close(force=True)
    assert wal_tip(mrepo) == tip and brat_json(mrepo, "convoy", "list") == []


def test_yes_skips_the_question_at_a_terminal(mrepo):
    child = _ask(mrepo, "--yes")
    try:
        child.expect_exact("created convoy")
        assert _finish(child) == 0
        assert "[y/N]" not in child.before
    finally:
        child.close(force=True)
    assert len(brat_json(mrepo, "convoy", "list")) == 1


def test_ctrl_c_while_the_engine_thinks_stops_it_and_creates_nothing(mrepo, record):
    brat(mrepo, "mayor", "start", "--engine", "hang")
    tip = wal_tip(mrepo)
    child = _ask(mrepo, "--yes")
    try:
        deadline = time.monotonic() + 30
        while not runs(record) and time.monotonic() < deadline:
            time.sleep(0.1)
        (run,) = runs(record)
        child.sendintr()
        child.expect(pexpect.EOF)
        child.close()
        assert "interrupted" in child.before and "Traceback" not in child.before
    finally:
        child.close(force=True)
    assert child.exitstatus == 130
    assert not os.path.exists(f"/proc/{run['pid']}"), "the engine outlived the mayor"
    assert wal_tip(mrepo) == tip and brat_json(mrepo, "convoy", "list") == []
