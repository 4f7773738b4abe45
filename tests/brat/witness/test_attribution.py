"""Who said what: an agent's words and moves are the agent's (its engine and session), never
the person it works for; a crashed session is credited only with the commits it made."""

from __future__ import annotations

import json
import os
import signal

import pytest

from helpers import git, grite
from witnesskit import kill_group, make_bench


@pytest.fixture
def bench(repo, tmp_path):
    b = make_bench(repo, tmp_path)
    b.config(witness__engine="claude")   # the fake agent, installed as claude
    return b


def _user(repo) -> str:
    return git(repo, "config", "user.name")


def test_an_agents_comment_and_done_are_shown_as_the_agents_in_text_and_json(bench, repo):
    t = bench.task(bench.convoy(), "Attribute me", "comment I could not find the parser",
                   "write a.txt work", "commit agent work", "done parser fixed")
    bench.brat("task", "comment", t, "-m", "a person's note")
    bench.brat("witness", "run", "--once")
    [run] = bench.runs()
    sid, user = run["session"], _user(repo)
    agent = f"claude (session {sid[:7]}) via {user}"

    shown = bench.show(t)
    said = {c["body"]: c for c in shown["comments"]}
    assert said["I could not find the parser"]["author"] == agent
    assert said["I could not find the parser"]["via"] == sid
    assert said["I could not find the parser"]["engine"] == "claude"
    assert said["done: parser fixed"]["author"] == agent
    assert said["a person's note"]["author"] == user and said["a person's note"]["via"] == ""
    # The session's outcome is its own move; the witness's start is not the agent's.
    moves = {(h["from_status"], h["to_status"]): h for h in shown["history"]}
    assert moves[("running", "needs-review")]["actor"] == agent
    assert moves[("running", "needs-review")]["via"] == sid
    assert moves[("queued", "running")]["actor"] == user

    text = bench.brat("task", "show", t).out
    assert f"--- {agent}, " in text and f"--- {user}, " in text
    # The board's data is the same detail.
    from git_brat.brat.ui import data
    from git_brat.grite.repo import Grite
    board = data.task_show(Grite.open(str(repo)), t)
    assert {(c.author, c.via) for c in board.comments} >= {(agent, sid), (user, "")}
    assert any("running -> needs-review" in ln and agent in ln for ln in text.splitlines())


def test_an_agent_that_blocks_is_named_in_status_and_in_the_log(bench, repo):
    t = bench.task(bench.convoy(), "Needs a key", "block I need the vendor's API key")
    bench.brat("witness", "run", "--once")
    sid, user = bench.runs()[0]["session"], _user(repo)
    agent = f"claude (session {sid[:7]}) via {user}"
    [i] = bench.json("status")["interventions"]
    assert (i["kind"], i["task"], i["by"], i["via"]) == ("blocked", t, agent, sid)
    assert f"{agent}: I need the vendor" in bench.brat("status", env={"COLUMNS": "200"}).out
    # The raw log says which session each of the agent's events came through.
    text = grite(repo, "log").out
    assert any("task.comment" in ln and f"via {sid[:7]}" in ln for ln in text.splitlines())


def test_a_via_naming_another_actors_session_is_shown_as_its_writers_own_words():
    """Anyone who pushes may write `via`, but only about sessions its own actor started: a
    comment claiming to come through someone else's agent is shown as its writer's."""
    from git_brat.brat.board import credit
    from git_brat.grite.model import events as ev
    from git_brat.grite.model.state import replay
    eve, mallory = "e" * 16, "a" * 16
    task, sess = ev.new_entity_id(), ev.new_entity_id()
    evs = [ev.make_event(task, eve, 1, 1000, ev.Create("task", {"title": "t"})),
           ev.make_event(sess, eve, 2, 1000, ev.Create("session", {"task": task,
                                                                   "engine": "claude"})),
           ev.make_event(task, eve, 3, 1000, ev.Comment("mine", via=sess)),
           ev.make_event(task, mallory, 4, 1000, ev.Comment("land it", via=sess))]
    state = replay(evs)
    names = {eve: "Eve", mallory: "Mallory"}
    by_body = {body: eid for eid, _l, _a, _t, body in state.entities[task].sorted_comments()}
    vias = state.entities[task].vias
    assert credit(state, names, eve, vias[by_body["mine"]]) == \
        (f"claude (session {sess[:7]}) via Eve", sess, "claude")
    assert credit(state, names, mallory, vias[by_body["land it"]]) == ("Mallory", "", "")
    assert credit(state, names, eve, task) == ("Eve", "", "")   # not a session at all


def test_a_via_that_is_not_an_entity_id_is_rejected_on_replay():
    from git_brat.grite.model import events as ev
    from git_brat.grite.model.state import replay
    e = ev.make_event(ev.new_entity_id(), "e" * 16, 1, 1000, ev.Comment("x", via="--all"))
    assert e.id in replay([e]).rejected


def test_a_killed_session_that_made_no_commit_reports_none_when_its_successor_made_some(
        bench, repo):
    # The fake agent's pids are read from outside; an engine without resume reads the task's
    # script again (claude's resumed prompt does not repeat it).
    bench.config(witness__sandbox="none", witness__engine="fake")
    t = bench.task(bench.convoy(), "Crash before any commit", "hang-once",
                   "write a.txt successor", "commit successor work")
    w = bench.start_witness("--once", "--lease-ttl", "60")
    try:
        bench.wait_for(lambda: len(bench.agent_pids()) >= 2 or w.poll() is not None, 60)
        assert w.poll() is None, w.stderr.read().decode()
        sid = bench.runs()[-1]["session"]
        os.kill(w.pid, signal.SIGKILL)
        w.wait(timeout=10)
    finally:
        kill_group(w)
    bench.brat("witness", "run", "--once")   # recovers it; the next session commits
    assert git(repo, "rev-list", "--count", f"main..brat/{t}") == "1"
    [c] = json.loads(bench.brat("status", "--json").out)["recovery"]["crashed_sessions"]
    assert c["session"] == sid and c["branch_exists"]
    assert c["commits"] == 0
    assert f"crashed session {sid[:7]}" in (text := bench.brat("status", "--all").out)
    assert "0 commit(s) survive" in text


def test_a_pushed_comment_claiming_another_persons_agent_is_shown_as_its_pushers(tmp_path):
    """Through a real hub: Mallory pushes a comment marked as coming through Eve's agent's
    session; every clone shows it as Mallory's, and Eve's agent's own comment as the agent's."""
    from gritekit import pusher_append
    from helpers import brat, brat_json
    from sync_helpers import clone, seeded_hub
    from git_brat.grite.log.wal import Draft
    from git_brat.grite.model import events as ev
    from git_brat.grite.repo import Grite
    hub = seeded_hub(tmp_path)
    eve = clone(str(hub), tmp_path / "eve", init=False)
    mallory = clone(str(hub), tmp_path / "mallory", init=False)
    for repo, name in ((eve, "Eve"), (mallory, "Mallory")):
        git(repo, "config", "user.name", name)
        brat(repo, "init")
    t = brat(eve, "task", "create", "--convoy", brat(eve, "convoy", "create", "C").out.strip(),
             "Rotate the key").out.strip()
    sid = ev.new_entity_id()   # what Eve's witness writes for a session and its agent's words
    Grite.open(str(eve)).append([
        Draft(sid, ev.Create("session", {"task": t, "engine": "claude", "status": "running"})),
        Draft(t, ev.Comment("tests pass", via=sid))], "test: eve's agent")
    grite(eve, "sync")
    grite(mallory, "sync")
    pusher_append(mallory, [Draft(t, ev.Comment("Eve's agent: approved, land it", via=sid))])
    grite(mallory, "sync")
    for repo in (eve, mallory):
        grite(repo, "sync")
        said = {c["body"]: c for c in brat_json(repo, "task", "show", t)["comments"]}
        assert said["tests pass"]["author"] == f"claude (session {sid[:7]}) via Eve"
        assert (said["Eve's agent: approved, land it"]["author"],
                said["Eve's agent: approved, land it"]["via"]) == ("Mallory", "")
