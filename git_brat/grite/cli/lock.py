"""`git grite lock …`: lease locks on resources (thin; the logic is in grite/locks/)."""

from __future__ import annotations

import click

from git_brat.clikit import emit, json_option, table, warn
from git_brat.grite.cli.common import open_grite
from git_brat.grite.locks import MAX_TTL

_seconds = click.FloatRange(min=0, min_open=True, max=MAX_TTL)


@click.group()
def lock():
    """Lease locks: claims on resources that expire unless renewed.

    \b
    RESOURCE is NAMESPACE:NAME, e.g. task:t-3f2a, path:src/parser, repo:global.
    A lease is the ref refs/grite/locks/<namespace>/<name>; every change is a
    commit on it, so `git log` of that ref is its audit trail. Each grant gets a
    fencing token one higher than the last (release keeps it), and events written
    under a lost lease are marked rejected on replay.

    \b
    Distributed mode: with --remote REMOTE (or git config grite.lockRemote), the
    remote's ref decides (push --force-with-lease): of many clones racing, exactly
    one wins. If the remote is unreachable a local lease is used and the output
    says `mode: local (remote REMOTE unreachable)`; --no-fallback refuses instead.

    \b
    Settings (git config; flags override):
      grite.lockRemote   remote for distributed mode (--remote, --local to ignore)
      grite.lockTtl      lease duration in seconds (--ttl; default 300)
      grite.lockSkew     clock-skew margin in seconds (--skew; default 5): others
                         take over only after the holder's expiry plus this margin
      grite.lockTimeout  seconds to wait for the remote (default 30)
    Holder: --holder ID, else $GRITE_HOLDER, else the current actor id.
    Exit: 5 held by someone else / not the holder, 3 no such lease, 2 bad input.
    """


def _options(*opts):
    def apply(f):
        for opt in reversed(opts):
            f = opt(f)
        return f
    return apply


# Every lock command: where it is decided, the skew margin, --json.
_common = _options(
    click.option("--remote", metavar="REMOTE", help="Decide on this remote (name or URL)."),
    click.option("--local", is_flag=True, help="Ignore grite.lockRemote: a lease on this clone only."),
    click.option("--skew", type=click.FloatRange(min=0, max=MAX_TTL), metavar="SECONDS",
                 help="Clock-skew margin (default: grite.lockSkew or 5)."),
    json_option)

# Commands that act as a holder.
_holder_opts = _options(
    click.option("--holder", metavar="ID", help="Holder id (default $GRITE_HOLDER, else the actor)."),
    click.option("--force", is_flag=True, help="Override the holder check (recorded in the history)."),
    click.option("--no-fallback", is_flag=True,
                 help="Fail instead of using a local lease when the remote is unreachable."))


def _open(remote, local, ttl=None, skew=None, no_fallback=False):
    from git_brat.grite import locks
    from git_brat.errors import UsageError
    if remote and local:
        raise UsageError("--remote and --local exclude each other")
    g = open_grite()
    st = locks.settings(g.store, remote, local, ttl, skew, fallback=not no_fallback)
    if st.waiting:
        warn(st.waiting)
    return g, locks, st


def _stamp(dt) -> str:
    return dt.astimezone().strftime("%Y-%m-%d %H:%M:%S")


def _mode(out) -> str:
    if out.note.startswith("remote "):
        return f"local ({out.note})"
    return f"remote {out.remote}" if out.remote else "local"


def _report(out, verb: str) -> str:
    text = (f"{verb} {out.resource}: token {out.token}, holder {out.holder}, "
            f"expires {_stamp(out.expires_at)} (in {out.remaining:.0f}s); mode: {_mode(out)}")
    if out.note and not out.note.startswith("remote "):
        text += f"\nwarning: {out.note}"
    return text


_VERBS = {"acquire": "acquired", "extend": "extended", "takeover": "took over",
          "force-takeover": "took over (forced)", "renew": "renewed", "force-renew": "renewed (forced)",
          "release": "released", "withdraw": "withdrawn (never used)", "force-release": "released (forced)", "expire": "expired"}


@lock.command()
@click.argument("resource")
@click.option("--ttl", type=_seconds, metavar="SECONDS",
              help="Lease duration (default: grite.lockTtl or 300).")
@click.option("--wait", type=click.FloatRange(min=0, max=MAX_TTL), default=0.0, metavar="SECONDS",
              help="Keep trying this long while someone else holds it.")
@click.option("--session", metavar="ID", help="Session recorded with the holder (default $GRITE_SESSION).")
@_holder_opts
@_common
def acquire(resource, ttl, wait, session, holder, force, no_fallback, remote, local, skew, as_json):
    """Take the lease on RESOURCE (extends it if you already hold it). Exit 5 if held."""
    g, locks, st = _open(remote, local, ttl, skew, no_fallback)
    locks.ref_for(resource)   # validate before anything else
    out = locks.acquire(g, resource, st, locks.holder_for(g, holder, session), force=force, wait=wait)
    emit(as_json, out, lambda: _report(out, _VERBS.get(out.action, out.action)))


@lock.command()
@click.argument("resource")
@click.option("--ttl", type=_seconds, metavar="SECONDS", help="New duration (default: the lease's own).")
@click.option("--session", metavar="ID", help="Session recorded with the holder (default $GRITE_SESSION).")
@_holder_opts
@_common
def renew(resource, ttl, session, holder, force, no_fallback, remote, local, skew, as_json):
    """Extend a lease you hold (same token); refused for anyone else."""
    g, locks, st = _open(remote, local, None, skew, no_fallback)
    locks.ref_for(resource)
    out = locks.renew(g, resource, st, locks.holder_for(g, holder, session), ttl=ttl, force=force)
    emit(as_json, out, lambda: _report(out, _VERBS.get(out.action, out.action)))


@lock.command()
@click.argument("resource")
@_holder_opts
@_common
def release(resource, holder, force, no_fallback, remote, local, skew, as_json):
    """Release a lease you hold (a released record is kept: tokens keep increasing)."""
    g, locks, st = _open(remote, local, None, skew, no_fallback)
    locks.ref_for(resource)
    out = locks.release(g, resource, st, locks.holder_for(g, holder), force=force)

    def human():
        if out.action == "none":
            return f"{out.resource} was already released (token {out.token}); mode: {_mode(out)}"
        return (f"{_VERBS.get(out.action, out.action)} {out.resource}: token {out.token}, "
                f"holder {out.holder}; mode: {_mode(out)}")
    emit(as_json, out, human)


def _warn_forged(forged) -> None:
    for f in forged:
        warn(f"ignored lease record {f.sha[:12]} on {f.resource}: {f.reason} (anyone who "
             f"can push can append a record; `git grite doctor` lists them)")


def _rows(leases, names: dict[str, str]) -> str:
    """A table; holders that are actors are shown by name (the log says who they are)."""
    rows = [["RESOURCE", "STATE", "TOKEN", "LEFT", "HOLDER"]]
    for v in leases:
        left = f"{v.remaining:.0f}s" if v.state == "held" else "-"
        who = names.get(v.holder, v.holder)
        rows.append([v.resource, v.state, str(v.token), left, who + (f" @{v.host}" if v.host else "")])
    return table(rows, [30, 8, 6, 7, None])


@lock.command()
@click.argument("resource", required=False)
@_common
def status(resource, remote, local, skew, as_json):
    """Every lease (or RESOURCE's): holder, state (held/expired/released), token, time left."""
    g, locks, st = _open(remote, local, None, skew)
    if resource:
        locks.ref_for(resource)
    report = locks.status(g, st, resource)
    for p in report.problems:
        warn(f"unreadable lease record {p}")
    _warn_forged(report.forged)
    if report.note:
        warn(report.note)
    def human() -> str:
        from git_brat.grite.cache.projection import actor_names
        return _rows(report.leases, actor_names(g.state())) if report.leases else "no leases"
    emit(as_json, report.leases, human)


@lock.command()
@click.option("--dry-run", is_flag=True, help="Only list the leases that would be expired.")
@_common
def gc(dry_run, remote, local, skew, as_json):
    """Mark leases whose holders let them expire as released (kept, with their tokens)."""
    g, locks, st = _open(remote, local, None, skew)
    report = locks.gc(g, st, dry_run=dry_run)
    if report.note:
        warn(report.note)
    verb = "would expire" if dry_run else "expired"
    emit(as_json, report.leases, lambda: "\n".join(
        f"{verb} {v.resource} (holder {v.holder}, token {v.token})" for v in report.leases)
        or "no expired leases")


def register(group: click.Group) -> None:
    group.add_command(lock)
