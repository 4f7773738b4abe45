"""A snapshot's cold part: fetched after a fresh clone is ready, then merged into its cache.

A clone cut at a snapshot adopts the snapshot's hot rows and is ready; the settled rows
(`snapshot.ColdPart`) stay on the remote until `init` fetches them in the background, or the
first command that needs them does (see Cache.state). Nothing answers from a part.
"""

from __future__ import annotations

import os
import subprocess
import sys

from git_brat.grite.gitstore import Store

SETTING = "grite.fetchCold"
WHEN = ("background", "now", "when-needed")   # its values; the first is the default
LOG = "cold.log"   # under .git/grite/: what the background fetch said
PID = "cold.pid"   # under .git/grite/: the background fetch's process, while it runs


def when(store: Store) -> str:
    """grite.fetchCold: when a fresh clone fetches its snapshot's cold part: `background`
    (after `init` returns, in a process of its own), `now` (before it returns) or
    `when-needed` (by the first command that needs it)."""
    from git_brat.grite.errors import GriteError
    value = store.config_get(SETTING)
    if value is None:
        return WHEN[0]
    if value.lower() not in WHEN:
        raise GriteError(f"{SETTING} must be one of {', '.join(WHEN)}, not {value!r}")
    return value.lower()


def after_first_fetch(g) -> None:
    """Once a first fetch left the cache waiting for a cold part: fetch it as grite.fetchCold
    says."""
    if g.cache.cold_pending() is None:
        return
    how = when(g.store)
    if how == "now" or (how == "background" and start_in_background(g.store) is None):
        g.state(refresh=True)   # (fetched and merged here: see Cache.state)


def fetch(store: Store, commit: str, remote: str) -> str | None:
    """Bring the cold part's commit here, from `remote` or else any synced remote; None once
    it is here, else why not (the last remote's answer)."""
    from git_brat.grite import snapshot, sync
    entry = snapshot.COLD_DB.decode()
    if store.has_entry(commit, entry):
        return None
    remotes = [r for r in dict.fromkeys([remote, *sync.synced_remotes(store)]) if r]
    why = "no synced remote to fetch it from"
    for r in remotes:
        # By id: it is a parent of the remote's snapshot commit, so no ref names it (protocol
        # v2 serves any object the remote has; git 2.18 and later speak it).
        proc = store.fetch(r, [commit], sync.transport_env(), sync.net_timeout(), keep_pack=True)
        if proc.returncode == 0 and store.has_entry(commit, entry):
            return None
        why = f"{r}: {sync.git_error(proc)}" if proc.returncode else f"{r} sent no such commit"
    return why


def start_in_background(store: Store) -> int | None:
    """Start `git grite fetch-cold --quiet` detached (its pid is in .git/grite/cold.pid until
    it ends; what it said in cold.log); None if it could not be started."""
    from git_brat import package_path
    from git_brat.grite.gitstore import clean_env
    try:
        with open(os.path.join(store.grite_dir, LOG), "ab") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "git_brat.grite", "fetch-cold", "--quiet", "--pid-file"],
                cwd=store.toplevel() or store.git_dir, stdin=subprocess.DEVNULL, stdout=log,
                stderr=log, start_new_session=True,
                env=clean_env({"PYTHONPATH": package_path(), "GIT_DIR": store.git_dir}))
    except OSError:
        return None
    from git_brat.grite.files import atomic_write
    atomic_write(pid_path(store), f"{proc.pid}\n".encode())   # (before it can end: see hold_pid_file)
    return proc.pid


def pid_path(store: Store) -> str:
    return os.path.join(store.grite_dir, PID)


def hold_pid_file(store: Store) -> None:
    """cold.pid (written by whoever started this process) is removed when it exits."""
    import atexit
    path = pid_path(store)

    def forget() -> None:
        try:
            with open(path, encoding="ascii") as f:
                if f.read().strip() == str(os.getpid()):
                    os.unlink(path)
        except OSError:
            pass
    atexit.register(forget)
