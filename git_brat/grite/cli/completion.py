"""`git grite completion bash|zsh|fish`: print the shell completion script; issue ids complete."""

from __future__ import annotations

import click

from git_brat import completion


def _issues():
    from git_brat.grite.cli.common import open_grite
    from git_brat.grite.issues import list_issues
    return ((i.id, f"[{i.state}] {i.title}") for i in list_issues(open_grite(), "all"))


completion.register_ids("git-grite", {"issue_id": _issues, "other": _issues, "ISSUE": _issues})


def register(group: click.Group) -> None:
    group.add_command(completion.command("git-grite"))
