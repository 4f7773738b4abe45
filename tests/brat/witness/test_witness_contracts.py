"""The witness, session and engine commands keep the contracts: bare JSON, git status, anywhere."""

from __future__ import annotations

import json

import pytest

from bratkit import fail
from helpers import git, status, wal_tip


def test_the_new_commands_print_bare_json_and_leave_git_status_alone(bench, repo):
    (repo / "untracked.txt").write_text("the user's own file\n")
    (repo / "README").write_text("the user's unstaged edit\n")
    before = status(repo)
    c = bench.convoy()
    t = bench.task(c, "Work", "write a.txt x", "commit a")
    bench.json("witness", "run", "--once")
    [s] = bench.sessions(t)
    commands = [["engine", "list"], ["engine", "show", "claude"], ["engine", "show", "fake"],
                ["witness", "status"], ["session", "list"], ["session", "list", "--all"],
                ["session", "show", s["id"]], ["task", "reply", t, "-m", "again"],
                ["task", "block", t, "-m", "waiting"], ["witness", "run", "--once"]]
    for cmd in commands:
        proc = bench.brat(*cmd, "--json", check=False)
        json.loads(proc.out)
        assert proc.err == "", (cmd, proc.err)
        assert status(repo) == before, cmd


def test_the_witness_runs_from_a_subdirectory_and_from_a_linked_worktree(bench, repo, tmp_path):
    sub = repo / "src" / "deep"
    sub.mkdir(parents=True)
    c = bench.convoy()
    t1 = bench.task(c, "From a subdir", "write a.txt x", "commit a")
    bench.brat("witness", "run", "--once", "--engine", "fake", cwd=sub)
    assert bench.show(t1)["status"] == "needs-review"
    git(repo, "worktree", "add", "-q", str(tmp_path / "wt"), "-b", "side")
    (tmp_path / "wt" / ".brat").mkdir()
    (tmp_path / "wt" / ".brat" / "config.toml").write_text((repo / ".brat" / "config.toml").read_text())
    t2 = bench.task(c, "From a worktree", "write b.txt y", "commit b")
    bench.brat("witness", "run", "--once", cwd=tmp_path / "wt")
    assert bench.show(t2)["status"] == "needs-review"
    assert git(repo, "show", f"brat/{t2}:b.txt") == "y"
    assert git(tmp_path / "wt", "rev-parse", "--abbrev-ref", "HEAD") == "side"


@pytest.mark.parametrize("args, code", [
    (["witness", "run", "--once", "--engine", "nosuch"], 3),
    (["witness", "run", "--max-sessions", "0"], 2),
    (["witness", "run", "--once", "--convoy", "ffffffff"], 3),
    (["session", "show", "ffffffff"], 3),
    (["engine", "show", "nosuch"], 3),
    (["task", "reply", "ffffffff", "-m", "x"], 3),
    (["witness", "stop"], 3),
])
def test_bad_input_is_one_line_and_writes_nothing(bench, args, code):
    bench.task(bench.convoy(), "Untouched", "write a.txt x", "commit a")
    tip = wal_tip(bench.repo)
    got, _msg = fail(bench.repo, *args)
    assert got == code
    assert wal_tip(bench.repo) == tip
    assert bench.runs() == []


def test_a_shell_engine_without_a_command_is_refused_before_anything_runs(bench):
    bench.task(bench.convoy(), "T")
    tip = wal_tip(bench.repo)
    code, msg = fail(bench.repo, "witness", "run", "--once", "--engine", "shell")
    assert code == 2 and "engines.shell.command" in msg
    assert wal_tip(bench.repo) == tip


def test_an_engine_that_is_not_installed_is_refused_at_start_and_charges_no_attempt(bench):
    bench.brat("config", "set", "engines.ghost.command", '["no-such-agent-xyz", "{prompt}"]')
    c = bench.convoy()
    tasks = [bench.task(c, f"Fix {n}", "write a.txt x", "commit a") for n in range(2)]
    tip = wal_tip(bench.repo)
    code, msg = fail(bench.repo, "witness", "run", "--once", "--engine", "ghost")
    assert code == 3
    assert "'no-such-agent-xyz' is not on PATH" in msg and "--engine" in msg
    assert wal_tip(bench.repo) == tip and bench.runs() == []
    for t in tasks:
        shown = bench.show(t)
        assert shown["status"] == "queued" and not bench.sessions(t)
    bench.brat("config", "set", "witness.engine", "ghost")
    code, msg = fail(bench.repo, "witness", "run", "--once", "--json")
    assert code == 3 and "not on PATH" in msg and "\n" not in msg.strip()
    assert wal_tip(bench.repo) == tip
