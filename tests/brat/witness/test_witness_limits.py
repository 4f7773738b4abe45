"""A usage limit pauses, it never fails: the task is not charged, the engine is held until the
reset (on every clone: the pause is in the log), other engines keep working, and the session
after the reset resumes the conversation. The idle watchdog stops an engine that waits silently.
The engine here is the scripted fake agent (as `claude` it speaks claude's flags); the seven real
CLIs meet the fake model server's 429s in tests/engines/test_engine_limits.py."""

from __future__ import annotations

import json
import time

import pytest

from witnesskit import make_bench


def rate_limit_event(reset_s: int) -> str:
    """What claude (stream-json) says when its account's limit rejects a request."""
    return json.dumps({"type": "rate_limit_event", "rate_limit_info": {
        "status": "rejected", "resetsAt": reset_s, "rateLimitType": "five_hour"}})


@pytest.mark.slow
def test_a_usage_limit_pauses_the_task_uncharged_holds_the_engine_and_resumes_the_conversation(
        repo, tmp_path):
    bench = make_bench(repo, tmp_path, engine="claude")
    bench.config(witness__limit_margin="0")
    c = bench.convoy()
    reset = int(time.time()) + 20   # the runs below take a few seconds before it
    t = bench.task(c, "Greet", f"limit-first 1 {rate_limit_event(reset)}",
                   "write hello.txt hi", "commit greet")
    first = json.loads(bench.brat("witness", "run", "--once", "--json").out)
    [end] = first["ended"]
    assert (end["status"], end["task_status"]) == ("paused", "queued")
    assert first["failed"] == 0
    task = bench.show(t)
    assert task["status"] == "queued" and not task.get("failures")
    assert task["paused_until"] == reset * 1000
    assert task["paused"] == task["reason"]
    assert task["reason"].startswith("paused until ") and \
        task["reason"].endswith("(claude usage limit)")
    [row] = [r for r in bench.json("task", "list") if r["id"] == t]
    assert row["paused"] == task["paused"]
    assert f"not started: {task['paused']}: it resumes then" in bench.brat("status").out
    # the inbox tells the human, once, until when
    [pause] = [i for i in bench.json("inbox") if i["kind"] == "limit"]
    assert pause["task"] == t and pause["text"] == task["paused"]
    [s] = bench.sessions(t)
    assert bench.session(s["id"])["status"] == "paused"

    # The engine (the account) is held: a second task waits too, though nothing else stops it.
    t2 = bench.task(bench.convoy("Other"), "Another", "write other.txt o", "commit other")
    runs = len(bench.runs())
    held = bench.brat("witness", "run", "--once")
    assert "engine claude paused until" in held.out + held.err
    assert bench.show(t2)["status"] == "queued" and len(bench.runs()) == runs
    # Other engines keep working.
    other = json.loads(bench.brat("witness", "run", "--once", "--json", "--engine", "fake",
                                  "--convoy", bench.show(t2)["convoy"]).out)
    assert [e["task"] for e in other["ended"]] == [t2]
    assert bench.show(t2)["status"] == "needs-review"

    # After the reset, the next session resumes the first one's conversation and finishes.
    bench.wait_for(lambda: time.time() * 1000 > reset * 1000 + 200, timeout=30)
    again = json.loads(bench.brat("witness", "run", "--once", "--json").out)
    assert [e["task_status"] for e in again["ended"]] == ["needs-review"]
    runs = [r for r in bench.runs() if r["task"] == t]
    assert len(runs) == 2
    first_uuid = runs[0]["argv"][runs[0]["argv"].index("--session-id") + 1]
    assert runs[1]["argv"][runs[1]["argv"].index("--resume") + 1] == first_uuid
    done = bench.show(t)
    assert done["status"] == "needs-review" and not done.get("failures")
    assert done["paused"] == "" and done["paused_until"] == 0


@pytest.mark.slow
def test_an_engine_silent_on_a_retry_after_is_stopped_by_the_idle_watchdog_and_paused(
        repo, tmp_path):
    bench = make_bench(repo, tmp_path, engine="codex")
    bench.config(engines__codex__command=json.dumps(["fake_agent.py", "{prompt}"]),
                 witness__idle_timeout="2", witness__limit_backoff="1")
    t = bench.task(bench.convoy(), "Quiet", "hang-once", "write a.txt a", "commit a")
    started = time.monotonic()
    first = json.loads(bench.brat("witness", "run", "--once", "--json").out)
    assert time.monotonic() - started < 30
    [end] = first["ended"]
    assert (end["status"], end["task_status"]) == ("paused", "queued")
    task = bench.show(t)
    assert task["paused"].endswith("(codex rate limit)") and not task.get("failures")
    [s] = bench.sessions(t)
    assert "silent for 2s" in bench.json("session", "show", s["id"])["output_tail"]
    bench.wait_for(lambda: time.time() * 1000 > task["paused_until"] + 100, timeout=10)
    json.loads(bench.brat("witness", "run", "--once", "--json").out)
    assert bench.show(t)["status"] == "needs-review"


def test_a_task_marked_no_resume_waits_for_a_human_after_a_limit(repo, tmp_path):
    bench = make_bench(repo, tmp_path, engine="claude")
    t = bench.task(bench.convoy(), "Greet", f"limit-first 1 {rate_limit_event(2_000_000_000)}")
    bench.brat("task", "update", t, "--no-resume")
    assert bench.show(t)["no_resume"] is True
    bench.brat("witness", "run", "--once")
    task = bench.show(t)
    assert task["status"] == "blocked" and "--no-resume" in task["reason"]
    assert not task.get("failures")


@pytest.mark.slow
def test_a_pause_recorded_far_ahead_holds_its_engine_no_longer_than_the_longest_limit(
        repo, tmp_path):
    """A session record 'paused' for a year (a misread reset; a pusher's is not believed at
    all: test_engine_holds.py) holds its engine for at most the longest limit any engine has,
    counted from now."""
    from gritekit import pusher_append
    from git_brat.brat import board as model
    from git_brat.brat import holds
    from git_brat.grite.log.wal import Draft
    from git_brat.grite.model import events as ev
    from git_brat.grite.repo import Grite
    bench = make_bench(repo, tmp_path, engine="claude")
    now = int(time.time() * 1000)
    year = 365 * 86_400_000
    pusher_append(repo, [Draft(ev.new_entity_id(), ev.Create("session", {
        "task": "", "status": "paused", "engine": "claude", "ended_at": now + year,
        "paused_until": now + year, "paused_why": "claude usage limit"}))])
    board = model.board(Grite.open(str(repo)))
    hold = holds.engine_hold(board, "claude", now)
    assert hold is not None and hold.until <= now + 8 * 86_400_000
    assert holds.engine_hold(board, "codex", now) is None
    said = bench.brat("witness", "run", "--once")
    assert (said.out + said.err).count("engine claude paused until") == 1
