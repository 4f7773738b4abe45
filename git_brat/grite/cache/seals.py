"""Who signed each lease record, checked once: the judges model.leases.fold asks.

A record's signature (trailers of its commit message, like a batch's) is checked the first time
a process reads it; a good one is kept in .git/grite/lease-seals (local, rebuildable: the
commit id and the key, appended), so a replay that reads every renew of a long session checks
each signature once per clone, not once per command. Records are content-addressed: what a
commit id was signed by never changes.
"""

from __future__ import annotations

import base64
import os
from typing import TYPE_CHECKING, Callable

from git_brat.grite.log import sign
from git_brat.grite.log.refs import grite_dir
from git_brat.grite.model.leases import ENTRY, Seal

if TYPE_CHECKING:
    from git_brat.git.store import Store

_SEALS: dict[bytes, Seal] = {}     # commit id (hex) -> its seal, in this process
_KEPT: dict[str, dict[bytes, str]] = {}   # seals file -> (raw commit id -> key) read from it
SEALS_KEPT = 200_000
_ENTRY = 20 + 32                   # a raw commit id, a raw Ed25519 public key


def _path(store: "Store") -> str:
    return os.path.join(grite_dir(store), "lease-seals")


def _kept(path: str) -> dict[bytes, str]:
    found = _KEPT.get(path)
    if found is None:
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError:
            data = b""
        found = {data[i:i + 20]: base64.b64encode(data[i + 20:i + _ENTRY]).decode()
                 for i in range(0, len(data) - _ENTRY + 1, _ENTRY)}
        _KEPT[path] = found
    return found


def remember(store: "Store", sha: bytes, key: str) -> None:
    """Keep that commit sha carries key's good signature (its writer here, or a check)."""
    _SEALS[sha] = Seal(key)
    path = _path(store)
    raw = bytes.fromhex(sha.decode())
    kept = _kept(path)
    if raw in kept:
        return
    kept[raw] = key
    try:
        with open(path, "ab") as f:
            f.write(raw + base64.b64decode(key))
    except OSError:   # a read-only clone: checked again next time
        pass


def seal(store: "Store", sha: bytes) -> Seal:
    """Who signed the lease record at sha (checked once per clone)."""
    got = _SEALS.get(sha)
    if got is None:
        got = _read(store, sha)
        if len(_SEALS) > SEALS_KEPT:
            _SEALS.clear()
        _SEALS[sha] = got
    return got


def _read(store: "Store", sha: bytes) -> Seal:
    kept = _kept(_path(store)).get(bytes.fromhex(sha.decode()))
    if kept is not None:   # (checked before: the commit id fixes its message and blob)
        return Seal(kept)
    try:
        commit = store.objects.read_commit(sha)
        signature = sign.parse(commit.message)
        if signature is None:
            return Seal()
        payload = store.objects.tree_blob(commit.tree, ENTRY)
        sign.verify_lease(signature, payload, commit.parents[0] if commit.parents else None)
    except sign.BadSignature as exc:
        return Seal(None, str(exc))
    except Exception as exc:  # noqa: BLE001 - missing, truncated, no lease blob: counts as unsigned-bad
        return Seal(None, f"unreadable: {exc or type(exc).__name__}")
    remember(store, sha, signature.key)
    return Seal(signature.key)


def judges(store: "Store") -> tuple[Callable[[bytes], Seal], Callable[[str], bool]]:
    """(seal, trusts) for model.leases.fold; the trusted keys are read only if a record asks
    (an override: rare), and afresh each time (`git grite trust add` counts at once)."""
    trusted: list[set[str]] = []

    def trusts(key: str) -> bool:
        if not trusted:
            from git_brat.grite.log.verify import trusted_keys
            trusted.append(trusted_keys(store))
        return key in trusted[0]
    return (lambda sha: seal(store, sha)), trusts
