"""Stories for `git brat convoy …` and `git brat task …`: create, list, show, move, depend."""

from __future__ import annotations

import time

import pytest

from bratkit import convoy, events_of, fail, log_commits, move, status_of, task
from helpers import ROOT, brat, brat_json, status, wal_tip


def test_convoy_story_create_list_show(brepo):
    assert brat(brepo, "convoy", "list").out.strip() == "no convoys"
    cid = convoy(brepo, "Release 1.0", "-b", "Everything for the release.")
    assert len(cid) == 32
    [c] = brat_json(brepo, "convoy", "list")
    assert (c["id"], c["title"], c["status"], c["total"]) == (cid, "Release 1.0", "active", 0)
    a = task(brepo, cid[:8], "Write the changelog", "--priority", "1", "--paths", "CHANGELOG.md")
    b = task(brepo, cid[:8], "Tag the release", "--needs", a[:8], "-b", "git tag v1.0")
    d = brat_json(brepo, "convoy", "show", cid[:7])
    assert d["body"] == "Everything for the release."
    assert [t["id"] for t in d["tasks"]] == [a, b]
    assert d["counts"]["queued"] == 2 and d["total"] == 2 and d["ready"] == 1
    assert set(d["counts"]) == {"queued", "running", "needs-review", "merging", "merged",
                                "blocked", "failed", "dropped"}
    human = brat(brepo, "convoy", "show", cid[:7]).out
    assert "Release 1.0" in human and "Write the changelog" in human and "[active]" in human
    assert "2 (2 queued); 1 ready" in human
    assert cid[:7] in brat(brepo, "convoy", "list").out
    created = brat_json(brepo, "convoy", "create", "Second", "--json")
    assert created["title"] == "Second" and created["tasks"] == []
    assert [c["title"] for c in brat_json(brepo, "convoy", "list", "--status", "active")] == \
        ["Release 1.0", "Second"]
    assert brat_json(brepo, "convoy", "list", "--status", "landed") == []


def test_task_story_create_show_list_comment(brepo):
    cid = convoy(brepo, "Parser")
    a = task(brepo, cid, "Tokenizer", "--priority", "1", "--paths", "src/lex/*.py",
             "--paths", "tests/lex/")
    b = brat_json(brepo, "task", "create", "--convoy", cid, "Grammar", "--needs", a[:7],
                  "-b", "Write the grammar.", "--json")
    assert b["status"] == "queued" and b["needs"] == [a] and b["body"] == "Write the grammar."
    assert b["allowed"] == ["running", "blocked", "dropped"] and not b["ready"]
    t = brat_json(brepo, "task", "show", a)
    assert (t["title"], t["priority"], t["paths"], t["convoy"], t["ready"]) == \
        ("Tokenizer", 1, ["src/lex/*.py", "tests/lex/"], cid, True)
    assert t["dependents"] == [b["id"]]
    assert [h["to_status"] for h in t["history"]] == ["queued"]
    brat(brepo, "task", "comment", a[:6], "-m", "Use a hand-written lexer.\nNo regexes.")
    t = brat_json(brepo, "task", "show", a)
    assert t["comments"][0]["body"] == "Use a hand-written lexer.\nNo regexes."
    assert "Use a hand-written lexer." in brat(brepo, "task", "show", a).out
    assert [x["id"] for x in brat_json(brepo, "task", "list")] == [a, b["id"]]
    assert [x["id"] for x in brat_json(brepo, "task", "list", "--convoy", cid[:6])] == [a, b["id"]]
    move(brepo, a, "running")
    assert [x["id"] for x in brat_json(brepo, "task", "list", "--status", "running")] == [a]
    assert [x["id"] for x in brat_json(brepo, "task", "list", "--status", "running",
                                       "--status", "queued")] == [a, b["id"]]
    lines = brat(brepo, "task", "list").out.splitlines()
    assert len(lines) == 2 and "running" in lines[0] and all(len(l) <= 80 for l in lines)
    brat(brepo, "task", "update", a, "--title", "Lexer", "--priority", "0")
    t = brat_json(brepo, "task", "show", a)
    assert (t["title"], t["priority"], t["status"]) == ("Lexer", 0, "running")


def test_ready_is_queued_with_every_need_merged_in_priority_then_age_order(brepo):
    cid = convoy(brepo, "Ordering")
    low = task(brepo, cid, "low", "--priority", "4")
    first_p1 = task(brepo, cid, "first p1", "--priority", "1")
    time.sleep(0.01)
    second_p1 = task(brepo, cid, "second p1", "--priority", "1")
    urgent_waiting = task(brepo, cid, "urgent but waiting", "--priority", "0", "--needs", low)
    default = task(brepo, cid, "default priority")
    ready = [t["id"] for t in brat_json(brepo, "task", "ready")]
    assert ready == [first_p1, second_p1, default, low]
    move(brepo, low, "running", "needs-review", "merging")
    assert urgent_waiting not in [t["id"] for t in brat_json(brepo, "task", "ready")]
    move(brepo, low, "merged")
    ready = [t["id"] for t in brat_json(brepo, "task", "ready")]
    assert ready == [urgent_waiting, first_p1, second_p1, default]
    other = convoy(brepo, "Other")
    elsewhere = task(brepo, other, "elsewhere", "--priority", "0")
    assert [t["id"] for t in brat_json(brepo, "task", "ready", "--convoy", other)] == [elsewhere]
    assert "no ready tasks" in brat(brepo, "task", "ready", "--convoy",
                                    convoy(brepo, "Empty")).out


def test_dependencies_add_remove_list_and_cycles_are_refused(brepo):
    cid = convoy(brepo, "Deps")
    a, b, c = (task(brepo, cid, n) for n in "abc")
    out = brat_json(brepo, "task", "dep", "add", b, "--on", a)
    assert out == {"task": b, "needs": [a]}
    brat(brepo, "task", "dep", "add", c[:7], "--on", b[:7])
    tip = wal_tip(brepo)
    code, msg = fail(brepo, "task", "dep", "add", a, "--on", c)
    assert code == 5 and "cycle" in msg and a[:7] in msg and c[:7] in msg
    code, msg = fail(brepo, "task", "dep", "add", a, "--on", a)
    assert code == 2 and "cannot need itself" in msg
    assert wal_tip(brepo) == tip
    brat(brepo, "task", "dep", "add", b, "--on", a)   # already there: nothing written
    assert wal_tip(brepo) == tip
    deps = brat_json(brepo, "task", "dep", "list", b)
    assert deps == {"task": b, "needs": [a], "needed_by": [c]}
    human = brat(brepo, "task", "dep", "list", b).out
    assert "needs" in human and "needed by" in human
    assert [t["id"] for t in brat_json(brepo, "task", "ready")] == [a]
    brat(brepo, "task", "dep", "remove", c, "--on", b)
    assert brat_json(brepo, "task", "dep", "list", c)["needs"] == []
    assert sorted(t["id"] for t in brat_json(brepo, "task", "ready")) == sorted([a, c])
    code, msg = fail(brepo, "task", "dep", "remove", c, "--on", b)
    assert code == 2 and "does not need" in msg
    assert brat(brepo, "task", "dep", "list", c).out.strip() == "no dependencies"


def test_tasks_move_through_the_machine_one_event_each_and_the_convoy_lands(brepo):
    cid = convoy(brepo, "Pipeline")
    a = task(brepo, cid, "first")
    b = task(brepo, cid, "second", "--needs", a)
    assert brat_json(brepo, "convoy", "show", cid)["status"] == "active"
    for tid in (a, b):
        for new in ("running", "needs-review", "merging", "merged"):
            commits, events = log_commits(brepo), len(events_of(brepo, tid))
            out = brat(brepo, "task", "update", tid, "--status", new, "-m", f"to {new}").out
            assert "->" in out and new in out
            assert log_commits(brepo) == commits + 1          # one batch
            new_events = events_of(brepo, tid)[events:]
            assert len(new_events) == 1                       # one event: never without status
            fields = new_events[0]["detail"]["fields"]
            assert fields["status"] == new and fields["reason"] == f"to {new}"
            assert status_of(brepo, tid) == new
        if tid == a:
            assert [t["id"] for t in brat_json(brepo, "task", "ready")] == [b]
    c = brat_json(brepo, "convoy", "show", cid)
    assert c["status"] == "landed" and c["counts"]["merged"] == 2
    history = brat_json(brepo, "task", "show", b)["history"]
    assert [(h["from_status"], h["to_status"]) for h in history] == [
        ("", "queued"), ("queued", "running"), ("running", "needs-review"),
        ("needs-review", "merging"), ("merging", "merged")]
    assert "merging -> merged" in brat(brepo, "task", "show", b).out


def test_convoy_status_is_derived_failed_stalled_active_landed(brepo):
    cid = convoy(brepo, "Derived")
    a = task(brepo, cid, "a")
    b = task(brepo, cid, "b", "--needs", a)

    def cstatus():
        return brat_json(brepo, "convoy", "show", cid)["status"]

    move(brepo, a, "running", "failed")
    assert cstatus() == "failed"
    move(brepo, a, "queued")                 # retry
    assert cstatus() == "active"
    move(brepo, a, "blocked")                # nothing can move: a blocked, b waits on a
    assert cstatus() == "stalled"
    move(brepo, a, "dropped")                # b waits on a dropped task forever
    assert cstatus() == "stalled"
    brat(brepo, "task", "dep", "remove", b, "--on", a)
    assert cstatus() == "active"
    move(brepo, b, "running", "needs-review", "merging", "merged")
    assert cstatus() == "landed"             # every task merged or dropped
    assert brat_json(brepo, "convoy", "list", "--status", "landed")[0]["id"] == cid


@pytest.mark.parametrize("args,code,expected", [
    (["task", "create", "--convoy", "deadbeef", "T"], 3, "no convoy with id deadbeef"),
    (["task", "create", "--convoy", "zz", "T"], 2, "is not a valid convoy id"),
    (["task", "create", "--convoy", "{cid}", "  "], 2, "task title must not be empty"),
    (["task", "create", "--convoy", "{cid}", "T", "--priority", "7"], 2, "7 is not in the range 0<=x<=4"),
    (["task", "create", "--convoy", "{cid}", "T", "--needs", "abcdef12"], 3, "no task with id abcdef12"),
    (["task", "create", "--convoy", "{cid}", "T", "--needs", "{cid}"], 3, "no task with id"),
    (["task", "create", "--convoy", "{tid}", "T"], 3, "no convoy with id"),
    (["task", "create", "--convoy", "{cid}", "T", "--paths", ""], 2, "path glob must not be empty"),
    (["task", "create", "--convoy", "{cid}", "line\nbreak"], 2, "must be a single line"),
    (["task", "create", "T"], 2, "Missing option '--convoy'"),
    (["convoy", "create", ""], 2, "convoy title must not be empty"),
    (["convoy", "show", "ffffffff"], 3, "no convoy with id ffffffff"),
    (["task", "show", "ffffffff"], 3, "no task with id ffffffff"),
    (["task", "comment", "{tid}", "-m", " "], 2, "comment must not be empty"),
    (["task", "update", "{tid}"], 2, "nothing to update"),
    (["task", "update", "{tid}", "--status", "done"], 2, "'done' is not one of 'queued'"),
    (["task", "update", "{tid}", "--force", "--title", "x"], 2, "--force only applies to a --status"),
    (["task", "dep", "add", "{tid}", "--on", "{cid}"], 3, "no task with id"),
    (["task", "list", "--status", "finished"], 2, "'finished' is not one of"),
])
def test_bad_input_is_one_clear_line_and_writes_nothing(brepo, args, code, expected):
    cid = convoy(brepo, "C")
    tid = task(brepo, cid, "T")
    before, tip = status(brepo), wal_tip(brepo)
    args = [a.format(cid=cid, tid=tid) for a in args]
    got, msg = fail(brepo, *args)
    assert got == code and expected in msg, msg
    assert wal_tip(brepo) == tip and status(brepo) == before


def test_ids_are_typed_as_unique_prefixes_and_an_ambiguous_one_is_refused(brepo):
    from git_brat.brat import board as model, tasks
    cid = convoy(brepo, "Prefixes")
    g = model.open_grite(str(brepo))
    ids = ["abcd1" + "0" * 27, "abcd2" + "0" * 27]
    g.append([d for tid in ids for d in tasks.task_drafts(tid, cid, f"t {tid[4]}", "", [], 2, [])],
             "test: two tasks sharing a prefix")
    tip = wal_tip(brepo)
    code, msg = fail(brepo, "task", "update", "abcd", "--status", "running")
    assert code == 2 and "ambiguous" in msg and "abcd1" in msg and "abcd2" in msg
    assert wal_tip(brepo) == tip
    assert brat_json(brepo, "task", "show", "abcd2")["title"] == "t 2"
    assert brat_json(brepo, "task", "show", "#ABCD1")["id"] == ids[0]


def test_task_update_json_is_what_the_reference_says(grepo):
    brat(grepo, "init")
    cid = brat(grepo, "convoy", "create", "C").out.strip()
    tid = brat(grepo, "task", "create", "--convoy", cid, "T").out.strip()
    out = brat_json(grepo, "task", "update", tid, "--status", "running")
    last = out["history"][-1]
    assert out["id"] == tid and out["status"] == "running"
    assert (last["from_status"], last["to_status"], last["forced"]) == ("queued", "running", False)
    text = (ROOT / "docs" / "reference.md").read_text()
    row = next(ln for ln in text.splitlines() if ln.startswith("| `task update"))
    assert "task show" in row and "history" in row
