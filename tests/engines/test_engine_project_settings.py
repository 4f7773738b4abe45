"""The real engines run a repository's own settings (claude's .claude/settings.json hooks,
gemini's .gemini/settings.json hooks) as code: pulled, they run nothing on `mayor ask`,
`witness run` or `engine list` until `git brat trust` approved them; approved, they take
effect. Driven offline against tests/fakemodel.py, like test_real_engines.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from enginekit import Sandbox
from helpers import git
from test_real_engines import witness_repo

PLAN = {"convoy": {"title": "Fix the parser", "body": "b"},
        "tasks": [{"key": "tabs", "title": "Handle tabs", "body": "b", "paths": [],
                   "priority": 1, "needs": []}]}
ANSWER = "```json\n" + json.dumps(PLAN) + "\n```\n"
# Where each engine's hook leaves its mark: in the engine's own state, writable in a sandbox.
SETTINGS = {"claude": (".claude/settings.json", ".claude"),
            "gemini": (".gemini/settings.json", ".gemini")}


def _pull_hooks(box: Sandbox, repo: Path) -> Path:
    """The repository's settings file for box's engine, with hooks that leave a mark, as a
    pull from a pusher brings it (a commit of someone else's); the mark's path."""
    path, state = SETTINGS[box.name]
    mark = box.home / state / "HOOK-RAN"
    mark.parent.mkdir(parents=True, exist_ok=True)
    hook = [{"hooks": [{"type": "command", "command": f"echo ran >> {mark}"}]}]
    (repo / path).parent.mkdir(parents=True, exist_ok=True)
    (repo / path).write_text(json.dumps({"hooks": {"SessionStart": hook}}))
    git(repo, "add", path)
    git(repo, "-c", "user.name=Mallory", "-c", "user.email=m@evil.example", "commit", "-qm",
        "share editor settings")
    return mark


def _env(box: Sandbox) -> dict[str, str]:
    # The engine trusts the workspace only when brat says so (gemini's preset trust_env).
    env = {k: v for k, v in box.env.items() if not k.startswith("GIT_")}
    env.pop("GEMINI_CLI_TRUST_WORKSPACE", None)
    return env


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SETTINGS))
def test_a_pulled_engine_hook_runs_on_mayor_ask_only_once_approved(name, sandbox_for, tmp_path):
    box = sandbox_for(name)
    box.env = _env(box)
    repo, _tid, brat, env = witness_repo(box, tmp_path, "a task", mayor__engine=name,
                                         mayor__timeout="120")
    mark = _pull_hooks(box, repo)
    refused = box.run(["git", "brat", "mayor", "ask", "Plan it", "--yes"], repo, env=env,
                      timeout=150, reply=ANSWER)
    assert refused.rc == 7, refused.show()
    assert SETTINGS[name][0] in refused.out and not refused.model_requests()
    listing = brat("engine", "list")
    assert f"{SETTINGS[name][0]} (new)" in listing.err
    assert not mark.exists()

    brat("trust")
    asked = box.run(["git", "brat", "mayor", "ask", "Plan it", "--yes", "--json"], repo,
                    env=env, timeout=150, reply=ANSWER)
    # Approved, the engine runs (the fake model answers gemini with a plain "OK": no plan).
    assert asked.rc != 7 and asked.model_requests(), asked.show()
    assert mark.exists(), asked.show()


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SETTINGS))
def test_a_pulled_engine_hook_runs_in_a_witness_session_only_once_approved(
        name, sandbox_for, tmp_path):
    from test_real_engines import task_text
    box = sandbox_for(name)
    box.env = _env(box)
    repo, tid, brat, env = witness_repo(box, tmp_path, task_text(name, f"hello from {name}"),
                                        witness__max_retries="0")
    mark = _pull_hooks(box, repo)
    witness = ["git", "brat", "witness", "run", "--once", "--engine", name, "--timeout", "150"]
    refused = box.run(witness, repo, env=env, timeout=200)
    assert refused.rc == 7, refused.show()
    assert not refused.model_requests() and not mark.exists()

    brat("trust")
    ran = box.run(witness, repo, env=env, timeout=200)
    assert ran.rc == 0, ran.show()
    assert mark.exists(), ran.show()
    assert json.loads(brat("task", "show", tid, "--json").out)["status"] == "needs-review"
