"""A session the witness supervises: its state in memory, its work tree, the agent's environment
and launchers, and starting setup or the engine (the log holds its record)."""

from __future__ import annotations

import os
import shlex
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from typing import Callable, Literal

from git_brat import process
from git_brat.git import worktree as git_worktree
from git_brat.brat import engines
from git_brat.brat import layout
from git_brat.brat import sessions as ss
from git_brat.brat.board import Board
from git_brat.brat.engines import Invocation, Preset, runner
from git_brat.brat.witness import prompt
from git_brat.brat.witness.verdict import StopReason
from git_brat.errors import UsageError
from git_brat.grite import locks
from git_brat.grite.issues import summary
from git_brat.grite.log.wal import Draft
from git_brat.grite.model import events as ev
from git_brat.grite.model.state import Entity
from git_brat.grite.repo import Grite

TAIL_LINES = 30
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


def log_line(path: str, text: str) -> None:
    with open(path, "ab") as f:
        f.write(f"[brat] {text}\n".encode("utf-8", "replace"))


def salvage(store, worktree: str, what: str, env: dict, skip: list[str] = ()) -> str | None:
    """Commit whatever an agent left uncommitted, so no work is lost; its sha, or None."""
    if not os.path.isdir(worktree):
        return None
    return git_worktree.commit_all(worktree, f"brat: {what}", env, skip)


def prompt_of(g: Grite, live: LiveSession) -> str:
    try:
        with open(layout.session_prompt(g.store, live.sid), encoding="utf-8") as f:
            return f.read()
    except OSError:
        return ""


def prepare(g: Grite, live: LiveSession, info: dict, setup: str,
            engine_version: Callable[[], str]) -> None:
    """(worker) The work tree, the prompt and the engine's command, then setup or the engine."""
    tid, preset = live.tid, live.preset
    os.makedirs(os.path.dirname(live.log), exist_ok=True)
    sdir = layout.session_dir(g.store, live.sid)
    os.makedirs(sdir, exist_ok=True)
    resumed_branch = make_worktree(g, live)
    board: Board = info["board"]
    task: Entity = info["task"]
    prior: list[Entity] = info["prior"]
    live.env = agent_env(g, preset, live.sid, tid, live.worktree)
    # What the previous sessions leave this one: a conversation to resume, a reply, a failure.
    reply_id, reply = ss.pending_reply(task, prior)
    last = prior[-1] if prior else None
    resume_id = ""
    if preset.resumes and last is not None and last.get("engine") == preset.name:
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
        commits=g.store.objects.count(live.base, live.branch) if resumed_branch else 0)
    text = prompt.continuation(pin) if resume_id else prompt.build(pin)
    with open(layout.session_prompt(g.store, live.sid), "w", encoding="utf-8") as f:
        f.write(text)
    live.session_uuid = str(uuid.uuid4()) if preset.new_session_args and not resume_id else ""
    live.inv = engines.invocation(preset, text, live.worktree, sdir, resume_id,
                                  live.session_uuid)
    fields = {"status": "starting", "base": live.base, "start_head": live.start_head,
              "argv": engines.shown_argv(live.inv.argv, text), "resumed": resume_id,
              "engine_version": engine_version(), "reply_id": reply_id,
              "engine_session": live.session_uuid or resume_id}
    live.prepared = fields   # recorded with the pid, in one event, once it runs
    log_line(live.log, f"session {live.sid} task {tid} ({live.title}) engine "
                       f"{preset.name} branch {live.branch} base {live.base[:12]}")
    if setup:
        log_line(live.log, f"setup: {setup}")
        inv = Invocation(["sh", "-c", setup], {}, None, False)
        live.popen, proc = runner.spawn(inv, live.worktree, live.log, live.env)
        record_proc(g, live, proc, "setup")
    else:
        spawn_engine(g, live)


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
    if here in trees:
        if trees[here] == live.branch:
            salvage(store, path, f"work left in {live.branch}'s work tree", live.env or
                    agent_env(g, live.preset, live.sid, live.tid, path),
                    live.preset.scratch)
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


def spawn_engine(g: Grite, live: LiveSession) -> None:
    live.phase = "engine"
    log_line(live.log, "engine: " + shlex.join(engines.shown_argv(
        live.inv.argv, prompt_of(g, live))))
    live.engine_offset = os.path.getsize(live.log)
    live.popen, proc = runner.spawn(live.inv, live.worktree, live.log, live.env)
    record_proc(g, live, proc, "running")


def record_proc(g: Grite, live: LiveSession, proc: process.Proc, status: str) -> None:
    # The pid file first: if we die before the event lands, recovery still finds the agent.
    with open(layout.session_pid(g.store, live.sid), "w") as f:
        f.write(f"{proc.pid} {proc.start}\n")
    fields = {**live.prepared, "status": status, "pid": proc.pid, "pid_start": proc.start,
              "phase": live.phase}
    live.prepared = {}
    g.append([Draft(live.sid, ev.SetFields(fields))],
             summary(f"session.{live.phase}", live.sid))


__all__ = ["LiveSession", "Phase", "TAIL_LINES", "agent_env", "salvage", "prepare", "make_worktree",
           "spawn_engine", "record_proc", "log_line", "prompt_of"]
