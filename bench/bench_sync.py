"""Figures for sync through the user's remotes (issue 3); prints medians and ratios.

1. Import of 10k freshly fetched events: time from `git fetch` returning to `git grite issue list`
   showing them, as a ratio of a full rebuild of the same events (hooks on: the reference-
   transaction hook imported during the fetch; hooks off: the list imports them itself).
   Also what the hook adds to the fetch itself.
2. What the installed hooks add to an ordinary `git commit` (goal: < 5 ms median), against the
   same commit with hooks switched off.

Usage: python bench/bench_sync.py [--quick]
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import env, git, new_repo, report, write_log_fast

NO_HOOKS = ["-c", "core.hooksPath=/nonexistent/grite-bench"]


def _timed(cmd: list[str], cwd) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, env=env(), check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def _batches(events: int, per_batch: int) -> list[list]:
    from git_brat.grite.model import events as ev
    out = []
    for b in range(events // per_batch):
        eid = ev.new_entity_id()
        drafts = [(eid, ev.Create("issue", {"title": f"Fetched issue {b}", "body": "",
                                            "state": "open"}))]
        drafts += [(eid, ev.AddTo("labels", f"l{k}")) for k in range(per_batch - 2)]
        drafts.append((eid, ev.Comment("a comment of moderate length for the bench")))
        out.append(drafts)
    return out


def bench_fetch_import(events: int, per_batch: int, runs: int) -> None:
    root = Path(tempfile.mkdtemp(prefix="grite-bench-sync-"))
    hub = root / "hub.git"
    git(root, "init", "-q", "--bare", str(hub))
    # The consumer is set up (hooks, refspec) while the hub is still empty.
    template = new_repo("consumer")
    git(template, "remote", "add", "origin", str(hub))
    git(template, "grite", "remote", "add-sync", "origin")
    producer = new_repo("producer")
    git(producer, "remote", "add", "origin", str(hub))
    git(producer, "grite", "remote", "add-sync", "origin")
    write_log_fast(producer, _batches(events, per_batch))
    git(producer, "gc", "-q")
    git(producer, "grite", "sync", "--no-push")
    git(producer, "grite", "sync")

    fetch_on, list_on, fetch_off, list_off, rebuild = [], [], [], [], []
    for i in range(runs):
        for hooks in (True, False):
            work = root / f"consumer-{i}-{hooks}"
            shutil.copytree(template, work, symlinks=True)
            fetch = ["git", *([] if hooks else NO_HOOKS), "fetch", "-q", "origin"]
            (fetch_on if hooks else fetch_off).append(_timed(fetch, work))
            (list_on if hooks else list_off).append(
                _timed(["git", "grite", "issue", "list", "--json"], work))
            if not hooks:
                rebuild.append(_timed(["git", "grite", "rebuild", "--full"], work))
            shutil.rmtree(work, ignore_errors=True)
    med = statistics.median
    rb = med(rebuild)
    report(f"full rebuild of the {events} fetched events", rb)
    report("hooks on: issue list after `git fetch` returned", med(list_on),
           note=f"ratio {med(list_on) / rb:.2f}x rebuild")
    report("hooks on: what the hook adds to `git fetch`", med(fetch_on) - med(fetch_off),
           note=f"fetch {med(fetch_on) * 1000:.0f} ms vs {med(fetch_off) * 1000:.0f} ms without hooks")
    total = med(fetch_on) - med(fetch_off) + med(list_on)
    report("hooks on: hook import + issue list", total, note=f"ratio {total / rb:.2f}x rebuild")
    report("hooks off: issue list after `git fetch` (imports itself)", med(list_off),
           note=f"ratio {med(list_off) / rb:.2f}x rebuild")
    for path in (root, template, producer):
        shutil.rmtree(path, ignore_errors=True)


def bench_commit(runs: int) -> None:
    repo = new_repo("commit")
    hub = Path(tempfile.mkdtemp(prefix="grite-bench-commit-hub-"))
    git(hub, "init", "-q", "--bare", ".")
    git(repo, "remote", "add", "origin", str(hub))
    git(repo, "grite", "remote", "add-sync", "origin")
    assert (repo / ".git" / "hooks" / "reference-transaction").exists()
    # The floor any reference-transaction hook costs: one that does nothing at all.
    trivial = hub / "trivial-hooks"
    trivial.mkdir()
    (trivial / "reference-transaction").write_text("#!/bin/sh\nexit 0\n")
    (trivial / "reference-transaction").chmod(0o755)
    cmds = {
        "none": ["git", *NO_HOOKS, "commit", "-q", "--allow-empty", "-m", "bench"],
        "trivial": ["git", "-c", f"core.hooksPath={trivial}", "commit", "-q", "--allow-empty",
                    "-m", "bench"],
        "grite": ["git", "commit", "-q", "--allow-empty", "-m", "bench"],
    }
    times: dict[str, list[float]] = {k: [] for k in cmds}
    for i in range(runs + 5):   # interleaved, so drift in machine load hits all alike
        for k, cmd in cmds.items():
            t = _timed(cmd, repo)
            if i >= 5:          # the first rounds only warm up
                times[k].append(t)
    med = {k: statistics.median(v) for k, v in times.items()}
    report("git commit without hooks", med["none"])
    report("git commit with a do-nothing reference-transaction hook", med["trivial"],
           note=f"+{(med['trivial'] - med['none']) * 1000:.1f} ms (floor for any such hook)")
    report("git commit with grite's hooks installed", med["grite"],
           note=f"ratio {med['grite'] / med['none']:.2f}x")
    report("cost grite's hooks add to an ordinary commit", med["grite"] - med["none"],
           note="(goal < 5 ms)")
    shutil.rmtree(repo, ignore_errors=True)
    shutil.rmtree(hub, ignore_errors=True)


def main() -> None:
    quick = "--quick" in sys.argv
    bench_fetch_import(2000 if quick else 10_000, 10, 3 if quick else 5)
    bench_commit(30 if quick else 100)


if __name__ == "__main__":
    main()
