"""Whatever stops the witness, sessions are recorded, agents stopped, work kept and resumed."""

from __future__ import annotations

import json
import os
import signal

import pytest

from helpers import git, status
from witnesskit import alive, kill_group, make_bench


@pytest.fixture
def bench(repo, tmp_path):
    b = make_bench(repo, tmp_path)
    # These tests find the agent and its children by the pids the fake agent records; in a
    # sandbox those are its own pid namespace's, meaningless here (tests/brat/sandbox/ proves
    # a sandboxed session's processes all end with it).
    b.config(witness__sandbox="none")
    return b


def _hanging(bench, tmp_path, proc):
    """Wait until the agent hangs (its pids recorded); the session's id."""
    bench.wait_for(lambda: len(bench.agent_pids()) >= 2 or proc.poll() is not None, 60)
    assert proc.poll() is None, proc.stderr.read().decode()
    return bench.runs()[-1]["session"]


def test_a_sigkilled_witness_is_recovered_with_no_commit_lost_and_the_conversation_resumed(
        bench, repo, tmp_path):
    bench.config(witness__engine="claude")
    head_before, status_before = git(repo, "rev-parse", "HEAD"), status(repo)
    t = bench.task(bench.convoy(), "Crash me", "write a.txt committed", "commit first part",
                   "write b.txt uncommitted", "hang-once")
    w = bench.start_witness("--once", "--lease-ttl", "60")
    try:
        sid = _hanging(bench, tmp_path, w)
        os.kill(w.pid, signal.SIGKILL)           # the witness dies; its agent does not
        w.wait(timeout=10)
    finally:
        kill_group(w)
    agent, child = bench.agent_pids()
    assert alive(agent) and alive(child)
    first = git(repo, "rev-parse", f"brat/{t}")
    uuid1 = bench.session(sid)["engine_session"]
    assert uuid1 and f"--session-id {uuid1}" in " ".join(bench.runs()[0]["argv"])

    proc = bench.brat("witness", "run", "--once", "--json")
    summary = json.loads(proc.out)
    [rec] = summary["recovered"]
    assert rec["session"] == sid and rec["status"] == "crashed" and rec["killed"]
    assert rec["salvaged"] and rec["engine_session"] == uuid1
    bench.wait_for(lambda: not alive(agent) and not alive(child), 10)
    # Nothing lost: the commit it made and the file it had not committed are on the branch.
    assert git(repo, "merge-base", "--is-ancestor", first, f"brat/{t}") == ""
    assert git(repo, "show", f"brat/{t}:a.txt") == "committed"
    assert git(repo, "show", f"brat/{t}:b.txt") == "uncommitted"
    # The next session resumed the same conversation on the same branch.
    second = bench.runs()[-1]
    assert second["argv"][second["argv"].index("--resume") + 1] == uuid1
    assert "interrupted" in second["prompt"]
    assert bench.show(t)["status"] == "needs-review"
    crashed = bench.session(sid)
    assert crashed["status"] == "crashed" and "gone" in crashed["reason"]
    report = bench.json("status")["recovery"]
    [c] = report["crashed_sessions"]
    assert c["session"] == sid and c["branch_exists"] and c["conversation"] == uuid1
    assert c["salvaged"] == rec["salvaged"] and c["log"].endswith(f"{sid}.log")
    assert git(repo, "rev-parse", "HEAD") == head_before and status(repo) == status_before


def test_a_revived_agents_late_done_is_rejected_after_its_lease_moved_on(bench, repo, tmp_path):
    t = bench.task(bench.convoy(), "Zombie", "hang-once", "sleep 30")
    w = bench.start_witness("--once")
    try:
        sid1 = _hanging(bench, tmp_path, w)
        os.kill(w.pid, signal.SIGKILL)
        w.wait(timeout=10)
    finally:
        kill_group(w)
    worktree = repo / ".git" / "brat" / "worktrees" / t
    w2 = bench.start_witness("--once")
    try:
        bench.wait_for(lambda: len(bench.runs()) == 2, 60)
        sid2 = bench.runs()[-1]["session"]
        # The old agent's environment, in the work tree the new session works in.
        zombie = bench.brat("task", "done", "-m", "late", check=False, cwd=worktree,
                            env={"BRAT_SESSION": sid1, "GRITE_HOLDER": f"session:{sid1}"})
        assert zombie.returncode == 5, zombie.err
        assert f"session {sid1[:7]} no longer holds task {t[:7]}" in zombie.err
        assert f"passed to session {sid2[:7]}" in zombie.err
        assert bench.show(t)["status"] == "running"
        assert all(c["body"] != "done: late" for c in bench.show(t)["comments"])
        w2.send_signal(signal.SIGTERM)      # a clean stop: the live session is recorded
        assert w2.wait(timeout=30) == 0
    finally:
        kill_group(w2)
    assert bench.session(sid2)["status"] == "stopped"
    assert bench.show(t)["status"] == "queued"


def test_ctrl_c_stops_the_sessions_cleanly(bench, tmp_path):
    t = bench.task(bench.convoy(), "Long", "write part.txt half", "hang")
    w = bench.start_witness()
    try:
        sid = _hanging(bench, tmp_path, w)
        w.send_signal(signal.SIGINT)
        assert w.wait(timeout=30) == 130
    finally:
        kill_group(w)
    for pid in bench.agent_pids():
        bench.wait_for(lambda pid=pid: not alive(pid), 10)
    s = bench.session(sid)
    assert s["status"] == "stopped" and "interrupted" in s["reason"]
    task = bench.show(t)
    assert task["status"] == "queued" and "resumes" in task["reason"]
    assert git(bench.repo, "show", f"brat/{t}:part.txt") == "half"


def test_a_detached_witness_reports_its_status_and_stops_cleanly(bench, tmp_path):
    t = bench.task(bench.convoy(), "Background", "hang")
    out = bench.json("witness", "run", "--detach")
    pid = out["pid"]
    try:
        bench.wait_for(lambda: len(bench.agent_pids()) >= 2, 60)
        st = bench.json("witness", "status")
        assert st["running"] and st["pid"] == pid and len(st["sessions"]) == 1
        bench.brat("witness", "stop")
        assert not alive(pid)
    finally:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
    assert bench.json("witness", "status")["running"] is False
    [s] = bench.sessions(t)
    assert s["status"] == "stopped"
    for p in bench.agent_pids():
        bench.wait_for(lambda p=p: not alive(p), 10)


def test_session_stop_blocks_the_task_and_stops_its_agent(bench, tmp_path):
    t = bench.task(bench.convoy(), "Stop me", "hang")
    w = bench.start_witness()
    try:
        sid = _hanging(bench, tmp_path, w)
        out = bench.json("session", "stop", sid[:8])
        assert out["status"] == "stopped"
        task = bench.show(t)
        assert task["status"] == "blocked" and "stopped by Test User" in task["reason"]
        w.send_signal(signal.SIGTERM)
        assert w.wait(timeout=30) == 0
    finally:
        kill_group(w)


def test_a_reply_resumes_the_conversation_with_the_message(bench, repo):
    bench.config(witness__engine="claude")
    t = bench.task(bench.convoy(), "Review loop", "write a.txt v1", "commit v1")
    bench.brat("witness", "run", "--once")
    [s1] = bench.sessions(t)
    uuid1 = bench.session(s1["id"])["engine_session"]
    bench.brat("task", "reply", t, "-m", "Use v2 please.\nFAKE: write a.txt v2\nFAKE: commit v2")
    assert bench.show(t)["status"] == "queued"
    bench.brat("witness", "run", "--once")
    second = bench.runs()[-1]
    assert second["argv"][second["argv"].index("--resume") + 1] == uuid1
    assert second["prompt"].startswith("A human reviewed your work")
    assert "Use v2 please." in second["prompt"]
    assert git(repo, "show", f"brat/{t}:a.txt") == "v1\nv2"
    assert bench.show(t)["status"] == "needs-review"
    # The merge request of the first attempt was superseded by the reply: one request, for
    # the new head, waiting for the human's review.
    st = bench.json("status")
    assert [w["head"] for w in st["review"]] == [git(repo, "rev-parse", f"brat/{t}")]
    bench.brat("task", "approve", t)
    assert len(bench.json("status")["merge_queue"]) == 1


def test_a_reply_to_an_engine_without_resume_leads_a_fresh_prompt(bench, repo):
    t = bench.task(bench.convoy(), "Review loop", "write a.txt v1", "commit v1")
    bench.brat("witness", "run", "--once")
    bench.brat("task", "reply", t, "-m", "Also add a newline at the end.")
    bench.brat("witness", "run", "--once", check=False)
    second = bench.runs()[-1]
    assert second["prompt"].startswith("A human reviewed your last attempt and answered:\n\n"
                                       "Also add a newline at the end.")
    assert "Review loop" in second["prompt"]
    assert "already holds 1 commit" in second["prompt"]


def test_a_reply_is_refused_on_a_task_that_is_not_waiting(bench):
    from bratkit import fail
    t = bench.task(bench.convoy(), "Queued")
    code, msg = fail(bench.repo, "task", "reply", t, "-m", "hi")
    assert code == 5 and "a reply re-queues a task" in msg
