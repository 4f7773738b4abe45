"""What the witness and the deacon act on is their own: a half-removed tree is never taken for
work, a session that ended on another clone is never run again, no publish is lost, no commit an
agent made is left on no ref, and a record from the log never names what they signal or commit."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from helpers import BIN, git, grite, make_repo, status
from sync_helpers import bare_hub, clone, write_hook
from witnesskit import alive, kill_group, make_bench

FILES = 6000   # enough that `git worktree remove` takes long enough to be cut short


def _fault_git(tmp_path) -> str:
    """A directory whose `git` is the real one, except that the first `git worktree remove` is
    SIGKILLed once it has deleted some files, and so is the process that ran it (a power cut)."""
    d = tmp_path / "faultbin"
    d.mkdir()
    real = shutil.which("git")
    guard = tmp_path / "fault-fired"
    (d / "git").write_text(textwrap.dedent(f"""\
        #!{sys.executable}
        import os, signal, subprocess, sys, time
        args = sys.argv[1:]
        if "worktree" in args and "remove" in args and not os.path.exists({str(guard)!r}):
            open({str(guard)!r}, "w").close()
            tree = args[-1]
            count = lambda: sum(len(f) for _d, _s, f in os.walk(tree))
            total = count()
            p = subprocess.Popen([{real!r}, *args])
            deadline = time.monotonic() + 60
            while p.poll() is None and time.monotonic() < deadline and count() > total - 100:
                time.sleep(0.001)
            if p.poll() is None:
                os.kill(p.pid, signal.SIGKILL)
            p.wait()
            os.kill(os.getppid(), signal.SIGKILL)
            sys.exit(137)
        os.execv({real!r}, [{real!r}, *args])
        """))
    (d / "git").chmod(0o755)
    return str(d)


def _many_files(repo) -> int:
    for i in range(FILES):
        path = repo / "src" / f"d{i % 30}" / f"f{i}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"file {i}\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "many files")
    return len(git(repo, "ls-tree", "-r", "--name-only", "main").splitlines())


@pytest.mark.parametrize("finder", ["witness", "deacon"])
def test_a_work_tree_removal_killed_halfway_never_lands_a_deletion(repo, tmp_path, finder):
    files = _many_files(repo)
    bench = make_bench(repo, tmp_path)
    t = bench.task(bench.convoy(), "Small change", "write work.txt more", "commit work", "done ok")
    faulty = {"PATH": f"{_fault_git(tmp_path)}{os.pathsep}{bench.env['PATH']}"}
    w = subprocess.Popen([str(BIN / "git-brat"), "witness", "run", "--once"], cwd=repo,
                         env={**os.environ, **bench.env, **faulty}, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, start_new_session=True)
    try:
        w.wait(timeout=180)
    finally:
        kill_group(w)
    assert w.returncode == -signal.SIGKILL
    tree = repo / ".git" / "brat" / "worktrees" / t
    left = sum(len(f) for _d, _s, f in os.walk(tree / "src"))
    assert 0 < left < FILES   # the removal was cut short halfway
    if finder == "deacon":
        report = bench.json("deacon", "run", "--once")
        assert any(a["action"] == "pruned" and "interrupted" in a["detail"]
                   for a in report["actions"])
        assert not tree.exists()
    bench.brat("task", "reply", t, "-m", "also this")
    bench.brat("witness", "run", "--once")
    assert bench.show(t)["status"] == "needs-review"
    changed = git(repo, "diff", "--name-status", f"main...brat/{t}").splitlines()
    assert changed == ["M\twork.txt"] or changed == ["A\twork.txt"]
    assert len(git(repo, "ls-tree", "-r", "--name-only", f"brat/{t}").splitlines()) == files + 1


def test_an_agents_commits_off_its_branch_are_kept_and_found(repo, tmp_path):
    bench = make_bench(repo, tmp_path)
    script = textwrap.dedent("""\
        case "$1" in
          *DETACH*) git checkout -q --detach; echo important > d.txt; git add d.txt
                    git commit -qm "detached work";;
          *BRANCH*) git checkout -q -b my-own-branch; echo important > e.txt; git add e.txt
                    git commit -qm "work on my own branch";;
          *DROP*) echo lost > l.txt; git add l.txt; git commit -qm "dropped work"
                  git reset -q --hard HEAD~1; echo kept > k.txt; git add k.txt
                  git commit -qm "the work";;
        esac
        git brat task done -m finished
        """)
    # Unconfined: a sandboxed session's only way out is its branch (its HEAD and other refs are
    # never followed: test_session_quarantine.py), so off-branch commits stay in its quarantine.
    bench.config(engines__sh__command=json.dumps(["sh", "-c", script, "agent", "{prompt}"]),
                 witness__engine="sh", witness__max_retries="0", witness__sandbox="none")
    c = bench.convoy()
    detach = bench.task(c, "DETACH: commit on a detached HEAD")
    branch = bench.task(c, "BRANCH: commit on another branch")
    drop = bench.task(c, "DROP: reset a commit away")
    bench.brat("witness", "run", "--once")
    for tid, name, text in ((detach, "d.txt", "important"), (branch, "e.txt", "important"),
                            (drop, "k.txt", "kept")):
        assert bench.show(tid)["status"] == "needs-review"   # not "done without any commit"
        assert git(repo, "show", f"brat/{tid}:{name}") == text
    kept = f"refs/brat/kept/{drop}/0"
    assert git(repo, "log", "-1", "--format=%s", kept) == "dropped work"
    [sess] = bench.sessions(drop)
    assert bench.session(sess["id"])["kept"] == [kept]       # and reported
    git(repo, "gc", "-q", "--prune=now")
    assert git(repo, "show", f"{kept}:l.txt") == "lost"


def test_a_forged_session_record_never_names_a_process_a_checkout_or_a_log(repo, tmp_path):
    from git_brat import process
    from git_brat.brat import board as model
    from git_brat.grite.log.wal import Draft
    from git_brat.grite.model import events as ev
    bench = make_bench(repo, tmp_path)
    t = bench.task(bench.convoy(), "A task", "write a.txt a", "commit a", "done ok")
    (repo / ".env").write_text("PASSWORD=hunter2\n")
    secret_log = tmp_path / "secret.log"
    secret_log.write_text("token SECRET\n")
    before_head, before_status = git(repo, "rev-parse", "HEAD"), status(repo)
    victim = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        g = model.open_grite(str(repo))
        forged = ev.new_entity_id()
        g.append([Draft(forged, ev.Create(model.SESSION, {
            "task": t, "status": "running", "host": process.hostname(), "pid": victim.pid,
            "pid_start": 0, "witness_pid": victim.pid, "witness_start": 0,
            "worktree": str(repo), "branch": "main", "engine": "fake"}))], "forged")
        for _ in range(2):
            bench.json("deacon", "run", "--once")
            bench.brat("witness", "run", "--once")
        time.sleep(0.5)
        assert victim.poll() is None                       # never signalled
        assert git(repo, "rev-parse", "HEAD") == before_head and status(repo) == before_status
        sess = bench.session(forged)
        assert "SECRET" not in json.dumps(sess) and not sess.get("output_tail")
    finally:
        victim.kill()
        victim.wait(timeout=10)


def _two_clones(tmp_path, pre_receive: str = ""):
    hub = bare_hub(tmp_path / "hub.git")
    if pre_receive:
        write_hook(hub / "hooks", "pre-receive", pre_receive)
    seed = tmp_path / "seed"
    make_repo(seed)
    git(seed, "push", "-q", str(hub), "main")
    a = clone(str(hub), tmp_path / "a", init=False)
    b = clone(str(hub), tmp_path / "b", init=False)
    ba, bb = make_bench(a, tmp_path), make_bench(b, tmp_path)
    bb.env["FAKE_RECORD"] = str(ba.record)   # one record of every agent run, across both
    return ba, bb


def test_a_session_that_ended_on_another_clone_is_fetched_never_run_again(tmp_path):
    ba, bb = _two_clones(tmp_path)
    t = ba.task(ba.convoy(), "Long", "sleep 4", "write w.txt a", "commit w", "done ok")
    grite(ba.repo, "sync")
    w = ba.start_witness("--once")
    try:
        ba.wait_for(lambda: ba.runs(), 60)
        grite(ba.repo, "sync")            # B sees the session running
        grite(bb.repo, "sync")
        assert bb.show(t)["status"] == "running"
        w.wait(timeout=120)
    finally:
        kill_group(w)
    assert ba.show(t)["status"] == "needs-review"
    for args in (("witness", "run", "--once"), ("deacon", "run", "--once")):
        bb.brat(*args)
        assert len([r for r in ba.runs() if r["task"] == t]) == 1
        [sess] = bb.sessions(t)
        assert sess["status"] == "done"
    assert bb.show(t)["status"] == "needs-review"


def test_two_sessions_ending_together_both_reach_the_hub(tmp_path):
    # The hub takes its time over every push of a log: two pushes of one ref overlap.
    slow = "#!/bin/sh\nif grep -q ' refs/grite/replicas/'; then sleep 3; fi\nexit 0\n"
    ba, bb = _two_clones(tmp_path, slow)
    c = ba.convoy()
    tasks = [ba.task(c, f"Task {i}", "sleep 1", f"write f{i}.txt {i}", f"commit {i}", "done ok")
             for i in range(2)]
    grite(ba.repo, "sync")
    ba.brat("witness", "run", "--once", "--max-sessions", "2")
    grite(bb.repo, "sync")
    for t in tasks:
        assert bb.show(t)["status"] == "needs-review"


def test_a_child_the_agent_moved_out_of_its_group_ends_with_the_session(repo, tmp_path):
    bench = make_bench(repo, tmp_path)
    # Watched by the pids the fake agent records: in a sandbox those are its own pid
    # namespace's (tests/brat/sandbox/ proves a sandboxed session's processes end with it).
    bench.config(witness__sandbox="none")
    t = bench.task(bench.convoy(), "Daemonize", "orphan", "write a.txt a", "commit a", "done ok")
    orphans = tmp_path / "record.jsonl.orphans"
    try:
        bench.brat("witness", "run", "--once")
        [pid] = [int(p) for p in orphans.read_text().split()]
        assert bench.show(t)["status"] == "needs-review"
        bench.wait_for(lambda: not alive(pid), 10)
    finally:
        for p in (orphans.read_text().split() if orphans.exists() else []):
            try:
                os.kill(int(p), signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_a_witness_that_waits_for_another_clones_log_gives_the_task_back_unused(repo, tmp_path):
    """A claim given back before any work is a withdrawal: the next witness asks about the
    session that worked before it, never about the one that only waited (each waiting witness
    would otherwise send the next one waiting for a log that never comes)."""
    bench = make_bench(repo, tmp_path)
    t = bench.task(bench.convoy(), "Waits", "write w.txt a", "commit w", "done ok")
    res = f"task:{t}"
    gone = "session:" + "9" * 32                 # a session of a clone whose log is not here
    grite(repo, "lock", "acquire", res, "--holder", gone)
    grite(repo, "lock", "release", res, "--holder", gone)
    proc = bench.brat("witness", "run", "--once")
    assert "waiting for its log" in proc.out + proc.err and bench.runs() == []
    newest = json.loads(grite(repo, "lock", "status", res, "--json").out)
    newest = newest[0] if isinstance(newest, list) else newest
    assert newest["last_action"] == "withdraw" and newest["state"] == "released"
    assert newest["token"] == 2                   # claimed once, not again and again

    from git_brat.brat.witness import pick
    from git_brat.grite.repo import Grite
    g = Grite.open(str(repo))
    grite(repo, "lock", "acquire", res, "--holder", "session:" + "8" * 32)
    before = pick.previous_session(g, res)
    assert before.session == "9" * 32 and before.released


@pytest.mark.parametrize("pushed", [True, False])
def test_a_clone_whose_own_attempt_was_cut_short_lands_the_work_another_clone_finished(
        tmp_path, pushed):
    """Clone A's session on the task died at the start (its branch brat/<task> stayed at the
    base); clone B ran the task to review. A's refinery lands B's work once B's branch reaches
    it, and until then lands nothing: a local branch behind the head the task was finished at
    is not what the task is."""
    ba, bb = _two_clones(tmp_path)
    t = ba.task(ba.convoy(), "Finished on B", "write b.txt from-b", "commit b", "done ok")
    git(ba.repo, "branch", f"brat/{t}", "main")        # what A's cut-short attempt left
    grite(ba.repo, "sync")
    grite(bb.repo, "sync")
    bb.brat("witness", "run", "--once")
    assert bb.show(t)["status"] == "needs-review"
    hub = tmp_path / "hub.git"
    if not pushed:                                   # B's branch never reached the hub
        git(hub, "update-ref", "-d", f"refs/heads/brat/{t}")
    grite(ba.repo, "sync")
    if pushed:   # A's human approves what B's agent finished (not A's cut-short branch)
        ba.brat("task", "approve", t)
    report = json.loads(ba.brat("refinery", "run", "--once", "--json").out)
    results = [o["result"] for p in report["passes"] for o in p["outcomes"]]
    if pushed:
        assert results == ["merged"]
        assert git(hub, "show", "main:b.txt") == "from-b"
        assert ba.show(t)["status"] == "merged"
    else:
        assert results == [] and ba.show(t)["status"] == "needs-review"
        assert git(hub, "rev-parse", "main") == git(ba.repo, "rev-parse", "origin/main")
        unreachable = ba.json("refinery", "status")["unreachable"]
        assert list(unreachable) == [t] and "the head it was finished at" in unreachable[t]


def test_a_task_whose_last_lease_expired_unrecorded_is_run_not_waited_on(repo, tmp_path):
    """A witness killed between taking a task's lease and recording its session leaves a
    lease that expires (the deacon marks it so): no log of that session will ever come, so
    the next witness runs the task instead of waiting for it."""
    bench = make_bench(repo, tmp_path)
    t = bench.task(bench.convoy(), "Orphaned lease", "write o.txt o", "commit o", "done ok")
    res = f"task:{t}"
    grite(repo, "lock", "acquire", res, "--holder", "session:" + "7" * 32, "--ttl", "0.2")
    time.sleep(6)                                 # past the lease and the skew margin
    grite(repo, "lock", "gc")
    assert json.loads(grite(repo, "lock", "status", res, "--json").out)[0]["last_action"] == "expire"
    bench.config(witness__expired_wait="3")       # the lease ended 6 s ago: waited out
    bench.brat("witness", "run", "--once")
    assert len(bench.runs()) == 1 and bench.show(t)["status"] == "needs-review"


def test_a_task_finished_on_a_clone_whose_witness_died_unpublished_is_not_run_again(tmp_path):
    """Clone A's session finished the task, then A's witness was SIGKILLed before its log
    reached the hub: the lease expires with no release. B takes the lease but waits
    (witness.expired_wait) for A's log instead of running the task again on its old view;
    once A publishes, B sees the task done and never runs it."""
    ba, bb = _two_clones(tmp_path)
    # The session must end within its 2 s lease: pasta's start (an outbound sandbox's network,
    # ~0.2 s, more on a busy machine) is not what this test is about.
    ba.config(witness__sandbox_network="open")
    t = ba.task(ba.convoy(), "Finished, unpublished", "write f.txt f", "commit f", "done ok")
    grite(ba.repo, "sync")
    grite(bb.repo, "sync")
    # From now on the hub sits on every push of a log, then refuses it: A's witness ends the
    # session, and is killed while it tries to publish (it releases the lease only after).
    hub = tmp_path / "hub.git"
    write_hook(hub / "hooks", "pre-receive",
               "#!/bin/sh\nif grep -q ' refs/grite/replicas/'; then sleep 8; exit 1; fi\n"
               "exit 0\n")
    w = ba.start_witness("--once", "--lease-ttl", "2")
    try:
        ba.wait_for(lambda: [s for s in ba.sessions(t) if s["status"] == "done"], 60, 0.05)
    finally:
        kill_group(w)
    assert ba.show(t)["status"] == "needs-review"
    def lease():
        shown = json.loads(grite(ba.repo, "lock", "status", f"task:{t}", "--json").out)
        return shown[0] if isinstance(shown, list) else shown
    assert lease()["last_action"] != "release", lease()  # killed before it let go
    ba.wait_for(lambda: lease()["state"] == "expired", 60, 0.5)   # and the skew margin
    bb.config(witness__expired_wait="60")
    out = bb.brat("witness", "run", "--once")
    assert "its lease expired" in out.out + out.err, out.out + out.err
    assert len([r for r in ba.runs() if r["task"] == t]) == 1
    os.unlink(hub / "hooks" / "pre-receive")
    grite(ba.repo, "sync")                       # A publishes at last
    bb.brat("witness", "run", "--once")
    assert len([r for r in ba.runs() if r["task"] == t]) == 1
    assert bb.show(t)["status"] == "needs-review"


def test_a_task_left_running_by_a_session_that_lost_its_lease_is_requeued(repo, tmp_path):
    """A session whose lease another holder took ends without moving its task (the task is no
    longer its to move); when the taker never moves it either, nothing would ever end that
    "running": recovery puts it back in the queue."""
    bench = make_bench(repo, tmp_path)
    t = bench.task(bench.convoy(), "Stranded", "sleep 30", "done ok")
    res = f"task:{t}"
    w = bench.start_witness("--once", "--lease-ttl", "2")
    try:
        bench.wait_for(lambda: bench.runs(), 60)
        grite(repo, "lock", "acquire", res, "--force", "--holder", "someone-else")
        w.wait(timeout=60)
    finally:
        kill_group(w)
    grite(repo, "lock", "release", res, "--holder", "someone-else")
    [sess] = bench.sessions(t)
    assert sess["status"] == "failed" and "lease was lost" in sess["reason"]
    assert bench.show(t)["status"] == "running"          # what the lost lease left
    bench.brat("deacon", "run", "--once")
    shown = bench.show(t)
    assert shown["status"] == "queued" and "no session runs it" in shown["reason"]


def test_a_lease_record_dated_far_ahead_delays_a_task_no_longer_than_the_wait():
    """The expiry a fetched lease record states is its writer's word: one dated years ahead
    holds the task back witness.expired_wait at most, like one that ended now."""
    from git_brat.brat.witness import pick
    from git_brat.process import now_ms
    ahead = pick.Previous("9" * 32, released=False, ended_ms=now_ms() + 10 ** 12)
    assert 0 < pick.log_wait(ahead, 60.0, float("-inf")) <= 60.0
    long_ago = pick.Previous("9" * 32, released=False, ended_ms=now_ms() - 120_000)
    assert pick.log_wait(long_ago, 60.0, float("-inf")) == 0.0
    assert pick.log_wait(long_ago._replace(released=True), 60.0, float("-inf")) is None
