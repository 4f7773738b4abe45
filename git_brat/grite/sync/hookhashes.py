"""Every hook git may run beside grite's shims, by sha256: recorded when grite is installed, so
`doctor` can tell a hook changed or added since (an agent runs with the user's permissions and
can drop one in, visible or hidden in grite's own directory) from one the user had."""

from __future__ import annotations

import hashlib
import os

import msgspec

from git_brat.files import atomic_write
from git_brat.git.store import Store
from git_brat.grite.log.refs import grite_dir
from git_brat.grite.sync import shims

MAX_HOOKS = 1000   # entries looked at per directory: a flood is a finding of its own, not a hang


class HookFile(msgspec.Struct):
    path: str
    sha256: str
    hidden: bool          # under grite's own directory (<hooks>/.grite/), out of plain sight
    state: str            # recorded | changed (since install) | unknown (appeared since)


def record_path(store: Store) -> str:
    return os.path.join(grite_dir(store), "sync", "hooks.json")


def _sha256(path: str) -> str:
    """The file's sha256 (a symlink: of where it points, as text, and what it points at)."""
    h = hashlib.sha256()
    if os.path.islink(path):
        h.update(b"symlink:" + os.fsencode(os.readlink(path)) + b"\0")
    try:
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 16), b""):
                h.update(chunk)
    except OSError:
        h.update(b"(unreadable)")
    return h.hexdigest()


def present(hooks_dir: str) -> dict[str, tuple[str, bool]]:
    """path -> (sha256, hidden) of every hook file but grite's shims: the visible ones git runs
    itself (not *.sample) and everything under grite's own directory (chained hooks)."""
    out: dict[str, tuple[str, bool]] = {}
    own = os.path.join(hooks_dir, shims.OWN_DIR)
    try:
        names = sorted(os.listdir(hooks_dir))[:MAX_HOOKS]
    except OSError:
        names = []
    for name in names:
        path = os.path.join(hooks_dir, name)
        if name == shims.OWN_DIR or name.endswith(".sample") or os.path.isdir(path) \
                or shims.is_shim(path):
            continue
        out[path] = (_sha256(path), False)
    count = 0
    for root, dirs, files in os.walk(own):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(root, name)
            if root == own and name == shims.USERS:
                continue
            count += 1
            if count > MAX_HOOKS:
                return out
            out[path] = (_sha256(path), True)
    return out


def _recorded(store: Store) -> dict[str, str] | None:
    try:
        with open(record_path(store), "rb") as f:
            return msgspec.json.decode(f.read(), type=dict[str, str])
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None


def record(store: Store, hooks_dir: str, accept: bool = True) -> None:
    """Remember the hooks there as they are now (`accept`: the user installs, so what is there
    is theirs). Without `accept` (a repair), only a first record is written: a repair never
    vouches for a hook that changed."""
    if not accept and _recorded(store) is not None:
        return
    known = {p: sha for p, (sha, _hidden) in present(hooks_dir).items()}
    atomic_write(record_path(store), msgspec.json.encode(known))


def check(store: Store, hooks_dir: str) -> list[HookFile]:
    """Every hook file there, each recorded, changed since install or unknown."""
    known = _recorded(store) or {}
    out = []
    for path, (sha, hidden) in present(hooks_dir).items():
        state = "recorded" if known.get(path) == sha else "changed" if path in known \
            else "unknown"
        out.append(HookFile(path, sha, hidden, state))
    return out


def changed_shims(hooks_dir: str) -> list[str]:
    """grite's shims there whose bytes differ from the ones this grite ships (a line added)."""
    out = []
    for hook in shims.HOOKS + shims.HUB_HOOKS:
        path = os.path.join(hooks_dir, hook)
        if not shims.is_shim(path):
            continue
        try:
            with open(path, "rb") as f:
                same = f.read() == shims.shim_text(hook)
        except OSError:
            same = False
        if not same:
            out.append(path)
    return out


__all__ = ["HookFile", "record", "check", "changed_shims", "present", "record_path"]
