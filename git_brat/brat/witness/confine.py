"""A session's sandbox: what its agent may write (its tree, its branch, the object store), the
shadow of its branch ref it commits to, and that ref brought back when the session ends."""

from __future__ import annotations

import os
import re
import shutil

from git_brat.brat import layout
from git_brat.brat.config import Config
from git_brat.brat.engines import Preset
from git_brat.brat.engines import sandbox
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


def engine_dir(store, sid: str) -> str:
    """The session's writable files outside its tree (an engine's history, e.g. aider's)."""
    return os.path.join(layout.session_dir(store, sid), "engine")


def plan(store, sid: str, tid: str, worktree: str, preset: Preset, cfg: Config,
         env: dict[str, str], tip: str) -> sandbox.Plan:
    """The sandbox of session sid: its branch's shadow made, holding `tip`."""
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
    objects = os.path.join(common, "objects")
    state = sandbox.state_paths(preset.state, env)
    writable = [worktree, objects, engine_dir(store, sid), *state]
    if admin:
        writable.append(admin)
    protect = [os.path.join(objects, "pack"), os.path.join(objects, "info"),
               os.path.join(worktree, ".git")]
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
        shadow=[(os.path.join(shadow, "heads"), heads), (os.path.join(shadow, "logs"), logs)],
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
    """The commit the agent left its branch at, when it is one (the file is the agent's: any
    text at all may be in it)."""
    path = os.path.join(shadow_dir(store, sid), "heads", layout.check_id(tid, "task"))
    try:
        with open(path, "rb") as f:
            text = f.read(100).decode("ascii", "replace").strip()
    except OSError:
        return None
    if not SHA.fullmatch(text) or not store.objects.is_commit(text):
        return None
    return text


def restore_branch(store, sid: str, tid: str, branch: str, start: str) -> str:
    """(after the session's processes are gone) Move the real branch to where the agent left
    its shadow, if it still is where the session found it; a note for the log ("" if none)."""
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
    if tip and tip != now:
        if now == start and store.refs.cas(name, now.encode() if now else None, tip.encode(),
                                           b"brat: the sandboxed session's commits"):
            note = f"{branch} moved to {tip[:12]} (the session's commits)"
        else:
            note = (f"{branch} moved outside the session (now {str(now)[:12]}): the agent's "
                    f"tip {tip[:12]} was not applied")
    shutil.rmtree(shadow_dir(store, sid), ignore_errors=True)
    return note


__all__ = ["mode", "plan", "secrets", "restore_branch", "shadow_dir", "engine_dir", "shadow_tip"]
