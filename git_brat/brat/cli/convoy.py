"""`git brat convoy create|list|show`: groups of tasks and their derived status."""

from __future__ import annotations

import click

from git_brat.brat import board as model
from git_brat.brat import tasks
from git_brat.brat.cli.common import board, open_grite, shorts, task_rows
from git_brat.brat import spend
from git_brat.clikit import emit, json_option, table, when


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {s}" for s, n in counts.items() if n) or "no tasks"


@click.group()
def convoy():
    """Create, list and show convoys (groups of tasks)."""


@convoy.command()
@click.argument("title")
@click.option("-b", "--body", default="", help="Longer description.")
@json_option
def create(title, body, as_json):
    """Create an empty convoy and print its id."""
    g = open_grite()
    cid = tasks.create_convoy(g, title, body)
    if as_json:
        b = board(g)
        emit(True, b.convoy_detail(b.convoys[cid]), lambda: None)
    else:
        click.echo(cid)


@convoy.command("list")
@click.option("--status", "statuses", multiple=True, type=click.Choice(model.CONVOY_STATES),
              help="Only convoys in this status (repeatable).")
@click.option("--all", "everything", is_flag=True,
              help="Include convoys whose work all settled longer ago than grite.coldAfterDays.")
@json_option
def list_(statuses, everything, as_json):
    """Convoys, oldest first, with their derived status and progress."""
    g = open_grite()
    b = board(g, everything)
    views = [v for v in b.convoy_list() if not statuses or v.status in statuses]
    short = shorts(b)

    def human():
        if not views:
            return "no convoys"
        rows = [[short[v.id], v.status, f"{v.counts['merged']}/{v.total}", v.title] for v in views]
        return table(rows, [7, 7, 7, None])
    emit(as_json, views, human)


@convoy.command()
@click.argument("convoy_id")
@json_option
def show(convoy_id, as_json):
    """One convoy: its status, task counts and tasks."""
    g = open_grite()
    b = board(g)
    d = b.convoy_detail(b.convoys[g.resolve(convoy_id, model.CONVOY).id])
    short = shorts(b)

    def human():
        lines = [f"{d.id}  [{d.status}]", d.title, "",
                 f"tasks:     {d.total} ({_counts(d.counts)}); {d.ready} ready",
                 f"author:    {d.author}", f"created:   {when(d.created_at)}"]
        if d.spent is not None and d.spent.sessions:
            lines.append(f"spent:     {spend.text(d.spent)}")
        if d.workflow:
            lines.append(f"workflow:  {d.workflow}"
                         + "".join(f"  {k}={v!r}" for k, v in d.vars.items() if v))
        if d.body:
            lines += ["", d.body.rstrip()]
        lines += ["", task_rows(d.tasks, short, "no tasks yet: add one with "
                                              f"`git brat task create --convoy {short[d.id]} TITLE`")]
        return "\n".join(lines)
    emit(as_json, d, human)


def register(group: click.Group) -> None:
    group.add_command(convoy)
