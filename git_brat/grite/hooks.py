"""Install and remove the hook shims, chaining (and later restoring, byte for byte) existing hooks.

An existing hook `H` is renamed to `H.grite-chained` (rename keeps bytes, mode and times) and the
shim runs it first with the same arguments and stdin. Uninstall renames it back, or deletes a shim
that had nothing to chain. A shim bakes in the interpreter and package location of the grite that
installed it, so hooks work whatever PATH the user's git runs them with.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from pathlib import Path

import msgspec

from git_brat.grite.errors import GriteError

HOOKS = ("reference-transaction", "post-merge", "post-rewrite", "pre-push")
HUB_HOOKS = ("post-receive",)   # git-brat's hub (`git brat init --hub`): installed only there
MARK = b"# git-grite hook shim"
CHAINED = ".grite-chained"


class HookChange(msgspec.Struct):
    hook: str
    action: str          # installed | chained | updated | unchanged | skipped | restored | removed
    detail: str = ""


def shim_dir() -> Path:
    """The hooks/ directory of this checkout, or the copy a wheel installed under share/."""
    here = Path(__file__).resolve().parents[2] / "hooks"
    for candidate in (here, Path(sysconfig.get_path("data")) / "share" / "git-brat" / "hooks"):
        if (candidate / HOOKS[0]).is_file():
            return candidate
    raise GriteError(f"grite hook shims not found (looked in {here}); reinstall git-brat")


def _sh_quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def shim_text(hook: str) -> bytes:
    """The shim for `hook`, with this interpreter and package location filled in."""
    import git_brat
    root = str(Path(git_brat.__file__).resolve().parent.parent)
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


def install(hooks_dir: str, leave_alone: dict[str, str] | None = None,
            names: tuple[str, ...] = HOOKS) -> list[HookChange]:
    """Put a shim in place of every hook grite needs (or of `names`); idempotent.

    `leave_alone`: hook -> why grite must not touch it (e.g. a hook file git tracks).
    """
    os.makedirs(hooks_dir, exist_ok=True)
    changes = []
    for hook in names:
        if leave_alone and hook in leave_alone:
            changes.append(HookChange(hook, "skipped", leave_alone[hook]))
            continue
        path = os.path.join(hooks_dir, hook)
        chained = path + CHAINED
        want = shim_text(hook)
        if is_shim(path):
            with open(path, "rb") as f:
                same = f.read() == want
            if same and os.access(path, os.X_OK):
                changes.append(HookChange(hook, "unchanged"))
                continue
            _write_shim(path, want)
            changes.append(HookChange(hook, "updated"))
        elif os.path.lexists(path):
            if os.path.lexists(chained):
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


def uninstall(hooks_dir: str) -> list[HookChange]:
    """Remove the shims and put back what was there before."""
    changes = []
    for hook in HOOKS + HUB_HOOKS:
        path = os.path.join(hooks_dir, hook)
        chained = path + CHAINED
        if hook in HUB_HOOKS and not is_shim(path):
            continue   # never installed here: nothing of grite's to sort out
        if is_shim(path):
            if os.path.lexists(chained):
                os.replace(chained, path)
                changes.append(HookChange(hook, "restored", f"{path} is the hook that was there"))
            else:
                os.unlink(path)
                changes.append(HookChange(hook, "removed"))
        elif os.path.lexists(chained):
            changes.append(HookChange(hook, "skipped", f"{path} is no longer grite's shim; "
                                      f"{chained} left for you to sort out"))
    return changes


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
