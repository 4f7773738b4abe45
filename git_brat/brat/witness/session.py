"""A session the witness supervises: its state in memory, its work tree, the agent's environment
and launchers, and starting setup or the engine (the log holds its record)."""

from __future__ import annotations

import os
import shlex
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Callable, Literal, NamedTuple

import msgspec

from git_brat import process, redact
from git_brat.git import quarantine
from git_brat.git import worktree as git_worktree
from git_brat.brat import engines
from git_brat.brat import kb
from git_brat.brat import layout
from git_brat.brat import sessions as ss
from git_brat.brat import trust
from git_brat.brat.board import Board
from git_brat.brat.config import Config
from git_brat.brat.engines import Invocation, Preset, ending, runner, sandbox, usage
from git_brat.brat.witness import brief, confine, gate, meter, prompt
from git_brat.brat.witness.verdict import StopReason
from git_brat.errors import GriteError, UsageError
from git_brat.files import open_private, private_dir
from git_brat.grite import locks
from git_brat.grite.issues import summary
from git_brat.grite.log.wal import Draft
from git_brat.grite.model import events as ev
from git_brat.grite.model.state import Entity
from git_brat.grite.repo import Grite

TAIL_LINES = 30
END_READ = 64 << 20    # bytes of a session's output read for what it spent, at its end
Phase = Literal["setup", "engine"]


@dataclass(eq=False)
class LiveSession:
    """One session this witness supervises (in memory; the log holds its record)."""
    sid: str
    tid: str
    title: str
    preset: Preset
    holder: locks.Holder
    popen: subprocess.Popen | None = None
    phase: Phase = "setup"
    started: float = field(default_factory=time.monotonic)
    deadline: float = 0.0
    last_renew: float = 0.0
    worktree: str = ""
    branch: str = ""
    base: str = ""
    start_head: str = ""
    target: str = ""
    target_tip: str = ""       # the target's commit when the session started ("": unknown)
    log: str = ""
    engine_offset: int = 0
    inv: Invocation | None = None
    session_uuid: str = ""
    env: dict[str, str] = field(default_factory=dict)
    stop_reason: StopReason = ""
    term_at: float = 0.0       # when to send TERM (done grace), 0: not scheduled
    kill_at: float = 0.0       # when TERM was sent, KILL follows at this time
    attempt: int = 1
    setup_failed: str = ""
    busy: bool = False         # a worker is starting or ending it: leave it alone
    claimed: bool = False      # its lease was taken and the session recorded
    prepared: dict = field(default_factory=dict)   # session fields not yet recorded
    sandbox: str = "none"      # what it runs in: bwrap or none
    plan: sandbox.Plan | None = None
    confinement: str = "none"  # what its sandbox actually confines (sandbox.describe)
    gate: gate.Gate | None = None
    brief: brief.Brief | None = None   # what the engine reads besides its prompt, written
    started_wall: float = field(default_factory=time.time)   # side channels written since
    resume_id: str = ""        # the conversation it continues ("": a new one)
    budget_reason: str = ""    # why the witness stopped it at its budget
    meter_offset: int = 0      # how far its log was read for what it spent while it runs
    meter: usage.Usage = field(default_factory=usage.Usage)   # what that reading found
    # The idle watchdog: its sign of work when last looked at (watchdog.silent), and when it
    # last changed.
    output_size: int = 0
    output_at: float = 0.0
    output_checked: float = 0.0

    def __post_init__(self):
        self.deadline = self.deadline or self.started
        self.last_renew = self.last_renew or self.started

    @classmethod
    def of(cls, sid: str, task: Entity, preset: Preset, holder: locks.Holder) -> "LiveSession":
        return cls(sid, task.id, task.get("title", ""), preset, holder)


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
        SESSION_MARK: sid, "BRAT_TASK": tid, "BRAT_WORKTREE": worktree,
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
    d = layout.bin_dir(g.store)
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


SESSION_MARK = "BRAT_SESSION"


def stop_strays(sid: str) -> list[int]:
    """Kill every process still marked as session sid's (BRAT_SESSION=<sid> in its environment,
    which an agent's children inherit): what left the agent's process group (setsid, a
    daemonizing tool) is found here. The pids killed.

    Limits (Linux, /proc): a process that clears or rewrites its environment, or runs as
    another user (its environ unreadable), is not found. Each candidate is pinned by a pidfd
    before its environment is read, so a pid reused meanwhile is never signalled."""
    import signal
    mark = f"{SESSION_MARK}={layout.check_id(sid, 'session')}".encode()
    me, out = os.getpid(), []
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return []
    for pid in pids:
        if pid == me:
            continue
        try:
            fd = os.pidfd_open(pid)
        except (OSError, AttributeError):
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if mark not in f.read().split(b"\0"):
                    continue
            signal.pidfd_send_signal(fd, signal.SIGKILL)
            out.append(pid)
        except OSError:
            continue
        finally:
            os.close(fd)
    return out


def log_line(path: str, text: str) -> None:
    with open_private(path) as f:
        f.write(f"[brat] {text}\n".encode("utf-8", "replace"))


def salvage(store, tid: str, what: str, env: dict, skip: list[str] = (),
            deletions: bool = True) -> str | None:
    """Commit whatever an agent left uncommitted in task tid's work tree onto brat/<tid>, so
    no work is lost; its sha, or None.

    By plumbing, with the witness's own git dir (quarantine.commit_onto): what the tree's HEAD
    names is never followed, nothing in the tree is run, and only the task's branch moves (from
    the tip it was read at). env gives who commits (the agent as author).

    Which deletions are the agent's: a session starts in a tree that holds exactly its branch
    (make_worktree restores a leftover tree before handing it over), so at the end of that
    session, or when recovery ends it, every change in the tree is the session's own, deletions
    included. Nothing else may commit a deletion: a tree found at the start of a session, or
    one whose removal began (marked), may be half deleted by git itself, and a missing file
    there says nothing about what an agent wanted (deletions=False). A tree marked as being
    removed is never salvaged at all."""
    worktree = layout.worktree(store, tid)
    if not os.path.isdir(worktree) or ss.removal_pending(store, tid):
        return None
    return quarantine.commit_onto(store.common_dir, worktree, ss.branch_for(tid),
                                  f"brat: {what}", env, skip, deletions=deletions)


class Leftovers(NamedTuple):
    """What a session left when it ended, as its end record needs it."""
    salvaged: str                # the commit of what the agent left uncommitted, or ""
    kept_all: bool               # everything is safe on a ref: the tree may go
    kept: list[ss.Kept]
    tail: str                    # the log's tail, secrets redacted (it syncs to every clone)
    engine_session: str          # what the next attempt resumes
    error: str | None            # the engine's own error, redacted
    usage: usage.Usage           # what the engine reported spending (reported=False: nothing)
    ending: ending.Ending        # how its output says it ended (a limit pauses the task)


def wind_up(store, live: LiveSession, preset: Preset, rc: int | None = None) -> Leftovers:
    """(worker) A session's end: stop what the agent left running (in its group and out of
    it), read the engine's result, and save its work before its tree goes."""
    if live.popen is not None and process.group_alive(live.popen.pid):
        process.stop_group(live.popen.pid, 2.0)   # what the engine left running in its group
    strays = stop_strays(live.sid)                # and what it started outside that group
    if strays:
        log_line(live.log, f"stopped {len(strays)} process(es) the agent left outside its "
                           f"group: {' '.join(map(str, strays))}")
    unconfine(store, live)
    engine_ran = live.phase == "engine"
    output = runner.read_from(live.log, live.engine_offset) if engine_ran else ""
    result = engines.read_result(preset, output) if engine_ran else None
    salvaged, kept_all, kept = save_work(store, live, [*preset.scratch, *briefed(
        store, live, live.start_head or live.base)])
    engine_session = (result.session_id if result and result.session_id else "") or \
        live.session_uuid or ""
    if not engine_session and preset.resumes and not preset.session_keys and engine_ran:
        # An engine that resumes from its files (aider's chat history), not by an id.
        engine_session = layout.session_dir(store, live.sid)
    error = redact.text(result.message) if result is not None and result.is_error else None
    # The whole output (up to END_READ): an engine that reports every step has its first
    # reports at the top of a long log.
    spent = meter.spent_so_far(live, preset, runner.read_from(live.log, live.engine_offset, END_READ),
                         engine_session) if engine_ran else usage.Usage()
    end = ending.classify(preset, output, rc, idle=live.stop_reason == "idle") if engine_ran \
        else ending.Ending("failure")
    if end.why:
        end = msgspec.structs.replace(end, why=redact.text(end.why))
    return Leftovers(salvaged, kept_all, kept, redact.text(runner.tail(live.log, TAIL_LINES)),
                     engine_session, error, spent, end)


def save_work(store, live: LiveSession, skip: list[str]) -> tuple[str, bool, list[ss.Kept]]:
    """(worker) At a session's end, before its tree goes: an unconfined agent's branch of its
    own or detached HEAD grown from its branch becomes the task's branch, what the agent left
    uncommitted is committed onto the task's branch, and any other commit only the tree holds
    is kept. (salvaged sha, whether all of it is safe so the tree may go, what was kept)."""
    salvaged, kept_all, kept = "", True, []
    if not (live.worktree and os.path.isdir(live.worktree) and live.env):
        return salvaged, kept_all, kept
    if live.plan is not None:
        # Sandboxed, the agent wrote its tree's HEAD: the task's branch is what it points at
        # again (its commits came out through the branch's shadow alone).
        git_worktree.point_head(live.worktree, live.branch)
    else:
        _adopt(store, live)
    try:
        salvaged = salvage(store, live.tid, f"uncommitted work of session {live.sid[:7]} "
                           f"({live.preset.name})", live.env, skip) or ""
    except GriteError as exc:
        kept_all = False   # keep the work tree: its files are the only copy
        log_line(live.log, f"could not commit what the agent left: {exc.message}")
    try:
        kept = ss.keep_commits(store, live.tid, live.worktree)
        for k in kept:
            log_line(live.log, f"kept {k.commit[:12]} (on no branch) as {k.ref}")
    except GriteError as exc:
        log_line(live.log, f"could not keep the agent's commits: {exc.message}")
    return salvaged, kept_all, kept


def _adopt(store, live: LiveSession) -> None:
    try:
        adopted = ss.adopt_head(store, live.tid, live.worktree)
    except GriteError as exc:
        log_line(live.log, f"could not keep the agent's commits: {exc.message}")
        return
    if adopted:
        log_line(live.log, f"{live.branch} moved to {adopted[:12]}: the agent committed "
                           f"there, off its branch")


PUBLISH_TRIES = 4      # publishes of the log before a lease is let go (each after a fetch)
# Sessions of one witness end in parallel workers, and each publishes the same replica ref:
# two pushes of it at once and the remote refuses the later one. One at a time per process.
_PUBLISHING = threading.Lock()


def publish_log(g: Grite, remote: str, say: Callable[[str], None]) -> bool:
    """Publish the log to the lock remote before a lease is let go, so whoever takes the task
    next sees how its session ended; False when it could not (then the lease is kept, to run
    out by itself: released, it would tell other clones the session ended while they cannot
    see how, and they would wait on a log that never comes)."""
    from git_brat.grite.sync import exchange as sync
    if not remote or remote not in sync.synced_remotes(g.store):
        return True
    error = ""
    with _PUBLISHING:
        for attempt in range(PUBLISH_TRIES):
            try:
                if attempt == 0:
                    pub = sync.publish(g, remote)
                    error = (pub.error or "refused") if pub.status == "failed" else ""
                else:   # refused: the ref moved meanwhile (another process of this clone)
                    res = sync.sync(g, remote)
                    error = "" if res.ok else next(
                        (r.error or (r.published.error if r.published else "")
                         for r in res.remotes), "") or "refused"
            except GriteError as exc:
                error = exc.message
            if not error:
                return True
            time.sleep(0.2 * (attempt + 1))
    say(f"warning: could not publish to {remote}: {error}; the session's lease is kept until "
        f"it runs out")
    return False


def prompt_of(g: Grite, live: LiveSession) -> str:
    try:
        with open(layout.session_prompt(g.store, live.sid), encoding="utf-8") as f:
            return f.read()
    except OSError:
        return ""


def prepare(g: Grite, live: LiveSession, info: dict, cfg: Config,
            engine_version: Callable[[], str]) -> None:
    """(worker) The work tree, the prompt and the engine's command, then setup or the engine."""
    tid, preset, setup = live.tid, live.preset, cfg.witness.setup
    private_dir(os.path.dirname(live.log))   # logs and prompts: 0600 in 0700 directories
    sdir = private_dir(layout.session_dir(g.store, live.sid))
    resumed_branch = make_worktree(g, live)
    refuse_unapproved_settings(g, live)
    board: Board = info["board"]
    task: Entity = info["task"]
    prior: list[Entity] = info["prior"]
    live.env = agent_env(g, preset, live.sid, tid, live.worktree)
    os.makedirs(confine.engine_dir(g.store, live.sid), exist_ok=True)
    write_brief(g, live)
    confine_session(g, live, cfg)
    # What the previous sessions leave this one: a conversation to resume, a reply, a failure.
    reply_id, reply = ss.pending_reply(task, prior)
    last = prior[-1] if prior else None
    resume_id = ""
    if preset.resumes and last is not None and last.get("engine") == preset.name:
        resume_id = last.get("engine_session", "")
        if resume_id and not engines.resume_id_ok(preset, resume_id):
            raise UsageError(f"task {tid}: the conversation to resume, {resume_id!r} (session "
                             f"{last.id} in the log), is not a {preset.name} conversation id: "
                             f"refused (the next attempt starts a fresh conversation)")
    if resume_id and live.plan is not None:
        # A sandbox shows a session its own directory only: aider's history is in the one
        # its conversation began in.
        if resumed := confine.resumed_engine_dir(g.store, resume_id, {s.id for s in prior}):
            live.plan.writable.append(resumed)
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
        commits=g.store.objects.count(live.base, live.branch) if resumed_branch else 0,
        store=g.store, tree=live.start_head,
        engine_reads=live.brief.engine_reads if live.brief else [],
        knowledge=knowledge_for(g, task))
    text = prompt.continuation(pin) if resume_id else prompt.build(pin)
    with open_private(layout.session_prompt(g.store, live.sid), "wb") as f:
        f.write(text.encode("utf-8", "surrogateescape"))
    live.session_uuid = str(uuid.uuid4()) if preset.new_session_args and not resume_id else ""
    live.resume_id = resume_id
    live.inv = engines.invocation(preset, text, live.worktree, sdir, resume_id,
                                  live.session_uuid, trusted=True,
                                  brief=live.brief.brief_file if live.brief else "")
    fields = {"status": "starting", "base": live.base, "start_head": live.start_head,
              "argv": redact.argv(engines.shown_argv(live.inv.argv, text)), "resumed": resume_id,
              "engine_version": engine_version(), "reply_id": reply_id,
              "engine_session": live.session_uuid or resume_id, "sandbox": live.sandbox,
              "confinement": live.confinement}
    live.prepared = fields   # recorded with the pid, in one event, once it runs
    log_line(live.log, f"session {live.sid} task {tid} ({live.title}) engine "
                       f"{preset.name} branch {live.branch} base {live.base[:12]}")
    if setup:
        log_line(live.log, f"setup: {setup}")
        inv = Invocation(["sh", "-c", setup], {}, None, False)
        live.popen, proc = runner.spawn(confined(live, inv), live.worktree, live.log, live.env)
        record_proc(g, live, proc, "setup")
    else:
        spawn_engine(g, live)


def write_brief(g: Grite, live: LiveSession) -> None:
    """(worker) The project's instructions and skills where the session's engine reads them,
    and the agent's git told to ignore them (they are the session's, not the project's work)."""
    live.brief = brief.write(g.store, live.start_head, live.worktree, live.preset,
                             confine.engine_dir(g.store, live.sid))
    path = os.path.join(layout.session_dir(g.store, live.sid), "exclude")
    with open_private(path, "wb") as f:
        f.write(brief.excludes(g.store, live.brief.written).encode("utf-8", "replace"))
    live.env = git_worktree.excludes_env(live.env, path)
    for note in live.brief.refused:
        log_line(live.log, f"brief: not written: {note}")


def knowledge_for(g: Grite, task: Entity) -> str:
    """The knowledge notes for a task's prompt: by its paths and the words of its text."""
    return kb.section(kb.relevant(kb.notes(g), list(task.get("paths", [])),
                                  f"{task.get('title', '')}\n{task.get('body', '')}"))


def briefed(store, live: LiveSession, commit: str | None) -> list[str]:
    """What a salvage of the session's tree (on `commit`) leaves out: what the witness wrote
    there, for this session or for an earlier one, whatever its engine."""
    written = live.brief.written if live.brief else []
    try:
        planted = brief.planted(store, commit, live.preset) if commit else []
    except GriteError:
        planted = []
    return sorted({*written, *planted})


def refuse_unapproved_settings(g: Grite, live: LiveSession) -> None:
    """The engines' own settings files of the tree the session starts from (hooks, MCP
    servers: code whoever pushed wrote) run only once this user approved them as they are.
    What the agent itself commits on its branch afterwards is its own, inside its quarantine."""
    waiting = trust.unapproved_files(g.store, live.base)
    if waiting:
        raise trust.Unapproved(f"the tree of {live.target} at {live.base[:12]} has "
                               f"{trust.files_summary(waiting)}: session refused; review them "
                               f"with `git brat trust`")


def make_worktree(g: Grite, live: LiveSession) -> bool:
    """Make (or reuse) the task's work tree; True when it continues an existing branch."""
    store, path = g.store, live.worktree
    target = store.refs.branch_tip(live.target) or store.objects.rev(live.target) or \
        store.objects.rev("HEAD")
    if target is None:
        raise UsageError(f"the target branch {live.target} does not exist and HEAD has no "
                         f"commit: set refinery.target_branch")
    existing = store.refs.branch_tip(live.branch)
    here = os.path.realpath(path)
    trees = {os.path.realpath(w["worktree"]): w.get("branch", "").removeprefix("refs/heads/")
             for w in git_worktree.listing(store.common_dir)} if os.path.exists(path) else {}
    if here in trees and ss.removal_pending(store, live.tid):
        # A removal that was cut short: the tree is half deleted. Finish it; never salvage it.
        ss.remove_worktree(store, live.tid)
        trees.pop(here)
    elif here in trees:
        if trees[here] == live.branch:
            # A leftover (a salvage that failed, a session recovered elsewhere): keep what is
            # new or changed in it, but no deletion, then put back every file of the branch,
            # so the session starts in a tree that holds its branch and nothing else.
            salvage(store, live.tid, f"work left in {live.branch}'s work tree", live.env or
                    agent_env(g, live.preset, live.sid, live.tid, path),
                    [*live.preset.scratch, *briefed(store, live, existing)], deletions=False)
            git_worktree.restore(path)
        else:
            ss.remove_worktree(store, live.tid)
            trees.pop(here)
    elif ss.removal_pending(store, live.tid):
        ss.remove_worktree(store, live.tid)   # git forgot it first: the files go as well
    elif os.path.exists(path):
        # Not a work tree git knows: keep its files aside rather than delete anything.
        os.replace(path, f"{path}.stale-{int(time.time())}")
    if here not in trees:
        git_worktree.add(store.toplevel() or store.git_dir, path, branch=live.branch,
                         start=None if existing else target, hooks=True)
    live.base = (store.objects.merge_base(target, live.branch) or target) if existing else target
    live.start_head = store.refs.branch_tip(live.branch) or target
    return bool(existing)


def spawn_engine(g: Grite, live: LiveSession) -> None:
    live.phase = "engine"
    log_line(live.log, "engine: " + shlex.join(engines.shown_argv(
        live.inv.argv, prompt_of(g, live))))
    live.engine_offset = os.path.getsize(live.log)
    live.popen, proc = runner.spawn(confined(live, live.inv), live.worktree, live.log, live.env)
    record_proc(g, live, proc, "running")


def confine_session(g: Grite, live: LiveSession, cfg: Config) -> None:
    """(worker) Under witness.sandbox = bwrap: the session's sandbox, its branch's shadow,
    and the gate its agent's task commands go through."""
    live.sandbox = confine.mode(cfg)
    if live.sandbox != "bwrap":
        return
    if sandbox.bwrap_path() is None:
        raise UsageError("witness.sandbox = \"bwrap\" but `bwrap` is not on PATH: install "
                         "bubblewrap (apt-get install bubblewrap), or set witness.sandbox to "
                         "\"auto\" or \"none\"")
    live.plan = confine.plan(g.store, live.sid, live.tid, live.worktree, live.preset, cfg,
                             live.env, live.start_head)
    live.gate = gate.Gate(g.store, live.sid, live.tid, gate.socket_path())
    live.env[gate.ENV] = live.gate.path
    live.plan.protect.append(os.path.dirname(live.gate.path))   # reachable, read-only
    live.confinement = sandbox.describe(live.plan)
    log_line(live.log, f"sandbox: {live.confinement}")


def confined(live: LiveSession, inv: Invocation) -> Invocation:
    if live.plan is None:
        return inv
    plan = msgspec.structs.replace(live.plan, reachable=[
        *live.plan.reachable, *sandbox.named_paths([*inv.argv, *sandbox.without_agents(
            inv.env).values()])])
    if plan.network == "outbound":   # the preset's own endpoint too
        plan.forward = sorted({*plan.forward, *sandbox.loopback_ports(inv.env)})
    return Invocation(sandbox.argv(plan, inv.argv, sandbox.bwrap_path() or "bwrap"),
                      inv.env, inv.stdin, inv.resumed)


def unconfine(store, live: LiveSession) -> None:
    """(worker, its processes gone) Close the gate, and bring the agent's branch back from
    its shadow before anything reads or commits to it."""
    if live.gate is not None:
        live.gate.close()
        live.gate = None
    if live.plan is not None:
        try:
            note = confine.restore_branch(store, live.sid, live.tid, live.branch,
                                          live.start_head)
        except (GriteError, OSError) as exc:   # the shadow stays: recovery tries again
            note = f"could not move {live.branch} to the session's commits: {exc}"
        if note:
            log_line(live.log, note)


def record_proc(g: Grite, live: LiveSession, proc: process.Proc, status: str) -> None:
    # This clone's record first: if we die before the event lands, recovery still finds the
    # agent; and recovery signals only what this record names, never what the log says.
    rec = ss.read_local(g.store, live.sid, live.tid)
    if rec is not None:
        rec.pid, rec.pid_start = proc.pid, proc.start
        ss.write_local(g.store, rec)
    fields = {**live.prepared, "status": status, "pid": proc.pid, "pid_start": proc.start,
              "phase": live.phase}
    live.prepared = {}
    g.append([Draft(live.sid, ev.SetFields(fields))],
             summary(f"session.{live.phase}", live.sid))


__all__ = ["LiveSession", "Phase", "TAIL_LINES", "agent_env", "salvage", "save_work",
           "publish_log", "stop_strays", "prepare", "make_worktree",
           "spawn_engine", "record_proc", "log_line", "prompt_of", "confine_session",
           "confined", "unconfine"]
