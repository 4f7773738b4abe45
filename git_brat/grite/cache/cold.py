"""A snapshot's cold part: fetched after a fresh clone is ready, then merged into its cache.

A clone cut at a snapshot adopts the snapshot's hot rows and is ready; the settled rows
(`snapshot.ColdPart`) stay on the remote until `init` fetches them in the background
(`sync.first_fetch`), or the first command that needs them does (see Cache.state). Nothing answers from a part.
"""

from __future__ import annotations

from git_brat.git.store import Store

SETTING = "grite.fetchCold"
WHEN = ("background", "now", "when-needed")   # its values; the first is the default


def when(store: Store) -> str:
    """grite.fetchCold: when a fresh clone fetches its snapshot's cold part: `background`
    (after `init` returns, in a process of its own), `now` (before it returns) or
    `when-needed` (by the first command that needs it)."""
    from git_brat.errors import GriteError
    value = store.config_get(SETTING)
    if value is None:
        return WHEN[0]
    if value.lower() not in WHEN:
        raise GriteError(f"{SETTING} must be one of {', '.join(WHEN)}, not {value!r}")
    return value.lower()


def fetch(store: Store, commit: str, remote: str) -> str | None:
    """Bring the cold part's commit here, from `remote` or else any synced remote; None once
    it is here, else why not (the last remote's answer)."""
    from git_brat.grite.cache import snapshot
    from git_brat.grite.log.refs import net_timeout, synced_remotes, transport_env
    entry = snapshot.COLD_DB.decode()
    if store.objects.has_entry(commit, entry):
        return None
    remotes = [r for r in dict.fromkeys([remote, *synced_remotes(store)]) if r]
    why = "no synced remote to fetch it from"
    for r in remotes:
        # By id: it is a parent of the remote's snapshot commit, so no ref names it (protocol
        # v2 serves any object the remote has; git 2.18 and later speak it).
        proc = store.remote.fetch(r, [commit], transport_env(), net_timeout(), keep_pack=True)
        if proc.ok and store.objects.has_entry(commit, entry):
            return None
        why = f"{r}: {proc.error_line()}" if not proc.ok else f"{r} sent no such commit"
    return why
