"""`git brat completion bash|zsh|fish`: print the shell completion script; task, convoy and
session ids complete."""

from __future__ import annotations

import click

from git_brat import completion


def _board():
    from git_brat.brat.cli.common import board, open_grite
    return board(open_grite())


def _tasks():
    return ((t.id, f"[{t.status}] {t.title}") for t in _board().task_list())


def _convoys():
    return ((c.id, f"[{c.status}] {c.title}") for c in _board().convoy_list())


def _sessions():
    return ((s.id, f"[{s.status}] {s.engine} on {s.task[:7]}") for s in _board().sessions(None))


completion.register_ids("git-brat", {"task_id": _tasks, "convoy_id": _convoys,
                                     "session_id": _sessions, "TASK": _tasks, "CONVOY": _convoys})


def register(group: click.Group) -> None:
    group.add_command(completion.command("git-brat"))
