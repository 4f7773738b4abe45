"""Sync through the user's own remotes: refspecs, hooks, fetch, import of fetched logs, publication.

Per remote, one fetch refspec `+refs/grite/*:refs/remotes/<remote>/grite/*` and no push refspec
(a `remote.<r>.push` entry would change what a plain `git push` does for branches). This clone's
log `refs/grite/wal` is published as `refs/grite/replicas/<replica-id>` by the pre-push hook, in a
push of its own, or by `git grite sync`. The owner only ever moves that ref forward, so it is never
forced. Fetched logs are imported (hooks, sync): rewinds are kept in the attic, the cache extended.
"""

from __future__ import annotations

import os
import re
import subprocess

import msgspec

from git_brat.grite.log import attic
from git_brat.grite.sync import shims as hooks
from git_brat.grite.log import identity
from git_brat.grite.cache import snapshot
from git_brat.errors import GriteError, NotFound, UsageError
from git_brat.files import atomic_write
from git_brat.git.run import Result
from git_brat.git.store import Store
from git_brat.grite.log.refs import (SKIP_HOOKS_ENV, STAMP_PATTERNS, WAL, events_blob, grite_dir,
                                     is_log_ref, is_synced, log_tips, net_timeout, refspec,
                                     replica_ref, synced_remotes, transport_env)
from git_brat.grite.repo import Grite

def _sync_dir(store: Store) -> str:
    return os.path.join(grite_dir(store), "sync")


# -- install / uninstall --------------------------------------------------------------

class Installed(msgspec.Struct):
    """What install did, so uninstall undoes exactly that."""
    hooks_dirs: list[str] = []
    created_dirs: list[str] = []
    added: list[str] = []          # remotes whose refspec grite added
    preexisting: list[str] = []    # remotes that had grite's refspec before grite came
    excluded: list[str] = []       # info/exclude lines for shims inside the work tree
    exclude_before: str | None = None   # info/exclude as it was (None: there was none)


class InstallResult(msgspec.Struct):
    hooks_dir: str
    hooks: list[hooks.HookChange]
    remotes: list[str]             # remotes set up for sync
    added: list[str]               # remotes whose refspec this call added


class UninstallResult(msgspec.Struct):
    hooks_dirs: list[str]
    hooks: list[hooks.HookChange]
    remotes: list[str]             # remotes whose grite refspec was removed


def _manifest_path(store: Store) -> str:
    return os.path.join(_sync_dir(store), "installed.json")


def _load_manifest(store: Store) -> Installed:
    try:
        with open(_manifest_path(store), "rb") as f:
            return msgspec.json.decode(f.read(), type=Installed)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return Installed()


def install(store: Store, remotes: list[str] | None = None) -> InstallResult:
    """Hooks into `git rev-parse --git-path hooks`, the fetch refspec on every (or the given) remote."""
    manifest = _load_manifest(store)
    hooks_dir = store.hooks_dir()
    if not os.path.isdir(hooks_dir) and hooks_dir not in manifest.created_dirs:
        manifest.created_dirs.append(hooks_dir)
    if hooks_dir not in manifest.hooks_dirs:
        manifest.hooks_dirs.append(hooks_dir)
    # Record first: an interrupted install is still fully undone by uninstall.
    atomic_write(_manifest_path(store), msgspec.json.encode(manifest))
    changes = hooks.install(hooks_dir, _hide_from_status(store, hooks_dir, manifest),
                            user=store.common_dir)
    atomic_write(_manifest_path(store), msgspec.json.encode(manifest))
    added = []
    for r in store.remotes() if remotes is None else remotes:
        if is_synced(store, r):
            if r not in manifest.added and r not in manifest.preexisting:
                manifest.preexisting.append(r)
            continue
        store.config_add(f"remote.{r}.fetch", refspec(r))
        added.append(r)
        if r not in manifest.added:
            manifest.added.append(r)
    atomic_write(_manifest_path(store), msgspec.json.encode(manifest))
    return InstallResult(hooks_dir, changes, synced_remotes(store), added)


_EXCLUDE_BEGIN = "# >>> git-grite: its hook shims in the work tree (`git grite uninstall` removes this)"
_EXCLUDE_END = "# <<< git-grite"


def _hide_from_status(store: Store, hooks_dir: str, manifest: Installed) -> dict[str, str]:
    """core.hooksPath inside the work tree: keep the shims out of `git status`.

    Returns the hooks grite must not touch: a hook file git tracks (husky and the like) would
    show as modified the moment grite renamed or replaced it.
    """
    top = store.toplevel()
    if not top:
        return {}
    top = os.path.realpath(top)
    real = os.path.realpath(hooks_dir)
    if os.path.commonpath([top, real]) != top:
        return {}
    rel = os.path.relpath(real, top)
    names = {h: [f"{rel}/{h}", f"{rel}/{hooks.OWN_DIR}/{h}"] for h in hooks.HOOKS}
    tracked = store.tracked([p for ps in names.values() for p in ps])
    leave = {h: f"{ps[0]} is tracked by git in your work tree; grite leaves it alone "
                f"(use `git grite sync` for that direction)"
             for h, ps in names.items() if tracked.intersection(ps)}
    # A hook the user already has (untracked) stays visible as it was: only the renamed copy
    # is hidden; a shim where there was nothing is hidden too.
    lines = [f"/{rel}/{hooks.OWN_DIR}/"]   # grite's own directory: chained hooks, users
    for h, (shim, _chained) in names.items():
        if h not in leave:
            user_file = os.path.lexists(os.path.join(real, h)) and not hooks.is_shim(os.path.join(real, h))
            lines += [] if user_file else [f"/{shim}"]
    path = os.path.join(store.common_dir, "info", "exclude")
    try:
        with open(path, encoding="utf-8") as f:
            current = f.read()
    except FileNotFoundError:
        current = None
    block = "\n".join([_EXCLUDE_BEGIN, *lines, _EXCLUDE_END]) + "\n"
    if lines and _EXCLUDE_BEGIN not in (current or ""):
        if manifest.excluded == []:
            manifest.exclude_before = current
        manifest.excluded = lines
        base = current or ""
        sep = "" if not base or base.endswith("\n") else "\n"
        atomic_write(path, (base + sep + block).encode())
    elif lines and current is not None and block not in current:
        # Written by an earlier version (other file names): the block is brought up to date.
        start, end = current.find(_EXCLUDE_BEGIN), current.find(_EXCLUDE_END)
        if 0 <= start < end:
            manifest.excluded = lines
            atomic_write(path, (current[:start] + block +
                                current[end + len(_EXCLUDE_END) + 1:]).encode())
    return leave


def _unexclude(store: Store, manifest: Installed) -> None:
    """Take grite's block out of info/exclude, restoring the file exactly when it is untouched."""
    if not manifest.excluded:
        return
    path = os.path.join(store.common_dir, "info", "exclude")
    try:
        with open(path, encoding="utf-8") as f:
            current = f.read()
    except FileNotFoundError:
        return
    start, end = current.find(_EXCLUDE_BEGIN), current.find(_EXCLUDE_END)
    if start < 0 or end < 0:
        return
    rest = current[:start] + current[end + len(_EXCLUDE_END) + 1:]
    before = manifest.exclude_before
    if before is None and not rest.strip():
        os.unlink(path)
    elif before is not None and rest.rstrip("\n") == before.rstrip("\n"):
        atomic_write(path, before.encode())
    else:
        atomic_write(path, rest.encode())


def uninstall(store: Store) -> UninstallResult:
    """Remove the shims (restoring chained hooks), and the refspecs grite added. Keeps all data."""
    manifest = _load_manifest(store)
    dirs = list(dict.fromkeys([*manifest.hooks_dirs, store.hooks_dir()]))
    changes = []
    for d in dirs:
        if os.path.isdir(d):
            changes += hooks.uninstall(d, user=store.common_dir)
    for d in manifest.created_dirs:
        try:
            os.rmdir(d)    # only if empty: anything put there since is the user's
        except OSError:
            pass
    _unexclude(store, manifest)
    removed = []
    for r in store.remotes():
        if r not in manifest.preexisting and is_synced(store, r):
            store.config_unset_value(f"remote.{r}.fetch", refspec(r))
            removed.append(r)
    if os.path.exists(_manifest_path(store)):
        os.unlink(_manifest_path(store))
    return UninstallResult(dirs, changes, removed)


def hooks_not_live(store: Store) -> tuple[str, dict[str, str]]:
    """(effective hooks dir, hook -> why grite's shim does not run there) for an installed grite.

    Nothing when grite was never installed here (or uninstalled). A hook file git tracks in
    the work tree is left alone by design and not reported.
    """
    if not os.path.exists(_manifest_path(store)):
        return "", {}
    hooks_dir = store.hooks_dir()
    missing = hooks.live(hooks_dir)
    if missing:
        top = store.toplevel()
        real = os.path.realpath(hooks_dir)
        if top and os.path.commonpath([os.path.realpath(top), real]) == os.path.realpath(top):
            rel = os.path.relpath(real, os.path.realpath(top))
            tracked = store.tracked([f"{rel}/{h}" for h in missing])
            missing = {h: why for h, why in missing.items() if f"{rel}/{h}" not in tracked}
    return hooks_dir, missing


def hooks_warning(store: Store) -> str | None:
    """One line for a status view while grite's hooks are not live (None when they are)."""
    hooks_dir, missing = hooks_not_live(store)
    if not missing:
        return None
    return (f"grite's hooks are not live in {hooks_dir} ({', '.join(sorted(missing))}): pushes "
            f"do not publish and fetches do not import; `git grite doctor --fix` puts them back")


def remove_sync(store: Store, remote: str) -> bool:
    """Stop syncing grite state with one remote (fetched refs and data stay)."""
    _check_remote(store, remote)
    if not is_synced(store, remote):
        return False
    store.config_unset_value(f"remote.{remote}.fetch", refspec(remote))
    return True


def _check_remote(store: Store, remote: str) -> None:
    if remote not in store.remotes():
        raise NotFound(f"no remote named {remote!r} (see `git remote -v`)")


# -- import ---------------------------------------------------------------------------

class RefMove(msgspec.Struct):
    ref: str
    old: str | None
    new: str | None


class ImportResult(msgspec.Struct):
    moved: list[RefMove]
    rewrites: list[attic.Rewrite]


def _stamp_path(store: Store) -> str:
    return os.path.join(_sync_dir(store), "imported")


def _read_stamp(store: Store) -> dict[str, str]:
    try:
        with open(_stamp_path(store)) as f:
            return {ref: sha for sha, _, ref in (ln.partition(" ") for ln in f.read().splitlines())
                    if ref}
    except OSError:
        return {}


REPLICAS = "refs/grite/replicas/"
_REPLICA_ID = re.compile(r"[0-9a-f]{1,64}\Z")


def _log_owner(store: Store, sha: str) -> str | None:
    """The replica that wrote a log's tip batch (a peer's wal fetched straight from it)."""
    from git_brat.grite.model import events as ev
    data = events_blob(store, sha)
    try:
        return ev.decode_head(data).replica if data is not None else None
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def relay_known(store: Store) -> list[RefMove]:
    """Move this clone's own `refs/grite/replicas/<X>` forward to every fetched log of X.

    They are what this clone relays: fetched by whoever clones or fetches it (under
    `refs/grite/`), and pushed to every remote it syncs. Forward only: a ref moves only to a
    commit that has its current tip in its history, so a remote that rewinds a log cannot
    make us relay less, and a relay is never a forced update.
    """
    own = identity.load_replica(grite_dir(store)).id
    tips = log_tips(store)
    want: dict[str, set[str]] = {}
    for name, sha in tips.items():
        if not name.startswith("refs/remotes/"):
            continue
        if "/grite/replicas/" in name:
            owner = name.rpartition("/")[2]
        elif name.endswith("/grite/wal"):
            owner = _log_owner(store, sha)
        else:
            continue
        if owner and owner != own and _REPLICA_ID.match(owner):
            want.setdefault(owner, set()).add(sha)
    moved = []
    for owner, shas in sorted(want.items()):
        ref = REPLICAS + owner
        cur = first = tips.get(ref)
        for sha in sorted(shas):   # (one already in cur's history is no fast-forward either)
            if sha != cur and (cur is None or store.objects.is_ancestor(cur, sha)) and store.refs.cas(
                    ref.encode(), cur.encode() if cur else None, sha.encode(),
                    b"grite: relay a fetched log"):
                cur = sha
        if cur != first:
            moved.append(RefMove(ref, first, cur))
    return moved


def import_logs(g: Grite, before: dict[str, str] | None = None,
                hint: list[tuple[str, str]] = (), warm_list: bool = True) -> ImportResult:
    """Take fetched logs into the local view: keep whatever a ref stopped reaching, extend the cache.

    `before`: the log tips before a fetch; `hint`: (ref, old sha) pairs a hook was told about.
    These, the refs the last import saw and the cache's own frontier are all compared with now.
    `warm_list`: also write the default `issue list --json`, so that the list after a sync is
    a warm read. Not from the fetch hook: git before 2.51 runs it once per fetched ref, and
    the list of a large repository would be written that many times over (0.17 s each at 1M
    events), for a list that brat's users may never ask for; the next read writes it once.
    """
    store = g.store
    last = _read_stamp(store)
    known = len(attic.load(store))
    relay_known(store)
    tips = log_tips(store)
    attic.keep(store, [*hint, *last.items(), *(before or {}).items()], tips)
    # (Only what the default views need: a fresh clone's snapshot's cold part may follow.)
    g.state(refresh=True, hot_before=g.cold_before)
    if warm_list:
        g.cache.issue_list_json("open", g.cold_before)
    stamp = store.refs.lines(STAMP_PATTERNS)
    atomic_write(_stamp_path(store), (stamp + "\n").encode() if stamp else b"")
    base = before if before is not None else last
    remote = {r: s for r, s in log_tips(store).items() if r.startswith("refs/remotes/")}
    names = sorted({r for r in base if r.startswith("refs/remotes/")} | set(remote))
    moved = [RefMove(r, base.get(r), remote.get(r)) for r in names if base.get(r) != remote.get(r)]
    return ImportResult(moved, attic.load(store)[known:])


def keep_seen(store: Store) -> list[attic.Rewrite]:
    """Keep what the last import and the cache had seen, without refreshing anything."""
    from git_brat.grite.cache.projection import Cache
    meta = Cache(store)._read_meta()
    seen = [*_read_stamp(store).items(), *(meta.frontier.items() if meta else ())]
    return attic.keep(store, seen, log_tips(store))


# -- publication ----------------------------------------------------------------------

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
    return os.path.join(_sync_dir(store), "published.json")


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
                return Publication(remote, ref, old, old, "failed", failed[ref])
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


def sync(g: Grite, remote: str | None = None, push: bool = True) -> SyncResult:
    """Fetch grite refs from the remote(s), import them, then publish this replica's log."""
    store = g.store
    if remote is not None:
        _check_remote(store, remote)
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
    return SyncResult(ok, results, imported.moved, max(events, 0), imported.rewrites)


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
    from git_brat.grite.log import cut as shallow
    from git_brat.grite.sync.first_fetch import deepen_from
    out = []
    for r in synced_remotes(g.store):
        if not shallow.cut(g.store, log_tips(g.store).values()):
            break
        proc = deepen_from(g.store, r, refspec(r), transport_env(), net_timeout())
        out.append((r, None if proc.ok else proc.error_line()))
    import_logs(g)
    return out


def add_sync(g: Grite, remote: str) -> AddSyncResult:
    """Set up one remote (added after init): refspec, hooks, and a first fetch of its grite state."""
    from git_brat.grite.cache import cold
    from git_brat.grite.log import cut as shallow
    _check_remote(g.store, remote)
    shallow.enabled(g.store)   # bad settings stop here, before anything is written
    cold.when(g.store)
    inst = install(g.store, [remote])
    added = remote in inst.added
    fetched, error = False, None
    if added:
        [(_r, error)] = fetch_new(g, [remote])
        fetched = error is None
    return AddSyncResult(remote, added, inst.hooks, fetched, error)


# -- hooks ----------------------------------------------------------------------------

def run_hook(name: str, args: list[str], stdin: bytes) -> str | None:
    """What the shims run (after the user's own hook): returns a warning worth one line, if any.

    Raises GriteError; the CLI turns it into one warning line and exit 0.
    """
    if os.environ.get(SKIP_HOOKS_ENV):
        return None
    store = Store.discover()
    if not identity.is_initialized(grite_dir(store)):
        return None
    g = Grite(store)
    if name in ("reference-transaction", "post-merge", "post-rewrite"):
        hint = []
        if name == "reference-transaction":
            for line in stdin.decode("utf-8", "replace").splitlines():
                parts = line.split()
                if len(parts) == 3:
                    hint.append((parts[2], parts[0]))
            if hint and not any(is_log_ref(r) for r, _old in hint):
                return _after_named_fetch(g, [r for r, _old in hint])
        imported = import_logs(g, hint=hint, warm_list=name != "reference-transaction")
        found = [r for r in imported.rewrites if r.kind == "rewrite"]
        if found:
            return (f"{found[0].ref} was rewound or rewritten by its remote; what it had is kept "
                    f"(see `git grite doctor`)")
    elif name == "pre-push":
        if len(args) < 2:
            raise UsageError("pre-push hook needs REMOTE and URL")
        remote, url = args[0], args[1]
        if remote == url or not is_synced(store, remote):
            return None   # a push to a bare URL, or a remote not set up for grite
        if _push_is_dry_run(os.environ.get("GRITE_PUSH_PID", "")):
            return None
        pub = publish(g, remote, dest=url)
        if pub.status == "failed":
            raise GriteError(f"could not publish {pub.ref} to {remote}: {pub.error} "
                             f"(your push is not affected)")
        if pub.relay_error:
            return f"{remote} refused relayed logs: {pub.relay_error}"
    else:
        raise UsageError(f"unknown hook {name!r}")
    return None


def _after_named_fetch(g: Grite, moved: list[str]) -> str | None:
    """A fetch moved remote-tracking branches and no grite ref: if it was given refspecs
    (`git fetch origin main`, `git pull origin main`), it skipped grite's; fetch them from the
    same remote now, so the state after it is that remote's."""
    store = g.store
    argv = _command_line(os.environ.get("GRITE_FETCH_PID", ""))
    if argv is not None and not _fetch_has_refspecs(argv):
        return None   # a plain fetch: grite refs came with it and did not change
    remotes = sorted((r for r in synced_remotes(store)), key=len, reverse=True)
    hit = next((r for ref in moved for r in remotes if ref.startswith(f"refs/remotes/{r}/")), None)
    if hit is None:
        return None
    before = log_tips(store)
    proc = store.remote.fetch(hit, [refspec(hit)], transport_env(), net_timeout())
    if not proc.ok:
        raise GriteError(f"could not fetch grite state from {hit}: {proc.error_line()} "
                         f"(`git grite sync {hit}` retries)")
    found = [r for r in import_logs(g, before=before).rewrites if r.kind == "rewrite"]
    if found:
        return (f"{found[0].ref} was rewound or rewritten by its remote; what it had is kept "
                f"(see `git grite doctor`)")
    return None


# Options of `git fetch` that take their value as the next argument.
_FETCH_VALUE_OPTS = {"--depth", "--deepen", "--shallow-since", "--shallow-exclude", "-j", "--jobs",
                     "--upload-pack", "-o", "--server-option", "--negotiation-tip", "--refmap",
                     "--filter", "--recurse-submodules-default", "--submodule-prefix"}


def _fetch_has_refspecs(argv: list[str]) -> bool:
    """Whether a `git fetch` command line names refspecs after its remote."""
    if "fetch" not in argv:
        return False
    args = argv[argv.index("fetch") + 1:]
    positional, skip = [], False
    for i, arg in enumerate(args):
        if skip:
            skip = False
        elif arg == "--":
            positional += args[i + 1:]
            break
        elif arg in ("--all", "--multiple", "--stdin"):
            return arg == "--stdin"
        elif arg in _FETCH_VALUE_OPTS:
            skip = True
        elif not arg.startswith("-") or arg == "-":
            positional.append(arg)
    return len(positional) >= 2


def _command_line(pid: str) -> list[str] | None:
    """argv of process pid, or None if it cannot be read."""
    if not pid.isdigit():
        return None
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().decode("utf-8", "replace").split("\0")
    except OSError:   # no /proc (macOS, BSD): ps gives the command line, space-separated
        proc = subprocess.run(["ps", "-o", "args=", "-p", pid], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL)
        return proc.stdout.decode("utf-8", "replace").split() or None


def _push_is_dry_run(pid: str) -> bool:
    """Whether the `git push` that ran the pre-push hook (process pid) has --dry-run / -n."""
    if not pid.isdigit():
        return False
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().decode("utf-8", "replace").split("\0")
    except OSError:   # no /proc (macOS, BSD): ps gives the command line, space-separated
        proc = subprocess.run(["ps", "-o", "args=", "-p", pid], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL)
        argv = proc.stdout.decode("utf-8", "replace").split()
    if "push" not in argv:
        return False
    for arg in argv[argv.index("push") + 1:]:
        if arg == "--":
            break
        if arg == "--dry-run" or (arg[:1] == "-" and arg[1:2] != "-" and "n" in arg
                                  and set(arg[1:]) <= set("vqnfud46")):
            return True
    return False
