"""What sessions spend: recorded at their end, summed per task and convoy, priced or "unknown",
and budgets that stop a session and put its task in front of a human."""

from __future__ import annotations

import json
import time

import pytest

from witnesskit import alive

STEP = {"type": "step_finish", "part": {"tokens": {"input": 150000, "output": 1000,
                                                   "cache": {"read": 0, "write": 0}},
                                        "cost": 0}}

HALF = {"type": "step_finish", "part": {"tokens": {"input": 75000, "output": 500}, "cost": 0}}


def claude_result(n_in: int, n_out: int, cost: float) -> str:
    return json.dumps({"type": "result", "is_error": False, "result": "ok", "modelUsage": {
        "claude-x": {"inputTokens": n_in, "outputTokens": n_out, "costUSD": cost}}})


def test_a_task_shows_tokens_and_the_engines_cost_or_unknown_never_zero(bench):
    bench.config(witness__engine="claude")
    c = bench.convoy("Spend")
    priced = bench.task(c, "Priced", "write a.txt a", "commit a",
                        "print " + claude_result(1000, 200, 0.0125))
    unpriced = bench.task(c, "Unpriced", "write b.txt b", "commit b",
                          "print " + claude_result(3000, 100, 0))
    bench.brat("witness", "run", "--once")
    spent = bench.show(priced)["spent"]
    assert (spent["input"], spent["output"], spent["tokens"]) == (1000, 200, 1200)
    assert spent["cost"] == "$0.0125" and spent["cost_usd"] == 0.0125
    other = bench.show(unpriced)["spent"]
    assert other["tokens"] == 3100 and other["cost"] == "unknown" and other["cost_usd"] is None
    convoy = bench.json("convoy", "show", c)["spent"]
    assert convoy["tokens"] == 4300 and convoy["cost"] == "unknown" and convoy["unpriced"] == 1
    assert "4.3k tokens" in bench.brat("convoy", "show", c).out
    status = bench.json("status")["spent"][c]
    assert status["tokens"] == 4300 and status["cost"] == "unknown"
    assert "spent 4.3k tokens, cost unknown (1 of 2 sessions unpriced)" in \
        bench.brat("status").out
    # A price table names the model: every session is priced from it, over the engine's figure.
    bench.config(witness__prices='{"claude-x" = [10.0, 50.0]}')
    t = bench.task(c, "Priced by table", "write c.txt c", "commit c",
                   "print " + claude_result(3000, 100, 0))
    bench.brat("witness", "run", "--once")
    assert bench.show(t)["spent"]["cost"] == "$0.035"      # 3000 * $10/M + 100 * $50/M


def test_an_engine_that_reports_nothing_has_no_spending_recorded(bench):
    t = bench.task(bench.convoy(), "Plain", "write a.txt a", "commit a")
    bench.brat("witness", "run", "--once")
    spent = bench.show(t)["spent"]
    assert spent["sessions"] == 0 and spent["cost"] == "unknown"
    [s] = bench.sessions(t)
    assert bench.session(s["id"])["spent"] is None


@pytest.mark.slow
def test_a_budget_stops_a_running_session_and_blocks_its_task(bench):
    """An engine that reports as it goes (opencode's step_finish) is stopped at the limit, long
    before its timeout; the task waits for a human with the reason, and is not retried."""
    bench.config(witness__engine="opencode", engines__opencode__command=bench.brat(
        "config", "get", "engines.fake.command").out.strip(),
        engines__opencode__state=bench.state, witness__budget_task="100k tokens",
        witness__timeout="120")
    # Two steps, looked at apart: what the second adds to the first reaches the budget.
    t = bench.task(bench.convoy(), "Expensive", "write a.txt a", "print " + json.dumps(HALF),
                   "sleep 2.5", "print " + json.dumps(HALF), "sleep 60")
    started = time.monotonic()
    bench.brat("witness", "run", "--once", check=False)
    assert time.monotonic() - started < 40
    task = bench.show(t)
    assert task["status"] == "blocked", task
    assert "budget is spent: 151k tokens of 100k tokens (witness.budget_task)" in task["reason"]
    [s] = bench.sessions(t)
    sess = bench.session(s["id"])
    assert sess["status"] == "stopped" and sess["spent"]["input"] == 150000
    assert "stopped at its budget" in sess["reason"]
    assert not any(alive(p) for p in bench.agent_pids())
    [todo] = [i for i in bench.json("status")["interventions"] if i["task"] == t]
    assert todo["kind"] == "needs-human" and "witness.budget_task" in todo["detail"]
    # The next run starts nothing for it: it is the human's now.
    bench.brat("witness", "run", "--once", check=False)
    assert len(bench.sessions(t)) == 1


def test_a_spent_convoy_budget_blocks_its_other_tasks_unstarted(bench):
    bench.config(witness__engine="claude", witness__concurrency="1")
    c = bench.convoy("Small wallet")
    first = bench.task(c, "First", "write a.txt a", "commit a",
                       "print " + claude_result(1000, 200, 0.02))
    bench.brat("witness", "run", "--once", check=False)
    assert bench.show(first)["status"] == "needs-review"
    bench.config(witness__budget_convoy="$0.01")             # less than it already spent
    second = bench.task(c, "Second", "write b.txt b", "commit b")
    bench.brat("witness", "run", "--once", check=False)
    task = bench.show(second)
    assert task["status"] == "blocked" and "convoy's budget is spent: $0.02 of $0.01" in \
        task["reason"], task
    assert bench.sessions(second) == []


@pytest.mark.slow
def test_the_crash_report_says_what_a_crashed_session_had_spent(bench):
    import os
    import signal
    from witnesskit import kill_group
    bench.config(witness__engine="opencode", engines__opencode__command=bench.brat(
        "config", "get", "engines.fake.command").out.strip(),
        engines__opencode__state=bench.state, witness__sandbox="none")
    t = bench.task(bench.convoy(), "Crash", "write a.txt a", "print " + json.dumps(STEP),
                   "hang-once")
    w = bench.start_witness("--once", "--lease-ttl", "60")
    try:
        bench.wait_for(lambda: len(bench.agent_pids()) >= 2 or w.poll() is not None, 60)
        os.kill(w.pid, signal.SIGKILL)          # the witness dies mid-session
        w.wait(timeout=10)
    finally:
        kill_group(w)
    summary = json.loads(bench.brat("witness", "run", "--once", "--json", check=False).out)
    [rec] = summary["recovered"]
    assert rec["status"] == "crashed" and rec["spent"].startswith("151k tokens (150k in, 1k out)")
    crashed = bench.session(rec["session"])
    assert crashed["spent"]["input"] == 150000 and crashed["spent"]["cost"] == "unknown"
    assert bench.show(t)["spent"]["sessions"] >= 1
    [c] = bench.json("status")["recovery"]["crashed_sessions"]
    assert c["session"] == rec["session"] and c["spent"]["tokens"] == 151000
    assert "it had spent: 151k tokens, cost unknown" in bench.brat("status").out


@pytest.mark.parametrize("exit_code, task_to", [(-15, "blocked"), (143, "blocked"),
                                                (0, "needs-review")])
def test_a_session_stopped_at_its_budget_goes_to_a_human_unless_it_had_finished(exit_code,
                                                                                task_to):
    """claude reports what it spent as it exits: a stop that met a finished run (exit 0) takes
    its work to review; one that cut it short puts the task in front of a human."""
    from git_brat.brat.config import Witness
    from git_brat.brat.witness import verdict
    sid = "1" * 32
    v = verdict.decide(verdict.Facts(session=sid, branch="brat/t", stop_reason="budget",
                                     exit_code=exit_code, commits=1, task_session=sid,
                                     over_budget="the task's budget is spent"), Witness())
    assert v.task_to == task_to
    if task_to == "blocked":
        assert v.status == "stopped" and v.task_fields["needs_human"]
