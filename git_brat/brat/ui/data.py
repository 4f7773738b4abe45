"""What the board shows and does: the CLI's own library calls, one per view and per action."""

from __future__ import annotations

import hashlib
import os
import threading
import time
from typing import Any

import msgspec

from git_brat import process
from git_brat.brat import board as model
from git_brat.brat import layout
from git_brat.brat import mayor as m
from git_brat.brat import sessions as ss
from git_brat.brat import spend
from git_brat.brat import status as st
from git_brat.brat import tasks
from git_brat.brat import trust
from git_brat.brat.board import Board, status_of
from git_brat.brat.config import Config
from git_brat.errors import Conflict, NotFound, UsageError
from git_brat.grite.cache.db import Decoded
from git_brat.grite.log.refs import log_tips
from git_brat.grite.model.state import Entity
from git_brat.grite.repo import Grite

# The board's columns, left to right; a task in a state not shown (dropped) is in none.
COLUMNS = ("queued", "running", "needs-review", "merging", "merged", "blocked", "failed")
LOG_CHUNK = 64 * 1024        # most bytes of a session log sent at once
DIFF_LIMIT = 512 * 1024      # most bytes of a task's diff shown
CARDS_SHOWN = 200            # cards per column on the unfiltered board
CARDS_FILTERED = 2000        # cards per column once a filter narrows the board
WITNESSES_SEEN = 2.0         # seconds a list of the live sessions' witnesses is kept


class Repo:
    """The repository the board serves: each request reads it afresh (other processes write)."""

    def __init__(self, path: str):
        self.path = path
        self._mayor_lock = threading.Lock()
        self._reader_lock = threading.Lock()
        self._reader: tuple[str, Grite] | None = None
        # The tasks decoded at one tip serve the next: a write re-decodes what it touched only.
        self.decoded = Decoded()
        self._witnesses: tuple[str, list[process.Proc]] = ("", [])   # per log tip
        self.pending: dict[str, m.Answer] = {}   # the mayor's plans waiting for confirm / discard
        # A bare hub's board shows everything pushed to it and changes nothing: the clones'
        # humans and agents write, the hub's refinery merges.
        self.store = self.grite().store   # found once: the tip is looked at 5 times a second
        self.read_only = self.store.bare

    def writable(self) -> None:
        if self.read_only:
            raise Conflict("refused: this board serves a bare hub, and is read-only; act from a "
                           "clone (its own `git brat ui`, or the command)")

    def grite(self) -> Grite:
        return model.open_grite(self.path)

    def reader(self) -> Grite:
        """A Grite to read with, shared by every view drawn at the same log tip: the tasks a
        10k-task board decodes once serve every page, filter and search until the log moves.
        Writes take a fresh one (grite())."""
        tip = self.log_tip()
        with self._reader_lock:
            if self._reader is None or self._reader[0] != tip:
                g = self.grite()
                g.cache.decoded = self.decoded
                self.decoded.turn()
                self._reader = (tip, g)
            return self._reader[1]

    def config(self, g: Grite) -> Config:
        return trust.load(g.store).config

    def tip(self) -> str:
        """log_tip, and whether each witness of a live session is still there: a witness
        killed writes nothing, and its sessions are shown dead at once all the same."""
        log = self.log_tip()
        # Looked up again every WITNESSES_SEEN seconds too: a session's local record may land
        # after the log write that started it.
        key = f"{log}:{int(time.monotonic() / WITNESSES_SEEN)}"
        with self._reader_lock:
            known = self._witnesses if self._witnesses[0] == key else None
        if known is None:
            known = (key, self._live_witnesses())
            with self._reader_lock:
                self._witnesses = known
        if not known[1]:
            return log
        alive = "".join("1" if process.same_process(p) else "0" for p in known[1])
        return f"{log}-{alive}"

    def _live_witnesses(self) -> list[process.Proc]:
        """The witnesses (on this host, as this clone recorded them) of the live sessions."""
        g = self.reader()
        out = []
        try:
            sessions = board_of(g).hot(model.SESSION, model.SESSION_ENDED)
        except Exception:   # noqa: BLE001 - the page that reads them says what is wrong
            return []
        for e in sessions:
            if e.get("status") in ss.LIVE:
                rec = ss.read_local(g.store, e.id, e.get("task", ""))
                w = ss.process_of(rec, "witness") if rec is not None else None
                if w is not None and w.host == process.hostname():
                    out.append(w)
        return out

    def log_tip(self) -> str:
        """A digest of every event log's tip and of when a branch last moved: it changes
        whenever anything is written or synced, or an agent or the refinery commits.

        A branch moves by renaming a file into refs/heads/ (or brat/ below it), or by a
        rewrite of packed-refs: a stat each, however many branches a year of tasks left."""
        parts: list = sorted(log_tips(self.store).items())
        paths = [os.path.join(self.store.common_dir, rel)
                 for rel in ("packed-refs", "refs/heads", "refs/heads/brat")]
        # A role started or stopped here (its pid file written or removed) shows at once too.
        paths += [layout.pid_file(self.store, role) for role in ("witness", "refinery")]
        for path in paths:
            try:
                parts.append((path, os.stat(path).st_mtime_ns))
            except OSError:
                pass
        return hashlib.sha1(repr(parts).encode()).hexdigest()[:16]


def board_of(g: Grite) -> Board:
    """The board of g's current state, built once per state: the views of one page, and the
    pages read at one log tip (Repo.reader), share it instead of each reading every task."""
    with _BUILDING:   # (two views of one page asking at once build it once)
        state = g.state()
        kept = getattr(g, "_ui_board", None)
        if kept is None or kept.state is not state:
            kept = model.Board(state, g.cold_before)
            g._ui_board = kept
        return kept


_BUILDING = threading.RLock()


# -- views: the same shapes as the commands' --json ---------------------------------------

def status(g: Grite, cfg: Config, convoy: str | None = None) -> st.Status:
    """`git brat status --json`."""
    return st.build(g, cfg, convoy, board_of(g))


def task_list(g: Grite, convoy: str | None = None, statuses: list[str] = ()) -> list[model.TaskView]:
    """`git brat task list --json`."""
    b = board_of(g)
    cid = g.resolve(convoy, model.CONVOY).id if convoy else None
    return b.task_list(cid, list(statuses))


def task_show(g: Grite, ref: str) -> model.TaskDetail:
    """`git brat task show ID --json`."""
    tid = g.resolve(ref, model.TASK).id
    b = board_of(g)
    return b.task_detail(b.tasks[tid], model.history(g, tid))


def convoy_list(g: Grite) -> list[model.ConvoyView]:
    """`git brat convoy list --json`."""
    return board_of(g).convoy_list()


def convoy_show(g: Grite, ref: str) -> model.ConvoyDetail:
    """`git brat convoy show ID --json`."""
    b = board_of(g)
    return b.convoy_detail(b.convoys[g.resolve(ref, model.CONVOY).id])


def session_list(g: Grite, everything: bool = False, task: str | None = None) -> list[ss.SessionDetail]:
    """`git brat session list [--all] [--task ID] --json`."""
    b = board_of(g)
    tid = g.resolve(task, model.TASK).id if task else None
    ents = [e for e in ss.all_sessions(b, None if everything or tid else ss.LIVE)
            if tid is None or e.get("task") == tid]
    return [ss.detail(g, e) for e in ents]


def session_show(g: Grite, ref: str) -> ss.SessionDetail:
    """`git brat session show ID --json`."""
    return ss.detail(g, ss.find(g, ref))


def refinery_status(g: Grite, cfg: Config):
    """`git brat refinery status --json`."""
    from git_brat.brat.refinery import run as rr
    return rr.status(g, cfg)


def refinery_log(g: Grite, lines: int = 40) -> str:
    """The last lines of the refinery's own log on this machine ("" when it never ran here)."""
    from git_brat.brat.refinery import run as rr
    try:
        with open(rr.log_path(g), "rb") as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - 16384))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.rstrip("\n").splitlines()[-lines:])


def mayor_status(g: Grite, cfg: Config) -> dict[str, Any]:
    """`git brat mayor status --json`."""
    state = g.state()
    conv = m.current(state)
    v = m.view(state, conv, cfg) if conv is not None else None
    return {"open": v is not None, "conversation": v}


def mayor_log(g: Grite, limit: int | None = None) -> list[m.ExchangeView]:
    """`git brat mayor log --json`."""
    return m.log(g.state(), limit)


def session_log(g: Grite, ref: str, offset: int = 0) -> tuple[str, int, bool]:
    """(text from offset, the offset after it, whether the session is still live) of a
    session's log on this machine; "" when it has none here."""
    e = ss.find(g, ref)
    try:
        path = layout.session_log(g.store, e.id)
    except UsageError:
        return "", 0, False
    live = e.get("status") in ss.LIVE
    try:
        with open(path, "rb") as f:
            f.seek(max(0, offset))
            raw = f.read(LOG_CHUNK)
    except OSError:
        return "", 0, live
    return raw.decode("utf-8", "replace"), max(0, offset) + len(raw), live


class FileDiff(msgspec.Struct):
    path: str
    diff: str


class TaskDiff(msgspec.Struct):
    task: str
    branch: str
    target: str
    base: str                  # the merge base the diff starts from
    head: str
    files: list[FileDiff]
    truncated: bool


def task_diff(g: Grite, cfg: Config, ref: str) -> TaskDiff:
    """The diff of brat/<task> against the refinery's target, from their merge base, per file."""
    from git_brat.brat.refinery import queue as rq
    tid = g.resolve(ref, model.TASK).id
    branch = rq.task_branch(tid)
    found = rq.find_branch(g.store, branch)
    head = found[1] if found else None
    target = cfg.refinery.target_branch
    objs = g.store.objects
    tip = objs.rev(f"refs/heads/{target}") or objs.rev(f"refs/remotes/{cfg.refinery.remote}/{target}")
    if head is None or tip is None:
        return TaskDiff(tid, branch, target, "", head or "", [], False)
    base = objs.merge_base(tip, head) or tip
    text, cut = objs.diff(base, head, DIFF_LIMIT)
    return TaskDiff(tid, branch, target, base, head, split_diff(text), cut)


def split_diff(text: str) -> list[FileDiff]:
    out: list[FileDiff] = []
    for chunk in text.split("\ndiff --git "):
        if not chunk.strip():
            continue
        if not chunk.startswith("diff --git "):
            chunk = "diff --git " + chunk
        first = chunk.split("\n", 1)[0]
        path = first.rsplit(" b/", 1)[-1] if " b/" in first else first[len("diff --git "):]
        out.append(FileDiff(path, chunk.rstrip("\n")))
    return out


# -- the board page's own view: columns and filters ---------------------------------------

class Card(msgspec.Struct):
    id: str
    title: str
    status: str
    convoy: str
    priority: int
    ready: bool
    engine: str                # the engine of its latest session ("" if none ran)
    labels: list[str]
    needs: list[str]
    spent: spend.Spent | None = None   # tokens and cost over its sessions (None: none ran)
    message: str = ""          # the agent's last word on it (its question, when it blocked)
    liveness: str = ""         # alive, dead or paused, while a session is live ("" otherwise)
    paused: str = ""           # "paused until 21:00 (claude usage limit)" while that lasts
    session: str = ""          # its latest session
    running_for: float | None = None   # seconds its live session has run
    cost: str = ""             # what its sessions spent so far, in a few words ("" if nothing)
    updated: int = 0           # when it last changed (ms)


class ConvoyRow(msgspec.Struct):
    """A convoy as the board lists it: counted from the tasks the board holds already (its
    derived status, which asks whether anything can still move, is on `convoy show`)."""
    id: str
    title: str
    total: int
    counts: dict[str, int]


class BoardPage(msgspec.Struct):
    convoys: list[ConvoyRow]
    columns: dict[str, list[Card]]
    engines: list[str]
    labels: list[str]
    filters: dict[str, str]
    hidden: dict[str, int] = {}    # cards left out of a column, past the limit
    found: int = 0                 # cards a search matched, every column together


def board_page(g: Grite, convoy: str = "", state: str = "", engine: str = "",
               label: str = "", search: str = "") -> BoardPage:
    b = board_of(g)
    cid = g.resolve(convoy, model.CONVOY).id if convoy else None
    latest: dict[str, Entity] = {}
    for s in sorted(b.hot(model.SESSION, model.SESSION_ENDED), key=model.age_key):
        latest[s.get("task", "")] = s
    picked: dict[str, list[tuple]] = {c: [] for c in COLUMNS}
    engines, labels = set(), set()
    words = search.lower().split()
    # Every task is looked at (filters, search, the lists of engines and labels); a card is
    # made for the ones shown only.
    pool = b.convoy_tasks(cid) if cid else b.tasks.values()
    for t in pool:
        s, tl, order = card_facts(t)
        eng = text_field(latest[t.id], "engine") if t.id in latest else ""
        if eng:
            engines.add(eng)
        labels.update(tl)
        if s not in picked or (state and s != state) or (engine and eng != engine) \
                or (label and label not in tl) or (words and not matches(t, words)):
            continue
        picked[s].append((order, eng, tl))
    # A column of thousands of cards helps nobody and costs the browser seconds: the most
    # urgent ones are shown, with the count of the rest (a filter narrows it down).
    limit = CARDS_FILTERED if (cid or state or engine or label or words) else CARDS_SHOWN
    hidden, cols = {}, {}
    for name, rows in picked.items():
        rows.sort(key=lambda r: r[0])
        if len(rows) > limit:
            hidden[name] = len(rows) - limit
            del rows[limit:]
        # What costs a look per card (readiness, the last message, the witness's pid) is
        # worked out for the cards shown only: a 10k-task board shows a few hundred.
        b.prereqs_of([r[0][2] for r in rows])
        cols[name] = c = []
        for (_u, _when, tid), eng, tl in rows:
            t = b.tasks[tid]
            card = Card(tid, t.get("title", ""), name, t.get("convoy", ""), model.priority_of(t),
                        False, eng, tl, [], updated=t.updated_at)
            fill_card(g, b, card, latest.get(tid))
            c.append(card)
        c.sort(key=lambda x: (urgency(x.priority), not x.ready, -x.updated))
    found = sum(len(c) for c in cols.values()) + sum(hidden.values())
    return BoardPage(convoy_rows(b), cols, sorted(engines), sorted(labels),
                     {"convoy": cid or "", "state": state, "engine": engine, "label": label,
                      "q": search}, hidden, found)


_FACTS: dict[str, tuple[Entity, tuple]] = {}   # task id -> (the entity, its card_facts)
FACTS_KEPT = 200_000


def card_facts(t: Entity) -> tuple[str, list[str], tuple]:
    """(status, labels, the order of its column: the most urgent first, the latest moved first
    within a priority) of a task, worked out once per decoded entity: the board's entities
    outlive a log tip (db.Decoded), so after a write only the tasks it touched are looked at
    again."""
    kept = _FACTS.get(t.id)
    if kept is not None and kept[0] is t:
        return kept[1]
    tl = [x for x in t.members("labels") if isinstance(x, str)]
    step = t.get("step")
    if step:
        tl.append(f"step:{step}")
    facts = (status_of(t), tl, (urgency(model.priority_of(t)), -t.updated_at, t.id))
    if len(_FACTS) >= FACTS_KEPT:
        _FACTS.clear()
    _FACTS[t.id] = (t, facts)
    return facts


def convoy_rows(b: Board) -> list[ConvoyRow]:
    out = []
    for c in sorted(b.convoys.values(), key=model.age_key):
        counts: dict[str, int] = {}
        for t in b.by_convoy.get(c.id, ()):
            s = card_facts(t)[0]
            counts[s] = counts.get(s, 0) + 1
        out.append(ConvoyRow(c.id, text_field(c, "title"), sum(counts.values()), counts))
    return out


def matches(t: Entity, words: list[str]) -> bool:
    """Whether every word of a search is in the task's title or body, or starts its id."""
    text = f"{text_field(t, 'title')}\n{text_field(t, 'body')}".lower()
    return all(t.id.startswith(w) or w in text for w in words)


def text_field(e: Entity, name: str) -> str:
    v = e.get(name, "")
    return v if isinstance(v, str) else ""


def fill_card(g: Grite, b: Board, card: Card, session: Entity | None) -> None:
    t = b.tasks[card.id]
    card.ready = b.is_ready(card.id)
    card.needs = sorted(b.prereqs(card.id))
    card.message = last_message(t)
    card.paused = model.paused_of(t).get("paused", "")   # (the witness's own pause record)
    if card.paused:
        card.liveness = "paused"
    if session is None:
        return
    card.session = session.id
    card.spent = _spent(b, card.id)     # (a task no session ran reads nothing)
    card.cost = spend.text(card.spent, short=True) if card.spent and card.spent.sessions else ""
    if session.get("status") in ss.LIVE:
        card.liveness = liveness(g, session)
        card.running_for = max(0.0, (process.now_ms() - session.created_at) / 1000)
    elif session.get("status") == "paused" and card.paused:
        card.liveness = "paused"


MESSAGE_SHOWN = 200   # characters of an agent's last message on its card


def last_message(t: Entity) -> str:
    """The agent's last word on a task: the latest comment that is not a human's reply, else
    the reason given with its status (a block's question)."""
    for _eid, _l, _actor, _ts, body in reversed(t.sorted_comments()):
        if isinstance(body, str) and not body.startswith("reply: "):
            return body[:MESSAGE_SHOWN]
    return model.reason_of(t)[:MESSAGE_SHOWN] if isinstance(model.reason_of(t), str) else ""


def liveness(g: Grite, session: Entity) -> str:
    """alive, or dead (its witness is gone on this host: crashed, not running). (A pause on
    a usage limit is the task's: fill_card.)"""
    if ss.witness_gone(g.store, session):
        return "dead"
    return "alive"


def _spent(b: model.Board, tid: str) -> spend.Spent | None:
    sessions = spend.task_sessions(b.state, tid)
    return spend.view(sessions) if sessions else None


def urgency(priority: Any) -> tuple:
    """A priority to sort by, whatever a record put there: a number in its order, then
    anything else (every comparison total: a forged "high" or list sorts last, not raises)."""
    if isinstance(priority, int) and not isinstance(priority, bool):
        return (0, priority)
    return (1, 0)


def sessions_of_task(g: Grite, tid: str) -> list[ss.SessionDetail]:
    return [ss.detail(g, e) for e in ss.of_task(board_of(g), tid)]


# -- actions: each the library call its command makes -------------------------------------

def _actor(g: Grite) -> str:
    return g.identity.actor.name


def reply(g: Grite, ref: str, message: str, notes: list[dict] = ()) -> model.TaskDetail:
    """`git brat task reply ID -m MESSAGE --note PATH:LINE: TEXT…` (request changes): notes on
    diff lines go to the review gate as the CLI's --note do."""
    lines = []
    for n in notes:
        path, line, text = str(n.get("path", "")), str(n.get("line", "")), str(n.get("text", ""))
        if text.strip():
            lines.append(f"{path}:{line}: {text.strip()}")
    if not message.strip() and not lines:
        raise UsageError("a reply needs text: write your answer, or a comment on a diff line")
    tid = ss.reply(g, ref, message.strip() or "see my notes on the diff", lines)
    return task_show(g, tid)


def requeue(g: Grite, ref: str, message: str = "") -> model.TaskDetail:
    """`git brat task update ID --status queued`."""
    u = tasks.update_task(g, ref, "queued", reason=message)
    return task_show(g, u.id)


def drop(g: Grite, ref: str, message: str = "") -> model.TaskDetail:
    """`git brat task update ID --status dropped`."""
    u = tasks.update_task(g, ref, "dropped", reason=message)
    return task_show(g, u.id)


def block(g: Grite, ref: str, message: str) -> model.TaskDetail:
    """`git brat task block ID -m MESSAGE` (said by a human: no session speaks)."""
    if not message.strip():
        raise UsageError("say why the task is blocked")
    u = tasks.update_task(g, ref, "blocked", reason=message)
    return task_show(g, u.id)


def retry(g: Grite, ref: str) -> tasks.Updated:
    """`git brat refinery retry ID`: a blocked or failed task's branch goes back to review."""
    from git_brat.brat.refinery.passes import retry as refinery_retry
    return refinery_retry(g, ref)


def approve(g: Grite, ref: str) -> model.TaskDetail:
    """`git brat task approve ID` (a blocked or failed task retried first): the commit the
    human looked at goes to the merge queue."""
    from git_brat.brat import review
    tid = g.resolve(ref, model.TASK).id
    if model.status_of(board_of(g).tasks[tid]) in ("blocked", "failed"):
        retry(g, tid)
    review.approve(g, tid)
    return task_show(g, tid)


def stop_session(g: Grite, ref: str) -> dict[str, str]:
    """`git brat session stop ID` (without its wait: the board shows the outcome live)."""
    from git_brat.brat.witness.recover import stop_session as stop
    e = ss.find(g, ref)
    stop(g, e, _actor(g), lambda: trust.load(g.store).config)
    return {"session": e.id, "status": g.state(refresh=True).entities[e.id].get("status", "")}


def stop_task_session(g: Grite, ref: str) -> dict[str, str]:
    """Stop the live session of a task."""
    tid = g.resolve(ref, model.TASK).id
    live = [e for e in ss.of_task(board_of(g), tid) if e.get("status") in ss.LIVE]
    if not live:
        raise Conflict(f"task {tid[:7]} has no live session to stop")
    return stop_session(g, live[-1].id)


def mayor_ask(repo: Repo, g: Grite, question: str) -> m.AskResult:
    """`git brat mayor ask QUESTION --dry-run`: the plan, kept until confirmed or discarded."""
    question = question.strip()
    if not question:
        raise UsageError("ask the mayor something")
    loaded = trust.load(g.store)
    trust.require(loaded, "mayor ask")   # the engine it runs must be one this clone approved
    cfg = loaded.config
    if not repo._mayor_lock.acquire(blocking=False):
        raise Conflict("the mayor is already answering a question from this board")
    try:
        ans = m.consult(g, cfg, m.current(g.state()), question)
    finally:
        repo._mayor_lock.release()
    r = m.result(ans, dry_run=True)
    repo.pending[str(r.exchange)] = ans
    return r


def mayor_confirm(repo: Repo, g: Grite, exchange: str) -> m.AskResult:
    """`git brat mayor ask … --yes` once seen: the plan's convoy and tasks, in one batch."""
    ans = repo.pending.pop(exchange, None)
    if ans is None:
        raise NotFound(f"no plan {exchange!r} waits for confirmation here (ask again)")
    return m.create(g, ans)


def mayor_discard(repo: Repo, exchange: str) -> m.AskResult:
    ans = repo.pending.pop(exchange, None)
    if ans is None:
        raise NotFound(f"no plan {exchange!r} waits for confirmation here")
    return m.result(ans, declined=True)


def log_size(g: Grite, sid: str) -> int:
    try:
        return os.path.getsize(layout.session_log(g.store, sid))
    except (OSError, UsageError):
        return 0


__all__ = ["Repo", "COLUMNS", "status", "task_list", "task_show", "convoy_list", "convoy_show",
           "session_list", "session_show", "refinery_status", "mayor_status", "mayor_log",
           "session_log", "task_diff", "board_page", "reply", "requeue", "drop", "block",
           "approve", "retry", "stop_session", "stop_task_session", "mayor_ask", "mayor_confirm",
           "mayor_discard", "Board", "board_of"]
