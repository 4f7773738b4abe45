"""A session's sandbox: what its agent may write (its tree, its branch's shadow, an object
directory of its own), and its branch brought back, through the witness, when the session ends.

The session is a quarantine whose only way out is its branch: the agent commits to a shadow of
`brat/<task>` and into a private object directory (the shared store is a read-only alternate);
at the end the witness takes in, verified, the objects reachable from the shadow's commit, and
moves `brat/<task>`, and nothing else, onto it by compare-and-swap. Whatever the agent's work
tree's HEAD names is never followed."""

from __future__ import annotations

import os
import re
import shutil

from git_brat.brat import layout
from git_brat.brat.config import Config
from git_brat.brat.engines import Preset
from git_brat.brat.engines import sandbox
from git_brat.errors import GriteError
from git_brat.git import quarantine
from git_brat.git import worktree as git_worktree

SHA = re.compile(r"[0-9a-f]{40}")


def mode(cfg: Config) -> str:
    """The sandbox sessions run in here: "bwrap" or "none"."""
    return sandbox.effective(cfg.witness.sandbox)


def shadow_dir(store, sid: str) -> str:
    """Where a sandboxed session's branch ref really lives while it runs: refs are files, and
    `git commit` moves one by renaming a .lock beside it, so the agent gets a directory of its
    own at refs/heads/brat/ holding its branch alone (and one for the branch's reflog)."""
    return os.path.join(layout.session_dir(store, sid), "shadow")


def private_objects(store, sid: str) -> str:
    """The session's own object directory: in the sandbox it is the repository's objects/,
    so everything its agent's git writes goes there."""
    return os.path.join(layout.session_dir(store, sid), "objects")


def engine_dir(store, sid: str) -> str:
    """The session's writable files outside its tree (an engine's history, e.g. aider's)."""
    return os.path.join(layout.session_dir(store, sid), "engine")


def resumed_engine_dir(store, resume_id: str, task_sessions: set[str]) -> str:
    """The engine files of the session a conversation resumed from a directory lives in
    (aider's history: its resume id is that session's directory), when it is the directory
    here of one of the task's own sessions: the resuming session writes them on, as the one
    that wrote them did. Any other path (the id comes from the log, which any replica writes;
    another task's history is not this session's to write): ""."""
    sid = os.path.basename(resume_id.rstrip("/"))
    if not re.fullmatch(r"[0-9a-f]{32}", sid) or sid not in task_sessions:
        return ""
    if os.path.realpath(resume_id) != os.path.realpath(layout.session_dir(store, sid)):
        return ""
    found = engine_dir(store, sid)
    return found if os.path.isdir(found) and not os.path.islink(found) else ""


def plan(store, sid: str, tid: str, worktree: str, preset: Preset, cfg: Config,
         env: dict[str, str], tip: str) -> sandbox.Plan:
    """The sandbox of session sid: its branch's shadow made, holding `tip`, and its private
    object directory, which the agent sees as the repository's objects/ (git's quarantine for
    pushes, by mounts rather than GIT_OBJECT_DIRECTORY, which would follow the agent's git
    into every repository it makes or clones)."""
    common = os.path.realpath(store.common_dir)
    heads = os.path.join(common, "refs", "heads", "brat")
    logs = os.path.join(common, "logs", "refs", "heads", "brat")
    shadow = shadow_dir(store, sid)
    if os.path.lexists(shadow):
        shutil.rmtree(shadow)
    for d in (heads, logs, os.path.join(shadow, "heads"), os.path.join(shadow, "logs"),
              engine_dir(store, sid)):
        os.makedirs(d, exist_ok=True)
    with open(os.path.join(shadow, "heads", tid), "w") as f:
        f.write(tip + "\n")
    admin = git_worktree.private_git_dir(worktree) or ""
    private = private_objects(store, sid)
    quarantine.make_private_store(private, common)
    state = sandbox.state_paths(preset.state, env)
    # The shared objects/ is not writable: the agent reads it through as an alternate.
    writable = [worktree, engine_dir(store, sid), *state]
    if admin:
        writable.append(admin)
    protect = [os.path.join(worktree, ".git")]
    if admin:
        protect += [os.path.join(admin, "commondir"), os.path.join(admin, "gitdir")]
    # Of .git/brat/ (hidden whole: the board's token, the trust file, other sessions' logs
    # and prompts) the session sees its own files and the launchers on its PATH, read-only.
    protect += [os.path.realpath(layout.session_dir(store, sid)),
                os.path.realpath(layout.bin_dir(store))]
    top = store.toplevel() or ""
    network = sandbox.network_mode(cfg.witness.sandbox_network)
    return sandbox.Plan(
        writable=writable, protect=protect,
        hide=secrets(store, cfg, env),
        shadow=[(os.path.join(shadow, "heads"), heads), (os.path.join(shadow, "logs"), logs),
                (private, os.path.join(common, "objects"))],
        shadow_ro=[(os.path.join(common, "objects"),
                    os.path.join(common, "objects", quarantine.SHARED))],
        reachable=[*sandbox.runtime_paths(env),
                   *sandbox.named_paths(sandbox.without_agents(env).values()), common,
                   top, worktree, *state],
        network=network, userns=sandbox.user_namespaces(),
        forward=sandbox.loopback_ports(env) if network == "outbound" else [])


def secrets(store, cfg: Config, env: dict[str, str]) -> list[str]:
    """What no sandbox of this repository may read: the user's keys and agent sockets, the
    replica's signing keys, and .git/brat/ (board token and log, trust file, sessions)."""
    return sandbox.secrets(cfg.witness.sandbox_hide, env,
                           os.path.realpath(store.common_dir), layout.root(store))


def shadow_tip(store, sid: str, tid: str) -> str | None:
    """The commit id the agent left its branch's shadow at, when it reads as one (the file is
    the agent's: any text at all may be in it; the commit itself may be in the session's own
    object directory only, not taken in yet)."""
    path = os.path.join(shadow_dir(store, sid), "heads", layout.check_id(tid, "task"))
    try:
        with open(path, "rb") as f:
            text = f.read(100).decode("ascii", "replace").strip()
    except OSError:
        return None
    return text if SHA.fullmatch(text) else None


def restore_branch(store, sid: str, tid: str, branch: str, start: str) -> str:
    """(after the session's processes are gone) Take in, verified, the objects of the commit
    the agent left its branch's shadow at, and move the real branch there if it still is where
    the session found it; a note for the log ("" if none). Objects that do not verify move
    nothing (the session's directory is kept, to be looked at)."""
    try:
        layout.check_id(sid, "session")
    except Exception:
        return ""
    if not os.path.isdir(shadow_dir(store, sid)):
        return ""
    tip = shadow_tip(store, sid, tid)
    note = ""
    name = f"refs/heads/{branch}".encode()
    now = store.refs.branch_tip(branch)
    private = private_objects(store, sid)
    if tip and tip != now:
        try:
            if os.path.isdir(private):
                quarantine.take_in(store.common_dir, private, tip, [start, now or ""])
            if not store.objects.is_commit(tip):
                raise GriteError(f"{tip[:12]} is not a commit")
        except GriteError as exc:
            note = (f"{branch} left at {str(now)[:12]}: the agent's commit {tip[:12]} was "
                    f"refused ({exc.message})")
            tip = None
    if tip and tip != now:
        if now == start and store.refs.cas(name, now.encode() if now else None, tip.encode(),
                                           b"brat: the sandboxed session's commits"):
            note = f"{branch} moved to {tip[:12]} (the session's commits)"
        else:
            note = (f"{branch} moved outside the session (now {str(now)[:12]}): the agent's "
                    f"tip {tip[:12]} was not applied")
    if not note.startswith(f"{branch} left at"):
        shutil.rmtree(private, ignore_errors=True)
    shutil.rmtree(shadow_dir(store, sid), ignore_errors=True)
    return note


__all__ = ["mode", "plan", "secrets", "restore_branch", "shadow_dir", "engine_dir", "shadow_tip",
           "private_objects"]
