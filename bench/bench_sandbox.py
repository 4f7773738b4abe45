"""Figures for sandboxed sessions (issue 27); medians against floors measured in the same run.

1. Engine start: a no-op engine (`sh -c true`) started directly and started in the session's
   bubblewrap sandbox (the same plan a session gets: binds, shadow ref, hidden paths, pid
   namespace): the sandbox's cost per start (goal: under 50 ms added).
2. The witness's own cost per session with a no-op engine, witness.sandbox = none and = bwrap,
   against the floor of bench_witness (`git worktree add -b` + one `git grite lock acquire`).
3. The object hand-over at a sandboxed session's end (issue 33): the objects of a 10-commit
   session taken in from its private directory, verified (pack-objects, index-pack --strict
   into a quarantine, a connectivity walk, the pack moved in), against a bare `git rev-parse`
   (goal: under 100 ms).

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


def hand_over(runs: int, commits: int = 10) -> tuple[float, float]:
    """Median seconds of a bare `git rev-parse HEAD`, and of taking in a session's objects."""
    import os
    from git_brat.git import quarantine
    repo = new_repo("handover")
    for i in range(40):   # a small project: the session's commits change a few of its files
        (repo / f"f{i}.txt").write_text(f"file {i}\n" * 50)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "project")
    base = git(repo, "rev-parse", "HEAD")
    common, pack_dir = str(repo / ".git"), repo / ".git" / "objects" / "pack"
    shared = str(repo / ".git" / "objects")
    floor_t = statistics.median(_timed(lambda: git(repo, "rev-parse", "HEAD"), runs))
    times = []
    for n in range(runs):
        private = str(repo / f"private{n}")
        quarantine.make_private_store(private, common)
        os.unlink(os.path.join(private, "info", "alternates"))   # as a sandbox sees it: env here
        e = {"GIT_OBJECT_DIRECTORY": private, "GIT_ALTERNATE_OBJECT_DIRECTORIES": shared}
        tip = base
        for c in range(commits):
            blob = _git_env(repo, e, "hash-object", "-w", "--stdin",
                            input=f"session {n} commit {c}\n".encode() * 30)
            tree = _git_env(repo, e, "mktree", input=(
                git(repo, "ls-tree", base).replace(git(repo, "rev-parse", f"{base}:f{c}.txt"),
                                                   blob) + "\n").encode())
            tip = _git_env(repo, e, "commit-tree", "-p", tip, "-m", f"commit {c}", tree)
        before = set(os.listdir(pack_dir))
        t0 = time.perf_counter()
        quarantine.take_in(common, private, tip, [base])
        times.append(time.perf_counter() - t0)
        for name in set(os.listdir(pack_dir)) - before:   # the next run takes in as much
            os.unlink(pack_dir / name)
        shutil.rmtree(private)
    shutil.rmtree(repo)
    return floor_t, statistics.median(times)


def _timed(fn, runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def _git_env(cwd, extra: dict, *args, input: bytes | None = None) -> str:
    return subprocess.run(["git", *args], cwd=cwd, env={**env(), **extra}, input=input,
                          check=True, stdout=subprocess.PIPE).stdout.decode().strip()


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
    rev_parse, taken = hand_over(7 if quick else 21)
    report("floor: git rev-parse HEAD", rev_parse)
    report("object hand-over of a 10-commit session (verified)", taken,
           note=f"{taken / rev_parse:.1f}x floor (goal < 100 ms)")
    plain, boxed = engine_start(15 if quick else 40)
    report("floor: no-op engine (sh -c true), started directly", plain)
    launcher = _spawn([sys.executable, "-I", "-S", "-c", "pass"], ".", 15 if quick else 40)
    report("floor: python -I -S -c pass (the outbound launcher's own start)", launcher)
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
