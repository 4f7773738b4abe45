"""Contracts every git-brat command keeps: bare --json, git status untouched, works from anywhere."""

from __future__ import annotations

import json

from bratkit import convoy, task
from helpers import brat, brat_json, git, run, status


def test_every_command_prints_bare_json_and_leaves_git_status_alone(brepo):
    (brepo / "untracked.txt").write_text("the user's own file\n")
    (brepo / "README").write_text("the user's unstaged edit\n")
    before = status(brepo)
    cid = convoy(brepo, "Contracts")
    a = task(brepo, cid, "a")
    b = task(brepo, cid, "b")
    commands = [
        ["init"], ["config", "get"], ["config", "get", "witness.engine"],
        ["convoy", "create", "Another"], ["convoy", "list"], ["convoy", "show", cid],
        ["task", "create", "--convoy", cid, "c", "--needs", a], ["task", "list"],
        ["task", "list", "--convoy", cid, "--status", "queued"], ["task", "show", a],
        ["task", "ready"], ["task", "update", a, "--status", "running"],
        ["task", "update", a, "--title", "A"], ["task", "comment", a, "-m", "note"],
        ["task", "dep", "add", b, "--on", a], ["task", "dep", "list", b],
        ["task", "dep", "remove", b, "--on", a],
        ["task", "update", b, "--status", "merged", "--force", "-m", "by hand"],
        ["workflow", "list"], ["workflow", "show", "feature"],
        ["workflow", "run", "feature", "--var", "feature=X", "--dry-run"],
        ["workflow", "run", "fix-bug", "--var", "bug=Y"],
        ["status"], ["status", "--convoy", cid], ["inbox"],
    ]
    for cmd in commands:
        proc = brat(brepo, *cmd, "--json")
        json.loads(proc.out)    # bare JSON, nothing else on stdout
        assert proc.err == "", (cmd, proc.err)
        assert status(brepo) == before, f"`git brat {' '.join(cmd)}` changed git status"


def test_commands_work_from_a_subdirectory_a_linked_worktree_and_with_git_dir(brepo, tmp_path):
    sub = brepo / "src" / "pkg"
    sub.mkdir(parents=True)
    cid = brat_json(sub, "workflow", "run", "feature", "--var", "feature=From a subdir")["convoy"]
    git(brepo, "worktree", "add", "-q", str(tmp_path / "wt"), "-b", "side")
    wt = tmp_path / "wt"
    [c] = brat_json(wt, "convoy", "list")
    assert c["id"] == cid
    ready = brat_json(wt, "task", "ready")[0]["id"]
    brat(wt, "task", "update", ready, "--status", "running")
    assert brat_json(brepo, "task", "show", ready)["status"] == "running"
    assert brat_json(wt, "status")["convoys"][0]["counts"]["running"] == 1
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    env = {"GIT_DIR": str(brepo / ".git")}
    out = run(["git", "brat", "task", "show", ready, "--json"], outside, env=env).out
    assert json.loads(out)["status"] == "running"
    assert status(wt) == ""


def test_help_lists_the_command_groups(repo):
    out = brat(repo, "--help").out
    for name in ("init", "config", "convoy", "task", "workflow", "status"):
        assert f"  {name}" in out
    out = brat(repo, "task", "--help").out
    for name in ("create", "list", "show", "update", "comment", "ready", "dep"):
        assert f"  {name}" in out
    assert "Usage: git-brat task update" in brat(repo, "task", "update", "--help").out
