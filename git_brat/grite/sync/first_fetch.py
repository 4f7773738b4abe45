"""A clone's first fetch of a remote's grite refs: cut at the remote's best snapshot when it can.

Deepened to whole history on demand (`git grite deepen`); the snapshot's cold part is fetched
after it as grite.fetchCold says (`background`: a process of its own).
"""

from __future__ import annotations

import os

from git_brat import process
from git_brat.git.run import environment
from git_brat.git.store import Store
from git_brat.grite.cache import cold
from git_brat.grite.log.cut import SNAPSHOTS, enabled
from git_brat.grite.log.refs import grite_dir, is_log_ref, log_tips

LOG = "cold.log"   # under .git/grite/: what the background fetch said
PID = "cold.pid"   # under .git/grite/: the background fetch's process, while it runs


def first_fetch(store: Store, remote: str, refspec: str, env: dict, timeout: float):
    """The first fetch of a remote's grite refs, cut at its best snapshot: the fetch's result,
    or None when a plain fetch is the way (turned off, no usable snapshot there, git refused).

    Three fetches: every snapshot with depth 1 (to read what each covers), the logs whose tip
    the chosen one covers with depth 1 (a tip git would otherwise send with its whole history),
    then everything else but snapshots, excluding what the chosen snapshot reaches.
    """
    from git_brat.grite.cache import snapshot
    from git_brat.grite.cache.projection import CACHE_VERSION
    from git_brat.errors import RemoteUnreachable
    if not enabled(store):
        return None
    try:
        advertised = {n.decode(): s.decode() for n, s in
                      store.remote.ls_remote(remote, ["refs/grite/*"], timeout).items()}
    except RemoteUnreachable:
        return None   # the plain fetch then says what is wrong
    names = sorted(n for n in advertised if n.startswith(SNAPSHOTS))
    if not names:
        return None

    def track(name: str) -> str:
        return f"refs/remotes/{remote}/{name[len('refs/'):]}"

    got = store.remote.fetch(remote, [f"+{n}:{track(n)}" for n in names], env, timeout,
                             options=["--depth=1"], keep_pack=True)
    if not got.ok:
        return None
    refused = snapshot.rejected(store)
    usable = [(snap, n) for n in names
              if (snap := snapshot.read(store, track(n).encode())) is not None
              and snap.meta.version == CACHE_VERSION and snap.commit not in refused
              and snap.commit == advertised[n]]
    if not usable:
        return None
    chosen, name = max(usable, key=lambda u: (u[0].meta.events, u[1]))
    snapshot.prepare(store, chosen)   # while the logs arrive (best() takes it if it is still best)
    covers = set(chosen.meta.covers)
    quiet = [n for n, sha in advertised.items() if sha in covers and is_log_ref(n)]
    if quiet and not store.remote.fetch(remote, [f"+{n}:{track(n)}" for n in quiet], env,
                                        timeout, options=["--depth=1"]).ok:
        return None
    proc = store.remote.fetch(remote, [refspec, f"^{SNAPSHOTS}*"], env, timeout,
                              options=[f"--shallow-exclude={name}"])
    if not proc.ok:
        return None
    if not snapshot.contained(store, chosen, log_tips(store).values()):
        # The remote's snapshot moved between our fetches, so the cut is not where the one we
        # hold ends: take the whole history rather than leave a gap.
        return deepen_from(store, remote, refspec, env, timeout)
    return proc


def deepen_from(store: Store, remote: str, refspec: str, env: dict, timeout: float):
    """Fetch the whole history of a remote's grite refs (git deepens every shallow ref)."""
    return store.remote.fetch(remote, [refspec], env, timeout, options=["--unshallow"],
                              keep_pack=True)


def after_first_fetch(g) -> None:
    """Once a first fetch left the cache waiting for a cold part: fetch it as grite.fetchCold
    says."""
    if g.cache.cold_pending() is None:
        return
    how = cold.when(g.store)
    if how == "now" or (how == "background" and start_in_background(g.store) is None):
        g.state(refresh=True)   # (fetched and merged here: see Cache.state)


def start_in_background(store: Store) -> int | None:
    """Start `git grite fetch-cold --quiet` detached (its pid file is .git/grite/cold.pid until
    it ends; what it said in cold.log); None if it could not be started."""
    try:
        return process.detach([*process.launcher("grite"), "fetch-cold", "--quiet", "--pid-file"],
                              role="fetch-cold", log=os.path.join(grite_dir(store), LOG),
                              pid_file=pid_path(store), cwd=store.toplevel() or store.git_dir,
                              env=environment("worktree", {"GIT_DIR": store.git_dir}),
                              shown=["git", "grite", "fetch-cold", "--quiet"]).pid
    except OSError:
        return None


def pid_path(store: Store) -> str:
    return os.path.join(grite_dir(store), PID)


def hold_pid_file(store: Store) -> None:
    """cold.pid (written by whoever started this process) is removed when it exits."""
    process.hold_pid_file(pid_path(store))
