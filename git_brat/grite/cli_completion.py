"""`git grite completion bash|zsh|fish`: print the shell completion script (thin)."""

from __future__ import annotations

import click

from git_brat import completion


def register(group: click.Group) -> None:
    group.add_command(completion.command("git-grite"))
