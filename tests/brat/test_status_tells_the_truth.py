"""Right after a crash, `status` says what the next witness run will find: a dead witness's
session is crashed, a ready task the witness passes over says why, the merge queue is numbered
in the refinery's own order."""

from __future__ import annotations

import os
import signal


from helpers import git, grite
from witnesskit import alive, kill_group


def test_status_right_after_the_witness_is_killed_shows_its_session_crashed(bench, tmp_path):
    # Unconfined: the agent must outlive its witness here, and is watched by the pids it
    # records; a sandboxed agent dies with its witness (its pid namespace goes with it).
    bench.config(witness__sandbox="none")
    t = bench.task(bench.convoy(), "Crash me", "write a.txt x", "commit a", "hang-once")
    w = bench.start_witness("--once", "--lease-ttl", "120")
    try:
        bench.wait_for(lambda: len(bench.agent_pids()) >= 2 or w.poll() is not None, 60)
        assert w.poll() is None, w.stderr.read().decode()
        os.kill(w.pid, signal.SIGKILL)           # the witness dies; its agent does not
        w.wait(timeout=10)
    finally:
        kill_group(w)
    s = bench.json("status")
    [sess] = s["sessions"]
    [dead] = s["dead_sessions"]
    assert sess["status"] == "crashed" and sess["task"] == t
    assert dead["session"] == sess["id"] and dead["witness_pid"] == w.pid
    text = bench.brat("status").out
    assert f"crashed (witness pid {w.pid} gone)" in text
    assert "witness gone" in text and "s left" not in text     # not a live lease's countdown
    assert "nothing to recover" not in text
    assert f"its witness (pid {w.pid}) is gone" in text
    # What status said is what the next witness run does (and it stops the orphaned agent).
    run = bench.brat("witness", "run", "--once")
    out = run.out + run.err
    assert f"crashed, its witness (pid {w.pid}) is gone" in out
    bench.wait_for(lambda: not any(alive(p) for p in bench.agent_pids()[:2]), 10)
    assert bench.json("status")["dead_sessions"] == []


def test_a_ready_task_the_witness_passes_over_says_why_in_status_and_in_witness_run(bench):
    t = bench.task(bench.convoy(), "Leased by nobody", "write a.txt x", "commit a", "done ok")
    # A witness killed between taking the lease and recording its session leaves this behind.
    holder = "session:" + "0123456789abcdef" * 2
    grite(bench.repo, "lock", "acquire", f"task:{t}", "--holder", holder, "--ttl", "120")
    s = bench.json("status")
    assert [r["id"] for r in s["ready"]] == [t]
    [why] = s["not_started"]
    assert why["task"] == t and f"its lease is held by {holder}" in why["reason"]
    assert "not started: its lease is held by" in bench.brat("status").out
    run = bench.brat("witness", "run", "--once")
    out = run.out + run.err
    assert f"task {t[:7]} is ready but not started: its lease is held by {holder}" in out
    assert bench.show(t)["status"] == "queued"


def test_status_numbers_the_merge_queue_in_the_order_the_refinery_takes_it(bench, repo):
    ca, cb = bench.convoy("A"), bench.convoy("B")
    a = bench.task(ca, "A: created first, finished last", "write a.txt a", "commit a", "done ok")
    b = bench.task(cb, "B: created second, finished first", "write b.txt b", "commit b",
                   "done ok")
    bench.brat("witness", "run", "--once", "--convoy", cb)
    bench.brat("witness", "run", "--once", "--convoy", ca)
    for t in (a, b):   # approved in the other order: the queue keeps the order they finished in
        bench.brat("task", "approve", t)
    s = bench.json("status")
    refinery = bench.json("refinery", "status")["queue"]
    assert [(q["position"], q["task"]) for q in refinery] == [(1, b), (2, a)]
    assert [(m["position"], m["task"]) for m in s["merge_queue"]] == [(1, b), (2, a)]
    lines = bench.brat("status").out.split("MERGE QUEUE")[1].splitlines()
    assert lines[1].split()[:2] == ["1.", b[:7]] and lines[2].split()[:2] == ["2.", a[:7]]
    # ... and that is the order it lands them in.
    bench.brat("refinery", "run", "--once")
    subjects = git(repo, "log", "--reverse", "--format=%s", "main").splitlines()
    assert [x for x in subjects if x in ("a", "b")] == ["b", "a"]   # the agents' commits
