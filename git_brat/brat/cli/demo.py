"""`git brat demo`: the whole loop, on a small buggy project in a temporary directory."""

from __future__ import annotations

import sys

import click

from git_brat.clikit import emit_json, json_option


@click.command()
@click.option("--engine", default="demo", show_default=True,
              help="Engine for the mayor and the agents: the scripted demo engine, or a real "
                   "one (claude, codex, …) set up with its key.")
@click.option("--fast", is_flag=True, help="Skip the crash and the recovery.")
@click.option("--dir", "directory", type=click.Path(file_okay=False),
              help="Run in this new directory (kept afterwards) instead of a temporary one.")
@click.option("--keep", is_flag=True, help="Keep the temporary directory to look around.")
@click.option("--ui", "with_ui", is_flag=True,
              help="Open the web board (`git brat ui`) on the demo's repository and watch the "
                   "loop in it; the board and the directory stay afterwards.")
@click.option("--pause", type=click.FloatRange(min=0), default=None, metavar="SECONDS",
              help="Seconds between steps (default: 2 with --ui, else 0).")
@json_option
def demo(engine, fast, directory, keep, with_ui, pause, as_json):
    """Init, mayor -> convoy of tasks, parallel agent sessions, a SIGKILLed witness and its
    recovery, the refinery running the tests and merging, the convoy landed.

    Everything happens in a throwaway repository; your repository, your git config and your
    hooks are never touched. The default engine is a scripted agent shipped with git-brat
    (it fixes the demo project's bugs; it is not an AI).
    """
    from git_brat.brat import demo as demo_lib
    from git_brat.brat import engines
    engines.resolve(engine, None)   # an unknown engine is refused before anything runs
    say = (lambda _line: None) if as_json else click.echo
    if pause is None:
        pause = 2.0 if with_ui else 0.0
    result = demo_lib.run(directory, keep, say, engine, fast, with_ui, pause)
    if as_json:
        emit_json(result)
    else:
        click.echo(f"\n{'done' if result.ok else 'failed'} in {result.seconds:.0f}s")
        if result.kept:
            click.echo(f"\nthe demo's repository is in {result.directory}; look around:")
            for line in result.explore:
                click.echo(f"  {line}")
        else:
            click.echo("run `git brat demo --keep` to look around afterwards (git log, "
                       "git brat session log, …)")
    if not result.ok:
        sys.exit(1)


def register(group: click.Group) -> None:
    group.add_command(demo)
