"""Exactly one witness anywhere runs a task: on one clone, and on two clones sharing a hub."""

from __future__ import annotations

import json
from collections import Counter

from helpers import brat, git, grite, run
from sync_helpers import Daemon, bare_hub, clone
from witnesskit import kill_group, make_bench


def _finish(procs) -> list[dict]:
    out = []
    try:
        for p in procs:
            stdout, stderr = p.communicate(timeout=180)
            assert p.returncode == 0, stderr.decode()
            out.append(json.loads(stdout))
    finally:
        for p in procs:
            kill_group(p)
    return out


def test_two_witnesses_on_one_clone_never_run_a_task_twice(repo, tmp_path):
    bench = make_bench(repo, tmp_path)
    c = bench.convoy()
    tasks = [bench.task(c, f"Task {i}", "sleep 0.3", f"write f{i}.txt {i}", f"commit {i}")
             for i in range(6)]
    procs = [bench.start_witness("--once", "--max-sessions", "3", "--json") for _ in range(2)]
    summaries = _finish(procs)
    ran = Counter(r["task"] for r in bench.runs())
    assert ran == Counter(tasks)     # every task exactly once
    assert sum(s["started"] for s in summaries) == 6
    for t in tasks:
        assert bench.show(t)["status"] == "needs-review"


def test_two_clones_through_a_hub_over_git_daemon_never_run_a_task_twice(tmp_path):
    served = tmp_path / "served"
    served.mkdir()
    hub = bare_hub(served / "hub.git")
    seed = tmp_path / "seed"
    from helpers import make_repo
    make_repo(seed)
    git(seed, "push", "-q", str(hub), "main")
    d = Daemon(served).start()
    try:
        a = clone(d.url("hub.git"), tmp_path / "a", init=False)
        b = clone(d.url("hub.git"), tmp_path / "b", init=False)
        ba = make_bench(a, tmp_path)
        bb = make_bench(b, tmp_path)
        bb.record = ba.record   # one record of every agent run, across both clones
        bb.env["FAKE_RECORD"] = str(ba.record)
        c = ba.convoy()
        tasks = [ba.task(c, f"Task {i}", "sleep 0.5", f"write f{i}.txt {i}", f"commit {i}")
                 for i in range(6)]
        grite(a, "sync")
        grite(b, "sync")
        assert len(bb.json("task", "ready")) == 6
        procs = [ba.start_witness("--once", "--max-sessions", "3", "--json"),
                 bb.start_witness("--once", "--max-sessions", "3", "--json")]
        _finish(procs)
        ran = Counter(r["task"] for r in ba.runs())
        assert ran == Counter(tasks)
        # The leases were decided on the hub: its lock refs record every grant.
        locks = run(["git", "for-each-ref", "--format=%(refname)", "refs/grite/locks/"],
                    served / "hub.git").out.split()
        assert len(locks) == 6
    finally:
        d.stop()


def test_a_running_witness_picks_up_tasks_another_clone_created(tmp_path):
    hub = bare_hub(tmp_path / "hub.git")
    from helpers import make_repo
    seed = make_repo(tmp_path / "seed")
    git(seed, "push", "-q", str(hub), "main")
    a = clone(str(hub), tmp_path / "a", init=False)
    b = clone(str(hub), tmp_path / "b", init=False)
    ba, bb = make_bench(a, tmp_path / "ra"), make_bench(b, tmp_path / "rb")
    (tmp_path / "ra").mkdir(exist_ok=True)
    (tmp_path / "rb").mkdir(exist_ok=True)
    bb.config(deacon__sync_interval="0.5", witness__poll="0.3")
    w = bb.start_witness()
    try:
        t = ba.task(ba.convoy(), "Made on A", "write a.txt from-b", "commit a")
        grite(a, "sync")
        bb.wait_for(lambda: bb.runs() and bb.json("task", "show", t)["status"] == "needs-review",
                    60, every=0.5)
        w.terminate()
        assert w.wait(timeout=30) == 0
    finally:
        kill_group(w)
    grite(a, "sync")
    assert ba.show(t)["status"] == "needs-review"    # B published what it did
    assert ba.runs() == [] and len(bb.runs()) == 1


def test_a_clone_syncing_two_remotes_still_never_runs_a_task_another_clone_runs(tmp_path):
    """Leases are decided on the committed [locks] remote, whatever else a clone syncs with."""
    from helpers import make_repo
    seed = make_repo(tmp_path / "seed")
    (seed / ".brat").mkdir()
    (seed / ".brat" / "config.toml").write_text('[locks]\nremote = "origin"\n')
    git(seed, "add", "-A")
    git(seed, "commit", "-qm", "brat: leases are decided on origin")
    hub = bare_hub(tmp_path / "hub.git")
    git(seed, "push", "-q", str(hub), "main")
    backup = tmp_path / "backup.git"
    git(tmp_path, "clone", "-q", "--bare", str(hub), str(backup))
    a = clone(str(hub), tmp_path / "a", init=False)
    b = clone(str(hub), tmp_path / "b", init=False)
    brat(a, "trust")   # the committed [locks] remote, approved in each clone
    brat(b, "trust")
    ba, bb = make_bench(a, tmp_path), make_bench(b, tmp_path)
    git(a, "remote", "add", "backup", str(backup))
    grite(a, "remote", "add-sync", "backup")
    bb.record, bb.env["FAKE_RECORD"] = ba.record, str(ba.record)
    c = ba.convoy()
    tasks = [ba.task(c, f"Task {i}", "sleep 0.5", f"write f{i}.txt {i}", f"commit {i}")
             for i in range(4)]
    grite(a, "sync")
    grite(b, "sync")
    procs = [ba.start_witness("--once", "--max-sessions", "2", "--json"),
             bb.start_witness("--once", "--max-sessions", "2", "--json")]
    _finish(procs)
    locks = run(["git", "for-each-ref", "--format=%(refname)", "refs/grite/locks/"], hub).out.split()
    # What the hub decided, should it ever be wrong: who held which task, by token.
    trail = {ref.rpartition("/")[2][:7]: git(hub, "log", "--format=%s", ref).splitlines()
             for ref in locks}
    assert Counter(r["task"] for r in ba.runs()) == Counter(tasks), trail
    assert len(locks) == 4, trail     # every lease was decided on origin, none locally
