"""The layout of grite's refs, on this clone and on the remotes it syncs through.

Which refs hold event logs, what each remote's fetch refspec is, where a replica's log is
published, and how git is run for transport (never prompting, never re-entering our hooks).
"""

from __future__ import annotations

import os

from git_brat.git.store import Store

WAL = "refs/grite/wal"
SKIP_HOOKS_ENV = "GRITE_SKIP_HOOKS"   # set for git processes grite runs itself: no hook re-entry
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
    return dict(os.environ, **{SKIP_HOOKS_ENV: "1", "GIT_TERMINAL_PROMPT": "0"})


def is_synced(store: Store, remote: str) -> bool:
    return refspec(remote) in store.config_get_all(f"remote.{remote}.fetch")


def synced_remotes(store: Store) -> list[str]:
    return [r for r in store.remotes() if is_synced(store, r)]
