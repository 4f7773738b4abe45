"""The board's pages as HTML: every value from the log goes through escape(), so it shows as text."""

from __future__ import annotations

import html
import re
from datetime import datetime
from typing import Any, Iterable
from urllib.parse import urlencode

import msgspec

from git_brat.brat.ui import control, data

READ_ONLY = ('<p class="warn">This board serves a bare hub: everything pushed to it, read-only. '
             'Act from a clone.</p>')
LOGS_SHOWN = 4      # session logs streamed on the Sessions page
CONVOYS_LISTED = 50   # convoys in the board's table, newest first (the filter names them all)
NAV = (("/", "Board"), ("/needs-you", "Needs you"), ("/sessions", "Sessions"),
       ("/queue", "Merge queue"), ("/mayor", "Mayor"))


def escape(value: Any) -> str:
    """Any value as HTML text or attribute value, whatever its type (a field of a forged event
    may hold markup, a list, a huge number): <, >, &, " and ' never open markup, and control
    characters (which also mark where the render's nonce goes) are dropped."""
    if value is None:
        return ""
    text = value if isinstance(value, str) else _text_of(value)
    if not text.isprintable():   # (a fast look first: most values are one printable line)
        text = _CONTROL.sub("", text)
    return html.escape(text, quote=True)


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
BIG = 10 ** 30         # a number past this shows by its size (its digits help nobody)
TEXT_MAX = 100_000    # most characters of one value shown (a huge number or list stays cheap)


def _text_of(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > BIG:
        return f"{'-' if value < 0 else ''}(a {value.bit_length()}-bit number)"
    try:
        return str(value)[:TEXT_MAX]
    except Exception:   # noqa: BLE001 - a value that cannot say itself shows as its type
        return f"({type(value).__name__})"


def number(value: Any, fmt: str = "") -> str:
    """A value meant to be a number, formatted when it is one; anything else escaped as text."""
    if type(value) is int and not fmt and -BIG < value < BIG:
        return str(value)    # digits and a sign: nothing to escape
    if isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) < BIG:
        try:
            return e(format(value, fmt))
        except (ValueError, OverflowError):
            pass
    return e(value)


e = escape


def short(i: Any) -> str:
    return e(i[:7] if isinstance(i, str) else i)


def when(dt: datetime | None) -> str:
    if not isinstance(dt, datetime):
        return e(dt)
    return f'<time datetime="{e(dt.isoformat())}">{e(dt.astimezone().strftime("%Y-%m-%d %H:%M:%S"))}</time>'


def moment(at: Any) -> float:
    """A timeline entry's time as a number, to sort by: one that is not a time sorts first."""
    try:
        return at.timestamp() if isinstance(at, datetime) else float("-inf")
    except (ValueError, OverflowError, OSError):
        return float("-inf")


def duration(s) -> float | str:
    """How long a session ran (or has run), in seconds; "" when its times are not times."""
    start, end = s.started_at, s.ended_at
    if not isinstance(start, datetime) or not isinstance(end, (datetime, type(None))):
        return ""
    try:
        return ((end or datetime.now(start.tzinfo)) - start).total_seconds()
    except (TypeError, ValueError, OverflowError):
        return ""


def task_link(tid: str, title: str = "") -> str:
    label = f"{short(tid)}" + (f" {e(title)}" if title else "")
    return f'<a href="{at("/task/" + e(tid))}">{label}</a>'


# Where a page's forms carry the nonce of the render that sends them: a mark no escaped value
# can hold (escape() drops control characters), so a page body can be cached and each copy
# sent gets its own nonce.
NONCE_MARK = "\x00nonce\x00"
# Likewise where the board's root goes (the secret path its pages live under, see the
# server's Guard): every link and form of a page starts with it.
ROOT_MARK = "\x00root\x00"


def at(path: str) -> str:
    """A path of the board (already escaped), as a page links it: under the board's root."""
    return ROOT_MARK + path


NEEDS_NAMED = 100   # what needs you, named on each page for its notifications (the latest)


def page(title: str, body: str, nonce: str, here: str = "/", needs: int | None = None,
         what: list = (), root: str = "") -> str:
    """The whole page; nonce: this render's, on its script (the CSP allows no other) and on
    its action forms (the script posts no other). needs: what waits on the human, counted in
    the title and on "Needs you" (the script keeps both current); what: those things
    (control.Need), named for the browser's notifications; root: the path the board's pages
    live under (its script reads it from the body)."""
    root = e(root)
    named = e(msgspec.json.encode([[n.key, n.words] for n in what[:NEEDS_NAMED]]).decode())
    badge = (f' <span id="needs-count" class="badge" data-what="{named}">'
             f'{"" if needs is None else number(needs)}</span>')
    nav = "".join(f'<a href="{at(href)}"{" aria-current=page" if href == here else ""}>{e(name)}'
                  f'{badge if href == "/needs-you" else ""}</a>' for href, name in NAV)
    n = e(nonce)
    shown = (f"({number(needs)}) " if needs else "") + f"{e(title)} · git brat"
    return ("<!doctype html><html lang=en><head><meta charset=utf-8>"
            f"<meta name=viewport content='width=device-width'><title>{shown}</title>"
            f'<meta name="brat-render" content="{n}">'
            f'<link rel=stylesheet href="{root}/static/board.css">'
            f'<script src="{root}/static/board.js" nonce="{n}" defer></script></head>'
            f'<body data-root="{root}">'
            f'<header><strong>git brat</strong><nav>{nav}</nav>'
            '<button id="notify" type="button" hidden title="a browser notification when '
            'something new needs you">notify me</button>'
            '<span id="live" title="live updates">●</span></header>'
            f'<main id="main"><h1>{e(title)}</h1>{body.replace(NONCE_MARK, n)}</main></body></html>'
            ).replace(ROOT_MARK, root)


def live(section_id: str, inner: str) -> str:
    """A part of a page redrawn when the log moves (forms stay outside, so typing survives)."""
    return f'<section data-live id="{e(section_id)}">{inner}</section>'


def table(head: Iterable[str], rows: list[list[str]], empty: str = "none") -> str:
    if not rows:
        return f'<p class="empty">{e(empty)}</p>'
    th = "".join(f"<th>{e(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def action(url: str, label: str, fields: str = "", cls: str = "") -> str:
    """A form the board's script posts (with the CSRF token) to an /api/v1/ action: only
    while it carries the nonce of the render it came in (markup from the log never does)."""
    return (f'<form class="action {e(cls)}" data-action="{at(e(url))}" data-nonce="{NONCE_MARK}">'
            f'{fields}'
            f'<button type=submit>{e(label)}</button></form>')


def _select(name: str, current: str, options: list[tuple[str, str]]) -> str:
    opts = "".join(f'<option value="{e(v)}"{" selected" if v == current else ""}>{e(t)}</option>'
                   for v, t in [("", f"any {name}")] + options)
    return f'<label>{e(name)} <select name="{e(name)}">{opts}</select></label>'


# -- pages ---------------------------------------------------------------------------------

def board(p: data.BoardPage, roles: control.Roles | None = None) -> str:
    """Columns of cards first, under a search and the filters; what runs and what is not yet
    pushed beside them; the convoys' table last. roles: None on a read-only board."""
    f = p.filters
    filters = (f'<form class="filters" method=get action="{at("/")}">'
               f'<input type=search name=q value="{e(f.get("q", ""))}" '
               'placeholder="search titles, ids, bodies" aria-label="search">'
               + _select("convoy", f["convoy"], [(c.id, f"{str(c.id)[:7]} {c.title}") for c in p.convoys])
               + _select("state", f["state"], [(s, s) for s in data.COLUMNS])
               + _select("engine", f["engine"], [(x, x) for x in p.engines])
               + _select("label", f["label"], [(x, x) for x in p.labels])
               + "<button type=submit>filter</button></form>")
    found = (f'<p class="found">{number(p.found)} task(s) match</p>'
             if any(f.get(k) for k in ("q", "convoy", "state", "engine", "label")) else "")
    convoys = table(["convoy", "merged", "open work", "title"], [
        [f'<a href="{at("/?" + e(urlencode({"convoy": c.id})))}">{short(c.id)}</a>',
         f"{number(c.counts.get('merged', 0))}/{number(c.total)}",
         e(", ".join(f"{n} {s}" for s, n in c.counts.items() if s not in ("merged", "dropped"))),
         e(c.title)] for c in p.convoys[-CONVOYS_LISTED:][::-1]],
        "no convoys yet: create one above, ask the mayor, or `git brat workflow run`")
    if len(p.convoys) > CONVOYS_LISTED:
        convoys += f'<p class="empty">the {CONVOYS_LISTED} newest of {len(p.convoys)}: choose one above</p>'
    cols = []
    for state, cards in p.columns.items():
        items = "".join(card(c) for c in cards)
        more = p.hidden.get(state, 0)
        if more:
            items += (f'<li class="more"><a href="{at("/?" + e(urlencode({**f, "state": state})))}">'
                      f'and {more} more</a></li>')
        cols.append(f'<div class="column" data-state="{e(state)}"><h2>{e(state)} '
                    f'<span class="count">{len(cards) + more}</span></h2><ul>{items}</ul></div>')
    top = filters + (create_forms(p) if roles is not None else "")
    return (top + (live("roles", roles_strip(roles)) if roles is not None else "")
            + live("columns", found + f'<div class="columns">{"".join(cols)}</div>')
            + live("convoys", f'<details class="convoys"><summary>Convoys ({len(p.convoys)})'
                              f'</summary>{convoys}</details>'))


def card(c: data.Card) -> str:
    facts = [f"p{number(c.priority)}"] + (["ready"] if c.ready else []) + \
        ([e(c.engine)] if c.engine else [])
    if c.liveness:
        said = c.paused if c.liveness == "paused" and c.paused else c.liveness
        facts.append(f'<span class="liveness {e(c.liveness)}">{e(said)}</span>')
    if c.running_for is not None:
        facts.append(f'<span class="elapsed">{e(span(c.running_for))}</span>')
    if c.cost:
        facts.append(f'<span class="cost">{e(c.cost)}</span>')
    facts += [e(x) for x in c.labels]
    msg = f'<p class="msg">{e(c.message)}</p>' if c.message else ""
    return (f'<li class="card{" dead" if c.liveness == "dead" else ""}" data-task="{e(c.id)}">'
            f'<a href="{at("/task/" + e(c.id))}"><span class="id">{short(c.id)}</span> '
            f'<span class="title">{e(c.title)}</span></a>{msg}<small>{" · ".join(facts)}</small></li>')


def span(seconds: float) -> str:
    """A duration as people read it: 45s, 12m, 3h05m."""
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def roles_strip(r: control.Roles) -> str:
    witness = (f'witness running (pid {number(r.witness)}) '
               + action("/api/v1/witness/stop", "stop the witness", cls="witness-stop")
               if r.witness else
               "no witness runs here " + action("/api/v1/witness/start", "start a witness",
                                                 cls="witness-start"))
    refinery = (f"refinery running (pid {number(r.refinery)})" if r.refinery else
                "refinery idle " + action("/api/v1/refinery/pass", "run a refinery pass",
                                          cls="refinery-pass"))
    if not r.remotes:
        sync = '<span class="empty">no remote syncs this log (everything stays here)</span>'
    elif r.never_pushed or r.unpushed:
        what = ("this clone's log was never pushed" if r.never_pushed else
                f"{number(r.unpushed)} change(s) not yet pushed")
        sync = (f'<span class="unpushed">{e(what)} to {e(", ".join(r.remotes))}</span> '
                + action("/api/v1/sync/push", "push now", cls="push"))
    else:
        sync = f'<span class="pushed">everything is pushed to {e(", ".join(r.remotes))}</span>'
    return (f'<div class="roles"><span>{witness}</span><span>{refinery}</span>'
            f'<span>{sync}</span><output data-result></output></div>')


def create_forms(p: data.BoardPage) -> str:
    options = "".join(f'<option value="{e(c.id)}"{" selected" if c.id == p.filters["convoy"] else ""}>'
                      f'{short(c.id)} {e(c.title)}</option>' for c in reversed(p.convoys))
    prios = "".join(f'<option value="{x}"{" selected" if x == 2 else ""}>p{x}</option>'
                    for x in (0, 1, 2, 3, 4))
    return ('<details class="create"><summary>New task or convoy</summary><div class="actions">'
            + action("/api/v1/tasks", "create the task",
                     f'<select name="convoy" aria-label="convoy">{options}</select>'
                     '<input name="title" placeholder="task title" aria-label="task title">'
                     f'<select name="priority" aria-label="priority">{prios}</select>'
                     '<textarea name="body" rows=2 placeholder="what to do"></textarea>',
                     "new-task")
            + action("/api/v1/convoys", "create the convoy",
                     '<input name="title" placeholder="convoy title" aria-label="convoy title">'
                     '<textarea name="body" rows=2 placeholder="what it is for"></textarea>',
                     "new-convoy")
            + "<output data-result></output></div></details>")


def needs_you(s, review: list) -> str:
    inter = table(["what", "task", "detail", "the command"], [
        [f'<span class="st st-{e(i.kind)}">{e(i.kind)}</span>', task_link(i.task, i.title),
         f"<pre>{e(i.detail)}</pre>", f"<code>{e(i.command)}</code>"] for i in s.interventions],
        "nothing is waiting on you")
    rev = table(["task", "status", "since"], [
        [task_link(q.task, q.title), e(q.status), when(q.since)] for q in review],
        "no work waiting for review")
    crashed = []
    for c in s.recovery.crashed_sessions:
        kept = ("its work has been merged" if c.merged else
                f"{number(c.commits)} commit(s) survive on {e(c.branch)}" if c.branch_exists
                else "no branch survived")
        lost = "".join(f"<li>lost: {e(x)}</li>" for x in c.lost)
        crashed.append([f'<a href="{at("/sessions#s-" + e(c.session))}">{short(c.session)}</a>',
                        task_link(c.task), e(kept) if not c.branch_exists else kept,
                        f"<ul>{lost}</ul>" if lost else ""])
    for d in s.dead_sessions:
        crashed.append([short(d.session), task_link(d.task), e(d.reason),
                        "<ul><li>`git brat witness run` or `git brat deacon run` recovers it</li></ul>"])
    rec = table(["session", "task", "what survives", "what it cost"], crashed, "no crashed sessions")
    return (live("interventions", "<h2>Interventions</h2>" + inter)
            + live("review", "<h2>Needs review</h2>" + rev)
            + live("recovery", "<h2>Crashed sessions (the recovery report)</h2>" + rec))


ACTIONS = {   # each action a task page may offer: (label, fields, class)
    "approve": ("approve: to the merge queue", "", "approve"),
    "reply": ("request changes (re-queue with your answer and notes)",
              '<textarea name="message" rows=3 placeholder="what to change (notes on diff '
              'lines go with it: click a line number)"></textarea><ul class="notes"></ul>', "reply"),
    "requeue": ("re-queue", "", "requeue"),
    "block": ("block", '<input name="message" placeholder="why">', "block"),
    "drop": ("drop", "", "drop"),
    "retry": ("retry the failed merge", "", "retry"),
    "stop": ("stop its session", "", "stop"),
}


def task(d, sessions: list, diff: data.TaskDiff, convoy_title: str, allowed: list[str] = (),
         check: control.CheckOutput | None = None, dead: set[str] | frozenset = frozenset()) -> str:
    """The review screen: the diff, and beside it what the task is, the check's output and the
    decision (only the actions legal now); the timeline and the sessions below."""
    tid = d.id
    facts = [("status", f'<span class="st st-{e(d.status)}">{e(d.status)}</span>'
              + (" ready" if d.ready else "")),
             ("convoy", f'<a href="{at("/?convoy=" + e(d.convoy))}">{short(d.convoy)}</a> {e(convoy_title)}'),
             ("priority", f"p{number(d.priority)}"),
             ("needs", ", ".join(task_link(n) for n in d.needs) or "nothing"),
             ("needed by", ", ".join(task_link(n) for n in d.dependents) or "nothing")]
    if d.reason:
        facts.append(("reason", f"<pre>{e(d.reason)}</pre>"))
    head = "".join(f"<dt>{e(k)}</dt><dd>{v}</dd>" for k, v in facts)
    timeline = []
    for h in d.history:
        move = f"{h.from_status} → {h.to_status}" if h.from_status else f"created {h.to_status}"
        timeline.append((h.at, f"{when(h.at)} <b>{e(move)}</b> by {e(h.actor)}"
                         + (" FORCED" if h.forced else "")
                         + (f" — {e(h.reason)}" if h.reason else "")))
    for c in d.comments:
        timeline.append((c.created_at, f"{when(c.created_at)} <b>{e(c.author)}</b>"
                                       f"<pre class=comment>{e(c.body)}</pre>"))
    items = "".join(f"<li>{x}</li>" for _, x in sorted(timeline, key=lambda t: moment(t[0])))
    srows = []
    for s in sessions:
        srows.append([f'<a href="{at("/sessions#s-" + e(s.id))}">{short(s.id)}</a>', e(s.engine),
                      number(s.attempt), session_status(s, dead),
                      f"{number(duration(s), '.0f')}s", e(s.reason)])
    logs = "".join(log_view(s.id) for s in sessions[-1:])
    decision = "".join(action(f"/api/v1/tasks/{tid}/{a}", *ACTIONS[a]) for a in ACTIONS
                       if a in allowed)
    # The decision redraws with the task's status (only what is legal now); the result of
    # the last action stays beside it.
    side = (live("facts", f"<dl>{head}</dl>")
            + '<div class="actions decision">'
            + live("decision", decision or '<p class="empty">no action is open to this task now</p>')
            + '<output data-result></output></div>'
            + live("check", check_view(check)))
    return (f'<h2 class="task-title">{e(d.title)}</h2>'
            + (f'<pre class="body">{e(d.body)}</pre>' if d.body else "")
            + '<div class="review">'
            + live("diff", f"<h2>Diff of {e(diff.branch)} against {e(diff.target)}</h2>"
                           + diff_view(diff, past_notes(d.comments)))
            + f'<aside class="review-side">{side}</aside></div>'
            + live("timeline", f"<h2>Timeline</h2><ol class=timeline>{items}</ol>")
            + live("sessions", "<h2>Sessions</h2>" + table(
                ["session", "engine", "attempt", "status", "duration", "outcome"], srows,
                "no session has run it yet"))
            + logs)


def check_view(check: control.CheckOutput | None) -> str:
    if check is None or not check.merge:
        return '<h3>The check</h3><p class="empty">the refinery has not checked this work yet</p>'
    return (f'<h3>The check <span class="st st-{e(check.status)}">{e(check.status)}</span></h3>'
            f'<pre class="check">{e(check.text) or "(no output recorded)"}</pre>')


def diff_view(diff: data.TaskDiff, notes: dict[tuple[str, str], list[str]]) -> str:
    """Each file's diff; a line's number is a button that opens a note at that line, and the
    notes of earlier replies show at the lines they name."""
    files = []
    for f in diff.files:
        rows = []
        for line, cls, where, anchor in diff_lines(f.diff):
            # A note names the line as a reviewer would: its number in the new file (a
            # removed line's note goes to the line that follows it); headers take none.
            button = (f'<button type=button class="note" data-nonce="{NONCE_MARK}" '
                      f'data-path="{e(f.path)}" '
                      f'data-line="{e(anchor)}" title="comment on this line">{e(where)}</button>'
                      if where else "")
            rows.append(f'<tr class="{cls}"><td class="ln">{button}</td>'
                        f'<td><code>{e(line)}</code></td></tr>')
            if where and not where.startswith("-"):
                rows += [f'<tr class="note-row past"><td></td><td><div class="note-text">'
                         f'{e(n)}</div></td></tr>' for n in notes.pop((f.path, where), [])]
        files.append(f'<details open class="file"><summary>{e(f.path)}</summary>'
                     f'<table class="diff">{"".join(rows)}</table></details>')
    return ("".join(files) or f'<p class="empty">no changes on {e(diff.branch)}</p>') + \
        ('<p class="warn">the diff was cut: see it with git</p>' if diff.truncated else "")


_NOTE_LINE = re.compile(r"^- (?P<path>[^:\n]+):(?P<line>[1-9][0-9]{0,8}): (?P<text>.*)$")


def past_notes(comments: list) -> dict[tuple[str, str], list[str]]:
    """(path, line) -> the notes replies left there ("reply: …\n\nNotes on the diff:\n- p:l: t")."""
    out: dict[tuple[str, str], list[str]] = {}
    for c in comments:
        body = c.body if isinstance(c.body, str) else ""
        if not body.startswith("reply: ") or "\n\nNotes on the diff:\n" not in body:
            continue
        for raw in body.split("\n\nNotes on the diff:\n", 1)[1].splitlines():
            m = _NOTE_LINE.match(raw)
            if m:
                out.setdefault((m["path"], m["line"]), []).append(f"{c.author}: {m['text']}")
    return out


_HUNK = re.compile(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@")


def diff_lines(text: str) -> list[tuple[str, str, str, str]]:
    """(line, class, where, anchor) of each line of one file's diff; where: "12" (new file),
    "-9" (a removed line, in the old file), or "" (headers); anchor: the new file's line a
    note on it names (a removed line's: the line that now follows it)."""
    out, old, new, body = [], 0, 0, False
    for line in text.split("\n"):
        m = _HUNK.match(line)
        if m:
            old, new, body = int(m.group(1)), int(m.group(2)), True
            out.append((line, "hunk", "", ""))
        elif not body or line.startswith("\\"):
            out.append((line, "", "", ""))
        elif line.startswith("+"):
            out.append((line, "add", str(new), str(new)))
            new += 1
        elif line.startswith("-"):
            out.append((line, "del", f"-{old}", str(max(new, 1))))
            old += 1
        else:
            out.append((line, "", str(new), str(new)))
            old, new = old + 1, new + 1
    return out


def log_view(sid: str) -> str:
    return (f'<h3>Log of session {short(sid)}</h3>'
            f'<pre class="log" data-log="{e(sid)}" data-nonce="{NONCE_MARK}" data-offset="0"></pre>')


def session_status(s, dead: set[str] | frozenset = frozenset()) -> str:
    """A session's status; a live one whose witness is gone is marked dead beside it."""
    shown = f'<span class="st st-{e(s.status)}">{e(s.status)}</span>'
    if s.id in dead:
        shown += (' <span class="liveness dead" title="its witness is gone: the next witness '
                  'or deacon run recovers it">dead</span>')
    return shown


def sessions(items: list, dead: set[str] | frozenset = frozenset()) -> str:
    rows = []
    for s in reversed(items):
        stop = action(f"/api/v1/sessions/{s.id}/stop", "stop", cls="stop") \
            if s.status in ("starting", "running") else ""
        rows.append([f'<span id="s-{e(s.id)}">{short(s.id)}</span>', task_link(s.task),
                     session_status(s, dead), e(s.engine),
                     number(s.attempt), when(s.started_at), e(s.reason), stop])
    # The live sessions' logs, then the latest ended ones', up to LOGS_SHOWN.
    live_ones = [s for s in items if s.status in ("starting", "running")]
    ended = [s for s in reversed(items) if s not in live_ones]
    logs = "".join(log_view(s.id) for s in (live_ones + ended)[:LOGS_SHOWN])
    return live("sessions", table(["session", "task", "status", "engine", "attempt", "started",
                                   "outcome", ""], rows, "no sessions")) + live("logs", logs)


def queue(r, log: str = "") -> str:
    cur = table(["task", "status", "elapsed", "check log"], [
        [task_link(c.task, c.title), e(c.status), f"{number(c.elapsed, '.0f')}s",
         f"<code>{e(c.last_line)}</code>"] for c in r.current], "nothing is merging")
    q = table(["#", "task", "priority", "waiting", "status"], [
        [number(x.position), task_link(x.task, x.title), f"p{number(x.priority)}",
         f"{number(x.waiting, '.0f')}s",
         e(x.status)] for x in r.queue], "the queue is empty")
    recent = table(["task", "outcome", "duration", "finished", "result"], [
        [task_link(x.task), f'<span class="st st-{e(x.status)}">{e(x.status)}</span>',
         f"{number(x.duration, '.1f')}s", when(x.finished_at), f"<pre>{e(x.result)}</pre>"] for x in r.recent],
        "no results yet")
    head = (f"<p>refinery: {'running' if r.running else 'not running'}; target "
            f"<code>{e(r.target)}</code>, policy {e(r.policy)}, check <code>{e(r.check or '(none)')}</code></p>")
    unreach = "".join(f"<li>{task_link(t)}: {e(why)}</li>" for t, why in r.unreachable.items())
    return live("queue", head + "<h2>Merging</h2>" + cur + "<h2>Queue (the refinery's order)</h2>"
                + q + (f"<h2>Unreachable</h2><ul>{unreach}</ul>" if unreach else "")
                + "<h2>Recent outcomes</h2>" + recent
                + "<h2>The refinery's log</h2>"
                + (f'<pre class="log">{e(log)}</pre>' if log else
                   '<p class="empty">no refinery log here (a detached refinery writes '
                   '.git/brat/refinery.log)</p>'))


def plan(r) -> str:
    rows = [[e(t.key), f"p{number(t.priority)}", e(t.title), e(", ".join(map(str, t.needs)))] for t in r.tasks]
    return (f'<div class="plan" data-exchange="{e(r.exchange)}"><p>convoy "{e(r.title)}"'
            f'{" from workflow " + e(r.workflow) if r.workflow else ""}</p>'
            + table(["key", "priority", "title", "needs"], rows, "no tasks") + "</div>")


def mayor(st: dict, log: list) -> str:
    v = st["conversation"]
    head = (f"<p>conversation {short(v.id)} open, engine {e(v.engine)}, {number(v.exchanges)} exchange(s)</p>"
            if v is not None else "<p>no conversation is open: asking opens one</p>")
    ask = action("/api/v1/mayor/ask", "ask for a plan",
                 '<textarea name="question" rows=3 placeholder="what should be done?"></textarea>',
                 "ask")
    items = "".join(
        f"<li>{when(x.at)} #{number(x.number)} <b>{e(x.actor)}</b>: {e(x.question)} → "
        + (f'created convoy <a href="{at("/?convoy=" + e(x.created.convoy))}">{short(x.created.convoy)}</a> '
           f'"{e(x.created.title)}" ({number(len(x.created.tasks))} tasks)' if x.created else "nothing created")
        + "</li>" for x in log)
    return (live("mayor-status", head)
            + f'<div class="actions">{ask}<output data-result></output></div>'
            + '<div id="plan" class="pending"></div>'
            + live("mayor-log", f"<h2>Exchanges</h2><ol>{items}</ol>" if items else
                   '<p class="empty">no exchanges yet</p>'))


def error(message: str) -> str:
    return f'<p class="error">{e(message)}</p>'


__all__ = ["escape", "page", "board", "needs_you", "task", "sessions", "queue", "mayor", "plan",
           "error"]
