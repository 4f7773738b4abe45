"""`git brat status`: one view of convoys, tasks, sessions, merge queue, leases, interventions."""

from __future__ import annotations

import gc
import signal
import sys
import textwrap
import time

import click

from git_brat.brat import spend
from git_brat.brat import status as st
from git_brat.brat.cli.common import board, open_grite, shorts
from git_brat.brat.board import STATES
from git_brat.clikit import cut, emit, emit_json, json_option, printable, table, warn, when

WIDTH = 80
# Column headings for task counts per state (4 characters each, so a convoy fits on one line).
HEADS = {"queued": "que", "running": "run", "needs-review": "rev", "merging": "mrg",
         "merged": "done", "blocked": "blk", "failed": "fail", "dropped": "drop"}
CLEAR = "\x1b[H\x1b[2J"    # cursor home + clear screen: redraw in place


# The default view at any size: each list shows at most this many entries, then says how
# many more there are and the flag that shows them (a project of 1k tasks fits a screen).
LIMIT = 5                  # what needs you: interventions, crashed sessions
REVIEW_LIMIT = 3           # a review entry takes three lines (the task, its diff, its verdicts)
CONVOY_LIMIT = 8
LIST_LIMIT = 3             # what runs on its own: ready tasks, sessions, merge queue, leases


class View:
    """What to show: every list whole (`full`), each list to its limit, and every task (`tasks`)."""

    def __init__(self, width: int = WIDTH, full: bool = True, tasks: bool = False):
        self.width, self.full, self.tasks = width, full, tasks

    def take(self, items: list, limit: int) -> tuple[list, int]:
        """(the items shown, how many are left out)."""
        if self.full or len(items) <= limit:
            return items, 0
        return items[:limit], len(items) - limit


def _section(title: str, body: list[str], more: int = 0, flag: str = "--all") -> list[str]:
    if not body:
        return [f"{title}  none"]
    tail = [f"… {more} more: git brat status {flag}"] if more else []
    return [title] + ["  " + line if line else "" for line in body + tail]


def _rows(rows: list[list[str]], widths: list[int | None], width: int = WIDTH) -> list[str]:
    return table(rows, widths, width - 2).splitlines() if rows else []


def render(s: st.Status, short: dict[str, str], names: dict[str, str] | None = None,
           width: int = WIDTH, full: bool = True, tasks: bool = False) -> str:
    """The human status: what needs you first, then the summary and the lists (each cut to its
    limit unless `full`). Every line fits in `width` columns but for the commands to paste,
    which are never cut."""
    text = _render(s, short, names, View(width, full, tasks))
    return "\n".join(ln if _pasted(ln) else cut(ln, width) for ln in text.split("\n"))


_PASTE = f"{'':<11}  $ "


def _pasted(line: str) -> bool:
    return line.lstrip(" ").startswith("$ ") and line.startswith(" ")


def _render(s: st.Status, short: dict[str, str], names: dict[str, str] | None,
            view: View) -> str:
    names = names or {}

    def sid(i: str) -> str:
        return short.get(i, i[:7])

    lines: list[str] = [ln for w in s.warnings for ln in _wrapped(f"warning: {w}", view.width - 1)]
    lines += _attention(s, sid, view)
    lines += _summary(s, sid, view)
    lines += _lists(s, sid, names, view)
    if s.deacon is not None:   # what the janitor last did
        d = s.deacon
        did = "; ".join(f"{a.duty} {a.action} {cut(a.target, 40)}" for a in d.actions[:3])
        more = f" (+{len(d.actions) - 3} more)" if len(d.actions) > 3 else ""
        lines += ["", *_section("DEACON", [
            f"last ran {when(d.ran_at) if d.ran_at else 'elsewhere'}"
            + (f"; last did ({when(d.acted_at)}): {did}{more}" if d.acted_at else "")])]
    if view.tasks:
        lines += ["", *_task_list(s, sid, view)]
    return "\n".join(lines)


def _attention(s: st.Status, sid, view: View) -> list[str]:
    """What waits for the human, first: reviews, then interventions, then crashes."""
    lines: list[str] = []
    w = view.width - 2
    if s.review:
        shown, more = view.take(s.review, REVIEW_LIMIT)
        body = []
        for r in shown:
            body.append(cut(f"{sid(r.task)}  {r.head[:12] or 'no branch here'}  {r.title}", w))
            body.append(f"{_PASTE}git diff {r.target}...{r.branch}")
            approve = f"{_PASTE}git brat task approve {sid(r.task)}"
            reply = f"   # or: git brat task reply {sid(r.task)} -m \"...\""
            # (a command is never cut; the other one is said only where it fits)
            body.append(approve + reply if len(approve + reply) + 2 <= view.width else approve)
        lines += _section(f"WAITING FOR YOUR REVIEW ({len(s.review)})", body, more)
        lines.append("")
    shown, more = view.take(s.interventions, LIMIT)
    body = []
    if s.red_target:   # named once, above the tasks: none of them is to blame
        r = s.red_target
        body.append(cut(f"{'red':<11}  {r.target} is red at {r.commit[:12]} — {r.result}", w))
        body += _wrapped(r.advice, max(20, view.width - 15), " " * 13)
        body.append(f"{_PASTE}{r.log_command}")
    for i in shown:
        said = f"{i.by}: {i.detail}" if i.by else i.detail
        body.append(cut(f"{i.kind:<11}  {sid(i.task)}  {i.title} — {said}", w))
        body.append(f"{_PASTE}{i.command}")   # never cut: it is meant to be pasted
    count = len(s.interventions) + (1 if s.red_target else 0)
    lines += _section(f"INTERVENTIONS ({count})" if body else "INTERVENTIONS", body, more)
    lines.append("")
    crashed = []
    for d in s.dead_sessions:   # the log still says running: the next witness or deacon run fixes it
        crashed += [cut(f"session {sid(d.session)} (task {sid(d.task)}) crashed: {d.reason}", w),
                    "  `git brat witness run` or `git brat deacon run` recovers it"]
    lines += _section("RECOVERY", crashed + _recovery(s.recovery, sid, bool(crashed), view))
    lines.append("")
    return lines


def _summary(s: st.Status, sid, view: View) -> list[str]:
    """Counts by state over the convoys shown, and one line per convoy (those that need
    something first: failed, stalled, active, then landed)."""
    if not s.convoys:
        return ["CONVOYS  none (start one: git brat workflow run feature --var feature=...)", ""]
    total = {x: sum(c.counts.get(x, 0) for c in s.convoys) for x in STATES}
    counts = ", ".join(f"{n} {x}" for x, n in total.items() if n) or "no tasks"
    lines = _wrapped(f"TASKS ({sum(total.values())}): {counts}; {len(s.ready)} ready, "
                           f"{len(s.sessions)} session(s) live, {len(s.merge_queue)} in the "
                           f"merge queue", view.width)
    order = {"failed": 0, "stalled": 1, "active": 2, "landed": 3}
    convoys = s.convoys if view.full else sorted(s.convoys, key=lambda c: order.get(c.status, 4))
    shown, more = view.take(convoys, CONVOY_LIMIT)
    fixed = 7 + 2 + 7 + 5 * len(STATES) + 2
    lines.append(f"{f'CONVOYS ({len(s.convoys)})':<16}" + "".join(f" {HEADS[x]:>4}" for x in STATES)
                 + "  title")
    for c in shown:
        counts_row = "".join(f" {c.counts.get(x, 0):>4}" for x in STATES)
        lines.append(f"{sid(c.id):<7}  {c.status:<7}{counts_row}  "
                     f"{cut(c.title, max(10, view.width - fixed))}")
        if c.id in s.spent:
            lines.append(cut(f"{'':<9}spent {spend.text(s.spent[c.id], short=True)}", view.width))
    if more:
        lines.append(f"  … {more} more: git brat status --all (or --convoy ID)")
    return lines + [""]


def _holds(found, sid, width: int) -> list[str]:
    """Engines held on a usage limit (and pauses not honoured here), with the way to lift one."""
    body = []
    for h in found:
        if h.believed:
            body.append(cut(f"{h.engine:<10}  {h.paused} (session {sid(h.session)})", width - 2))
            body.append(f"{_PASTE}git brat engine release {h.engine}")
        else:
            body += _wrapped(f"{h.engine:<10}  ignored: {h.paused} (session {sid(h.session)}): "
                             f"{h.ignored}", width - 2)
    return _section("ENGINE HOLDS", body) if body else []


def _wrapped(text: str, width: int, indent: str = "") -> list[str]:
    """text on lines of at most width columns, the later ones indented two more."""
    import textwrap
    return textwrap.wrap(text, width, initial_indent=indent, subsequent_indent=indent + "  ",
                         break_on_hyphens=False)


def _lists(s: st.Status, sid, names: dict[str, str], view: View) -> list[str]:
    """Ready tasks, sessions, the merge queue and leases, each to its limit."""
    lines: list[str] = []
    skipped = {n.task: n.reason for n in s.not_started}
    shown, more = view.take(s.ready, LIST_LIMIT)
    ready = []
    for t in shown:
        ready += _rows([[sid(t.id), f"p{t.priority}", sid(t.convoy), t.title]], [7, 2, 7, None],
                       view.width)
        if t.id in skipped:   # the witness's own pick rule says it passes this one over
            ready += _wrapped(f"not started: {skipped[t.id]}", view.width - 4, "  ")
    lines += _section(f"READY ({len(s.ready)})" if s.ready else "READY", ready, more, "--tasks")
    lines.append("")
    dead = {d.session: d for d in s.dead_sessions}
    shown, more = view.take(s.sessions, LIST_LIMIT)
    rows = [[sid(x.id), sid(x.task), f"crashed (witness pid {dead[x.id].witness_pid} gone)"
             if x.id in dead else x.status, x.engine, x.branch] for x in shown]
    lines += _section(f"SESSIONS (sandbox: {s.confinement or s.sandbox})" if s.sandbox
                      else "SESSIONS", _rows(rows, [7, 7, max([9] + [len(r[2]) for r in rows]),
                                                    10, None], view.width), more)
    lines += _holds(s.engine_holds, sid, view.width)
    unreached = set(s.no_branch)
    shown, more = view.take(s.merge_queue, LIST_LIMIT)
    lines += _section("MERGE QUEUE", _rows(
        [["now" if m.position == 0 else f"{m.position}.", sid(m.task),
          "no branch here" if m.task in unreached else m.status, f"p{m.priority}", m.title]
         for m in shown], [3, 7, 14, 2, None], view.width), more)
    gone = {f"session:{d.session}": d for d in s.dead_sessions}
    shown, more = view.take(s.leases, LIST_LIMIT)
    lines += _section("LEASES", _rows(
        [[_resource(l.resource, sid), names.get(l.holder, l.holder), l.state,
          "witness gone" if l.state == "held" and l.holder in gone
          else f"{l.remaining:.0f}s left" if l.state == "held"
          else f"since {when(l.expires_at)}"] for l in shown], [None, 14, 7, 22], view.width),
        more)
    return lines


def _task_list(s: st.Status, sid, view: View) -> list[str]:
    """Every task (of the convoy shown with --convoy), one line each, by state."""
    order = {x: i for i, x in enumerate(STATES)}
    rows = [[sid(t.id), t.status, f"p{t.priority}", sid(t.convoy), t.title]
            for t in sorted(s.tasks, key=lambda t: (order.get(t.status, 99), t.priority))]
    return _section(f"TASKS ({len(s.tasks)})", _rows(rows, [7, 12, 2, 7, None], view.width))


def _resource(resource: str, sid) -> str:
    """task:<full id> shown as task:<short id>."""
    ns, _, name = resource.partition(":")
    return f"task:{sid(name)}" if ns == "task" and len(name) == 32 else resource


def _recovery(r: st.RecoveryReport, sid, more: bool = False, view: View | None = None) -> list[str]:
    view = view or View()
    width = view.width - 2
    out = []
    if r.rebuilt_from_log and r.snapshot:
        out += _wrapped(f"state rebuilt (no usable cache): {r.events - r.replayed} events "
                              f"from snapshot {r.snapshot[:10]}, {r.replayed} replayed from the "
                              f"log", width)
    elif r.rebuilt_from_log:
        out += _wrapped(f"state rebuilt from the log: {r.replayed} events replayed (no "
                              f"usable cache)", width)
    problems, hidden = view.take(r.unreadable_leases, LIMIT)
    for problem in problems:
        out.append(cut(f"unreadable lease: {problem}", width))
    if hidden:
        out.append(f"… {hidden} more unreadable leases: git brat status --all")
    if r.skipped_records:
        out.append(f"{len(r.skipped_records)} unreadable log records skipped "
                   f"(see `git grite doctor`)")
    if r.rejected_events:
        out += _wrapped(f"{r.rejected_events} events rejected on replay (a lease that "
                              f"had moved on, an illegal or stale move, a clock or size past the bounds, "
                              f"a value not of its type): `git grite doctor` lists them", width)
    crashed, left = view.take(r.crashed_sessions, LIMIT)
    for c in crashed:
        kept = ("its work has been merged" if c.merged else
                f"{c.commits} commit(s) survive on its branch" if c.branch_exists
                else "no branch survived")
        out.append(cut(f"crashed session {sid(c.session)} (task {sid(c.task)}): {kept}", width))
        if view.full or len(r.crashed_sessions) == 1:   # (its details: one line each)
            out += _crash_details(c, sid, width)
    if left:
        out.append(f"… {left} more crashed session(s): git brat status --all")
    if r.needs_review:
        shown, hidden = view.take(r.needs_review, LIMIT * 4)
        out.append("needs review before the convoy moves on: "
                   + ", ".join(sid(t) for t in shown) + (f" (+{hidden} more)" if hidden else ""))
    return out or ([] if more else ["nothing to recover"])


def _crash_details(c: st.CrashedSession, sid, width: int) -> list[str]:
    out = []
    if c.branch_exists:
        out.append(cut(f"  branch:       {c.branch}", width))
    if c.salvaged:
        out.append(f"  uncommitted work it left was committed as {c.salvaged[:10]}")
    if c.spent is not None:
        out.append(cut(f"  it had spent: {spend.text(c.spent, short=True)}", width))
    if c.conversation:
        out.append(cut(f"  conversation: {c.conversation} (the next session resumes it)", width))
    if c.log:
        out.append(f"  log:          git brat session log {sid(c.session)}")
    for gone in c.lost:
        out.append(cut(f"  lost:         {gone}", width))
    return out


def _collect(convoy: str | None, every_task: bool = False
             ) -> tuple[st.Status, dict[str, str], dict[str, str]]:
    from git_brat.grite.cache.projection import actor_names
    from git_brat.brat import trust
    g = open_grite()
    b = board(g)
    loaded = trust.load(g.store)
    for note in (trust.notice(loaded), trust.hook_hint(loaded)):
        if note:
            warn(note)
    return (st.build(g, loaded.config, convoy, b, every_task=every_task), shorts(b),
            actor_names(b.state))


def _width() -> int:
    """The terminal's width (COLUMNS, else the tty's; 80 into a pipe or a file)."""
    import shutil
    return max(20, min(MAX_WIDTH, shutil.get_terminal_size((WIDTH, 24)).columns))


MAX_WIDTH = 200            # past this, longer lines are harder to read, not more useful


@click.command()
@click.option("--convoy", "convoy_id", help="Only this convoy (its lists in full).")
@click.option("--all", "show_all", is_flag=True,
              help="Every list in full (by default each shows its first few and how many more).")
@click.option("--tasks", "every_task", is_flag=True,
              help="Also list every task, one line each (with --convoy, that convoy's).")
@click.option("--watch", is_flag=True, help="Redraw in place until Ctrl-C.")
@click.option("--interval", type=click.FloatRange(min=0.1), default=2.0, show_default=True,
              metavar="SECONDS", help="Seconds between redraws with --watch.")
@json_option
def status(convoy_id, show_all, every_task, watch, interval, as_json):
    """What needs you (reviews, interventions, crashes), then a summary: tasks by state, one
    line per convoy, then ready tasks, sessions, merge queue and leases.

    Each list shows its first few entries and how many more there are; --all shows them all.
    Lines fit the terminal's width. --json is always complete. With --watch --json, prints one
    JSON document per line at every refresh.
    """
    full = show_all or bool(convoy_id)

    def text(s, short, names) -> str:
        return render(s, short, names, _width(), full=full, tasks=every_task)
    if not watch:
        s, short, names = _collect(convoy_id, every_task)
        emit(as_json, s, lambda: text(s, short, names))
        return
    tty = sys.stdout.isatty()
    try:
        while True:
            s, short, names = _collect(convoy_id, every_task)
            if as_json:
                emit_json(s)
            else:
                # Into a pipe or a file, no screen codes: each refresh follows the last, after
                # a blank line.
                footer = cut(f"{when(s.generated_at)}  refreshing every {interval:g}s; "
                             f"Ctrl-C to stop", _width())
                sys.stdout.write((CLEAR if tty else "\n") + printable(text(s, short, names))
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
