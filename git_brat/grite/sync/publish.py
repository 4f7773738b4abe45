"""Publication: this replica's log (and the other logs it relays) pushed to a remote, then its snapshot."""

from __future__ import annotations

import os

import msgspec

from git_brat.grite.log import identity
from git_brat.grite.cache import snapshot
from git_brat.files import atomic_write
from git_brat.git.run import Result
from git_brat.git.store import Store
from git_brat.grite.log.refs import (WAL, grite_dir, log_tips, net_timeout, replica_ref, transport_env)
from git_brat.grite.repo import Grite
from git_brat.grite.sync.imports import REPLICAS
from git_brat.grite.sync.install import sync_dir

class Publication(msgspec.Struct):
    remote: str
    ref: str                # refs/grite/replicas/<replica-id> on the remote
    old: str | None         # what the remote had, as far as we know
    new: str | None         # what it has now (our refs/grite/wal) when pushed
    status: str             # pushed | up-to-date | nothing | failed
    error: str | None = None
    snapshot_error: str | None = None   # why the hub refused this replica's snapshot, if it did
    relayed: list[str] = []   # other replicas' logs this clone relayed to the remote
    # Logs this clone holds only from a snapshot on, refused by a remote lacking their history.
    relay_error: str | None = None


def _published_path(store: Store) -> str:
    return os.path.join(sync_dir(store), "published.json")


def _load_published(store: Store) -> dict[str, str]:
    try:
        with open(_published_path(store), "rb") as f:
            return msgspec.json.decode(f.read(), type=dict[str, str])
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return {}


def publish(g: Grite, remote: str, dest: str | None = None) -> Publication:
    """Push refs/grite/wal to refs/grite/replicas/<id> on remote (or its URL `dest`); never forced.

    Then this replica's snapshot (written first when one is due), in a push of its own so a
    hub that refuses it cannot hold up the log; forced, since a snapshot is replaced, not
    extended, and only this replica moves it. A refusal is reported, not a failure.
    """
    store = g.store
    rid = identity.load_replica(grite_dir(store)).id   # not the actor: GRITE_ACTOR is irrelevant here
    ref = replica_ref(rid)
    wal = store.refs.read(WAL.encode())
    tracked = store.refs.read(f"refs/remotes/{remote}/grite/replicas/{rid}".encode())
    old = tracked.decode() if tracked else None
    if wal is None:
        return Publication(remote, ref, old, old, "nothing")
    wal_s = wal.decode()
    published = _load_published(store)
    relays = _relays_due(store, rid, remote, dest, published)
    own_due = not (tracked == wal or (dest is not None and published.get(dest) == wal_s))
    specs = ([f"{WAL}:{ref}"] if own_due else []) + [f"{r}:{r}" for r in relays]
    pub = Publication(remote, ref, old or wal_s, wal_s, "up-to-date")
    if specs:
        proc = store.remote.push(dest or remote, specs, transport_env(), net_timeout())
        failed = _failed_refs(proc)
        if not proc.ok and not failed:   # nothing was pushed at all
            return Publication(remote, ref, old, old, "failed", proc.error_line())
        if own_due:
            if ref in failed:
                return Publication(remote, ref, old, old, "failed",
                                   _rewritten(store, remote, ref, wal_s, old) or failed[ref])
            _remember(store, dest, wal_s)
            pub = Publication(remote, ref, old, wal_s, "pushed")
        for r, sha in relays.items():
            if r not in failed:   # refused: the remote has newer (or other) history of it
                _remember(store, dest, sha, f"{dest} {r}")
                pub.relayed.append(r)
        cut = sorted(r for r in relays if "shallow" in failed.get(r, ""))
        if cut:
            from git_brat.grite.log.cut import DEEPEN_HINT
            pub.relay_error = (f"{len(cut)} log(s) this clone holds only from the snapshot it "
                               f"was cloned from on lack their history there; {DEEPEN_HINT}, "
                               "and the next sync relays them")
    pub.snapshot_error = _publish_snapshot(g, rid, remote, dest, wal_s)
    return pub


def _rewritten(store: Store, remote: str, ref: str, wal: str, theirs: str | None) -> str | None:
    """Why a push of this replica's own log was refused when the remote's copy (as last
    fetched) is not this log at all: someone with push rights rewrote it there. Pushing it
    again, or syncing, can never succeed (a publication is never forced, so nobody else can
    undo ours); only this clone, its owner, can put it back, on purpose. None otherwise."""
    if not theirs or theirs == wal or not store.objects.has_object(theirs.encode()) or \
            store.objects.is_ancestor(theirs, wal) or store.objects.is_ancestor(wal, theirs):
        return None
    return (f"{remote}'s copy of this replica's log ({ref}) is not this log: its tip "
            f"{theirs[:12]} is not in this clone's history, nor this log in its (someone with "
            f"push rights rewrote it; `git grite doctor` in clones that saw the log reports "
            f"it). Syncing again cannot fix it: only this clone writes that log; put it back "
            f"with `git push --force-with-lease={ref}:{theirs} {remote} {WAL}:{ref}`")


def _relays_due(store: Store, rid: str, remote: str, dest: str | None,
                published: dict[str, str]) -> dict[str, str]:
    """Other replicas' logs this clone knows and the remote lacks (as far as we know): ref -> sha.

    None for a remote set to `git config remote.<name>.griteRelay false`: it gets only this
    replica's own log (a public hub must not get a private hub's issues through a clone that
    syncs both).
    """
    if (store.config_get(f"remote.{remote}.griteRelay") or "true").strip().lower() in (
            "false", "no", "off", "0"):
        return {}
    due = {}
    for name, sha in store.refs.under(REPLICAS.encode()).items():
        ref, sha = name.decode(), sha.decode()
        owner = ref[len(REPLICAS):]
        if owner == rid:
            continue
        tracked = store.refs.read(f"refs/remotes/{remote}/grite/replicas/{owner}".encode())
        if tracked == sha.encode() or (dest is not None and published.get(f"{dest} {ref}") == sha):
            continue
        due[ref] = sha
    return due


def _publish_snapshot(g: Grite, rid: str, remote: str, dest: str | None, wal: str) -> str | None:
    """Push this replica's snapshot if the remote lacks it; why the remote refused it, if it did.

    Only a snapshot whose events the remote already has is pushed: one that covers logs from
    another remote would hand this remote their events.
    """
    store = g.store
    settings = snapshot.settings(store)
    if not settings.enabled:
        return None
    g.cache.snapshot_if_due(settings)
    ours = snapshot.read(store, snapshot.own_ref(rid))
    if ours is None:
        return None
    key = f"{dest} snapshot"
    if store.refs.read(f"refs/remotes/{remote}/grite/snapshots/{rid}".encode()) == \
            ours.commit.encode() or (dest is not None and _load_published(store).get(key) == ours.commit):
        return None
    remote_logs = [sha for name, sha in log_tips(store).items()
                   if name.startswith(f"refs/remotes/{remote}/grite/")]
    if store.objects.unreachable(ours.meta.covers, [wal, *remote_logs]):
        return None   # it covers logs this remote does not have
    # The commit that was checked, not whatever the ref holds by now (another process may
    # have written a newer snapshot that covers more).
    proc = store.remote.push(dest or remote, [f"+{ours.commit}:{ours.ref}"], transport_env(),
                      net_timeout())
    if not proc.ok:
        return _failed_refs(proc).get(ours.ref) or proc.error_line()
    _remember(store, dest, ours.commit, key)
    return None


def _remember(store: Store, dest: str | None, sha: str, key: str | None = None) -> None:
    """Record what a push to a URL (not a remote with tracking refs) published there."""
    if dest is None:
        return
    published = _load_published(store)
    published[key or dest] = sha
    atomic_write(_published_path(store), msgspec.json.encode(published))


def _failed_refs(proc: Result) -> dict[str, str]:
    """Remote ref -> reason, for each ref `git push --porcelain` reports rejected."""
    failed = {}
    for line in proc.stdout.decode("utf-8", "replace").splitlines():
        flag, _, rest = line.partition("\t")
        if flag == "!":
            spec, _, reason = rest.partition("\t")
            failed[spec.rpartition(":")[2]] = reason or "rejected"
    return failed
