"""Refinery figures: overhead per merge against raw git, and batching with a 1 s check."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

from benchlib import env, git, report


def brat(repo, *args) -> str:
    return subprocess.run(["git", "brat", *args], cwd=repo, env=env(), check=True,
                          stdout=subprocess.PIPE).stdout.decode()


def setup(n: int, bad: int | None = None, **cfg) -> tuple[Path, list[str]]:
    """A repository with n hand-made merge requests on other branches than the checkout."""
    repo = Path(tempfile.mkdtemp(prefix="brat-bench-refinery-"))
    git(repo, "init", "-q", "-b", "main")
    (repo / "README").write_text("bench\n")
    git(repo, "add", "README")
    git(repo, "commit", "-q", "-m", "initial")
    brat(repo, "init")
    git(repo, "checkout", "-q", "-b", "work")
    for k, v in cfg.items():
        brat(repo, "config", "set", f"refinery.{k}", str(v))
    os.environ.update({k: v for k, v in env().items() if k.startswith("GIT_")})
    from git_brat.brat import board as model
    g = model.open_grite(str(repo))
    cid = model.create_convoy(g, "bench")
    tids = []
    for i in range(n):
        tid = model.create_task(g, cid, f"request {i}")
        name = "bad.txt" if i == bad else f"f{i}.txt"
        blob = git(repo, "hash-object", "-w", "--stdin", input=f"{i}\n".encode())
        idx = tempfile.mktemp()
        e = dict(env(), GIT_INDEX_FILE=idx)
        subprocess.run(["git", "read-tree", "main"], cwd=repo, env=e, check=True)
        subprocess.run(["git", "update-index", "--add", "--cacheinfo", f"100644,{blob},{name}"],
                       cwd=repo, env=e, check=True)
        tree = subprocess.run(["git", "write-tree"], cwd=repo, env=e, check=True,
                              stdout=subprocess.PIPE).stdout.decode().strip()
        os.unlink(idx)
        c = git(repo, "commit-tree", tree, "-p", "main", "-m", f"request {i}")
        git(repo, "update-ref", f"refs/heads/brat/{tid}", c)
        model.update_task(g, tid, "running")
        model.update_task(g, tid, "needs-review")
        tids.append(tid)
    return repo, tids


def raw_merges(repo: Path, tids: list[str]) -> float:
    """The same landing with raw git: rebase in a worktree, a no-op check, update-ref."""
    wt = repo / ".git" / "raw-wt"
    git(repo, "worktree", "add", "-q", "--detach", str(wt), "main")
    t0 = time.perf_counter()
    for tid in tids:
        old = git(repo, "rev-parse", "main")
        git(wt, "checkout", "-q", "--detach", old)
        git(wt, "rebase", "-q", "--onto", old, f"brat/{tid}~1", f"brat/{tid}")
        subprocess.run(["sh", "-c", "true"], cwd=wt, check=True)
        git(repo, "update-ref", "refs/heads/main", git(wt, "rev-parse", "HEAD"), old)
    return time.perf_counter() - t0


def refinery_once(repo: Path) -> tuple[float, dict]:
    t0 = time.perf_counter()
    out = brat(repo, "refinery", "run", "--once", "--json")
    return time.perf_counter() - t0, json.loads(out)


def overhead(n: int, rounds: int = 3) -> None:
    """Medians over rounds, the refinery and raw git alternating (the machine is shared)."""
    import statistics
    ours, theirs = [], []
    for _ in range(rounds):
        repo, tids = setup(n, check="true")
        took, rep = refinery_once(repo)
        merged = sum(1 for p in rep["passes"] for o in p["outcomes"] if o["result"] == "merged")
        assert merged == n, rep
        ours.append(took / n)
        raw_repo, raw_tids = setup(n)
        theirs.append(raw_merges(raw_repo, raw_tids) / n)
    a, b = statistics.median(ours), statistics.median(theirs)
    report(f"refinery, {n} merges in one run, no-op check: per merge", a)
    report("raw git rebase + check + update-ref: per merge", b)
    report("ratio", a / b, "x", "goal <= 2x")


def batching(n: int) -> None:
    for bad in (None, 5):
        for batch in (1, 4, 8):
            repo, _ = setup(n, bad=bad, batch=batch, check="sleep 1; test ! -e bad.txt")
            took, rep = refinery_once(repo)
            runs = sum(p["check_runs"] for p in rep["passes"])
            merged = sum(1 for p in rep["passes"] for o in p["outcomes"] if o["result"] == "merged")
            what = "0 failing" if bad is None else "1 failing"
            report(f"{n} requests, 1 s check, batch {batch}, {what}", took, " s",
                   f"{runs} check runs, {merged} merged")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--merges", type=int, default=20)
    ap.add_argument("--requests", type=int, default=16)
    args = ap.parse_args()
    overhead(args.merges)
    batching(args.requests)
