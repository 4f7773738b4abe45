"""Lease locks: compare-and-swap on refs/grite/locks/*, locally or through a remote, with fencing tokens.

The public face: callers write `from git_brat.grite import locks; locks.acquire(...)`. The parts,
each importing only those before it:
  lease     names, holders, records and the pure decisions (previous record in, next out)
  settings  where leases are decided and for how long
  authority which hub decides them, whatever this clone calls it
  cas       the compare-and-swap engine; acquire, renew, release
  status    every lease this clone knows of; gc (memo keeps what records said)
  fence     writing events under a lease
"""

from __future__ import annotations

from git_brat.errors import RemoteUnreachable
from git_brat.grite.locks.authority import Outage
from git_brat.grite.locks.cas import RemoteFailed, acquire, release, renew
from git_brat.grite.locks.fence import append_fenced, fence
from git_brat.grite.locks.lease import (
    DEFAULT_SKEW, DEFAULT_TTL, LOCKS, MAX_NAME, MAX_TTL, Forged, Holder, Lease, LeaseHeld,
    LeaseView, Outcome, current, default_holder_id, effective, history, holder_for, judge,
    lock_entity, parse_resource, read_lease, ref_for, refname_problem, resource_of, view)
from git_brat.grite.locks.settings import Settings, committed_locks_table, lock_remote, settings
from git_brat.grite.locks.status import Status, gc, status, ungrounded_tokens

__all__ = [
    "DEFAULT_SKEW", "DEFAULT_TTL", "LOCKS", "MAX_NAME", "MAX_TTL", "Forged", "Holder", "Lease",
    "LeaseHeld", "LeaseView", "Outage", "Outcome", "RemoteFailed", "RemoteUnreachable", "Settings",
    "Status", "acquire", "append_fenced", "committed_locks_table", "current",
    "default_holder_id", "effective", "fence", "gc", "history", "holder_for", "judge",
    "lock_entity", "lock_remote", "parse_resource", "read_lease", "ref_for", "refname_problem",
    "release", "renew", "resource_of", "settings", "status", "ungrounded_tokens", "view"]
