"""`git brat`: the harness's click group (thin; logic lives in the role modules)."""

from __future__ import annotations

import os
import sys

import click

from git_brat import __version__
from git_brat.clikit import LazyGroup, run


# Each command's module is imported when that command runs: an agent's `task done` then pays
# for its own imports, not for the mayor's, the refinery's and every other command's.
COMMANDS = {name: f"git_brat.brat.cli.{name}" for name in (
    "init", "config", "convoy", "task", "workflow", "engine", "witness", "session", "mayor",
    "status", "demo", "refinery", "deacon", "trust", "completion", "ui",
    "inbox", "mcp", "kb")}


@click.group(cls=LazyGroup, lazy=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="git-brat")
def cli():
    """Run many AI coding agents on one repository, coordinated through git."""


def main(argv: list[str] | None = None) -> None:
    if "_GIT_BRAT_COMPLETE" in os.environ:   # a shell asks: register the id-aware completers first
        from git_brat.brat.cli import completion  # noqa: F401
    sys.exit(run(cli, "git-brat", argv))


if __name__ == "__main__":
    main()
