"""`git brat deacon run|status`: the janitor's commands (logic in deacon.py)."""

from __future__ import annotations


import click

from git_brat.brat import deacon
from git_brat.brat import board as model
from git_brat.brat.cli.refinery import load_config
from git_brat.clikit import emit, json_option, printable, when
from git_brat.errors import UsageError


def _human(r: deacon.Report) -> str:
    lines = [f"{a.duty:<9}  {a.action:<9}  {a.target}" + (f"  ({a.detail})" if a.detail else "")
             for a in r.actions]
    lines += [f"{a.duty:<9}  kept       {a.target}  ({a.detail})" for a in r.kept]
    lines += [f"{d:<9}  {v}" for d, v in r.duties.items() if v != "ok"]
    return "\n".join(lines or ["nothing to do"])


@click.group("deacon")
def deacon_group():
    """The janitor: expired leases, crashed sessions, stale worktrees and logs, sync."""


@deacon_group.command()
@click.option("--once", is_flag=True, help="One pass, then exit.")
@click.option("--detach", is_flag=True, help="Run in the background; print its pid.")
@json_option
def run(once, detach, as_json):
    """Do every duty (each action recorded as an event); every deacon.interval until stopped."""
    g = model.open_grite()
    cfg = load_config(g)
    if detach:
        if not once and deacon.running_pid(g):
            raise UsageError(f"a deacon already runs here (pid {deacon.running_pid(g)}); "
                             f"`git brat deacon stop` stops it")
        pf = deacon.detach(g, once)
        emit(as_json, {"pid": pf.pid, "log": pf.log},
             lambda: f"deacon started in the background (pid {pf.pid}); log: {pf.log}")
        return
    if once:
        report = deacon.run_once(g, cfg)
        emit(as_json, report, lambda: _human(report))
        return
    for report in deacon.loop(g, cfg):
        if as_json:
            emit(True, report, lambda: None)
        elif report.actions:   # its targets and details come from the log: shown printable
            click.echo(printable(_human(report)))


@deacon_group.command("stop")
@json_option
def stop_(as_json):
    """Stop the looping deacon of this repository (SIGTERM; it finishes its pass)."""
    g = model.open_grite()
    pid = deacon.stop(g)
    emit(as_json, {"stopped": pid is not None, "pid": pid},
         lambda: f"stopped the deacon (pid {pid})" if pid else "no deacon is running here")


@deacon_group.command()
@json_option
def status(as_json):
    """What the deacon last did."""
    g = model.open_grite()
    last = deacon.last_run(g, g.state())

    def human():
        if last is None:
            return "the deacon has not run here"
        lines = [f"last ran: {when(last.ran_at) if last.ran_at else 'not on this machine'}"]
        if last.acted_at:
            lines.append(f"last did ({when(last.acted_at)}):")
            lines += [f"  {a.duty} {a.action} {a.target}" for a in last.actions]
        return "\n".join(lines)
    emit(as_json, last, human)


def register(group: click.Group) -> None:
    group.add_command(deacon_group)
