"""The seven real coding-agent CLIs, driven offline against the fake model server.

Direct tests build each engine's argv from its preset (`engines.invocation`) exactly as the
witness does, run it in a linked work tree under .git/brat/worktrees/ (where the witness puts
them) next to tests/fakemodel.py, in a loopback-only network namespace, and check that it
edited the file and committed it, that its output reads as the preset says
(`engines.read_result`), and, for the engines that resume, that a second run with the `resume`
template carries the first run's conversation to the model. The witness tests run
`git brat witness run --once` end to end: to review, to a timeout, through a crash.

Each runs twice: unconfined, and in the bubblewrap sandbox a witness session gets
(witness.sandbox = "bwrap"; skipped with the reason where bwrap is missing).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import uuid
from pathlib import Path

import msgspec
import pytest

from enginekit import ENGINES, Sandbox
from helpers import git, make_repo
from git_brat.brat import engines

RESUMES = ("claude", "codex", "opencode", "gemini", "copilot", "aider")
TID = "7" * 32          # the task a direct run's work tree is named for, as the witness names it
SANDBOXES = [pytest.param("none", id="unconfined"),
             pytest.param("bwrap", id="bwrap", marks=pytest.mark.skipif(
                 shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed"))]


def task_text(name: str, line: str) -> str:
    return (f"Greet the world\n\nWrite the greeting file.\n\nFAKE-EDIT: greeting.txt: {line}\n"
            f"FAKE-COMMIT: greeting from {name}\n\n"
            "When the file is written, commit it with git.")


def preset_for(box: Sandbox) -> engines.Preset:
    p = engines.resolve(box.name, None)
    return msgspec.structs.replace(p, model=box.model or p.model,
                                   extra_args=[*p.extra_args, *box.extra_args])


def drive(box: Sandbox, repo: Path, session_dir: Path, prompt: str, resume_id: str = "",
          session_uuid: str = "", sandbox: str = "none"):
    p = preset_for(box)
    (session_dir / "engine").mkdir(parents=True, exist_ok=True)
    (session_dir / "prompt.txt").write_text(prompt)
    inv = engines.invocation(p, prompt, str(repo), str(session_dir), resume_id=resume_id,
                             session_uuid=session_uuid)
    assert inv.resumed == bool(resume_id)
    argv, back = inv.argv, None
    if sandbox == "bwrap":
        argv, back = confined(box, p, repo, session_dir, inv.argv)
    run = box.run(argv, repo, env=inv.env, stdin=inv.stdin, timeout=120)
    if back:
        back()
    run.prompt = prompt
    return p, run, engines.read_result(p, run.out)


def confined(box: Sandbox, p: engines.Preset, wt: Path, session_dir: Path, argv: list[str]):
    """argv in the sandbox a witness session gets, and what brings its branch back after."""
    from git_brat.brat.config import Config
    from git_brat.brat.engines import sandbox
    from git_brat.brat.witness import confine
    from git_brat.git.store import Store
    store = Store.discover(str(wt))
    sid, start = uuid.uuid4().hex, git(wt, "rev-parse", "HEAD")
    env = {**os.environ, **box.env}
    # The plan is made here but run in pair.py's loopback-only namespace, whose loopback holds
    # the fake model: its network, as a witness there finds it (no route out: auto is open).
    from git_brat.brat.config import Witness
    cfg = Config(witness=Witness(sandbox_network="open"))
    plan = confine.plan(store, sid, TID, str(wt), p, cfg, env, start)
    plan.writable.append(str(session_dir))   # the direct runs' session directories
    plan.reachable += [str(box.root), str(session_dir)]
    return sandbox.argv(plan, argv, sandbox.bwrap_path()), \
        lambda: confine.restore_branch(store, sid, TID, f"brat/{TID}", start)


def worktree(tmp_path: Path, name: str) -> Path:
    """A repository and a linked work tree where the witness makes them: .git/brat/worktrees/."""
    repo = make_repo(tmp_path / "repo")
    if name == "aider":
        # aider keeps its repo-map cache (.aider.tags.cache.v4/) in the work tree; a user's
        # repository ignores it (aider's own advice), the witness has to as well.
        (repo / ".git" / "info" / "exclude").write_text(".aider*\n")
    wt = repo / ".git" / "brat" / "worktrees" / TID
    git(repo, "worktree", "add", "-q", "-b", f"brat/{TID}", str(wt))
    return wt


def conversation_text(req: dict) -> str:
    return json.dumps(req.get("body"))


@pytest.mark.parametrize("sandbox", SANDBOXES)
@pytest.mark.parametrize("name", ENGINES)
def test_engine_edits_commits_and_resumes_offline(name, sandbox, sandbox_for, tmp_path):
    """The preset's argv edits the file and commits; its output reads as the preset says; and
    where it resumes, a second run with the resume template carries the first conversation."""
    box = sandbox_for(name)
    repo = worktree(tmp_path, name)
    base = git(repo, "rev-parse", "HEAD")
    sid = str(uuid.uuid4())
    # Session directories where the witness makes them: aider's resume id is one, and only a
    # directory of that shape is ever passed back to it.
    sessions = tmp_path / "brat" / "sessions"
    first, later = sessions / uuid.uuid4().hex, sessions / uuid.uuid4().hex
    p, run, res = drive(box, repo, first, task_text(name, f"hello from {name}"),
                        session_uuid=sid, sandbox=sandbox)
    assert run.rc == 0, run.show()
    assert run.model_requests(), "the engine never reached the fake model\n" + run.show()
    assert (repo / "greeting.txt").read_text() == f"hello from {name}\n", run.show()
    assert git(repo, "rev-list", "--count", f"{base}..HEAD") != "0", run.show()
    assert git(repo, "show", "HEAD:greeting.txt") == f"hello from {name}", run.show()
    assert git(repo, "status", "--porcelain", "--untracked-files=all") == "", run.show()
    assert not res.is_error, run.show()
    if p.result == "json":
        assert res.json_found, run.show()
    print(f"\n{name}: {run.seconds:.1f}s argv={engines.shown_argv(run.argv, run.prompt)} "
          f"result={res}")
    if p.new_session_args:
        assert res.session_id in ("", sid) and (res.session_id or not p.session_keys), \
            (res, run.show())
    if p.session_keys:
        assert res.session_id, (res, run.show())
    if name not in RESUMES:
        assert not p.resumes
        return
    conv = res.session_id or (sid if p.new_session_args else "")
    if name == "aider":
        # No conversation id: its chat history file is the conversation, and the resume
        # template reads it from the earlier session's directory, passed as {resume_id}.
        conv = str(first)
    assert conv, (res, run.show())
    p, second, res2 = drive(box, repo, later, task_text(name, "second words"),
                            resume_id=conv, sandbox=sandbox)
    assert second.rc == 0, second.show()
    seen = [r for r in second.model_requests() if "second words" in conversation_text(r)]
    assert seen, second.show()
    assert any(f"hello from {name}" in conversation_text(r) for r in seen), \
        "the resumed run did not carry the first conversation\n" + second.show()
    assert (repo / "greeting.txt").read_text() == "second words\n", second.show()
    if res2.session_id:
        assert res2.session_id == conv, (res2, conv)


@pytest.mark.parametrize("sandbox", SANDBOXES)
@pytest.mark.parametrize("name", ENGINES)
def test_engine_reports_a_failing_model(name, sandbox, sandbox_for, tmp_path):
    """A model that refuses every request: the run must not read as a success."""
    box = sandbox_for(name)
    repo = worktree(tmp_path, name)
    p, run, res = drive(box, repo, tmp_path / "session",
                        "Greet the world\n\nFAKE-FAIL\nFAKE-EDIT: greeting.txt: never\n",
                        session_uuid=str(uuid.uuid4()), sandbox=sandbox)
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


def witness_repo(box: Sandbox, tmp_path: Path, body: str, **config: str):
    """A repository set up for the witness with engine box.name, one task; (repo, task, brat)."""
    repo = make_repo(tmp_path / "repo")   # no exclude: the preset's scratch keeps aider's out
    env = {k: v for k, v in box.env.items() if not k.startswith("GIT_")}  # the witness's own

    def brat(*args, check=True):
        from helpers import run
        return run(["git", "brat", *args], repo, env=env, check=check, timeout=60)

    brat("init")
    if box.model:
        brat("config", "set", f"engines.{box.name}.model", box.model)
    if box.extra_args:
        brat("config", "set", f"engines.{box.name}.extra_args", json.dumps(box.extra_args))
    for key, value in config.items():
        brat("config", "set", key.replace("__", "."), value)
    convoy = brat("convoy", "create", "Greetings").out.strip()
    tid = brat("task", "create", "--convoy", convoy, "Greet the world", "-b", body).out.strip()
    return repo, tid, brat, env


def greeting_task(name: str, sandbox: str, sandbox_for, tmp_path: Path):
    """Engine `name`'s world and a repository whose one task has it write and commit a
    greeting: (box, (repo, task, brat, env))."""
    why = _witness_available()
    if why:
        pytest.skip(why)
    box = sandbox_for(name)
    return box, witness_repo(
        box, tmp_path, f"Write the greeting file.\n\nFAKE-EDIT: greeting.txt: hello from {name}\n"
        f"FAKE-COMMIT: greeting from {name}\n", witness__max_retries="0",
        witness__sandbox=sandbox)


@pytest.mark.parametrize("sandbox", SANDBOXES)
@pytest.mark.parametrize("name", ENGINES)
def test_witness_runs_the_engine_to_review(name, sandbox, sandbox_for, tmp_path):
    """`git brat witness run --once --engine NAME`: the engine's commit on brat/<task>, the task
    waiting for review, the session recorded with the engine's own conversation id."""
    box, (repo, tid, brat, env) = greeting_task(name, sandbox, sandbox_for, tmp_path)
    p = preset_for(box)
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
    assert s["engine"] == name and s["sandbox"] == sandbox
    d = json.loads(brat("session", "show", s["id"], "--json").out)
    assert d["exit_code"] == 0, d
    if p.session_keys or p.new_session_args:
        assert d["engine_session"], d


@pytest.mark.parametrize("sandbox", SANDBOXES)
@pytest.mark.parametrize("name", ENGINES)
def test_witness_stops_a_hung_engine_at_the_timeout(name, sandbox, sandbox_for, tmp_path):
    """The model never answers: the witness's timeout stops the real engine, every process of
    it (the autouse fixture checks that none is left), and records the session as timed out."""
    why = _witness_available()
    if why:
        pytest.skip(why)
    box = sandbox_for(name)
    repo, tid, brat, env = witness_repo(
        box, tmp_path, "FAKE-EDIT: greeting.txt: never\nFAKE-HANG\n",
        witness__max_retries="0", witness__sandbox=sandbox)
    run = box.run(["git", "brat", "witness", "run", "--once", "--engine", name,
                   "--timeout", "5", "--json"], repo, env=env, timeout=90)
    assert run.rc == 1, run.show()
    [s] = [s for s in json.loads(brat("session", "list", "--all", "--json").out)
           if s["task"] == tid]
    assert s["status"] == "timed-out", (s, run.show())
    assert json.loads(brat("task", "show", tid, "--json").out)["status"] == "failed"


CRASH = Path(__file__).resolve().parent / "crash.py"


@pytest.mark.parametrize("sandbox", SANDBOXES)
@pytest.mark.parametrize("name", [n for n in RESUMES if n != "aider"])   # no conversation id
def test_witness_recovers_a_crash_and_resumes_the_engines_conversation(name, sandbox,
                                                                      sandbox_for, tmp_path):
    """The witness dies (SIGKILL) while the engine waits on the model; the next witness stops
    the orphan, and its new session continues the same conversation with the preset's resume
    template, from the conversation id recorded for the crashed session."""
    why = _witness_available()
    if why:
        pytest.skip(why)
    box = sandbox_for(name)
    repo, tid, brat, env = witness_repo(
        box, tmp_path, f"FAKE-EDIT: greeting.txt: hello from {name}\n"
        f"FAKE-COMMIT: greeting from {name}\nFAKE-HANG\n",
        witness__max_retries="1", witness__backoff="0", witness__sandbox=sandbox)
    marker, out1, out2 = (tmp_path / f for f in ("hung", "witness-1", "witness-2"))
    witness = ["git-brat", "witness", "run", "--once", "--engine", name, "--timeout", "120",
               "--lease-ttl", "60"]
    run = box.run([sys.executable, str(CRASH), str(marker), str(out1), str(out2), "--",
                   *witness], repo, env=env, timeout=200, hang_marker=str(marker))
    shown = run.show() + "\n--- witness 1\n" + (out1.read_text() if out1.exists() else "") + \
        "\n--- witness 2\n" + (out2.read_text() if out2.exists() else "")
    assert run.rc == 0, shown
    sessions = [s for s in json.loads(brat("session", "list", "--all", "--json").out)
                if s["task"] == tid]
    details = [json.loads(brat("session", "show", s["id"], "--json").out) for s in sessions]
    crashed = [d for d in details if d["status"] == "crashed"]
    assert len(crashed) == 1, (details, shown)
    conv = crashed[0]["engine_session"]
    assert conv, (crashed, shown)
    later = [d for d in details if d["status"] != "crashed"]
    assert later and any(conv in " ".join(d["argv"]) for d in later), (details, shown)
    # The resumed session's first model request already holds the first session's tool result.
    resumed = [r for r in run.model_requests() if "interrupted" in conversation_text(r)]
    assert resumed and resumed[0]["tool_results"] >= 1, shown
    assert git(repo, "show", f"brat/{tid}:greeting.txt") == f"hello from {name}", shown
    assert json.loads(brat("task", "show", tid, "--json").out)["status"] == "needs-review"


def test_engine_list_finds_the_installed_engines_at_their_pinned_versions(tmp_path):
    """`git brat engine list` (the presets' binaries and version_args) on what
    scripts/install-engines put in place: each installed engine found, at its pinned version."""
    from enginekit import ENGINES_DIR, NETNS, NETNS_PORT, engine_missing, require_isolation
    require_isolation()
    installed = [n for n in ENGINES if not engine_missing(n)]
    if not installed:
        pytest.skip("no engine installed (run scripts/install-engines)")
    pins = {}
    for stamp in (ENGINES_DIR / "stamps").iterdir():
        name, _, version = stamp.name.partition("-")
        pins[name] = version
    root = tmp_path / "box"
    root.mkdir()
    box = Sandbox("list", root, NETNS_PORT if NETNS else 0,
                  env={"HOME": str(root), "XDG_CONFIG_HOME": str(root / ".config")})
    repo = make_repo(tmp_path / "repo")
    from helpers import brat
    brat(repo, "init")
    run = box.run(["git", "brat", "engine", "list", "--json"], repo, timeout=120)
    assert run.rc == 0, run.show()
    found = {e["name"]: e for e in json.loads(run.out)}
    for name in installed:
        assert found[name]["path"], (name, found[name])
        assert pins[name] in found[name]["version"], (name, pins[name], found[name])


def test_claude_as_the_mayor_plans_a_convoy_and_resumes_its_conversation(sandbox_for, tmp_path):
    """The real claude answers `mayor ask` (the fake model scripts its final text: a plan in a
    fenced block); the plan becomes a convoy, and the next ask resumes claude's conversation."""
    box = sandbox_for("claude")
    repo, _tid, brat, env = witness_repo(box, tmp_path, "a task made by hand",
                                         mayor__engine="claude", mayor__timeout="120")
    plan = {"convoy": {"title": "Fix the parser", "body": "found by reading"},
            "tasks": [{"key": "tabs", "title": "Handle tabs", "body": "b", "paths": [],
                       "priority": 1, "needs": []},
                      {"key": "tests", "title": "Test tabs", "body": "b", "paths": [],
                       "priority": 2, "needs": ["tabs"]}]}
    answer = "Here is the plan:\n\n```json\n" + json.dumps(plan) + "\n```\n"
    first = box.run(["git", "brat", "mayor", "ask", "Analyze src/ and create tasks", "--yes",
                     "--json"], repo, env=env, timeout=150, reply=answer)
    assert first.rc == 0, first.show()
    out = json.loads(first.out[first.out.index("{"):])
    assert out["engine"] == "claude" and [t["key"] for t in out["tasks"]] == ["tabs", "tests"]
    assert uuid.UUID(out["session_id"])
    c = json.loads(brat("convoy", "show", out["convoy"], "--json").out)
    assert c["title"] == "Fix the parser" and c["total"] == 2
    second = box.run(["git", "brat", "mayor", "ask", "And the docs?", "--yes", "--json"], repo,
                     env=env, timeout=150, reply=answer)
    assert second.rc == 0, second.show()
    again = json.loads(second.out[second.out.index("{"):])
    assert again["resumed"] and again["conversation"] == out["conversation"]
    sent = json.dumps([r.get("body", r) for r in second.requests])
    assert "Analyze src/ and create tasks" in sent      # the first exchange came along
