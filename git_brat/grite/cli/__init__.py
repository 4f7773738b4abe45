"""`git grite`: the click group, its subcommands in modules loaded only when used, and main().

The hook shims installed in users' repositories import `git_brat.grite.cli.main` by name: it
stays here.
"""

from __future__ import annotations

import os
import sys

import click

from git_brat import __version__
from git_brat.clikit import LazyGroup, run

_MODULES = {"repo": ("init", "log", "export", "import", "doctor", "rebuild", "snapshot"),
            "issue": ("issue", "dep", "ready"), "actor": ("actor",),
            "sync": ("sync", "remote", "uninstall", "deepen", "fetch-cold", "hook"),
            "lock": ("lock",), "trust": ("trust",), "completion": ("completion",),
            "context": ("context",), "agents": ("agents-md", "skill")}
COMMANDS = {name: f"git_brat.grite.cli.{module}" for module, names in _MODULES.items()
            for name in names}


@click.group(cls=LazyGroup, lazy=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="git-grite")
def cli():
    """An append-only, crash-safe event log in git refs, and the issue tracker replayed from it."""


def main(argv: list[str] | None = None) -> None:
    if "_GIT_GRITE_COMPLETE" in os.environ:   # a shell asks: register the id completers first
        from git_brat.grite.cli import completion  # noqa: F401
    sys.exit(run(cli, "git-grite", argv))


if __name__ == "__main__":
    main()
