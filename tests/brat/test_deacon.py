"""The deacon: expired leases, session worktrees and logs, sync; every action an event, in status."""

from __future__ import annotations

import os
import signal
import time

from bratkit import convoy, fail, task
from helpers import brat, brat_json, git, grite, status
from refinerykit import commit_on, refine, request
from sync_helpers import clone, seeded_hub


def _session(repo, tid: str, status: str, worktree: str, branch: str) -> str:
    """A session entity as the witness records one (kind session)."""
    from git_brat.brat import board as model
    from git_brat.grite.model import events as ev
    from git_brat.grite.log.wal import Draft
    g = model.open_grite(str(repo))
    sid = ev.new_entity_id()
    g.append([Draft(sid, ev.Create(model.SESSION, {"task": tid, "status": status,
                                                   "engine": "shell", "branch": branch,
                                                   "worktree": worktree}))], "test: session")
    return sid


def _worktree(repo, name: str, branch: str) -> str:
    path = repo / ".git" / "brat" / "worktrees" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    git(repo, "worktree", "add", "-q", *(["--detach"] if "~" in branch else []), str(path), branch)
    return str(path)


def test_expired_leases_are_released_and_recorded(brepo):
    git(brepo, "config", "grite.lockSkew", "3")         # the margin past the TTL
    t0 = time.monotonic()
    grite(brepo, "lock", "acquire", "task:abc123", "--ttl", "1")
    grite(brepo, "lock", "acquire", "task:live", "--ttl", "600")
    time.sleep(max(0.0, 1.2 - (time.monotonic() - t0)))
    early = brat_json(brepo, "deacon", "run", "--once", env={"GRITE_HOLDER": "someone"})
    if time.monotonic() - t0 < 3.5:
        assert early["actions"] == []                    # past the TTL, not past the margin
    time.sleep(max(0.0, 4.5 - (time.monotonic() - t0)))
    report = brat_json(brepo, "deacon", "run", "--once", env={"GRITE_HOLDER": "someone"})
    assert [(a["duty"], a["action"], a["target"]) for a in report["actions"]] == \
        [("leases", "expired", "task:abc123")]
    assert report["event"]
    held = {l["resource"]: l["state"] for l in brat_json(brepo, "status")["leases"]}
    assert held == {"task:live": "held"}
    assert brat_json(brepo, "deacon", "status")["actions"][0]["target"] == "task:abc123"


def test_worktrees_of_ended_sessions_are_pruned_keeping_branches_and_unsaved_work(brepo):
    before = status(brepo)
    cid = convoy(brepo)
    ended, live, dirty = (task(brepo, cid, t) for t in ("Ended", "Live", "Dirty"))
    paths = {}
    for tid in (ended, live, dirty):
        commit_on(brepo, f"brat/{tid}", {f"{tid[:4]}.txt": "work\n"}, "work")
        paths[tid] = _worktree(brepo, tid, f"brat/{tid}")    # named as the witness names them
    _session(brepo, ended, "done", paths[ended], f"brat/{ended}")
    live_sid = _session(brepo, live, "running", paths[live], f"brat/{live}")
    # Its witness is alive: the session holds its task's lease (as the witness's sessions do).
    grite(brepo, "lock", "acquire", f"task:{live}", "--ttl", "600",
          env={"GRITE_HOLDER": f"session:{live_sid}"})
    _session(brepo, dirty, "crashed", paths[dirty], f"brat/{dirty}")
    with open(os.path.join(paths[dirty], "unsaved.txt"), "w") as f:
        f.write("not committed\n")
    fresh = _worktree(brepo, "fresh", "main~0")           # its session is not recorded yet
    orphan = _worktree(brepo, "orphan", "main~0")         # old, no session, nothing unsaved
    old = time.time() - 3600
    os.utime(orphan, (old, old))
    report = brat_json(brepo, "deacon", "run", "--once")
    pruned = sorted(a["target"] for a in report["actions"] if a["action"] == "pruned")
    assert pruned == sorted([os.path.realpath(paths[ended]), os.path.realpath(orphan)])
    assert os.path.exists(fresh)
    assert {k["detail"] for k in report["kept"]} >= {"uncommitted changes",
                                                      "no session recorded yet"}
    assert not os.path.exists(paths[ended])
    assert os.path.exists(paths[live]) and os.path.exists(paths[dirty])
    assert any("uncommitted" in k["detail"] for k in report["kept"])
    for tid in (ended, live, dirty):                       # no branch is ever deleted
        assert git(brepo, "rev-parse", "--verify", f"brat/{tid}")
    assert status(brepo) == before


def test_the_refinery_worktree_is_pruned_when_no_refinery_runs(brepo):
    git(brepo, "checkout", "-q", "-b", "work")
    request(brepo, convoy(brepo), "Land", {"l.txt": "l\n"})
    refine(brepo)
    wt = brepo / ".git" / "brat" / "refinery"
    assert wt.exists()
    report = brat_json(brepo, "deacon", "run", "--once")
    assert ("worktrees", "pruned") in {(a["duty"], a["action"]) for a in report["actions"]}
    assert not wt.exists()
    assert git(brepo, "worktree", "list").count("\n") == 0      # only the main checkout


def test_old_session_logs_are_deleted_and_recent_ones_kept(brepo):
    brat(brepo, "config", "set", "deacon.log_retention_days", "1")
    logs = brepo / ".git" / "brat" / "sessions"
    logs.mkdir(parents=True)
    old, new = logs / "a1.log", logs / "b2.log"
    old.write_text("old\n")
    new.write_text("new\n")
    week = time.time() - 7 * 86400
    os.utime(old, (week, week))
    report = brat_json(brepo, "deacon", "run", "--once")
    assert [(a["action"], a["target"]) for a in report["actions"]] == [("deleted", str(old))]
    assert not old.exists() and new.exists()


def test_sync_runs_when_a_remote_is_configured_and_status_shows_the_deacon(tmp_path):
    hub = seeded_hub(tmp_path)
    a = clone(str(hub), tmp_path / "a", init=False)
    b = clone(str(hub), tmp_path / "b", init=False)
    brat(a, "init")
    brat(b, "init")
    cid = convoy(a, "Shared")
    report = brat_json(a, "deacon", "run", "--once")
    assert report["duties"]["sync"] == "ok"
    report = brat_json(b, "deacon", "run", "--once")
    assert [a_["action"] for a_ in report["actions"] if a_["duty"] == "sync"] == ["synced"]
    assert brat_json(b, "convoy", "show", cid)["id"] == cid
    st = brat_json(b, "status")
    assert st["deacon"]["actions"][0]["duty"] == "sync" and st["deacon"]["ran_at"]
    human = brat(b, "status").out
    assert "DEACON" in human and "sync synced" in human


def test_a_repository_without_a_remote_skips_sync_and_reports_recovery(brepo):
    report = brat_json(brepo, "deacon", "run", "--once")
    assert report["duties"]["sync"] == "skipped: no remote"
    assert report["actions"] == [] and report["event"] is None
    try:
        from git_brat.brat import witness
        have = hasattr(witness, "recover")
    except ImportError:
        have = False
    if not have:
        assert report["duties"]["sessions"] == "skipped: witness recovery unavailable"


def test_a_detached_deacon_loops_until_deacon_stop(brepo):
    from refinerykit import alive
    pid = brat_json(brepo, "deacon", "run", "--detach")["pid"]
    try:
        stamp = brepo / ".git" / "brat" / "deacon.json"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not stamp.exists():
            time.sleep(0.1)
        assert stamp.exists() and alive(pid)
        code, msg = fail(brepo, "deacon", "run", "--detach")
        assert code == 2 and "already runs" in msg
        assert brat_json(brepo, "deacon", "stop") == {"stopped": True, "pid": pid}
        assert not alive(pid)
    finally:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
    assert brat_json(brepo, "deacon", "stop") == {"stopped": False, "pid": None}


def test_the_deacon_recovers_a_sigkilled_witness_sessions(repo, tmp_path):
    from witnesskit import alive, kill_group, make_bench
    bench = make_bench(repo, tmp_path)
    # Unconfined: the agent must outlive its witness here, and is watched by the pids it
    # records; a sandboxed agent dies with its witness (its pid namespace goes with it).
    bench.config(witness__sandbox="none")
    t = bench.task(bench.convoy(), "Crash me", "write a.txt committed", "commit first part",
                   "hang-once")
    w = bench.start_witness("--once", "--lease-ttl", "60")
    pids = tmp_path / "record.jsonl.pids"
    try:
        bench.wait_for(lambda: (pids.exists() and len(pids.read_text().split()) >= 2)
                       or w.poll() is not None, 60)
        assert w.poll() is None
        sid = bench.runs()[-1]["session"]
        os.kill(w.pid, signal.SIGKILL)               # the witness dies; its agent does not
        w.wait(timeout=10)
    finally:
        kill_group(w)
    agents = [int(p) for p in pids.read_text().split()]
    first = git(repo, "rev-parse", f"brat/{t}")
    report = bench.json("deacon", "run", "--once")
    assert report["duties"]["sessions"] == "ok"
    assert [(a["duty"], a["action"], a["target"]) for a in report["actions"]
            if a["duty"] == "sessions"] == [("sessions", "recovered", sid)]
    bench.wait_for(lambda: not any(alive(p) for p in agents), 10)   # its agent was stopped
    assert bench.session(sid)["status"] == "crashed"
    assert bench.show(t)["status"] == "queued"                     # re-queued ...
    assert git(repo, "merge-base", "--is-ancestor", first, f"brat/{t}") == ""   # ... work kept
    st = bench.json("status")
    assert st["deacon"]["actions"][0]["target"] == sid
