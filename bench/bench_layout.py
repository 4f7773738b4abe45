"""Figures for the layered layout (issue 23): a command's import cost did not grow.

`git grite issue list --json` (warm cache, 1k issues) and `git brat status` (1k entities of
settled work plus a few active tasks), each run by this checkout and by an earlier revision
(default a861a4e, the last before the layout change), against the import floor, measured
round-robin in the same minutes (floor, before, after, floor, …) so the machine's drift does
not enter the ratios. Also `python -X importtime` of each CLI's modules for one command.

Usage: python bench/bench_layout.py [--before REV] [--rounds N]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import FLOOR_CMD, ROOT, env, git, new_repo
from bench_scale import history


def checkout(rev: str) -> Path:
    """A detached work tree of rev, compiled as an installation would be."""
    path = Path(tempfile.mkdtemp(prefix="brat-bench-before-"))
    git(ROOT, "worktree", "add", "-q", "--detach", str(path), rev)
    import compileall
    compileall.compile_dir(str(path / "git_brat"), quiet=1)
    return path


def issues_repo(n: int) -> Path:
    repo = new_repo(f"layout-issues{n}")
    data = "[" + ",".join(f'{{"title": "Issue number {i}", "labels": ["bench"]}}'
                          for i in range(n)) + "]"
    source = repo.parent / f"{repo.name}.json"
    source.write_text(data)
    subprocess.run(["git", "grite", "import", str(source)], cwd=repo, env=env(), check=True,
                   stdout=subprocess.DEVNULL)
    return repo


def brat_repo(n: int) -> Path:
    repo = new_repo(f"layout-brat{n}")
    subprocess.run([str(ROOT / "bin" / "git-brat"), "init"], cwd=repo, env=env(), check=True,
                   stdout=subprocess.DEVNULL)
    history(repo, n)
    brat = str(ROOT / "bin" / "git-brat")
    convoy = subprocess.run([brat, "convoy", "create", "Active work"], cwd=repo, env=env(),
                            check=True, stdout=subprocess.PIPE, text=True).stdout.strip()
    for k in range(5):
        subprocess.run([brat, "task", "create", "--convoy", convoy, f"Active {k}"],
                       cwd=repo, env=env(), check=True, stdout=subprocess.DEVNULL)
    return repo


def once(cmd: list[str], cwd: Path) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, env=env(), check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def import_ms(bin_path: Path, args: list[str], cwd: Path) -> tuple[float, float]:
    """(git_brat's own modules, every module) import time in ms for one command, summed from
    the self times `python -X importtime` prints."""
    proc = subprocess.run([sys.executable, "-X", "importtime", str(bin_path), *args], cwd=cwd,
                          env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    own = every = 0
    for line in proc.stderr.splitlines():
        parts = line.split("|")
        if len(parts) != 3 or not parts[0].split(":")[-1].strip().isdigit():
            continue   # the header
        self_us, name = int(parts[0].split(":")[-1]), parts[2].strip()
        every += self_us
        if name == "git_brat" or name.startswith("git_brat."):
            own += self_us
    return own / 1000, every / 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", default="a861a4e")
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    before = checkout(args.before)
    try:
        measure({"before": before, "after": ROOT}, args.rounds)
    finally:
        git(ROOT, "worktree", "remove", "--force", str(before))


def measure(trees: dict[str, Path], rounds: int) -> None:
    issues, brat = issues_repo(1000), brat_repo(1000)
    commands = {
        "issue list --json, 1k issues, warm": ("git-grite", ["issue", "list", "--json"], issues),
        "git brat status, 1k entities": ("git-brat", ["status"], brat),
    }
    samples: dict[str, list[float]] = {"floor": []}
    for which, tree in trees.items():
        for name, (prog, argv, repo) in commands.items():
            once([str(tree / "bin" / prog), *argv], repo)   # warm the cache for this tree
            samples[f"{name} ({which})"] = []
    for _ in range(rounds):
        samples["floor"].append(once(FLOOR_CMD, ROOT))
        for which, tree in trees.items():
            for name, (prog, argv, repo) in commands.items():
                samples[f"{name} ({which})"].append(once([str(tree / "bin" / prog), *argv], repo))
    floor = statistics.median(samples["floor"])
    print(f"{'floor: ' + ' '.join(FLOOR_CMD[1:]):<58} {floor * 1000:>9.1f} ms")
    for name in commands:
        b = statistics.median(samples[f"{name} (before)"])
        a = statistics.median(samples[f"{name} (after)"])
        print(f"{name:<40} before {b * 1000:7.1f} ms ({b / floor:.2f}x floor)  "
              f"after {a * 1000:7.1f} ms ({a / floor:.2f}x floor)  after/before {a / b:.3f}")
    for which, tree in trees.items():
        for name, (prog, argv, repo) in commands.items():
            runs = [import_ms(tree / "bin" / prog, argv, repo) for _ in range(5)]
            own = statistics.median(r[0] for r in runs)
            every = statistics.median(r[1] for r in runs)
            print(f"  imports, {name} ({which}): git_brat's own {own:.1f} ms, all {every:.1f} ms")
    for repo in (issues, brat):
        shutil.rmtree(repo, ignore_errors=True)


if __name__ == "__main__":
    main()
