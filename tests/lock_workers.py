"""Worker processes for the lease-lock race tests (importable by multiprocessing's spawn)."""

from __future__ import annotations

import multiprocessing
import sys
import time
import traceback

BARRIER_TIMEOUT = 120


def race(repo: str, holder: str, resource: str, rounds: int, remote: str | None,
         barrier, results) -> None:
    """Each round: wait for everyone, try to acquire once, the winner releases, report."""
    try:
        from git_brat.grite import locks
        from git_brat.grite.repo import Grite
        g = Grite.open(repo)
        st = locks.settings(g.store, remote=remote, local=remote is None, ttl=60, skew=0)
        st.fallback = False   # a race through a remote must never quietly turn local
        h = locks.holder_for(g, holder)
        for r in range(rounds):
            barrier.wait(BARRIER_TIMEOUT)
            try:
                token = locks.acquire(g, resource, st, h).token
            except locks.LeaseHeld:
                token = 0
            barrier.wait(BARRIER_TIMEOUT)   # everyone has tried before the winner lets go
            if token:
                locks.release(g, resource, st, h)
            results.put((r, holder, token, ""))
    except Exception:   # reported to the test, which fails with the traceback
        results.put((-1, holder, 0, traceback.format_exc()))
        barrier.abort()


def run_race(repos: list[str], resource: str, rounds: int, remote: str | None,
             timeout: float) -> dict[int, list[tuple[str, int]]]:
    """Race one worker per repo for `rounds` rounds; round -> [(holder, token)]; bounded."""
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(len(repos)), ctx.Queue()
    procs = [ctx.Process(target=race, args=(repo, f"w{i}", resource, rounds, remote, barrier, results))
             for i, repo in enumerate(repos)]
    for p in procs:
        p.start()
    rounds_seen: dict[int, list[tuple[str, int]]] = {}
    deadline = time.monotonic() + timeout
    try:
        for _ in range(len(repos) * rounds):
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"race did not finish in {timeout}s")
            r, holder, token, error = results.get(timeout=left)
            if error:
                raise AssertionError(f"worker {holder} failed:\n{error}")
            rounds_seen.setdefault(r, []).append((holder, token))
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
                p.join(5)
    return rounds_seen


def holder_loop(repo: str, resource: str, ttl: float, every: float) -> None:
    """Acquire, then renew forever as a heartbeat, printing after each write (killed by the test)."""
    from git_brat.grite import locks
    from git_brat.grite.repo import Grite
    g = Grite.open(repo)
    st = locks.settings(g.store, local=True, ttl=ttl)
    h = locks.holder_for(g, "doomed")
    out = locks.acquire(g, resource, st, h)
    print(f"acquired {out.token}", flush=True)
    for _ in range(10_000):
        time.sleep(every)
        locks.renew(g, resource, st, h)
        print("renewed", flush=True)


if __name__ == "__main__":
    holder_loop(sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]))
