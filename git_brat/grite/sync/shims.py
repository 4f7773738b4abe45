"""Install and remove the hook shims, chaining (and later restoring, byte for byte) existing hooks.

An existing hook `H` is moved into grite's own directory `<hooks>/.grite/H`, keeping its file
name (rename keeps bytes, mode and times), and the shim runs it first with the same arguments
and stdin; a shell script runs with `$0` set to `<hooks>/H`, where it was, so hook managers
that find their helpers and the user's script through `$0` (husky) work unchanged. Uninstall
moves it back, or deletes a shim that had nothing to chain, wherever a hook manager moved the
shim (pre-commit keeps a hook it replaces as `H.legacy`). A shim bakes in the interpreter and
package location of the grite that installed it, so hooks work whatever PATH the user's git
runs them with. `<hooks>/.grite/repositories` lists the repositories using the shims there (a
global core.hooksPath is shared): uninstall leaves them while another one still does.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from pathlib import Path

import msgspec

from git_brat.process import source_root
from git_brat.errors import GriteError

HOOKS = ("reference-transaction", "post-merge", "post-rewrite", "pre-push")
HUB_HOOKS = ("post-receive",)   # git-brat's hub (`git brat init --hub`): installed only there
MARK = b"# git-grite hook shim"
OWN_DIR = ".grite"             # grite's directory inside a hooks directory
OLD_CHAINED = ".grite-chained"  # where earlier versions kept a chained hook: <hook>.grite-chained
USERS = "repositories"


class HookChange(msgspec.Struct):
    hook: str
    action: str          # installed | chained | updated | unchanged | skipped | restored | removed
    #                      | kept (another repository still uses the shims)
    detail: str = ""


def shim_dir() -> Path:
    """The hooks/ directory of this checkout, or the copy a wheel installed under share/."""
    here = Path(source_root()).resolve() / "hooks"
    for candidate in (here, Path(sysconfig.get_path("data")) / "share" / "git-brat" / "hooks"):
        if (candidate / HOOKS[0]).is_file():
            return candidate
    raise GriteError(f"grite hook shims not found (looked in {here}); reinstall git-brat")


def _sh_quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def shim_text(hook: str) -> bytes:
    """The shim for `hook`, with this interpreter and package location filled in."""
    root = str(Path(source_root()).resolve())
    text = (shim_dir() / hook).read_text()
    python = os.path.abspath(sys.executable)   # not realpath: a venv's python must stay the venv's
    return (text.replace("@GRITE_PY@", _sh_quote(python))
                .replace("@GRITE_ROOT@", _sh_quote(root))).encode()


def is_shim(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return MARK in f.read(256)
    except OSError:
        return False


def chained_path(hooks_dir: str, hook: str) -> str:
    return os.path.join(hooks_dir, OWN_DIR, hook)


def _same_file(a: str, b: str) -> bool:
    try:
        with open(a, "rb") as fa, open(b, "rb") as fb:
            return fa.read() == fb.read()
    except OSError:
        return False


def install(hooks_dir: str, leave_alone: dict[str, str] | None = None,
            user: str | None = None, names: tuple[str, ...] = HOOKS) -> list[HookChange]:
    """Put a shim in place of every hook grite needs (or of `names`); idempotent.

    `leave_alone`: hook -> why grite must not touch it (e.g. a hook file git tracks).
    `user`: the repository (common dir) installing, recorded as a user of these shims.
    """
    os.makedirs(os.path.join(hooks_dir, OWN_DIR), exist_ok=True)
    if user:
        add_user(hooks_dir, user)
    changes = []
    for hook in names:
        if leave_alone and hook in leave_alone:
            changes.append(HookChange(hook, "skipped", leave_alone[hook]))
            continue
        path = os.path.join(hooks_dir, hook)
        chained = chained_path(hooks_dir, hook)
        old = path + OLD_CHAINED
        if os.path.lexists(old) and not os.path.lexists(chained):
            os.rename(old, chained)   # the layout of earlier versions
        want = shim_text(hook)
        legacy = path + ".legacy"
        swapped = False
        if not is_shim(path) and os.path.lexists(path) and is_shim(legacy) and \
                not os.path.lexists(chained):
            # pre-commit installed after grite keeps grite's shim as H.legacy and runs it
            # before its own hooks, so grite would publish on a push they then refuse. Put
            # the manager's hook where grite chains hooks, and the shim back in front.
            os.rename(path, chained)
            os.replace(legacy, path)
            swapped = True
        if is_shim(path):
            with open(path, "rb") as f:
                same = f.read() == want
            if swapped:
                if not same:
                    _write_shim(path, want)
                changes.append(HookChange(hook, "chained", f"{chained} (the hook manager's, "
                                          f"which had moved grite's shim to {legacy}) now runs "
                                          "first and decides"))
                continue
            if same and os.access(path, os.X_OK):
                changes.append(HookChange(hook, "unchanged"))
                continue
            _write_shim(path, want)
            changes.append(HookChange(hook, "updated"))
        elif os.path.lexists(path):
            if os.path.lexists(chained):
                if _same_file(path, chained):   # a manager rewrote what grite already chains
                    _write_shim(path, want)
                    changes.append(HookChange(hook, "updated", f"{path} was put back by "
                                              "something else; the shim runs it from "
                                              f"{chained}"))
                    continue
                changes.append(HookChange(hook, "skipped", f"{chained} already exists; "
                                          f"leaving {path} alone (grite will not run from it)"))
                continue
            os.rename(path, chained)
            _write_shim(path, want)
            changes.append(HookChange(hook, "chained", f"existing hook kept as {chained}"))
        else:
            _write_shim(path, want)
            changes.append(HookChange(hook, "installed"))
    return changes


def _moved_shims(hooks_dir: str, hook: str) -> list[str]:
    """Where grite's shim for hook is: its own place, or where a hook manager moved it
    (`pre-push.legacy`, `pre-push.old`, ...)."""
    try:
        names = os.listdir(hooks_dir)
    except OSError:
        return []
    return sorted(os.path.join(hooks_dir, n) for n in names
                  if (n == hook or n.startswith(hook + ".")) and not n.endswith(OLD_CHAINED)
                  and is_shim(os.path.join(hooks_dir, n)))


def live(hooks_dir: str) -> dict[str, str]:
    """Hook -> why grite's shim does not run there (empty: all live)."""
    missing = {}
    for hook in HOOKS:
        path = os.path.join(hooks_dir, hook)
        if is_shim(path):
            if not os.access(path, os.X_OK):
                missing[hook] = f"{path} is not executable"
            continue
        legacy = path + ".legacy"   # pre-commit runs the hook it replaced from here, first
        if is_shim(legacy):
            missing[hook] = (f"grite's shim was moved to {legacy} and runs before the hook "
                             f"manager's own {hook} hooks")
            continue
        missing[hook] = (f"{path} is not grite's shim" if os.path.lexists(path)
                         else f"no {hook} hook in {hooks_dir}")
    return missing


def uninstall(hooks_dir: str, user: str | None = None) -> list[HookChange]:
    """Remove the shims and put back what was there before, wherever a manager moved them.

    While another repository still uses the shims here (a shared core.hooksPath), they stay.
    """
    if user:
        others = [u for u in remove_user(hooks_dir, user)]
        if others:
            return [HookChange(h, "kept", f"still used by {', '.join(others)}") for h in HOOKS]
    changes = []
    for hook in HOOKS + HUB_HOOKS:
        path = os.path.join(hooks_dir, hook)
        chained = chained_path(hooks_dir, hook)
        if not os.path.lexists(chained) and os.path.lexists(path + OLD_CHAINED):
            chained = path + OLD_CHAINED
        shims = _moved_shims(hooks_dir, hook)
        if hook in HUB_HOOKS and not shims:
            continue   # never installed here: nothing of grite's to sort out
        if not shims:
            if os.path.lexists(chained):
                changes.append(HookChange(hook, "skipped", f"{path} is no longer grite's shim; "
                                          f"{chained} left for you to sort out"))
            continue
        for shim in shims:
            where = "" if shim == path else f" (moved to {shim} by a hook manager)"
            if os.path.lexists(chained):   # what was there goes back where the shim now is
                os.replace(chained, shim)
                changes.append(HookChange(hook, "restored", f"{shim} is the hook that was "
                                          f"there{where}"))
            else:
                os.unlink(shim)
                changes.append(HookChange(hook, "removed", where.strip(" ()")))
    own = os.path.join(hooks_dir, OWN_DIR)
    try:
        users = os.path.join(own, USERS)
        if os.path.exists(users):
            os.unlink(users)
        os.rmdir(own)   # only if empty: anything left there is reported above
    except OSError:
        pass
    return changes


# -- who uses a hooks directory ---------------------------------------------------------

def _users_path(hooks_dir: str) -> str:
    return os.path.join(hooks_dir, OWN_DIR, USERS)


def users(hooks_dir: str) -> list[str]:
    """Repositories (common dirs) whose grite installed the shims here and still exist."""
    try:
        with open(_users_path(hooks_dir), encoding="utf-8") as f:
            listed = [ln for ln in f.read().splitlines() if ln]
    except OSError:
        return []
    return [u for u in dict.fromkeys(listed)
            if os.path.isfile(os.path.join(u, "grite", "sync", "installed.json"))]


def add_user(hooks_dir: str, user: str) -> None:
    from git_brat.files import atomic_write
    current = users(hooks_dir)
    if user not in current:
        atomic_write(_users_path(hooks_dir), "".join(f"{u}\n" for u in [*current, user]).encode())


def remove_user(hooks_dir: str, user: str) -> list[str]:
    """Drop user from the list; the others still using the shims here."""
    from git_brat.files import atomic_write
    others = [u for u in users(hooks_dir) if u != user]
    if os.path.isdir(os.path.join(hooks_dir, OWN_DIR)):
        atomic_write(_users_path(hooks_dir), "".join(f"{u}\n" for u in others).encode())
    return others


def _write_shim(path: str, text: bytes) -> None:
    # Atomic and already executable: a git running hooks right now sees the old file or the new.
    import tempfile
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".grite-", suffix="~")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(text)
            os.fchmod(f.fileno(), 0o755)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
