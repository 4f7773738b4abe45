"""Running the refinery: --detach and stop by pid, progress in status, pushing, the lease."""

from __future__ import annotations

import json
import os
import subprocess
import time


from bratkit import convoy, fail, status_of
from helpers import BIN, brat, brat_json, git, grite
from refinerykit import configure, log_subjects, outcomes, refine, request, two_clones
from sync_helpers import clone, seeded_hub


def _alive(pid: int) -> bool:
    from refinerykit import alive
    return alive(pid)


def _wait_for(pred, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_detached_refinery_shows_check_progress_and_stops_by_pid(brepo, tmp_path):
    git(brepo, "checkout", "-q", "-b", "work")
    pidfile = tmp_path / "check.pid"
    configure(brepo, check=f"echo $$ > {pidfile}; echo checking now; sleep 60")
    tid = request(brepo, convoy(brepo), "Long check", {"x.txt": "x\n"})
    started = brat_json(brepo, "refinery", "run", "--detach")
    pid = started["pid"]
    try:
        cur = _wait_for(lambda: [c for c in brat_json(brepo, "refinery", "status")["current"]
                                 if c["last_line"] == "checking now"], 60, "the check to start")
        assert cur[0]["task"] == tid and cur[0]["status"] == "checking"
        assert cur[0]["check_started_at"] and cur[0]["log"].endswith(".log")
        st = brat_json(brepo, "refinery", "status")
        assert st["running"] and st["pid"] == pid and st["lease"]["state"] == "held"
        fail(brepo, "refinery", "run", "--detach")                    # one at a time
        code, msg = fail(brepo, "refinery", "run", "--once")          # the lease says so too
        assert code == 5 and "refinery:" in msg
        check_pid = int(pidfile.read_text())
        stopped = brat_json(brepo, "refinery", "stop")
        assert stopped == {"stopped": True, "pid": pid}
    finally:
        if _alive(pid):
            os.kill(pid, 9)
    assert not _alive(pid)
    _wait_for(lambda: not _alive(check_pid), 10, "the check to be stopped")
    assert status_of(brepo, tid) == "needs-review"                   # put back, not lost
    st = brat_json(brepo, "refinery", "status")
    assert not st["running"] and [q["task"] for q in st["queue"]] == [tid]


def test_a_rejected_push_is_fetched_and_the_merge_redone_on_the_new_tip(tmp_path):
    hub = seeded_hub(tmp_path)
    user = clone(str(hub), tmp_path / "user", init=False)
    other = clone(str(hub), tmp_path / "other", init=False)
    brat(user, "init")
    git(user, "checkout", "-q", "-b", "work")
    flag = tmp_path / "pushed"
    # The first check run lets another machine land on the hub's main first.
    configure(user, check=f"if [ ! -e {flag} ]; then touch {flag}; cd {other} && "
                          f"git commit -q --allow-empty -m 'Landed elsewhere' && "
                          f"git push -q origin main; fi")
    tid = request(user, convoy(user), "Mine", {"mine.txt": "m\n"})
    report = refine(user)
    assert outcomes(report) == {tid: "merged"}
    assert report["passes"][0]["redone"] == 1
    assert git(hub, "rev-parse", "main") == git(user, "rev-parse", "main")
    assert log_subjects(hub)[:2] == ["Mine", "Landed elsewhere"]
    assert "pushed to origin" in brat_json(user, "refinery", "status")["recent"][0]["result"]


def test_requests_and_results_survive_a_restart_as_events(brepo):
    git(brepo, "checkout", "-q", "-b", "work")
    cid = convoy(brepo)
    tid = request(brepo, cid, "One", {"one.txt": "1\n"})
    refine(brepo)
    # Nothing local is needed to see what happened: drop the cache and the refinery's files.
    import shutil
    shutil.rmtree(brepo / ".git" / "brat")
    shutil.rmtree(brepo / ".git" / "grite" / "cache", ignore_errors=True)
    git(brepo, "worktree", "prune")
    st = brat_json(brepo, "refinery", "status")
    assert [(r["task"], r["status"]) for r in st["recent"]] == [(tid, "merged")]
    events = [e for e in grite_log(brepo) if "refinery." in e]
    assert any("refinery.start" in e for e in events) and any("refinery.merged" in e for e in events)


def grite_log(repo) -> list[str]:
    return git(repo, "log", "--format=%s", "refs/grite/wal").splitlines()


def test_hook_runs_do_nothing_unless_the_trigger_is_hook(brepo):
    git(brepo, "checkout", "-q", "-b", "work")
    tid = request(brepo, convoy(brepo), "Waits", {"w.txt": "w\n"})
    before = grite_log(brepo)
    assert brat(brepo, "refinery", "run", "--once", "--hook").out == ""
    assert grite_log(brepo) == before and status_of(brepo, tid) == "needs-review"
    configure(brepo, trigger="hook")
    brat(brepo, "refinery", "run", "--once", "--hook")
    assert status_of(brepo, tid) == "merged"


def test_a_sigkilled_refinery_is_taken_over_and_its_merge_finished(brepo, tmp_path):
    git(brepo, "checkout", "-q", "-b", "work")
    flag, pidfile = tmp_path / "first", tmp_path / "check.pid"
    configure(brepo, check=f"echo $$ > {pidfile}; if [ ! -e {flag} ]; then touch {flag}; "
                           f"echo first; sleep 60; fi")
    tid = request(brepo, convoy(brepo), "Survives", {"s.txt": "s\n"})
    pid = brat_json(brepo, "refinery", "run", "--detach")["pid"]
    try:
        _wait_for(lambda: [c for c in brat_json(brepo, "refinery", "status")["current"]
                           if c["last_line"] == "first"], 60, "the check to start")
        check_pid = int(pidfile.read_text())
        os.kill(pid, 9)
        _wait_for(lambda: not _alive(pid), 10, "the refinery to die")
    finally:
        if _alive(pid):
            os.kill(pid, 9)
    assert status_of(brepo, tid) == "merging"            # left half done
    report = refine(brepo)                                # takes the dead holder's lease over
    res = [(o["task"], o["result"]) for p in report["passes"] for o in p["outcomes"]]
    assert res == [(tid, "recovered"), (tid, "merged")]
    assert status_of(brepo, tid) == "merged"
    _wait_for(lambda: not _alive(check_pid), 10, "the orphaned check to be stopped")


def test_an_error_backs_off_as_an_event_and_the_request_is_retried_after(brepo):
    git(brepo, "checkout", "-q", "-b", "work")
    tid = request(brepo, convoy(brepo), "Patient", {"p.txt": "p\n"})
    main = git(brepo, "rev-parse", "main")
    git(brepo, "update-ref", "-d", "refs/heads/main")         # the target is gone for a while
    report = refine(brepo)
    t0 = time.monotonic()                                      # the error was recorded before
    [o] = [o for p in report["passes"] for o in p["outcomes"]]
    assert o["result"] == "error" and "main does not exist" in o["detail"]
    assert status_of(brepo, tid) == "needs-review"
    again = refine(brepo)                                      # backing off: not retried yet
    assert [o for p in again["passes"] for o in p["outcomes"]] == []
    [q] = brat_json(brepo, "refinery", "status")["queue"]
    assert q["status"] == "error" and q["attempts"] == 1
    git(brepo, "update-ref", "refs/heads/main", main)
    time.sleep(max(0.0, 10.5 - (time.monotonic() - t0)))      # the first backoff is 10 s
    assert outcomes(refine(brepo)) == {tid: "merged"}


def test_pushed_is_landed_even_when_the_users_checkout_cannot_follow(tmp_path):
    hub = seeded_hub(tmp_path)
    user = clone(str(hub), tmp_path / "user", init=False)
    brat(user, "init")
    (user / "README").write_text("my edit\n")                 # collides with the task
    tid = request(user, convoy(user), "Touch README", {"README": "agent\n"})
    before = git(user, "rev-parse", "main")
    report = refine(user)
    [o] = [o for p in report["passes"] for o in p["outcomes"]]
    assert o["result"] == "merged" and "not brought forward" in o["detail"]
    assert git(hub, "show", "main:README") == "agent"
    assert git(user, "rev-parse", "main") == before and (user / "README").read_text() == "my edit\n"
    assert status_of(user, tid) == "merged"


def test_one_refinery_per_repository_across_clones_through_the_hub(tmp_path):
    _hub, a, b = two_clones(tmp_path)
    git(a, "checkout", "-q", "-b", "work")
    configure(a, check="echo holding; sleep 60")
    request(a, convoy(a), "Slow", {"s.txt": "s\n"})
    pid = brat_json(a, "refinery", "run", "--detach")["pid"]
    waiter = None
    try:
        _wait_for(lambda: [c for c in brat_json(a, "refinery", "status")["current"]
                           if c["last_line"] == "holding"], 60, "the check to start")
        leases = grite(b, "lock", "status", "--remote", "origin", "--json").out
        assert '"resource":"refinery:hub"' in leases and '"state":"held"' in leases
        code, msg = fail(b, "refinery", "run", "--once")       # the other clone must wait
        assert code == 5 and "another refinery holds refinery:hub" in msg and "--wait" in msg
        # ... and can: it polls until the lease is free, then runs.
        waiter = subprocess.Popen([str(BIN / "git-brat"), "refinery", "run", "--once", "--wait",
                                   "120", "--json"], cwd=b, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, start_new_session=True)
        time.sleep(1)
        assert waiter.poll() is None
        assert brat_json(a, "refinery", "stop")["stopped"]
        out, err = waiter.communicate(timeout=120)
        assert waiter.returncode == 0, err
        assert json.loads(out)["passes"] and not json.loads(out)["busy"]
    finally:
        if _alive(pid):
            os.kill(pid, 9)
        if waiter is not None and waiter.poll() is None:
            os.killpg(waiter.pid, 9)
            waiter.wait()
    brat(b, "refinery", "run", "--once")                      # released: now it may run


def test_kick_starts_a_detached_run_only_with_the_hook_trigger(brepo):
    from git_brat.brat import board as model
    from git_brat.brat.cli.refinery import load_config
    from git_brat.brat.refinery.run import kick
    git(brepo, "checkout", "-q", "-b", "work")
    tid = request(brepo, convoy(brepo), "Kicked", {"k.txt": "k\n"})
    g = model.open_grite(str(brepo))
    assert kick(g, load_config(g)) is None                    # trigger = manual
    configure(brepo, trigger="hook")                          # git config: read afresh
    g = model.open_grite(str(brepo))
    pid = kick(g, load_config(g))
    try:
        _wait_for(lambda: status_of(brepo, tid) == "merged", 60, "the kicked refinery")
        _wait_for(lambda: not _alive(pid), 30, "it to exit")
    finally:
        if _alive(pid):
            os.kill(pid, 9)
