"""One table of entity kinds: grite's cold logic, the snapshot's cold part and brat's lists all
read it, and agree with brat's task state machine."""

from __future__ import annotations

import sqlite3

from git_brat.brat import board, deacon, mayor
from git_brat.grite.cache import db as cachedb
from git_brat.grite.cache import snapdb
from git_brat.grite.model import kinds
from git_brat.grite.model.kinds import KINDS
from git_brat.grite.model.state import Entity, State, group_of, status_of

OLD, CUTOFF, NEW = 10, 100, 1_000   # ms: before the snapshot's cutoff, and after it


def test_brats_settled_lists_are_the_tables_rows():
    assert board.FINISHED == KINDS[board.TASK].settled
    assert board.SESSION_ENDED == KINDS[board.SESSION].settled
    assert board.MERGE_DONE == KINDS[board.MERGE].settled
    for name in (board.CONVOY, board.TASK, board.SESSION, board.MERGE, mayor.KIND, deacon.DEACON):
        assert name in KINDS, f"brat writes {name!r} entities the kinds table does not name"


def test_every_task_status_the_state_machine_ends_in_is_settled_and_none_in_flight_is():
    terminal = {s for s, onward in board.TRANSITIONS.items() if not onward}
    assert terminal and terminal <= set(kinds.settled(board.TASK))
    assert set(kinds.settled(board.TASK)) <= set(board.STATES)
    assert not set(kinds.settled(board.TASK)) & set(board.IN_FLIGHT)


def test_a_task_belongs_to_its_convoy_and_sessions_and_merges_to_their_task():
    assert (KINDS[board.TASK].group, KINDS[board.SESSION].group, KINDS[board.MERGE].group) == (
        board.CONVOY, board.TASK, board.TASK)


def _entity(n: int, kind: str, fields: dict, updated: int) -> Entity:
    cells = {name: (value, 1, "actor", f"e{n}") for name, value in fields.items()}
    return Entity(f"{n:032x}", kind=kind, created=True, created_at=1, updated_at=updated,
                  fields=cells)


def test_status_of_and_group_of_read_the_fields_the_table_names():
    assert set(kinds.STATUS_FIELDS) == {k.status for k in KINDS.values() if k.status}
    assert set(kinds.GROUP_FIELDS) == {k.group for k in KINDS.values() if k.group}
    for n, kind in enumerate(KINDS.values()):
        fields = {kind.status: "some-status"} if kind.status else {}
        fields.update({kind.group: "g-1"} if kind.group else {})
        ent = _entity(n, kind.name, fields, OLD)
        assert status_of(ent) == ("some-status" if kind.status else "")
        assert group_of(ent) == ("g-1" if kind.group else None)


def test_a_snapshot_moves_to_its_cold_part_exactly_the_settled_rows_of_the_table(tmp_path):
    ents, n = [], 0
    for kind in KINDS.values():
        statuses = [*kind.settled, "open"] if kind.status else [None]
        for status in statuses:
            for updated in (OLD, NEW):
                n += 1
                fields = {kind.status: status} if kind.status else {}
                ents.append(_entity(n, kind.name, fields, updated))
    n += 1
    ents.append(_entity(n, "gadget", {"status": "closed"}, OLD))   # a kind the table lacks
    state = State(entities={e.id: e for e in ents}, kinds={e.id: e.kind for e in ents},
                  max_lamport=1, event_count=len(ents))
    src = str(tmp_path / "state.db")
    cachedb.create(src, state, b"meta").close()

    moved = snapdb.export(src, str(tmp_path / "hot.db"), None, str(tmp_path / "cold.db"),
                          before=CUTOFF)

    expected = sorted((k.name, s) for k in KINDS.values() for s in k.settled)
    cold = sqlite3.connect(tmp_path / "cold.db")
    hot = sqlite3.connect(tmp_path / "hot.db")
    assert sorted(cold.execute("SELECT kind, status FROM entity")) == expected
    assert moved == len(expected)
    assert hot.execute("SELECT COUNT(*) FROM entity").fetchone()[0] == len(ents) - len(expected)
    assert hot.execute("SELECT COUNT(*) FROM entity WHERE kind = 'gadget'").fetchone()[0] == 1
