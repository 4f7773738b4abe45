"""`git brat status`: one view of convoys, tasks, sessions, merge queue, leases, interventions."""

from __future__ import annotations

import gc
import signal
import sys
import textwrap
import time

import click

from git_brat.brat import status as st
from git_brat.brat.cli.common import board, open_grite, shorts
from git_brat.brat.board import STATES
from git_brat.clikit import cut, emit, emit_json, json_option, printable, table, warn, when

WIDTH = 80
# Column headings for task counts per state (4 characters each, so a convoy fits on one line).
HEADS = {"queued": "que", "running": "run", "needs-review": "rev", "merging": "mrg",
         "merged": "done", "blocked": "blk", "failed": "fail", "dropped": "drop"}
CLEAR = "\x1b[H\x1b[2J"    # cursor home + clear screen: redraw in place


def _section(title: str, body: list[str]) -> list[str]:
    if not body:
        return [f"{title}  none"]
    return [title] + ["  " + line if line else "" for line in body]


def _rows(rows: list[list[str]], widths: list[int | None]) -> list[str]:
    return table(rows, widths, WIDTH - 2).splitlines() if rows else []


def render(s: st.Status, short: dict[str, str], names: dict[str, str] | None = None,
           width: int = WIDTH) -> str:
    """The human status: every line fits in `width` columns (80 by default), but for the
    intervention commands, which are never cut: they are meant to be pasted."""
    text = _render(s, short, names)
    if width >= WIDTH:
        return text
    return "\n".join(ln if ln.startswith(_PASTE) else cut(ln, width)
                     for ln in text.split("\n"))


_PASTE = f"{'':<11}  $ "


def _render(s: st.Status, short: dict[str, str], names: dict[str, str] | None = None) -> str:
    names = names or {}

    def sid(i: str) -> str:
        return short.get(i, i[:7])

    import textwrap
    lines: list[str] = [ln for w in s.warnings for ln in textwrap.wrap(
        f"warning: {w}", WIDTH - 1, subsequent_indent="  ", break_on_hyphens=False)]
    if s.review:   # what waits for the human comes first
        body = []
        for w in s.review:
            body.append(cut(f"{sid(w.task)}  {w.head[:12] or 'no branch here'}  {w.title}",
                            WIDTH - 2))
            body.append(f"{_PASTE}git diff {w.target}...{w.branch}")
            body.append(f"{_PASTE}git brat task approve {sid(w.task)}   "
                        f"# or: git brat task reply {sid(w.task)} -m \"...\"")
        lines += _section(f"WAITING FOR YOUR REVIEW ({len(s.review)})", body)
        lines.append("")
    if s.convoys:
        fixed = 7 + 2 + 7 + 5 * len(STATES) + 2
        lines.append(f"{'CONVOYS':<16}" + "".join(f" {HEADS[x]:>4}" for x in STATES) + "  title")
        for c in s.convoys:
            counts = "".join(f" {c.counts.get(x, 0):>4}" for x in STATES)
            lines.append(f"{sid(c.id):<7}  {c.status:<7}{counts}  {cut(c.title, WIDTH - fixed)}")
    else:
        lines.append("CONVOYS  none (start one: git brat workflow run feature --var feature=...)")
    lines.append("")
    skipped = {n.task: n.reason for n in s.not_started}
    ready = []
    for t in s.ready:
        ready += _rows([[sid(t.id), f"p{t.priority}", sid(t.convoy), t.title]], [7, 2, 7, None])
        if t.id in skipped:   # the witness's own pick rule says it passes this one over
            ready += textwrap.wrap(f"not started: {skipped[t.id]}", WIDTH - 4,
                                   initial_indent="  ", subsequent_indent="  ",
                                   break_on_hyphens=False)
    lines += _section(f"READY ({len(s.ready)})" if s.ready else "READY", ready)
    lines.append("")
    dead = {d.session: d for d in s.dead_sessions}
    rows = [[sid(x.id), sid(x.task), f"crashed (witness pid {dead[x.id].witness_pid} gone)"
             if x.id in dead else x.status, x.engine, x.branch] for x in s.sessions]
    lines += _section(f"SESSIONS (sandbox: {s.confinement or s.sandbox})" if s.sandbox else "SESSIONS", _rows(rows, [7, 7, max([9] + [len(r[2]) for r in rows]), 10,
                                               None]))
    unreached = set(s.no_branch)
    lines += _section("MERGE QUEUE", _rows(
        [["now" if m.position == 0 else f"{m.position}.", sid(m.task),
          "no branch here" if m.task in unreached else m.status, f"p{m.priority}", m.title]
         for m in s.merge_queue], [3, 7, 14, 2, None]))
    gone = {f"session:{d.session}": d for d in s.dead_sessions}
    lines += _section("LEASES", _rows(
        [[_resource(l.resource, sid), names.get(l.holder, l.holder), l.state,
          "witness gone" if l.state == "held" and l.holder in gone
          else f"{l.remaining:.0f}s left" if l.state == "held"
          else f"since {when(l.expires_at)}"] for l in s.leases], [None, 14, 7, 22]))
    lines.append("")
    body = []
    if s.red_target:   # named once, above the tasks: none of them is to blame
        r = s.red_target
        body.append(cut(f"{'red':<11}  {r.target} is red at {r.commit[:12]} — {r.result}",
                        WIDTH - 2))
        body += [f"{'':<13}{ln}" for ln in textwrap.wrap(r.advice, WIDTH - 15)]
        body.append(f"{_PASTE}{r.log_command}")
    for i in s.interventions:
        body.append(cut(f"{i.kind:<11}  {sid(i.task)}  {i.title} — {i.detail}", WIDTH - 2))
        body.append(f"{_PASTE}{i.command}")   # never cut: it is meant to be pasted
    count = len(s.interventions) + (1 if s.red_target else 0)
    lines += _section(f"INTERVENTIONS ({count})" if body else "INTERVENTIONS", body)
    lines.append("")
    crashed = []
    for d in s.dead_sessions:   # the log still says running: the next witness or deacon run fixes it
        crashed += [cut(f"session {sid(d.session)} (task {sid(d.task)}) crashed: {d.reason}",
                        WIDTH - 2),
                    "  `git brat witness run` or `git brat deacon run` recovers it"]
    lines += _section("RECOVERY", crashed + _recovery(s.recovery, sid, bool(crashed)))
    if s.deacon is not None:   # what the janitor last did
        d = s.deacon
        did = "; ".join(f"{a.duty} {a.action} {cut(a.target, 40)}" for a in d.actions[:3])
        more = f" (+{len(d.actions) - 3} more)" if len(d.actions) > 3 else ""
        lines += ["", *_section("DEACON", [
            f"last ran {when(d.ran_at) if d.ran_at else 'elsewhere'}"
            + (f"; last did ({when(d.acted_at)}): {did}{more}" if d.acted_at else "")])]
    return "\n".join(lines)


def _resource(resource: str, sid) -> str:
    """task:<full id> shown as task:<short id>."""
    ns, _, name = resource.partition(":")
    return f"task:{sid(name)}" if ns == "task" and len(name) == 32 else resource


def _recovery(r: st.RecoveryReport, sid, more: bool = False) -> list[str]:
    out = []
    if r.rebuilt_from_log and r.snapshot:
        out.append(f"state rebuilt (no usable cache): {r.events - r.replayed} events from "
                   f"snapshot {r.snapshot[:10]}, {r.replayed} replayed from the log")
    elif r.rebuilt_from_log:
        out.append(f"state rebuilt from the log: {r.replayed} events replayed (no usable cache)")
    for problem in r.unreadable_leases:
        out.append(cut(f"unreadable lease: {problem}", WIDTH - 2))
    if r.skipped_records:
        out.append(f"{len(r.skipped_records)} unreadable log records skipped "
                   f"(see `git grite doctor`)")
    if r.rejected_events:
        out.append(f"{r.rejected_events} events rejected on replay (a lease that had moved on, "
                   f"an illegal move, a clock or size past the bounds, a value not of its type): "
                   f"`git grite doctor` lists them")
    for c in r.crashed_sessions:
        kept = ("its work has been merged" if c.merged else
                f"{c.commits} commit(s) survive on its branch" if c.branch_exists
                else "no branch survived")
        out.append(cut(f"crashed session {sid(c.session)} (task {sid(c.task)}): {kept}", WIDTH - 2))
        if c.branch_exists:
            out.append(cut(f"  branch:       {c.branch}", WIDTH - 2))
        if c.salvaged:
            out.append(f"  uncommitted work it left was committed as {c.salvaged[:10]}")
        if c.conversation:
            out.append(cut(f"  conversation: {c.conversation} (the next session resumes it)",
                           WIDTH - 2))
        if c.log:
            out.append(f"  log:          git brat session log {sid(c.session)}")
        for gone in c.lost:
            out.append(cut(f"  lost:         {gone}", WIDTH - 2))
    if r.needs_review:
        out.append("needs review before the convoy moves on: "
                   + ", ".join(sid(t) for t in r.needs_review))
    return out or ([] if more else ["nothing to recover"])


def _collect(convoy: str | None) -> tuple[st.Status, dict[str, str], dict[str, str]]:
    from git_brat.grite.cache.projection import actor_names
    from git_brat.brat import trust
    g = open_grite()
    b = board(g)
    loaded = trust.load(g.store)
    for note in (trust.notice(loaded), trust.hook_hint(loaded)):
        if note:
            warn(note)
    return st.build(g, loaded.config, convoy, b), shorts(b), actor_names(b.state)


@click.command()
@click.option("--convoy", "convoy_id", help="Only this convoy.")
@click.option("--watch", is_flag=True, help="Redraw in place until Ctrl-C.")
@click.option("--interval", type=click.FloatRange(min=0.1), default=2.0, show_default=True,
              metavar="SECONDS", help="Seconds between redraws with --watch.")
@json_option
def status(convoy_id, watch, interval, as_json):
    """Convoys, ready tasks, sessions, merge queue, leases, interventions and recovery.

    With --watch --json, prints one JSON document per line at every refresh.
    """
    import shutil
    if not watch:
        s, short, names = _collect(convoy_id)
        width = max(20, min(WIDTH, shutil.get_terminal_size((WIDTH, 24)).columns))
        emit(as_json, s, lambda: render(s, short, names, width))
        return
    tty = sys.stdout.isatty()
    try:
        while True:
            s, short, names = _collect(convoy_id)
            if as_json:
                emit_json(s)
            else:
                # The terminal's width (COLUMNS, else the tty's); into a pipe or a file, no
                # screen codes: each refresh follows the last, after a blank line.
                width = max(20, min(WIDTH, shutil.get_terminal_size((WIDTH, 24)).columns))
                footer = cut(f"{when(s.generated_at)}  refreshing every {interval:g}s; "
                             f"Ctrl-C to stop", width)
                sys.stdout.write((CLEAR if tty else "\n") + printable(render(s, short, names, width))
                                 + "\n\n" + footer + "\n")
                sys.stdout.flush()
            gc.unfreeze()   # replay froze this round's objects (state.no_gc): let them go
            time.sleep(interval)
    except KeyboardInterrupt:
        # `git brat` forwards the Ctrl-C it got too: a second SIGINT must not interrupt exit.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if not as_json:
            sys.stdout.write("\n")
        return


def register(group: click.Group) -> None:
    group.add_command(status)
