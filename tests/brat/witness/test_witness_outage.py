"""A hub outage: witnesses that sync claim nothing locally, say so once, and claim once it is back."""

from __future__ import annotations

import signal
import time

import sync_helpers
from helpers import git, grite
from sync_helpers import Daemon, bare_hub, clone
from witnesskit import kill_group, make_bench


def _two_clones_over_a_daemon(tmp_path):
    from helpers import make_repo
    seed = make_repo(tmp_path / "seed")
    hub = bare_hub(tmp_path / "hub.git")
    git(seed, "push", "-q", str(hub), "main")
    d = Daemon(tmp_path).start()
    url = d.url("hub.git")
    a, b = clone(url, tmp_path / "a", init=False), clone(url, tmp_path / "b", init=False)
    ba, bb = make_bench(a, tmp_path), make_bench(b, tmp_path)
    bb.record, bb.env["FAKE_RECORD"] = ba.record, str(ba.record)
    c = ba.convoy()
    tasks = [ba.task(c, f"Task {i}", f"write f{i}.txt {i}", f"commit {i}") for i in range(2)]
    grite(a, "sync")
    grite(b, "sync")
    return d, hub, ba, bb, tasks


def _restart(d: Daemon, monkeypatch) -> Daemon:
    """The same hub back on the same port (the clones' URLs name it)."""
    port = d.port
    monkeypatch.setattr(sync_helpers, "free_port", lambda: port)
    return Daemon(d.base).start()


def test_during_a_hub_outage_no_clone_runs_anything_and_the_witness_says_so_once(
        tmp_path, monkeypatch):
    d, hub, ba, bb, tasks = _two_clones_over_a_daemon(tmp_path)
    d.stop()                                               # the hub goes away
    try:
        for bench in (ba, bb):
            proc = bench.start_witness("--once")
            try:
                _out, err = proc.communicate(timeout=120)
            finally:
                kill_group(proc)
            assert proc.returncode == 0, err.decode()
            text = err.decode()
            assert text.count("unreachable: claiming no task until it answers") == 1, text
            assert "could not lease" not in text
            # Nothing claimed: no lease taken locally, no session, the tasks still ready.
            assert git(bench.repo, "for-each-ref", "refs/grite/locks/") == ""
            assert bench.sessions() == []
            assert {bench.show(t)["status"] for t in tasks} == {"queued"}
        assert ba.runs() == []
        d = _restart(d, monkeypatch)                       # the hub is back
        proc = ba.start_witness("--once")
        try:
            _out, err = proc.communicate(timeout=120)
        finally:
            kill_group(proc)
        assert proc.returncode == 0, err.decode()
        assert sorted(r["task"] for r in ba.runs()) == sorted(tasks)
        assert len(git(hub, "for-each-ref", "refs/grite/locks/").splitlines()) == 2
    finally:
        d.stop()


def test_a_running_witness_waits_out_an_outage_and_claims_when_the_hub_answers(
        tmp_path, monkeypatch):
    d, hub, ba, _bb, tasks = _two_clones_over_a_daemon(tmp_path)
    ba.config(witness__poll="0.2")
    d.stop()
    proc = ba.start_witness()
    try:
        time.sleep(4)                                      # several looks for work, all refused
        assert ba.runs() == [] and git(ba.repo, "for-each-ref", "refs/grite/locks/") == ""
        d = _restart(d, monkeypatch)
        ba.wait_for(lambda: len(ba.runs()) == 2, timeout=120)
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=60)
    finally:
        kill_group(proc)
        d.stop()
    text = err.decode()
    assert text.count("unreachable: claiming no task until it answers") == 1, text
    assert "answers again: claiming" in text
    assert sorted(r["task"] for r in ba.runs()) == sorted(tasks)
