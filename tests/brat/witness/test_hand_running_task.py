"""A task a human set running by hand is the human's: no witness re-queues it, no agent runs it."""

from __future__ import annotations

from helpers import brat_json


def test_a_task_a_human_set_running_is_left_to_the_human_and_status_says_so(bench):
    cid = bench.convoy()
    tid = bench.task(cid, "I am doing this one by hand", "write w.txt w", "commit w", "done ok")
    bench.brat("task", "update", tid, "--status", "running")
    bench.brat("witness", "run", "--once")
    bench.brat("deacon", "run", "--once")
    assert bench.runs() == []                                  # no agent ran it
    show = bench.show(tid)
    assert show["status"] == "running"
    assert [h["to_status"] for h in show["history"]] == ["queued", "running"], show["history"]
    [todo] = [i for i in bench.json("status")["interventions"] if i["task"] == tid]
    assert todo["kind"] == "by-hand" and "leave it to you" in todo["detail"]
    # Handed back to the agents, it runs as any other.
    bench.brat("task", "update", tid, "--status", "queued")
    bench.brat("witness", "run", "--once")
    assert len(bench.runs()) == 1 and bench.show(tid)["status"] == "needs-review"
    assert brat_json(bench.repo, "status")["interventions"] == []
