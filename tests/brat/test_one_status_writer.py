"""One writer of a task's status: only git_brat/brat/tasks.py builds a task's status change, and
every change it builds is checked against the state machine's table."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from git_brat.brat import tasks
from git_brat.brat.board import STATES, TASK, TRANSITIONS, Board
from git_brat.errors import Conflict, NotFound, UsageError
from git_brat.grite.model import events as ev
from git_brat.grite.model.state import State

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "git_brat"
THE_WRITER = PACKAGE / "brat" / "tasks.py"
# The id a Draft is written to, when the code names a task (tid, task, m.task, live.tid, ...).
_TASK_ID = re.compile(r"(^|\.)(tid|task|task_id)$")


def _status_dict(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Dict) and any(
        isinstance(k, ast.Constant) and k.value == "status" for k in node.keys)


def status_writes(source: str, where: str) -> list[str]:
    """Every place in source that builds a task's status change by hand."""
    bad = []
    for node in ast.walk(ast.parse(source)):
        line = f"{where}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Dict) and any(
                isinstance(k, ast.Constant) and k.value == "status_from" for k in node.keys):
            bad.append(f"{line}: a dict with a status_from key")
        elif isinstance(node, ast.Call) and any(k.arg == "status_from" for k in node.keywords):
            bad.append(f"{line}: status_from=... passed by keyword")
        elif isinstance(node, (ast.Assign, ast.AugAssign)):
            for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(t, ast.Subscript) and isinstance(t.slice, ast.Constant) and \
                        t.slice.value == "status_from":
                    bad.append(f"{line}: [\"status_from\"] assigned")
        if not isinstance(node, ast.Call):
            continue
        name = ast.unparse(node.func)
        if name.endswith("Create") and node.args and ast.unparse(node.args[0]) in ("TASK", "'task'"):
            bad.append(f"{line}: a task created (with its first status) by hand")
        if name.endswith("Draft") and len(node.args) >= 2 and \
                _TASK_ID.search(ast.unparse(node.args[0])):
            op = node.args[1]
            fields = op.args[0] if isinstance(op, ast.Call) and op.args else None
            if _status_dict(fields):
                bad.append(f"{line}: a status set on task {ast.unparse(node.args[0])} by hand")
    return bad


def test_only_tasks_py_writes_a_task_status():
    bad = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path != THE_WRITER:
            bad += status_writes(path.read_text(), str(path.relative_to(ROOT)))
    assert not bad, "a task's status is written only by git_brat/brat/tasks.py (tasks.move):\n" + \
        "\n".join(bad)


@pytest.mark.parametrize("source", [
    'd = {"status": "queued", "status_from": old}',
    'fields.update(status="failed", status_from="running")',
    'out["status_from"] = old',
    'Draft(tid, ev.SetFields({"status": "blocked"}))',
    'Draft(live.tid, ev.SetFields({"status": "queued", "reason": r}))',
    'Draft(tid, ev.Create(TASK, {"title": t, "status": "queued"}))',
])
def test_a_hand_written_status_change_is_caught(source):
    assert status_writes(f"def f():\n    {source}\n", "x.py")


def test_fields_of_a_task_and_status_of_other_entities_are_not_status_writes():
    assert not status_writes('Draft(tid, ev.SetFields({"done_by": s}))\n'
                             'Draft(sid, ev.SetFields({"status": "crashed"}))\n'
                             'Draft(m.merge, ev.SetFields({"status": "merged"}))\n'
                             'fields.get("status_from", "")\n', "x.py")


# -- the check itself, against the table -----------------------------------------------------

TID, NEED = "a" * 32, "b" * 32


def board_with(status: str, need: str | None = None) -> Board:
    """A board holding one task in status (needing one other task in status `need`, if given)."""
    state = State()
    lamport = 0

    def apply(entity: str, op) -> None:
        nonlocal lamport
        lamport += 1
        state.apply(ev.make_event(entity, "c" * 32, lamport, 1000 + lamport, op))
    def made(entity: str, title: str, where: str) -> None:
        # Created queued (replay rejects any other start), then a recorded force to `where`.
        apply(entity, ev.Create(TASK, {"title": title, "status": "queued", "convoy": ""}))
        if where != "queued":
            apply(entity, ev.SetFields({"status": where, "status_from": "queued", "forced": True}))
    made(TID, "t", status)
    if need is not None:
        made(NEED, "n", need)
        apply(TID, ev.AddTo("dep:depends_on", NEED))
    return Board(state)


MOVES = [(old, new) for old in STATES for new in STATES if old != new]


@pytest.mark.parametrize("old,new", MOVES, ids=[f"{o}->{n}" for o, n in MOVES])
def test_a_move_is_allowed_exactly_when_the_table_lists_it(old, new):
    board = board_with(old)
    if new in TRANSITIONS[old]:
        fields = tasks.move_fields(board, TID, new, "why")
        assert fields == {"status": new, "status_from": old, "reason": "why", **_ends(old)}
    else:
        with pytest.raises(Conflict, match=f"is {old}; from {old} it can go to"):
            tasks.move_fields(board, TID, new, "why")


@pytest.mark.parametrize("old,new", MOVES, ids=[f"{o}->{n}" for o, n in MOVES])
def test_force_makes_any_move_and_is_recorded(old, new):
    fields = tasks.move_fields(board_with(old), TID, new, force=True, by="ann")
    assert fields == {"by": "ann", "status": new, "status_from": old, "forced": True,
                      **(_ends(old) if new != old else {})}


def _ends(old: str) -> dict:
    """What a move out of running says of the run it ends (board_with's: one by hand)."""
    return {"ends": ""} if old == "running" else {}


def test_a_move_out_of_a_witness_run_names_that_run_and_one_out_of_a_hand_run_names_none():
    session = "5e" * 16
    board = board_with("queued")
    started = tasks.move(board, TID, "running", session=session)
    board.state.apply(ev.make_event(TID, "c" * 32, 10, 2000, started.op))
    assert tasks.move_fields(board, TID, "needs-review")["ends"] == session
    assert tasks.move_fields(board_with("running"), TID, "blocked", "why")["ends"] == ""
    assert "ends" not in tasks.move_fields(board_with("blocked"), TID, "queued")


@pytest.mark.parametrize("need,allowed", [("queued", False), ("running", False),
                                          ("failed", False), ("merged", True)])
def test_running_needs_every_dependency_merged(need, allowed):
    board = board_with("queued", need)
    if allowed:
        assert tasks.move(board, TID, "running").op.fields["status"] == "running"
    else:
        with pytest.raises(Conflict, match="not ready"):
            tasks.move(board, TID, "running")
    assert tasks.move(board, TID, "running", force=True).op.fields["forced"] is True


def test_a_move_to_where_it_is_an_unknown_status_or_task_is_refused():
    board = board_with("queued")
    with pytest.raises(Conflict, match="already queued"):
        tasks.move(board, TID, "queued")
    with pytest.raises(UsageError, match="unknown status"):
        tasks.move(board, TID, "done")
    with pytest.raises(NotFound):
        tasks.move(board, "f" * 32, "running")
