"""Running the refinery: passes under its lease, --detach, stop by pid, and the status view."""

from __future__ import annotations

import os
import signal
import time
from datetime import datetime
from typing import Callable

import msgspec

from git_brat import process
from git_brat.brat import daemon, layout
from git_brat.brat import board as model
from git_brat.brat.refinery import queue as rq
from git_brat.brat.refinery import hub, red, report
from git_brat.brat.config import Config
from git_brat.brat.refinery.passes import PassReport, Refinery, Stopped, merge_log
from git_brat.errors import Conflict
from git_brat.git.run import environment
from git_brat.grite import locks
from git_brat.grite.repo import Grite
from git_brat.grite.model.state import iso

POLL = 5.0


def log_path(g: Grite) -> str:
    return layout.role_log(g.store, "refinery")


def running_pid(g: Grite) -> int | None:
    return daemon.running_pid(g.store, "refinery")


class Standby(msgspec.Struct):
    """Another refinery holds the queue's lease: this one waits to take over."""
    resource: str
    holder: str                # the holder's id (host:pid, or a session)
    host: str
    until: datetime            # the lease's expiry as last read (its holder renews it)
    waiting_until: datetime | None = None   # when this one gives up (None: until stopped)


class RunReport(msgspec.Struct):
    passes: list[PassReport]
    stopped: bool = False
    busy: str = ""             # another refinery holds the lease (with --hook: not an error)
    standby: Standby | None = None   # whom this one stood by for before it took the lease


def kick_path(g: Grite) -> str:
    return layout.refinery_kick(g.store)


def _kicked_since(g: Grite, t: float) -> bool:
    try:
        return os.path.getmtime(kick_path(g)) >= t
    except OSError:
        return False


def busy_message(exc: locks.LeaseHeld) -> str:
    """What a refinery that finds the queue's lease held says (the options it names exist)."""
    h = exc.lease.holder
    left = max(0.0, (exc.lease.expires_at - process.now_ms()) / 1000)
    return (f"another refinery holds {exc.lease.resource} ({h.id}, lease renewed while it runs, "
            f"{left:.0f}s left); one refinery merges for every clone. `git brat refinery run "
            f"--wait SECONDS` waits for it to finish; its clone's `git brat refinery stop` "
            f"stops it")


def standby_message(s: Standby) -> str:
    """What a refinery standing by says: whom it waits for, until when, and how to stop."""
    until = s.until.astimezone().strftime("%H:%M:%S")
    gives_up = (f"; gives up at {s.waiting_until.astimezone().strftime('%H:%M:%S')}"
                if s.waiting_until else "")
    return (f"standing by: another refinery holds {s.resource} ({s.holder} on {s.host}), its "
            f"lease until {until} (renewed while it runs); this one merges when it ends"
            f"{gives_up}. Ctrl-C or `git brat refinery stop` stops waiting")


def _standby(exc: locks.LeaseHeld, wait: float) -> Standby:
    h = exc.lease.holder
    gives_up = None if wait == float("inf") else iso(process.now_ms() + int(wait * 1000))
    return Standby(exc.lease.resource, h.id, h.host, iso(exc.lease.expires_at), gives_up)


def _acquire(g: Grite, ref: Refinery, wait: float,
             on_standby: Callable[[Standby], None]) -> Standby | None:
    """Take the lease, polling every POLL seconds up to `wait` while another refinery (another
    clone's, mostly) has it; a waiting refinery is the one `refinery stop` finds here, unless
    one of this clone's runs. on_standby hears whom it waits for (again when the holder
    changes), so a standby is never silent."""
    deadline = time.monotonic() + wait
    pid_file, told = False, None
    while True:
        try:
            ref.acquire()
            return told
        except locks.LeaseHeld as exc:
            left = deadline - time.monotonic()
            if left <= 0:
                if pid_file:
                    daemon.forget(g.store, "refinery")
                raise Conflict(busy_message(exc)) from exc
            if not pid_file and running_pid(g) is None:
                daemon.write_own(g.store, "refinery", log=log_path(g))
                pid_file = True
            if told is None or told.holder != exc.lease.holder.id:
                told = _standby(exc, wait)
                on_standby(told)
            time.sleep(min(POLL, left))


def run(g: Grite, cfg: Config, once: bool, quiet_if_busy: bool = False,
        max_passes: int | None = None, wait: float = 0.0,
        on_standby: Callable[[Standby], None] = lambda _s: None) -> RunReport:
    """Passes until stopped (or one, with once), holding `refinery:<repo>` throughout.

    quiet_if_busy (a hook started it): nothing due means no lease is even taken; when another
    refinery holds the lease, a kick file tells it to look again before it exits. wait: how
    long to poll for a lease another refinery holds before giving up, telling on_standby.
    """
    report = RunReport([])
    from git_brat.brat.refinery.check import git_pids
    waits = git_pids(os.environ.get("BRAT_GIT_PID")) if quiet_if_busy else []
    if quiet_if_busy and not rq.requests(g, cfg):
        return report
    for _round in range(20):   # bounded: re-runs only while hooks keep kicking
        ref = Refinery(g, cfg)
        ref.wait_pids = waits
        try:
            if quiet_if_busy:
                ref.acquire()
            else:
                report.standby = _acquire(g, ref, wait, on_standby) or report.standby
        except locks.LeaseHeld as exc:
            layout.ensure_root(g.store)
            with open(kick_path(g), "w") as f:
                f.write(f"{os.getpid()}\n")
            report.busy = busy_message(exc)
            return report
        started = time.time()
        _passes(g, ref, report, once, max_passes)
        if report.stopped or not once or not _kicked_since(g, started):
            break
    return report


def _passes(g: Grite, ref: Refinery, report: RunReport, once: bool,
            max_passes: int | None) -> None:
    daemon.write_own(g.store, "refinery", log=log_path(g))

    def on_term(_sig, _frm):
        ref.kill_check()
        raise Stopped()
    old = signal.signal(signal.SIGTERM, on_term)
    try:
        n = 0
        while True:
            report.passes.append(ref.run_pass())
            n += 1
            if once or (max_passes is not None and n >= max_passes):
                break
            deadline = time.monotonic() + POLL
            while time.monotonic() < deadline:
                time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))
                ref.renew()
    except Stopped:
        report.stopped = True
    finally:
        signal.signal(signal.SIGTERM, old)
        ref.cleanup()
        ref.release()
        daemon.forget(g.store, "refinery")


def detach(g: Grite, args: list[str]) -> int:
    """Start `git brat refinery run ARGS` in the background, output to the refinery log (the
    refinery writes its own pid file once it holds the queue's lease)."""
    return process.detach([*process.launcher("brat"), "refinery", "run", *args],
                          role="refinery", log=log_path(g),
                          cwd=g.store.toplevel() or g.store.common_dir,
                          env=environment("worktree")).pid


def kick(g: Grite, cfg: Config) -> int | None:
    """What a hook does, for callers inside git-brat (the witness, after it records a merge
    request): with refinery.trigger = "hook", start a detached `refinery run --once --hook`
    (it exits at once if another refinery runs, leaving it a kick). Returns its pid."""
    if cfg.refinery.trigger != "hook":
        return None
    return detach(g, ["--once", "--hook"])


class StopResult(msgspec.Struct):
    stopped: bool
    pid: int | None


def stop(g: Grite, wait: float = 30.0) -> StopResult:
    if running_pid(g) is None:
        return StopResult(False, None)
    return StopResult(True, daemon.stop(g.store, "refinery", wait).pid)


# -- the status view ------------------------------------------------------------------------

class QueueItem(msgspec.Struct):
    position: int
    task: str
    title: str
    merge: str | None
    branch: str
    head: str
    priority: int
    effective_priority: int
    waiting: float             # seconds in the queue
    attempts: int
    status: str                # queued / waiting / error (backing off)


class Current(msgspec.Struct):
    merge: str
    task: str
    title: str
    status: str                # merging / checking
    started_at: datetime
    check_started_at: datetime | None
    elapsed: float
    log: str
    log_bytes: int
    last_line: str


class Result(msgspec.Struct):
    merge: str
    task: str
    title: str
    status: str
    result: str
    duration: float
    finished_at: datetime
    commit: str
    check: dict | None = None  # a failed check's report (refinery/report.check_report)


class RefineryStatus(msgspec.Struct):
    target: str
    policy: str
    batch: int
    check: str
    running: bool
    pid: int | None
    lease: locks.LeaseView | None
    queue: list[QueueItem]
    current: list[Current]
    recent: list[Result]
    unreachable: dict[str, str] = {}   # needs-review task -> why no refinery here can merge it
    held: str = ""             # why nothing lands (a hub without a check), "" when work lands
    red_target: red.RedTarget | None = None   # the target failing its own check, if it does


def _last_line(path: str) -> tuple[int, str]:
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            f.seek(max(0, size - 2048))
            lines = f.read().decode("utf-8", "replace").splitlines()
        return size, next((ln for ln in reversed(lines) if ln.strip()), "")
    except OSError:
        return 0, ""


def status(g: Grite, cfg: Config, recent: int = 10) -> RefineryStatus:
    state = g.state()
    board = model.Board(state)
    now = process.now_ms()
    rc = cfg.refinery
    merges = {e.id: e for e in state.of_kind(model.MERGE)}
    queue, current = [], []
    for i, r in enumerate(rq.requests(g, cfg, board, now), 1):
        queue.append(QueueItem(i, r.task, r.title, r.merge or None, r.branch, r.head, r.priority,
                               r.effective, round((now - r.since) / 1000, 1), r.attempts,
                               r.status))
    for m in sorted(merges.values(), key=model.age_key):
        t = board.tasks.get(m.get("task", ""))
        if m.get("status") in ("merging", "checking") and t is not None \
                and model.status_of(t) == "merging":
            log = m.get("log") or merge_log(g, m.id)
            size, last = _last_line(log)
            cs = m.get("check_started_at")
            current.append(Current(m.id, t.id, t.get("title", ""), m.get("status"),
                                   iso(m.get("started_at", m.updated_at)),
                                   iso(cs) if cs else None,
                                   round((now - m.get("started_at", now)) / 1000, 1), log, size,
                                   last))
    done = [m for m in merges.values() if m.get("finished_at") and (
        m.get("status") in rq.DONE or m.get("left_out"))]   # (a task a human moved mid-check)
    done.sort(key=lambda m: (m.get("finished_at"), m.id), reverse=True)
    results = [Result(m.id, m.get("task", ""),
                      board.tasks[m.get("task")].get("title", "") if m.get("task") in board.tasks
                      else "", m.get("status"), m.get("result", ""), float(m.get("duration", 0)),
                      iso(m.get("finished_at")), m.get("merged_commit", ""),
                      report.merge_report(g, m))
               for m in done[:recent]]
    lease = None
    try:
        st = locks.status(g, locks.settings(g.store, local=True),
                          rq.lease_name(g.store, rc.remote), refresh=False)
        lease = next((l for l in st.leases if l.state != "released"), None)
    except Exception:   # no such lease yet
        lease = None
    pid = running_pid(g)
    return RefineryStatus(rc.target_branch, rc.merge_policy, rc.batch, rc.check,
                          pid is not None or (lease is not None and lease.state == "held"), pid,
                          lease, queue, current, results, rq.unreachable(g, board),
                          hub.problem(g, cfg) or "", red.red_target(board, rc.target_branch))


__all__ = ["run", "detach", "kick", "stop", "status", "RefineryStatus", "RunReport", "Standby",
           "standby_message"]
