"""Sync through the user's own remotes: the operations (sync, fetch_new, add_sync, deepen).

Per remote, one fetch refspec `+refs/grite/*:refs/remotes/<remote>/grite/*` and no push refspec
(a `remote.<r>.push` entry would change what a plain `git push` does for branches). This clone's
log `refs/grite/wal` is published as `refs/grite/replicas/<replica-id>` by the pre-push hook, in a
push of its own, or by `git grite sync`. The owner only ever moves that ref forward, so it is never
forced. Fetched logs are imported (hooks, sync): rewinds are kept in the attic, the cache extended.

The parts, each importing only those before it: shims (the hook files), install (refspecs,
hooks, info/exclude), imports (fetched logs in), publish (this replica's log out), first_fetch
(a clone cut at a snapshot), hook (what the shims run). This module is what callers name as
`sync`: the operations, and what callers use of the parts.
"""

from __future__ import annotations

import msgspec

from git_brat.grite.log import attic
from git_brat.grite.sync import shims as hooks
from git_brat.errors import GriteError, UsageError
from git_brat.git.store import Store
from git_brat.grite.log.refs import (is_synced, log_tips, net_timeout, refspec, synced_remotes, transport_env)
from git_brat.grite.repo import Grite
from git_brat.grite.sync.hook import run_hook
from git_brat.grite.sync.imports import ImportResult, RefMove, import_logs, keep_seen, relay_known
from git_brat.grite.sync.install import (InstallResult, UninstallResult, check_remote,
                                         hooks_not_live, hooks_warning, install, remove_sync,
                                         uninstall)
from git_brat.grite.sync.publish import Publication, publish

__all__ = [
    "AddSyncResult", "ImportResult", "InstallResult", "Publication", "RefMove", "RemoteSync",
    "SyncResult", "UninstallResult", "add_sync", "deepen", "fetch_new", "hooks_not_live",
    "hooks_warning", "import_logs", "install", "is_synced", "keep_seen", "net_timeout",
    "publish", "refspec", "relay_known", "remove_sync", "run_hook", "sync", "synced_remotes",
    "transport_env", "uninstall"]


# -- sync -----------------------------------------------------------------------------

class RemoteSync(msgspec.Struct):
    remote: str
    fetched: bool
    error: str | None = None
    published: Publication | None = None


class SyncResult(msgspec.Struct):
    ok: bool
    remotes: list[RemoteSync]
    moved: list[RefMove]      # fetched log refs that changed
    events: int               # events newly in the local view
    rewrites: list[attic.Rewrite]
    warnings: list[str] = []   # batches not believed, logs shorter than others saw them


def sync(g: Grite, remote: str | None = None, push: bool = True) -> SyncResult:
    """Fetch grite refs from the remote(s), import them, then publish this replica's log."""
    store = g.store
    if remote is not None:
        check_remote(store, remote)
        targets = [remote]
    else:
        targets = synced_remotes(store)
        if not targets:
            raise UsageError("no remote is set up for grite sync (add one with `git remote add "
                             "NAME URL`, then `git grite remote add-sync NAME`)")
    events_before = g.state().event_count
    before = log_tips(store)
    results = []
    for r in targets:
        proc = store.remote.fetch(r, [refspec(r)], transport_env(), net_timeout())
        results.append(RemoteSync(r, proc.ok,
                                  None if proc.ok else proc.error_line()))
    imported = import_logs(g, before=before)
    events = g.state().event_count - events_before
    if push:
        for rs in results:
            if rs.fetched:   # unreachable (offline): nothing to publish to either
                rs.published = publish(g, rs.remote)
    ok = all(rs.fetched and (rs.published is None or rs.published.status != "failed")
             for rs in results)
    return SyncResult(ok, results, imported.moved, max(events, 0), imported.rewrites,
                      [w for w in imported.warnings() if "rewound or rewritten by its" not in w])


class AddSyncResult(msgspec.Struct):
    remote: str
    added: bool
    hooks: list[hooks.HookChange]
    fetched: bool
    error: str | None = None


def fetch_new(g: Grite, remotes: list[str]) -> list[tuple[str, str | None]]:
    """First fetch of grite refs from newly set-up remotes, then import: [(remote, error|None)]."""
    from git_brat.grite.sync import first_fetch
    out = []
    for r in remotes:
        proc = None
        if not _has_fetched(g.store, r):   # a first fetch: cut at a snapshot when it can be
            proc = first_fetch.first_fetch(g.store, r, refspec(r), transport_env(), net_timeout())
        if proc is None:
            proc = g.store.remote.fetch(r, [refspec(r)], transport_env(), net_timeout())
        out.append((r, None if proc.ok else proc.error_line()))
    if remotes:
        import_logs(g)
        try:
            first_fetch.after_first_fetch(g)
        except GriteError as exc:   # (offline again already: the next command that needs it)
            out[0] = (out[0][0], out[0][1] or exc.message)
    return out


def _has_fetched(store: Store, remote: str) -> bool:
    """Whether any grite ref of this remote was fetched before."""
    prefix = f"refs/remotes/{remote}/grite/".encode()
    return bool(store.refs.under(prefix))


def deepen(g: Grite) -> list[tuple[str, str | None]]:
    """Fetch the history a clone cut at a snapshot left on its remotes: [(remote, error|None)]."""
    from git_brat.grite.log import cut
    from git_brat.grite.sync.first_fetch import deepen_from
    out = []
    for r in synced_remotes(g.store):
        if not cut.cut(g.store, log_tips(g.store).values()):
            break
        proc = deepen_from(g.store, r, refspec(r), transport_env(), net_timeout())
        out.append((r, None if proc.ok else proc.error_line()))
    import_logs(g)
    return out


def add_sync(g: Grite, remote: str) -> AddSyncResult:
    """Set up one remote (added after init): refspec, hooks, and a first fetch of its grite state."""
    from git_brat.grite.cache import cold
    from git_brat.grite.log import cut
    check_remote(g.store, remote)
    cut.enabled(g.store)   # bad settings stop here, before anything is written
    cold.when(g.store)
    inst = install(g.store, [remote])
    added = remote in inst.added
    fetched, error = False, None
    if added:
        [(_r, error)] = fetch_new(g, [remote])
        fetched = error is None
    return AddSyncResult(remote, added, inst.hooks, fetched, error)
