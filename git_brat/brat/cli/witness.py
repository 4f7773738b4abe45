"""`git brat witness …`: run the supervisor that works on ready tasks, in the foreground or detached."""

from __future__ import annotations

import os
import shutil
import sys

import click
import msgspec

from git_brat.brat import daemon
from git_brat.brat import witness as wit
from git_brat.brat.cli.common import board, load_config, open_grite, shorts
from git_brat.clikit import cut, emit, json_option, printable, table, when
from git_brat.grite.model.state import iso


@click.group()
def witness():
    """Run coding agents on ready tasks: one session and work tree per task, supervised."""


def _summary_text(s: wit.Summary) -> str:
    lines = []
    for r in s.recovered:
        lines.append(f"recovered session {r.session[:7]} (task {r.task[:7]}): {r.status}, "
                     f"{r.reason}" + (f"; left work committed as {r.salvaged[:10]}" if r.salvaged else ""))
    rows = [[e.session[:7], e.task[:7], e.status, e.task_status, f"{e.seconds:.1f}s", e.reason]
            for e in s.ended]
    if rows:
        lines.append(table(rows, [7, 7, 9, 12, 7, None]))
    failed = f", {s.failed} failed" if s.failed else ""
    lines.append(f"{s.started} session(s) started, {len(s.ended)} ended{failed}"
                 + (" (interrupted)" if s.interrupted else ""))
    return "\n".join(lines)


@witness.command()
@click.option("--once", is_flag=True, help="Work on what is ready now, wait for those sessions, exit.")
@click.option("--engine", help="Engine preset or configured engine (default: witness.engine).")
@click.option("--max-sessions", type=click.IntRange(1, 64), help="Sessions at the same time "
              "(default: witness.concurrency).")
@click.option("--timeout", type=click.FloatRange(min=0.001), help="Seconds one session may run.")
@click.option("--lease-ttl", type=click.FloatRange(min=0.5), help="Seconds a task lease lives "
              "without a heartbeat (default: witness.lease_ttl).")
@click.option("--convoy", "convoy_id", help="Only tasks of this convoy.")
@click.option("--detach", is_flag=True, help="Run in the background (pid file under .git/brat/).")
@json_option
def run(once, engine, max_sessions, timeout, lease_ttl, convoy_id, detach, as_json):
    """Claim ready tasks and run an engine session on each until it ends.

    Exit status: 0 when every session's work went on (review, or blocked by the agent); 1 when
    a task's last session failed; 130 after Ctrl-C (sessions are stopped and recorded first).
    """
    g = open_grite()
    cfg = load_config(g, runs="witness run")
    opts = wit.options(cfg, engine, max_sessions, timeout, lease_ttl, convoy_id, once)
    w = wit.Witness(g, cfg, opts)   # checks engine and settings before anything runs
    if convoy_id:
        g.resolve(convoy_id, "convoy")
    if detach:
        args = ["witness", "run", *(["--once"] if once else [])]
        for flag, value in (("--engine", engine), ("--max-sessions", max_sessions),
                            ("--timeout", timeout), ("--lease-ttl", lease_ttl),
                            ("--convoy", convoy_id)):
            if value is not None:
                args += [flag, str(value)]
        pf = daemon.detach(g.store, "witness", args, os.getcwd())
        emit(as_json, pf, lambda: f"witness running in the background (pid {pf.pid}); log: {pf.log}")
        return
    w.say = (lambda _l: None) if as_json else \
        (lambda line: click.echo(printable(line), err=True))   # lines quote the log
    view = None
    if not as_json and sys.stderr.isatty():
        view = LiveView()
        w.say, w.on_tick = view.say, view.draw
    try:
        result = w.run()
    finally:
        if view is not None:
            view.clear()
        if os.environ.get("BRAT_DETACHED") == "witness":
            daemon.forget(g.store, "witness")
    emit(as_json, result, lambda: _summary_text(result))
    if result.interrupted and w.stopping == "interrupted":
        sys.exit(130)
    if result.failed:
        sys.exit(1)


class LiveView:
    """The witness's live sessions, redrawn in place on a terminal (stderr); never in a pipe."""

    def __init__(self):
        self.drawn = 0

    def clear(self) -> None:
        if self.drawn:
            sys.stderr.write(f"\x1b[{self.drawn}F\x1b[J")
            self.drawn = 0
        sys.stderr.flush()

    def say(self, line: str) -> None:
        self.clear()
        sys.stderr.write(printable(line) + "\n")
        sys.stderr.flush()

    def draw(self, rows: list[wit.LiveRow]) -> None:
        width = shutil.get_terminal_size((80, 24)).columns
        lines = [f"{r.session[:7]}  {r.task[:7]}  {r.engine:<8} {r.phase:<8} "
                 f"{int(r.elapsed) // 60:>2}:{int(r.elapsed) % 60:02d}  " for r in rows]
        lines = [cut(printable(head + r.last_line.strip()), width - 1)
                 for head, r in zip(lines, rows)]
        self.clear()
        if lines:
            sys.stderr.write("\n".join(lines) + "\n")
        sys.stderr.flush()
        self.drawn = len(lines)


class WitnessStatus(msgspec.Struct):
    running: bool
    pid: int | None
    started_at: object
    log: str | None
    argv: list[str]
    sessions: list


@witness.command("status")
@json_option
def status_(as_json):
    """Whether a detached witness runs here, and the live sessions."""
    g = open_grite()
    pf = daemon.read(g.store, "witness")
    b = board(g)
    live = b.sessions()
    out = WitnessStatus(pf is not None, pf.pid if pf else None,
                        iso(pf.started_at) if pf else None, pf.log if pf else None,
                        pf.argv if pf else [], live)

    def human():
        short = shorts(b)
        head = (f"witness running (pid {pf.pid}, since {when(iso(pf.started_at))}); log: {pf.log}"
                if pf else "no detached witness runs here")
        rows = [[s.id[:7], short.get(s.task, s.task[:7]), s.status, s.engine, s.branch] for s in live]
        return head + ("\n" + table(rows, [7, 7, 9, 10, None]) if rows else "\nno live sessions")
    emit(as_json, out, human)


@witness.command()
@click.option("--timeout", type=click.FloatRange(min=1), default=60, show_default=True,
              help="Seconds to wait for it to stop its sessions.")
@json_option
def stop(timeout, as_json):
    """Stop the detached witness: its sessions are stopped and recorded, their tasks re-queued."""
    g = open_grite()
    pf = daemon.stop(g.store, "witness", timeout)
    emit(as_json, {"stopped": True, "pid": pf.pid}, lambda: f"witness (pid {pf.pid}) stopped")


def register(group: click.Group) -> None:
    group.add_command(witness)
