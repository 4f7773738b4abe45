"""Log batches `doctor --fix` set aside for good on this clone: replay and imports skip them.

A fetched batch whose events blob git reads but grite cannot (not msgpack, nested too deep, past
the size bound) is poison, not damage: deleting the log that holds it only lasts until the next
fetch brings it back. It is recorded here instead (.git/grite/quarantine.json, local, never
synced) by commit and by the digest of its blob, so both the per-commit read and the streamed
read skip it, silently; `git grite doctor` lists each one as `quarantined`, and
`git grite doctor --unquarantine <commit>` takes one back.
"""

from __future__ import annotations

import os

import msgspec

from git_brat.files import FileLock, atomic_write
from git_brat.git.store import Store
from git_brat.grite.log.refs import grite_dir


class Entry(msgspec.Struct):
    sha: str        # the log commit
    blob: str       # digest of its events blob (verify.digest, hex)
    ref: str        # the log ref it was found in
    detail: str     # why it could not be read
    at_ms: int = 0


def _path(store: Store) -> str:
    return os.path.join(grite_dir(store), "quarantine.json")


def load(store: Store) -> list[Entry]:
    try:
        with open(_path(store), "rb") as f:
            return msgspec.json.decode(f.read(), type=list[Entry])
    except FileNotFoundError:
        return []
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return []   # (a damaged record quarantines nothing: the batches are reported again)


def commits(store: Store) -> set[str]:
    return {e.sha for e in load(store)}


def digests(store: Store) -> set[bytes]:
    return {bytes.fromhex(e.blob) for e in load(store) if e.blob}


def _update(store: Store, change) -> list[Entry]:
    path = _path(store)
    with FileLock(path + ".lock", timeout=30):
        entries = load(store)
        out = change(entries)
        if out:
            atomic_write(path, msgspec.json.encode(entries))
    return out


def add(store: Store, new: list[Entry]) -> list[Entry]:
    """Record new (those already held are left as they are); the entries added."""
    def change(entries: list[Entry]) -> list[Entry]:
        held = {e.sha for e in entries}
        added = [e for e in new if e.sha not in held]
        entries.extend(added)
        return added
    return _update(store, change)


def remove(store: Store, prefix: str) -> list[Entry]:
    """Take back the entries whose commit starts with prefix (at least 7 hex digits)."""
    def change(entries: list[Entry]) -> list[Entry]:
        gone = [e for e in entries if e.sha.startswith(prefix)]
        entries[:] = [e for e in entries if not e.sha.startswith(prefix)]
        return gone
    return _update(store, change)
