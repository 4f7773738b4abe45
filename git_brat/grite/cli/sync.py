"""`git grite sync`, `remote add-sync|remove-sync|list`, `uninstall`, and the hidden `hook` the shims run."""

from __future__ import annotations

import sys

import click

from git_brat.clikit import emit, json_option, warn
from git_brat.grite.sync import exchange as sy
from git_brat.grite.cli.common import open_grite
from git_brat.grite.log.refs import log_tips


def _short(sha: str | None) -> str:
    return sha[:7] if sha else "(none)"


def _sync_text(r: sy.SyncResult) -> str:
    lines = []
    for rs in r.remotes:
        if not rs.fetched:
            lines.append(f"{rs.remote}: could not fetch: {rs.error}")
            continue
        pub = rs.published
        if pub is None:
            lines.append(f"{rs.remote}: fetched")
        elif pub.status == "pushed":
            lines.append(f"{rs.remote}: fetched; published {pub.ref} "
                         f"{_short(pub.old)}..{_short(pub.new)}")
        elif pub.status == "failed":
            lines.append(f"{rs.remote}: fetched; could not publish {pub.ref}: {pub.error}")
        else:
            lines.append(f"{rs.remote}: fetched; {pub.ref} {pub.status}")
        if pub is not None and pub.relay_error:
            lines.append(f"warning: {rs.remote} refused relayed logs: {pub.relay_error}")
        if pub is not None and pub.snapshot_error:
            lines.append(f"warning: {rs.remote} refused this replica's snapshot: "
                         f"{pub.snapshot_error} (only speed is lost)")
    for m in r.moved:
        lines.append(f"  {m.ref}: {_short(m.old)} -> {_short(m.new)}")
    lines.append(f"{r.events} new events")
    for w in r.rewrites:
        lines.append(f"{'warning: ' if w.kind == 'rewrite' else ''}{w.ref}: {w.describe()}")
    lines += [f"warning: {w}" for w in r.warnings]
    return "\n".join(lines)


@click.command()
@click.argument("remote", required=False)
@click.option("--no-push", is_flag=True, help="Fetch and import only; do not publish this replica.")
@json_option
def sync(remote, no_push, as_json):
    """Fetch grite state from REMOTE (default: every synced remote), import it, publish ours."""
    g = open_grite()
    result = sy.sync(g, remote, push=not no_push)
    emit(as_json, result, lambda: _sync_text(result))
    if not result.ok:
        from git_brat.errors import GriteError
        failing = [rs for rs in result.remotes if not rs.fetched or (
            rs.published is not None and rs.published.status == "failed")]
        why = [f"{rs.remote}: could not fetch: {rs.error}" if not rs.fetched else
               f"{rs.remote}: could not publish: {rs.published.error}" for rs in failing]
        # Only a remote that did not answer is caught up with by syncing again; a refusal
        # says its own fix.
        again = all(not rs.fetched for rs in failing)
        raise GriteError(f"sync incomplete ({'; '.join(why)}); local state is intact" + (
            ", `git grite sync` again catches up once the remote answers" if again else ""))


@click.group()
def remote():
    """Which git remotes carry grite state."""


@remote.command("add-sync")
@click.argument("name")
@json_option
def add_sync(name, as_json):
    """Sync grite state through remote NAME too (for remotes added after `git grite init`)."""
    g = open_grite()
    r = sy.add_sync(g, name)

    def human():
        if not r.added:
            return f"{name} already syncs grite state"
        if r.error:
            return f"{name} now syncs grite state (first fetch failed: {r.error}; run `git grite sync {name}` later)"
        return f"{name} now syncs grite state"
    emit(as_json, r, human)


@remote.command("remove-sync")
@click.argument("name")
@json_option
def remove_sync(name, as_json):
    """Stop syncing grite state through remote NAME (what was fetched stays)."""
    g = open_grite(require_init=False)
    removed = sy.remove_sync(g.store, name)
    emit(as_json, {"remote": name, "removed": removed},
         lambda: f"{name} no longer syncs grite state" if removed else f"{name} was not syncing grite state")


@remote.command("list")
@json_option
def list_(as_json):
    """Every git remote and whether it carries grite state."""
    g = open_grite(require_init=False)
    rows = [{"remote": r, "sync": sy.is_synced(g.store, r)} for r in g.store.remotes()]
    emit(as_json, rows, lambda: "\n".join(f"{x['remote']}\t{'sync' if x['sync'] else '-'}"
                                          for x in rows) or "no remotes")


@click.command()
@json_option
def uninstall(as_json):
    """Remove grite's hooks (restoring the ones it chained) and the refspecs it added. Keeps data."""
    g = open_grite(require_init=False)
    r = sy.uninstall(g.store)

    def human():
        lines = [f"{c.hook}: {c.action}" + (f" ({c.detail})" if c.detail else "") for c in r.hooks]
        lines += [f"{x}: grite refspec removed" for x in r.remotes]
        return "\n".join(lines) or "nothing to uninstall"
    emit(as_json, r, human)


@click.command()
@json_option
def deepen(as_json):
    """Fetch the history a clone made from a snapshot left on its remotes (whole logs again)."""
    from git_brat.grite.log import cut
    from git_brat.errors import GriteError
    g = open_grite()
    tried = sy.deepen(g)
    left = len(cut.cut(g.store, log_tips(g.store).values()))
    if left:
        why = "; ".join(f"{r}: {e}" for r, e in tried if e) or "no synced remote holds it"
        raise GriteError(f"{left} log(s) still start from a snapshot ({why}); nothing was lost, "
                         "`git grite deepen` again when the remote is back")
    result = {"remotes": [{"remote": r, "error": e} for r, e in tried], "whole": True}
    emit(as_json, result, lambda: "every log is whole here" + (
        f" (fetched from {', '.join(r for r, _e in tried)})" if tried else " already"))


@click.command(name="fetch-cold")
@click.option("--quiet", is_flag=True, help="Say nothing unless it fails.")
@click.option("--pid-file", is_flag=True, hidden=True,
              help="Keep this process's id in .git/grite/cold.pid while it runs (init's own run).")
@json_option
def fetch_cold(quiet, pid_file, as_json):
    """Fetch and take in the settled part of the snapshot this clone was made from.

    `init` starts this in the background in a fresh clone (see grite.fetchCold); commands
    that need those entities run it first themselves. Exit 1 if the remote cannot be reached.
    """
    from git_brat.grite.sync.first_fetch import hold_pid_file
    g = open_grite()
    if pid_file:
        hold_pid_file(g.store)
    pending = g.cache.cold_pending()
    g.state()   # (takes it in, or says why it cannot)
    result = {"fetched": pending is not None, "entities": pending.rows if pending else 0,
              "snapshot": pending.snapshot if pending else None}
    if not quiet or as_json:
        emit(as_json, result, lambda: (
            f"took in the {pending.rows} settled entities of snapshot {pending.snapshot[:10]}"
            if pending else "nothing to fetch: no snapshot's settled part is missing here"))


@click.command(hidden=True, context_settings={"ignore_unknown_options": True})
@click.argument("name")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def hook(name, args):
    """Internal: what the hook shims run. Never fails the user's git command."""
    try:
        data = b"" if sys.stdin is None or sys.stdin.isatty() else sys.stdin.buffer.read()
        msg = sy.run_hook(name, list(args), data)
    except Exception as exc:  # noqa: BLE001  (a hook must never break git; one line says why)
        msg = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
    if msg:
        warn(f"grite {name} hook: " + " ".join(msg.split()))


def register(group: click.Group) -> None:
    group.add_command(sync)
    group.add_command(remote)
    group.add_command(uninstall)
    group.add_command(deepen)
    group.add_command(fetch_cold)
    group.add_command(hook)
