"""The witness: claims ready tasks, runs one engine session each in its own work tree, supervises, recovers."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess

import threading
import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable

import msgspec

from git_brat import process
from git_brat.brat import engines
from git_brat.brat import board as model
from git_brat.brat.witness import prompt
from git_brat.brat.engines import runner
from git_brat.brat import sessions as ss
from git_brat.brat.config import Config
from git_brat.brat.engines import Invocation, Preset
from git_brat.brat.board import MERGE, SESSION, Board, status_of
from git_brat.grite.model import events as ev
from git_brat.git import worktree as git_worktree
from git_brat.grite import locks
from git_brat.errors import Conflict, GriteError, NotFound, UsageError
from git_brat.grite.issues import summary
from git_brat.grite.log.wal import Draft
from git_brat.grite.repo import Grite
from git_brat.grite.model.state import Entity

TICK = 0.02            # seconds between looks at the running sessions
STATE_EVERY = 1.0      # seconds between reads of the log (done, block, stop requests)
DONE_GRACE = 10.0      # seconds an agent that said `task done` has to exit by itself
TAIL_LINES = 30


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


class Recovered(msgspec.Struct):
    session: str
    task: str
    status: str                # crashed (or stopped)
    reason: str
    killed: bool               # an orphaned agent was still running here and was stopped
    salvaged: str              # commit of work it had left uncommitted
    branch: str
    engine_session: str        # its conversation, for the next session to resume


class Summary(msgspec.Struct):
    started: int
    ended: list[SessionEnd]
    recovered: list[Recovered]
    failed: int                # tasks whose last session this run failed
    interrupted: bool = False


class _Live:
    """One session this witness supervises (in memory; the log holds its record)."""

    def __init__(self, sid: str, task: Entity, preset: Preset, holder: locks.Holder):
        self.sid, self.tid, self.title = sid, task.id, task.get("title", "")
        self.preset, self.holder = preset, holder
        self.popen: subprocess.Popen | None = None
        self.phase = "setup"
        self.started = time.monotonic()
        self.deadline = self.started
        self.last_renew = self.started
        self.worktree = self.branch = self.base = self.start_head = self.target = ""
        self.log = ""
        self.engine_offset = 0
        self.inv: Invocation | None = None
        self.session_uuid = ""
        self.env: dict[str, str] = {}
        self.stop_reason = ""      # timeout, done, blocked, moved, stop-requested, lease-lost, witness
        self.term_at = 0.0         # when to send TERM (done grace), 0: not scheduled
        self.kill_at = 0.0         # when TERM was sent, KILL follows at this time
        self.attempt = 1
        self.setup_failed = ""
        self.busy = False          # a worker is starting or ending it: leave it alone
        self.claimed = False       # its lease was taken and the session recorded
        self.prepared: dict = {}   # session fields not yet recorded


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


def agent_env(g: Grite, preset: Preset, sid: str, tid: str, worktree: str) -> dict[str, str]:
    """The engine's environment: the user's (API keys, base URLs pass through), plus who it is.

    Some engines' shells never read ~/.gitconfig, so the identity travels in the environment:
    the agent as author, the actor it works for as committer.
    """
    from git_brat.git.run import environment
    actor = g.identity.actor
    bin_dir = _shim_dir(g)
    env = environment("checkout")
    env.update({
        "BRAT_SESSION": sid, "BRAT_TASK": tid, "BRAT_WORKTREE": worktree,
        "GRITE_HOLDER": ss.holder_id(sid),
        "GIT_AUTHOR_NAME": f"{preset.name} agent (git-brat)",
        "GIT_AUTHOR_EMAIL": f"{preset.name}.agent@git-brat.invalid",
        "GIT_COMMITTER_NAME": actor.name, "GIT_COMMITTER_EMAIL": actor.email,
        "PATH": bin_dir + os.pathsep + env.get("PATH", os.defpath),
    })
    return env


def _shim_dir(g: Grite) -> str:
    """git-brat and git-grite launchers of this very installation, first on the agents' PATH:
    an agent's `git brat task done` must reach the brat that supervises it."""
    d = os.path.join(g.store.brat_dir, "bin")
    for program in ("brat", "grite"):
        path = os.path.join(d, f"git-{program}")
        text = f"#!/bin/sh\nexec {shlex.join(process.launcher(program))} \"$@\"\n"
        try:
            with open(path) as f:
                if f.read() == text:
                    continue
        except FileNotFoundError:
            pass
        os.makedirs(d, exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o755)
        os.replace(tmp, path)
    return d


def _log_line(path: str, text: str) -> None:
    with open(path, "ab") as f:
        f.write(f"[brat] {text}\n".encode("utf-8", "replace"))


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
        self.held_elsewhere: set[str] = set()
        self._freed = False        # a session ended since the last look for work
        self.preset = engines.resolve(opts.engine, cfg.engines)
        if not self.preset.argv:
            engines.invocation(self.preset, "", "", "")   # raises the clear "no command" error
        self.st = locks.settings(g.store, ttl=opts.lease_ttl)
        self.live: dict[str, _Live] = {}
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

    def _submit(self, live: "_Live", fn, *args) -> None:
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
        restore = self._trap_signals()
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
        failed = _failed_tasks(self.ended)
        return Summary(self.started, self.ended, self.recovered, failed, bool(self.stopping))

    def _trap_signals(self) -> Callable[[], None]:
        if threading.current_thread() is not threading.main_thread():
            return lambda: None

        def stop(signum, _frame):
            self.stopping = "interrupted" if signum == signal.SIGINT else "stopped"
        old = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
        return lambda: [signal.signal(s, h) for s, h in old.items()]

    def _housekeeping(self) -> None:
        """Between claims when running for good: recover others' crashed sessions, sync."""
        try:
            self.recovered += recover(self.g, self.cfg, self.st, set(self.live), say=self.say)
        except GriteError as exc:
            self.say(f"warning: recovery skipped: {exc.message}")
        interval = self.cfg.deacon.sync_interval
        if interval and time.monotonic() - self._last_sync >= interval:
            self._last_sync = time.monotonic()
            from git_brat.grite import sync
            if sync.synced_remotes(self.g.store):
                try:
                    sync.sync(self.g)
                except GriteError as exc:
                    self.say(f"warning: sync failed: {exc.message}")

    # -- claiming ------------------------------------------------------------------------

    def claim(self) -> int:
        if len(self.live) >= self.opts.max_sessions:
            return 0
        board = model.board(self.g, refresh=True)
        cid = self.g.resolve(self.opts.convoy, model.CONVOY).id if self.opts.convoy else None
        now = process.now_ms()
        busy = {s.tid for s in self.live.values()}
        n = 0
        for t in board.ready(cid):
            if len(self.live) >= self.opts.max_sessions or self.stopping:
                break
            if t.id in busy or t.id in self.held_elsewhere or t.get("retry_after", 0) > now:
                continue
            if self.start(t):
                n += 1
        return n

    def start(self, task: Entity) -> bool:
        """Hand a ready task to a worker: lease it, record the session, make its work tree and
        start setup or the engine. It counts as live from now on, so it is not handed out twice."""
        sid = ev.new_entity_id()
        holder = locks.holder_for(self.g, ss.holder_id(sid), sid)
        live = _Live(sid, task, self.preset, holder)
        live.target = self.cfg.refinery.target_branch
        live.branch = ss.branch_for(task.id)
        live.worktree = ss.worktree_for(self.g, task.id)
        live.log = ss.log_path(self.g, sid)
        timeout = self.opts.timeout or self.preset.timeout or self.cfg.witness.timeout
        live.deadline = live.started + timeout
        self.live[sid] = live
        self._submit(live, self._claim)
        return True

    def _claim(self, live: "_Live") -> bool:
        """(worker) Take the task's lease and record the session; True if it did not start."""
        g, tid, sid, holder = self.g, live.tid, live.sid, live.holder
        res = ss.resource(tid)
        g.state(refresh=True)
        try:
            lease = locks.acquire(g, res, self.st, holder, record=False)   # token: with the claim
        except locks.LeaseHeld:
            if self.opts.once:
                self.held_elsewhere.add(tid)   # someone else runs it: not ours this pass
            return True
        except GriteError as exc:
            self.say(f"warning: could not lease task {tid[:7]}: {exc.message}")
            return True
        except Exception:
            # A bug, reported by _collect; the lease may have been granted all the same, and
            # held by a session that never starts it would keep every witness off the task.
            self._release(res, holder)
            raise
        before = self._previous_session(res) if lease.action == "acquire" else ""
        if before and not self._knows(before):
            # A session we have never heard of held this task and let it go cleanly: it ran on
            # another clone, and its work may have moved the task on. Never run on an old view.
            self.say(f"task {tid[:7]}: another clone worked on it; waiting until its log arrives")
            self._release(res, holder)
            return True
        info: dict = {}

        def build() -> list[Draft]:
            board = model.board(g)
            task = board.tasks.get(tid)
            if task is None or not board.is_ready(tid):
                raise Conflict(f"task {tid[:7]} is no longer ready")
            prior = ss.of_task(board, tid)
            info.update(task=task, prior=prior, board=board)
            return [
                Draft(tid, ev.SetFields({"status": "running", "status_from": "queued",
                                         "session": sid, "done_by": "",
                                         "reason": f"session {sid[:7]} started"})),
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
            self._release(res, holder)
            return True
        live.attempt = info["task"].get("failures", 0) + 1
        live.claimed = True
        with self._count:
            self.started += 1
        return self._launch(live, info)

    def _launch(self, live: "_Live", info: dict) -> bool:
        """(worker) Prepare the work tree and prompt, start setup or the engine; True if it ended."""
        try:
            self._prepare(live, info)
            return False
        except (GriteError, OSError) as exc:
            live.setup_failed = exc.message if isinstance(exc, GriteError) else str(exc)
            _log_line(live.log, f"could not start: {live.setup_failed}")
            return self._finish(live, None)

    def _previous_session(self, res: str) -> str:
        """The session that held `res` before this grant ("" when it was no session's)."""
        try:
            records = locks.history(self.g, res, limit=8)
        except GriteError:
            return ""
        token = records[0].token if records else 0
        prev = next((r for r in records if r.token < token), None)
        if prev is None or not prev.holder.id.startswith("session:"):
            return ""
        return prev.holder.session or prev.holder.id[len("session:"):]

    def _knows(self, sid: str) -> bool:
        """Whether this clone has the record of session sid: fetched from the lock remote if not."""
        if sid in self.g.state().kinds:
            return True
        from git_brat.grite import sync
        if self.st.remote in sync.synced_remotes(self.g.store):
            try:
                sync.sync(self.g, self.st.remote, push=False)
            except GriteError as exc:
                self.say(f"warning: could not fetch from {self.st.remote}: {exc.message}")
        return sid in self.g.state(refresh=True).kinds

    def _publish(self) -> None:
        """Publish our log before letting a lease go, so whoever takes the task next sees it."""
        from git_brat.grite import sync
        if self.st.remote in sync.synced_remotes(self.g.store):
            try:
                pub = sync.publish(self.g, self.st.remote)
                if pub.status == "failed":
                    self.say(f"warning: could not publish to {self.st.remote}: {pub.error}")
            except GriteError as exc:
                self.say(f"warning: could not publish to {self.st.remote}: {exc.message}")

    def _prepare(self, live: _Live, info: dict) -> None:
        g, tid = self.g, live.tid
        os.makedirs(os.path.dirname(live.log), exist_ok=True)
        sdir = ss.session_dir(g, live.sid)
        os.makedirs(sdir, exist_ok=True)
        resumed_branch = self._worktree(live)
        board: Board = info["board"]
        task: Entity = info["task"]
        prior: list[Entity] = info["prior"]
        live.env = agent_env(g, self.preset, live.sid, tid, live.worktree)
        # What the previous sessions leave this one: a conversation to resume, a reply, a failure.
        reply_id, reply = ss.pending_reply(task, prior)
        last = prior[-1] if prior else None
        resume_id = ""
        if self.preset.resumes and last is not None and last.get("engine") == self.preset.name:
            resume_id = last.get("engine_session", "")
        conv = board.convoys.get(task.get("convoy", ""))
        notes = [body for _e, _l, _a, _t, body in task.sorted_comments()
                 if not body.startswith(("done: ", "reply: "))]
        pin = prompt.PromptInput(
            task_id=tid, title=task.get("title", ""), body=task.get("body", ""),
            convoy_title=conv.get("title", "") if conv else "",
            convoy_body=conv.get("body", "") if conv else "", branch=live.branch,
            base=live.base, target=live.target, workdir=live.worktree,
            paths=list(task.get("paths", [])), attempt=live.attempt,
            last_failure=task.get("last_failure", "") if task.get("failures", 0) else "",
            notes=notes[-10:], reply=reply,
            resumed_after_crash=bool(last is not None and last.get("status") in ("crashed", "stopped")),
            commits=self.g.store.objects.count(live.base, live.branch) if resumed_branch else 0)
        text = prompt.continuation(pin) if resume_id else prompt.build(pin)
        with open(os.path.join(sdir, "prompt.txt"), "w", encoding="utf-8") as f:
            f.write(text)
        live.session_uuid = str(uuid.uuid4()) if self.preset.new_session_args and not resume_id else ""
        live.inv = engines.invocation(self.preset, text, live.worktree, sdir, resume_id,
                                      live.session_uuid)
        fields = {"status": "starting", "base": live.base, "start_head": live.start_head,
                  "argv": engines.shown_argv(live.inv.argv, text), "resumed": resume_id,
                  "engine_version": self._engine_version(), "reply_id": reply_id,
                  "engine_session": live.session_uuid or resume_id}
        live.prepared = fields   # recorded with the pid, in one event, once it runs
        _log_line(live.log, f"session {live.sid} task {tid} ({live.title}) engine "
                            f"{self.preset.name} branch {live.branch} base {live.base[:12]}")
        setup = self.cfg.witness.setup
        if setup:
            _log_line(live.log, f"setup: {setup}")
            inv = Invocation(["sh", "-c", setup], {}, None, False)
            live.popen, proc = runner.spawn(inv, live.worktree, live.log, live.env)
            self._record_proc(live, proc, "setup")
        else:
            self._spawn_engine(live)

    def _worktree(self, live: _Live) -> bool:
        """Make (or reuse) the task's work tree; True when it continues an existing branch."""
        store, path = self.g.store, live.worktree
        target = store.refs.branch_tip(live.target) or store.objects.rev(live.target) or \
            store.objects.rev("HEAD")
        if target is None:
            raise UsageError(f"the target branch {live.target} does not exist and HEAD has no "
                             f"commit: set refinery.target_branch")
        existing = store.refs.branch_tip(live.branch)
        here = os.path.realpath(path)
        trees = {os.path.realpath(w["worktree"]): w.get("branch", "").removeprefix("refs/heads/")
                 for w in git_worktree.listing(store.common_dir)} if os.path.exists(path) else {}
        if here in trees:
            if trees[here] == live.branch:
                salvage(store, path, f"work left in {live.branch}'s work tree", live.env or
                        agent_env(self.g, self.preset, live.sid, live.tid, path),
                        self.preset.scratch)
            else:
                git_worktree.remove(store.common_dir, path)
                trees.pop(here)
        elif os.path.exists(path):
            # Not a work tree git knows: keep its files aside rather than delete anything.
            os.replace(path, f"{path}.stale-{int(time.time())}")
        if here not in trees:
            git_worktree.add(store.toplevel() or store.git_dir, path, branch=live.branch,
                             start=None if existing else target, hooks=True)
        live.base = (store.objects.merge_base(target, live.branch) or target) if existing else target
        live.start_head = store.refs.branch_tip(live.branch) or target
        return bool(existing)

    def _engine_job(self, live: "_Live") -> bool:
        try:
            self._spawn_engine(live)
            return False
        except OSError as exc:
            live.setup_failed = f"the engine could not start: {exc}"
            return self._finish(live, None)

    def _spawn_engine(self, live: _Live) -> None:
        live.phase = "engine"
        _log_line(live.log, "engine: " + shlex.join(engines.shown_argv(
            live.inv.argv, _prompt_of(live))))
        live.engine_offset = os.path.getsize(live.log)
        live.popen, proc = runner.spawn(live.inv, live.worktree, live.log, live.env)
        self._record_proc(live, proc, "running")

    def _record_proc(self, live: _Live, proc: process.Proc, status: str) -> None:
        # The pid file first: if we die before the event lands, recovery still finds the agent.
        with open(os.path.join(ss.session_dir(self.g, live.sid), "pid"), "w") as f:
            f.write(f"{proc.pid} {proc.start}\n")
        fields = {**live.prepared, "status": status, "pid": proc.pid, "pid_start": proc.start,
                  "phase": live.phase}
        live.prepared = {}
        self.g.append([Draft(live.sid, ev.SetFields(fields))],
                      summary(f"session.{live.phase}", live.sid))

    def _engine_version(self) -> str:
        if self._version is None:
            import shutil
            # Short: a session waits on it, and a missing version costs only a status column.
            self._version = engines.version_of(self.preset, shutil.which(self.preset.binary)
                                               if self.preset.binary else None, timeout=15.0)
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
                    _log_line(live.log, "setup: ok")
                    self._submit(live, self._engine_job)
                    continue
                if live.phase == "setup" and rc != 0:
                    live.setup_failed = f"setup `{self.cfg.witness.setup}` exited {rc}"
                self._submit(live, self._finish, rc)
                continue
            if not live.stop_reason and now >= live.deadline:
                self._stop(live, "timeout")
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

    def _stop(self, live: _Live, reason: str, grace: float = 0.0) -> None:
        live.stop_reason = reason
        live.term_at = time.monotonic() + grace
        if not grace:
            self._term(live)

    def _term(self, live: _Live) -> None:
        live.kill_at = time.monotonic() + process.GRACE
        try:
            os.killpg(live.popen.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass

    def _renew(self, live: _Live) -> None:
        live.last_renew = time.monotonic()
        try:
            locks.renew(self.g, ss.resource(live.tid), self.st, live.holder)
        except locks.RemoteUnreachable as exc:
            self.say(f"warning: lease renewal for task {live.tid[:7]} failed: {exc.message}")
        except (Conflict, NotFound) as exc:
            _log_line(live.log, f"lease lost: {exc.message}")
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

    def _finish(self, live: _Live, rc: int | None) -> bool:
        """(worker) Record how the session ended, move its task, let its lease go; True."""
        if live.popen is not None and process.group_alive(live.popen.pid):
            process.stop_group(live.popen.pid, 2.0)   # what the engine left running in its group
        store = self.g.store
        seconds = round(time.monotonic() - live.started, 3)
        output = runner.read_from(live.log, live.engine_offset) if live.phase == "engine" else ""
        result = engines.read_result(self.preset, output) if live.phase == "engine" else None
        salvaged, kept_all = "", True
        if live.worktree and os.path.isdir(live.worktree) and live.env:
            try:
                salvaged = salvage(store, live.worktree, f"uncommitted work of session "
                                   f"{live.sid[:7]} ({self.preset.name})", live.env,
                                   self.preset.scratch) or ""
            except GriteError as exc:
                kept_all = False   # keep the work tree: its files are the only copy
                _log_line(live.log, f"could not commit what the agent left: {exc.message}")
        head = store.refs.branch_tip(live.branch) or ""
        commits = store.objects.count(live.target, head) if head else 0
        tail = runner.tail(live.log, TAIL_LINES)
        engine_session = (result.session_id if result and result.session_id else "") or \
            live.session_uuid or ""
        if not engine_session and self.preset.resumes and not self.preset.session_keys \
                and live.phase == "engine":
            # An engine that resumes from its files (aider's chat history), not by an id.
            engine_session = ss.session_dir(self.g, live.sid)
        failure = self._failure(live, rc, result)
        res = ss.resource(live.tid)
        outcome: dict = {}
        w = self.cfg.witness

        def build() -> list[Draft]:
            board = model.board(self.g)
            task = board.tasks[live.tid]
            tstatus = status_of(task)
            done = task.get("done_by") == live.sid
            ours = tstatus == "running" and task.get("session") == live.sid
            fields: dict = {}
            extra: list[Draft] = []
            if live.stop_reason == "lease-lost":
                status, reason = "failed", "its lease was lost (another session took the task)"
            elif not ours:
                status = "blocked" if tstatus == "blocked" else "ended"
                reason = (f"the agent blocked the task: {model.reason_of(task)}" if status == "blocked"
                          else f"the task was moved to {tstatus} while it ran")
            elif live.stop_reason == "witness":
                status, reason = "stopped", f"the witness was {self.stopping or 'stopped'}"
                fields = {"status": "queued", "status_from": "running",
                          "reason": f"session {live.sid[:7]} stopped with the witness; it resumes "
                                    f"on {live.branch}"}
            elif live.stop_reason == "stop-requested":
                sess = board.state.entities.get(live.sid)
                by = sess.get("stop_requested", "") if sess else ""
                status, reason = "stopped", f"stopped by {by or 'a user'}"
                fields = {"status": "blocked", "status_from": "running",
                          "reason": f"session {live.sid[:7]} was stopped by {by or 'a user'}"}
            elif failure and not (done and commits):
                status = "timed-out" if live.stop_reason == "timeout" else "failed"
                reason = failure
                fields = self._retry_fields(task, failure, tail)
            elif commits:
                status, reason = "done", f"{commits} commit(s) on {live.branch}"
                fields = {"status": "needs-review", "status_from": "running", "reason": reason,
                          "failures": 0, "last_failure": ""}
                mid = ev.new_entity_id()
                extra.append(Draft(mid, ev.Create(MERGE, {
                    "task": live.tid, "branch": live.branch, "head": head, "base": live.base,
                    "session": live.sid, "target": live.target, "status": "queued"})))
            elif done:
                status = "done" if w.allow_empty_done else "failed"
                reason = "reported done without any commit"
                fields = ({"status": "needs-review", "status_from": "running", "reason": reason}
                          if w.allow_empty_done else
                          {"status": "failed", "status_from": "running",
                           "reason": reason + " (witness.allow_empty_done is false)"})
            else:
                status = "failed"
                reason = "the engine exited without a commit and without `git brat task done`"
                fields = self._retry_fields(task, reason, tail)
            outcome.update(status=status, reason=reason,
                           task=fields.get("status", tstatus))
            end = {"status": status, "reason": reason, "ended_at": process.now_ms(), "exit_code": rc,
                   "head": head, "commits": commits, "salvaged": salvaged,
                   "engine_session": engine_session, "output_tail": tail[-4000:]}
            out = [Draft(live.sid, ev.SetFields(end))]
            if fields:
                out.append(Draft(live.tid, ev.SetFields(fields)))
            return out + extra

        text = summary("session.end", live.sid)
        try:
            locks.append_fenced(self.g, res, build, text, holder_id=live.holder.id)
        except (Conflict, NotFound):
            # The lease moved on: the task is no longer ours to move; record the session alone.
            live.stop_reason = "lease-lost"
            self.g.append(lambda: build()[:1], text)
        self._publish()
        self._release(res, live.holder)
        if outcome.get("task") == "needs-review" and commits:
            from git_brat.brat.refinery import run as refinery_run
            try:   # appending events fires no git hook: with trigger = "hook", start it here
                refinery_run.kick(self.g, self.cfg)
            except (GriteError, OSError) as exc:
                _log_line(live.log, f"could not start the refinery: {exc}")
        if kept_all and live.worktree and os.path.isdir(live.worktree):
            git_worktree.remove(store.common_dir, live.worktree)
        _log_line(live.log, f"ended: {outcome['status']}: {outcome['reason']}")
        end = SessionEnd(live.sid, live.tid, live.title, outcome["status"], outcome["reason"],
                         outcome["task"], rc, commits, seconds)
        self.ended.append(end)
        self.say(f"session {live.sid[:7]} task {live.tid[:7]}: {end.status} ({end.reason}) -> "
                 f"{end.task_status}")
        return True

    def _failure(self, live: _Live, rc: int | None, result) -> str:
        if live.setup_failed:
            return live.setup_failed
        if live.stop_reason == "timeout":
            limit = live.deadline - live.started
            return f"timed out after {limit:g}s (its process group was stopped)"
        if rc is None:
            return ""
        if rc != 0 and live.stop_reason not in ("done", "blocked", "moved"):
            return f"the engine exited {rc}" if rc > 0 else f"the engine was killed by signal {-rc}"
        if result is not None and result.is_error:
            return f"the engine reported an error: {result.message[:300]}"
        return ""

    def _retry_fields(self, task: Entity, failure: str, tail: str) -> dict:
        w = self.cfg.witness
        failures = task.get("failures", 0) + 1
        text = f"{failure}\n\nlast output:\n{tail}"[-6000:]
        if failures <= w.max_retries:
            delay = min(w.backoff * 2 ** (failures - 1), w.backoff_max)
            return {"status": "queued", "status_from": "running", "failures": failures,
                    "retry_after": process.now_ms() + int(delay * 1000), "last_failure": text,
                    "last_failure_at": process.now_ms(),
                    "reason": f"attempt {failures} failed: {failure}; retry in {delay:g}s"}
        return {"status": "failed", "status_from": "running", "failures": failures,
                "last_failure": text, "last_failure_at": process.now_ms(),
                "reason": f"{failure} (after {failures} attempt(s))"}

    def _release(self, res: str, holder: locks.Holder) -> None:
        try:
            locks.release(self.g, res, self.st, holder)
        except GriteError:
            pass   # lost or unreachable: it expires by itself


def _prompt_of(live: _Live) -> str:
    try:
        with open(os.path.join(os.path.dirname(live.log), live.sid, "prompt.txt"),
                  encoding="utf-8") as f:
            return f.read()
    except OSError:
        return ""


def _failed_tasks(ended: list[SessionEnd]) -> int:
    last: dict[str, SessionEnd] = {}
    for e in ended:
        last[e.task] = e
    return sum(1 for e in last.values() if e.status in ss.FAILED or e.task_status == "failed")


def salvage(store, worktree: str, what: str, env: dict, skip: list[str] = ()) -> str | None:
    """Commit whatever an agent left uncommitted, so no work is lost; its sha, or None."""
    if not os.path.isdir(worktree):
        return None
    return git_worktree.commit_all(worktree, f"brat: {what}", env, skip)


# -- crash recovery ------------------------------------------------------------------

def recover(g: Grite, cfg: Config, st: locks.Settings | None = None, exclude: set[str] = frozenset(),
            say: Callable[[str], None] = lambda _l: None) -> list[Recovered]:
    """Sessions whose witness is gone: mark them crashed, stop their orphaned agents on this
    host, commit what they left, and re-queue their tasks to resume on the same branch."""
    board = model.board(g, refresh=True)
    running = [s for s in ss.all_sessions(board, ss.LIVE) if s.id not in exclude]
    if not running:
        return []
    st = st or locks.settings(g.store)
    try:
        held = {l.resource: l for l in locks.status(g, st, refresh=True).leases}
    except GriteError:
        held = {l.resource: l for l in locks.status(g, st, refresh=False).leases}
    host = process.hostname()
    out = []
    for s in running:
        tid = s.get("task", "")
        lease = held.get(ss.resource(tid))
        mine = lease is not None and lease.holder == ss.holder_id(s.id)
        witness = process.Proc(s.get("witness_pid", 0), s.get("witness_start", 0), s.get("host", ""))
        dead_here = s.get("host") == host and witness.pid and not process.same_process(witness)
        if mine and lease.state == "held" and not dead_here:
            continue   # its witness is alive (or may be: its lease has not run out)
        if mine and lease.state == "held":
            try:   # its witness died on this very host: no need to wait for the lease to run out
                locks.release(g, ss.resource(tid), st, locks.holder_for(g), force=True)
            except GriteError:
                continue
        why = ("its witness (pid %d) is gone" % witness.pid if dead_here else
               "its lease expired: the witness stopped renewing it (crashed, killed, or cut off)")
        out.append(_recover_one(g, board, s, why, host))
        say(f"recovered session {s.id[:7]} of task {tid[:7]}: crashed ({why})")
    return [r for r in out if r is not None]


def _recover_one(g: Grite, board: Board, s: Entity, why: str, host: str) -> Recovered | None:
    tid, branch, worktree = s.get("task", ""), s.get("branch", ""), s.get("worktree", "")
    killed = False
    salvaged = ""
    engine_session = s.get("engine_session", "")
    if s.get("host") == host:
        pid, start = s.get("pid", 0), s.get("pid_start", 0)
        if not pid:   # it died between starting the engine and recording it
            try:
                with open(os.path.join(ss.session_dir(g, s.id), "pid")) as f:
                    pid, start = (int(x) for x in f.read().split())
            except (OSError, ValueError):
                pass
        if pid:
            killed = process.stop_recorded_group(process.Proc(pid, start, host))
        if worktree and os.path.isdir(worktree):
            preset_name = s.get("engine", "agent")
            try:
                preset = engines.resolve(preset_name, None)
            except NotFound:
                preset = Preset(name=preset_name, argv=[])
            env = agent_env(g, preset, s.id, tid, worktree)
            try:
                salvaged = salvage(g.store, worktree, f"work left by crashed session {s.id[:7]}",
                                   env, preset.scratch) or ""
            except GriteError:
                salvaged = ""
        if not engine_session:
            try:
                preset = engines.resolve(s.get("engine", ""), None)
                engine_session = engines.read_result(
                    preset, runner.read_from(ss.log_path(g, s.id), 0)).session_id
            except NotFound:
                pass

    def build() -> list[Draft]:
        b = model.board(g)
        cur = b.state.entities.get(s.id)
        if cur is None or cur.get("status") not in ss.LIVE:
            return []
        head = g.store.refs.branch_tip(branch) if branch else None
        out = [Draft(s.id, ev.SetFields({
            "status": "crashed", "reason": why, "ended_at": process.now_ms(), "salvaged": salvaged,
            "engine_session": engine_session, "head": head or "", "orphan_stopped": killed,
            "output_tail": runner.tail(ss.log_path(g, s.id), TAIL_LINES)[-4000:]
            if s.get("host") == host else ""}))]
        task = b.tasks.get(tid)
        if task is not None and status_of(task) == "running" and task.get("session") == s.id:
            out.append(Draft(tid, ev.SetFields({
                "status": "queued", "status_from": "running",
                "reason": f"session {s.id[:7]} crashed; the task resumes on {branch}"})))
        return out

    try:
        g.append(lambda: build() or _nothing(), summary("session.crashed", s.id))
    except _Nothing:
        return None
    return Recovered(s.id, tid, "crashed", why, killed, salvaged, branch, engine_session)


class _Nothing(GriteError):
    pass


def _nothing():
    raise _Nothing("already recovered")


__all__ = ["Witness", "Options", "Summary", "SessionEnd", "Recovered", "options", "recover",
           "salvage", "agent_env"]
