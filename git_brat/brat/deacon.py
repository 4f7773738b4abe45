"""The deacon (janitor): expired leases, crashed sessions, stale worktrees and logs, sync; every action an event."""

from __future__ import annotations

import json
import os
import time
from datetime import datetime

import msgspec

from git_brat import process
from git_brat.brat import board as model
from git_brat.brat import layout
from git_brat.brat import sessions as ss
from git_brat.brat.config import Config
from git_brat.grite.model import events as ev
from git_brat.git import worktree
from git_brat.git.run import environment
from git_brat.grite import locks
from git_brat.errors import GriteError
from git_brat.grite.log.wal import Draft
from git_brat.grite.repo import Grite
from git_brat.grite.model.state import State, iso

DEACON = "deacon"                       # one entity per run that did something
LIVE_SESSIONS = ("starting", "running")
RECOVERY_UNAVAILABLE = "skipped: witness recovery unavailable"
NO_SESSION_GRACE = 600.0                # seconds a worktree with no session record is left alone
CLAIMS_PRUNED_EVERY = 3600.0            # seconds between two prunings of the inbox's claims


class Action(msgspec.Struct):
    duty: str                 # leases / sessions / worktrees / logs / sync / inbox
    action: str               # expired / recovered / pruned / deleted / synced / sent / failed
    target: str
    detail: str = ""


class Report(msgspec.Struct):
    at: datetime
    actions: list[Action]     # what changed (each recorded as an event)
    kept: list[Action]        # what was left alone on purpose, and why
    duties: dict[str, str]    # duty -> "ok" / "skipped: ..." / "failed: ..."
    event: str | None = None  # the deacon entity the actions were recorded on


class LastRun(msgspec.Struct):
    """What `git brat status` shows of the deacon."""
    ran_at: datetime | None   # the last pass on this machine (from its stamp)
    acted_at: datetime | None # the last pass that did something (from the log)
    actions: list[Action]
    duties: dict[str, str]


def stamp_path(g: Grite) -> str:
    return layout.deacon_stamp(g.store)


# -- duties ------------------------------------------------------------------------------

def expire_leases(g: Grite, report: Report) -> None:
    settings = locks.settings(g.store)
    st = locks.gc(g, settings)
    for lease in st.leases:
        report.actions.append(Action("leases", "expired", lease.resource,
                                     f"held by {lease.holder} (token {lease.token})"))
    notes = "; ".join(n for n in (st.note, settings.waiting) if n)
    report.duties["leases"] = "ok" + (f" ({notes})" if notes else "")


def recover_sessions(g: Grite, cfg: Config, report: Report) -> None:
    try:
        from git_brat.brat import witness   # the lead's module; absent on older trees
        recover = witness.recover
    except (ImportError, AttributeError):
        report.duties["sessions"] = RECOVERY_UNAVAILABLE
        return
    for item in recover(g, cfg) or []:
        data = msgspec.to_builtins(item) if not isinstance(item, (str, int)) else item
        if isinstance(data, dict):
            target = str(data.get("session") or data.get("id") or data.get("task") or "")
            detail = ", ".join(f"{k}={v}" for k, v in data.items() if k not in ("session", "id"))
        else:
            target, detail = str(data), ""
        report.actions.append(Action("sessions", "recovered", target, detail))
    report.duties["sessions"] = "ok"


def _sessions_by_task(state: State, cold_before: int) -> dict[str, model.Entity]:
    """The newest session of each task. A session work tree is known by its place alone (named
    by its task, under .git/brat/worktrees/), never by a path a record in the log gives."""
    out: dict[str, model.Entity] = {}
    for e in sorted(state.of_kind(model.SESSION, model.SESSION_ENDED, cold_before),
                    key=model.age_key):
        out[e.get("task", "")] = e
    return out


def prune_worktrees(g: Grite, cfg: Config, report: Report) -> None:
    if not cfg.deacon.prune_worktrees:
        report.duties["worktrees"] = "skipped: deacon.prune_worktrees is false"
        return
    from git_brat.brat.refinery import run as refinery_run
    store = g.store
    sessions = _sessions_by_task(g.state(), g.cold_before)
    root = os.path.realpath(layout.worktrees(store))
    refinery = os.path.realpath(layout.refinery_worktree(store))
    for wt in worktree.listing(store.common_dir):
        path = os.path.realpath(wt.get("worktree", ""))
        if path == refinery:
            if refinery_run.running_pid(g) is not None or _refinery_leased(g, cfg):
                report.kept.append(Action("worktrees", "kept", path, "the refinery is running"))
            else:
                worktree.remove(store.common_dir, path)
                report.actions.append(Action("worktrees", "pruned", path,
                                             "the refinery's; made again on its next run"))
            continue
        if os.path.dirname(path) != root:
            continue
        tid = os.path.basename(path)
        s = sessions.get(tid)
        if s is not None and s.get("status", "") in LIVE_SESSIONS:
            continue
        if ss.removal_pending(store, tid):
            # Its removal was cut short: half deleted, it holds nothing of anyone's.
            _remove(store, tid, report, "an interrupted removal finished")
            continue
        if s is None and _age(path) < NO_SESSION_GRACE:
            # A witness makes the worktree, then records its session: not an orphan yet.
            report.kept.append(Action("worktrees", "kept", path, "no session recorded yet"))
            continue
        why = _why_keep(store, path, wt)
        if why:
            report.kept.append(Action("worktrees", "kept", path, why))
            continue
        branch = wt.get("branch", "").removeprefix("refs/heads/")
        whose = f"session {s.id[:7]} {s.get('status', '')}" if s is not None else "no session"
        _remove(store, tid, report, whose + (f"; branch {branch} kept" if branch else ""))
    for tid in _pending_removals(store):   # trees git has forgotten already
        if tid not in sessions or sessions[tid].get("status", "") not in LIVE_SESSIONS:
            _remove(store, tid, report, "an interrupted removal finished")
    report.duties["worktrees"] = "ok"


def _remove(store, tid: str, report: Report, detail: str) -> None:
    path = os.path.join(layout.worktrees(store), tid)
    try:
        layout.check_id(tid, "task")
    except GriteError:   # not a tree a witness made (those are named by their task)
        worktree.remove(store.common_dir, path)
        report.actions.append(Action("worktrees", "pruned", path, detail))
        return
    try:
        kept = ss.remove_worktree(store, tid)
    except (GriteError, OSError) as exc:
        report.kept.append(Action("worktrees", "kept", layout.worktree(store, tid),
                                  f"could not remove it: {exc}"))
        return
    for k in kept:
        report.actions.append(Action("worktrees", "kept-commit", k.ref,
                                     f"{k.commit[:12]} was on no branch"))
    report.actions.append(Action("worktrees", "pruned", layout.worktree(store, tid), detail))


def _pending_removals(store) -> list[str]:
    try:
        names = os.listdir(os.path.dirname(layout.removal_mark(store, "0" * 32)))
    except OSError:
        return []
    return [n for n in sorted(names) if ss.removal_pending(store, n)]


def _age(path: str) -> float:
    try:
        return time.time() - os.path.getmtime(path)
    except OSError:
        return float("inf")


def _refinery_leased(g: Grite, cfg: Config) -> bool:
    from git_brat.brat.refinery.queue import lease_name
    lease = locks.current(g, lease_name(g.store, cfg.refinery.remote))
    return lease is not None and lease.state == "held" and lease.expires_at > process.now_ms()


def _why_keep(store, path: str, wt: dict) -> str:
    """Why a worktree must stay: work in it that no branch holds."""
    if not os.path.isdir(path):
        return ""
    head = wt.get("HEAD", "")
    if worktree.dirty(store.common_dir, path, head):
        return "uncommitted changes"
    if "branch" not in wt and head:
        if not worktree.branches_containing(store.common_dir, head):
            return f"its commit {head[:12]} is on no branch"
    return ""


def prune_logs(g: Grite, cfg: Config, report: Report) -> None:
    cutoff = time.time() - cfg.deacon.log_retention_days * 86400
    live = {e.id for e in g.state().of_kind(model.SESSION, model.SESSION_ENDED, model.NOT_SETTLED)
            if e.get("status") in LIVE_SESSIONS}
    for name, path in layout.session_logs(g.store):
        try:
            if os.path.getmtime(path) >= cutoff or name in live:
                continue
            os.unlink(path)
        except OSError:
            continue
        report.actions.append(Action("logs", "deleted", path,
                                     f"older than {cfg.deacon.log_retention_days:g} days"))
    report.duties["logs"] = "ok"


def sync_remote(g: Grite, cfg: Config, report: Report, force: bool) -> None:
    from git_brat.grite.sync import exchange as sync
    remotes = sync.synced_remotes(g.store)
    if not remotes:
        report.duties["sync"] = "skipped: no remote"
        return
    last = _read_stamp(g).get("synced_at", 0)
    if not force and (cfg.deacon.sync_interval == 0
                      or time.time() - last < cfg.deacon.sync_interval):
        report.duties["sync"] = "skipped: not due"
        return
    try:
        res = sync.sync(g)
    except GriteError as exc:
        report.actions.append(Action("sync", "failed", ",".join(remotes), exc.message))
        report.duties["sync"] = f"failed: {exc.message}"
        return
    bad = [r for r in res.remotes if not r.fetched or (r.published and r.published.status == "failed")]
    for r in bad:
        report.actions.append(Action("sync", "failed", r.remote, r.error or "publish failed"))
    if res.events:
        report.actions.append(Action("sync", "synced", ",".join(remotes),
                                     f"{res.events} new event(s)"))
    report.duties["sync"] = "ok" if not bad else "failed: " + ", ".join(r.remote for r in bad)
    _write_stamp(g, synced_at=time.time())


def deliver_inbox(g: Grite, cfg: Config, report: Report) -> None:
    """Send what waits for the human to the configured sinks, each item once across clones
    (after sync: items other clones' agents raised are seen, and their claims)."""
    from git_brat.brat import inbox
    out_sinks = inbox.sinks(g.store, cfg)
    skipped = "skipped: no sink (inbox.* or git config brat.inbox.*)"
    if not out_sinks and not g.store.refs.under(inbox.CLAIMS):
        report.duties["inbox"] = skipped   # (and no claim here to prune: no remote asked)
        return
    board = model.board(g, refresh=True)
    pruned = _prune_claims(g, cfg, board, report)
    if not out_sinks:
        report.duties["inbox"] = skipped + pruned
        return
    failed = 0
    for d in inbox.deliver(g, cfg, board):
        detail = ", ".join(d.sinks) + (f" ({d.detail})" if d.detail else "")
        if d.outcome == "claimed-elsewhere":
            report.kept.append(Action("inbox", "claimed-elsewhere", d.key, "another clone sent it"))
            continue
        failed += d.outcome == "failed" or bool(d.detail)
        report.actions.append(Action("inbox", d.outcome, d.key, detail))
    report.duties["inbox"] = ("ok" if not failed else
                              f"failed: {failed} delivery(ies), see actions") + pruned


def _prune_claims(g: Grite, cfg: Config, board, report: Report) -> str:
    """Remove the delivery claims of items long gone (inbox.prune_claims), at most once every
    CLAIMS_PRUNED_EVERY seconds (it asks the lock remote for every claim): a note for the duty."""
    from git_brat.brat import inbox
    stamp = layout.inbox_pruned(g.store)
    try:
        if time.time() - os.stat(stamp).st_mtime < CLAIMS_PRUNED_EVERY:
            return ""
    except OSError:
        pass
    try:
        gone = inbox.prune_claims(g, inbox.items(g, cfg, board))
    except GriteError as exc:   # the lock remote unreachable: tried again next pass
        return f"; claims not pruned: {exc.message}"
    layout.ensure_root(g.store)
    with open(stamp, "w"):
        pass
    if gone:
        report.actions.append(Action("inbox", "pruned", f"{len(gone)} claim(s)",
                                     f"delivered over {inbox.CLAIMS_KEPT_DAYS} days ago, "
                                     f"no longer waiting"))
    return ""


# -- a pass, its record, and what status shows ----------------------------------------------

def run_once(g: Grite, cfg: Config, force_sync: bool = True) -> Report:
    report = Report(iso(process.now_ms()), [], [], {})
    for duty, fn in (("leases", lambda: expire_leases(g, report)),
                     ("sessions", lambda: recover_sessions(g, cfg, report)),
                     ("worktrees", lambda: prune_worktrees(g, cfg, report)),
                     ("logs", lambda: prune_logs(g, cfg, report)),
                     ("sync", lambda: sync_remote(g, cfg, report, force_sync)),
                     ("inbox", lambda: deliver_inbox(g, cfg, report))):
        try:
            fn()
        except GriteError as exc:   # one duty failing never stops the others
            report.duties[duty] = f"failed: {exc.message}"
    if report.actions:
        eid = ev.new_entity_id()
        drafts = [Draft(eid, ev.Create(DEACON, {"host": process.hostname(), "pid": os.getpid(),
                                               "duties": report.duties,
                                               "actions": len(report.actions)}))]
        drafts += [Draft(eid, ev.SetFields({f"action{i:03d}": msgspec.to_builtins(a)}))
                   for i, a in enumerate(report.actions)]
        g.append(drafts, f"brat: deacon {len(report.actions)} action(s)")
        report.event = eid
    _write_stamp(g, ran_at=time.time(), duties=report.duties)
    return report


def _read_stamp(g: Grite) -> dict:
    try:
        with open(stamp_path(g)) as f:
            data = json.load(f)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _write_stamp(g: Grite, **values) -> None:
    from git_brat.files import atomic_write
    data = _read_stamp(g)
    data.update(values)
    layout.ensure_root(g.store)
    atomic_write(stamp_path(g), json.dumps(data).encode())


def last_run(g: Grite, state: State) -> LastRun | None:
    stamp = _read_stamp(g)
    runs = sorted(state.of_kind(DEACON), key=model.age_key)
    if not runs and not stamp.get("ran_at"):
        return None
    actions, acted, duties = [], None, dict(stamp.get("duties") or {})
    if runs:
        e = runs[-1]
        acted = iso(e.created_at)
        for name in sorted(k for k in e.fields if k.startswith("action")):
            try:
                actions.append(msgspec.convert(e.get(name), Action))
            except msgspec.ValidationError:
                continue
        duties = duties or dict(e.get("duties") or {})
    ran = stamp.get("ran_at")
    return LastRun(iso(int(ran * 1000)) if ran else None, acted, actions, duties)


def running_pid(g: Grite) -> int | None:
    """The pid of this repository's looping deacon, if one runs."""
    from git_brat.brat import daemon
    return daemon.running_pid(g.store, "deacon")


def stop(g: Grite, wait: float = 30.0) -> int | None:
    """SIGTERM to the looping deacon; its pid once it has exited, None if none ran."""
    from git_brat.brat import daemon
    if running_pid(g) is None:
        return None
    return daemon.stop(g.store, "deacon", wait).pid


def detach(g: Grite, once: bool) -> process.PidFile:
    """Start `git brat deacon run [--once]` in the background, output to deacon.log (a looping
    deacon writes its own pid file as it starts)."""
    return process.detach([*process.launcher("brat"), "deacon", "run", *(["--once"] if once else [])],
                          role="deacon", log=layout.role_log(g.store, "deacon"),
                          cwd=g.store.toplevel() or g.store.common_dir, env=environment("worktree"))


def loop(g: Grite, cfg: Config, passes: int | None = None) -> list[Report]:
    """Passes every deacon.interval seconds until SIGTERM (or `passes` of them)."""
    import signal
    out: list[Report] = []
    stop = {"now": False}
    old = signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
    from git_brat.brat import daemon
    daemon.write_own(g.store, "deacon")
    try:
        while not stop["now"]:
            g.state(refresh=True)
            out.append(run_once(g, cfg, force_sync=False))
            if passes is not None and len(out) >= passes:
                break
            deadline = time.monotonic() + cfg.deacon.interval
            while not stop["now"] and time.monotonic() < deadline:
                time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))
    finally:
        signal.signal(signal.SIGTERM, old)
        daemon.forget(g.store, "deacon")
    return out


__all__ = ["run_once", "loop", "detach", "last_run", "stop", "running_pid", "Report", "Action", "LastRun", "RECOVERY_UNAVAILABLE"]
