"""The demo engine: a scripted agent that fixes the demo project's bugs, and only those."""

from __future__ import annotations

import os
import subprocess

from bratkit import convoy, demo_project, task
from helpers import brat, brat_json, git


def test_the_demo_engine_fixes_the_bug_its_task_names_and_the_tests_pass(tmp_path):
    from git_brat.brat.demo import project
    repo = demo_project(tmp_path / "demo")
    assert subprocess.run(["python3", "-m", "unittest", "-q"], cwd=repo,
                          capture_output=True).returncode != 0
    c = convoy(repo)
    ids = [task(repo, c, f.title, "-b", f.body) for f in project.FIXES]
    brat(repo, "witness", "run", "--once", "--engine", "demo", "--max-sessions", "3")
    for tid in ids:
        assert brat_json(repo, "task", "show", tid)["status"] == "needs-review"
    # Merged together by hand, the three fixes make the suite pass.
    for tid in ids:
        git(repo, "merge", "-q", "--no-edit", f"brat/{tid}")
    assert subprocess.run(["python3", "-m", "unittest", "-q"], cwd=repo,
                          capture_output=True).returncode == 0


def test_elsewhere_the_demo_engine_says_it_is_scripted_and_blocks(brepo):
    c = convoy(brepo)
    t = task(brepo, c, "Refactor the parser")
    brat(brepo, "witness", "run", "--once", "--engine", "demo")
    shown = brat_json(brepo, "task", "show", t)
    assert shown["status"] == "blocked" and "scripted agent" in shown["reason"]
    info = brat_json(brepo, "engine", "show", "demo")
    assert "not an AI" in info["package"] and os.path.exists(info["argv"][1])
