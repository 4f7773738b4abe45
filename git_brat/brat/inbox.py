"""What waits for the human, in one list (`git brat inbox`, the board, `git brat mcp`), and its
delivery to sinks (a command, an ntfy topic, a webhook) by the deacon.

Each item has a key that every clone derives alike from the log (its kind, its task and the
event that made it wait), so the clones agree on what one item is. Delivery is claimed with a
lease named after that key, decided where every lease is (the lock remote, else this clone),
held by this deacon process alone: the claim granted the lease's first token sends the item,
then releases it (the token stays). Any later claim gets a later token and sends nothing, but
for a takeover: the lease of a claimant that died before it released (expired, never
released) is taken over, and the taker sends it. So an item is sent once, twice only when a
deacon died between its send and its release.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import subprocess
import urllib.request
from datetime import datetime
from typing import Callable

import msgspec

from git_brat import process
from git_brat.brat import board as model
from git_brat.brat import layout, review
from git_brat.brat.board import Board, status_of
from git_brat.brat.config import Config
from git_brat.errors import GriteError, UsageError
from git_brat.files import atomic_write
from git_brat.grite import locks
from git_brat.grite.model.state import iso
from git_brat.grite.repo import Grite

KINDS = ("review", "question", "failure", "needs-human")
MAX_PER_PASS = 20            # items claimed by one deacon pass (the rest wait for the next)
MAX_SEEN = 5000              # keys remembered as settled here (older ones are asked again)
CLAIM_TTL = 300.0            # seconds a claimant has to send (every sink bounded: ≤ 60 s each)
GIT_CONFIG = {"command": "brat.inbox.command", "ntfy": "brat.inbox.ntfy",
              "webhook": "brat.inbox.webhook"}


class Item(msgspec.Struct):
    key: str          # the same on every clone: kind:task:event
    kind: str         # review / red-target / question / failure / needs-human / limit
    task: str
    convoy: str
    title: str
    text: str         # the question, the failure, the commit under review
    command: str      # what answers it, ready to paste
    since: datetime


class Sink(msgspec.Struct):
    kind: str         # command / ntfy / webhook
    target: str       # the argv (shell-quoted) or the URL
    source: str       # .brat/config.toml (approved) / local config / git config brat.inbox.*


class Delivery(msgspec.Struct):
    key: str
    outcome: str      # sent / claimed-elsewhere / failed
    sinks: list[str]
    detail: str = ""


# -- what waits: one small function per source --------------------------------------------

def _event_of(t, field: str) -> str:
    cell = t.fields.get(field)
    return cell[3] if cell is not None else ""


def reviews(board: Board, store, cfg: Config) -> list[Item]:
    out = []
    for t in review.waiting(board, store, cfg):
        head = review.head_under_review(board, store, t.id)
        # Keyed by its move into review, never by the head: a clone that has not fetched the
        # branch sees another head (or none), and would send the item again.
        out.append(Item(f"review:{t.id}:{_event_of(t, 'status')}", "review", t.id,
                        t.get("convoy", ""), t.get("title", ""),
                        f"finished, waits for your review at {head[:12] or '(no branch here)'}",
                        f"git brat task approve {t.id[:7]}", _since(t)))
    return out


# A task's status -> the kind of wait, and what answers it.
WAITS = {"blocked": ("question", "your answer"), "failed": ("failure", "what to do differently")}
_TASK_ID = re.compile(r"[0-9a-f]{32}")


def stops(board: Board, store, cfg: Config) -> list[Item]:
    """Blocked agents' questions, failed tasks and needs-human flags (as status shows them)."""
    out = []
    for t in board.tasks.values():
        if not isinstance(t.id, str) or not _TASK_ID.fullmatch(t.id):
            continue   # forged: no command may be built from its id
        short, status = t.id[:7], status_of(t)
        if status in WAITS:
            kind, hint = WAITS[status]
            text = model.reason_of(t) or f"the task is {status} (no reason given)"
            out.append(_item(kind, t, "status", text, f'git brat task reply {short} -m "{hint}"'))
        elif t.get("needs_human") and status not in model.FINISHED and _flag_is_current(t):
            out.append(_item("needs-human", t, "needs_human", str(t.get("needs_human")),
                             f"git brat task show {short}"))
    return out


def _flag_is_current(t) -> bool:
    # A needs-human flag is about the status it was raised in; any later move clears it.
    flag, status = t.fields.get("needs_human"), t.fields.get("status")
    return status is None or tuple(flag[1:]) >= tuple(status[1:])


def _item(kind: str, t, field: str, text: str, command: str) -> Item:
    return Item(f"{kind}:{t.id}:{_event_of(t, field)}", kind, t.id, t.get("convoy", ""),
                t.get("title", ""), text, command, _since(t))


def _since(t) -> datetime:
    """When the task's status was set (a comment since does not make it newer)."""
    moved = t.transitions.get(_event_of(t, "status"))
    return iso(moved[2] if moved else t.updated_at)


# Sources in the order items are shown; a role that records a new kind of wait (a red main, a
# usage-limit pause, a budget stop) adds its function here.
def red_main(board: Board, store, cfg: Config) -> list[Item]:
    """The target failing its own check (refinery/red.py): one item, named once, whichever
    task's check found it (none of them is to blame)."""
    from git_brat.brat.refinery import red
    r = red.red_target(board, cfg.refinery.target_branch)
    if r is None:
        return []
    return [Item(f"red-target:{r.id}:{r.commit}", "red-target", "", "", f"{r.target} is red",
                 f"{r.result} — {r.advice}", r.log_command, r.since)]


def limits(board: Board, store, cfg: Config) -> list[Item]:
    """Tasks paused on a usage limit (the witness resumes them at the reset, or holds them for
    you with task update --no-resume: then they are blocked, a question above)."""
    out = []
    for t in board.tasks.values():
        if not isinstance(t.id, str) or not _TASK_ID.fullmatch(t.id):
            continue
        pause = model.paused_of(t).get("paused")
        if pause:
            out.append(_item("limit", t, "paused_until", pause, f"git brat task show {t.id[:7]}"))
    return out


SOURCES: list[Callable[[Board, object, Config], list[Item]]] = [reviews, red_main, stops, limits]


def items(g: Grite, cfg: Config, board: Board | None = None) -> list[Item]:
    """Everything that waits for the human now, oldest first within each source."""
    board = board or model.board(g)
    out: list[Item] = []
    for source in SOURCES:
        out += sorted(source(board, g.store, cfg), key=lambda i: i.since)
    return out


def count(g: Grite, cfg: Config, board: Board | None = None) -> int:
    return len(items(g, cfg, board))


# -- sinks --------------------------------------------------------------------------------

def sinks(store, cfg: Config) -> list[Sink]:
    """The effective config's sinks (a committed one only once approved: trust.load), then
    the user's git config brat.inbox.*."""
    out = []
    if cfg.inbox.command:
        out.append(Sink("command", shlex.join(cfg.inbox.command), "config"))
    for kind in ("ntfy", "webhook"):
        if getattr(cfg.inbox, kind):
            out.append(Sink(kind, _url(getattr(cfg.inbox, kind), f"inbox.{kind}"), "config"))
    found = store.config_matching(r"^brat\.inbox\.(command|ntfy|webhook)$")
    for kind, key in GIT_CONFIG.items():
        value = found.get(key.lower(), "").strip()
        if not value:
            continue
        if kind == "command":
            try:   # a quoting mistake is said now, not at delivery
                shlex.split(value)
            except ValueError as exc:
                raise UsageError(f"git config {key}: {exc} in {value[:60]!r}") from None
        else:
            value = _url(value, f"git config {key}")
        out.append(Sink(kind, value, "git config"))
    return out


def _url(value: str, where: str) -> str:
    if not value.startswith(("http://", "https://")) or any(c.isspace() for c in value):
        raise UsageError(f"{where}: an http:// or https:// URL, not {value[:60]!r}")
    return value


def event_of(item: Item) -> dict:
    """The JSON event a sink is given: the item, and a line a person reads."""
    data = msgspec.to_builtins(item)
    data["message"] = message(item)
    return data


def message(item: Item) -> str:
    return f"[{item.kind}] {item.task[:7]} {item.title}: {item.text} ({item.command})"


def slack_text(text: str) -> str:
    """Slack's three control characters escaped: an agent's question mentions no one
    (<!channel>) and links nowhere."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def send(sink: Sink, item: Item, timeout: float) -> None:
    """One delivery, bounded by timeout; GriteError-free: OSError / SinkFailed on failure."""
    if sink.kind == "command":
        _run_command(shlex.split(sink.target), json.dumps(event_of(item)).encode(), timeout)
        return
    if sink.kind == "ntfy":
        body = message(item).encode()
        headers = {"Title": f"git brat: {item.kind}", "Tags": "brat",
                   "Content-Type": "text/plain; charset=utf-8"}
    else:
        body = json.dumps({"text": slack_text(message(item))}).encode()
        headers = {"Content-Type": "application/json"}
    req = urllib.request.Request(sink.target, body, headers, method="POST")
    # No proxy from the environment, no redirects followed to another place with the body.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect)
    with opener.open(req, timeout=timeout) as resp:
        if not 200 <= resp.status < 300:
            raise SinkFailed(f"HTTP {resp.status}")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


class SinkFailed(Exception):
    pass


def _run_command(argv: list[str], data: bytes, timeout: float) -> None:
    with subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, start_new_session=True) as proc:
        try:
            proc.communicate(data, timeout=timeout)
        except subprocess.TimeoutExpired:
            process.stop_group(proc.pid, 0.5, proc.poll)
            proc.wait()
            raise SinkFailed(f"timed out after {timeout:g} s")
    if proc.returncode != 0:
        raise SinkFailed(f"exited {proc.returncode}")


# -- delivery: claim, send, remember --------------------------------------------------------

def claim_name(key: str) -> str:
    return "inbox:" + hashlib.sha256(key.encode()).hexdigest()[:32]


def _read_seen(g: Grite) -> list[str]:
    try:
        with open(layout.inbox_seen(g.store)) as f:
            data = json.load(f)
        return [k for k in data if isinstance(k, str)] if isinstance(data, list) else []
    except (OSError, ValueError):
        return []


def _write_seen(g: Grite, seen: list[str]) -> None:
    layout.ensure_root(g.store)
    atomic_write(layout.inbox_seen(g.store), json.dumps(seen[-MAX_SEEN:]).encode())


def claimant(g: Grite) -> locks.Holder:
    """This deacon process (two passes on one clone must not both take one claim)."""
    return locks.holder_for(g, f"{locks.default_holder_id(g)}/inbox-{os.getpid()}")


def claim(g: Grite, key: str, lock: locks.Settings, holder: locks.Holder) -> bool:
    """Whether this process sends item key: it was granted the first token of the item's
    lease, or took over the claim of one that died before it sent (see the module's doc)."""
    try:
        got = locks.acquire(g, claim_name(key), lock, holder)
    except locks.LeaseHeld:
        return False
    if got.token == 1 or got.action == "takeover":
        return True
    locks.release(g, claim_name(key), lock, holder, unused=True)   # it was sent before
    return False


def deliver(g: Grite, cfg: Config, board: Board | None = None) -> list[Delivery]:
    """Send each item waiting longer than inbox.debounce, not yet settled here, to every sink:
    at most MAX_PER_PASS claims a pass, each send bounded by inbox.timeout."""
    out_sinks = sinks(g.store, cfg)
    if not out_sinks:
        return []
    lock = msgspec.structs.replace(locks.settings(g.store, fallback=False), ttl=CLAIM_TTL)
    seen = _read_seen(g)
    known = set(seen)
    due = process.now_ms() - int(cfg.inbox.debounce * 1000)
    holder, out = claimant(g), []
    for item in items(g, cfg, board):
        if item.key in known or item.since.timestamp() * 1000 > due:
            continue
        if len(out) >= MAX_PER_PASS:
            break
        out.append(_deliver_one(g, cfg, item, out_sinks, lock, holder))
        if out[-1].outcome != "failed":
            seen.append(item.key)
    _write_seen(g, seen)
    return out


def _deliver_one(g: Grite, cfg: Config, item: Item, out_sinks: list[Sink],
                 lock: locks.Settings, holder: locks.Holder) -> Delivery:
    try:
        mine = claim(g, item.key, lock, holder)
    except GriteError as exc:   # the lock remote unreachable: asked again next pass
        return Delivery(item.key, "failed", [], f"claim: {exc.message}")
    if not mine:
        return Delivery(item.key, "claimed-elsewhere", [])
    sent, failed = [], []
    for sink in out_sinks:
        try:
            send(sink, item, cfg.inbox.timeout)
            sent.append(sink.kind)
        except (OSError, SinkFailed, ValueError) as exc:
            failed.append(f"{sink.kind}: {exc}")
    try:
        locks.release(g, claim_name(item.key), lock, holder)
    except GriteError:
        pass   # unreleased, it expires: a taker would send it again (see the module's doc)
    return Delivery(item.key, "sent", sent, "; ".join(failed))


__all__ = ["Item", "Sink", "Delivery", "KINDS", "SOURCES", "items", "count", "sinks",
           "deliver", "send", "claim", "claim_name", "event_of", "message"]
