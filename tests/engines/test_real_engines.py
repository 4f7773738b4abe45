"""The seven real coding-agent CLIs, driven offline against the fake model server.

Direct tests build each engine's argv from its preset (`engines.invocation`) exactly as the
witness does, run it in a linked work tree under .git/brat/worktrees/ (where the witness puts
them) next to tests/fakemodel.py (in a
loopback-only network namespace where `unshare -n` works), and check that it edited the file
and committed it, that its output reads as the preset says (`engines.read_result`), and, for
the engines that resume, that a second run with the `resume` template carries the first run's
conversation to the model. The witness tests run `git brat witness run --once` end to end.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import msgspec
import pytest

from conftest import ENGINES, Sandbox
from helpers import git, make_repo
from git_brat.brat import engines

RESUMES = ("claude", "codex", "opencode", "gemini", "copilot", "aider")


def task_text(name: str, line: str) -> str:
    return (f"Greet the world\n\nWrite the greeting file.\n\nFAKE-EDIT: greeting.txt: {line}\n"
            f"FAKE-COMMIT: greeting from {name}\n\n"
            "When the file is written, commit it with git.")


def preset_for(box: Sandbox) -> engines.Preset:
    p = engines.resolve(box.name, None)
    return msgspec.structs.replace(p, model=box.model or p.model,
                                   extra_args=[*p.extra_args, *box.extra_args])


def drive(box: Sandbox, repo: Path, session_dir: Path, prompt: str, resume_id: str = "",
          session_uuid: str = ""):
    p = preset_for(box)
    session_dir.mkdir(parents=True, exist_ok=True)
    (session_dir / "prompt.txt").write_text(prompt)
    inv = engines.invocation(p, prompt, str(repo), str(session_dir), resume_id=resume_id,
                             session_uuid=session_uuid)
    assert inv.resumed == bool(resume_id)
    run = box.run(inv.argv, repo, env=inv.env, stdin=inv.stdin, timeout=120)
    run.prompt = prompt
    return p, run, engines.read_result(p, run.out)


def worktree(tmp_path: Path, name: str) -> Path:
    """A repository and a linked work tree where the witness makes them: .git/brat/worktrees/."""
    repo = make_repo(tmp_path / "repo")
    if name == "aider":
        # aider keeps its repo-map cache (.aider.tags.cache.v4/) in the work tree; a user's
        # repository ignores it (aider's own advice), the witness has to as well.
        (repo / ".git" / "info" / "exclude").write_text(".aider*\n")
    wt = repo / ".git" / "brat" / "worktrees" / "t1"
    git(repo, "worktree", "add", "-q", "-b", "brat/t1", str(wt))
    return wt


def conversation_text(req: dict) -> str:
    return json.dumps(req.get("body"))


@pytest.mark.parametrize("name", ENGINES)
def test_engine_edits_and_commits_offline(name, sandbox_for, tmp_path):
    box = sandbox_for(name)
    repo = worktree(tmp_path, name)
    base = git(repo, "rev-parse", "HEAD")
    sid = str(uuid.uuid4())
    p, run, res = drive(box, repo, tmp_path / "session", task_text(name, f"hello from {name}"),
                        session_uuid=sid)
    assert run.rc == 0, run.show()
    assert run.model_requests(), "the engine never reached the fake model\n" + run.show()
    assert (repo / "greeting.txt").read_text() == f"hello from {name}\n", run.show()
    assert git(repo, "rev-list", "--count", f"{base}..HEAD") != "0", run.show()
    assert git(repo, "show", "HEAD:greeting.txt") == f"hello from {name}", run.show()
    assert git(repo, "status", "--porcelain", "--untracked-files=all") == "", run.show()
    assert not res.is_error, run.show()
    if p.result == "json":
        assert res.json_found, run.show()
    print(f"\n{name}: argv={engines.shown_argv(run.argv, run.prompt)} result={res}")
    if p.new_session_args:
        assert res.session_id in ("", sid) and (res.session_id or not p.session_keys), \
            (res, run.show())
    if p.session_keys:
        assert res.session_id, (res, run.show())


@pytest.mark.parametrize("name", RESUMES)
def test_engine_resumes_its_conversation(name, sandbox_for, tmp_path):
    box = sandbox_for(name)
    repo = worktree(tmp_path, name)
    sid = str(uuid.uuid4())
    p, first, res = drive(box, repo, tmp_path / "s1", task_text(name, "first words"),
                          session_uuid=sid)
    assert first.rc == 0, first.show()
    conv = res.session_id or (sid if p.new_session_args else "")
    if name == "aider":
        # No conversation id: its chat history file is the conversation, and the resume
        # template reads it from the earlier session's directory, passed as {resume_id}.
        conv = str(tmp_path / "s1")
    assert conv, (res, first.show())
    p, second, res2 = drive(box, repo, tmp_path / "s2", task_text(name, "second words"),
                            resume_id=conv)
    assert second.rc == 0, second.show()
    seen = [r for r in second.model_requests() if "second words" in conversation_text(r)]
    assert seen, second.show()
    assert any("first words" in conversation_text(r) for r in seen), \
        "the resumed run did not carry the first conversation\n" + second.show()
    assert (repo / "greeting.txt").read_text() == "second words\n", second.show()
    if res2.session_id:
        assert res2.session_id == conv, (res2, conv)


@pytest.mark.parametrize("name", ENGINES)
def test_engine_reports_a_failing_model(name, sandbox_for, tmp_path):
    """A model that refuses every request: the run must not read as a success."""
    box = sandbox_for(name)
    repo = worktree(tmp_path, name)
    p, run, res = drive(box, repo, tmp_path / "session",
                        "Greet the world\n\nFAKE-FAIL\nFAKE-EDIT: greeting.txt: never\n",
                        session_uuid=str(uuid.uuid4()))
    print(f"\n{name}: exit {run.rc} result={res}")
    assert any(r.get("kind") == "refused" for r in run.requests), run.show()
    if name == "aider":
        # Known: aider --message prints the model's error and exits 0 all the same, so a
        # refused run reads as a success that made no commit.
        assert run.rc == 0 and "FAKE-FAIL" in run.out, run.show()
    else:
        assert run.rc != 0 or res.is_error, run.show()
    assert not (repo / "greeting.txt").exists()


# -- the witness, end to end -----------------------------------------------------------------

def _witness_available() -> str | None:
    from helpers import run
    proc = run(["git", "brat", "witness", "--help"], ".", check=False, timeout=60)
    return None if proc.returncode == 0 else "witness not available"


@pytest.mark.parametrize("name", ENGINES)
def test_witness_runs_the_engine_to_review(name, sandbox_for, tmp_path):
    """`git brat witness run --once --engine NAME`: the engine's commit on brat/<task>, the task
    waiting for review, the session recorded with the engine's own conversation id."""
    why = _witness_available()
    if why:
        pytest.skip(why)
    box = sandbox_for(name)
    repo = make_repo(tmp_path / "repo")
    (repo / ".git" / "info" / "exclude").write_text(".aider*\n")   # see the direct test
    env = {k: v for k, v in box.env.items() if not k.startswith("GIT_")}  # the witness's own

    def brat(*args, check=True):
        from helpers import run
        return run(["git", "brat", *args], repo, env=env, check=check, timeout=60)

    brat("init")
    p = preset_for(box)
    if box.model:
        brat("config", "set", f"engines.{name}.model", box.model)
    if box.extra_args:
        brat("config", "set", f"engines.{name}.extra_args", json.dumps(box.extra_args))
    brat("config", "set", "witness.max_retries", "0")
    convoy = brat("convoy", "create", "Greetings").out.strip()
    tid = brat("task", "create", "--convoy", convoy, "Greet the world", "-b",
               f"Write the greeting file.\n\nFAKE-EDIT: greeting.txt: hello from {name}\n"
               f"FAKE-COMMIT: greeting from {name}\n").out.strip()
    run = box.run(["git", "brat", "witness", "run", "--once", "--engine", name,
                   "--timeout", "120"], repo, env=env, timeout=150)
    assert run.rc == 0, run.show()
    assert run.model_requests(), run.show()
    branch = f"brat/{tid}"
    assert git(repo, "show", f"{branch}:greeting.txt") == f"hello from {name}", run.show()
    subjects = git(repo, "log", "--format=%s|%an", f"main..{branch}").splitlines()
    assert f"greeting from {name}|{name} agent (git-brat)" in subjects or \
        (name == "aider" and any(s.endswith(f"|{name} agent (git-brat)") for s in subjects)), \
        (subjects, run.show())
    files = git(repo, "diff", "--name-only", f"main...{branch}").splitlines()
    assert files == ["greeting.txt"], files
    assert json.loads(brat("task", "show", tid, "--json").out)["status"] == "needs-review"
    [s] = [s for s in json.loads(brat("session", "list", "--all", "--json").out)
           if s["task"] == tid]
    assert s["engine"] == name
    d = json.loads(brat("session", "show", s["id"], "--json").out)
    assert d["exit_code"] == 0, d
    if p.session_keys or p.new_session_args:
        assert d["engine_session"], d
