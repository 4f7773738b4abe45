"""Where leases are decided and for how long: flags over git config over the committed [locks] table."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import msgspec

from git_brat import approvals
from git_brat.errors import NotFound, UsageError
from git_brat.grite.locks.lease import DEFAULT_REMOTE_TIMEOUT, DEFAULT_SKEW, DEFAULT_TTL, MAX_TTL

if TYPE_CHECKING:
    from git_brat.git.store import Store


class Settings(msgspec.Struct):
    remote: str | None
    ttl: float
    skew: float
    fallback: bool = True
    timeout: float = DEFAULT_REMOTE_TIMEOUT
    waiting: str = ""            # a committed [locks] remote not in effect: why (say it)
    by_name: bool = False        # remote is `origin` only for its name, among several synced

    @property
    def skew_ms(self) -> int:
        return int(self.skew * 1000)


def settings(store: "Store", remote: str | None = None, local: bool = False,
             ttl: float | None = None, skew: float | None = None,
             fallback: bool = True) -> Settings:
    """Flags override git config (grite.lockRemote/lockTtl/lockSkew/lockTimeout) over defaults."""
    cfg = store.config_matching(r"^(grite\.lock[a-z]*|remote\..*\.url)$")

    def seconds(key: str, flag: str, given: float | None, default: float, low: float) -> float:
        if given is not None:
            value, where = given, flag
        elif key.lower() in cfg:
            where = f"git config {key}={cfg[key.lower()]}"
            try:
                value = float(cfg[key.lower()])
            except ValueError:
                raise UsageError(f"bad {where}: expected seconds")
        else:
            return default
        if not (low <= value <= MAX_TTL):
            raise UsageError(f"bad {where}: expected seconds between {low:g} and {MAX_TTL:g}")
        return value

    ttl_s = seconds("grite.lockTtl", "--ttl", ttl, DEFAULT_TTL, 0.001)
    skew_s = seconds("grite.lockSkew", "--skew", skew, DEFAULT_SKEW, 0.0)
    timeout = seconds("grite.lockTimeout", "", None, DEFAULT_REMOTE_TIMEOUT, 0.1)
    committed, waiting = committed_remote(store)
    if local:
        name, src = None, ""
    elif remote:
        name, src = remote, "--remote"
    else:
        name, src = lock_remote(store, cfg, committed)
    if name is not None:
        _check_remote_name(store, name, src, committed=src.startswith("[locks] remote"))
    if name is not None and f"remote.{name}.url" not in cfg:
        path = _local_path(name)
        # Relative to the top of the work tree, as `git push ../hub.git` takes it.
        if path is not None and not os.path.exists(os.path.join(store.toplevel() or store.git_dir,
                                                                path)):
            if "/" not in name and ":" not in name:
                raise NotFound(f"no remote named {name!r} ({src}); see `git remote -v`")
            # A configured path that is gone is unreachable (an unmounted share) and falls
            # back; a path typed on this command line that does not exist is a mistake.
            if remote:
                raise NotFound(f"{src} {name!r}: no such repository (the path does not exist)")
    return Settings(name, ttl_s, skew_s, fallback, timeout, waiting, by_name=src == AMONG)


def _check_remote_name(store: "Store", name: str, src: str, committed: bool) -> None:
    """Refuse a lock remote that is no remote: an option (`--upload-pack=…` runs a command) or,
    from the committed file, anything but one of this clone's configured remotes.

    The committed file is written by whoever can push: a URL there would send this clone's
    lease traffic (and credentials) wherever they like, so it may only name a remote this
    clone's own git config defines. A URL typed on the command line or put in this clone's
    git config is the user's own choice.
    """
    if name.startswith("-") or any(ord(c) < 0x20 or ord(c) == 0x7f for c in name):
        raise UsageError(f"{src}: {name!r} is not a remote name or URL; "
                         f"name one of `git remote` (or pass --local)")
    if committed and name not in store.remotes():
        raise UsageError(f"{src} names {name!r}, which is not a remote of this clone (the "
                         f"committed file may only name a remote, never a URL); add it with "
                         f"`git remote add {name} <url>` if it is yours, or pass --remote/--local")


def _local_path(url: str) -> str | None:
    """The filesystem path a git URL names, or None for a network URL (as git tells them apart)."""
    if "://" in url:
        return url[len("file://"):] if url.startswith("file://") else None
    colon, slash = url.find(":"), url.find("/")
    if colon > 0 and (slash < 0 or colon < slash):
        return None   # scp-like host:path
    return url


BRAT_CONFIG = ".brat/config.toml"
AMONG = "origin, among the remotes syncing grite state"   # chosen by its name only


def committed_locks_table(store: "Store") -> dict:
    """The `[locks]` table of `.brat/config.toml` as HEAD has it ({} when there is none).

    Read from the commit, not the work tree: a committed file is the same for every clone,
    which is the point of naming the lock remote there. (grite knows nothing else of brat's
    config; `git brat config` validates the rest.)
    """
    import tomllib
    data = store.objects.committed_file(BRAT_CONFIG)
    if data is None:
        return {}
    try:
        table = tomllib.loads(data.decode("utf-8")).get("locks", {})
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"{BRAT_CONFIG} (as committed at HEAD) is not valid TOML: {exc}; "
                         f"fix it and commit, or pass --remote / --local")
    if not isinstance(table, dict) or not isinstance(table.get("remote", ""), str):
        raise UsageError(f"{BRAT_CONFIG} (as committed at HEAD): [locks] remote must be "
                         f"a remote name")
    return table


def committed_remote(store: "Store") -> tuple[str, str]:
    """The committed `[locks] remote` in effect here ("" for none), and why one is not.

    It decides where leases go, so like every such setting it takes effect only once this
    user approved it (`git brat trust`, recorded locally); until then it waits, said in words,
    and leases are decided as if it were not there. A hub (a bare repository) never reads it:
    its main is whatever was pushed last, and a hub runs only what its admin configured in
    its own files (git config grite.lockRemote).
    """
    if store.bare:
        return "", ""
    try:
        named = committed_locks_table(store).get("remote", "")
    except UsageError as exc:
        named, why = "", exc.message
    else:
        if not named or named == approvals.approved(store.common_dir, "locks.remote", ""):
            return named, ""
        why = f"[locks] remote = {named!r} in {BRAT_CONFIG} (as committed at HEAD)"
    return "", (f"{why}: waits for approval (`git brat trust` approves the committed file), so "
                f"leases are decided as without it")


def lock_remote(store: "Store", cfg: dict[str, str],
                committed: str | None = None) -> tuple[str | None, str]:
    """The remote leases are decided on, and where that came from (DESIGN.md section 6).

    `[locks] remote` in the committed .brat/config.toml once approved, else git config
    grite.lockRemote, else the only remote syncing grite state, else `origin` among several.
    With remotes syncing and none of these, the command is refused: a lease taken locally
    there would let two clones hold it. No synced remote: local leases (None).
    """
    from git_brat.grite.log.refs import synced_remotes
    named = committed_remote(store)[0] if committed is None else committed
    if named:
        return named, f"[locks] remote in {BRAT_CONFIG}"
    if cfg.get("grite.lockremote"):
        return cfg["grite.lockremote"], "git config grite.lockRemote"
    remotes = synced_remotes(store)
    if len(remotes) == 1:
        return remotes[0], f"the only remote syncing grite state ({remotes[0]})"
    if "origin" in remotes:
        return "origin", AMONG
    if remotes:
        raise UsageError(f"which remote decides leases is ambiguous: {', '.join(remotes)} all "
                         f"sync grite state; name one in [locks] remote in {BRAT_CONFIG} "
                         f"(committed, so every clone agrees) or with `git config "
                         f"grite.lockRemote NAME`, or pass --remote NAME")
    return None, ""
