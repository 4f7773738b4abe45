"""Setting sync up and taking it down: the fetch refspec per remote, the hook shims, info/exclude."""

from __future__ import annotations

import os

import msgspec

from git_brat.grite.sync import hookhashes
from git_brat.grite.sync import shims as hooks
from git_brat.errors import NotFound
from git_brat.files import atomic_write
from git_brat.git.store import Store
from git_brat.grite.log.refs import grite_dir, is_synced, refspec, synced_remotes


def sync_dir(store: Store) -> str:
    """Where sync keeps its own files: the install manifest, the import stamp, what was published."""
    return os.path.join(grite_dir(store), "sync")


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
    return os.path.join(sync_dir(store), "installed.json")


def _load_manifest(store: Store) -> Installed:
    try:
        with open(_manifest_path(store), "rb") as f:
            return msgspec.json.decode(f.read(), type=Installed)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return Installed()


def install(store: Store, remotes: list[str] | None = None,
            accept_hooks: bool = True) -> InstallResult:
    """Hooks into `git rev-parse --git-path hooks`, the fetch refspec on every (or the given) remote.

    `accept_hooks`: record the other hooks there as the user's (hookhashes); a repair passes
    False, so it never vouches for a hook that changed."""
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
    hookhashes.record(store, hooks_dir, accept=accept_hooks)
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
    check_remote(store, remote)
    if not is_synced(store, remote):
        return False
    store.config_unset_value(f"remote.{remote}.fetch", refspec(remote))
    return True


def check_remote(store: Store, remote: str) -> None:
    """NotFound unless this repository has a remote of that name."""
    if remote not in store.remotes():
        raise NotFound(f"no remote named {remote!r} (see `git remote -v`)")
