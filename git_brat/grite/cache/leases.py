"""The lease records this clone has, as replay's judge of the log's lease tokens."""

from __future__ import annotations

import contextlib
import re
from typing import TYPE_CHECKING, NamedTuple

import msgspec

from git_brat.errors import CorruptObject, GriteError, UsageError
from git_brat.process import now_ms
from git_brat.grite.cache import seals
from git_brat.grite.model.leases import (ENTRY, LOCKS, Grants, Lease, fold, lease_decoder, ref_for,
                                         verdict)

if TYPE_CHECKING:
    from git_brat.git.store import Store

CHAIN = 100            # records read back from a lease ref's tip to decide the lease now
GRANTS_CHAIN = 10_000  # records read back to know every token a ref granted (and how)

# Records are content-addressed: what a sha says never changes, so a long-lived process (a
# witness renewing every few seconds) reads each one once.
_RECORDS: dict[bytes, tuple[Lease, bytes | None]] = {}
RECORDS_KEPT = 200_000


def record(store: "Store", sha: bytes) -> tuple[Lease, bytes | None]:
    """(the record, its parent's sha); CorruptObject when it does not read or decode."""
    got = _RECORDS.get(sha)
    if got is None:
        data, parents = store.objects.read_record(sha, ENTRY)
        try:
            got = (lease_decoder.decode(data), parents[0] if parents else None)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise Undecodable(sha.decode(), f"lease record does not decode ({exc})",
                              parents[0] if parents else None) from exc
        if len(_RECORDS) > RECORDS_KEPT:
            _RECORDS.clear()
        _RECORDS[sha] = got
    return got


class Undecodable(CorruptObject):
    """A lease commit that reads but whose record does not decode (not JSON, a field of the
    wrong type or past its bounds): anyone can push one, so it is skipped like a forged
    record, and the chain goes on to its parent."""

    def __init__(self, sha: str, why: str, parent: bytes | None):
        super().__init__(sha, why)
        self.why, self.parent = why, parent


class Chain(NamedTuple):
    records: list[tuple[bytes, Lease]]   # oldest first
    root: bool                           # the oldest is the ref's first record
    unreadable: list[tuple[bytes, str]]  # records skipped: (sha, why), newest first


def chain(store: "Store", sha: bytes, limit: int) -> Chain:
    """The records of a ref from its tip back (at most limit), and those skipped because they
    do not decode. A commit that cannot be read at all ends the chain there; CorruptObject
    only when no record can be read."""
    records: list[tuple[bytes, Lease]] = []
    unreadable: list[tuple[bytes, str]] = []
    at: bytes | None = sha
    while at and len(records) + len(unreadable) < limit:
        try:
            lease, parent = record(store, at)
        except Undecodable as exc:
            unreadable.append((at, exc.why))
            at = exc.parent
            continue
        except CorruptObject:
            if not records:
                raise
            break
        records.append((at, lease))
        at = parent
    if not records:
        raise CorruptObject(sha.decode(), unreadable[0][1] if unreadable else
                            "no lease record could be read")
    records.reverse()
    return Chain(records, at is None, unreadable)


BULK_AFTER = 4         # tokens judged one by one in many() before every record is read at once


def _prefetch(store: "Store", tips: list[str]) -> None:
    """Every record of these lease refs into the memo: one rev-list, one cat-file."""
    try:
        parents = store.catfile.parents(tips)
    except GriteError:
        return   # read one by one then, which names what is unreadable
    todo = [c for c in parents if c.encode() not in _RECORDS]
    if len(_RECORDS) + len(todo) > RECORDS_KEPT:
        return
    for commit, data in store.catfile.cat_blobs(todo, ENTRY.decode()):
        if data is None or not isinstance(data, (bytes, memoryview)):
            continue
        try:
            lease = lease_decoder.decode(data)
        except (msgspec.DecodeError, msgspec.ValidationError):
            continue
        up = parents.get(commit) or []
        _RECORDS[commit.encode()] = (lease, up[0].encode() if up else None)


Basis = list[str]   # the tips of a resource's lease refs a judgement was made on ("" = none)


class LeaseRecords:
    """Judges each LeaseToken of the log by the records of its lease ref this clone has.

    Anyone who can push writes events, so a token is believed only when a record grants it:
    the lease's own ref here, and its copies fetched from each remote (a plain `git fetch`
    mirrors a hub's leases to refs/remotes/<r>/grite/locks/). A token past every record is
    not yet fetched or forged; one whose previous lease ended other than its records say is
    forged. With no record of the resource at all there is nothing to judge by: believed.

    judge() answers (why not believed or None, basis); basis is not None when the answer
    may change once more records arrive (the state keeps it, and a load compares it with
    tips(): only those few resources are looked at again).
    """

    def __init__(self, store: "Store"):
        self.store = store
        self._grants: dict[tuple[str, ...], list[Grants] | None] = {}
        self.now = now_ms   # the clock a record's claimed times are bounded by
        self._scope = 0     # > 0 inside many(): judgements of many tokens at once
        self._judged = 0
        self._index: dict[bytes, bytes] | None = None   # every lease ref -> tip, within many()

    @contextlib.contextmanager
    def many(self):
        """Judge many tokens (a replay): past the first few, every lease ref is read at once
        and every record through one git process, instead of a ref and three objects a token."""
        self._scope += 1
        try:
            yield self
        finally:
            self._scope -= 1
            if not self._scope:
                self._index, self._judged = None, 0

    def _read_all(self) -> dict[bytes, bytes]:
        refs = self.store.refs
        index = dict(refs.under(LOCKS))
        index.update((n, s) for n, s in refs.under(b"refs/remotes/").items()
                     if b"/grite/locks/" in n)
        _prefetch(self.store, sorted({s.decode() for s in index.values()}))
        return index

    def _refs(self, resource: str) -> list[bytes]:
        own = ref_for(resource)
        rest = own[len(LOCKS):]
        return [own] + [b"refs/remotes/" + r.encode() + b"/grite/locks/" + rest
                        for r in self._remotes()]

    def _remotes(self) -> list[str]:
        keys = self.store.config_matching(r"^remote\..+\.url$")
        return sorted(_named(keys))

    def tips(self, resource: str) -> Basis:
        """The tips of the resource's lease refs here, in a fixed order ("" where none)."""
        try:
            refs = self._refs(resource)
        except UsageError:
            return []
        if self._scope:
            self._judged += 1
            if self._index is None and self._judged > BULK_AFTER:
                self._index = self._read_all()
        if self._index is not None:
            return [self._index.get(r, b"").decode() for r in refs]
        read = self.store.refs.read
        return [(read(r) or b"").decode() for r in refs]

    def grants(self, tips: Basis) -> list[Grants] | None:
        """What each ref whose tip is given grants (None when no ref has a record)."""
        key = tuple(tips)
        if key in self._grants:
            return self._grants[key]
        out: list[Grants] = []
        for sha in tips:
            if not sha:
                continue
            try:
                records, root, _skipped = chain(self.store, sha.encode(), GRANTS_CHAIN)
            except CorruptObject:
                continue   # an unreadable lease ref grants nothing (doctor names it)
            out.append(fold(records, self.now(), root, *seals.judges(self.store))[2])
        found = out or None
        if len(self._grants) > 10_000:
            self._grants.clear()
        self._grants[key] = found
        return found

    def judge(self, resource: str, token: int, prev_end: int) -> tuple[str | None, Basis | None]:
        tips = self.tips(resource)
        if not tips:
            return None, None   # names no lease ref: no record can ever judge it
        grants = self.grants(tips)
        if grants is None:
            return None, tips   # nothing to judge by (yet): as before, believed
        why = verdict(resource, token, prev_end, grants)
        # (Past every record it may be one not fetched yet: that answer may change.)
        return why, tips if why is not None and token > max(g.top for g in grants) else None


_REMOTE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def _named(keys) -> set[str]:
    """Remote names that can name a ref directory as they are (no '/', no '..')."""
    names = {k[len("remote."):-len(".url")] for k in keys}
    return {n for n in names if _REMOTE.match(n) and ".." not in n}


