"""Figures for lease locks (issue 4); prints medians and ratios against floors measured here.

Local: `git grite lock acquire` + `release` as processes vs the import floor.
Distributed: acquire round trip vs a plain `git push` of one ref to the same bare remote,
through a file path and through `git daemon` on 127.0.0.1.

Usage: python bench/bench_locks.py [--quick]
"""

from __future__ import annotations

import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import env, floor, git, new_repo, report


def _pair_time(repo: Path, runs: int, extra: list[str]) -> tuple[float, float, float]:
    """Medians (acquire, release, acquire+release) of the CLI as processes."""
    acq, rel, both = [], [], []
    for i in range(runs):
        res = f"task:bench-{i % 3}"
        t0 = time.perf_counter()
        subprocess.run(["git", "grite", "lock", "acquire", res, *extra], cwd=repo, env=env(),
                       check=True, stdout=subprocess.DEVNULL)
        t1 = time.perf_counter()
        subprocess.run(["git", "grite", "lock", "release", res, *extra], cwd=repo, env=env(),
                       check=True, stdout=subprocess.DEVNULL)
        t2 = time.perf_counter()
        acq.append(t1 - t0)
        rel.append(t2 - t1)
        both.append(t2 - t0)
    return statistics.median(acq), statistics.median(rel), statistics.median(both)


def _library_time(repo: Path, runs: int, remote: str | None) -> float:
    """Median in-process acquire (no interpreter start): the lock protocol's own cost."""
    from git_brat.grite import locks
    from git_brat.grite.repo import Grite
    g = Grite.open(str(repo))
    st = locks.settings(g.store, remote=remote, local=remote is None, ttl=60)
    st.fallback = False
    h = locks.holder_for(g, "bench-lib")
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        locks.acquire(g, "task:bench-lib", st, h)
        times.append(time.perf_counter() - t0)
        locks.release(g, "task:bench-lib", st, h)
    return statistics.median(times)


def _push_time(repo: Path, url: str, runs: int) -> float:
    """Median plain `git push` of one new commit to one ref (the distributed floor)."""
    times = []
    for i in range(runs):
        sha = git(repo, "commit-tree", "-m", f"bench {i}", git(repo, "rev-parse", "HEAD^{tree}"))
        t0 = time.perf_counter()
        subprocess.run(["git", "push", "-q", "--no-verify", url, f"{sha}:refs/bench/one"], cwd=repo,
                       env=env(), check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - t0)
        subprocess.run(["git", "push", "-q", "--no-verify", url, ":refs/bench/one"], cwd=repo,
                       env=env(), check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return statistics.median(times)


def _daemon(base: Path) -> tuple[subprocess.Popen, int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(["git", "daemon", "--reuseaddr", "--listen=127.0.0.1", f"--port={port}",
                             f"--base-path={base}", "--export-all", "--enable=receive-pack", str(base)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            time.sleep(0.05)
    return proc, port


def main() -> None:
    quick = "--quick" in sys.argv
    runs = 5 if quick else 15
    base = floor(runs)
    report("import floor (python -c 'import dulwich.repo, msgspec, click')", base)

    repo = new_repo("locks")
    a, r, both = _pair_time(repo, runs, ["--local"])
    report("local: lock acquire (process)", a, note=f"{a / base:.2f}x floor")
    report("local: lock release (process)", r, note=f"{r / base:.2f}x floor")
    report("local: acquire + release (two processes)", both, note=f"{both / (2 * base):.2f}x two floors")
    lib = _library_time(repo, runs * 2, None)
    report("local: acquire in-process (library)", lib)

    tmp = Path(tempfile.mkdtemp(prefix="grite-bench-hub-"))
    hub = tmp / "hub.git"
    git(tmp, "init", "-q", "--bare", str(hub))
    daemon, port = _daemon(tmp)
    try:
        for label, url in (("file remote", str(hub)), ("git daemon", f"git://127.0.0.1:{port}/hub.git")):
            if "origin" in git(repo, "remote").split():
                git(repo, "remote", "remove", "origin")
            git(repo, "remote", "add", "origin", url)
            push = _push_time(repo, url, runs)
            report(f"{label}: plain git push of one ref", push)
            da, dr, dboth = _pair_time(repo, runs, ["--remote", "origin", "--no-fallback"])
            report(f"{label}: lock acquire (process)", da,
                   note=f"{da / push:.2f}x push; {(da - base) / push:.2f}x push after the import floor")
            report(f"{label}: lock release (process)", dr, note=f"{dr / push:.2f}x push")
            dlib = _library_time(repo, runs * 2, "origin")
            report(f"{label}: acquire in-process (library)", dlib, note=f"{dlib / push:.2f}x push")
    finally:
        daemon.terminate()
        daemon.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(repo, ignore_errors=True)


if __name__ == "__main__":
    main()
