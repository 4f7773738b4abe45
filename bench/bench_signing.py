"""What signatures cost (issue 26): signing at write, verifying at replay; medians, and ratios
against the same work unsigned in the same run.

Usage: python bench/bench_signing.py [--quick] [--lease]
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchlib import FLOOR_CMD, ROOT, fast_import, fast_import_commit, git, new_repo, report, time_cmd


def _median(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def bench_write(runs: int) -> None:
    """One append in-process (objects, ref update, fsync), signed and with signing left out."""
    from git_brat.grite.log import sign, wal
    from git_brat.grite.model import events as ev
    from git_brat.grite.repo import Grite
    repo = new_repo("sign-write")
    g = Grite.open(str(repo))
    n = [0]

    def one():
        n[0] += 1
        g.append([wal.Draft(ev.new_entity_id(), ev.Create("issue", {"title": f"t{n[0]}"}))], "bench")
    one()   # (the key is loaded and cryptography imported once per process: not per append)
    signed = _median(one, runs)
    real = sign.Signer.trailers
    sign.Signer.trailers = lambda self, payload, seen: ""
    try:
        unsigned = _median(one, runs)
    finally:
        sign.Signer.trailers = real
    report("append one batch, signed (in-process)", signed,
           note=f"{signed / unsigned:.2f}x unsigned ({unsigned * 1000:.1f} ms)")
    signer = sign.Signer(os.path.join(repo, ".git", "grite"))
    payload = os.urandom(400)
    t = _median(lambda: signer.trailers(payload, {"a" * 16: "b" * 40}), runs * 20)
    report("  of which: signing one batch", t)
    shutil.rmtree(repo, ignore_errors=True)


def _foreign_log(repo: Path, batches: int, keydir: str | None) -> None:
    """A peer replica's log of `batches` batches (4 events each) under refs/grite/replicas/,
    signed with the key in keydir (None: unsigned, as before signatures)."""
    from git_brat.grite.log import sign
    from git_brat.grite.model import events as ev
    replica, actor = "ab" * 8, "cd" * 8
    ref = f"refs/grite/replicas/{replica}"
    chunks, lamport = [], 0
    for i in range(batches):
        events = []
        for j in range(4):
            lamport += 1
            first = i == 0 and j == 0   # the peer declares its actor first
            op = ev.Create("actor", {"name": "peer", "email": "p@x", "replica": replica}) if first \
                else ev.Create("issue", {"title": f"i{i}.{j}", "state": "open"})
            events.append(ev.make_event(actor if first else ev.new_entity_id(), actor, lamport,
                                        1_700_000_000_000 + i, op))
        blob = ev.encode_batch(ev.Batch(ev.FORMAT_VERSION, replica, lamport, events))
        message = f"grite: bench {i}"
        if keydir is not None:
            message += "\n\n" + sign.trailers(keydir, blob, {})
        chunks.append(fast_import_commit(ref, blob, message, 1_700_000_000 + i))
    fast_import(repo, chunks)


def bench_replay(batches: int, runs: int) -> None:
    """Cold `issue list` over a peer's log (cache and verdicts removed), signed vs unsigned."""
    from git_brat.git.store import Store
    from git_brat.grite.log import sign, verify
    keydir = tempfile.mkdtemp(prefix="grite-bench-key-")
    sign.ensure_key(keydir)
    times, repos = {}, {}
    for signed in (False, True):
        repo = repos[signed] = new_repo(f"sign-replay-{int(signed)}")
        git(repo, "config", "grite.snapshots", "false")
        _foreign_log(repo, batches, keydir if signed else None)
        where = repo / ".git" / "grite"

        def clear(where=where):
            shutil.rmtree(where / "cache", ignore_errors=True)
            for name in ("verified", "verified.accepted", "trust.json"):
                try:
                    os.unlink(where / name)
                except FileNotFoundError:
                    pass
        times[signed] = time_cmd(["git", "grite", "issue", "list", "--json"], repo, runs,
                                 before=clear)
    report(f"issue list --json, cold, {batches} unsigned batches", times[False])
    report(f"issue list --json, cold, {batches} signed batches", times[True],
           note=f"{times[True] / times[False]:.2f}x unsigned")
    store = Store.discover(str(repos[True]))
    t = _median(lambda: (verify.forget(store), verify.check(store)), max(3, runs // 2))
    report(f"  of which: judging {batches} signed batches from scratch (in-process)", t,
           note=f"{t / batches * 1e6:.0f} us a batch")
    for repo in repos.values():
        shutil.rmtree(repo, ignore_errors=True)
    shutil.rmtree(keydir, ignore_errors=True)


def bench_import(runs: int) -> None:
    """What a write process pays once: importing cryptography's Ed25519 (reads never do)."""
    base = time_cmd(FLOOR_CMD, ROOT, runs)
    with_crypto = time_cmd([*FLOOR_CMD[:-1], FLOOR_CMD[-1] + "; from cryptography.hazmat."
                            "primitives.asymmetric.ed25519 import Ed25519PrivateKey"], ROOT, runs)
    report("import floor + cryptography's Ed25519", with_crypto,
           note=f"+{(with_crypto - base) * 1000:.1f} ms over the floor ({base * 1000:.1f} ms)")


def bench_lease(runs: int) -> None:
    """Lease records (issue 34): acquire and renew as processes against the import floor, and
    in-process signed vs with signing left out; checking a chain of signed records cold."""
    from git_brat.git.store import Store
    from git_brat.grite import locks
    from git_brat.grite.cache import leases as cache_leases, seals
    from git_brat.grite.log import sign
    from git_brat.grite.repo import Grite
    base = time_cmd(FLOOR_CMD, ROOT, runs)
    report("import floor (python -c 'import dulwich.repo, msgspec, click')", base)
    repo = new_repo("sign-lease")
    # The same CLI in the same launcher, with lease signing left out (no key load, no crypto
    # import, no trailers): what signing adds to one process.
    launch = f"import sys; sys.path.insert(0, {str(ROOT)!r}); sys.argv = ['git-grite', *sys.argv[1:]]; "
    unsign = ("import types; from git_brat.grite.locks import cas; "
              "from git_brat.grite.cache import seals; "
              "cas._signer = lambda g: types.SimpleNamespace(key='', "
              "lease_trailers=lambda p, parent: ''); seals.remember = lambda *a: None; ")
    run = "from git_brat.grite.cli import main; main()"
    for label, code in (("signed", launch + run), ("unsigned", launch + unsign + run)):
        cmd = [sys.executable, "-c", code, "lock"]
        res = f"task:{label}"
        time_cmd([*cmd, "acquire", res, "--local", "--ttl", "600"], repo, 1)
        acquire = time_cmd([*cmd, "acquire", res, "--local", "--ttl", "600"], repo, runs)
        renew = time_cmd([*cmd, "renew", res, "--local"], repo, runs)
        report(f"lock acquire (process, {label} record)", acquire,
               note=f"{acquire / base:.2f}x floor")
        report(f"lock renew (process, {label} record)", renew, note=f"{renew / base:.2f}x floor")
    g = Grite.open(str(repo))
    st = locks.settings(g.store, local=True, ttl=600)
    holder = locks.holder_for(g, "bench-lib")
    locks.acquire(g, "task:lib", st, holder)

    def one():
        locks.renew(g, "task:lib", st, holder)
    one()
    signed = _median(one, runs * 4)
    real = (sign.Signer.lease_trailers, seals.remember)
    sign.Signer.lease_trailers = lambda self, payload, parent: ""
    seals.remember = lambda store, sha, key: None
    try:
        unsigned = _median(one, runs * 4)
    finally:
        sign.Signer.lease_trailers, seals.remember = real
    report("renew in-process (library), signed", signed,
           note=f"{signed / unsigned:.2f}x unsigned ({unsigned * 1000:.1f} ms); "
                f"+{(signed - unsigned) * 1000:.2f} ms a record")
    # A reader that never saw the chain: every signature of the last 100 records checked.
    store = Store.discover(str(repo))
    for _ in range(100):
        one()
    tip = store.refs.read(locks.ref_for("task:lib"))
    where = repo / ".git" / "grite" / "lease-seals"

    def cold():
        seals._SEALS.clear()
        seals._KEPT.clear()
        cache_leases._RECORDS.clear()
        where.unlink(missing_ok=True)
        locks.effective(store, tip, int(time.time() * 1000))

    def warm():
        seals._SEALS.clear()
        seals._KEPT.clear()
        cache_leases._RECORDS.clear()
        locks.effective(store, tip, int(time.time() * 1000))
    c, w = _median(cold, max(3, runs // 2)), _median(warm, max(3, runs // 2))
    report("  judging the last 100 records, none checked before", c,
           note=f"{(c - w) / 100 * 1e6:.0f} us a signature checked")
    report("  judging the last 100 records, checked before (lease-seals)", w)
    shutil.rmtree(repo, ignore_errors=True)


def main() -> None:
    quick = "--quick" in sys.argv
    runs = 5 if quick else 15
    if "--lease" in sys.argv:
        bench_lease(runs)
        return
    bench_import(runs)
    bench_write(runs * 2)
    bench_replay(1000 if quick else 5000, runs)
    bench_lease(runs)


if __name__ == "__main__":
    main()
