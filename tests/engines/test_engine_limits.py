"""The seven real CLIs meet a usage or rate limit: the fake model server answers every model
request 429, in the provider's words, with and without retry-after, per-minute, out of quota,
a plan's usage limit (tests/fakemodel.py limit_reply). `git brat witness run --once` must pause
the task (not fail it, not charge it an attempt) with the reset the engine gave or a backoff,
stop the engines that wait silently (the idle watchdog), and, once the server answers again,
a second witness run resumes the engine's conversation and the task reaches review.

Every case runs in the bubblewrap sandbox a witness session gets (witness.sandbox = "bwrap"),
reaching the fake model on 127.0.0.1 through the sandbox's outbound network, as a real session
reaches its provider: a limit must be read the same through the sandbox's pipes and signals.

Slow: each case runs an engine twice (aider retries for about 80 s before it gives up).
"""

from __future__ import annotations

import json
import shutil
import time

import pytest

from enginekit import Sandbox
from test_real_engines import _witness_available, witness_repo

BACKOFF = 6          # witness.limit_backoff in these tests, seconds (time to look at it)
# witness.idle_timeout: the silent engines are stopped after this. Not shorter: an engine
# starting on a loaded machine is silent for seconds too (opencode: 7 s unloaded), and aider
# sleeps up to 32 s between its own retries (its output may come only when it exits).
IDLE = {"aider": 150, "opencode": 60}
IDLE_DEFAULT = 25
GEMINI_ATTEMPTS = 3  # gemini's tries at a per-minute quota (general.maxAttempts; its own: 10)

# (engine, the server's limit, what the pause waits for: "backoff", or seconds to the reset
# the engine reports; None: it resumes in the test)
CASES = [
    ("claude", {"shape": "rate", "retry_after": 3600}, "backoff"),     # fails at once
    ("codex", {"shape": "rate"}, "backoff"),                           # exceeded retry limit
    ("codex", {"shape": "usage", "resets_in": 90}, 90),                # "try again at 9:21 PM"
    ("codex", {"shape": "rate", "retry_after": 3600}, "backoff"),      # a retry of its own
    ("gemini", {"shape": "daily"}, "backoff"),                         # TerminalQuotaError
    ("gemini", {"shape": "rate", "retry_after": 3600}, 3600),          # retryDelay > 300 s
    ("gemini", {"shape": "rate"}, "backoff"),                          # per-minute: its retries
    ("opencode", {"shape": "rate", "retry_after": 3600}, "backoff"),   # silent: the watchdog
    ("opencode", {"shape": "quota"}, "backoff"),
    ("cn", {"shape": "rate"}, "backoff"),                              # silent: the watchdog
    ("copilot", {"shape": "rate"}, 20),                                # "try again in 20s"
    ("copilot", {"shape": "quota"}, "backoff"),
    ("aider", {"shape": "rate"}, "backoff"),                           # exit 0, no edit
]


def case_id(case) -> str:
    name, limit, _ = case
    return f"{name}-{limit['shape']}" + ("-retry-after" if limit.get("retry_after") else "")


def task_of(brat, tid: str) -> dict:
    return json.loads(brat("task", "show", tid, "--json").out)


def sessions_of(brat, tid: str) -> list[dict]:
    rows = [s for s in json.loads(brat("session", "list", "--all", "--json").out)
            if s["task"] == tid]
    return [json.loads(brat("session", "show", s["id"], "--json").out) for s in rows]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")
@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_a_limit_pauses_the_task_then_the_engine_resumes_and_finishes(case, sandbox_for,
                                                                      tmp_path):
    if why := _witness_available():
        pytest.skip(why)
    name, limit, waits = case
    box: Sandbox = sandbox_for(name)
    if name == "codex" and limit.get("retry_after"):
        # With a retry of its own allowed, codex may wait out the retry-after silently
        # (engines-real-world.md); 0.17x measured here gave up at once: either way, a pause.
        config = box.home / ".codex" / "config.toml"
        config.write_text(config.read_text().replace("request_max_retries = 0",
                                                     "request_max_retries = 1"))
    if name == "gemini" and limit == {"shape": "rate"}:
        # Gemini retries a per-minute quota 10 times, 5 s doubling to 30 s (~4-5 min): its
        # user's setting general.maxAttempts (at most 10) cuts that to 3 tries, ~15-20 s. A
        # server's shorter retryDelay cannot: gemini waits the longer of it and its own delay.
        settings = box.home / ".gemini" / "settings.json"
        cfg = json.loads(settings.read_text())
        cfg["general"]["maxAttempts"] = GEMINI_ATTEMPTS
        settings.write_text(json.dumps(cfg))
    repo, tid, brat, env = witness_repo(
        box, tmp_path, f"Write the greeting file.\n\nFAKE-EDIT: greeting.txt: hello from {name}\n"
        f"FAKE-COMMIT: greeting from {name}\n", witness__max_retries="0",
        witness__sandbox="bwrap", witness__limit_backoff=str(BACKOFF),
        witness__limit_margin="0", witness__idle_timeout=str(IDLE.get(name, IDLE_DEFAULT)))
    witness = ["git", "brat", "witness", "run", "--once", "--engine", name, "--timeout", "200",
               "--json"]
    started = int(time.time() * 1000)
    run = box.run(witness, repo, env=env, timeout=260, limit=limit)
    assert any(r.get("kind") == "limited" for r in run.requests), run.show()
    [end] = json.loads(run.out.strip().splitlines()[-1])["ended"]
    assert (end["status"], end["task_status"]) == ("paused", "queued"), (end, run.show())
    task = task_of(brat, tid)
    assert task["status"] == "queued" and not task.get("failures"), task
    [paused] = sessions_of(brat, tid)
    assert paused["sandbox"] == "bwrap", paused
    ended = paused["ended_at"]
    ended_ms = int(time.mktime(time.strptime(ended[:19], "%Y-%m-%dT%H:%M:%S")) * 1000) \
        if isinstance(ended, str) else ended
    if waits == "backoff":
        assert task["paused"].endswith(f"({name} rate limit)") or \
            task["paused"].endswith(f"({name} usage limit)"), task
        assert abs(task["paused_until"] - (ended_ms + BACKOFF * 1000)) < 3000, (task, paused)
    else:   # the reset the engine reported (codex prints it to the minute)
        slack = 61_000 if name == "codex" else 5_000
        assert abs(task["paused_until"] - (started + waits * 1000)) < slack + \
            (time.time() * 1000 - started), (task, run.show())
    if isinstance(waits, int) and waits > 30:
        return   # a long reset: the pause is the point; nothing resumes within a test
    until = task["paused_until"]
    while time.time() * 1000 < until + 200:
        time.sleep(0.2)
    second = box.run(witness, repo, env=env, timeout=260)
    assert not any(r.get("kind") == "limited" for r in second.requests)
    task = task_of(brat, tid)
    assert task["status"] == "needs-review", (task, second.show())
    assert task["paused"] == "" and not task.get("failures")
    sessions = sessions_of(brat, tid)
    conv = sessions[0]["engine_session"]
    if name == "gemini":   # its daily quota, or a per-minute one after its own retries
        # Its first request refused, gemini saved no session: the resume finds none (exit 42),
        # and the next session starts afresh, uncharged.
        assert [s["status"] for s in sessions] == ["paused", "failed", "done"], sessions
        assert "conversation to resume is gone" in sessions[1]["reason"], sessions
        assert conv in " ".join(sessions[1]["argv"]), sessions
        return
    assert [s["status"] for s in sessions] == ["paused", "done"], sessions
    if conv and name != "cn":   # cn resumes only its last session, by no id
        assert conv in " ".join(sessions[1]["argv"]), sessions
