"""`git brat`: the harness's click group (thin; logic lives in the role modules)."""

from __future__ import annotations

import sys

import click

from git_brat import __version__
from git_brat.clikit import run


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="git-brat")
def cli():
    """Run many AI coding agents on one repository, coordinated through git."""


from git_brat.brat import (cli_config, cli_convoy, cli_demo, cli_engine, cli_init,  # noqa: E402
                           cli_mayor, cli_session, cli_status, cli_task, cli_witness, cli_workflow)
from git_brat.brat import cli_deacon, cli_refinery  # noqa: E402

for _module in (cli_init, cli_config, cli_convoy, cli_task, cli_workflow, cli_engine, cli_witness,
                cli_session, cli_mayor, cli_status, cli_demo, cli_refinery, cli_deacon):
    _module.register(cli)
from git_brat.brat import cli_completion; cli_completion.register(cli)  # noqa: E402,E702


def main(argv: list[str] | None = None) -> None:
    sys.exit(run(cli, "git-brat", argv))


if __name__ == "__main__":
    main()
