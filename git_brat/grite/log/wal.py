"""The write-ahead log: append batches to refs/grite/wal by compare-and-swap; read them back."""

from __future__ import annotations

import os
import random
import time
from typing import Callable, Iterable, Iterator, NamedTuple

import msgspec

from git_brat import process, redact
from git_brat.grite.model import events as ev
from git_brat.errors import Conflict, CorruptObject, GriteError, RefLocked, UsageError
from git_brat.git.catfile import TooLarge
from git_brat.git.objects import CommitInfo
from git_brat.git.store import Store
from git_brat.grite.log.identity import Identity
from git_brat.grite.log.refs import events_blob, grite_dir, read_log_blob, write_log_commit

WAL = b"refs/grite/wal"
# Fewer new commits than this are read in-process; more go through one `git cat-file --batch`.
_BATCH_READ_THRESHOLD = 64


class Draft(NamedTuple):
    """An event before it is stamped with actor, clock and id."""
    entity: str
    op: ev.Op
    fence: ev.Fence | None = None


class Appended(msgspec.Struct):
    commit: str            # "" when there was nothing to write (the change was already made)
    events: list[ev.Event]

    @property
    def written(self) -> bool:
        return bool(self.commit)


class LogUnreadable(Exception):
    """The fast whole-log read met something missing or undecodable."""


class Problem(msgspec.Struct):
    """Something unreadable met while reading logs; replay skipped it."""
    sha: str
    detail: str


def lock_timeout() -> float:
    """How long a writer keeps retrying a locked or contended ref (GRITE_LOCK_TIMEOUT seconds)."""
    try:
        return float(os.environ.get("GRITE_LOCK_TIMEOUT", "10"))
    except ValueError:
        return 10.0


def _pause_before_ref_update() -> None:
    """Tests only: with GRITE_TEST_PAUSE_BEFORE_REF=PATH, wait (at most 30 s) while PATH exists,
    having created PATH.waiting, so a test can run a real `git gc --prune=now` in exactly the
    window between writing a batch's objects and the ref update that acknowledges it."""
    path = os.environ.get("GRITE_TEST_PAUSE_BEFORE_REF")
    if not path:
        return
    with open(path + ".waiting", "w"):
        pass
    deadline = time.monotonic() + 30
    while os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.01)


def head_lamport(store: Store, tip: bytes | None) -> int:
    """Highest Lamport clock this replica has written (read from the tip batch's header)."""
    if tip is None:
        return 0
    try:
        commit = store.objects.read_commit(tip)
        return ev.decode_head(read_log_blob(store, commit)).lamport
    except (CorruptObject, msgspec.DecodeError, msgspec.ValidationError):
        return 0


def append(store: Store, ident: Identity, build: Callable[[bytes | None], list[Draft]],
           summary: Callable[[list[ev.Event]], str], seen_lamport: Callable[[], int] = lambda: 0,
           ref: bytes = WAL) -> Appended:
    """Append one batch atomically; return only after the ref update succeeded.

    `build(tip)` is called on every attempt with the log tip the batch will be chained to (and
    compare-and-swapped against), so callers can validate against state at exactly that tip;
    `seen_lamport` gives the highest clock observed in other logs (for causality).
    """
    from git_brat.grite.log import sign
    signer = sign.Signer(grite_dir(store))
    seen = seen_tips(store, ident.replica.id)   # (read once: nothing more in the swap's window)
    deadline = time.monotonic() + lock_timeout()
    attempt = 0
    while True:
        attempt += 1
        tip = store.refs.read(ref)
        drafts = build(tip)
        if not drafts:   # the change is already there: a no-op writes nothing
            return Appended("", [])
        drafts = [_redacted(d) for d in drafts]
        # Clamped: a clock that came from elsewhere (a cache made before replay bounded
        # clocks) never makes a write impossible.
        base = min(max(head_lamport(store, tip), seen_lamport()), ev.LAMPORT_MAX - len(drafts))
        now_ms = process.now_ms()
        events = [ev.make_event(d.entity, ident.actor.id, base + i + 1, now_ms, d.op, d.fence)
                  for i, d in enumerate(drafts)]
        _refuse_out_of_bounds(events)
        payload = ev.encode_batch(ev.Batch(ev.FORMAT_VERSION, ident.replica.id,
                                           base + len(events), events))
        if len(payload) > ev.MAX_BATCH_BYTES:
            raise UsageError(f"refused: these changes are {len(payload)} bytes, over the "
                             f"{ev.MAX_BATCH_BYTES} one batch may hold: make them in parts")
        message = redact.text(summary(events))
        commit = write_log_commit(store, payload, tip, message, ident.git_author, now_ms // 1000,
                                  signer.trailers(payload, seen))
        _pause_before_ref_update()
        try:
            if store.refs.cas(ref, tip, commit, message=message.encode()):
                store.objects.confirm_written(commit)   # a gc --prune=now meanwhile must not lose it
                return Appended(commit.decode(), events)
        except RefLocked:
            if time.monotonic() > deadline:
                raise
        else:
            if time.monotonic() > deadline:
                raise Conflict(f"could not append to {ref.decode()}: it kept changing "
                               f"under {attempt} attempts; try again")
        # Jittered exponential backoff, capped: contention clears in milliseconds.
        time.sleep(random.uniform(0, min(0.2, 0.002 * (2 ** min(attempt, 7)))))


def _redacted(d: Draft) -> Draft:
    """d with every credential in its texts redacted: what is appended syncs to every clone and
    the hub, whichever command wrote it (a comment, a reason, a check's or an engine's output)."""
    op = d.op
    if isinstance(op, ev.Comment):
        op = msgspec.structs.replace(op, body=redact.text(op.body))
    elif isinstance(op, (ev.Create, ev.SetFields)):
        op = msgspec.structs.replace(op, fields={k: redact.value(v) for k, v in op.fields.items()})
    else:
        return d
    return d._replace(op=op)


def _refuse_out_of_bounds(events: list[ev.Event]) -> None:
    """Write nothing that every replay would reject or skip (see events' bounds)."""
    if len(events) > ev.MAX_BATCH_EVENTS or len({e.entity for e in events}) > ev.MAX_BATCH_ENTITIES:
        raise UsageError(f"{len(events)} changes at once is more than one batch may hold "
                         f"({ev.MAX_BATCH_EVENTS} events over {ev.MAX_BATCH_ENTITIES} entities): "
                         f"make them in parts")
    for e in events:
        why = ev.event_problem(e)
        if why is not None:
            raise UsageError(f"refused: replay would reject this change ({why})")


def seen_tips(store: Store, replica: str) -> dict[str, str]:
    """The tips of the other replicas' logs this clone has seen (recorded in each batch it
    signs, so that a log erased on a remote shows wherever this one is read)."""
    prefix = b"refs/grite/replicas/"
    seen = {name[len(prefix):].decode(): sha.decode()
            for name, sha in store.refs.under(prefix).items()}
    seen.pop(replica, None)
    return seen


def signature_body(store: Store, replica: str, payload: bytes) -> str:
    """Signature trailers for a batch this replica writes (its key is made if absent)."""
    from git_brat.grite.log import sign
    return sign.Signer(grite_dir(store)).trailers(payload, seen_tips(store, replica))


class LogReader:
    """Reads events from log commits, skipping (and recording) whatever is unreadable."""

    def __init__(self, store: Store, verify: bool = True, tips: dict[str, str] | None = None):
        self.store = store
        self._tips = tips   # the log tips judged (None: every log ref's)
        self.problems: list[Problem] = []
        self._verify = verify
        self._skip: set[bytes] | None = None
        self.rejected: list = []   # verify.RejectedBatch: kept in their refs, not believed
        # Disputed actors (see model/disputes): actor -> its holder; read with skip()
        self.disputes: dict[str, str] = {}
        from git_brat.grite.log import quarantine
        # Set aside by `doctor --fix`: skipped without a word (doctor lists them).
        self._quarantined = quarantine.commits(store)

    def skip(self) -> set[bytes]:
        """Digests of events blobs replay must not believe (judged per log ref, once each)."""
        if self._skip is None:
            self._skip = set()
            if self._verify:
                from git_brat.grite.log import verify
                verdicts = verify.check(self.store, tips=self._tips)
                self._skip, self.rejected = verdicts.skip, verdicts.rejected
                self.disputes = verdicts.disputes
            if self._quarantined:
                from git_brat.grite.log import quarantine
                self._skip |= quarantine.digests(self.store)
        return self._skip

    def new_commits(self, tips: Iterable[str], known_tips: Iterable[str]) -> list[str]:
        """Commits reachable from tips but not from known_tips, oldest first."""
        tips, known = list(tips), list(known_tips)
        try:
            return self.store.catfile.rev_list(tips, known)
        except GriteError:
            return self._walk(tips, set(known))

    def _walk(self, tips: list[str], stop: set[str]) -> list[str]:
        """Slow in-process walk used when git refuses (a corrupt commit in the chain)."""
        seen: set[str] = set()
        order: list[str] = []
        stack = [t for t in tips if t not in stop]
        while stack:
            sha = stack.pop()
            if sha in seen or sha in stop:
                continue
            seen.add(sha)
            try:
                commit = self.store.objects.read_commit(sha.encode())
            except CorruptObject as exc:
                self.problems.append(Problem(sha, f"commit unreadable ({exc.detail}); "
                                                  "earlier history of this log cannot be reached"))
                continue
            order.append(sha)
            stack.extend(p.decode() for p in commit.parents)
        order.reverse()
        return order

    def batches(self, commits: list[str], fetched: bool = True) -> Iterator[tuple[str, ev.Batch]]:
        """Decoded batches for commits (in the given order); corrupt ones are skipped.

        `fetched`: they may come from other replicas' logs, so each goes through cat-file,
        whose header tells a blob's size: one past the bounds is skipped unread. A few
        commits of this replica's own log (False) are read in-process, faster.
        """
        if fetched or len(commits) >= _BATCH_READ_THRESHOLD:
            blobs: Iterable[tuple[str, bytes | None]] = self.store.catfile.cat_blobs(
                commits, "events", ev.MAX_BATCH_BYTES)
        else:
            blobs = (self._read_one(c) for c in commits)
        return self._decoded(blobs)

    def all_batches(self, tips: Iterable[str]) -> Iterator[list[ev.Batch]]:
        """Every batch reachable from tips, a chunk at a time, in no particular order.

        Replay is a CRDT, so order does not matter; listing and reading run in git while this
        process decodes. Raises LogUnreadable, after yielding what it could, when anything is
        missing or does not decode: `careful_batches` then reads commit by commit and names it.
        """
        decode = ev.decode_batch
        skip = self.skip()
        if skip:
            from git_brat.grite.log.verify import digest
        try:
            for blobs in self.store.catfile.stream_blobs(list(tips), "events", ev.MAX_BATCH_BYTES):
                if skip:
                    blobs = [b for b in blobs if digest(b) not in skip]
                yield [self._attributed(decode(b)) for b in blobs]
        except (GriteError, msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise LogUnreadable(str(exc)) from exc

    def careful_batches(self, tips: Iterable[str]) -> Iterator[list[ev.Batch]]:
        """Like all_batches, one commit at a time, skipping (and recording) what is unreadable."""
        for _sha, batch in self.batches(self.new_commits(tips, ())):
            yield [batch]

    def _decoded(self, blobs: Iterable[tuple[str, bytes | None]]) -> Iterator[tuple[str, ev.Batch]]:
        skip = self.skip()
        if skip:
            from git_brat.grite.log.verify import digest
        for sha, data in blobs:
            if sha in self._quarantined:
                continue
            if data is None:
                self._note(sha, "commit, tree or events blob missing or unreadable")
                continue
            if isinstance(data, TooLarge):
                self._note(sha, f"events blob of {int(data)} bytes, over the "
                                f"{ev.MAX_BATCH_BYTES} a batch may have; skipped unread")
                continue
            if skip and digest(data) in skip:
                continue
            try:
                batch = ev.decode_batch(data)
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                self._note(sha, f"events blob does not decode ({exc})")
                continue
            yield sha, self._attributed(batch)

    def _attributed(self, batch: ev.Batch) -> ev.Batch:
        """A batch as replay believes it: the words of a disputed actor shown as its writer's."""
        if not self.disputes:
            return batch
        from git_brat.grite.model.disputes import attributed
        return attributed(batch, self.disputes)

    def _read_one(self, sha: str) -> tuple[str, bytes | None]:
        return sha, events_blob(self.store, sha)

    def _note(self, sha: str, detail: str) -> None:
        if not any(p.sha == sha for p in self.problems):
            self.problems.append(Problem(sha, detail))

    def commit_info(self, sha: str) -> CommitInfo | None:
        try:
            return self.store.objects.read_commit(sha.encode())
        except CorruptObject:
            return None
