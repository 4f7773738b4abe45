"""Figures for the grite substrate (issue 2); prints medians and ratios against floors.

Usage: python bench/bench_grite.py [--quick]
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import time

from benchlib import ROOT, env, floor, git, new_repo, report, time_cmd, write_log_fast


def bench_create(runs: int, base: float) -> None:
    repo = new_repo("create")
    t = time_cmd(["git", "grite", "issue", "create", "Bench issue"], repo, runs)
    report("issue create (process)", t, note=f"ratio {t / base:.2f}x floor (goal <= 1.3)")
    t2 = time_cmd(["git-grite", "issue", "create", "Bench issue"], repo, runs)
    report("issue create (git-grite directly, no git dispatch)", t2, note=f"ratio {t2 / base:.2f}x floor")


def bench_list(sizes: list[int], runs: int, base: float) -> dict[int, float]:
    warm = {}
    for n in sizes:
        repo = new_repo(f"list{n}")
        data = json.dumps([{"title": f"Issue number {i}", "body": "x" * 40,
                            "labels": ["bench", f"l{i % 7}"]} for i in range(n)])
        (repo / ".." / f"import-{n}.json").resolve().write_text(data)
        subprocess.run(["git", "grite", "import", str((repo / ".." / f"import-{n}.json").resolve())],
                       cwd=repo, env=env(), check=True, stdout=subprocess.DEVNULL)
        cmd = ["git", "grite", "issue", "list", "--json"]
        cache = repo / ".git" / "grite" / "cache"
        # Cold: replayed from the log (a snapshot would be written by the first run otherwise).
        git(repo, "config", "grite.snapshots", "false")
        cold = time_cmd(cmd, repo, max(3, runs // 3), before=lambda: shutil.rmtree(cache, True))
        git(repo, "config", "grite.snapshots", "true")
        git(repo, "grite", "snapshot")
        from_snap = time_cmd(cmd, repo, max(3, runs // 3), before=lambda: shutil.rmtree(cache, True))
        time_cmd(cmd, repo, 1)
        warm[n] = time_cmd(cmd, repo, runs)
        # A write, then a read that needs the state: what an agent's every step costs at this size.
        first = json.loads(subprocess.run(cmd, cwd=repo, env=env(), check=True,
                                          stdout=subprocess.PIPE).stdout)[0]["id"]
        step = time_cmd(["sh", "-c", f"git grite issue comment {first} -m step >/dev/null && "
                                     f"git grite issue show {first} --json"], repo, runs)
        report(f"issue list --json, {n} issues, cold cache", cold, note=f"{cold / base:.2f}x floor")
        report(f"issue list --json, {n} issues, cold cache, from a snapshot", from_snap,
               note=f"{from_snap / base:.2f}x floor")
        report(f"issue list --json, {n} issues, warm cache", warm[n], note=f"{warm[n] / base:.2f}x floor")
        report(f"comment + show --json, {n} issues (two processes)", step,
               note=f"{step / (2 * base):.2f}x two floors")
        shutil.rmtree(repo, ignore_errors=True)
    return warm


def bench_rebuild(events: int, per_batch: int, runs: int) -> None:
    from git_brat.grite.model import events as ev
    repo = new_repo("rebuild")
    # The same 100k events either way: an issue created, then labelled and commented on.
    flat = []
    for b in range(events // 10):
        eid = ev.new_entity_id()
        flat.append((eid, ev.Create("issue", {"title": f"Issue {b}", "body": "", "state": "open"})))
        flat += [(eid, ev.AddTo("labels", f"l{k}")) for k in range(8)]
        flat.append((eid, ev.Comment("a comment of moderate length for the bench")))
    batches = [flat[i:i + per_batch] for i in range(0, len(flat), per_batch)]
    write_log_fast(repo, batches)
    git(repo, "gc", "-q")
    commits = git(repo, "rev-list", "refs/grite/wal").split()
    by_path = "".join(f"{c}:events\n" for c in commits).encode()
    by_id = (git(repo, "rev-list", "--objects", "--no-object-names", "--filter=object:type=blob",
                 "--filter-provided-objects", "refs/grite/wal") + "\n").encode()

    def cat_file(feed: bytes) -> float:
        t0 = time.perf_counter()
        subprocess.run(["git", "cat-file", "--batch"], cwd=repo, input=feed, check=True,
                       stdout=subprocess.DEVNULL)
        return time.perf_counter() - t0
    floor_t = statistics.median(cat_file(by_path) for _ in range(runs))
    strict_t = statistics.median(cat_file(by_id) for _ in range(runs))
    subprocess.run(["git", "config", "grite.snapshots", "false"], cwd=repo, check=True)
    full = time_cmd(["git", "grite", "rebuild", "--full"], repo, runs)
    subprocess.run(["git", "config", "grite.snapshots", "true"], cwd=repo, check=True)
    subprocess.run(["git", "grite", "snapshot"], cwd=repo, env=env(), check=True,
                   stdout=subprocess.DEVNULL)
    from_snapshot = time_cmd(["git", "grite", "rebuild"], repo, runs)
    label = f"{events} events, {per_batch} per commit"
    report(f"git cat-file --batch of the same blobs, as <commit>:events ({len(commits)})", floor_t)
    report("git cat-file --batch of the same blobs, by blob id", strict_t)
    report(f"rebuild --full, {label} (process)", full,
           note=f"ratio {full / floor_t:.2f}x cat-file (goal <= 1.5); {full / strict_t:.2f}x by id")
    report(f"rebuild from a snapshot, {label} (process)", from_snapshot,
           note=f"ratio {from_snapshot / floor_t:.2f}x cat-file; {from_snapshot / full:.2f}x --full")
    shutil.rmtree(repo, ignore_errors=True)


def bench_concurrent(procs: int, per_proc: int) -> None:
    repo = new_repo("concurrent")
    code = ("import sys; sys.path.insert(0, %r)\n"
            "from git_brat.grite.repo import Grite\nfrom git_brat.grite import issues\n"
            "g = Grite.open()\n"
            "for i in range(%d): print(issues.create(g, 'c%%d' %% i), flush=True)\n") % (str(ROOT), per_proc)
    t0 = time.perf_counter()
    ps = [subprocess.Popen([sys.executable, "-c", code], cwd=repo, env=env(),
                           stdout=subprocess.PIPE, text=True) for _ in range(procs)]
    acked = []
    for p in ps:
        out, _ = p.communicate()
        acked += out.split()
    elapsed = time.perf_counter() - t0
    listed = {i["id"] for i in json.loads(subprocess.run(
        ["git", "grite", "issue", "list", "--json"], cwd=repo, env=env(), check=True,
        stdout=subprocess.PIPE).stdout)}
    lost = len(set(acked) - listed)
    report(f"{procs} processes appending concurrently: events/s", len(acked) / elapsed, unit=" ev/s",
           note=f"{len(acked)} acknowledged, {lost} lost (goal: 0 lost)")
    shutil.rmtree(repo, ignore_errors=True)


def main() -> None:
    quick = "--quick" in sys.argv
    runs = 5 if quick else 15
    base = floor(runs)
    report("floor: python -c 'import dulwich.repo, msgspec, click'", base)
    bench_create(runs, base)
    sizes = [1000, 10000] if quick else [1000, 10000, 100000]
    warm = bench_list(sizes, runs, base)
    print(f"{'ratio warm list 10k / import floor':<58} {warm[10000] / base:>10.2f}x  (goal <= 1.5)")
    if 100000 in warm:
        print(f"{'ratio warm list 100k / 1k':<58} {warm[100000] / warm[1000]:>10.2f}x  (goal <= 1.5)")
    events = 20000 if quick else 100000
    bench_rebuild(events, 1, 3 if quick else 5)    # one event a commit, as most commands write
    bench_rebuild(events, 10, 3 if quick else 5)   # ten a commit, as a create with labels does
    bench_concurrent(8, 25 if quick else 50)


if __name__ == "__main__":
    main()
