"""Figures for long-lived repositories (issue 14): what a command costs as history grows.

1. An agent's step, `git brat task comment ID -m …` then `git brat task show ID --json` (two
   processes), at 1k, 10k and 100k entities: against two import floors, and 100k against 1k.
   The three repositories are built first and measured round-robin with the floor, so the
   machine's drift (up to 2x over a day here) does not enter the ratios.
2. 4 processes writing (task comment) and 4 reading (task show --json) at 100k entities: events
   per second and read latency (p50, p99).
3. `git brat status` at 100k entities with 50 active tasks: against the import floor; and its
   first run ever (every lease record read once) and its first after the next gc.

The history is a year of agents' work, written with `git fast-import`: convoys of ten tasks, each
task with a session, a merge request and the lease its session held (a lock ref, released), all
merged and ended long ago (so cold), one batch commit per command as the product writes them.
The active work is made with the real commands.

Usage: python bench/bench_scale.py [--quick]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import msgspec

from benchlib import (FLOOR_CMD, ROOT, env, fast_import, fast_import_commit, floor, git, new_repo,
                      report)

BRAT = str(ROOT / "bin" / "git-brat")
OLD = 1_700_000_000_000   # Nov 2023: long enough ago to be cold


def brat(repo: Path, *args: str) -> str:
    return subprocess.run([BRAT, *args], cwd=repo, env=env(), check=True,
                          stdout=subprocess.PIPE).stdout.decode().strip()


def history(repo: Path, entities: int) -> int:
    """Append settled work amounting to about `entities` entities; the number of events."""
    from git_brat.grite.model import events as ev
    from git_brat.grite.repo import Grite
    g = Grite.open(str(repo))
    actor, replica = g.identity.actor.id, g.identity.replica.id
    parent = g.store.refs.read(b"refs/grite/wal").decode()
    lines, leases, lamport, commits, count = [], [], 1000, 0, 0

    def commit(drafts):
        nonlocal lamport, commits, count
        events = []
        for entity, op in drafts:
            lamport += 1
            events.append(ev.make_event(entity, actor, lamport, OLD + lamport, op))
        blob = ev.encode_batch(ev.Batch(ev.FORMAT_VERSION, replica, lamport, events))
        lines.append(fast_import_commit("refs/grite/wal", blob, f"brat: history {commits}",
                                        OLD // 1000 + commits, parent if commits == 0 else None))
        commits += 1
        count += len(events)

    def lease(tid):   # the claim each task's session held, released long ago (one ref per task)
        from git_brat.grite import locks
        at = OLD + lamport
        rec = locks.Lease(f"task:{tid}", locks.Holder("witness-bench"), 1, "released", at, at + 60000,
                          60000, at + 30000, released_at=at + 30000, action="release")
        leases.append(fast_import_commit(locks.ref_for(f"task:{tid}").decode(),
                                         msgspec.json.encode(rec), "grite: lock release",
                                         at // 1000, entry="lease"))

    made = 0
    while made < entities:
        cid = ev.new_entity_id()
        commit([(cid, ev.Create("convoy", {"title": f"Convoy {made}", "body": ""}))])
        made += 1
        for k in range(10):
            tid, sid, mid = ev.new_entity_id(), ev.new_entity_id(), ev.new_entity_id()
            commit([(tid, ev.Create("task", {"title": f"Task {made} {k}", "body": "fix it",
                                              "convoy": cid, "priority": 2, "status": "queued"}))])
            commit([(tid, ev.SetFields({"status": "running", "status_from": "queued"})),
                    (sid, ev.Create("session", {"task": tid, "status": "running",
                                                "engine": "claude", "branch": f"brat/{tid[:8]}"}))])
            commit([(sid, ev.SetFields({"status": "done", "exit_code": 0})),
                    (tid, ev.SetFields({"status": "needs-review", "status_from": "running"})),
                    (mid, ev.Create("merge", {"task": tid, "status": "queued",
                                              "branch": f"brat/{tid[:8]}"}))])
            commit([(tid, ev.Comment("done: fixed, tests pass"))])
            lease(tid)
            commit([(mid, ev.SetFields({"status": "merged"})),
                    (tid, ev.SetFields({"status": "merged", "status_from": "merging"}))])
            made += 3
    # The log first, then the lock refs: fast-import keeps few branches active at a time.
    fast_import(repo, lines + leases)
    git(repo, "pack-refs", "--all")   # as git gc would have left them
    return count


def setup(entities: int, active: int) -> tuple[Path, list[str]]:
    repo = new_repo(f"scale{entities}")
    brat(repo, "init")
    events = history(repo, entities)
    subprocess.run(["git", "grite", "rebuild"], cwd=repo, env=env(), check=True,
                   stdout=subprocess.DEVNULL)
    convoy = brat(repo, "convoy", "create", "Today")
    tasks = [brat(repo, "task", "create", "--convoy", convoy, f"Active {i}") for i in range(active)]
    print(f"  ({entities} entities: {events} events of history, {active} active tasks)")
    return repo, tasks


def timed(cmd: list[str], repo: Path) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=repo, env=env(), check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def steps(repos: dict[int, tuple[Path, str]], runs: int) -> tuple[dict[int, float], float]:
    """Medians of the step at every size and of the floor, run round-robin (floor, 1k, 10k,
    100k, floor, ...): the machine's speed drifts, so sizes are compared in the same minutes."""
    times: dict[int, list[float]] = {n: [] for n in repos}
    floors = []
    for _ in range(runs):
        floors.append(timed(FLOOR_CMD, ROOT))
        for n, (repo, tid) in repos.items():
            times[n].append(timed([BRAT, "task", "comment", tid, "-m", "step"], repo)
                            + timed([BRAT, "task", "show", tid, "--json"], repo))
    return {n: statistics.median(t) for n, t in times.items()}, statistics.median(floors)


def concurrent(repo: Path, tasks: list[str], per_proc: int) -> None:
    """4 writer and 4 reader loops, each running its commands one after another."""
    reads: list[float] = []
    written = [0]
    lock = threading.Lock()

    def writer(tid):
        for _ in range(per_proc):
            timed([BRAT, "task", "comment", tid, "-m", "concurrent"], repo)
            with lock:
                written[0] += 1

    def reader(tid):
        for _ in range(per_proc):
            t = timed([BRAT, "task", "show", tid, "--json"], repo)
            with lock:
                reads.append(t)
    threads = [threading.Thread(target=writer, args=(tasks[i],)) for i in range(4)]
    threads += [threading.Thread(target=reader, args=(tasks[4 + i],)) for i in range(4)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    elapsed = time.perf_counter() - t0
    reads.sort()
    p99 = reads[min(len(reads) - 1, int(len(reads) * 0.99))]
    report("4 writers + 4 readers: events/s", written[0] / elapsed, unit=" ev/s",
           note=f"{written[0]} comments in {elapsed:.1f} s")
    report("4 writers + 4 readers: read latency p50", statistics.median(reads))
    report("4 writers + 4 readers: read latency p99", p99)


def main() -> None:
    quick = "--quick" in sys.argv
    runs = 5 if quick else 11
    report("floor: python -c 'import dulwich.repo, msgspec, click'", floor(runs))
    sizes = [1000, 10000] if quick else [1000, 10000, 100000]
    built = {n: setup(n, 50) for n in sizes}
    medians, base = steps({n: (repo, tasks[0]) for n, (repo, tasks) in built.items()}, runs)
    for n in sizes:
        report(f"agent step (comment + show --json), {n} entities", medians[n],
               note=f"{medians[n] / (2 * base):.2f}x two floors (floor {base * 1000:.0f} ms; "
                    f"goal at 100k <= 1.3)")
    big = sizes[-1]
    print(f"{'ratio agent step ' + str(big) + ' / 1000 (same minutes)':<58} "
          f"{medians[big] / medians[1000]:>10.2f}x  (goal <= 1.2)")
    repo, tasks = built[big]
    first = timed([BRAT, "status"], repo)
    report(f"git brat status, first run ({big} entities: reads every lease record once)", first)
    brat(repo, "task", "comment", tasks[1], "-m", "a write, then gc packs it")
    git(repo, "pack-refs", "--all")
    report("git brat status, first run after the next gc (summarises packed-refs)",
           timed([BRAT, "status"], repo))
    st, fl = [], []
    for _ in range(runs):
        fl.append(timed(FLOOR_CMD, repo))
        st.append(timed([BRAT, "status"], repo))
    st, fl = statistics.median(st), statistics.median(fl)
    report(f"git brat status, {big} entities, 50 active tasks", st,
           note=f"{st / fl:.2f}x floor (floor {fl * 1000:.0f} ms; goal <= 1.5)")
    concurrent(repo, tasks, 5 if quick else 15)
    import shutil
    for n, (repo, _tasks) in built.items():
        git(repo, "gc", "-q")
        size = sum(p.stat().st_size for p in (repo / ".git" / "objects").rglob("*") if p.is_file())
        report(f"repository objects after git gc, {n} entities", size / 1e6, unit=" MB")
        shutil.rmtree(repo, ignore_errors=True)


if __name__ == "__main__":
    main()
