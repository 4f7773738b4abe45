"""The witness runs agents on ready tasks: work trees, outcomes, retries, timeouts, fencing."""

from __future__ import annotations

import json
import os
import time

import pytest

from helpers import git, status
from witnesskit import alive


def test_an_agent_commits_and_says_done_then_the_task_waits_for_review(bench, repo):
    head_before, status_before = git(repo, "rev-parse", "HEAD"), status(repo)
    c = bench.convoy("Greetings")
    t = bench.task(c, "Write hello", "write hello.txt hi", "commit add hello", "done wrote it")
    proc = bench.brat("witness", "run", "--once", "--json")
    summary = json.loads(proc.out)
    assert summary["started"] == 1 and summary["failed"] == 0
    assert summary["ended"][0]["task_status"] == "needs-review"
    task = bench.show(t)
    assert task["status"] == "needs-review"
    assert git(repo, "show", f"brat/{t}:hello.txt") == "hi"
    assert "done: wrote it" in [c["body"] for c in task["comments"]]
    # The agent ran in its own work tree on the task's branch, said done from a subdirectory.
    run = bench.runs()[0]
    assert run["cwd"] == str(repo / ".git" / "brat" / "worktrees" / t)
    assert "Write hello" in run["prompt"] and f"brat/{t}" in run["prompt"]
    assert run["author"] == "fake agent (git-brat)"
    author = git(repo, "log", "-1", "--format=%an|%cn", f"brat/{t}")
    assert author == "fake agent (git-brat)|Test User"
    [s] = bench.sessions(t)
    d = bench.session(s["id"])
    assert d["status"] == "done" and d["exit_code"] == 0 and d["commits"] == 1
    assert d["argv"][-1] == "<prompt>" and d["branch"] == f"brat/{t}"
    assert d["pid"] > 0 and d["host"] and d["ended_at"]
    assert os.path.exists(d["log"])
    # Waiting for the human's review (with a merge request recorded for the refinery), and
    # the user's checkout exactly as it was.
    st = bench.json("status")
    assert [w["task"] for w in st["review"]] == [t] and st["merge_queue"] == []
    bench.brat("task", "approve", t)
    queue = bench.json("status")["merge_queue"]
    assert [m["task"] for m in queue] == [t] and queue[0]["merge"]
    assert git(repo, "rev-parse", "HEAD") == head_before and status(repo) == status_before
    assert not os.path.exists(repo / ".git" / "brat" / "worktrees" / t)   # committed, removed


def test_work_the_agent_left_uncommitted_is_committed_by_the_witness(bench, repo):
    t = bench.task(bench.convoy(), "Leave it dirty", "write notes/a.txt draft")
    bench.brat("witness", "run", "--once")
    assert bench.show(t)["status"] == "needs-review"
    assert git(repo, "show", f"brat/{t}:notes/a.txt") == "draft"
    msg = git(repo, "log", "-1", "--format=%s", f"brat/{t}")
    [s] = bench.sessions(t)
    assert msg.startswith("brat: uncommitted work of session " + s["id"][:7])
    assert bench.session(s["id"])["salvaged"]


def test_an_engines_scratch_files_are_never_committed_for_it(bench, repo):
    bench.config(engines__fake__scratch='[".agent-cache*"]')
    t = bench.task(bench.convoy(), "Caches", "write .agent-cache.v4/tags x", "write real.txt y")
    bench.brat("witness", "run", "--once")
    files = git(repo, "ls-tree", "-r", "--name-only", f"brat/{t}").split()
    assert "real.txt" in files and not any(f.startswith(".agent-cache") for f in files)


def test_a_hung_agent_is_killed_at_the_timeout_with_its_whole_process_group(bench, tmp_path):
    # Watched by the pids the fake agent records: in a sandbox those are its own pid
    # namespace's (tests/brat/sandbox/ proves a sandboxed session's processes end with it).
    bench.config(witness__max_retries="0", witness__sandbox="none")
    t = bench.task(bench.convoy(), "Hang", "hang")
    started = time.monotonic()
    proc = bench.brat("witness", "run", "--once", "--timeout", "2", "--json", check=False)
    assert proc.returncode == 1, proc.err
    assert time.monotonic() - started < 30
    pids = [int(p) for p in (tmp_path / "record.jsonl.pids").read_text().split()]
    assert len(pids) == 2
    for pid in pids:   # the agent and the child it started
        bench.wait_for(lambda pid=pid: not alive(pid), 10)
    [s] = bench.sessions(t)
    assert s["status"] == "timed-out" and "timed out after 2s" in s["reason"]
    task = bench.show(t)
    assert task["status"] == "failed"


def test_an_agent_that_fails_is_retried_with_the_failure_in_its_prompt(bench, repo):
    t = bench.task(bench.convoy(), "Flaky", "fail-first", "write f.txt ok", "commit f")
    proc = bench.brat("witness", "run", "--once", "--json")
    summary = json.loads(proc.out)
    assert [e["status"] for e in summary["ended"]] == ["failed", "done"]
    assert summary["failed"] == 0
    assert bench.show(t)["status"] == "needs-review"
    first, second = bench.runs()
    assert "previous attempt failed" not in first["prompt"]
    assert "Attempt 2: the previous attempt failed" in second["prompt"]
    assert "the engine exited 3" in second["prompt"]
    assert "failing on purpose the first time" in second["prompt"]
    assert git(repo, "show", f"brat/{t}:f.txt") == "ok"


def test_retries_are_capped_then_the_task_fails_with_the_reason(bench):
    bench.config(witness__max_retries="1")
    t = bench.task(bench.convoy(), "Always fails", "exit 4")
    proc = bench.brat("witness", "run", "--once", check=False)
    assert proc.returncode == 1
    task = bench.show(t)
    assert task["status"] == "failed"
    assert "the engine exited 4 (after 2 attempt(s))" in task["reason"]
    assert len(bench.runs()) == 2


def test_backoff_leaves_a_retry_for_a_later_run(bench):
    bench.config(witness__backoff="600", witness__backoff_max="600")
    t = bench.task(bench.convoy(), "Fails once", "fail-first", "write x ok", "commit x")
    bench.brat("witness", "run", "--once", check=False)
    task = bench.show(t)
    assert task["status"] == "queued" and "retry in 600s" in task["reason"]
    assert len(bench.runs()) == 1


def test_exiting_without_commit_or_done_is_a_failed_attempt(bench):
    bench.config(witness__max_retries="0")
    t = bench.task(bench.convoy(), "Does nothing")
    assert bench.brat("witness", "run", "--once", check=False).returncode == 1
    assert "without a commit" in bench.show(t)["reason"]


@pytest.mark.parametrize("allow, expected", [("true", "needs-review"), ("false", "failed")])
def test_done_without_commits_follows_allow_empty_done(bench, allow, expected):
    bench.config(witness__allow_empty_done=allow)
    t = bench.task(bench.convoy(), "Nothing to change", "done nothing needed")
    bench.brat("witness", "run", "--once", check=False)
    assert bench.show(t)["status"] == expected


def test_hostile_titles_reach_the_agent_as_one_inert_argument(bench, tmp_path):
    canary = tmp_path / "pwned"
    title = f'$(touch {canary}) `touch {canary}`; touch {canary} "\' && echo hi'
    t = bench.task(bench.convoy(), title, "write a.txt x", "commit a",
                   body=f"; touch {canary} $(touch {canary})")
    bench.brat("witness", "run", "--once")
    assert not canary.exists()
    run = bench.runs()[0]
    assert title in run["prompt"] and run["argv"][-1] == run["prompt"]
    assert bench.show(t)["status"] == "needs-review"


def test_an_agent_can_block_its_task_with_a_reason(bench):
    t = bench.task(bench.convoy(), "Needs a key", "block need the API key")
    bench.brat("witness", "run", "--once")
    task = bench.show(t)
    assert task["status"] == "blocked" and task["reason"] == "need the API key"
    [s] = bench.sessions(t)
    assert s["status"] == "blocked"


def test_a_failing_setup_fails_the_session_and_the_engine_never_starts(bench):
    bench.config(witness__setup="echo installing deps; echo broken lockfile >&2; exit 7",
                 witness__max_retries="0")
    t = bench.task(bench.convoy(), "Setup fails", "write a.txt x", "commit a")
    assert bench.brat("witness", "run", "--once", check=False).returncode == 1
    assert bench.runs() == []
    [s] = bench.sessions(t)
    d = bench.session(s["id"])
    assert d["status"] == "failed" and "exited 7" in d["reason"]
    assert "broken lockfile" in d["output_tail"] and "installing deps" in d["output_tail"]
    assert "broken lockfile" in bench.show(t)["reason"] or "exited 7" in bench.show(t)["reason"]


def test_setup_output_goes_to_the_session_log_before_the_engine(bench):
    bench.config(witness__setup="echo SETUP-RAN > setup.marker; echo setting up")
    t = bench.task(bench.convoy(), "With setup", "write a.txt x", "commit a")
    bench.brat("witness", "run", "--once")
    [s] = bench.sessions(t)
    log = bench.brat("session", "log", s["id"]).out
    assert log.index("setting up") < log.index("[brat] engine:")


def test_the_prompt_carries_the_convoy_and_the_repositorys_agent_instructions(bench, repo):
    (repo / "AGENTS.md").write_text("Always run make lint.\n")
    git(repo, "add", "AGENTS.md")
    git(repo, "commit", "-qm", "instructions")
    c = bench.brat("convoy", "create", "Big refactor", "-b", "Split the parser module").out.strip()
    t = bench.task(c, "Step one", "write a x", "commit a")
    bench.brat("task", "comment", t, "-m", "Mind the Windows line endings")
    bench.brat("witness", "run", "--once")
    p = bench.runs()[0]["prompt"]
    base = git(repo, "rev-parse", "main")[:12]
    for needle in ("Big refactor", "Split the parser module", "Always run make lint.",
                   "Mind the Windows line endings", f"brat/{t}", base,
                   "git brat task done", "git brat task block", "git brat task comment"):
        assert needle in p


def test_the_users_environment_and_the_engines_env_reach_the_agent(bench):
    bench.config(engines__fake__env='{FAKE_PRESET_ENV = "from-config"}')
    bench.task(bench.convoy(), "Env", "write a x", "commit a")
    bench.brat("witness", "run", "--once", env={"FAKE_API_KEY": "sk-users-own"})
    run = bench.runs()[0]
    assert run["api_key"] == "sk-users-own" and run["preset_env"] == "from-config"


def test_a_preset_overridden_in_the_config(bench):
    bench.config(engines__claude__model="opus", engines__claude__timeout="7",
                 engines__claude__extra_args='["--max-turns", "3"]',
                 engines__claude__env='{ANTHROPIC_BASE_URL = "http://127.0.0.1:9"}')
    info = bench.json("engine", "show", "claude")
    argv = info["argv"]
    assert argv[0] == "claude" and argv[argv.index("--model") + 1] == "opus"
    assert argv[-2:] == ["--max-turns", "3"] and info["timeout"] == 7
    assert info["env"]["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9"
    assert info["env"]["DISABLE_AUTOUPDATER"] == "1"      # the preset's own env stays
    names = [e["name"] for e in bench.json("engine", "list")]
    assert names[:7] == ["claude", "aider", "codex", "opencode", "gemini", "cn", "copilot"]
    assert "fake" in names and "shell" in names


def test_an_engines_version_is_asked_once_per_installed_file(bench, tmp_path):
    """`engine show` runs `--version` of a binary once and remembers it by the file itself: a
    reinstall (another file) is asked again."""
    bindir, asked = tmp_path / "bin", tmp_path / "asked"
    bindir.mkdir()
    fake = bindir / "claude"

    def install(version: str) -> None:
        fake.write_text(f"#!/bin/sh\necho x >> {asked}\necho '{version} (Claude Code)'\n")
        fake.chmod(0o755)

    install("9.9.9")
    env = {"PATH": f"{bindir}{os.pathsep}{bench.env['PATH']}", "XDG_CACHE_HOME": str(tmp_path / "c")}
    for _ in range(2):
        assert bench.json("engine", "show", "claude", env=env)["version"] == "9.9.9 (Claude Code)"
    assert asked.read_text().count("x") == 1
    install("9.9.10")
    assert bench.json("engine", "show", "claude", env=env)["version"] == "9.9.10 (Claude Code)"
    assert asked.read_text().count("x") == 2
    assert [p.name for p in (tmp_path / "c" / "git-brat").iterdir()] == ["engine-versions.json"]


def test_an_engines_own_timeout_applies(bench, tmp_path):
    bench.config(engines__fake__timeout="1", witness__max_retries="0")
    t = bench.task(bench.convoy(), "Hang", "hang")
    bench.brat("witness", "run", "--once", check=False)
    assert "timed out after 1s" in bench.show(t)["reason"]


def test_an_engine_json_error_is_a_failed_attempt(bench):
    bench.config(witness__engine="claude", witness__max_retries="0")
    t = bench.task(bench.convoy(), "Overloaded", "error-json")
    assert bench.brat("witness", "run", "--once", check=False).returncode == 1
    assert "the engine reported an error: model overloaded" in bench.show(t)["reason"]


def test_agent_commands_outside_a_session_say_what_to_do(bench):
    from bratkit import fail
    t = bench.task(bench.convoy(), "T")
    code, msg = fail(bench.repo, "task", "done", t, "-m", "x")
    assert code == 2 and "task update" in msg
    code, msg = fail(bench.repo, "task", "show")
    assert code == 2 and "not a session's work tree" in msg


def test_in_a_terminal_the_witness_shows_each_live_session_and_its_last_line(bench, repo):
    import pexpect
    t = bench.task(bench.convoy(), "Slow", "sleep 0.1", "write a.txt x", "commit a", "sleep 3")
    child = pexpect.spawn("git", ["brat", "witness", "run", "--once"], cwd=str(repo),
                          env={**os.environ, **bench.env}, timeout=60, encoding="utf-8",
                          dimensions=(24, 100))
    try:
        child.expect(rf"{t[:7]}  fake\s+engine\s+ 0:0\d  ")
        child.expect("1 session\\(s\\) started, 1 ended")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
    # In a pipe there is none of it: just the summary.
    out = bench.brat("witness", "run", "--once").err
    assert "\x1b[" not in out


def test_a_human_requeue_of_a_failed_task_gives_it_fresh_attempts(bench):
    bench.config(witness__max_retries="0")
    t = bench.task(bench.convoy(), "Fails once", "fail-first", "write a.txt x", "commit a")
    bench.brat("witness", "run", "--once", check=False)
    assert bench.show(t)["status"] == "failed"
    bench.brat("task", "update", t, "--status", "queued", "-m", "try again")
    bench.brat("witness", "run", "--once")
    assert bench.show(t)["status"] == "needs-review"
    assert "previous attempt failed" not in bench.runs()[-1]["prompt"]


def test_a_task_dropped_by_hand_stops_its_session_at_once(bench, tmp_path):
    # Watched by the pids the fake agent records: in a sandbox those are its own pid
    # namespace's (tests/brat/sandbox/ proves a sandboxed session's processes end with it).
    bench.config(witness__sandbox="none")
    t = bench.task(bench.convoy(), "Drop me", "write a.txt x", "hang")
    w = bench.start_witness("--once")
    try:
        bench.wait_for(lambda: (tmp_path / "record.jsonl.pids").exists(), 60)
        started = time.monotonic()
        bench.brat("task", "update", t, "--status", "dropped", "-m", "not needed")
        assert w.wait(timeout=30) == 0
        assert time.monotonic() - started < 8      # not the done grace: stopped right away
    finally:
        from witnesskit import kill_group
        kill_group(w)
    [s] = bench.sessions(t)
    assert s["status"] == "ended" and "moved to dropped" in s["reason"]
    assert bench.show(t)["status"] == "dropped"
    assert git(bench.repo, "show", f"brat/{t}:a.txt") == "x"     # its work is kept


def test_engine_output_is_read_whatever_shape_it_takes():
    from git_brat.brat import engines
    pretty = 'a warning first\n{\n  "session_id": "s1",\n  "items": [\n    {"x": 1}\n  ],\n' \
             '  "response": "all done"\n}\n'
    objs = engines.json_objects(pretty)
    assert objs == [{"session_id": "s1", "items": [{"x": 1}], "response": "all done"}]
    copilot = engines.PRESETS["copilot"]
    out = ('{"type": "user.message", "data": {"content": "the prompt"}}\n'
           '{"type": "session.error", "data": {"message": "model said 400"}}\n')
    r = engines.read_result(copilot, out)
    assert r.is_error and r.message == "model said 400"
    claude = engines.PRESETS["claude"]
    r = engines.read_result(claude, '{"type": "result", "is_error": false, "result": "ok", '
                                    '"session_id": "u-1"}\n')
    assert not r.is_error and r.session_id == "u-1" and r.message == "ok"
