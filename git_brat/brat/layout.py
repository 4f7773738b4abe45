"""Every path under .git/brat/: this clone's harness files (work trees, logs, pid files), never shared."""

from __future__ import annotations

import glob
import os
import re

from git_brat import approvals
from git_brat.errors import UsageError
from git_brat.git.store import Store

ROLES = ("witness", "refinery", "deacon")
# Task, session and merge ids come from the log, which other clones write: a path is built from
# one only once it is known to be an entity id (so "../x" can never name a file of ours).
_ENTITY_ID = re.compile(r"[0-9a-f]{32}")


def check_id(eid: str, what: str) -> str:
    """The id itself, once it is an entity id (32 hex digits); a clear error otherwise."""
    if not isinstance(eid, str) or not _ENTITY_ID.fullmatch(eid):
        raise UsageError(f"{what} id {eid!r} is not an entity id (32 hex digits): no path under "
                         f".git/brat/ is made from it")
    return eid


def root(store: Store) -> str:
    """.git/brat/ of the repository (the common directory: shared by its linked work trees)."""
    return os.path.join(store.common_dir, "brat")


def ensure_root(store: Store) -> str:
    path = root(store)
    os.makedirs(path, exist_ok=True)
    return path


# -- the witness's sessions --------------------------------------------------------------

def worktrees(store: Store) -> str:
    """Where the session work trees live, one per task (and nowhere else)."""
    return os.path.join(root(store), "worktrees")


def worktree(store: Store, tid: str) -> str:
    return os.path.join(worktrees(store), check_id(tid, "task"))


def sessions(store: Store) -> str:
    return os.path.join(root(store), "sessions")


def session_log(store: Store, sid: str) -> str:
    """A session's output (setup, engine), as `git brat session log` shows it."""
    return os.path.join(sessions(store), f"{check_id(sid, 'session')}.log")


def session_dir(store: Store, sid: str) -> str:
    """Per-session files outside the work tree (the prompt, an engine's history files)."""
    return os.path.join(sessions(store), check_id(sid, "session"))


def session_pid(store: Store, sid: str) -> str:
    """The agent's pid, written before its session records it (so recovery finds it)."""
    return os.path.join(session_dir(store, sid), "pid")


def session_record(store: Store, sid: str) -> str:
    """This clone's own record of a session it started (task, work tree, witness and agent
    processes): the only source of what recovery signals, commits in or reads."""
    return os.path.join(session_dir(store, sid), "local.json")


def removal_mark(store: Store, tid: str) -> str:
    """Written before a task's work tree is removed, gone once it is: a tree with this mark is
    half deleted (the removal was interrupted), never an agent's work."""
    return os.path.join(root(store), "removing", check_id(tid, "task"))


def kept_ref(tid: str, n: int) -> str:
    """Where a commit found in a task's work tree that no branch holds is kept."""
    return f"refs/brat/kept/{check_id(tid, 'task')}/{int(n)}"


def session_prompt(store: Store, sid: str) -> str:
    return os.path.join(session_dir(store, sid), "prompt.txt")


def session_logs(store: Store) -> list[tuple[str, str]]:
    """(name, path) of every log in the sessions folder, sorted: a session's log is named by
    its id; the deacon prunes any old log there, whatever its name."""
    return [(os.path.basename(p)[:-4], p)
            for p in sorted(glob.glob(os.path.join(sessions(store), "*.log")))]


def bin_dir(store: Store) -> str:
    """git-brat and git-grite launchers of this installation, first on the agents' PATH."""
    return os.path.join(root(store), "bin")


# -- the refinery ----------------------------------------------------------------------------

def refinery_worktree(store: Store) -> str:
    return os.path.join(root(store), "refinery")


def merge_log(store: Store, mid: str) -> str:
    return os.path.join(root(store), "merges", f"{check_id(mid, 'merge')}.log")


def refinery_kick(store: Store) -> str:
    """Touched to ask a running refinery for a pass now."""
    return os.path.join(root(store), "refinery.kick")


def refinery_check(store: Store) -> str:
    """The pid file of the check the refinery runs (so a stop can end it)."""
    return os.path.join(root(store), "refinery.check")


def hub_config(store: Store) -> str:
    """A bare hub's config (it has no work tree to hold .brat/config.toml)."""
    return os.path.join(root(store), "config.toml")


def trust(store: Store) -> str:
    """Which values of the committed config's code-running settings this user approved."""
    return os.path.join(store.common_dir, approvals.RECORD)


def local_config(store: Store) -> str:
    """This clone's own settings, over the committed ones and never synced."""
    return os.path.join(root(store), "config.local.toml")


# -- the roles' pid files and logs, the deacon's stamp, the mayor's exchanges ----------------

def _role(role: str) -> str:
    if role not in ROLES:
        raise UsageError(f"no role {role!r}: one of {', '.join(ROLES)}")
    return role


def pid_file(store: Store, role: str) -> str:
    return os.path.join(root(store), f"{_role(role)}.pid")


def role_log(store: Store, role: str) -> str:
    return os.path.join(root(store), f"{_role(role)}.log")


def inbox_seen(store: Store) -> str:
    """The needs-you items this clone has delivered or seen claimed (local, never synced)."""
    return os.path.join(root(store), "inbox-seen.json")


def inbox_pruned(store: Store) -> str:
    """Touched when the deacon last pruned the inbox's delivery claims."""
    return os.path.join(root(store), "inbox-pruned")


def inbox_sinks(store: Store) -> str:
    """When this clone first saw each inbox sink (local): a sink starts from then."""
    return os.path.join(root(store), "inbox-sinks.json")


def deacon_stamp(store: Store) -> str:
    """When the deacon last ran and what each duty did (local: every clone runs its own)."""
    return os.path.join(root(store), "deacon.json")


def mayor(store: Store) -> str:
    """The mayor's exchanges of this clone: <n>/ (prompt, engine log) and <n>.txt (the answer)."""
    return os.path.join(root(store), "mayor")


def mayor_exchange(store: Store, n: int) -> str:
    return os.path.join(mayor(store), str(int(n)))


def mayor_answer(store: Store, n: int) -> str:
    return os.path.join(mayor(store), f"{int(n)}.txt")


__all__ = ["root", "ensure_root", "check_id", "worktrees", "worktree", "sessions", "session_log",
           "session_dir", "session_pid", "session_record", "removal_mark", "kept_ref",
           "session_prompt", "session_logs", "bin_dir",
           "refinery_worktree", "merge_log", "refinery_kick", "refinery_check", "hub_config",
           "trust", "local_config",
           "pid_file", "role_log", "deacon_stamp", "mayor", "mayor_exchange", "mayor_answer"]
