"""Helpers the git-brat commands share: opening the repository and rendering tasks."""

from __future__ import annotations

from git_brat.brat import config, trust
from git_brat.brat import board as model
from git_brat.brat.board import Board, TaskView, open_grite  # noqa: F401  (the commands' door)
from git_brat.clikit import table, warn
from git_brat.grite.repo import Grite, short_ids
from git_brat.grite.model.state import State


def load_config(g: Grite, runs: str | None = None) -> config.Config:
    """The effective config (see brat/trust.py). runs: what the command would run with it
    ("the witness"), refused while the committed file has unapproved settings; otherwise the
    approved values apply and a warning says so."""
    loaded = trust.load(g.store)
    if runs:
        trust.require(loaded, runs)
    else:
        note = trust.notice(loaded)
        if note:
            warn(note)
    return loaded.config


def state(g: Grite) -> State:
    """The current state, saying on stderr what replay had to skip."""
    current = g.state()
    for p in g.cache.problems:
        warn(f"skipped unreadable log record {p.sha}: {p.detail} (see `git grite doctor`)")
    return current


def board(g: Grite, everything: bool = False) -> Board:
    """The hot work, or (everything) cold history too: see grite.coldAfterDays."""
    return Board(state(g), 0 if everything else g.cold_before)


def shorts(b: Board) -> dict[str, str]:
    """Shortest unique prefixes over every task and convoy, so each one can be typed back."""
    return short_ids([*b.tasks, *b.convoys])


def task_rows(views: list[TaskView], short: dict[str, str], empty: str = "no tasks") -> str:
    if not views:
        return empty
    rows = [[short.get(v.id, v.id[:7]), v.status, f"p{v.priority}",
             short.get(v.convoy, v.convoy[:7]), v.title] for v in views]
    return table(rows, [7, 12, 2, 7, None])


def needs_text(b: Board, ids: list[str], short: dict[str, str]) -> str:
    return ", ".join(f"{short.get(i, i[:7])} ({model.status_of(b.tasks[i])})"
                     if i in b.tasks else i[:7] for i in ids)


__all__ = ["open_grite", "load_config", "board", "shorts", "task_rows", "needs_text"]
