"""Figures for grite's code context index (issue 36, item 5): `git grite context`.

1. `context index` of this repository (a clone of the checkout) and of a generated 10k-file tree
   (Python, JavaScript, TypeScript, Go and Rust, 2,000 files of each, ~12 symbols a file):
   cold (no index file), then incremental after one file changes (one commit), medians.
2. `context query` warm (the index holds HEAD's tree): in-process (Index.ensure + query, what
   the mayor pays) and as a command (`git grite context query`), against the import floor.

Usage: python bench/bench_context.py [--quick]   (--quick: fewer runs)
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchlib import ROOT, env, floor, git, report, time_cmd

GRITE = str(ROOT / "bin" / "git-grite")
LANGS = {
    "py": "class Thing{i}:\n    def method_{i}_{k}(self):\n        return {k}\n",
    "js": "export class Widget{i}_{k} {{\n  render{k}() {{ return {k}; }}\n}}\n",
    "ts": "export interface Shape{i}_{k} {{ area: number }}\nexport function area{i}_{k}(): number "
          "{{ return {k}; }}\n",
    "go": "func Handle{i}_{k}() int {{ return {k} }}\n",
    "rs": "pub fn compute_{i}_{k}() -> u64 {{ {k} }}\npub struct Cell{i}_{k};\n",
}
HEADER = {"go": "package gen\n\n"}


def generated_repo(files: int) -> Path:
    import tempfile
    repo = Path(tempfile.mkdtemp(prefix="grite-bench-context-"))
    git(repo, "init", "-q", "-b", "main")
    stream = [b"commit refs/heads/main\ncommitter Bench <b@example.com> 1700000000 +0000\n"
              b"data 4\ngen\n"]
    exts = list(LANGS)
    for n in range(files):
        ext = exts[n % len(exts)]
        body = HEADER.get(ext, "") + "".join(LANGS[ext].format(i=n, k=k) for k in range(6))
        data = body.encode()
        stream.append(b"M 100644 inline src/d%03d/f%05d.%s\ndata %d\n%s\n"
                      % (n // 100, n, ext.encode(), len(data), data))
    subprocess.run(["git", "fast-import", "--quiet"], cwd=repo, env=env(), check=True,
                   input=b"".join(stream))
    git(repo, "reset", "-q", "--hard", "main")
    return repo


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def cold_index(repo: Path, runs: int) -> tuple[float, float]:
    """Median wall time, and CPU seconds per run (the shared machine's load inflates wall)."""
    index = repo / ".git" / "grite" / "context" / "index.sqlite"

    def drop():
        for suffix in ("", "-wal", "-shm"):
            Path(str(index) + suffix).unlink(missing_ok=True)
    cpu = children_cpu()
    wall = time_cmd([GRITE, "context", "index"], repo, runs, before=drop)
    return wall, (children_cpu() - cpu) / runs


def incremental_index(repo: Path, path: str, runs: int) -> tuple[float, float]:
    times, cpu = [], 0.0
    for n in range(runs):
        with open(repo / path, "a") as f:
            f.write(f"\ndef added_{n}():\n    pass\n" if path.endswith(".py") else
                    f"\nexport function added{n}() {{}}\n")
        git(repo, "commit", "-q", "-am", f"change {n}")
        t0, c0 = time.perf_counter(), children_cpu()
        subprocess.run([GRITE, "context", "index"], cwd=repo, env=env(), check=True,
                       stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - t0)
        cpu += children_cpu() - c0
    return statistics.median(times), cpu / runs


def query_in_process(repo: Path, term: str, runs: int) -> float:
    from git_brat.git.store import Store
    from git_brat.grite.context.index import Index
    ix = Index(Store.discover(str(repo)))
    ix.ensure()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        ix.ensure()
        ix.query(term, 20)
        times.append(time.perf_counter() - t0)
    ix.close()
    return statistics.median(times)


def measure(name: str, repo: Path, changed: str, term: str, runs: int, base: float) -> None:
    cold, cpu = cold_index(repo, max(1, runs // 2))
    report(f"{name}: context index, cold", cold, note=f"{cold / base:.1f}x floor, "
                                                      f"CPU {cpu:.2f} s")
    inc, cpu = incremental_index(repo, changed, runs)
    report(f"{name}: context index, one file changed", inc,
           note=f"{inc / base:.2f}x floor, CPU {cpu * 1000:.0f} ms")
    for what, word in (("a prefix", term), ("no match: a scan", "nosuchname")):
        warm = query_in_process(repo, word, runs * 4)
        report(f"{name}: query warm, in-process, {what}", warm)
    cli = time_cmd([GRITE, "context", "query", term], repo, runs)
    report(f"{name}: git-grite context query, warm", cli, note=f"{cli / base:.2f}x floor")


def main() -> None:
    quick = "--quick" in sys.argv
    runs = 3 if quick else 7
    base = floor()
    report("floor: python -c 'import dulwich.repo, msgspec, click'", base)
    own = Path(__import__("tempfile").mkdtemp(prefix="grite-bench-context-self-"))
    git(own, "clone", "-q", str(ROOT), str(own / "repo"))
    files = git(own / "repo", "ls-files")
    report("this repository: tracked files", len(files.splitlines()), unit="")
    measure("this repository", own / "repo", "git_brat/grite/context/index.py", "store", runs,
            base)
    t0 = time.perf_counter()
    gen = generated_repo(10_000)
    report("10k-file tree: generated (setup)", time.perf_counter() - t0, unit="s")
    measure("10k files", gen, "src/d050/f05000.py", "widget12", runs, base)
    size = os.path.getsize(gen / ".git" / "grite" / "context" / "index.sqlite")
    report("10k files: index file size", size / (1 << 20), unit=" MiB")


if __name__ == "__main__":
    main()
