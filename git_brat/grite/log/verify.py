"""Which log batches replay believes: signed by their replica's pinned key, found in that replica's
own log ref, naming only that replica's actors; verdicts kept by commit, so each is judged once.

Replay streams blobs without knowing which ref they came from, so the judging happens here, per
log ref, on the commits no earlier check saw; replay then skips the events blobs judged bad
everywhere they were found (by content: one blob in two refs is one blob in the stream).
Rejected batches are never deleted: they stay in their refs and are listed with the replica
whose log held them (`rejected_batches`, shown by `git grite doctor`).
"""

from __future__ import annotations

import errno
import hashlib
import os

import msgspec

from git_brat.errors import CorruptObject
from git_brat.files import FileLock, atomic_write
from git_brat.git.store import Store
from git_brat.grite.log import identity, sign
from git_brat.git.catfile import TooLarge
from git_brat.grite.log.refs import events_blob, grite_dir, log_tips, read_log_blob
from git_brat.grite.model import disputes
from git_brat.grite.model import events as ev
from git_brat.grite.model.kinds import ACTOR

VERSION = 3   # 2: clocks that jump past grite.maxClockJump are judged (batches before were not)
#              3: an actor made before keys that two replicas speak as is disputed, not taken
ATTIC = "refs/grite/attic/"
WAL = "refs/grite/wal"
REPLICAS_INFIX = "/grite/replicas/"
_UNWRITABLE = (errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC)


class RejectedBatch(msgspec.Struct):
    sha: str        # the log commit
    ref: str        # the log ref it was found in
    replica: str    # whose log that ref is: who wrote it, or who it claims to be
    detail: str
    acknowledged: bool = False   # by `git grite doctor --fix`: seen, still not believed
    blob: str = ""               # digest of its events blob


class Erasure(msgspec.Struct):
    replica: str        # whose log is shorter here than another replica saw it
    seen_by: str        # the replica whose signed batch records the tip it had seen
    seen: str           # that tip
    tip: str | None     # the log's tip here (None: no log of that replica here at all)
    ref: str = ""       # the copy of its log that lacks it
    acknowledged: bool = False   # by `git grite doctor --fix`

    def describe(self) -> str:
        where = (f"{self.ref} ends at {self.tip[:12]}" if self.tip else
                 "there is no log of it here")
        return (f"replica {self.replica}: replica {self.seen_by} had seen its log at "
                f"{self.seen[:12]}, but {where}, which does not contain it: the log was rewound "
                f"or erased on a remote (possible tampering), or its newest part has not "
                f"reached this clone yet")


class Record(msgspec.Struct):
    """What earlier checks decided (.git/grite/verified, local and rebuildable)."""
    version: int = VERSION
    policy: str = ""
    frontier: dict[str, str] = {}         # log ref -> the tip checked up to
    signed_tips: list[str] = []           # frontier tips whose history holds a signed batch
    # An actor made before actors were keys -> the replicas whose believed batches speak as it
    # (or declare it), and those claimed by more than one -> who holds it ("": disputed).
    claims: dict[str, list[str]] = {}
    disputes: dict[str, str] = {}
    rejected: list[RejectedBatch] = []
    rejected_blobs: list[str] = []        # digests of rejected events blobs
    unsigned: int = 0                     # batches believed without a signature (older logs)
    unknown_signer: int = 0               # signed by a key nobody named as trusted


class Verdicts(msgspec.Struct):
    rejected: list[RejectedBatch]
    skip: set[bytes]       # digests of events blobs replay must not believe
    unsigned: int
    unknown_signer: int
    restarted: bool        # the trust policy changed: every log was judged again
    disputes: dict[str, str] = {}        # actor -> the claimant holding it ("": none does)
    claims: dict[str, list[str]] = {}    # of those actors: every replica that speaks as it


def digest(blob: bytes | memoryview) -> bytes:
    return hashlib.sha256(blob).digest()[:12]


def _paths(store: Store) -> tuple[str, str]:
    base = os.path.join(grite_dir(store), "verified")
    return base, base + ".accepted"   # (the second: digests of believed blobs, appended)


def _load(store: Store) -> Record:
    try:
        with open(_paths(store)[0], "rb") as f:
            rec = msgspec.msgpack.decode(f.read(), type=Record)
        return rec if rec.version == VERSION else Record()
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return Record()


MAX_CLOCK_JUMP = 1_000_000_000


def max_clock_jump(store: Store) -> int:
    """grite.maxClockJump: how far above everything its writer had seen a batch's clock may be."""
    from git_brat.errors import UsageError
    raw = store.config_get("grite.maxClockJump")
    try:
        n = int(float(raw)) if raw is not None else MAX_CLOCK_JUMP
    except (ValueError, OverflowError):
        n = 0
    if n < 1:
        raise UsageError(f"grite.maxClockJump is {raw!r}: it takes a whole number of at least 1 "
                         f"(`git config grite.maxClockJump {MAX_CLOCK_JUMP}`)")
    return n


def policy(store: Store) -> tuple[str, bool, set[str]]:
    """(fingerprint, grite.requireSigned, trusted keys) of this clone's trust settings."""
    require = store.config_bool("grite.requireSigned", False)
    trusted = trusted_keys(store)
    jump = max_clock_jump(store)   # (in the fingerprint only when set: old verdicts stand)
    return sign.fingerprint(f"{int(require)} {sorted(trusted)}" + (
        f" jump={jump}" if jump != MAX_CLOCK_JUMP else "")), require, trusted


def trusted_keys(store: Store) -> set[str]:
    """The keys this clone trusts: its own, `git grite trust add`, grite.allowedSignersFile."""
    where = grite_dir(store)
    allowed = sign.allowed_signers(store.config_get("grite.allowedSignersFile"))
    trusted = set(allowed) | {t.key for t in sign.load_trust(where).trusted}
    if sign.has_key(where):
        trusted.add(sign.public_key(where))
    return trusted


def owner(store: Store, ref: str, tip: str, own: str) -> str | None:
    """The replica whose log a ref is (by its name; a peer's fetched wal by its tip batch)."""
    if ref.startswith(ATTIC):
        ref = "refs/" + ref[len(ATTIC):].rsplit("/", 1)[0]
    if ref == "refs/grite/wal":
        return own
    if REPLICAS_INFIX in ref or ref.startswith("refs/grite/replicas/"):
        return ref.rpartition("/")[2]
    data = events_blob(store, tip)
    try:
        return ev.decode_head(data).replica if data is not None else None
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


class _Seen(msgspec.Struct):
    """One new commit, as the first pass found it."""
    sha: str
    ref: str
    owner: str
    parents: list[str]
    signed: bool
    problem: str = ""
    key: str = ""
    blob: bytes = b""
    actors: list[str] = []
    creates: list[tuple[str, str, int, str]] = []   # (actor, replica named, lamport, event id)
    clock: int = -1   # the highest clock the batch carries (header or event; -1: not read)
    cited: dict[str, int] = {}   # its parents and signed seen tips -> their batches' clocks


def check(store: Store, acknowledge: bool = False, tips: dict[str, str] | None = None) -> Verdicts:
    """Judge every log commit no earlier check saw; the verdicts for everything seen so far.
    acknowledge: mark every rejected batch as seen by the user (they stay rejected).
    tips: judge up to these only (a capped import; the next check judges the rest)."""
    where = grite_dir(store)
    try:
        own = identity.load_replica(where).id
    except Exception:   # noqa: BLE001 - not initialised: nothing of ours to tell apart
        own = ""
    fp, require, trusted = policy(store)
    rec = _load(store)
    restarted = rec.policy != fp and bool(rec.frontier)
    if rec.policy != fp:
        rec = Record(policy=fp)
    tips = log_tips(store) if tips is None else tips
    if tips == rec.frontier and not (acknowledge and any(not r.acknowledged for r in rec.rejected)):
        return _verdicts(store, rec, restarted)
    lock: FileLock | None = FileLock(_paths(store)[0] + ".lock", timeout=30)
    try:
        lock.acquire()
    except OSError as exc:   # a read-only clone: judged in memory, again next time
        if exc.errno not in _UNWRITABLE:
            raise
        lock = None
    try:
        rec2 = _load(store)   # another process may have judged meanwhile
        if rec2.policy == fp:
            rec = rec2
        elif lock is not None:   # new trust settings: what the old ones believed counts for nothing
            try:
                os.unlink(_paths(store)[1])
            except FileNotFoundError:
                pass
        trust = sign.load_trust(where)
        pins = dict(trust.pinned)
        jump = max_clock_jump(store)
        seen = _first_pass(store, rec, tips, own, jump)
        new_accepted = _judge(rec, seen, pins, require, trusted, jump)
        rec.disputes = _disputes(rec.claims, pins, trusted, own)
        rec.frontier = dict(tips)
        if acknowledge:
            for r in rec.rejected:
                r.acknowledged = True
        rec.signed_tips = sorted(set(rec.signed_tips) & set(tips.values()))
        if lock is not None:
            _save(store, rec, new_accepted, pins != trust.pinned and pins)
    finally:
        if lock is not None:
            lock.release()
    return _verdicts(store, rec, restarted)


def _first_pass(store: Store, rec: Record, tips: dict[str, str], own: str,
                jump: int = MAX_CLOCK_JUMP) -> list[_Seen]:
    owners = {ref: owner(store, ref, sha, own) for ref, sha in tips.items()}
    done_by_owner: dict[str | None, list[str]] = {}
    for ref, sha in rec.frontier.items():
        o = owners.get(ref) if ref in owners else owner(store, ref, sha, own)
        done_by_owner.setdefault(o, []).append(sha)
    out: list[_Seen] = []
    known: set[tuple[str, str]] = set()
    clocks: dict[str, int] = {}   # commit -> its batch's clock, as read in this pass
    # This clone's own log first: a copy of this replica's log elsewhere holds nothing more.
    for ref in sorted(tips, key=lambda r: (r != WAL, r)):
        who = owners[ref]
        if rec.frontier.get(ref) == tips[ref]:
            continue
        commits = _appended(store, tips[ref], set(done_by_owner.get(who, [])))
        if commits is None:
            try:
                commits = store.catfile.rev_list([tips[ref]], done_by_owner.get(who, []))
            except Exception:   # noqa: BLE001 - an unreadable history: replay reports it
                continue
        done_by_owner.setdefault(who, []).append(tips[ref])
        commits = [c for c in commits if (who or "", c) not in known]
        known.update((who or "", c) for c in commits)
        # A fetched log's blobs come through `git cat-file --batch`, whose header gives each
        # size first: one over the bound is stepped over unread (replay reports it), never
        # loaded whole. This clone's own wal, few commits at a time, is read in-process.
        blobs = store.catfile.cat_blobs(commits, "events", ev.MAX_BATCH_BYTES) \
            if ref != WAL or len(commits) >= 64 else ((c, None) for c in commits)
        for sha, data in blobs:
            item = _read(store, sha, ref, who or "", data, clocks, jump)
            if who == own and own and ref != WAL and not ref.startswith(ATTIC) and not item.problem:
                item.problem = ("claims to be this clone's replica but is not in its log "
                                f"({WAL}): written by someone else")
            out.append(item)
    return out


def _appended(store: Store, tip: str, done: set[str], limit: int = 16) -> list[str] | None:
    """The common case in-process: a few commits appended, one parent each, onto a tip already
    judged (oldest first); None when git must list them (a new log, a merge, a long gap)."""
    if not done:
        return None
    out, sha = [], tip
    while len(out) < limit:
        if sha in done:
            return out[::-1]
        try:
            parents = store.objects.read_commit(sha.encode()).parents
        except CorruptObject:
            return None
        if len(parents) != 1:
            return None
        out.append(sha)
        sha = parents[0].decode()
    return None


def _clock_of(store: Store, sha: str, clocks: dict[str, int]) -> int:
    """The clock of the batch a commit holds (0: not here, or unreadable: it raises no bound)."""
    if sha not in clocks:
        data = events_blob(store, sha)
        try:
            clocks[sha] = ev.decode_head(data).lamport if data is not None else 0
        except (msgspec.DecodeError, msgspec.ValidationError):
            clocks[sha] = 0
    return clocks[sha]


def _read(store: Store, sha: str, ref: str, who: str, data=None,
          clocks: dict[str, int] | None = None, jump: int = MAX_CLOCK_JUMP) -> _Seen:
    try:
        commit = store.objects.read_commit(sha.encode())
    except CorruptObject:
        return _Seen(sha, ref, who, [], False, problem="")   # unreadable: replay reports it
    parents = [p.decode() for p in commit.parents]
    try:
        signature = sign.parse(commit.message)
    except sign.BadSignature as exc:
        return _Seen(sha, ref, who, parents, True, problem=f"malformed signature ({exc})")
    if data is None:
        try:
            data = read_log_blob(store, commit)
        except CorruptObject:
            return _Seen(sha, ref, who, parents, signature is not None)
    if isinstance(data, TooLarge):   # over the bound: replay skips and reports it
        return _Seen(sha, ref, who, parents, signature is not None)
    item = _Seen(sha, ref, who, parents, signature is not None, blob=digest(data))
    try:
        batch = ev.decode_batch(data)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return item   # corruption: replay skips and reports it
    if not who:
        item.problem = "found in a log ref whose replica cannot be told"
    elif batch.replica != who:
        item.problem = f"a batch of replica {batch.replica} in replica {who}'s log"
    elif signature is not None:
        try:   # (this clone's own wal is written only here: nothing to prove to ourselves)
            if ref != WAL:
                sign.verify(signature, data)
        except sign.BadSignature as exc:
            item.problem = str(exc)
        item.key = signature.key
    item.creates = [(e.actor, str(e.op.fields.get("replica", "")), e.lamport, e.id)
                    for e in batch.events if isinstance(e.op, ev.Create)
                    and e.op.kind == ACTOR and e.entity == e.actor]
    item.actors = sorted({e.actor for e in batch.events})
    # What its writer had seen: its parents and the tips it signed as seen (so every clone
    # decides alike, whatever order logs arrive in); judged against them in _judge.
    clocks = {} if clocks is None else clocks
    item.clock = max([batch.lamport, *(e.lamport for e in batch.events)])
    clocks[sha] = item.clock
    item.cited = {c: _clock_of(store, c, clocks) for c in parents}
    if item.clock > max([0, *item.cited.values()]) + jump and signature:
        # (Read only when its log's clocks do not allow it: a batch may name a thousand tips.)
        item.cited.update({c: _clock_of(store, c, clocks) for c in signature.seen.values()})
    return item


def _judge(rec: Record, seen: list[_Seen], pins: dict[str, str], require: bool,
           trusted: set[str], jump: int = MAX_CLOCK_JUMP) -> list[bytes]:
    """Decide every new commit; the digests believed."""
    # A key-bound actor (sign.is_key_bound) belongs to its key, whatever declares it. An actor
    # made before actors were keys is claimed by every replica whose believed batches speak as
    # it: no clock or order of arrival can tell its owner, so none is rejected for it (see
    # _disputes and model/disputes). A batch refused for anything else claims nothing.
    for item in seen:
        if item.problem and item.ref != WAL:
            continue
        for actor, named, _lamport, _eid in item.creates:
            if named and named != item.owner:
                item.problem = f"declares actor {actor} for replica {named} in replica {item.owner}'s log"
                break
    bad = {r.sha for r in rec.rejected}
    signed = set(rec.signed_tips)
    # Unsigned batches of a replica that signs are believed only as the history its signed
    # batches grew from (written before it signed): never as a new root or a branch of its own.
    signers = set(pins) | {i.owner for i in seen if i.signed and not i.problem}
    legacy: set[str] = set()
    for item in reversed(seen):   # (newest first: a commit's descendants come before it)
        if (item.signed and not item.problem) or item.sha in legacy:
            legacy.update(item.parents)
    accepted: list[bytes] = []
    rejected_blobs = set(rec.rejected_blobs)
    pending = {item.sha for item in seen}
    believed: set[str] = set()
    for item in seen:
        detail = item.problem
        key = item.key or None
        local = item.ref == WAL   # this clone's own log, written only here: believed as it is
        if local:
            detail = ""
        elif not detail and any(p in bad for p in item.parents):
            detail = "follows a rejected batch in the same log"
        elif not detail and item.clock >= 0:
            # A cited batch counts only once believed: one rejected, or not judged yet in
            # this pass, raises nothing (else a chain of forged replicas would lift any clock).
            base = max([0, *(c for sha, c in item.cited.items()
                             if sha not in bad and (sha not in pending or sha in believed))])
            if item.clock > base + jump:
                detail = (f"its Lamport clock {item.clock} jumps more than grite.maxClockJump="
                          f"{jump} above {base}, the highest its writer had seen (its log and "
                          f"the tips it signed as seen)")
        if local:
            pass
        elif not detail and item.signed and key is not None:
            pinned = pins.get(item.owner)
            if pinned is not None and pinned != key:
                detail = (f"signed by key {key[:12]}…, not replica {item.owner}'s pinned key "
                          f"{pinned[:12]}… (`git grite trust list`)")
            elif require and key not in trusted:
                pins.setdefault(item.owner, key)   # (a valid signature: `trust add` may name it)
                detail = (f"signed by key {key[:12]}…, which nobody named as trusted and "
                          f"grite.requireSigned is set (`git grite trust add`)")
        elif not detail and not item.signed:
            if require:
                detail = "unsigned, and grite.requireSigned is set"
            elif any(p in signed for p in item.parents):
                detail = "unsigned, after signed batches of the same replica (a writer that signs never stops)"
            elif item.owner in signers and item.sha not in legacy:
                detail = (f"unsigned, though replica {item.owner} signs its batches, and none of "
                          "its signed batches grew from it")
        if not detail and not local:
            detail = _actor_problem(rec, item)
        if detail:
            bad.add(item.sha)
            rec.rejected.append(RejectedBatch(item.sha, item.ref, item.owner, detail,
                                              blob=item.blob.hex()))
            if item.blob:
                rejected_blobs.add(item.blob.hex())
            continue
        believed.add(item.sha)
        if item.signed and key is not None:
            pins.setdefault(item.owner, key)
            signed.add(item.sha)
            if key not in trusted:
                rec.unknown_signer += 1
        elif item.blob:
            if any(p in signed for p in item.parents):
                signed.add(item.sha)
            rec.unsigned += 1
        if item.blob:
            accepted.append(item.blob)
        for actor in item.actors:
            if not sign.is_key_bound(actor):
                claimants = rec.claims.setdefault(actor, [])
                if item.owner not in claimants:
                    claimants.append(item.owner)
                    claimants.sort()
    rec.signed_tips = sorted(signed)   # (check keeps only the tips: later commits follow them)
    rec.rejected_blobs = sorted(rejected_blobs)
    return accepted


def _disputes(claims: dict[str, list[str]], pins: dict[str, str], trusted: set[str],
              own: str) -> dict[str, str]:
    """The actors made before keys that more than one replica speaks as -> the one claimant
    this clone trusts (its own replica, or one whose pinned key it trusts), "" if not one."""
    out = {}
    for actor, claimants in claims.items():
        if len(claimants) > 1:
            sure = [r for r in claimants if r == own or pins.get(r) in trusted]
            out[actor] = sure[0] if len(sure) == 1 else ""
    return out


def _actor_problem(rec: Record, item: _Seen) -> str:
    """Why a batch may not speak as one of the actors it names ("" when it may)."""
    for actor in item.actors:
        if sign.is_key_bound(actor):
            if not (item.signed and sign.binds(item.key, actor)):
                return (f"names actor {actor}, whose id binds it to another key: only batches "
                        f"signed by that key speak as it")
        elif disputes.is_attributed(actor):
            return (f"names actor {actor}, an id of the shape replay gives the words of a "
                    f"disputed actor: no writer speaks as it")
    return ""


def _save(store: Store, rec: Record, accepted: list[bytes], pins) -> None:
    path, accepted_path = _paths(store)
    try:
        if accepted:
            with open(accepted_path, "ab") as f:
                f.write(b"".join(accepted))
        atomic_write(path, msgspec.msgpack.encode(rec))
        if pins:
            sign.update_trust(grite_dir(store), lambda t: t.pinned.update(
                {k: v for k, v in pins.items() if k not in t.pinned}))
    except OSError as exc:   # a read-only clone: judged again next time, nothing is lost
        if exc.errno not in _UNWRITABLE:
            raise


def _verdicts(store: Store, rec: Record, restarted: bool) -> Verdicts:
    skip: set[bytes] = set()
    rejected = list(rec.rejected)
    if rec.rejected_blobs:   # (the believed digests are read only when something was rejected)
        skip = {bytes.fromhex(d) for d in rec.rejected_blobs}
        try:
            with open(_paths(store)[1], "rb") as f:
                data = f.read()
        except OSError:
            data = b""
        n = len(next(iter(skip)))
        believed = {data[i:i + n] for i in range(0, len(data) - n + 1, n)} & skip
        skip -= believed
        # A byte-for-byte copy of a batch believed from its own replica's log changes nothing:
        # not worth a warning (history rewritten elsewhere leaves such copies).
        shown = {d.hex() for d in believed}
        rejected = [r for r in rejected if r.blob not in shown]
    return Verdicts(rejected, skip, rec.unsigned, rec.unknown_signer, restarted, rec.disputes,
                    {a: rec.claims[a] for a in rec.disputes})


def disputed(store: Store) -> dict[str, str]:
    """The disputed actors as already judged (actor -> its holder here, "" for none)."""
    return _load(store).disputes


def judged_rejected(store: Store) -> set[str]:
    """Commits already judged bad, without judging anything new."""
    return {r.sha for r in _load(store).rejected}


def forget(store: Store) -> None:
    """Judge every log again from the start (after the trust settings changed)."""
    for path in _paths(store):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


# -- erasure ----------------------------------------------------------------------

def _ack_path(store: Store) -> str:
    return os.path.join(grite_dir(store), "erasures-seen.json")


def erasures(store: Store, acknowledge: bool = False) -> list[Erasure]:
    """Copies of a replica's log here (a remote's, or this clone's relay) that lack a tip another
    replica's signed batch says it had seen: the log was rewound or erased where it came from."""
    where = grite_dir(store)
    try:
        own = identity.load_replica(where).id
    except Exception:   # noqa: BLE001
        own = ""
    tips = {r: s for r, s in log_tips(store).items() if not r.startswith(ATTIC)}
    bad = judged_rejected(store)
    by_owner: dict[str, list[tuple[str, str]]] = {}
    writers: dict[str, str] = {}
    for ref, sha in tips.items():
        who = owner(store, ref, sha, own)
        if who:
            by_owner.setdefault(who, []).append((ref, sha))
            writers[ref] = who
    claims: dict[tuple[str, str], str] = {}   # (replica, tip seen) -> a replica that saw it
    for ref, sha in sorted(tips.items()):
        if sha in bad:
            continue
        try:
            signature = sign.parse(store.objects.read_commit(sha.encode()).message)
        except (CorruptObject, sign.BadSignature):
            continue
        for replica, seen_tip in (signature.seen.items() if signature else ()):
            if replica != writers.get(ref):
                claims.setdefault((replica, seen_tip), writers.get(ref, ""))
    out: list[Erasure] = []
    from git_brat.grite.log import cut
    shallow = None
    for (replica, seen_tip), seen_by in sorted(claims.items()):
        have = by_owner.get(replica, [])
        present = store.objects.has_object(seen_tip.encode())
        if have and not present:
            if shallow is None:
                shallow = bool(cut.cut(store, tips.values()))
            if shallow:   # a clone cut at a snapshot lacks old history: it cannot tell
                continue
        missing = [(ref, t) for ref, t in sorted(have)
                   if not (present and store.objects.is_ancestor(seen_tip, t))]
        if not have:
            out.append(Erasure(replica, seen_by, seen_tip, None))
        elif missing:
            ref, t = missing[0]
            out.append(Erasure(replica, seen_by, seen_tip, t, ref))
    try:
        with open(_ack_path(store), "rb") as f:
            acked = set(msgspec.json.decode(f.read(), type=list[str]))
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        acked = set()
    for e in out:
        e.acknowledged = f"{e.replica} {e.seen}" in acked
    if acknowledge and any(not e.acknowledged for e in out):
        acked |= {f"{e.replica} {e.seen}" for e in out}
        try:
            atomic_write(_ack_path(store), msgspec.json.encode(sorted(acked)))
            for e in out:
                e.acknowledged = True
        except OSError as exc:
            if exc.errno not in _UNWRITABLE:
                raise
    return out


def actor_replicas(store: Store) -> dict[str, str]:
    """Actors made before actors were keys -> the replica whose log declared each (as judged)."""
    return _load(store).actors
