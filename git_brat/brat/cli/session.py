"""`git brat session …`: the record of each engine run: list, show, its log, stop one."""

from __future__ import annotations

import os
import time

import click

from git_brat.brat.engines import runner
from git_brat.brat import layout
from git_brat.brat import sessions as ss
from git_brat.brat import spend
from git_brat.brat.cli.common import board, open_grite, shorts
from git_brat.clikit import emit, json_option, table, when
from git_brat.errors import NotFound


@click.group()
def session():
    """Engine sessions: list, show, log, stop."""


@session.command("list")
@click.option("--all", "show_all", is_flag=True, help="Ended sessions too (default: live ones).")
@click.option("--task", "task_id", help="Only sessions of this task.")
@json_option
def list_(show_all, task_id, as_json):
    """Sessions, oldest first: live ones, or --all."""
    g = open_grite()
    b = board(g)
    tid = g.resolve(task_id, "task").id if task_id else None
    ents = [e for e in ss.all_sessions(b, None if show_all or tid else ss.LIVE)
            if tid is None or e.get("task") == tid]
    views = [ss.detail(g, e) for e in ents]

    def human():
        if not views:
            return "no sessions" if show_all or tid else "no live sessions (--all shows ended ones)"
        short = shorts(b)
        rows = [[v.id[:7], short.get(v.task, v.task[:7]), v.status, v.engine,
                 when(v.started_at), v.reason or v.branch] for v in views]
        return table(rows, [7, 7, 9, 9, 16, None])
    emit(as_json, views, human)


@session.command()
@click.argument("session_id")
@json_option
def show(session_id, as_json):
    """One session: engine, argv, process, work tree, branch, outcome, last output."""
    g = open_grite()
    d = ss.detail(g, ss.find(g, session_id))

    def human():
        lines = [f"{d.id}  [{d.status}]", f"task:      {d.task}",
                 f"engine:    {d.engine} {d.engine_version}".rstrip()]
        if d.engine_session:
            lines.append(f"conversation: {d.engine_session}" +
                         (f" (resumed {d.resumed})" if d.resumed else ""))
        lines += [f"argv:      {' '.join(d.argv)}", f"process:   pid {d.pid} on {d.host}",
                  f"worktree:  {d.worktree}", f"branch:    {d.branch} (base {d.base[:12]})",
                  f"attempt:   {d.attempt}", f"started:   {when(d.started_at)}"]
        if d.ended_at:
            lines += [f"ended:     {when(d.ended_at)}  exit {d.exit_code}", f"reason:    {d.reason}",
                      f"commits:   {d.commits} on the branch (head {d.head[:12]})"]
        if d.salvaged:
            lines.append(f"salvaged:  {d.salvaged[:12]} (work the agent left uncommitted)")
        if d.spent is not None:
            lines.append(f"spent:     {spend.text(d.spent)}")
        lines.append(f"log:       {d.log}")
        if d.output_tail:
            lines += ["", d.output_tail]
        return "\n".join(lines)
    emit(as_json, d, human)


@session.command()
@click.argument("session_id")
@click.option("-f", "--follow", is_flag=True, help="Keep printing as the session writes.")
@click.option("-n", "--lines", type=click.IntRange(min=0), default=None,
              help="Only the last N lines.")
def log(session_id, follow, lines):
    """The session's output (setup, engine), as written to .git/brat/sessions/<id>.log."""
    g = open_grite()
    e = ss.find(g, session_id)
    path = layout.session_log(g.store, e.id)
    if not os.path.exists(path):
        raise NotFound(f"session {e.id[:7]} has no log on this machine ({path}); it ran on "
                       f"{e.get('host', '?')}")
    text = runner.tail(path, lines) + "\n" if lines is not None else runner.read_from(path, 0, 1 << 30)
    click.echo(text, nl=False)
    if not follow:
        return
    pos = os.path.getsize(path)
    while True:
        size = os.path.getsize(path)
        if size > pos:
            click.echo(runner.read_from(path, pos), nl=False)
            pos = size
        elif g.state(refresh=True).entities[e.id].get("status") not in ss.LIVE:
            return
        time.sleep(0.3)


@session.command()
@click.argument("session_id")
@click.option("--wait", type=click.FloatRange(min=0), default=30, show_default=True,
              help="Seconds to wait for the witness to record the stop.")
@json_option
def stop(session_id, wait, as_json):
    """Stop a live session: the witness stops its agent, commits its work, blocks the task."""
    g = open_grite()
    e = ss.find(g, session_id)
    from git_brat.brat.cli.common import load_config
    from git_brat.brat.witness.recover import stop_session
    stop_session(g, e, g.identity.actor.name, lambda: load_config(g))
    deadline = time.monotonic() + wait
    status = e.get("status")
    while time.monotonic() < deadline:
        status = g.state(refresh=True).entities[e.id].get("status")
        if status not in ss.LIVE:
            break
        time.sleep(0.2)
    out = {"session": e.id, "status": status}
    emit(as_json, out, lambda: f"session {e.id[:7]}: {status}" +
         ("" if status not in ss.LIVE else " (stop requested; its witness records it)"))


def register(group: click.Group) -> None:
    group.add_command(session)
