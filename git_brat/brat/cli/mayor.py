"""`git brat mayor start|ask|status|log|stop`: a request becomes a validated convoy of tasks."""

from __future__ import annotations

import sys
import textwrap

import click

from git_brat.brat import mayor as m
from git_brat.brat.cli.common import load_config, open_grite
from git_brat.clikit import cut, emit, json_option, printable, warn, when
from git_brat.errors import UsageError


def _plan_text(r: m.AskResult) -> str:
    head = {True: "created", False: "would create"}[r.created]
    src = f" from workflow {r.workflow}" if r.workflow else ""
    convoy = f" {r.convoy[:7]}" if r.convoy else ""
    lines = [cut(f"{head} convoy{convoy} \"{r.title}\"{src}: {len(r.tasks)} task"
                 f"{'s' if len(r.tasks) != 1 else ''}", 80)]
    for t in r.tasks:
        needs = f"  (needs {', '.join(t.needs)})" if t.needs else ""
        tid = f"{t.id[:7]}  " if t.id else ""
        lines.append(cut(f"  {tid}{t.key:<16} p{t.priority}  {t.title}{needs}", 80))
    if r.engine_why:   # which engine answered, and why that one (a changed mayor.engine shows)
        lines += textwrap.wrap(f"(asked engine {r.engine}: {r.engine_why})", 80,
                               break_on_hyphens=False)
    return "\n".join(lines)


@click.group()
def mayor():
    """The Mayor: an engine, asked in the repository's context, plans convoys of tasks."""


@mayor.command()
@click.option("--engine", default=None, help="Engine to ask (default: mayor.engine, else "
                                             "witness.engine).")
@click.option("-m", "--message", "brief", default="",
              help="Standing instructions, given to the engine with every request.")
@json_option
def start(engine, brief, as_json):
    """Open a conversation (`ask` opens one itself when none is open)."""
    g = open_grite()
    cfg = load_config(g, runs="mayor start")
    cid = m.start(g, cfg, engine, brief)
    v = m.view(g.state(), g.resolve(cid, m.KIND), cfg)
    emit(as_json, v, lambda: f"mayor conversation {cid[:7]} open (engine {v.engine})")


@mayor.command()
@click.argument("question")
@click.option("--dry-run", is_flag=True, help="Show the plan; create nothing.")
@click.option("-y", "--yes", is_flag=True, help="Create the plan without asking.")
@json_option
def ask(question, dry_run, yes, as_json):
    """Ask for a plan; create its convoy and tasks in one batch once confirmed."""
    interactive = sys.stdin.isatty()
    if not (dry_run or yes or interactive):
        raise UsageError("not at a terminal, so nothing can be confirmed: add --yes to create "
                         "the plan, or --dry-run to only show it")
    g = open_grite()
    cfg = load_config(g, runs="mayor ask")
    ans = m.consult(g, cfg, m.current(g.state()), question)
    if ans.touched:
        warn(f"the engine changed the work tree although it was asked not to: "
             f"{', '.join(line[3:] for line in ans.touched[:5])}"
             f"{' …' if len(ans.touched) > 5 else ''} (see `git status`)")
    if dry_run:
        r = m.result(ans, dry_run=True)
        emit(as_json, r, lambda: _plan_text(r))
        return
    if not yes:
        # On stderr, with the question: stdout may be a pipe, the person is at the terminal.
        click.echo(printable(_plan_text(m.result(ans))), err=True)
        n = len(ans.tasks)
        if not click.confirm(f"Create this convoy and its {n} task{'s' if n != 1 else ''}?",
                             default=False, err=True):
            r = m.result(ans, declined=True)
            emit(as_json, r, lambda: f"nothing created (the answer is in {ans.answer_file})")
            return
    r = m.create(g, ans)
    emit(as_json, r, lambda: _plan_text(r))


@mayor.command()
@json_option
def status(as_json):
    """The open conversation: engine, its conversation id, exchanges, what they created."""
    g = open_grite()
    state = g.state()
    conv = m.current(state)
    v = m.view(state, conv, load_config(g)) if conv is not None else None

    def human():
        if v is None:
            return 'no mayor conversation is open (`git brat mayor ask "…"` opens one)'
        how = "resumes it by id" if v.resumes else "earlier exchanges are summarized"
        lines = [f"conversation {v.id[:7]}  open  engine {v.engine} ({how})",
                 f"session:   {v.session_id or '(none yet)'}",
                 f"started:   {when(v.started_at)} by {v.author}",
                 f"exchanges: {v.exchanges}"]
        if v.brief:
            lines.append(cut(f"brief:     {v.brief}", 80))
        for c in v.created:
            lines.append(cut(f"created:   convoy {c.convoy[:7]} \"{c.title}\" "
                             f"({len(c.tasks)} tasks)", 80))
        return "\n".join(lines)
    emit(as_json, {"open": v is not None, "conversation": v}, human)


@mayor.command()
@click.option("-n", "limit", type=click.IntRange(1), default=None, help="Only the last N.")
@json_option
def log(limit, as_json):
    """Every exchange (question, answer, plan, what was created), oldest first."""
    g = open_grite()
    items = m.log(g.state(), limit)

    def human():
        if not items:
            return "no mayor exchanges yet"
        lines = []
        for x in items:
            made = (f"convoy {x.created.convoy[:7]} \"{x.created.title}\" "
                    f"({len(x.created.tasks)} tasks)" if x.created else "nothing")
            lines += [f"{when(x.at)}  {x.conversation[:7]} #{x.number}  {x.actor}  "
                      f"({x.engine}{', resumed' if x.resumed else ''})",
                      cut(f"  asked:   {x.question}", 80), cut(f"  created: {made}", 80)]
        return "\n".join(lines)
    emit(as_json, items, human)


@mayor.command()
@json_option
def stop(as_json):
    """Close the open conversation; the next `ask` starts a new one."""
    g = open_grite()
    cid = m.stop(g)
    emit(as_json, {"conversation": cid, "status": "closed"},
         lambda: f"mayor conversation {cid[:7]} closed")


def register(group: click.Group) -> None:
    group.add_command(mayor)
