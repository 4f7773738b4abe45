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
DAY_MS = 86_400_000
CLAIMS_KEPT_DAYS = 7         # a delivered item's claim is kept this long once it no longer waits
PRUNED_PER_PASS = 100        # claims removed by one deacon pass at most
CLAIMS = b"refs/grite/locks/inbox/"   # where the claims are (locks.ref_for("inbox:…"))
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
        # Nothing is ever fenced by a claim's token: recording it would add an event to the
        # log that every clone syncs, for each item sent (record=False).
        got = locks.acquire(g, claim_name(key), lock, holder, record=False)
    except locks.LeaseHeld:
        return False
    if got.token == 1 or got.action == "takeover":
        return True
    locks.release(g, claim_name(key), lock, holder, unused=True)   # it was sent before
    return False


def deliver(g: Grite, cfg: Config, board: Board | None = None) -> list[Delivery]:
    """Send each item waiting longer than inbox.debounce, not yet settled here, to every sink
    that was there before it waited (sinks_since): at most MAX_PER_PASS claims a pass, each
    send bounded by inbox.timeout."""
    out_sinks = sinks(g.store, cfg)
    if not out_sinks:
        return []
    lock = msgspec.structs.replace(locks.settings(g.store, fallback=False), ttl=CLAIM_TTL)
    seen = _read_seen(g)
    known = set(seen)
    now = process.now_ms()
    since = sinks_since(g, out_sinks, now - int(cfg.inbox.backlog_grace * 1000))
    due = now - int(cfg.inbox.debounce * 1000)
    holder, out = claimant(g), []
    for item in items(g, cfg, board):
        at = item.since.timestamp() * 1000
        if item.key in known or at > due:
            continue
        # A sink added later starts from when it was first seen: the backlog already waiting
        # then is not sent to it (`git brat inbox` lists it).
        to = [s for s in out_sinks if since[_sink_id(s)] <= at]
        if not to:
            seen.append(item.key)   # (settled here unclaimed: an older sink elsewhere sends it)
            continue
        if len(out) >= MAX_PER_PASS:
            break
        out.append(_deliver_one(g, cfg, item, to, lock, holder))
        if out[-1].outcome != "failed":
            seen.append(item.key)
    _write_seen(g, seen)
    return out


def _sink_id(sink: Sink) -> str:
    return hashlib.sha256(f"{sink.kind}\n{sink.target}".encode()).hexdigest()[:32]


def sinks_since(g: Grite, out_sinks: list[Sink], start: int) -> dict[str, int]:
    """sink id -> from when that sink is sent items (ms): for a sink new in config, `start`
    (now less inbox.backlog_grace: the deacon sees a sink a little after it is configured).
    Sinks no longer configured are forgotten (added again, one starts anew)."""
    path = layout.inbox_sinks(g.store)
    try:
        with open(path) as f:
            data = json.load(f)
        known = {k: v for k, v in data.items() if isinstance(k, str) and type(v) is int} \
            if isinstance(data, dict) else {}
    except (OSError, ValueError):
        known = {}
    since = {_sink_id(s): known.get(_sink_id(s), start) for s in out_sinks}
    if since != known:
        layout.ensure_root(g.store)
        atomic_write(path, json.dumps(since).encode())
    return since


def prune_claims(g: Grite, waiting: list[Item], now: int | None = None) -> list[str]:
    """Remove the claims (lease refs, on the lock remote and here) of items that no longer
    wait and whose claim was last written over CLAIMS_KEPT_DAYS ago, at most PRUNED_PER_PASS:
    the claims removed (their lease names).

    An item still waiting keeps its claim however old, so no clone can claim it afresh and
    send it twice; a key, once it stops waiting, never waits again (it names the event that
    made it wait). The grace is for a clone that has not yet seen the item end."""
    now = process.now_ms() if now is None else now
    lock = locks.settings(g.store, fallback=False)
    keep = {locks.ref_for(claim_name(i.key)) for i in waiting}
    store = g.store
    here = store.refs.under(CLAIMS)
    if lock.remote:
        tips = {n: s for n, s in store.remote.ls_remote(
            lock.remote, [CLAIMS.decode() + "*"], lock.timeout).items() if n.startswith(CLAIMS)}
        missing = [n.decode() for n, s in tips.items() if not store.objects.has_object(s)]
        if missing:
            store.remote.fetch_objects(lock.remote, missing, lock.timeout)
    else:
        tips = here
    before = now - CLAIMS_KEPT_DAYS * DAY_MS
    old = _ended(store, tips, keep, before, PRUNED_PER_PASS)
    gone = store.remote.delete_leased(lock.remote, old, lock.timeout) if lock.remote \
        else set(old)
    # Copies here of claims the remote no longer has (another clone pruned them there).
    gone |= set(_ended(store, {r: s for r, s in here.items() if r not in tips}, keep, before,
                       PRUNED_PER_PASS - len(old)))
    for ref in gone:
        _forget_here(store, ref)
    return sorted(ref[len(CLAIMS):].decode() for ref in gone)


def _ended(store, claims: dict[bytes, bytes], keep: set[bytes], before: int,
           most: int) -> dict[bytes, bytes]:
    """Of these claims (ref -> sha), at most `most` that are not kept and ended before then."""
    out: dict[bytes, bytes] = {}
    for ref, sha in sorted(claims.items()):
        if len(out) >= most:
            break
        if ref not in keep and _claim_ended(store, sha, before):
            out[ref] = sha
    return out


def _claim_ended(store, sha: bytes, before: int) -> bool:
    """Whether a claim's last record was written before `before` (ms) and is not held."""
    try:
        lease = locks.read_lease(store, sha)
    except GriteError:
        return False   # unreadable: left for `git grite doctor` to name
    last = max(lease.written_at, lease.released_at)
    return last < before and (lease.state == "released" or lease.expires_at < before)


def _forget_here(store, ref: bytes) -> None:
    """This clone's copies of a pruned claim: its own ref, and those a fetch mirrored."""
    names = [ref] + [n for n in store.refs.under(b"refs/remotes/")
                     if n.endswith(b"/grite/locks/inbox/" + ref[len(CLAIMS):])]
    for name in names:
        sha = store.refs.read(name)
        if sha is not None:
            try:
                store.refs.delete_if(name, sha)
            except GriteError:
                pass   # (a writer holds it this instant: the next pass removes it)


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
           "deliver", "send", "claim", "claim_name", "event_of", "message", "prune_claims",
           "sinks_since"]
