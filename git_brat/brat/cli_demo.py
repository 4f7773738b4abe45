"""`git brat demo`: run the built-in demo in a temporary directory."""

from __future__ import annotations

import sys

import click

from git_brat.clikit import emit_json, json_option


@click.command()
@click.option("--dir", "directory", type=click.Path(file_okay=False),
              help="Run in this new directory (kept afterwards) instead of a temporary one.")
@click.option("--keep", is_flag=True, help="Keep the temporary directory to look around.")
@json_option
def demo(directory, keep, as_json):
    """A narrated run: workflow -> convoy, sync by push/pull, a lease race, a crash, status.

    Everything happens in a throwaway hub repository and two clones; your repository, your git
    config and your hooks are never touched.
    """
    from git_brat.brat import demo as demo_lib
    say = (lambda _line: None) if as_json else click.echo
    result = demo_lib.run(directory, keep, say)
    if as_json:
        emit_json(result)
    elif result.kept:
        click.echo(f"\nthe demo's repositories are in {result.directory}")
    if not result.ok:
        sys.exit(1)


def register(group: click.Group) -> None:
    group.add_command(demo)
