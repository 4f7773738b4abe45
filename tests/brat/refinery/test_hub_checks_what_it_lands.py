"""Issue 35, item 2: a hub checks what it lands. `git brat init --hub` takes the project's
committed check (the admin's own copy), or says plainly that the hub lands nothing unchecked
until a check is set or hub.land_unchecked = true is chosen."""

from __future__ import annotations

import sys

from bratkit import convoy, fail, move, status_of, task
from helpers import brat, brat_json, git, grite, run
from refinerykit import commit_on
from sync_helpers import bare_hub, clone, seeded_hub

PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider"
CALC = "def add(a, b):\n    return a + b\n"
TESTS = "from calc import add\n\n\ndef test_adds():\n    assert add(2, 3) == 5\n"


def _quiet_hub(hub) -> None:
    """Pushes do not start the hub's refinery in the background: the test runs it."""
    git(hub, "config", "brat.hookTrigger", "false")


def _project_on_a_hub(tmp_path):
    """A hub whose main holds a Python project with a pytest suite and, committed and approved
    by its lead, refinery.check = pytest; then two clones."""
    hub = bare_hub(tmp_path / "hub.git")
    lead = clone(str(hub), tmp_path / "lead", init=False)
    git(lead, "checkout", "-q", "-b", "main")
    (lead / "calc.py").write_text(CALC)
    (lead / "test_calc.py").write_text(TESTS)
    brat(lead, "init")
    brat(lead, "config", "set", "refinery.check", PYTEST)
    git(lead, "add", "-A")
    git(lead, "commit", "-q", "-m", "calc, its tests, and the project's check")
    git(lead, "push", "-q", "origin", "main")
    return hub, lead


def _finished(repo, cid, title: str, files: dict) -> str:
    """An agent's finished, approved work on brat/<id>, pushed with the log to the hub."""
    tid = task(repo, cid, title)
    commit_on(repo, f"brat/{tid}", files, title)
    move(repo, tid, "running", "needs-review")
    brat(repo, "task", "approve", tid)
    git(repo, "push", "-q", "origin", f"brat/{tid}")
    grite(repo, "sync")
    return tid


def test_a_hub_with_the_projects_check_refuses_a_wrong_fix_and_lands_a_right_one(tmp_path):
    hub, lead = _project_on_a_hub(tmp_path)
    init = brat_json(hub, "init", "--hub")
    assert init["check"] == PYTEST and "main at" in init["check_from"]
    assert "lands pushed work once" in init["lands"]
    assert brat_json(hub, "config", "get", "hub.run_checks")["value"] is True
    assert brat_json(hub, "config", "get", "refinery.check")["value"] == PYTEST
    _quiet_hub(hub)
    other = clone(str(hub), tmp_path / "other", init=False)
    brat(other, "init")
    brat(other, "trust")
    cid = convoy(other, "Fixes")
    main = git(hub, "rev-parse", "main")
    wrong = _finished(other, cid, "Faster add", {"calc.py": "def add(a, b):\n    return a * b\n"})
    brat(hub, "refinery", "run", "--once")
    assert git(hub, "rev-parse", "main") == main            # the red test kept it out
    assert status_of(hub, wrong) == "queued"
    check = brat_json(hub, "task", "show", wrong)["check"]
    assert check["failing_tests"] == ["test_calc.py::test_adds"]
    right = _finished(other, cid, "Docs", {"NOTES.md": "add adds\n"})
    brat(hub, "refinery", "run", "--once")
    assert status_of(hub, right) == "merged"
    assert run(["git", "cat-file", "-e", "main:NOTES.md"], hub, check=False).returncode == 0


def test_a_hub_without_a_check_lands_nothing_and_says_why_until_its_admin_chooses(tmp_path):
    hub = seeded_hub(tmp_path)
    init = brat_json(hub, "init", "--hub")
    assert init["check"] == "" and "lands nothing unchecked" in init["lands"]
    assert "hub.land_unchecked" in brat(hub, "init", "--hub").out
    _quiet_hub(hub)
    user = clone(str(hub), tmp_path / "user", init=False)
    brat(user, "init")
    cid = convoy(user, "Work")
    tid = _finished(user, cid, "Anything", {"a.txt": "a\n"})
    main = git(hub, "rev-parse", "main")
    code, msg = fail(hub, "refinery", "run", "--once")
    assert code == 7 and "lands nothing unchecked" in msg and "hub.land_unchecked" in msg
    assert git(hub, "rev-parse", "main") == main and status_of(hub, tid) == "needs-review"
    assert "lands nothing unchecked" in brat_json(hub, "refinery", "status")["held"]
    assert "LANDS NOTHING" in brat(hub, "refinery", "status").out
    assert any("lands nothing unchecked" in w for w in brat_json(hub, "status")["warnings"])
    brat(hub, "config", "set", "hub.land_unchecked", "true")    # the admin's choice
    brat(hub, "refinery", "run", "--once")
    assert status_of(hub, tid) == "merged"
    assert brat_json(hub, "refinery", "status")["held"] == ""


def test_a_clone_approved_before_hub_land_unchecked_existed_stays_approved(brepo):
    import json
    record = brepo / ".git" / "brat" / "trust.json"
    data = json.loads(record.read_text())
    data["values"]["hub"] = {"run_checks": False}      # as the version before this key wrote it
    from git_brat.approvals import approved_files, fingerprint
    data["fingerprint"] = fingerprint(data["values"], approved_files(data))
    record.write_text(json.dumps(data))
    assert brat_json(brepo, "config", "get", "refinery.check")["approved"] is True
    assert brat_json(brepo, "trust", "--show")["changes"] == []
