"""Sandboxes as data: the bubblewrap argv that confines a session or a check (binds, hides, namespaces).

No git here: callers name the paths (a work tree, the object store, a branch's shadow ref
directory); this module only turns them into one `bwrap` command line, in an order where the
narrower mount always lands on top of the wider one.
"""

from __future__ import annotations

import os
import shutil
import sys
from typing import Iterable, Mapping

import msgspec

import git_brat

MODES = ("auto", "bwrap", "none")
NETWORKS = ("open", "none")
# Never readable inside a sandbox, whatever the config says: keys and the keyring.
ALWAYS_HIDDEN = ("~/.ssh", "~/.gnupg")


class Plan(msgspec.Struct, kw_only=True):
    """What one sandbox sees. Everything not named is the host's, read-only."""
    writable: list[str] = []          # bound read-write at the same path
    protect: list[str] = []           # read-only again, inside a writable path
    hide: list[str] = []              # unreadable: an empty read-only dir, or /dev/null
    shadow: list[tuple[str, str]] = []   # (host dir, where it appears) read-write
    shadow_ro: list[tuple[str, str]] = []   # (host dir, where it appears) read-only
    reachable: list[str] = []         # host paths that must stay visible under a private tmp
    network: bool = True
    private_tmp: bool = True


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


def effective(mode: str, has_bwrap: bool | None = None) -> str:
    """What mode means here: "bwrap" or "none" (auto: bwrap when it is on PATH)."""
    if mode == "auto":
        has = bwrap_path() is not None if has_bwrap is None else has_bwrap
        return "bwrap" if has else "none"
    return mode


def unconfined_warning(mode: str) -> str:
    """What `status` and `engine list` say once when auto finds no bwrap ("" otherwise)."""
    if mode == "auto" and bwrap_path() is None:
        return ("witness.sandbox = \"auto\" and `bwrap` is not on PATH: sessions run "
                "unconfined (install bubblewrap, or set witness.sandbox = \"none\" to say so)")
    return ""


def _home_path(path: str, env: Mapping[str, str]) -> str:
    if path == "~" or path.startswith("~/"):
        home = env.get("HOME") or os.path.expanduser("~")
        return os.path.join(home, path[2:]) if path != "~" else home
    return path


def expand(entry: str, env: Mapping[str, str]) -> str | None:
    """A preset's state path: "~/x", "$VAR" or "$VAR/x" (None when VAR is unset), or
    "$VAR|~/x" (the first that is set)."""
    for alt in entry.split("|"):
        if alt.startswith("$"):
            name, _, rest = alt[1:].partition("/")
            value = env.get(name, "")
            if not value:
                continue
            alt = os.path.join(value, rest) if rest else value
        alt = _home_path(alt, env)
        if os.path.isabs(alt):
            return os.path.normpath(alt)
    return None


def state_paths(entries: Iterable[str], env: Mapping[str, str]) -> list[str]:
    """The engine's own state paths: an entry ending in "/" is a directory (made when missing,
    so the engine finds it writable), any other a file (bound only when it exists: a file
    cannot be made writable in a read-only directory)."""
    out = []
    for entry in entries:
        is_dir = entry.endswith("/")
        path = expand(entry.rstrip("/"), env)
        if path is None:
            continue
        if is_dir and not os.path.isdir(path):
            try:
                os.makedirs(path, exist_ok=True)
            except OSError:
                continue
        if os.path.lexists(path):
            out.append(path)
    return out


def hidden_paths(extra: Iterable[str], env: Mapping[str, str]) -> list[str]:
    return [p for p in (expand(e, env) for e in (*ALWAYS_HIDDEN, *extra)) if p]


def runtime_paths(env: Mapping[str, str]) -> list[str]:
    """What an engine needs to stay reachable wherever it lives: PATH, HOME, this Python."""
    out = [p for p in env.get("PATH", "").split(os.pathsep) if os.path.isabs(p)]
    out += [env.get("HOME", ""), sys.prefix, sys.base_prefix,
            os.path.dirname(os.path.dirname(os.path.realpath(sys.executable))),
            # this installation's own code: the agents' `git brat` launchers import it from
            # here, which may be a checkout or a virtualenv under /tmp (CI's are)
            os.path.dirname(os.path.dirname(os.path.realpath(git_brat.__file__)))]
    for p in list(out):
        if p and os.path.exists(p):
            out.append(os.path.realpath(p))
    for key in ("VIRTUAL_ENV", "PYTHONPATH"):
        out += [p for p in env.get(key, "").split(os.pathsep) if os.path.isabs(p)]
    return [p for p in out if p]


def named_paths(values: Iterable[str]) -> list[str]:
    """Existing absolute paths an engine is handed (its argv, its environment's values, each
    split like PATH): a config file under /tmp must stay readable in a private tmp."""
    tmp = os.path.realpath("/tmp")
    out = []
    for value in values:
        if not isinstance(value, str) or "/" not in value or len(value) > 4096:
            continue
        for part in value.split(os.pathsep):
            if os.path.isabs(part) and os.path.realpath(part) not in ("/", tmp) and \
                    os.path.exists(part):
                out.append(part)
    return out


def _depth_sorted(paths: Iterable[str]) -> list[str]:
    """The outermost of paths bound alike (same path outside and in), shallowest first.

    A path inside one already bound is visible through it, and bound again it can fail: a
    venv's bin/python is a symlink, and bwrap then cannot create the mount point through it
    inside the read-only bind of the venv ("Can't create file at …/bin/python")."""
    unique = set()
    for p in paths:
        if p and os.path.isabs(p):   # "" would be "." to bwrap: never a mount
            unique.add(os.path.normpath(p))
    out: list[str] = []
    for p in sorted(unique, key=lambda p: (p.count(os.sep), p)):
        if not any(p.startswith(q.rstrip(os.sep) + os.sep) for q in out):
            out.append(p)
    return out


def argv(plan: Plan, command: list[str], bwrap: str = "bwrap") -> list[str]:
    """The bwrap command line that runs `command` in the sandbox `plan` describes.

    The pid namespace is the session: its first process dying (bwrap killed, or its parent
    gone) takes every process in it along, `setsid` children included. The command is that
    first process itself (--as-pid-1): with bwrap's own init in between, bwrap exits before
    reaping it, and the orphan lingers as a zombie in the session's process group until the
    system's init reaps it (seconds, in a container), which a session's end waits out."""
    out = [bwrap, "--die-with-parent", "--unshare-pid", "--as-pid-1", "--unshare-ipc",
           "--unshare-uts",
           "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    if not plan.network:
        out.append("--unshare-net")
    if plan.private_tmp:
        out += ["--tmpfs", "/tmp"]
        tmp = os.path.realpath("/tmp") + os.sep
        # A repository, a HOME or a venv under /tmp stays where it was (read-only).
        back = [p for p in plan.reachable if os.path.realpath(p).startswith(tmp)
                or p.startswith("/tmp/")]
        for p in _depth_sorted(back):
            out += ["--ro-bind-try", p, p]
    for p in _depth_sorted(plan.writable):
        out += ["--bind-try", p, p]
    for src, dest in plan.shadow:
        out += ["--bind", src, dest]
    for src, dest in plan.shadow_ro:
        out += ["--ro-bind", src, dest]
    for p in _depth_sorted(plan.protect):
        out += ["--ro-bind-try", p, p]
    for p in _depth_sorted(plan.hide):
        if os.path.isdir(p):
            out += ["--tmpfs", p, "--remount-ro", p]
        elif os.path.lexists(p):
            out += ["--ro-bind", "/dev/null", p]
    return [*out, "--", *command]


__all__ = ["Plan", "MODES", "NETWORKS", "argv", "effective", "bwrap_path", "expand",
           "state_paths", "hidden_paths", "runtime_paths", "unconfined_warning",
           "named_paths"]
