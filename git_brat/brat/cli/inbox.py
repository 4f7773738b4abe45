"""`git brat inbox`: what waits for you (reviews, questions, failures), oldest first."""

from __future__ import annotations

import click

from git_brat.brat import inbox as needs
from git_brat.brat.cli.common import board, load_config, open_grite, shorts
from git_brat.clikit import cut, emit, json_option, printable, when


@click.command()
@json_option
def inbox(as_json):
    """What waits for you: tasks to review, agents' questions, failures (each with the command
    that answers it). The deacon sends new ones to the sinks set under [inbox]."""
    g = open_grite()
    b = board(g)
    found = needs.items(g, load_config(g), b)
    emit(as_json, found, lambda: _text(found, shorts(b)))


def _text(found: list[needs.Item], short: dict[str, str]) -> str:
    if not found:
        return "nothing waits for you"
    lines = [f"{len(found)} item(s) wait for you"]
    for i in found:
        lines.append(cut(f"{i.kind:<11}  {short.get(i.task, i.task[:7]):<7}  {when(i.since)}  "
                         f"{printable(i.title)}", 80))
        lines += [cut(f"  {printable(ln)}", 80) for ln in i.text.splitlines()[:3]]
        lines.append(f"  $ {i.command}")   # never cut: it is meant to be pasted
    return "\n".join(lines)


def register(group: click.Group) -> None:
    group.add_command(inbox)
