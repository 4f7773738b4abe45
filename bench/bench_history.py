"""Figures for long-lived repositories (issue 14); prints medians and ratios against floors.

A year of agents: issue-like entities (9 in 10 issues, 1 in 10 tasks), each created with two
labels in one command, then commented on three times, labelled, assigned, edited and (7 in 10)
closed by later commands, spread over a year and over four replicas' logs: 9.7 events in 7.7
log commits per entity on average, one commit per command, as the commands write them (the
create's three events in one batch, every later command one event). The history is
written straight into a bare hub (`git fast-import`, as the replicas would have published it);
a producer clone then does what a user's clone does (`git grite init`, `git grite snapshot`,
`git grite sync`), so the hub holds the logs and a snapshot published the product's way; then a
delta of DELTA events more arrives at the hub (the snapshot is that far behind, as one is
between two automatic snapshots).

1. Bytes per event of the hub after `git gc` (packs and their indexes / events).
2. A fresh clone made ready: `git clone` (file:// URL, so git transfers objects as it would
   over a network, not hard links), `git grite init`, the first `issue list --json`; cut at
   the hub's snapshot (the default: the snapshot with depth 1, then only the log commits after
   it) and with the whole history (`grite.shallowClone=false`). Floors: the same `git clone`
   plus git's own fetches of the same objects, and the interpreter import floor.
3. 1k new events fetched into a ready (cut) clone: `git grite sync` + `issue list --json`, and
   `git fetch` (hooks import) + `issue list --json`, against a plain `git fetch` (hooks off).
4. `git grite rebuild --full` and `git grite doctor` on a TTY (pexpect) in the clone with the
   whole history: time, completion, whether a progress line was shown; and doctor in the cut one.

Usage: python bench/bench_history.py [--quick] [--profile] [--no-long]
  --quick: 100k events only (instead of 100k and 1M), fewer runs.
  --profile: also print where a clone's `git grite init` spends its time (cProfile).
  --no-long: leave out figure 4 (rebuild and doctor: minutes at 1M).
"""

from __future__ import annotations

import glob
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import zstandard

from benchlib import (ROOT, env, fast_import, fast_import_commit, floor, git, report)

from git_brat.grite.model import events as ev

YEAR = 365 * 86400
T0 = 1_735_689_600          # 2025-01-01
REPLICAS = 4
DELTA = 5000                # events past the snapshot when the clone is made
INCREMENT = 1000            # events fetched into a ready clone (figure 3)
NO_HOOKS = ["-c", "core.hooksPath=/nonexistent/grite-bench"]
GRITE_REFSPEC = "+refs/grite/*:refs/remotes/origin/grite/*"
SNAPSHOT_REFSPEC = "+refs/grite/snapshots/*:refs/remotes/origin/grite/snapshots/*"

WORDS = ("the parser cache replay fetch merge queue agent task session lease token claim "
         "fails when retry timeout worker branch rebase conflict test check build error log "
         "snapshot frontier state view list issue label assign close reopen comment review "
         "patch fix regression crash restart recover heartbeat supervisor refinery witness "
         "mayor convoy engine prompt model reply block done ready depends blocks slow fast "
         "memory disk network remote push hub clone import export json schema field value "
         "unicode tab newline path worktree index commit tree blob pack gc prune ref lock "
         "after before during with without on off in of to for is not a an it this that "
         "we should could would must may might error warning info debug trace").split()
LABELS = ["bug", "feature", "perf", "docs", "flaky", "p1", "p2", "p3", "agent", "ux", "sync",
          "cache"]
AGENTS = [f"agent-{k}" for k in range(16)]


def text(rng: random.Random, lo: int, hi: int) -> str:
    return " ".join(rng.choices(WORDS, k=rng.randint(lo, hi)))


class History:
    """A deterministic year of commands; cut into segments by event counts."""

    def __init__(self, events: int, seed: int = 14):
        rng = random.Random(seed)
        self.replicas = [(f"{rng.getrandbits(128):032x}", f"{rng.getrandbits(128):032x}")
                         for _ in range(REPLICAS)]   # (replica id, actor id)
        n = int(events / 9.5) + 2000   # 9.7 events an entity on average: never run short
        self.entities = [f"{rng.getrandbits(128):032x}" for _ in range(n)]
        cmds = []
        for i in range(n):
            t = T0 + i * YEAR // n
            cmds.append((t, i, 0, rng.randrange(REPLICAS)))
            steps = 7 if rng.random() < 0.7 else 6    # the last step closes it
            for step in range(1, steps + 1):
                t += int(rng.expovariate(1 / 86400)) + 1
                cmds.append((t, i, step, rng.randrange(REPLICAS)))
        cmds.sort()
        self.cmds = cmds
        self.rng = rng
        self.pos = 0
        self.lamport = 0
        self.actors_written = False

    def _drafts(self, i: int, step: int) -> tuple[list, str]:
        rng, eid = self.rng, self.entities[i]
        if step == 0:
            kind = "task" if i % 10 == 9 else "issue"
            title = text(rng, 3, 9).capitalize()
            d = [(eid, ev.Create(kind, {"title": title, "body": text(rng, 10, 60),
                                        "state": "open"}))]
            d += [(eid, ev.AddTo("labels", x)) for x in rng.sample(LABELS, 2)]
            return d, f'grite: {kind}.create {eid[:7]} "{title}"'
        if step <= 3:
            return [(eid, ev.Comment(text(rng, 8, 70)))], f"grite: issue.comment {eid[:7]}"
        if step == 4:
            return [(eid, ev.AddTo("labels", rng.choice(LABELS)))], f"grite: issue.label {eid[:7]}"
        if step == 5:
            return [(eid, ev.AddTo("assignees", rng.choice(AGENTS)))], \
                f"grite: issue.assign {eid[:7]}"
        if step == 6:
            return [(eid, ev.SetFields({"title": text(rng, 3, 9).capitalize()}))], \
                f"grite: issue.update {eid[:7]}"
        return [(eid, ev.SetFields({"state": "closed"}))], f"grite: issue.close {eid[:7]}"

    def segment(self, events: int, tips: dict[str, str], per_commit: int = 0):
        """fast-import commands for the next `events` events (about: whole commands).

        per_commit 0: one commit per command; k: k events a commit per replica log.
        """
        first = {ref: sha for ref, sha in tips.items()}
        pending: dict[int, list] = {r: [] for r in range(REPLICAS)}

        def commit(r: int, evs: list, msg: str, when: int) -> bytes:
            rid, _actor = self.replicas[r]
            blob = ev.encode_batch(ev.Batch(ev.FORMAT_VERSION, rid, evs[-1].lamport, evs))
            ref = f"refs/grite/replicas/{rid}"
            return fast_import_commit(ref, blob, msg, when, first.pop(ref, None))

        def stamp(r: int, drafts: list, t: int) -> list:
            out = []
            for entity, op in drafts:
                self.lamport += 1
                out.append(ev.make_event(entity, self.replicas[r][1], self.lamport, t * 1000, op))
            return out

        if not self.actors_written:
            self.actors_written = True
            for r, (rid, actor) in enumerate(self.replicas):
                evs = stamp(r, [(actor, ev.Create("actor", {"name": f"replica {r}",
                                                            "email": f"r{r}@example.com",
                                                            "replica": rid}))], T0 - 1)
                yield commit(r, evs, f'grite: actor.create {actor[:7]} "replica {r}"', T0 - 1)
        done = 0
        while done < events and self.pos < len(self.cmds):
            t, i, step, r = self.cmds[self.pos]
            self.pos += 1
            drafts, msg = self._drafts(i, step)
            evs = stamp(r, drafts, t)
            done += len(evs)
            if not per_commit:
                yield commit(r, evs, msg, t)
                continue
            pending[r] += evs
            if len(pending[r]) >= per_commit:
                yield commit(r, pending[r], "grite: bench batch", t)
                pending[r] = []
        for r, evs in pending.items():
            if evs:
                yield commit(r, evs, "grite: bench batch", T0 + YEAR)


# -- helpers --------------------------------------------------------------------------

def run(cmd: list[str], cwd, quiet: bool = True, extra_env: dict | None = None) -> float:
    e = env()
    if extra_env:
        e.update(extra_env)
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, env=e, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL if quiet else None)
    return time.perf_counter() - t0


def tips(hub: Path) -> dict[str, str]:
    out = git(hub, "for-each-ref", "--format=%(refname) %(objectname)", "refs/grite/replicas/")
    return dict(line.split() for line in out.splitlines() if line)


def pack_bytes(repo: Path) -> tuple[int, int]:
    """(bytes of *.pack, bytes of *.pack + *.idx + *.rev) under objects/pack."""
    d = repo / "objects" / "pack" if (repo / "objects").is_dir() else repo / ".git" / "objects" / "pack"
    packs = sum(os.path.getsize(p) for p in glob.glob(str(d / "*.pack")))
    rest = sum(os.path.getsize(p) for pat in ("*.idx", "*.rev") for p in glob.glob(str(d / pat)))
    return packs, packs + rest


def loose_count(repo: Path) -> int:
    out = git(repo, "count-objects", "-v")
    return int(dict(ln.split(": ") for ln in out.splitlines())["count"])


def med(xs: list[float]) -> float:
    return statistics.median(xs)


def line(name: str, value: str, note: str = "") -> None:
    print(f"{name:<66} {value:>12}  {note}", flush=True)


def ms(t: float) -> str:
    return f"{t * 1000:.0f} ms" if t < 10 else f"{t:.2f} s"


# -- setup ----------------------------------------------------------------------------

def build_hub(root: Path, n: int) -> tuple[Path, History, dict]:
    """A bare hub holding n events in four replica logs and a snapshot published by a clone."""
    info = {}
    hub = root / "hub.git"
    git(root, "init", "-q", "--bare", "-b", "main", str(hub))
    seed = root / "seed"
    git(root, "init", "-q", "-b", "main", str(seed))
    for k in range(20):
        (seed / f"src{k}.py").write_text(f"# module {k}\n" + "x = 1\n" * 50)
    git(seed, "add", "-A")
    git(seed, "commit", "-q", "-m", "the project")
    git(seed, "push", "-q", f"file://{hub}", "main")
    shutil.rmtree(seed)

    t0 = time.perf_counter()
    hist = History(n + INCREMENT)
    info["generate"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    fast_import(hub, hist.segment(n - DELTA, tips(hub)))
    info["fast-import"] = time.perf_counter() - t0

    # A user's clone publishes the snapshot: init (fetch, full replay: no snapshot exists yet,
    # and one is written as it passes grite.snapshotEvery), snapshot, sync (log + snapshot).
    producer = root / "producer"
    git(root, "clone", "-q", f"file://{hub}", str(producer))
    info["producer init (no snapshot yet: full replay)"] = run(["git", "grite", "init"], producer)
    info["snapshot write"] = run(["git", "grite", "snapshot"], producer)
    subprocess.run(["git", "grite", "sync"], cwd=producer, env=env(), check=True,
                   stdout=subprocess.DEVNULL)
    snaps = git(hub, "for-each-ref", "--format=%(objectname)", "refs/grite/snapshots/").split()
    assert len(snaps) == 1, f"the hub holds {len(snaps)} snapshots"
    info["snapshot"] = snaps[0]
    shutil.rmtree(producer)

    fast_import(hub, hist.segment(DELTA, tips(hub)))   # what came after the snapshot
    info["events"] = hist.lamport + 1                   # and the producer's actor record
    t0 = time.perf_counter()
    git(hub, "gc", "-q")
    info["gc"] = time.perf_counter() - t0
    return hub, hist, info


def bytes_figures(hub: Path, n: int, info: dict) -> None:
    packs, total = pack_bytes(hub)
    n = info["events"]
    commits = int(git(hub, "rev-list", "--count", "--all"))
    snap = info["snapshot"]
    _size, disk = (int(x) for x in git(hub, "cat-file", "--batch-check=%(objectsize) %(objectsize:disk)",
                                      input=f"{snap}:state.db.zst\n".encode()).split())
    cold_disk = 0
    for parent in git(hub, "rev-parse", f"{snap}^@").split():
        out = subprocess.run(["git", "cat-file", "--batch-check=%(objectsize:disk)"], cwd=hub,
                             input=f"{parent}:cold.db.zst\n".encode(), stdout=subprocess.PIPE)
        if out.stdout.strip().isdigit():
            cold_disk = int(out.stdout)
    packed = subprocess.run(["git", "cat-file", "blob", f"{snap}:state.db.zst"], cwd=hub,
                            stdout=subprocess.PIPE).stdout
    inflated = len(zstandard.ZstdDecompressor().stream_reader(packed, read_across_frames=True).read())
    line(f"{n} events: hub packs after git gc (pack + idx)", f"{total / 2**20:.1f} MiB",
         f"{loose_count(hub)} loose objects left")
    line(f"{n} events: bytes per event after git gc", f"{total / n:.0f} B",
         f"pack alone {packs / n:.0f} B/event")
    line(f"{n} events: of which the snapshot's state blob", f"{disk / n:.0f} B",
         f"({disk / 2**20:.1f} MiB in the pack, a {inflated / 2**20:.1f} MiB SQLite file)")
    line(f"{n} events: of which the snapshot's cold part (settled entities, fetched after)",
         f"{cold_disk / n:.0f} B", f"({cold_disk / 2**20:.1f} MiB in the pack)")
    disk += cold_disk
    line(f"{n} events: the logs alone (total - snapshot)", f"{(total - disk) / n:.0f} B/event",
         f"{commits} commits ({n / commits:.2f} events each), 3 objects each")


def bytes_ten_per_commit(root: Path, n: int) -> None:
    """The same history with ten events a commit: what batching commands would save."""
    repo = root / "ten.git"
    git(root, "init", "-q", "--bare", str(repo))
    hist = History(n)
    fast_import(repo, hist.segment(n, {}, per_commit=10))
    git(repo, "gc", "-q")
    _packs, total = pack_bytes(repo)
    n = hist.lamport
    line(f"{n} events, ten per commit instead: bytes per event after gc", f"{total / n:.0f} B",
         "(logs only, no snapshot)")
    shutil.rmtree(repo, ignore_errors=True)


def bench_clone(root: Path, hub: Path, n: int, runs: int, base: float,
                keep: dict[str, Path] | None) -> None:
    """A fresh clone made ready, cut at the hub's snapshot (the default) and with the whole
    history (grite.shallowClone=false), each against git's own cost of the same transfer."""
    url = f"file://{hub}"
    [snap] = git(hub, "for-each-ref", "--format=%(refname)", "refs/grite/snapshots/").split()
    plain, fetch_all, fetch_cut = [], [], []
    paths = {"cut": ([], [], []), "whole": ([], [], [])}   # clone, init, first list
    whole_cut = []   # clone to the cold part taken in (init's background fetch ended)
    for i in range(runs):
        f = root / f"floor-{i}"
        plain.append(run(["git", "clone", "-q", url, str(f)], root))
        fetch_all.append(run(["git", *NO_HOOKS, "fetch", "-q", "origin", GRITE_REFSPEC], f))
        shutil.rmtree(f)
        # git's own cut fetch: the snapshot with depth 1, then the logs after it.
        git(root, "clone", "-q", url, str(f))
        fetch_cut.append(
            run(["git", *NO_HOOKS, "-c", "fetch.unpackLimit=1", "fetch", "-q", "--depth=1", "origin",
                 SNAPSHOT_REFSPEC], f) +
            run(["git", *NO_HOOKS, "fetch", "-q", f"--shallow-exclude={snap}", "origin",
                 GRITE_REFSPEC, "^refs/grite/snapshots/*"], f))
        shutil.rmtree(f)
        for mode, (clone, init, first) in paths.items():
            c = root / f"clone-{mode}-{i}"
            setting = [] if mode == "cut" else ["-c", "grite.shallowClone=false"]
            t0 = time.perf_counter()
            clone.append(run(["git", "clone", "-q", *setting, url, str(c)], root))
            init.append(run(["git", "grite", "init"], c))
            first.append(run(["git", "grite", "issue", "list", "--json"], c))
            wait_for_cold(c)
            if mode == "cut":
                whole_cut.append(time.perf_counter() - t0)
            if keep is not None and i == runs - 1:
                c.rename(keep[mode])
            else:
                shutil.rmtree(c)
    tag = f"{n} events"
    floors = {"cut": [a + b for a, b in zip(plain, fetch_cut)],
              "whole": [a + b for a, b in zip(plain, fetch_all)]}
    line("floor: python import (benchlib.floor)", ms(base))
    line(f"{tag}: floor: plain `git clone` (branches only)", ms(med(plain)))
    line(f"{tag}: floor, cut: + git's depth-1 snapshot fetch and --shallow-exclude fetch",
         ms(med(floors["cut"])), f"(fetches alone {ms(med(fetch_cut))})")
    line(f"{tag}: floor, whole: + plain `git fetch` of refs/grite/*", ms(med(floors["whole"])),
         f"(fetch alone {ms(med(fetch_all))})")
    for mode, (clone, init, first) in paths.items():
        name = "cut at the snapshot (default)" if mode == "cut" else "whole history"
        total = [a + b + c for a, b, c in zip(clone, init, first)]
        line(f"{tag}, {name}: `git clone`", ms(med(clone)))
        line(f"{tag}, {name}: `git grite init` (fetch + import)", ms(med(init)))
        line(f"{tag}, {name}: first `issue list --json`", ms(med(first)),
             f"{med(first) / base:.2f}x import floor")
        line(f"{tag}, {name}: total, clone to first list", ms(med(total)),
             f"{med(total) / med(floors[mode]):.2f}x git's own clone + fetch"
             + ("; goal at 1M: <= 3 s" if mode == "cut" else ""))
    line(f"{tag}, cut: clone to the snapshot's cold part taken in (init's background fetch)",
         ms(med(whole_cut)), "(the first list above ran meanwhile)")


def wait_for_cold(repo: Path, limit: float = 300) -> None:
    """Until the background `fetch-cold` that init started (if any) has ended."""
    pid_file = repo / ".git" / "grite" / "cold.pid"
    deadline = time.monotonic() + limit
    while pid_file.exists() and time.monotonic() < deadline:
        try:
            pid = json.loads(pid_file.read_text())["pid"]
            os.kill(pid, 0)
        except (ValueError, OSError):
            break
        time.sleep(0.02)


def breakdown(root: Path, hub: Path, n: int, profile: bool) -> None:
    """One default clone, step by step: where the ready part goes."""
    c = root / "breakdown"
    t_clone = run(["git", "clone", "-q", f"file://{hub}", str(c)], root)
    if profile:
        prof = root / "init.prof"
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "cProfile", "-o", str(prof), str(ROOT / "bin" / "git-grite"),
                        "init"], cwd=c, env=env(), check=True, stdout=subprocess.DEVNULL)
        t_init = time.perf_counter() - t0
    else:
        t_init = run(["git", "grite", "init"], c)
    t_list = run(["git", "grite", "issue", "list", "--json"], c)
    cache = c / ".git" / "grite" / "cache"
    sizes = {p.name: p.stat().st_size for p in cache.iterdir() if p.is_file()}
    here = int(git(c, "rev-list", "--count", "--all"))
    line(f"{n} events, one clone step by step: git clone", ms(t_clone))
    line(f"{n} events, one clone step by step: git grite init", ms(t_init),
         "(profiled)" if profile else "")
    line(f"{n} events, one clone step by step: first issue list --json", ms(t_list))
    line(f"{n} events: commits in the clone", f"{here}",
         f"of {int(git(hub, 'rev-list', '--count', '--all'))} on the hub")
    line(f"{n} events: cache files written", f"{sum(sizes.values()) / 2**20:.1f} MiB",
         ", ".join(f"{k} {v / 2**20:.1f}" for k, v in sorted(sizes.items()) if v > 2**20))
    wait_for_cold(c)
    if profile:
        import pstats
        print(f"--- cProfile of `git grite init`, {n} events, top by cumulative time")
        pstats.Stats(str(prof)).sort_stats("cumulative").print_stats(18)
        print(f"--- the same, top by own time")
        pstats.Stats(str(prof)).sort_stats("tottime").print_stats(12)
    shutil.rmtree(c)


def bench_fetch(root: Path, hub: Path, hist: History, ready: Path, n: int, runs: int,
                base: float) -> None:
    subprocess.run(["git", "grite", "sync"], cwd=ready, env=env(), check=True,
                   stdout=subprocess.DEVNULL)   # its own log is published once, as in daily use
    fast_import(hub, hist.segment(INCREMENT, tips(hub)))
    sync, sync_list, fetch, fetch_list, plain = [], [], [], [], []
    for i in range(runs):
        w = root / f"fetch-{i}"
        shutil.copytree(ready, w, symlinks=True)
        plain.append(run(["git", *NO_HOOKS, "fetch", "-q", "origin"], w))
        shutil.rmtree(w)
        shutil.copytree(ready, w, symlinks=True)
        sync.append(run(["git", "grite", "sync"], w))
        sync_list.append(run(["git", "grite", "issue", "list", "--json"], w))
        shutil.rmtree(w)
        shutil.copytree(ready, w, symlinks=True)
        fetch.append(run(["git", "fetch", "-q", "origin"], w))
        fetch_list.append(run(["git", "grite", "issue", "list", "--json"], w))
        shutil.rmtree(w)
    a = [x + y for x, y in zip(sync, sync_list)]
    b = [x + y for x, y in zip(fetch, fetch_list)]
    tag = f"{INCREMENT} new events into a {n}-event clone"
    line(f"{tag}: floor: plain `git fetch` (hooks off)", ms(med(plain)))
    line(f"{tag}: `git grite sync` + issue list --json", ms(med(a)),
         f"{med(a) / med(plain):.2f}x plain fetch (sync {ms(med(sync))}, list {ms(med(sync_list))})")
    line(f"{tag}: `git fetch` (hooks import) + issue list --json", ms(med(b)),
         f"{med(b) / med(plain):.2f}x plain fetch (fetch {ms(med(fetch))}, list {ms(med(fetch_list))}; "
         f"list {med(fetch_list) / base:.2f}x import floor)")


def tty_run(cmd: list[str], cwd: Path, timeout: float) -> tuple[float, bool, int | None, str]:
    """(seconds, progress line seen, exit status, last output line) with a terminal."""
    import pexpect
    t0 = time.perf_counter()
    child = pexpect.spawn(cmd[0], cmd[1:], cwd=str(cwd), env=env(), timeout=timeout,
                          dimensions=(24, 200))
    out = b""
    try:
        while True:
            out += child.read_nonblocking(65536, timeout=timeout)
    except pexpect.EOF:
        pass
    except pexpect.TIMEOUT:
        child.terminate(force=True)
        return time.perf_counter() - t0, b"replaying the log:" in out, None, "timed out"
    child.close()
    elapsed = time.perf_counter() - t0
    text_out = out.decode("utf-8", "replace").replace("\r\x1b[K", "\n").replace("\r", "\n")
    last = [ln for ln in text_out.splitlines() if ln.strip()]
    return elapsed, b"replaying the log:" in out, child.exitstatus, last[-1] if last else ""


def bench_long_commands(ready: Path, n: int, runs: int, doctor_runs: int) -> None:
    import resource
    tag = f"{n} events"
    rb = [tty_run(["git", "grite", "rebuild", "--full"], ready, 600) for _ in range(runs)]
    line(f"{tag}: `git grite rebuild --full` on a TTY", ms(med([r[0] for r in rb])),
         f"runs: {', '.join(ms(r[0]) for r in rb)} (the first also writes this clone's snapshot)")
    line("", "",
         f"completed: {'yes' if all(r[2] == 0 for r in rb) else 'NO'}; progress line: "
         f"{'yes' if all(r[1] for r in rb) else 'no'}; said: {rb[-1][3]!r}")
    doc = [tty_run(["git", "grite", "doctor"], ready, 900) for _ in range(doctor_runs)]
    line(f"{tag}: `git grite doctor` on a TTY", ms(med([r[0] for r in doc])),
         f"completed: {'yes' if all(r[2] is not None for r in doc) else 'NO'} (exit "
         f"{doc[-1][2]}); progress line: {'yes' if all(r[1] for r in doc) else 'no'}; "
         f"said: {doc[-1][3]!r}")
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    line(f"{tag}: peak RSS of any child process so far", f"{peak:.0f} MiB",
         "(the largest of all commands run, doctor included)")
    for cmd in (["rebuild", "--full"], ["doctor"]):
        proc = subprocess.Popen(["git", "grite", *cmd], cwd=ready, env=env(),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _pid, _status, usage = os.wait4(proc.pid, 0)   # this command alone (and its children)
        line(f"{tag}: peak RSS of `git grite {' '.join(cmd)}`", f"{usage.ru_maxrss / 1024:.0f} MiB", "")


def main() -> None:
    quick = "--quick" in sys.argv
    profile = "--profile" in sys.argv
    sizes = [100_000] if quick else [100_000, 1_000_000]
    if "--sizes" in sys.argv:   # for trying the bench itself out
        sizes = [int(x) for x in sys.argv[sys.argv.index("--sizes") + 1].split(",")]
    started = time.perf_counter()
    base = floor(5 if quick else 11)
    for n in sizes:
        largest = n == sizes[-1]
        root = Path(tempfile.mkdtemp(prefix=f"grite-bench-history-{n}-"))
        hub, hist, info = build_hub(root, n)
        print(f"== {n} events ({info['events']} in the hub: {n - DELTA} under the snapshot, "
              f"{DELTA} after it; setup: generate {info['generate']:.1f} s, fast-import "
              f"{info['fast-import']:.1f} s, gc {info['gc']:.1f} s; a clone with no snapshot "
              f"yet took {ms(info['producer init (no snapshot yet: full replay)'])} for "
              f"`git grite init`, and {ms(info['snapshot write'])} for `git grite snapshot`)", flush=True)
        bytes_figures(hub, n, info)
        if n == sizes[0]:
            bytes_ten_per_commit(root, n)
        runs = (3 if quick else 5) if n <= 100_000 else 3
        ready = {"cut": root / "ready-cut", "whole": root / "ready-whole"} if largest else None
        bench_clone(root, hub, n, runs, base, ready)
        breakdown(root, hub, n, profile)
        if largest:
            bench_fetch(root, hub, hist, ready["cut"], n, 3, base)
            if "--no-long" not in sys.argv:
                bench_long_commands(ready["whole"], n, 2 if quick or n > 100_000 else 3, 1)
                t, _progress, status, said = tty_run(["git", "grite", "doctor"], ready["cut"], 900)
                line(f"{n} events: `git grite doctor` in the clone cut at the snapshot", ms(t),
                     f"exit {status}; said: {said!r}")
        shutil.rmtree(root, ignore_errors=True)
        print(f"   (elapsed {time.perf_counter() - started:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
