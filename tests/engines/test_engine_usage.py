"""What each of the seven real CLIs reports spending reads as the tokens the fake model server
answered with (FAKE-USAGE), and a resumed conversation counts only its own run.

opencode does not report its session-title request (measured): that one is left out.
Each engine runs its preset's argv against the server (in a loopback-only namespace), twice where
it resumes; usage.measure reads the run's output (cn's and copilot's side files for those two).
aider counts tokens itself (its "Tokens: 2.6k sent" line, rounded to 0.1k): for it the line is
what is read, and checked against itself.
"""

from __future__ import annotations

import json
import re
import uuid

import pytest

from enginekit import ENGINES
from test_real_engines import SANDBOXES, drive, witness_repo, worktree
from git_brat.brat.engines import usage

IN, OUT = 1234, 56


def task(name: str, line: str) -> str:
    return (f"Greet the world\n\nFAKE-EDIT: greeting.txt: {line}\nFAKE-COMMIT: greeting from "
            f"{name}\nFAKE-USAGE: {IN} {OUT}\n\nWhen the file is written, commit it with git.")


def served(run, name: str) -> tuple[int, int]:
    """(input, output) tokens the server reported over the run's completions. opencode leaves
    its session-title request (no tools, its small model) out of its step reports: so do we."""
    reqs = [r for r in run.model_requests()
            if name != "opencode" or (r.get("body") or {}).get("tools")]
    return sum(r["usage"][0] for r in reqs), sum(r["usage"][1] for r in reqs)


def measured(p, run, box, repo, engine_session: str) -> usage.Usage:
    return usage.measure(p, run.out, env={**box.env}, workdir=str(repo),
                         engine_session=engine_session, since=0.0)


@pytest.mark.slow
@pytest.mark.parametrize("name", ENGINES)
def test_the_tokens_recorded_are_what_the_model_server_reported(name, sandbox_for, tmp_path):
    box = sandbox_for(name)
    repo = worktree(tmp_path, name)
    sessions = tmp_path / "brat" / "sessions"
    first, later = sessions / uuid.uuid4().hex, sessions / uuid.uuid4().hex
    sid = str(uuid.uuid4())
    p, run, res = drive(box, repo, first, task(name, "hello"), session_uuid=sid)
    assert run.rc == 0, run.show()
    conv = res.session_id or (sid if p.new_session_args else "")
    u = measured(p, run, box, repo, conv)
    assert u.reported, run.show()
    if name == "aider":
        line = re.findall(r"^Tokens: ([\d.]+k?) sent, ([\d.]+k?) received", run.out, re.M)
        assert line and (u.input, u.output) == tuple(
            sum(int(float(x[i].rstrip("k")) * (1000 if x[i].endswith("k") else 1))
                for x in line) for i in (0, 1)), run.out
    else:
        assert (u.input, u.output) == served(run, name), (u, served(run, name), run.show())
    print(f"\n{name}: {usage.summary(u)}")
    if not p.resumes:
        return
    if name == "aider":
        conv = str(first)
    p, run2, res2 = drive(box, repo, later, task(name, "second"), resume_id=conv)
    assert run2.rc == 0, run2.show()
    u2 = measured(p, run2, box, repo, res2.session_id or conv)
    mine = u2.minus(u) if p.usage.cumulative else u2
    if name != "aider":
        # A cumulative engine (codex, claude, copilot) reports the first run again: taken out,
        # the second session's own is exactly what the server answered it.
        assert (mine.input, mine.output) == served(run2, name), (u, u2, served(run2, name))
        assert p.usage.cumulative == ((u2.input, u2.output) != served(run2, name))


@pytest.mark.slow
@pytest.mark.parametrize("sandbox", SANDBOXES)
@pytest.mark.parametrize("name", ["opencode", "copilot"])   # the two that report as they go
def test_the_witness_stops_a_real_engine_at_its_budget_and_blocks_the_task(
        name, sandbox, sandbox_for, tmp_path):
    """The model answers the read with 150k tokens, then never answers again: the witness,
    reading the engine's reports as they come, stops it at the task's 100k-token budget long
    before its timeout, and the task waits for a human."""
    box = sandbox_for(name)
    repo, tid, brat, env = witness_repo(
        box, tmp_path, "FAKE-EDIT: greeting.txt: never\nFAKE-USAGE: 150000 10\nFAKE-HANG\n",
        witness__max_retries="0", witness__sandbox=sandbox,
        witness__budget_task="100k tokens")
    run = box.run(["git", "brat", "witness", "run", "--once", "--engine", name,
                   "--timeout", "100", "--json"], repo, env=env, timeout=130)
    assert run.seconds < 80, run.show()
    task = json.loads(brat("task", "show", tid, "--json").out)
    assert task["status"] == "blocked", (task, run.show())
    assert "budget is spent" in task["reason"] and "witness.budget_task" in task["reason"]
    assert task["spent"]["input"] >= 150000, task["spent"]
    [s] = [s for s in json.loads(brat("session", "list", "--all", "--json").out)
           if s["task"] == tid]
    assert s["status"] == "stopped", (s, run.show())
