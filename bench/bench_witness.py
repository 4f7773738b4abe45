"""Figures for the witness (issue 9); prints medians and ratios against floors measured here.

1. The witness's own cost per session with a no-op engine (claim + work tree + spawn + record),
   against the floor `git worktree add -b` plus one `git grite lock acquire` process.
2. 16 tasks whose engine sleeps 1 s, --max-sessions 8: wall time against the ideal (2 s plus
   one session's overhead): the parallel efficiency.
3. Peak memory (VmHWM) of the witness process supervising 8 sessions.

Usage: python bench/bench_witness.py [--quick]
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchlib import ROOT, env, git, report

BRAT = str(ROOT / "bin" / "git-brat")


def brat(repo: Path, *args: str) -> str:
    return subprocess.run([BRAT, *args], cwd=repo, env=env(), check=True,
                          stdout=subprocess.PIPE).stdout.decode().strip()


def setup(name: str, engine: list[str], tasks: int) -> Path:
    from benchlib import new_repo
    repo = new_repo(name)
    brat(repo, "init")
    brat(repo, "config", "set", "engines.bench.command", json.dumps(engine))
    brat(repo, "config", "set", "witness.engine", "bench")
    convoy = brat(repo, "convoy", "create", "Bench")
    for i in range(tasks):
        brat(repo, "task", "create", "--convoy", convoy, f"Task {i}")
    return repo


# The no-op engine: a file written, committed by the witness at the end (its salvage path).
NOOP = ["sh", "-c", "echo done > out.txt"]


def per_session(runs: int, tasks: int) -> tuple[float, float]:
    """Median seconds per session of `witness run --once` over `tasks` tasks, one at a time;
    and of one run with a single task (the whole process)."""
    per, single = [], []
    for _ in range(runs):
        repo = setup("witness", NOOP, tasks)
        t0 = time.perf_counter()
        subprocess.run([BRAT, "witness", "run", "--once", "--max-sessions", "1"], cwd=repo,
                       env=env(), check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        per.append((time.perf_counter() - t0) / tasks)
        shutil.rmtree(repo)
        repo = setup("witness1", NOOP, 1)
        t0 = time.perf_counter()
        subprocess.run([BRAT, "witness", "run", "--once"], cwd=repo, env=env(), check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        single.append(time.perf_counter() - t0)
        shutil.rmtree(repo)
    return statistics.median(per), statistics.median(single)


def session_floor(runs: int) -> float:
    """`git worktree add -b` plus one `git grite lock acquire` process."""
    from benchlib import new_repo
    repo = new_repo("floor")
    times = []
    for i in range(runs):
        t0 = time.perf_counter()
        git(repo, "worktree", "add", "-q", "-b", f"b{i}", str(repo / ".git" / f"wt{i}"), "main")
        subprocess.run(["git", "grite", "lock", "acquire", f"task:t{i}"], cwd=repo, env=env(),
                       check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - t0)
    shutil.rmtree(repo)
    return statistics.median(times)


def parallel(runs: int) -> tuple[float, float, int]:
    """Median wall time of 16 one-second sessions at --max-sessions 8, and peak RSS (KiB)."""
    walls, peaks = [], []
    for _ in range(runs):
        repo = setup("parallel", ["sh", "-c", "sleep 1; echo done > out.txt"], 16)
        t0 = time.perf_counter()
        proc = subprocess.Popen([BRAT, "witness", "run", "--once", "--max-sessions", "8"],
                                cwd=repo, env=env(), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        peak = 0
        while proc.poll() is None:
            peak = max(peak, _hwm(proc.pid))
            time.sleep(0.05)
        walls.append(time.perf_counter() - t0)
        peaks.append(peak)
        shutil.rmtree(repo)
    return statistics.median(walls), max(peaks), 16


def _hwm(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except FileNotFoundError:
        pass
    return 0


def main() -> None:
    quick = "--quick" in sys.argv
    runs = 3 if quick else 5
    tasks = 8 if quick else 12
    floor = session_floor(15)
    report("floor: git worktree add -b + git grite lock acquire", floor)
    each, single = per_session(runs, tasks)
    report(f"witness per session, {tasks} no-op sessions in one run", each,
           note=f"{each / floor:.2f}x floor (goal <= 1.5x)")
    report("witness run --once, one no-op session (whole process)", single,
           note=f"{single / floor:.2f}x floor")
    wall, peak, n = parallel(3 if quick else 3)
    ideal = 2.0 + each
    report(f"{n} sessions sleeping 1 s, --max-sessions 8 (wall)", wall,
           note=f"ideal {ideal:.2f}s; efficiency {ideal / wall:.2f} (goal >= 0.75)")
    print(f"{'peak memory of the witness supervising 8 sessions':<58} {peak / 1024:>9.1f} MiB"
          f"  (goal <= 60 MiB)")


if __name__ == "__main__":
    main()
