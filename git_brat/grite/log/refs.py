"""The layout of grite's refs, on this clone and on the remotes it syncs through.

Which refs hold event logs (and their tips), what each remote's fetch refspec is, where a
replica's log is published, how a log commit holds its events blob, where grite keeps its local
data, and how git is run for transport (never prompting, never re-entering our hooks).
"""

from __future__ import annotations

import os

from git_brat.errors import CorruptObject
from git_brat.git import run as git
from git_brat.git.objects import CommitInfo
from git_brat.git.store import Store

WAL = "refs/grite/wal"
# Refs whose commits are event logs; everything grite reads to build state.
LOG_PREFIXES = (b"refs/grite/wal", b"refs/grite/replicas/", b"refs/grite/attic/")
REMOTE_LOG_INFIX = b"/grite/replicas/"
REMOTE_WAL_SUFFIX = b"/grite/wal"   # a peer clone's own log, fetched straight from it
EVENTS = b"events"                  # the one blob in a log commit's tree
SKIP_HOOKS_ENV = git.SKIP_HOOKS   # set for git processes grite runs itself: no hook re-entry
# Exactly what the post-merge/post-rewrite shims compare against `sync/imported`.
STAMP_PATTERNS = ["refs/remotes/**/grite/replicas/*", "refs/remotes/**/grite/wal"]


def refspec(remote: str) -> str:
    return f"+refs/grite/*:refs/remotes/{remote}/grite/*"


def replica_ref(replica_id: str) -> str:
    return f"refs/grite/replicas/{replica_id}"


def net_timeout() -> float:
    """Seconds one fetch or push may take (GRITE_NET_TIMEOUT, default 120)."""
    try:
        return float(os.environ.get("GRITE_NET_TIMEOUT", "120"))
    except ValueError:
        return 120.0


def transport_env() -> dict:
    # Never prompt (a hook or a script must not hang on a password); never re-enter our hooks.
    return git.environment("transport")


def is_synced(store: Store, remote: str) -> bool:
    return refspec(remote) in store.config_get_all(f"remote.{remote}.fetch")


def synced_remotes(store: Store) -> list[str]:
    return [r for r in store.remotes() if is_synced(store, r)]


def grite_dir(store: Store) -> str:
    """Local, rebuildable grite data; in the common dir so every worktree shares it."""
    return os.path.join(store.common_dir, "grite")


def is_log_ref(name: bytes | str) -> bool:
    """True for refs holding event logs; lock refs and everything else are not logs."""
    if isinstance(name, str):
        name = name.encode()
    if name.startswith(b"refs/grite/"):
        return name.startswith(LOG_PREFIXES)
    return name.startswith(b"refs/remotes/") and b"/grite/locks/" not in name and (
        REMOTE_LOG_INFIX in name or name.endswith(REMOTE_WAL_SUFFIX))


def log_tips(store: Store) -> dict[str, str]:
    """Every event-log ref grite reads (local wal, replicas, fetched replicas) -> tip sha."""
    refs = store.refs
    found: dict[bytes, bytes] = {}
    for prefix in LOG_PREFIXES:
        found.update(refs.under(prefix))
    packed = refs.packed()
    for part in (REMOTE_LOG_INFIX, REMOTE_WAL_SUFFIX + b"\n"):
        found.update(packed.containing(part, within=b"refs/remotes/"))
    found.update(refs.loose_under(b"refs/remotes/", prune=b"grite/locks"))
    return {n.decode(): s.decode() for n, s in found.items() if is_log_ref(n)}


def write_log_commit(store: Store, payload: bytes, parent: bytes | None, message: str,
                     author: bytes, when: int, body: str = "") -> bytes:
    """Write blob `events` + tree + commit (objects only, no ref change); return commit sha.
    `body`: the message's lines after the subject (a batch's signature trailers)."""
    return store.objects.write_record_commit(EVENTS, payload, parent, message, author, when, body)


def read_log_blob(store: Store, commit: CommitInfo) -> bytes:
    """The events blob of a log commit already read; raise CorruptObject."""
    try:
        return store.objects.tree_blob(commit.tree, EVENTS)
    except Exception as exc:
        raise CorruptObject(commit.sha.decode(),
                            f"events blob unreadable: {exc or type(exc).__name__}") from exc


def events_blob(store: Store, commit: str) -> bytes | None:
    """The events blob of one log commit, read in-process; None if anything is unreadable."""
    try:
        return read_log_blob(store, store.objects.read_commit(commit.encode()))
    except CorruptObject:
        return None
