"""The witness's loop: claims ready tasks, hands each to a worker to start, supervises the live
sessions (timeouts, done, block, stop requests, lease renewal) and sees each to its end."""

from __future__ import annotations

import os
import signal
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable

import msgspec

from git_brat import process
from git_brat.brat import board as model
from git_brat.brat import engines
from git_brat.brat import layout
from git_brat.brat import sessions as ss
from git_brat.brat import tasks
from git_brat.brat.board import MERGE, SESSION, status_of
from git_brat.brat.config import Config
from git_brat.brat.target_branch import target_branch_problem
from git_brat.brat.refinery import guard
from git_brat.brat.engines import runner
from git_brat.brat.witness import budget, pick, session, verdict, watchdog
from git_brat.brat.witness.recover import Recovered, recover
from git_brat.brat.witness.session import LiveSession, log_line
from git_brat.errors import Conflict, GriteError, NotFound
from git_brat.grite import locks
from git_brat.grite.issues import summary
from git_brat.grite.log.wal import Draft
from git_brat.grite.model import events as ev
from git_brat.grite.model.state import Entity
from git_brat.grite.repo import Grite

TICK = 0.02            # seconds between looks at the running sessions
STATE_EVERY = 1.0      # seconds between reads of the log (done, block, stop requests)
DONE_GRACE = 10.0      # seconds an agent that said `task done` has to exit by itself


class Options(msgspec.Struct, kw_only=True):
    engine: str
    max_sessions: int
    timeout: float
    lease_ttl: float
    heartbeat: float
    convoy: str | None = None
    once: bool = False
    poll: float = 5.0

class SessionEnd(msgspec.Struct):
    session: str
    task: str
    title: str
    status: str                # the session's end: done, failed, timed-out, blocked, stopped
    reason: str
    task_status: str           # where the task went
    exit_code: int | None
    commits: int
    seconds: float

class LiveRow(msgspec.Struct):
    session: str
    task: str
    title: str
    engine: str
    phase: str                 # starting, setup, engine
    elapsed: float
    last_line: str

class Summary(msgspec.Struct):
    started: int
    ended: list[SessionEnd]
    recovered: list[Recovered]
    failed: int                # tasks whose last session this run failed
    interrupted: bool = False

def options(cfg: Config, engine: str | None = None, max_sessions: int | None = None,
            timeout: float | None = None, lease_ttl: float | None = None,
            convoy: str | None = None, once: bool = False) -> Options:
    """Command-line values over [witness] in the config; checked like the config itself."""
    w = cfg.witness
    ttl = lease_ttl if lease_ttl is not None else w.lease_ttl
    heartbeat = min(w.heartbeat, ttl / 3)
    return Options(engine=engine or w.engine, max_sessions=max_sessions or w.concurrency,
                   timeout=timeout or 0.0, lease_ttl=ttl, heartbeat=heartbeat, convoy=convoy,
                   once=once, poll=w.poll)

class Witness:
    """One supervisor process: claims up to max_sessions tasks and sees each session to its end."""

    def __init__(self, g: Grite, cfg: Config, opts: Options,
                 say: Callable[[str], None] = lambda _line: None):
        self._g, self.cfg, self.opts, self.say = g, cfg, opts, say
        self._owner = threading.get_ident()
        self._local = threading.local()
        # Starting and ending sessions is mostly waiting on git: done by workers, so eight
        # sessions start in parallel while this thread keeps supervising the running ones.
        self.pool = ThreadPoolExecutor(max_workers=opts.max_sessions,
                                       thread_name_prefix="brat-session")
        self.jobs: dict[str, Future] = {}
        self._count = threading.Lock()
        self.held_elsewhere: dict[str, str] = {}   # task -> the holder that refused us
        # task -> (the session whose log it waits for, until when: monotonic; None, for good)
        self.awaiting: dict[str, tuple[str, float | None]] = {}
        self.answering_since = float("-inf")   # the lock remote answers again (-inf: no outage)
        self._told: set[str] = set()   # tasks whose passing over was said: once each
        self._freed = False        # a session ended since the last look for work
        self._holds_said: set[str] = set()   # engine holds announced (their paused sessions)
        self.preset = engines.resolve(opts.engine, cfg.engines)
        pick.require_engine(self.preset, cfg, opts.engine)
        # Never a local lease while the lock remote is down (every clone would run every task):
        # claim nothing, and ask it again later.
        self.st = locks.settings(g.store, ttl=opts.lease_ttl, fallback=False)
        self.outage = locks.Outage()
        self.live: dict[str, LiveSession] = {}
        self.ended: list[SessionEnd] = []
        self.recovered: list[Recovered] = []
        self.started = 0
        self.stopping = ""
        self.host = process.hostname()
        self.me = process.this_process()
        self._version: str | None = None
        self._next_state = 0.0
        self._last_sync = 0.0
        self.on_tick: Callable[[list[LiveRow]], None] | None = None   # a terminal's live view
        self._next_tick = 0.0

    @property
    def g(self) -> Grite:
        """The repository, one Grite per thread (a Grite caches state; dulwich is per thread)."""
        if threading.get_ident() == self._owner:
            return self._g
        g = getattr(self._local, "g", None)
        if g is None:
            from git_brat.git.store import Store
            s = self._g.store
            g = self._local.g = Grite(Store(s.git_dir, s.common_dir, s.bare, s.cwd))
        return g

    def _submit(self, live: LiveSession, fn, *args) -> None:
        live.busy = True
        self.jobs[live.sid] = self.pool.submit(fn, live, *args)

    def _collect(self) -> None:
        """Jobs that finished: a session that ended leaves the live set here, in this thread."""
        for sid, fut in list(self.jobs.items()):
            if not fut.done():
                continue
            del self.jobs[sid]
            live = self.live.get(sid)
            try:
                ended = fut.result()
            except Exception as exc:   # a bug must not leave a session unsupervised
                self.say(f"warning: session {sid[:7]}: {type(exc).__name__}: {exc}")
                ended = live is not None and live.popen is None
                if live is not None and not ended:
                    live.busy = False
                    continue
            if ended:
                self.live.pop(sid, None)
                self._freed = True
            elif live is not None:
                live.busy = False

    def _wait_jobs(self) -> None:
        while self.jobs:
            self._collect()
            time.sleep(0.02)

    # -- the loop --------------------------------------------------------------------

    def run(self) -> Summary:
        restore = process.on_stop_signals(lambda how: setattr(self, "stopping", how))
        if problem := target_branch_problem(self.g.store, self.cfg.refinery.target_branch):
            self.say(f"warning: refinery.target_branch: {problem}")
        try:
            try:
                self.recovered += recover(self.g, self.cfg, self.st, say=self.say)
            except GriteError as exc:   # e.g. the log stayed locked: work on, recover later
                self.say(f"warning: recovery skipped: {exc.message}")
            next_claim = 0.0
            while True:
                now = time.monotonic()
                claimed = 0
                # Look for work on the poll interval, and at once whenever a session ended
                # and freed a slot (that is what keeps eight slots busy).
                freed = self._freed and len(self.live) < self.opts.max_sessions
                if not self.stopping and (now >= next_claim or freed):
                    if not self.opts.once and now >= next_claim:
                        self._housekeeping()
                    self._freed = False
                    claimed = self.claim()
                    next_claim = now + (0.5 if self.opts.once else self.opts.poll)
                self.supervise()
                if self.stopping:
                    self.stop_all(self.stopping)
                    break
                if self.opts.once and not self.live and not self.jobs and claimed == 0 \
                        and self.claim() == 0:
                    break
                time.sleep(TICK)
        finally:
            self._wait_jobs()
            self.pool.shutdown(wait=True)
            restore()
        failed = verdict.failed_tasks(self.ended)
        return Summary(self.started, self.ended, self.recovered, failed, bool(self.stopping))

    def _housekeeping(self) -> None:
        """Between claims when running for good: recover others' crashed sessions, sync."""
        try:
            self.recovered += recover(self.g, self.cfg, self.st, set(self.live), say=self.say)
        except GriteError as exc:
            self.say(f"warning: recovery skipped: {exc.message}")
        interval = self.cfg.deacon.sync_interval
        if interval and time.monotonic() - self._last_sync >= interval:
            self._last_sync = time.monotonic()
            from git_brat.grite.sync import exchange as sync
            if sync.synced_remotes(self.g.store):
                try:
                    sync.sync(self.g)
                except GriteError as exc:
                    self.say(f"warning: sync failed: {exc.message}")

    # -- claiming ------------------------------------------------------------------------

    def claim(self) -> int:
        if len(self.live) >= self.opts.max_sessions or self.outage.waiting():
            return 0
        board = model.board(self.g, refresh=True)
        cid = self.g.resolve(self.opts.convoy, model.CONVOY).id if self.opts.convoy else None
        now = process.now_ms()
        if pick.engine_held(self.g, board, self.preset.name, now, self.say, self._holds_said):
            return 0   # a usage limit: nothing starts before its reset
        busy = {s.tid for s in self.live.values()}
        n = 0
        for t in board.ready(cid):
            if len(self.live) >= self.opts.max_sessions or self.stopping:
                break
            sid, until = self.awaiting.get(t.id, ("", None))
            if sid and sid not in board.state.kinds and (until or float("inf")) > time.monotonic():
                continue   # told when it was claimed; claimed again once that log is here
            why = pick.passed_over(t, now, running_here=busy, held_elsewhere=self.held_elsewhere)
            if why:
                if t.id not in busy and t.id not in self._told:
                    self._told.add(t.id)
                    self.say(f"task {t.id[:7]} is ready but not started: {why}")
                continue
            if budget.block_if_spent(self, board, t):
                continue
            if self.start(t):
                n += 1
        return n

    def start(self, task: Entity) -> bool:
        """Hand a ready task to a worker: lease it, record the session, make its work tree and
        start setup or the engine. It counts as live from now on, so it is not handed out twice."""
        sid = ev.new_entity_id()
        holder = locks.holder_for(self.g, ss.holder_id(sid), sid)
        live = LiveSession.of(sid, task, self.preset, holder)
        live.target = self.cfg.refinery.target_branch
        live.target_tip = self.g.store.refs.branch_tip(live.target) or ""
        live.branch = ss.branch_for(task.id)
        live.worktree = layout.worktree(self.g.store, task.id)
        live.log = layout.session_log(self.g.store, sid)
        timeout = self.opts.timeout or self.preset.timeout or self.cfg.witness.timeout
        live.deadline = live.started + timeout
        self.live[sid] = live
        self._submit(live, self._claim)
        return True

    def _claim(self, live: LiveSession) -> bool:
        """(worker) Take the task's lease and record the session; True if it did not start."""
        g, tid, sid, holder = self.g, live.tid, live.sid, live.holder
        res = ss.resource(tid)
        g.state(refresh=True)
        try:
            lease = locks.acquire(g, res, self.st, holder, record=False)   # token: with the claim
        except locks.LeaseHeld as exc:
            if self.opts.once:   # someone else runs it: not ours this pass
                self.held_elsewhere[tid] = exc.lease.holder.id
            return True
        except locks.RemoteUnreachable:
            if self.outage.down():
                self.say(f"warning: lock remote {self.st.remote} unreachable: claiming no task "
                         f"until it answers; retrying")
            return True
        except GriteError as exc:
            self.say(f"warning: could not lease task {tid[:7]}: {exc.message}")
            return True
        except Exception:
            # A bug, reported by _collect; the lease may have been granted all the same, and
            # held by a session that never starts it would keep every witness off the task.
            self._release(res, holder, unused=True)
            raise
        if self.outage.up():
            self.answering_since = time.monotonic()
            self.say(f"lock remote {self.st.remote} answers again: claiming")
        before = pick.previous_session(g, res)
        if before and not self._knows(before.session):
            # A session we have never heard of held this task, on another clone: never run on
            # an old view while its log may still come (pick.log_wait).
            wait = pick.log_wait(before, self.cfg.witness.expired_wait, self.answering_since)
            if wait is None or wait > 0:
                until = None if wait is None else time.monotonic() + wait
                how = "" if wait is None else f" (its lease expired: at most {wait:.0f}s more)"
                self.say(f"task {tid[:7]}: another clone worked on it; waiting for its log{how}")
                self.awaiting[tid] = (before.session, until)
                self._release(res, holder, unused=True)
                return True
        info: dict = {}
        # This clone's own record of the session, before the log names it: recovery acts on
        # (signals, commits in, reads) only what such a record says.
        ss.write_local(g.store, ss.LocalRecord(
            session=sid, task=tid, worktree=live.worktree, host=self.host,
            witness_pid=self.me.pid, witness_start=self.me.start))

        def build() -> list[Draft]:
            board = model.board(g)
            task = board.tasks.get(tid)
            if task is None or not board.is_ready(tid):
                raise Conflict(f"task {tid[:7]} is no longer ready")
            prior = ss.of_task(board, tid)
            info.update(task=task, prior=prior, board=board)
            return [
                tasks.move(board, tid, "running", f"session {sid[:7]} started", session=sid,
                           done_by=""),
                Draft(sid, ev.Create(SESSION, {
                    "task": tid, "status": "starting", "engine": self.preset.name,
                    "host": self.host, "worktree": live.worktree, "branch": live.branch,
                    "target": live.target, "witness_pid": self.me.pid,
                    "witness_start": self.me.start, "holder": holder.id,
                    "attempt": task.get("failures", 0) + 1})),
            ]
        try:
            locks.append_fenced(g, res, build, summary("session.start", sid), holder_id=holder.id)
        except GriteError:
            self._release(res, holder, unused=True)
            return True
        live.attempt = info["task"].get("failures", 0) + 1
        live.claimed = True
        with self._count:
            self.started += 1
        return self._launch(live, info)

    def _launch(self, live: LiveSession, info: dict) -> bool:
        """(worker) Prepare the work tree and prompt, start setup or the engine; True if it ended."""
        try:
            session.prepare(self.g, live, info, self.cfg, self._engine_version)
            return False
        except (GriteError, OSError) as exc:
            live.setup_failed = exc.message if isinstance(exc, GriteError) else str(exc)
            log_line(live.log, f"could not start: {live.setup_failed}")
            return self._finish(live, None)

    def _knows(self, sid: str) -> bool:
        """Whether this clone has the record of session sid: fetched from the lock remote if not."""
        if sid in self.g.state().kinds:
            return True
        from git_brat.grite.sync import exchange as sync
        if self.st.remote in sync.synced_remotes(self.g.store):
            try:
                sync.sync(self.g, self.st.remote, push=False)
            except GriteError as exc:
                self.say(f"warning: could not fetch from {self.st.remote}: {exc.message}")
        return sid in self.g.state(refresh=True).kinds

    def _publish(self) -> bool:
        return session.publish_log(self.g, self.st.remote, self.say)

    def _engine_job(self, live: LiveSession) -> bool:
        try:
            session.spawn_engine(self.g, live)
            return False
        except OSError as exc:
            live.setup_failed = f"the engine could not start: {exc}"
            return self._finish(live, None)

    def _engine_version(self) -> str:
        if self._version is None:
            import shutil
            # Short: a session waits on it, and a missing version costs only a status column.
            store = self.g.store
            self._version = engines.version_of(
                self.preset, shutil.which(self.preset.binary) if self.preset.binary else None,
                timeout=15.0, repo=engines.repository_dirs(store.toplevel(), store.common_dir))
        return self._version

    # -- supervising ------------------------------------------------------------------------

    def rows(self) -> list["LiveRow"]:
        """The live sessions as a terminal shows them: engine, task, elapsed, last output line."""
        now = time.monotonic()
        return [LiveRow(l.sid, l.tid, l.title, self.preset.name,
                        "starting" if not l.claimed or l.popen is None else l.phase,
                        now - l.started, runner.tail(l.log, 1) if l.popen else "")
                for l in self.live.values()]

    def supervise(self) -> None:
        now = time.monotonic()
        if now >= self._next_state and self.live:
            self._next_state = now + STATE_EVERY
            self._watch_log()
        if self.on_tick is not None and now >= self._next_tick:
            self._next_tick = now + 0.5
            self.on_tick(self.rows())
        self._collect()
        for live in list(self.live.values()):
            if live.busy or live.popen is None:
                continue
            rc = live.popen.poll()
            if rc is not None:
                if live.phase == "setup" and rc == 0 and not live.stop_reason:
                    log_line(live.log, "setup: ok")
                    self._submit(live, self._engine_job)
                    continue
                if live.phase == "setup" and rc != 0:
                    live.setup_failed = f"setup `{self.cfg.witness.setup}` exited {rc}"
                self._submit(live, self._finish, rc)
                continue
            if not live.stop_reason and now >= live.deadline:
                self._stop(live, "timeout")
            if not live.stop_reason and watchdog.silent(live, now, self.cfg.witness.idle_timeout):
                self._stop(live, "idle")
            if live.term_at and now >= live.term_at and not live.kill_at:
                self._term(live)
            if live.kill_at and now >= live.kill_at:
                try:
                    os.killpg(live.popen.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            if not live.stop_reason and now - live.last_renew >= self.opts.heartbeat:
                self._renew(live)

    def _watch_log(self) -> None:
        """What others said about our sessions: the agent's done or block, a stop request."""
        board = model.board(self.g, refresh=True)
        for live in list(self.live.values()):
            if live.stop_reason or live.busy:
                continue
            task = board.tasks.get(live.tid)
            sess = board.state.entities.get(live.sid)
            if sess is not None and sess.get("stop_requested"):
                self._stop(live, "stop-requested")
            elif task is None or status_of(task) != "running" or task.get("session") != live.sid:
                # The agent blocked its task: let it finish talking. Someone else moved it: stop.
                blocked = task is not None and status_of(task) == "blocked" and \
                    task.get("blocked_by") == live.sid
                self._stop(live, "blocked" if blocked else "moved",
                           grace=DONE_GRACE if blocked else 0.0)
            elif task.get("done_by") == live.sid:
                self._stop(live, "done", grace=DONE_GRACE)
            elif live.phase == "engine" and budget.spent_while_running(self, board, live):
                self._stop(live, "budget")

    def _stop(self, live: LiveSession, reason: str, grace: float = 0.0) -> None:
        live.stop_reason = reason
        live.term_at = time.monotonic() + grace
        if not grace:
            self._term(live)

    def _term(self, live: LiveSession) -> None:
        live.kill_at = time.monotonic() + process.GRACE
        try:
            os.killpg(live.popen.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass

    def _renew(self, live: LiveSession) -> None:
        live.last_renew = time.monotonic()
        try:
            locks.renew(self.g, ss.resource(live.tid), self.st, live.holder)
        except locks.RemoteUnreachable as exc:
            self.say(f"warning: lease renewal for task {live.tid[:7]} failed: {exc.message}")
        except (Conflict, NotFound) as exc:
            log_line(live.log, f"lease lost: {exc.message}")
            self._stop(live, "lease-lost")
        except GriteError as exc:
            self.say(f"warning: lease renewal for task {live.tid[:7]} failed: {exc.message}")

    def stop_all(self, why: str) -> None:
        """Stop every session (TERM, then KILL after the grace), and record each one."""
        self._wait_jobs()   # sessions being started or ended get there first
        for live in self.live.values():
            if live.popen is not None and live.popen.poll() is None:
                live.stop_reason = "witness"
                self._term(live)
        deadline = time.monotonic() + process.GRACE
        while any(l.popen is not None and l.popen.poll() is None for l in self.live.values()):
            if time.monotonic() >= deadline:
                for l in self.live.values():
                    if l.popen is not None and l.popen.poll() is None:
                        try:
                            os.killpg(l.popen.pid, signal.SIGKILL)
                        except ProcessLookupError:
                            pass
                break
            time.sleep(0.05)
        for live in list(self.live.values()):
            live.stop_reason = "witness"
            if live.claimed:
                self._submit(live, self._finish, live.popen.wait() if live.popen else None)
            else:
                self.live.pop(live.sid, None)
        self._wait_jobs()

    # -- the end of a session ------------------------------------------------------------------

    def _finish(self, live: LiveSession, rc: int | None) -> bool:
        """(worker) Record how the session ended, move its task, let its lease go; True."""
        store = self.g.store
        seconds = round(time.monotonic() - live.started, 3)
        left = session.wind_up(store, live, self.preset, rc)
        head = store.refs.branch_tip(live.branch) or ""
        moved = guard.moved_by_session(self.g, live.target, live.target_tip, live.base, head,
                                       live.worktree) if head else None   # an agent moved it?
        commits = store.objects.count(live.target if store.objects.rev(live.target) and not
                                      moved else live.base or live.target, head) if head else 0
        facts = dict(session=live.sid, branch=live.branch, setup_failed=live.setup_failed,
                     exit_code=rc, engine_error=left.error, timeout=live.deadline - live.started,
                     commits=commits, tail=left.tail, head=head, engine=self.preset.name,
                     **verdict.ending_facts(left.ending, self.cfg.witness))
        res = ss.resource(live.tid)
        outcome: dict = {}

        def build() -> list[Draft]:
            board = model.board(self.g)
            task = board.tasks[live.tid]
            sess = board.state.entities.get(live.sid)
            spent, over = budget.at_end(self, board, live, left.usage)
            # The stop reason as it is now: a lost lease turns the retry into the session's record.
            v = verdict.decide(verdict.Facts(
                **facts, stop_reason=live.stop_reason, task_status=status_of(task),
                task_session=task.get("session", ""),
                done=task.get("done_by") == live.sid, task_reason=model.reason_of(task),
                failures=task.get("failures", 0), reply_head=str(task.get("reply_head", "")),
                stop_requested_by=sess.get("stop_requested", "") if sess else "",
                **verdict.task_facts(task),
                witness_stopping=self.stopping, now=process.now_ms(), over_budget=over),
                self.cfg.witness)
            v = guard.intervention(v, moved, live.tid) if moved is not None else v
            outcome.update(status=v.status, reason=v.reason, task=v.task_to or status_of(task))
            end = {**spent, "status": v.status, "reason": v.reason, "ended_at": process.now_ms(),
                   "exit_code": rc, "head": head, "commits": commits, "salvaged": left.salvaged,
                   "engine_session": left.engine_session, "output_tail": left.tail[-4000:],
                   **v.session_fields}
            if left.kept:
                end["kept"] = [k.ref for k in left.kept]
            out = [Draft(live.sid, ev.SetFields(end))]
            if v.task_to:
                out.append(tasks.move(board, live.tid, v.task_to, v.task_reason,   # (its own)
                                      **{"via": live.sid, **v.task_fields}))
            if v.merge:
                out.append(Draft(ev.new_entity_id(), ev.Create(MERGE, {
                    "task": live.tid, "branch": live.branch, "head": head, "base": live.base,
                    "session": live.sid, "target": live.target, "status": "queued"})))
            return out

        text = summary("session.end", live.sid)
        try:
            locks.append_fenced(self.g, res, build, text, holder_id=live.holder.id)
        except (Conflict, NotFound):
            # The lease moved on: the task is no longer ours to move; record the session alone.
            live.stop_reason = "lease-lost"
            self.g.append(lambda: build()[:1], text)
        if self._publish():   # a lease is never released while the session's end is unpublished
            if outcome.get("task") == "needs-review" and commits and head:   # after its log
                guard.push_task_branch(self.g, self.st.remote, live.branch, head, self.say)
            self._release(res, live.holder)
        if outcome.get("task") == "needs-review" and commits:
            from git_brat.brat.refinery import run as refinery_run
            try:   # appending events fires no git hook: with trigger = "hook", start it here
                refinery_run.kick(self.g, self.cfg)
            except (GriteError, OSError) as exc:
                log_line(live.log, f"could not start the refinery: {exc}")
        if left.kept_all and live.worktree and os.path.isdir(live.worktree):
            try:
                for k in ss.remove_worktree(store, live.tid):
                    log_line(live.log, f"kept {k.commit[:12]} (on no branch) as {k.ref}")
            except (GriteError, OSError) as exc:
                log_line(live.log, f"could not remove the work tree: {exc}")
        log_line(live.log, f"ended: {outcome['status']}: {outcome['reason']}")
        end = SessionEnd(live.sid, live.tid, live.title, outcome["status"], outcome["reason"],
                         outcome["task"], rc, commits, seconds)
        self.ended.append(end)
        self.say(f"session {live.sid[:7]} task {live.tid[:7]}: {end.status} ({end.reason}) -> "
                 f"{end.task_status}")
        return True

    def _release(self, res: str, holder: locks.Holder, unused: bool = False) -> None:
        try:
            locks.release(self.g, res, self.st, holder, unused=unused)
        except GriteError:
            pass   # lost or unreachable: it expires by itself


__all__ = ["Witness", "Options", "Summary", "SessionEnd", "LiveRow", "options"]
