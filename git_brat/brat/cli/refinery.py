"""`git brat refinery status|run|stop|retry|log`: the merge queue's commands (logic in refinery*.py)."""

from __future__ import annotations

import sys

import click
import msgspec

from git_brat.brat import config, trust
from git_brat.brat import board as model
from git_brat.brat.refinery import report
from git_brat.brat.refinery import run as rr
from git_brat.brat.refinery.hub import refuse_unless_checks_allowed as hub_check
from git_brat.brat.refinery.passes import retry as retry_task
from git_brat.clikit import emit, json_option, printable, table, when
from git_brat.errors import UsageError
from git_brat.grite.repo import Grite


def load_config(g: Grite, runs: str | None = None) -> config.Config:
    """.brat/config.toml of the repository; in a bare hub, brat/config.toml in the git dir."""
    from git_brat.brat.cli.common import load_config as load
    return load(g, runs)


@click.group()
def refinery():
    """The merge queue: land finished tasks on the target branch through the check."""


@refinery.command("status")
@json_option
def status_(as_json):
    """The queue in processing order, the merge under way, recent results."""
    g = model.open_grite()
    s = rr.status(g, load_config(g))

    def human():
        lines = [f"refinery: {'running' + (f' (pid {s.pid})' if s.pid else '') if s.running else 'not running'}"
                 f"; target {s.target}, policy {s.policy}, batch {s.batch}, "
                 f"check {s.check or '(none)'}"]
        if s.held:
            lines.append(f"LANDS NOTHING: {s.held}")
        if s.red_target:
            r = s.red_target
            lines.append(f"{r.target.upper()} IS RED at {r.commit[:12]}: {r.result}")
            lines += [f"  {ln}" for ln in r.tail[-5:]]
            lines.append(f"  {r.advice}; whole output: {r.log_command}")
        lines.append("\nMERGING")
        lines += [f"  {c.task[:7]}  {c.status}  {c.elapsed:.0f}s  {c.title}"
                  + (f"\n           log {c.log} ({c.log_bytes} bytes): {c.last_line}"
                     if c.check_started_at else "") for c in s.current] or ["  (nothing)"]
        lines.append("\nQUEUE")
        rows = [[f"{q.position}.", q.task[:7], f"p{q.priority}",
                 f"~p{q.effective_priority}" if q.effective_priority != q.priority else "",
                 f"{q.waiting:.0f}s", q.status, q.title] for q in s.queue]
        lines += ["  " + ln for ln in table(rows, [3, 7, 2, 4, 6, 7, None]).splitlines()] \
            if rows else ["  (empty)"]
        if s.unreachable:
            lines.append("\nUNREACHABLE (needs review, but no branch here to merge)")
            lines += [f"  {tid[:7]}  {why}" for tid, why in s.unreachable.items()]
        lines.append("\nRECENT")
        for r in s.recent:
            row = [[r.task[:7], r.status, f"{r.duration:.1f}s", when(r.finished_at), r.result]]
            lines.append("  " + table(row, [7, 9, 7, 16, None]))
            if r.check:   # the failing tests and the output's last lines, and where the rest is
                lines += [f"           {ln}" for ln in report.lines(r.check)[1:]]
        if not s.recent:
            lines.append("  (none)")
        return "\n".join(lines)
    emit(as_json, s, human)


@refinery.command("log")
@click.argument("task_id", required=False)
@click.option("--target", "of_target", is_flag=True,
              help="The red target's own check instead (the target branch checked alone).")
@json_option
def log_(task_id, of_target, as_json):
    """The whole output of TASK's last check (a local file: on the machine that ran it)."""
    if bool(task_id) == of_target:
        raise UsageError("give a TASK, or --target for the target branch's own check")
    g = model.open_grite()
    b = model.board(g)
    out = report.target_log(g, b, load_config(g).refinery.target_branch) if of_target else \
        report.whole_log(g, b, g.resolve(task_id, model.TASK).id)
    emit(as_json, out, lambda: out["text"].rstrip("\n") + (
        f"\n(the last {report.MAX_LOG >> 20} MiB of {out['log']})" if out["truncated"] else ""))


@refinery.command()
@click.option("--once", is_flag=True, help="Drain the queue as it stands, then exit.")
@click.option("--detach", is_flag=True, help="Run in the background (output to the refinery "
                                             "log); print its pid.")
@click.option("--hook", is_flag=True, hidden=True,
              help="Started by a git hook: exit quietly unless refinery.trigger is hook and "
                   "no refinery runs.")
@click.option("--wait", "wait", type=click.FloatRange(min=0), default=None, metavar="SECONDS",
              help="When another refinery holds the queue, poll for up to SECONDS before "
                   "giving up (exit 5). Default: 0 with --once, else wait as a standby.")
@json_option
def run(once, detach, hook, wait, as_json):
    """Merge requests: stack, check, land by compare-and-swap; until stopped, or --once."""
    g = model.open_grite()
    loaded = trust.load(g.store)
    cfg = loaded.config
    if hook and cfg.refinery.trigger != "hook":
        return   # the clone's own setting decides whether a hook starts anything
    trust.require(loaded, "refinery run")
    hub_check(g, cfg)
    if detach:
        if rr.running_pid(g):
            raise UsageError(f"a refinery already runs here (pid {rr.running_pid(g)}); "
                             f"`git brat refinery stop` stops it")
        pid = rr.detach(g, [*(["--once"] if once else []), *(["--hook"] if hook else []),
                            *(["--wait", str(wait)] if wait is not None else [])])
        emit(as_json, {"pid": pid, "log": rr.log_path(g)},
             lambda: f"refinery started in the background (pid {pid}); log: {rr.log_path(g)}")
        return
    if wait is None:   # a long-running refinery stands by for the one another clone runs
        wait = 0.0 if once else float("inf")
    report = rr.run(g, cfg, once, quiet_if_busy=hook, wait=wait,
                    on_standby=lambda s: _say_standby(s, as_json))

    def human():
        if report.busy:
            return f"another refinery is running: {report.busy}"
        lines = []
        for p in report.passes:
            for o in p.outcomes:
                lines.append(f"{o.task[:7]}  {o.result}  {o.detail}"
                             + (f"\n         full output (here only): {o.log}" if o.log else ""))
        total = sum(p.check_runs for p in report.passes)
        lines.append(f"{sum(len(p.outcomes) for p in report.passes)} request(s), "
                     f"{total} check run(s)" + ("; stopped" if report.stopped else ""))
        return "\n".join(lines)
    emit(as_json, report, human)


def _say_standby(s: rr.Standby, as_json: bool) -> None:
    """Said on stderr when it starts waiting (stdout keeps the one final report): a line, or
    with --json one JSON object {"standby": ...}."""
    if as_json:
        sys.stderr.buffer.write(msgspec.json.encode({"standby": s}) + b"\n")
        sys.stderr.flush()
    else:
        click.echo(printable(rr.standby_message(s)), err=True)


@refinery.command()
@json_option
def stop(as_json):
    """Stop the refinery running on this machine (its check is stopped, its merge put back)."""
    g = model.open_grite()
    res = rr.stop(g)
    emit(as_json, res, lambda: f"stopped the refinery (pid {res.pid})" if res.stopped
         else "no refinery is running here")


@refinery.command()
@click.argument("task_id")
@json_option
def retry(task_id, as_json):
    """Send a blocked or failed task whose branch you fixed back to the merge queue."""
    g = model.open_grite()
    up = retry_task(g, task_id)
    emit(as_json, up, lambda: f"{up.id[:7]}: {up.from_status} -> {up.to_status} (recorded)")


def register(group: click.Group) -> None:
    group.add_command(refinery)
