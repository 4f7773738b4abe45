"""The board keeps the tasks it decoded from one log tip to the next (only what a write
touched is decoded again): after every kind of write it still shows exactly what the
commands say."""

from __future__ import annotations

import pytest

from bratkit import convoy, task
from helpers import brat, brat_json, grite
from refinerykit import two_clones


def _board(repo):
    from git_brat.brat.ui import data
    return data.Repo(str(repo))


def _columns(board) -> dict[str, str]:
    from git_brat.brat.ui import data
    page = data.board_page(board.reader())
    return {card.id: column for column, cards in page.columns.items() for card in cards}


def _cards(board) -> dict[str, object]:
    from git_brat.brat.ui import data
    page = data.board_page(board.reader())
    return {card.id: card for cards in page.columns.values() for card in cards}


def _status(board) -> dict:
    import msgspec
    from git_brat.brat.ui import data
    g = board.reader()
    shown = msgspec.json.decode(msgspec.json.encode(data.status(g, board.config(g))))
    return _without_clock(shown)


def _without_clock(status: dict) -> dict:
    for volatile in ("generated_at", "remaining", "expires_at"):
        status.pop(volatile, None)
    return status


def _same_as_the_commands(board, repo) -> None:
    listed = {t["id"]: t["status"] for t in brat_json(repo, "task", "list")}
    assert _columns(board) == {tid: st for tid, st in listed.items() if st != "dropped"}
    assert _status(board) == _without_clock(brat_json(repo, "status"))


@pytest.mark.slow
def test_after_a_cli_move_a_comment_and_a_pulled_batch_the_board_shows_what_status_says(tmp_path):
    _hub, mine, theirs = two_clones(tmp_path)
    c = convoy(mine, "Shared")
    first, second, third = (task(mine, c, f"Task {i}") for i in range(3))
    grite(mine, "sync")
    grite(theirs, "sync")
    board = _board(mine)
    _same_as_the_commands(board, mine)   # every task decoded once, and kept

    brat(mine, "task", "update", first, "--status", "blocked", "-m", "which database?")
    assert _columns(board)[first] == "blocked"
    _same_as_the_commands(board, mine)

    brat(mine, "task", "comment", second, "-m", "halfway there")
    assert _cards(board)[second].message == "halfway there"
    _same_as_the_commands(board, mine)

    made = task(theirs, c, "Made on another machine")
    brat(theirs, "task", "update", third, "--status", "dropped", "-m", "not needed")
    grite(theirs, "sync")
    grite(mine, "sync")
    columns = _columns(board)
    assert made in columns and third not in columns
    _same_as_the_commands(board, mine)


def test_after_a_write_the_board_decodes_only_the_rows_it_touched(tmp_path):
    from git_brat.brat.ui import data
    repo = tmp_path / "repo"
    from helpers import make_repo
    make_repo(repo)
    brat(repo, "init")
    c = convoy(repo, "Many")
    tids = [task(repo, c, f"Task {i}") for i in range(12)]
    board = _board(repo)
    data.board_page(board.reader())
    before = board.decoded.decodes
    assert before >= len(tids)
    brat(repo, "task", "update", tids[0], "--status", "blocked", "-m", "a question")
    assert _columns(board)[tids[0]] == "blocked"
    # The task moved, and the rows its event touched beside it (an actor, a convoy): not 12.
    assert board.decoded.decodes - before <= 3
