"""What the board does beyond the commands' views: what needs you, which actions are legal,
the check's output, what runs here and what is not yet pushed; and the board's own actions
(create, start and stop a witness, a refinery pass, a push), each the CLI's library call."""

from __future__ import annotations

from typing import Any

import msgspec

from git_brat import process
from git_brat.brat import board as model
from git_brat.brat import sessions as ss
from git_brat.brat import status as st
from git_brat.brat import tasks
from git_brat.brat import trust
from git_brat.brat.board import Board, status_of
from git_brat.brat.config import Config
from git_brat.brat.ui.data import board_of, convoy_show, task_show, text_field
from git_brat.errors import Conflict, UsageError
from git_brat.grite.repo import Grite


# -- what the board adds to the commands: what needs you, what is legal, what runs ------------

def needs_count(g: Grite, cfg: Config, b: Board | None = None) -> int:
    """How many things wait on the human: interventions, work waiting for review, and sessions
    whose witness is gone (the "Needs you" page's lists, counted without drawing them)."""
    return len(needs_items(g, cfg, b))


class Need(msgspec.Struct, array_like=True):
    """One thing that waits on the human, as a browser's notification names it."""
    key: str          # what it is about, stable while it waits: "blocked:<task id>"
    words: str        # "blocked: Rename the module"
    since: int        # ms


def needs_items(g: Grite, cfg: Config, b: Board | None = None) -> list[Need]:
    """What needs_count counts, one Need each, the latest first."""
    from git_brat.brat import review
    b = b or board_of(g)
    lease_list, _problems = st.leases(g)
    out = [Need(f"{i.kind}:{i.task}", f"{i.kind}: {i.title}", int(i.since.timestamp() * 1000))
           for i in st.interventions(b, cfg, lease_list, process.now_ms())]
    out += [Need(f"review:{t.id}", f"review: {text_field(t, 'title')}", t.updated_at)
            for t in review.waiting(b, g.store, cfg)]
    for v in b.sessions():
        e = b.state.entities.get(v.id)
        if e is not None and ss.witness_gone(g.store, e):
            out.append(Need(f"dead:{e.get('task', '')}", f"dead session: task "
                            f"{str(e.get('task', ''))[:7]}", e.updated_at))
    out.sort(key=lambda n: -n.since)
    return out


def dead_sessions(g: Grite) -> set[str]:
    """The sessions the log calls live whose witness is gone on this host (status's question)."""
    b = board_of(g)
    return {v.id for v in b.sessions()
            if (e := b.state.entities.get(v.id)) is not None and ss.witness_gone(g.store, e)}


# Each action of a task's page, and the statuses it is legal from: the task transition table
# (grite's kinds) where the action is a move, the review gate's rules where it is a decision.
ACTION_FROM: dict[str, tuple[str, ...]] = {
    "approve": ("needs-review", "blocked", "failed"),   # a blocked or failed one retried first
    "reply": ss.REPLY_FROM,
    "requeue": tuple(s for s, to in model.TRANSITIONS.items() if "queued" in to),
    "block": tuple(s for s, to in model.TRANSITIONS.items() if "blocked" in to),
    "drop": tuple(s for s, to in model.TRANSITIONS.items() if "dropped" in to),
    "retry": ("blocked", "failed"),
}


def legal_actions(g: Grite, tid: str, read_only: bool) -> list[str]:
    """The actions a task's page offers: those its status allows; a retry only when a merge
    of it failed, a stop only while a session runs it; none on a hub's read-only board."""
    if read_only:
        return []
    b = board_of(g)
    status = status_of(b.tasks[tid])
    out = [a for a, sources in ACTION_FROM.items() if status in sources]
    if "retry" in out and not any(True for _ in b.state.of_group(model.MERGE, tid)):
        out.remove("retry")
    if status != "needs-review" and "approve" in out and not has_work(g, tid):
        out.remove("approve")     # nothing on its branch to approve
    if any(e.get("status") in ss.LIVE for e in ss.of_task(b, tid)):
        out.append("stop")
    return out


def has_work(g: Grite, tid: str) -> bool:
    """Whether the task's branch is here, to be approved."""
    from git_brat.brat import review
    return review.find_branch(g.store, ss.branch_for(tid)) is not None


class CheckOutput(msgspec.Struct):
    merge: str                 # the merge record it comes from ("" when the refinery never ran it)
    status: str
    text: str


def check_output(g: Grite, tid: str) -> CheckOutput:
    """The check's output for a task, the one place the review screen reads it from: its last
    failed check as `task show` gives it (refinery/report.py: the failing tests, the output's
    last lines, redacted, and the command for the whole log), else what its latest merge
    record says."""
    from git_brat.brat.refinery import report
    board = board_of(g)
    state = board.state
    failed = report.check_report(g, board, tid)
    if failed is not None:
        return CheckOutput(failed.get("merge") or "", "failed",
                           "\n".join(report.lines(failed, tail=report.TAIL)))
    merges = sorted(state.of_group(model.MERGE, tid), key=model.age_key)
    # The latest that says something (a merge request re-queued or superseded says nothing).
    said = [m for m in merges if text_field(m, "result")]
    if not said:
        return CheckOutput("", "", "")
    last = said[-1]
    return CheckOutput(last.id, text_field(last, "status"), text_field(last, "result"))


class Roles(msgspec.Struct):
    witness: int | None        # pid of the detached witness running here
    refinery: int | None       # pid of the refinery running here
    remotes: list[str]         # remotes the log syncs through
    unpushed: int              # batches of this clone's log no synced remote has yet
    never_pushed: bool         # no synced remote has any of it


def roles(g: Grite) -> Roles:
    from git_brat.brat import daemon
    from git_brat.brat.refinery import run as rr
    from git_brat.grite.log import identity
    from git_brat.grite.log.refs import WAL, grite_dir, synced_remotes
    store = g.store
    remotes = synced_remotes(store)
    wal = store.objects.rev(WAL)
    unpushed, never = 0, False
    if wal and remotes:
        rid = identity.load_replica(grite_dir(store)).id
        counts = []
        for r in remotes:
            seen = store.objects.rev(f"refs/remotes/{r}/grite/replicas/{rid}")
            counts.append(store.objects.count(seen, wal) if seen else None)
        known = [c for c in counts if c is not None]
        never = not known
        unpushed = min(known) if known else 0
    return Roles(daemon.running_pid(store, "witness"), rr.running_pid(g), remotes, unpushed, never)


def create_convoy(g: Grite, title: str, body: str = "") -> model.ConvoyDetail:
    """`git brat convoy create TITLE [-b BODY]`."""
    return convoy_show(g, tasks.create_convoy(g, title, body))


def create_task(g: Grite, convoy: str, title: str, body: str = "",
                priority: int = model.DEFAULT_PRIORITY) -> model.TaskDetail:
    """`git brat task create --convoy C TITLE [-b BODY] [--priority P]`."""
    if not convoy:
        raise UsageError("a task belongs to a convoy: choose one (or create one first)")
    return task_show(g, tasks.create_task(g, convoy, title, body, priority=priority))


def witness_start(g: Grite) -> dict[str, Any]:
    """`git brat witness run --detach`: its checks first (approved settings, a usable engine)."""
    from git_brat.brat import daemon, engines
    from git_brat.brat.witness import loop, pick
    loaded = trust.load(g.store)
    trust.require(loaded, "witness run")
    cfg = loaded.config
    pick.require_engine(engines.resolve(loop.options(cfg).engine, cfg.engines), cfg, None)
    pf = daemon.detach(g.store, "witness", ["witness", "run"], g.store.toplevel() or g.store.common_dir)
    return {"witness": pf.pid}


def witness_stop(g: Grite) -> dict[str, Any]:
    """`git brat witness stop`: its sessions stopped and recorded, their tasks re-queued."""
    from git_brat.brat import daemon
    return {"stopped": True, "pid": daemon.stop(g.store, "witness").pid}


def refinery_pass(g: Grite) -> dict[str, Any]:
    """`git brat refinery run --once --detach`: one pass over the queue, in the background
    (a check may take minutes; the queue page shows it live)."""
    from git_brat.brat.refinery import run as rr
    trust.require(trust.load(g.store), "refinery run")
    if rr.running_pid(g) is not None:
        raise Conflict(f"a refinery already runs here (pid {rr.running_pid(g)})")
    return {"refinery": rr.detach(g, ["--once"])}


def push(g: Grite) -> dict[str, Any]:
    """`git grite sync`: fetch, then publish this clone's log to every remote that syncs."""
    from git_brat.grite.sync import exchange
    r = exchange.sync(g)
    return {"ok": r.ok, "remotes": [{"remote": x.remote, "error": x.error or (
        x.published.error if x.published else None),
        "status": x.published.status if x.published else "not fetched"} for x in r.remotes]}


__all__ = ["needs_count", "needs_items", "Need", "dead_sessions", "legal_actions", "check_output", "CheckOutput", "roles", "Roles",
           "create_convoy", "create_task", "witness_start", "witness_stop", "refinery_pass", "push"]
