"""A long history: work settled long ago goes cold, out of status, lists and the witness's scans,
never out of `show` or `--all`."""

from __future__ import annotations

import time

from helpers import brat, brat_json

YEAR_AGO = time.time() - 365 * 86400


def _long_ago(monkeypatch, work):
    """Run work() with the clock a year back (what it writes is then a year old)."""
    with monkeypatch.context() as m:
        m.setattr(time, "time", lambda: YEAR_AGO)
        return work()


def _settled_convoy(g, monkeypatch, title: str) -> tuple[str, str]:
    """A convoy whose one task merged a year ago: (convoy, task)."""
    from git_brat.brat import tasks

    def work():
        cid = tasks.create_convoy(g, title)
        tid = tasks.create_task(g, cid, f"{title} task")
        for status in ("running", "needs-review", "merging", "merged"):
            tasks.update_task(g, tid, status=status)
        return cid, tid
    return _long_ago(monkeypatch, work)


def test_work_merged_long_ago_leaves_status_and_lists_but_not_show_or_all(brepo, monkeypatch):
    from git_brat.brat import board as model
    g = model.open_grite(str(brepo))
    old_convoy, old_task = _settled_convoy(g, monkeypatch, "Last year")
    convoy = brat(brepo, "convoy", "create", "Today").out.strip()
    task = brat(brepo, "task", "create", "--convoy", convoy, "Today's task").out.strip()
    brat(brepo, "task", "dep", "add", task, "--on", old_task)   # needs cold, merged work

    assert {t["id"] for t in brat_json(brepo, "task", "list")} == {task}
    assert {t["id"] for t in brat_json(brepo, "task", "list", "--all")} == {task, old_task}
    assert {c["id"] for c in brat_json(brepo, "convoy", "list")} == {convoy}
    assert {c["id"]: c["status"] for c in brat_json(brepo, "convoy", "list", "--all")} == \
        {convoy: "active", old_convoy: "landed"}
    assert "Last year" not in brat(brepo, "status").out
    shown = brat_json(brepo, "task", "show", old_task)
    assert shown["status"] == "merged" and shown["dependents"] == [task]
    assert brat_json(brepo, "convoy", "show", old_convoy)["status"] == "landed"
    # Its need is cold, and merged: the task is ready all the same.
    assert [t["id"] for t in brat_json(brepo, "task", "ready")] == [task]
    assert brat_json(brepo, "task", "list", "--convoy", old_convoy)[0]["id"] == old_task


def test_the_board_reads_only_the_active_work(brepo, monkeypatch):
    """What status and the witness scan: the hot rows, not the history (counted in the cache)."""
    from git_brat.brat import board as model, tasks
    g = model.open_grite(str(brepo))
    for i in range(6):
        _settled_convoy(g, monkeypatch, f"Old {i}")
    convoy = tasks.create_convoy(g, "Now")
    live = tasks.create_task(g, convoy, "Now task")
    g = model.open_grite(str(brepo))
    board = model.board(g)
    assert set(board.tasks) == {live} and set(board.convoys) == {convoy}
    assert [t.id for t in board.ready()] == [live]
    loaded = {k for k, v in g.state().entities.loaded.items() if v is not None}
    everything = len(g.state().entities)
    assert everything >= 6 * 2 + 2
    # The live task, its convoy and the actors; none of the twelve settled entities.
    assert len(loaded) <= 4, loaded
    assert len(model.Board(g.state()).tasks) == 7   # cold_before 0: all of it
