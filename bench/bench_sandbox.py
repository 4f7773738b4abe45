"""Figures for sandboxed sessions (issue 27); medians against floors measured in the same run.

1. Engine start: a no-op engine (`sh -c true`) started directly and started in the session's
   bubblewrap sandbox (the same plan a session gets: binds, shadow ref, hidden paths, pid
   namespace): the sandbox's cost per start (goal: under 50 ms added).
2. The witness's own cost per session with a no-op engine, witness.sandbox = none and = bwrap,
   against the floor of bench_witness (`git worktree add -b` + one `git grite lock acquire`).

Usage: python bench/bench_sandbox.py [--quick]
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import time

import msgspec
from benchlib import env, git, new_repo, report

from bench_witness import BRAT, NOOP, brat, session_floor, setup  # noqa: E402


def _spawn(argv: list[str], cwd, runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(argv, cwd=cwd, env=env(), check=True, stdout=subprocess.DEVNULL,
                       start_new_session=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def engine_start(runs: int) -> tuple[float, dict[str, float]]:
    """Median seconds to run a no-op engine to its end, out of and in the sandbox (with each
    network: open, none, and outbound through pasta when it is installed)."""
    from git_brat.brat.config import Config
    from git_brat.brat.engines import Preset
    from git_brat.brat.engines import sandbox
    from git_brat.brat.witness import confine
    from git_brat.git.store import Store
    repo = new_repo("sandbox")
    tid, sid = "a" * 32, "b" * 32
    tree = repo / ".git" / "brat" / "worktrees" / tid
    git(repo, "worktree", "add", "-q", "-b", f"brat/{tid}", str(tree), "main")
    store = Store.discover(str(repo))
    tip = git(repo, "rev-parse", "main")
    plan = confine.plan(store, sid, tid, str(tree), Preset(name="noop", argv=["true"]),
                        Config(), dict(env()), tip)
    inner = ["sh", "-c", "true"]
    plain = _spawn(inner, tree, runs)
    boxed = {}
    for network in ("open", "none", "outbound"):
        if network == "outbound" and not (sandbox.pasta_path() and sandbox.has_default_route()):
            continue
        net_plan = msgspec.structs.replace(plan, network=network)
        boxed[network] = _spawn(sandbox.argv(net_plan, inner, sandbox.bwrap_path() or "bwrap"),
                                tree, runs)
    shutil.rmtree(repo)
    return plain, boxed


def per_session(mode: str, runs: int, tasks: int) -> float:
    per = []
    for _ in range(runs):
        repo = setup(f"sandbox-{mode}", NOOP, tasks)
        brat(repo, "config", "set", "witness.sandbox", mode)
        t0 = time.perf_counter()
        subprocess.run([BRAT, "witness", "run", "--once", "--max-sessions", "1"], cwd=repo,
                       env=env(), check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        per.append((time.perf_counter() - t0) / tasks)
        shutil.rmtree(repo)
    return statistics.median(per)


def main() -> None:
    if shutil.which("bwrap") is None:
        sys.exit("bench_sandbox: bwrap is not on PATH (apt-get install bubblewrap)")
    quick = "--quick" in sys.argv
    runs = 3 if quick else 5
    tasks = 6 if quick else 10
    plain, boxed = engine_start(15 if quick else 40)
    report("floor: no-op engine (sh -c true), started directly", plain)
    for network, took in boxed.items():
        report(f"no-op engine started in the session's bwrap sandbox, network {network}", took,
               note=f"+{(took - plain) * 1000:.1f} ms (goal < 50 ms added)")
    floor = session_floor(10 if quick else 15)
    report("floor: git worktree add -b + git grite lock acquire", floor)
    none = per_session("none", runs, tasks)
    report(f"witness per session, {tasks} no-op sessions, sandbox none", none,
           note=f"{none / floor:.2f}x floor")
    box = per_session("bwrap", runs, tasks)
    report(f"witness per session, {tasks} no-op sessions, sandbox bwrap", box,
           note=f"{box / floor:.2f}x floor; +{(box - none) * 1000:.1f} ms per session")


if __name__ == "__main__":
    main()
