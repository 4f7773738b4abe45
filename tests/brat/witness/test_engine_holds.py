"""An engine hold (a session paused on a usage limit holds its engine on every clone) is believed
only from this clone's own records or a key it trusts, and shown as ignored otherwise; a human
lifts a hold early with `git brat engine release`."""

from __future__ import annotations

import json
import time

import pytest

from gritekit import pusher_append
from helpers import brat, git, grite
from witnesskit import make_bench

HOUR = 3_600_000


def _paused_session(engine: str, until: int, task: str = "") -> tuple[str, object]:
    """What a witness writes for a session that met a usage limit (a Draft)."""
    from git_brat.grite.log.wal import Draft
    from git_brat.grite.model import events as ev
    sid = ev.new_entity_id()
    return sid, Draft(sid, ev.Create("session", {
        "task": task, "status": "paused", "engine": engine, "ended_at": until - HOUR,
        "paused_until": until, "paused_why": f"{engine} usage limit"}))


def _log_refs(repo) -> str:
    return git(repo, "for-each-ref", "refs/grite/")


@pytest.mark.slow
def test_a_pushers_forged_pause_holds_no_engine_here_until_its_key_is_trusted(tmp_path):
    """Through a real hub: Mallory (a key of her own, valid signatures) pushes a session
    'paused' on fake's limit for an hour. The victim's witness starts work all the same, and
    status says the pause is not honoured and why; once the victim trusts Mallory's replica,
    the same record holds the engine."""
    from sync_helpers import clone, replica_id, seeded_hub
    hub = seeded_hub(tmp_path)
    victim = clone(str(hub), tmp_path / "victim", init=False)
    mallory = clone(str(hub), tmp_path / "mallory", init=False)
    bench = make_bench(victim, tmp_path / "bench")
    brat(mallory, "init")
    grite(victim, "sync")
    grite(mallory, "sync")
    sid, draft = _paused_session("fake", int(time.time() * 1000) + HOUR)
    pusher_append(mallory, [draft])
    grite(mallory, "sync")
    grite(victim, "sync")

    [hold] = bench.json("status")["engine_holds"]
    assert (hold["engine"], hold["session"], hold["believed"]) == ("fake", sid, False)
    assert "does not trust" in hold["ignored"] and "git grite trust add" in hold["ignored"]
    assert "ignored: paused until" in bench.brat("status").out
    t = bench.task(bench.convoy(), "Greet", "write hello.txt hi", "commit greet")
    ran = bench.brat("witness", "run", "--once")
    assert "not honoured" in ran.out + ran.err
    assert "engine fake paused until" not in ran.out + ran.err
    assert bench.show(t)["status"] == "needs-review"

    grite(victim, "trust", "add", replica_id(mallory))
    [hold] = bench.json("status")["engine_holds"]
    assert (hold["believed"], hold["ignored"]) == (True, "")
    t2 = bench.task(bench.convoy("Other"), "Another", "write other.txt o", "commit other")
    held = bench.brat("witness", "run", "--once")
    assert "engine fake paused until" in held.out + held.err
    assert bench.show(t2)["status"] == "queued"


def test_a_pushers_edit_of_a_trusted_pause_moves_no_hold_onto_another_engine(tmp_path):
    """A trusted clone's pause of claude, re-pointed at fake by a pusher's SetFields, holds
    neither: the record's engine is now Mallory's word, not the victim's own."""
    from git_brat.grite.log.wal import Draft
    from git_brat.grite.model import events as ev
    from git_brat.grite.repo import Grite
    victim, mallory = _two_clones(tmp_path)
    sid, draft = _paused_session("claude", int(time.time() * 1000) + HOUR)
    Grite.open(str(victim)).append([draft], "test: the victim's own pause")
    [hold] = _exchange(victim, mallory, [Draft(sid, ev.SetFields({"engine": "fake"}))])
    assert (hold["engine"], hold["believed"]) == ("fake", False)
    assert hold["ignored"].startswith("not honoured here: its engine was written by actor")
    out = brat(victim, "engine", "release", "fake", check=False)
    assert out.returncode == 3 and "not honoured here" in out.err


@pytest.mark.slow
def test_engine_release_lifts_a_hold_and_the_task_it_paused_runs_on_the_next_pass(repo, tmp_path):
    from git_brat.grite.log.wal import Draft
    from git_brat.grite.model import events as ev
    from git_brat.grite.repo import Grite
    bench = make_bench(repo, tmp_path)
    t = bench.task(bench.convoy(), "Greet", "write hello.txt hi", "commit greet")
    until = int(time.time() * 1000) + HOUR
    sid, draft = _paused_session("fake", until, task=t)
    Grite.open(str(repo)).append([draft, Draft(t, ev.SetFields({
        "session": sid, "paused_until": until, "retry_after": until,
        "paused_why": "fake usage limit", "limit_pauses": 1}))], "test: a witness's pause")
    assert bench.show(t)["paused"].startswith("paused until")
    held = bench.brat("witness", "run", "--once")
    assert "engine fake paused until" in held.out + held.err
    said = bench.brat("status").out
    assert "ENGINE HOLDS" in said and "$ git brat engine release fake" in said

    (repo / "sub").mkdir()
    before, tree = _log_refs(repo), git(repo, "status", "--porcelain")
    for bad in ("a b", "../x"):   # not an engine name: refused, nothing written
        out = bench.brat("engine", "release", bad, "--json", check=False, cwd=repo / "sub")
        assert out.returncode == 2 and out.out == "" and len(out.err.splitlines()) == 1
    other = bench.brat("engine", "release", "codex", "--json", check=False, cwd=repo / "sub")
    assert other.returncode == 3 and "not held" in other.err and other.out == ""
    assert _log_refs(repo) == before

    done = json.loads(bench.brat("engine", "release", "fake", "--json", cwd=repo / "sub").out)
    assert (done["engine"], done["sessions"], done["tasks"]) == ("fake", [sid], [t])
    assert bench.json("status")["engine_holds"] == []
    task = bench.show(t)
    assert task["paused"] == "" and task["status"] == "queued"
    again = bench.brat("engine", "release", "fake", check=False)
    assert again.returncode == 3 and "not held" in again.err
    assert git(repo, "status", "--porcelain") == tree

    ran = json.loads(bench.brat("witness", "run", "--once", "--json").out)
    assert [e["task"] for e in ran["ended"]] == [t]
    assert bench.show(t)["status"] == "needs-review"


def test_a_hold_lifted_by_a_pusher_still_holds(tmp_path):
    """Lifting is a record too: one written by a key this clone does not trust lifts nothing."""
    from git_brat.grite.log.wal import Draft
    from git_brat.grite.model import events as ev
    from git_brat.grite.repo import Grite
    victim, mallory = _two_clones(tmp_path)
    sid, draft = _paused_session("claude", int(time.time() * 1000) + HOUR)
    Grite.open(str(victim)).append([draft], "test: the victim's own pause")
    [hold] = _exchange(victim, mallory, [Draft(sid, ev.SetFields({
        "hold_lifted_at": int(time.time() * 1000)}))])
    assert (hold["session"], hold["believed"]) == (sid, True)
    assert brat(victim, "engine", "release", "claude").returncode == 0


def _two_clones(tmp_path):
    """The victim and Mallory, two clones of one hub, each after `git brat init`."""
    from sync_helpers import clone, seeded_hub
    hub = seeded_hub(tmp_path)
    victim = clone(str(hub), tmp_path / "victim", init=False)
    mallory = clone(str(hub), tmp_path / "mallory", init=False)
    for r in (victim, mallory):
        brat(r, "init")
    return victim, mallory


def _exchange(victim, mallory, forged) -> list[dict]:
    """The victim's records reach Mallory, hers (forged, signed as herself) the victim; the
    engine holds the victim's status then shows."""
    from helpers import brat_json
    grite(victim, "sync")
    grite(mallory, "sync")
    pusher_append(mallory, forged)
    grite(mallory, "sync")
    grite(victim, "sync")
    return brat_json(victim, "status")["engine_holds"]
