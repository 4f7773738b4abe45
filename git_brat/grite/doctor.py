"""Verify the logs, the cache and ref locks; rebuild and repair what is safe to repair."""

from __future__ import annotations

import os
import time

import msgspec

from git_brat.grite.cache.projection import Cache
from git_brat.grite.model import kinds
from git_brat.errors import DEEPEN_HINT, GriteError, NotFound, UsageError
from git_brat.grite.log.wal import LogReader
from git_brat.grite.repo import Grite
from git_brat.grite.model.state import digest, replay_stream
from git_brat.grite.log.refs import grite_dir, log_tips
from git_brat.grite.sync.hookhashes import HookFile

# Findings that say how things are, not what is wrong. A rejected event is one replay refused
# (an illegal move, a clock or size past the bounds, a value not of its schema, a stale lease):
# it changes nothing, so there is nothing to fix; it is listed so that who wrote it can be asked.
NOTES = ("unknown-ops", "history-cut", "rejected", "unsigned", "quarantined", "settled-actor")
MAX_LISTED = 100   # rejected events named one by one; the rest are counted
STALE_LOCK_SECONDS = 10.0   # writers hold a ref lock for milliseconds; older ones were abandoned


class Finding(msgspec.Struct):
    kind: str   # corrupt | stale-lock | cache-mismatch | snapshot-mismatch | snapshot-unverified
    #            | unknown-ops | rewrite | deleted-log | lost | repaired | hooks-missing
    #            | stale-temp | history-cut | hook-changed | hook-unknown | forged-lease
    #            | rejected | rejected-batch | erased-log | unsigned | quarantined
    #            | disputed-actor | settled-actor
    subject: str
    detail: str
    fixed: bool = False


class Report(msgspec.Struct):
    ok: bool
    commits: int
    events: int
    logs: dict[str, str]
    findings: list[Finding]
    # Every hook git runs here besides grite's shims (visible, or hidden under <hooks>/.grite/),
    # with its sha256 and whether it is as recorded when grite was installed.
    hooks: list[HookFile] = []


def check(g: Grite, fix: bool = False, stale_after: float = STALE_LOCK_SECONDS) -> Report:
    findings: list[Finding] = []
    for path, age in g.store.refs.stale_locks(stale_after):
        f = Finding("stale-lock", path, f"ref lock left {age:.0f}s ago by a writer that is gone")
        if fix:
            f.fixed = _clear_lock(path, age)
        findings.append(f)
    for path, age in g.store.objects.stale_temps(stale_after):
        f = Finding("stale-temp", path, f"half-written object file left {age:.0f}s ago by a "
                    "writer that is gone (`git fsck` calls it a bad object)")
        if fix:
            f.fixed = _clear_lock(path, age)
        findings.append(f)

    from git_brat.grite.log import attic
    from git_brat.grite.sync import exchange as sync
    sync.keep_seen(g.store)   # a rewind that happened with hooks off is kept before we look
    tips, reader, commits, truth, events, cut = _read_all(g)
    if cut:
        findings.append(Finding("history-cut", "", f"{len(cut)} log(s) here start from the "
                                "snapshot this clone was made from: events before it were "
                                "checked as that snapshot holds them, and snapshots cannot be "
                                f"replayed in full; {DEEPEN_HINT}", True))
    if fix and reader.problems and not cut and _quarantine(g, reader.problems, tips):
        tips, reader, commits, truth, events, cut = _read_all(g)
        Cache(g.store).rebuild(full=True)   # the cache kept them as problems
    repaired = []
    if fix and reader.problems and not cut:
        from git_brat.grite import repair
        from git_brat.grite.log import identity
        before = _cached_state(g)   # what this clone showed before the damage, if it kept it
        result = repair.repair(g.store, identity.load_replica(grite_dir(g.store)).id)
        for lost in result.lost:
            repaired.append(Finding("lost", lost.commit, lost.detail, True))
        for p in reader.problems:
            if not any(x.subject == p.sha for x in repaired):
                repaired.append(Finding("corrupt", p.sha, p.detail + "; its events were carried "
                                        "onto the rebuilt log", True))
        tips, reader, commits, truth, events, cut = _read_all(g)
        after = Cache(g.store).rebuild(full=True)
        if before is not None:
            repaired += [Finding("lost", eid, detail, True)
                         for eid, detail in _changed_entities(before, after)]
    for r in attic.rewrites(g.store, acknowledge=fix):
        kind = {"deleted": "deleted-log", "damaged": "repaired"}.get(r.kind, "rewrite")
        findings.append(Finding(kind, r.ref, r.describe(), r.acknowledged))
    findings += repaired
    findings += _check_signatures(g, fix)
    for p in reader.problems:
        findings.append(Finding("corrupt", p.sha, p.detail))
    findings += quarantined(g)
    if truth.unknown:
        findings.append(Finding("unknown-ops", "", f"{len(truth.unknown)} events from a newer "
                                "grite were kept but not replayed; upgrade to see them", True))
    findings += rejected(truth)
    truth_digest = digest(truth)
    del truth   # a million events' state: not held while the next one is read

    cache = Cache(g.store)
    held = cache.stored()
    if held is not None and held[0].frontier == tips and cache.leases_moved(held[1]):
        # Lease records arrived since the last command (a fetch): judge those tokens again, as
        # the next command would, before comparing with the replay that judged them by them.
        try:
            cache.state()
        except GriteError:
            pass
        held = cache.stored()
    meta, cached = held if held is not None else (None, None)
    if cached is not None and meta.frontier == tips and digest(cached) != truth_digest:
        f = Finding("cache-mismatch", cache.dir, "cached state differs from a full replay")
        if fix:
            cache.rebuild(full=not cut)   # a snapshot may be what was wrong
            f.fixed = True
        findings.append(f)
    elif fix and cached is None:
        cache.rebuild(full=not cut)
    if not cut:   # (a cut clone cannot replay what a snapshot covers)
        findings += _check_snapshots(g, fix)
    findings += _check_hooks(g, fix)
    hook_files, hook_findings = _check_hook_files(g, fix)
    findings += hook_findings
    findings += _check_leases(g)
    ok = all(f.fixed or f.kind in NOTES for f in findings)
    return Report(ok, len(commits), events, tips, findings, hook_files)


def rejected(state) -> list[Finding]:
    """The events replay rejected, each named with why (the first MAX_LISTED, then a count)."""
    held = sorted(state.rejected.items())
    out = [Finding("rejected", eid, f"{r.reason} (on {r.entity[:7]}); not applied", True)
           for eid, r in held[:MAX_LISTED]]
    if len(held) > MAX_LISTED:
        out.append(Finding("rejected", "", f"{len(held) - MAX_LISTED} more events rejected", True))
    return out


def _quarantine(g: Grite, problems, tips: dict[str, str]) -> bool:
    """Set aside every unreadable batch whose objects git still reads (poison someone pushed,
    not damage): deleting its log would last only until the next fetch. Whether any was."""
    from git_brat.grite.log import quarantine
    from git_brat.grite.log.refs import events_blob
    from git_brat.grite.log.verify import digest
    new = []
    for p in problems:
        data = events_blob(g.store, p.sha)
        if data is None:
            continue   # objects gone or damaged: repair's business
        ref = next((r for r, t in sorted(tips.items())
                    if t == p.sha or g.store.objects.is_ancestor(p.sha, t)), "")
        new.append(quarantine.Entry(p.sha, digest(data).hex(), ref, p.detail, int(time.time() * 1000)))
    return bool(new) and bool(quarantine.add(g.store, new))


def quarantined(g: Grite) -> list[Finding]:
    """The batches `doctor --fix` set aside on this clone (skipped by every read)."""
    from git_brat.grite.log import quarantine
    return [Finding("quarantined", e.sha, f"in {e.ref or 'a log'}: {e.detail}; set aside by "
                    f"`git grite doctor --fix`, skipped by every read here (`git grite doctor "
                    f"--unquarantine {e.sha[:12]}` takes it back)", True)
            for e in quarantine.load(g.store)]


def unquarantine(g: Grite, prefix: str) -> list[str]:
    """Take quarantined batches back (each is read, and reported, again); their commits."""
    from git_brat.grite.log import quarantine
    if len(prefix) < 7 or any(c not in "0123456789abcdef" for c in prefix):
        raise UsageError(f"{prefix!r} is no commit id: give at least 7 hex digits of one "
                         "`git grite doctor` lists as quarantined")
    gone = quarantine.remove(g.store, prefix)
    if not gone:
        raise NotFound(f"no quarantined batch starts with {prefix} (`git grite doctor` lists them)")
    Cache(g.store).rebuild(full=True)
    return [e.sha for e in gone]


def _check_signatures(g: Grite, fix: bool) -> list[Finding]:
    """Batches not believed (wrong replica, actor or key; kept in their refs), logs shorter here
    than another replica saw them, and how many batches are unsigned."""
    from git_brat.grite.log import verify
    verdicts = verify.check(g.store, acknowledge=fix)
    out = [Finding("rejected-batch", r.sha, f"in {r.ref} (replica {r.replica}'s log): {r.detail}; "
                   "kept there, not believed", r.acknowledged) for r in verdicts.rejected]
    out += [Finding("erased-log", e.replica, e.describe(), e.acknowledged)
            for e in verify.erasures(g.store, acknowledge=fix)]
    out += [_dispute(actor, holder, verdicts.claims[actor])
            for actor, holder in sorted(verdicts.disputes.items())]
    if verdicts.unsigned:
        out.append(Finding("unsigned", "", f"{verdicts.unsigned} batches are unsigned (written "
                           "before signatures; new ones are signed)", True))
    return out


def _dispute(actor: str, holder: str, claimants: list[str]) -> Finding:
    """An actor made before keys that several replicas speak as: who, and how it ends."""
    names = " and ".join(f"replica {r}" for r in claimants)
    if holder:
        others = ", ".join(r for r in claimants if r != holder)
        return Finding("settled-actor", actor, f"{names} all speak as actor {actor} (made before "
                       f"actors were keys); this clone trusts replica {holder}'s key, so its "
                       f"events keep the actor, and those of {others} are shown as their own "
                       "replica's words; a clone that trusts no claimant's key shows every "
                       "side's that way: whoever uses this actor ends that by moving to one "
                       "bound to their key (`git grite actor new NAME --use`)", True)
    return Finding("disputed-actor", actor, (
        f"{names} {'both' if len(claimants) == 2 else 'all'} speak as actor {actor}, made before actors were keys: nothing tells "
        "which one owns it, so neither log is dropped and each one's events are shown as its "
        f"own replica's words ('actor {actor[:8]} as replica … wrote it'). To end it: whoever "
        "uses this actor moves to one bound to their key (`git grite actor new NAME --use` on "
        "their clone); or, on this clone, trust the key of the replica that owns it (`git grite "
        "trust add REPLICA`), which settles it here"))


def _cached_state(g: Grite):
    """The cache's state, whatever frontier it was built at (None: no usable cache)."""
    from git_brat.grite.cache.projection import in_memory
    held = Cache(g.store).stored()
    return in_memory(held[1]) if held is not None else None   # read whole: a rebuild follows


def _changed_entities(before, after) -> list[tuple[str, str]]:
    """Entities whose state the repair could not bring back as this clone last showed it:
    exactly what the lost records held, as far as it can still be told."""
    def digest(ent):
        return (ent.kind, sorted((k, repr(v[0])) for k, v in ent.fields.items()),
                sorted((k, tuple(sorted(v for v, t in vals.items() if t)))
                       for k, vals in ent.sets.items()), sorted(ent.comments))
    out = []
    for eid, old in sorted(before.entities.items()):
        if not old.created or old.kind == kinds.ACTOR:
            continue
        new = after.entities.get(eid)
        if new is None or not new.created:
            out.append((eid, f"{old.kind} {old.get('title', '')!r} is gone: its create was in "
                             f"a lost record"))
        elif digest(new) != digest(old):
            what = [k for k, v in old.fields.items() if new.fields.get(k, (None,))[0] != v[0]]
            what += [k for k, vals in old.sets.items()
                     if sorted(v for v, t in vals.items() if t) != new.members(k)]
            if set(old.comments) != set(new.comments):
                what.append("comments")
            out.append((eid, f"{old.kind} {old.get('title', '')!r} lost changes to "
                             f"{', '.join(sorted(set(what))) or 'its history'}; it was "
                             f"{old.get('state', old.get('status', ''))!s} as last shown here"))
    return out


def _read_all(g: Grite):
    """Every log, commit by commit (naming what cannot be read), replayed as it is read:
    tips, reader, commits, the state, the number of events read, and where history is cut.

    The events are not kept (a million of them took gigabytes): should the arrival order
    need the canonical replay, the logs are read again instead."""
    from git_brat.grite.log import cut
    tips = log_tips(g.store)
    reader = LogReader(g.store)
    boundary = cut.cut(g.store, tips.values())
    base = _base(g, tips, boundary) if boundary else None
    commits = reader.new_commits(tips.values(), base[0].meta.covers if base else ())
    count = [0]
    with g.cache.leases.many():
        truth = replay_stream(_chunks(reader, commits, count), g.cache.progress,
                              reread=lambda: _events(g.store, commits),
                              start=base[1] if base else None, judge=g.cache.leases.judge)
    return tips, reader, commits, truth, count[0], boundary


def _base(g: Grite, tips: dict[str, str], cut: dict[str, list[str]]):
    """In a clone cut at a snapshot: the snapshot the logs are checked from, and its state."""
    from git_brat.grite.log.cut import refuse_if_cut
    from git_brat.grite.cache import snapshot
    from git_brat.grite.cache.projection import CACHE_VERSION
    if cut:
        try:   # (a snapshot's cold part is fetched for the cache: then it is here to check)
            g.cache.state()
        except GriteError:
            pass   # checked without it: no snapshot is usable then, and that is said
    base = snapshot.best_state(g.store, tips, CACHE_VERSION)
    if base is None:
        refuse_if_cut(g.store, tips.values(), "check the logs",
                      " and no usable snapshot here covers what came before", cut)
    return base


def _chunks(reader: LogReader, commits: list[str], count: list[int]):
    """The commits' batches a thousand at a time; count[0] adds up their events."""
    chunk = []
    for _sha, batch in reader.batches(commits):
        count[0] += len(batch.events)
        chunk.append(batch)
        if len(chunk) == 1000:
            yield chunk
            chunk = []
    yield chunk


def _events(store, commits: list[str]):
    for _sha, batch in LogReader(store).batches(commits):
        yield from batch.events


def _check_snapshots(g: Grite, fix: bool) -> list[Finding]:
    """Replay what each snapshot covers in full; one that disagrees must not be used."""
    from git_brat.grite.cache import snapshot
    from git_brat.grite.cache.projection import CACHE_VERSION
    findings = []
    refused = snapshot.rejected(g.store)
    tips = log_tips(g.store).values()
    for snap in snapshot.listed(g.store):
        if snap.meta.version != CACHE_VERSION or snap.commit in refused or \
                not snapshot.contained(g.store, snap, tips):
            continue   # never used: another version's, refused, or not contained in our logs
        stored = snapshot.load(g.store, snap)
        if stored is None:
            detail = "its state does not decode, or its rows disagree with themselves"
        else:
            reader = LogReader(g.store)
            commits = reader.new_commits(snap.meta.covers, ())
            with g.cache.leases.many():
                truth = replay_stream(_chunks(reader, commits, [0]),
                                      reread=lambda: _events(g.store, commits),
                                      judge=g.cache.leases.judge)
            if reader.problems:   # the snapshot may be the only copy of what cannot be read
                findings.append(Finding("snapshot-unverified", snap.ref,
                                        f"{len(reader.problems)} records it covers cannot be read, "
                                        "so it cannot be checked; it is kept", True))
                continue
            # (It may count fewer: a whole-log read sees a blob two commits share once.)
            if digest(stored) == digest(truth) and stored.event_count <= truth.event_count:
                continue
            detail = (f"written by replica {snap.meta.replica}, differs from a full replay of "
                      f"the {truth.event_count} events it covers")
        f = Finding("snapshot-mismatch", snap.ref, detail)
        if fix:   # only speed is lost; refused for good, even if a fetch brings it back
            snapshot.reject(g.store, snap.commit)
            g.store.refs.delete_if(snap.ref.encode(), snap.commit.encode())
            Cache(g.store).rebuild(full=True)
            f.fixed = True
        findings.append(f)
    return findings


def _check_leases(g: Grite) -> list[Finding]:
    """Records on live leases' refs that their history does not allow (an "acquire" over
    another holder's live lease): ignored by every lease decision, reported here."""
    from git_brat.grite import locks
    try:
        report = locks.status(g, locks.settings(g.store, local=True), refresh=False,
                              released=False)
    except GriteError as exc:
        return [Finding("forged-lease", "", f"lease records could not be read: {exc.message}")]
    return [Finding("forged-lease", f.sha, f"{f.resource}: {f.action or 'a'} record ignored: {f.reason}")
            for f in report.forged] + [Finding("forged-lease", f.resource, f.reason)
                                       for f in locks.ungrounded_tokens(g)]


def _check_hooks(g: Grite, fix: bool) -> list[Finding]:
    """grite's shims must be live where git runs hooks from, or pushes stop publishing."""
    from git_brat.grite.sync import exchange as sync
    hooks_dir, missing = sync.hooks_not_live(g.store)
    if not missing:
        return []
    fixed = False
    if fix:
        # The user asked for the repair of a hook manager's move: the hooks it chains now are
        # recorded as theirs (and listed with their hashes in the report).
        sync.install(g.store)
        fixed = not sync.hooks_not_live(g.store)[1]
    return [Finding("hooks-missing", hooks_dir, "; ".join(missing.values()) +
                    ": pushes do not publish and fetches do not import until they are back",
                    fixed)]


def _check_hook_files(g: Grite, fix: bool) -> tuple[list[HookFile], list[Finding]]:
    """grite's shims byte for byte as shipped; every other hook as recorded at install.

    Whatever runs with the user's permissions (an agent in its work tree) can append a line to
    a shim or drop a hook in; each runs on every ref update. --fix rewrites a changed shim; a
    changed or unknown hook of someone else's is only reported: `git grite init` accepts the
    hooks as they are then."""
    from git_brat.grite.sync import exchange as sync
    from git_brat.grite.sync import hookhashes
    hooks_dir, _missing = sync.hooks_not_live(g.store)
    if not hooks_dir:
        return [], []   # grite's hooks were never installed here
    findings = []
    changed = hookhashes.changed_shims(hooks_dir)
    if changed and fix:
        sync.install(g.store, accept_hooks=False)
    still = set(hookhashes.changed_shims(hooks_dir)) if changed and fix else set(changed)
    for path in changed:
        findings.append(Finding("hook-changed", path, "grite's shim differs from the one this "
                                "git-grite ships (a line added?): it runs on every ref update; "
                                "`git grite doctor --fix` rewrites it", path not in still))
    files = hookhashes.check(g.store, hooks_dir)
    for h in files:
        where = "hidden in grite's hook directory" if h.hidden else "run by git"
        if h.state == "changed":
            findings.append(Finding("hook-changed", h.path, f"{where}: changed since grite was "
                                    f"installed (sha256 {h.sha256[:16]}…); if you changed it, "
                                    "`git grite init` accepts it"))
        elif h.state == "unknown":
            findings.append(Finding("hook-unknown", h.path, f"{where}: appeared after grite was "
                                    f"installed (sha256 {h.sha256[:16]}…); if it is yours, "
                                    "`git grite init` accepts it"))
    return files, findings


def _clear_lock(path: str, age: float) -> bool:
    """Remove an abandoned ref lock, but only if nobody touched it while we looked."""
    try:
        before = os.stat(path)
        time.sleep(0.05)
        after = os.stat(path)
        if (before.st_mtime_ns, before.st_ino) != (after.st_mtime_ns, after.st_ino):
            return False
        os.unlink(path)
        return True
    except FileNotFoundError:
        return True
