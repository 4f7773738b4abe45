"""The harness under chaos: three clones of a bare hub served by `git daemon` on 127.0.0.1, each
running a witness, a refinery and a deacon on one convoy, while a seeded schedule kills roles,
agents and `git worktree remove` children, interrupts witnesses, stops the hub and moves tasks
as a human would. Then everything settles and the invariants are checked.

Used by tests/brat/chaos/test_chaos_harness.py (a short schedule) and scripts/chaos-harness
(long ones). Every process it starts is stopped by pid before it returns.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from sync_helpers import free_port

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent.parent
BIN = ROOT / "bin"
AGENT = HERE / "chaos_agent.py"
CLONES = ("A", "B", "C")
ROLES = ("witness", "refinery", "deacon")
ACTIONS = ("kill-witness", "kill-refinery", "kill-deacon", "kill-agent", "kill-git-removal",
           "interrupt-witness", "hub-down", "hub-up", "block", "reply", "requeue", "pause")
SEED_FILES = 12
SLOTS = 6
FINISHED = ("merged", "failed", "dropped")


class Hung(Exception):
    """A command did not finish in its time: it and everything it started were killed."""


def _run(args, cwd, env, check=True, timeout=120.0):
    # Its own process group, so a command that hangs is stopped with all it started.
    p = subprocess.Popen(args, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _stop_group(p, signal.SIGKILL)
        out, err = p.communicate()
        said = " | ".join((out + err).strip().splitlines()[-3:])
        raise Hung(f"`{' '.join(Path(str(a)).name if i == 0 else str(a) for i, a in enumerate(args[:4]))}` in {Path(cwd).name} did not "
                   f"finish in {timeout:g}s (last said: {said or 'nothing'})") from None
    r = subprocess.CompletedProcess(args, p.returncode, out, err)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, args))} in {cwd}: rc {r.returncode}\n{err}")
    return r


class Chaos:
    """One run: a hub, three clones, their roles, a seeded schedule, and what it did."""

    def __init__(self, tmp: Path, seed: int, steps: int, tasks: int = 6, step_s: float = 0.7,
                 say=lambda _l: None):
        self.tmp, self.seed, self.steps, self.ntasks, self.step_s = tmp, seed, steps, tasks, step_s
        self.rng = random.Random(seed)
        self.say = say
        self.port = free_port()
        self.daemon: subprocess.Popen | None = None
        self.procs: dict[tuple[str, str], subprocess.Popen] = {}
        self.pids = tmp / "agent-pids"
        self.pids.mkdir(parents=True, exist_ok=True)
        home = tmp / "home"
        home.mkdir(exist_ok=True)
        (home / ".gitconfig").write_text(
            "[user]\n\tname = Chaos\n\temail = chaos@example.com\n[init]\n\tdefaultBranch = main\n"
            "[advice]\n\tdetachedHead = false\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "GRITE_", "BRAT_"))}
        env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), GIT_CONFIG_NOSYSTEM="1",
                   PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", LC_ALL="C.UTF-8",
                   TZ="UTC", CHAOS_PIDS=str(self.pids), CHAOS_SLEEP="0.3",
                   PYTHONPATH=str(ROOT))
        self.env = env
        self.log: list[str] = []        # the schedule as it ran
        self.human: dict[str, list[str]] = {}   # task -> human moves that took effect
        self.tasks: dict[str, dict] = {}        # task id -> {text, file}
        self.seed_files: list[str] = []
        self.findings: list[str] = []           # what went wrong while settling
        self.final_syncs: dict[str, str] = {}   # clone -> what its last `grite sync` said
        self.settle_s = 0.0

    # -- setup -----------------------------------------------------------------------

    def url(self) -> str:
        return f"git://127.0.0.1:{self.port}/hub.git"

    def clone(self, c: str) -> Path:
        return self.tmp / c

    def brat(self, c: str, *args, check=True, timeout=120):
        return _run([str(BIN / "git-brat"), *args], self.clone(c), self.env, check, timeout)

    def git(self, cwd, *args, check=True):
        return _run(["git", *args], cwd, self.env, check, 60.0)

    def setup(self) -> None:
        seed = self.tmp / "seed"
        seed.mkdir()
        self.git(self.tmp, "init", "-q", "--bare", "hub.git")
        self.git(seed, "init", "-q")
        for i in range(SEED_FILES):
            (seed / "seed").mkdir(exist_ok=True)
            (seed / "seed" / f"f{i}.txt").write_text(f"seed file {i}\n")
            self.seed_files.append(f"seed/f{i}.txt")
        # Slots far enough apart that editing different ones never conflicts.
        (seed / "common.txt").write_text("".join(f"slot-{k}\n\n\n\n" for k in range(SLOTS)))
        self.seed_files.append("common.txt")
        self.git(seed, "add", "-A")
        self.git(seed, "commit", "-q", "-m", "seed")
        self.git(seed, "push", "-q", str(self.tmp / "hub.git"), "main")
        self.hub_up()
        # The config is committed once, on the hub: every clone starts from it.
        self.git(seed, "brat", "init")
        cfg = {"engines.chaos.command": json.dumps([sys.executable, str(AGENT), "{prompt}"]),
               "witness.engine": "chaos", "witness.heartbeat": "1", "witness.lease_ttl": "5",
               "witness.poll": "0.5", "witness.backoff": "0", "witness.max_retries": "3",
               "witness.expired_wait": "5",
               "witness.timeout": "60", "deacon.interval": "1", "deacon.sync_interval": "1",
               # Chaos kills agents by the pids they write to $CHAOS_PIDS: unconfined, as a
               # sandboxed agent's pids are its own namespace's and that directory is not its.
               "witness.sandbox": "none",
               # no human in the loop: the check decides what lands
               "refinery.check": "true", "refinery.review": "auto"}
        for k, v in cfg.items():
            self.git(seed, "brat", "config", "set", k, v)
        self.git(seed, "add", ".brat")
        self.git(seed, "commit", "-q", "-m", "brat config")
        self.git(seed, "push", "-q", str(self.tmp / "hub.git"), "main")
        for c in CLONES:
            self.git(self.tmp, "clone", "-q", self.url(), c)
            self.brat(c, "init")
            # Each clone's user approves the committed settings that run code (its engine).
            self.brat(c, "trust")
        convoy = self.brat("A", "convoy", "create", "chaos").stdout.strip()
        for k in range(self.ntasks):
            text = f"chaos-{self.seed}-{k}"
            if k % 2:   # overlapping: a slot of common.txt (two tasks share slot 0: a conflict)
                body, path = f"CHAOS: slot common.txt {k % SLOTS if k > 1 else 0} {text}", "common.txt"
            else:       # disjoint: a file of its own
                body, path = f"CHAOS: put work/t{k}.txt {text}", f"work/t{k}.txt"
            tid = self.brat("A", "task", "create", "--convoy", convoy, f"chaos task {k}",
                            "-b", body).stdout.strip()
            self.tasks[tid] = {"text": text, "file": path}
        for c in CLONES:
            self.git(self.clone(c), "grite", "sync", check=False)
        self.say(f"seed {self.seed}: hub on port {self.port}, {self.ntasks} tasks, 3 clones")
        self.t0 = time.monotonic()

    # -- processes -------------------------------------------------------------------

    def hub_up(self) -> None:
        if self.daemon is not None and self.daemon.poll() is None:
            return
        self.daemon = subprocess.Popen(
            ["git", "daemon", "--listen=127.0.0.1", f"--port={self.port}",
             f"--base-path={self.tmp}", "--export-all", "--enable=receive-pack", "--reuseaddr",
             str(self.tmp)], env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.05)
        raise RuntimeError("git daemon did not start")

    def hub_down(self) -> None:
        if self.daemon is not None and self.daemon.poll() is None:
            _stop_group(self.daemon, signal.SIGTERM)
        self.daemon = None

    def start(self, c: str, role: str) -> None:
        p = self.procs.get((c, role))
        if p is not None and p.poll() is None:
            return
        out = open(self.tmp / f"{c}.{role}.log", "ab")
        self.procs[(c, role)] = subprocess.Popen(
            [str(BIN / "git-brat"), role, "run"], cwd=self.clone(c), env=self.env, stdout=out,
            stderr=subprocess.STDOUT, start_new_session=True)
        out.close()

    def live(self, role: str) -> list[tuple[str, subprocess.Popen]]:
        return [(c, p) for (c, r), p in self.procs.items() if r == role and p.poll() is None]

    def agent_pids(self) -> list[int]:
        out = []
        for name in os.listdir(self.pids):
            pid = int(name)
            if _alive(pid) and "chaos_agent" in _cmdline(pid):
                out.append(pid)
        return sorted(out)

    def stop_all(self) -> None:
        """Every process this run started, by pid: roles (their groups), agents, the hub."""
        for p in self.procs.values():
            if p.poll() is None:
                _stop_group(p, signal.SIGTERM, grace=8)
        for pid in self.agent_pids():
            _kill(pid, signal.SIGKILL)
        self.hub_down()

    # -- the schedule ----------------------------------------------------------------

    def step(self, n: int) -> None:
        for c in CLONES:              # whatever a previous step stopped comes back
            for role in ROLES:
                self.start(c, role)
        if self.daemon is None and self.rng.random() < 0.5:
            self.hub_up()
            self.log.append(f"{n}: hub-up")
        action = self.rng.choice(ACTIONS)
        c = self.rng.choice(CLONES)
        try:
            what = getattr(self, "_" + action.replace("-", "_"))(c)
        except Hung as exc:
            self.findings.append(f"hang: step {n} ({action}): {exc}")
            what = "(hung)"
        self.log.append(f"{n}: {action} {c} {what}".rstrip())
        self.say(self.log[-1])
        time.sleep(self.step_s)

    def _kill_role(self, c: str, role: str, sig=signal.SIGKILL) -> str:
        p = self.procs.get((c, role))
        if p is None or p.poll() is not None:
            return "(not running)"
        _kill(p.pid, sig)   # the process only: what it started is orphaned, as in a crash
        return f"pid {p.pid}"

    def _kill_witness(self, c):
        return self._kill_role(c, "witness")

    def _kill_refinery(self, c):
        return self._kill_role(c, "refinery")

    def _kill_deacon(self, c):
        return self._kill_role(c, "deacon")

    def _interrupt_witness(self, c):
        return self._kill_role(c, "witness", signal.SIGINT)

    def _kill_agent(self, _c):
        pids = self.agent_pids()
        if not pids:
            return "(none running)"
        pid = self.rng.choice(pids)
        _kill(pid, signal.SIGKILL)
        return f"pid {pid}"

    def _kill_git_removal(self, _c):
        """A `git worktree remove` under this run's directory, killed mid-way (up to 1 s)."""
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            for pid in _pids():
                cmd = _cmdline(pid)
                if "worktree" in cmd and "remove" in cmd and str(self.tmp) in cmd + _cwd(pid):
                    _kill(pid, signal.SIGKILL)
                    return f"pid {pid}"
            time.sleep(0.01)
        return "(none caught)"

    def _hub_down(self, _c):
        self.hub_down()
        return ""

    def _hub_up(self, _c):
        self.hub_up()
        return ""

    def _pause(self, _c):
        return ""

    def _human(self, c: str, states: tuple[str, ...], args) -> str:
        p = self.brat(c, "task", "list", "--json", check=False)
        try:
            tasks = [t for t in json.loads(p.stdout) if t["status"] in states]
        except ValueError:
            return "(no list)"
        if not tasks:
            return "(no task to move)"
        t = self.rng.choice(sorted(tasks, key=lambda t: t["id"]))
        r = self.brat(c, "task", *args(t["id"]), check=False)
        if r.returncode == 0:
            self.human.setdefault(t["id"], []).append(args(t["id"])[0])
        return f"{t['id'][:7]} rc {r.returncode}"

    def _block(self, c):
        return self._human(c, ("queued", "running", "needs-review"),
                           lambda t: ["update", t, "--status", "blocked", "-m", "human: wait"])

    def _reply(self, c):
        return self._human(c, ("needs-review", "blocked"),
                           lambda t: ["reply", t, "-m", "human: once more"])

    def _requeue(self, c):
        return self._human(c, ("blocked", "failed"),
                           lambda t: ["update", t, "--status", "queued", "-m", "human: again"])

    # -- settling --------------------------------------------------------------------

    def settle(self, budget_s: float = 75.0) -> bool:
        """Stop the chaos, bring the hub back, let each clone finish its work in turn, sync
        everything twice. True when every task reached a finished state in the budget."""
        for p in self.procs.values():
            if p.poll() is None:
                _stop_group(p, signal.SIGTERM, grace=8)
        for pid in self.agent_pids():
            _kill(pid, signal.SIGKILL)
        self.hub_up()
        deadline = time.monotonic() + budget_s
        done = False
        rounds = 0
        while time.monotonic() < deadline and not done:
            rounds += 1
            self.say(f"settle round {rounds}")
            for c in CLONES:   # everyone publishes what it did before anyone works again
                self.git(self.clone(c), "grite", "sync", check=False)
            for c in CLONES:
                self.git(self.clone(c), "grite", "sync", check=False)
                for t in self.statuses(c).items():   # a human unblocks what they blocked
                    if t[1] == "blocked" and self.brat(c, "task", "update", t[0], "--status",
                                                       "queued", "-m", "human: settle",
                                                       check=False).returncode == 0:
                        self.human.setdefault(t[0], []).append("settle-requeue")
                for role in ("witness", "refinery"):
                    try:
                        r = self.brat(c, role, "run", "--once", check=False, timeout=60)
                        with open(self.tmp / f"{c}.settle.log", "a") as f:
                            f.write(f"== {role} run --once (round {rounds})\n{r.stdout}{r.stderr}")
                    except Hung as exc:
                        self.findings.append(f"hang: {exc}")
                        self.say(f"hang: {exc}")
                self.git(self.clone(c), "grite", "sync", check=False)
            done = all(s in FINISHED for s in self.statuses("A").values())
            if not done:
                time.sleep(1.0)
        for _ in range(2):
            for c in CLONES:
                r = self.git(self.clone(c), "grite", "sync", check=False)
                self.final_syncs[c] = f"rc {r.returncode}: {(r.stdout + r.stderr).strip()[-400:]}"
                self.git(self.clone(c), "fetch", "-q", "origin", check=False)
        self.settle_s = time.monotonic() - deadline + budget_s
        return done

    def statuses(self, c: str) -> dict[str, str]:
        p = self.brat(c, "task", "list", "--json", check=False)
        try:
            return {t["id"]: t["status"] for t in json.loads(p.stdout)}
        except ValueError:
            return {}

    # -- the invariants --------------------------------------------------------------

    def check(self) -> list[str]:
        """What went wrong, each said plainly; [] when every invariant holds."""
        bad: list[str] = list(self.findings)
        hub = self.tmp / "hub.git"
        st = self.statuses("A")
        files = set(self.git(hub, "ls-tree", "-r", "--name-only", "main").stdout.split())
        for f in self.seed_files:
            if f not in files:
                bad.append(f"files: {f} is missing from the hub's main (no agent deleted it)")
        for tid, t in self.tasks.items():
            found = self.git(hub, "grep", "-c", "-F", t["text"], "main", check=False).stdout
            count = sum(int(line.rsplit(":", 1)[1]) for line in found.split())
            if st.get(tid) == "merged" and count != 1:
                bad.append(f"merged-once: task {tid[:7]} is merged but its change is on main "
                           f"{count} times")
            if st.get(tid) != "merged" and count:
                bad.append(f"merged-once: task {tid[:7]} is {st.get(tid)} but its change is "
                           f"on main")
        sessions = json.loads(self.brat("A", "session", "list", "--all", "--json").stdout)
        for tid in self.tasks:
            done = [s for s in sessions if s["task"] == tid and s["status"] == "done"]
            if len(done) > 1 and not self.human.get(tid):
                bad.append(f"one-run: task {tid[:7]} was worked to done by {len(done)} sessions "
                           f"({', '.join(s['id'][:7] for s in done)}) with no human move between "
                           f"(no crash of the first either: it ended done)")
        dumps = {c: self.dump(c) for c in CLONES}
        for c in CLONES[1:]:
            diff = sorted(k for k in set(dumps["A"]) | set(dumps[c])
                          if dumps["A"].get(k) != dumps[c].get(k))
            if diff:
                bad.append(f"same-state: clone {c} differs from clone A in {len(diff)} entities "
                           f"(first {diff[0][:7]})")
        for c in CLONES:
            s = json.loads(self.brat(c, "status", "--json").stdout)
            live = [x["id"][:7] for x in s["sessions"] if x["status"] in ("starting", "running")]
            if live:
                bad.append(f"no-ghost: clone {c} shows sessions {', '.join(live)} running with "
                           f"no witness alive")
        if any(v == "running" for v in st.values()):
            bad.append("no-ghost: a task is still running with no witness alive")
        return bad

    def evidence(self, bad: list[str]) -> str:
        """What a failed run leaves to read (CI keeps no directory): how long settling took,
        each clone's last sync, the moves of the tasks the failures name as each clone has
        them, and the tail of each clone's settle and role logs."""
        named = sorted({w for line in bad for w in re.findall(r"\b[0-9a-f]{7}\b", line)})
        out = [f"settling took {self.settle_s:.0f}s"]
        out += [f"{c}: last sync {said}" for c, said in sorted(self.final_syncs.items())]
        for short in named[:3]:
            for c in CLONES:
                p = self.brat(c, "task", "show", short, "--json", check=False)
                try:
                    h = json.loads(p.stdout).get("history", [])
                    moves = "; ".join(f"{m.get('from_status')}->{m.get('to_status')} by {m.get('actor', '')[:20]}"
                                      f" ({(m.get('reason') or '')[:60]})" for m in h[-6:])
                except ValueError:
                    moves = (p.stderr or "").strip()[-200:]
                out.append(f"{c} {short}: {moves}")
        for c in CLONES:
            for name in ("settle", "refinery", "witness"):
                path = self.tmp / f"{c}.{name}.log"
                if path.exists():
                    tail = path.read_text(errors="replace").strip().splitlines()[-8:]
                    out.append(f"--- {c}.{name}.log\n    " + "\n    ".join(tail))
        return "\n  ".join(out)

    def dump(self, c: str) -> dict[str, str]:
        """Every entity of the clone's log state, as JSON text (what an export would hold)."""
        code = ("import json,sys\nfrom git_brat.git.store import Store\n"
                "from git_brat.grite.repo import Grite\n"
                "st = Grite(Store.discover('.')).state(refresh=True)\n"
                "print(json.dumps({e.id: json.dumps({k: e.get(k) for k in sorted(e.fields)},"
                " sort_keys=True, default=str) for e in st.entities.values()}))")
        p = _run([sys.executable, "-c", code], self.clone(c), self.env)
        return json.loads(p.stdout)


def run(tmp: Path, seed: int, steps: int, say=lambda _l: None) -> tuple[list[str], Chaos]:
    """One seeded schedule, settled and checked: (what broke, the run)."""
    ch = Chaos(tmp, seed, steps, say=say)
    try:
        ch.setup()
        for n in range(steps):
            ch.step(n)
        try:
            settled = ch.settle()
        except Hung as exc:
            ch.findings.append(f"hang: while settling: {exc}")
            settled = False
        bad = ch.check()
        if not settled:
            left = {k[:7]: v for k, v in ch.statuses("A").items() if v not in FINISHED}
            bad.append(f"settle: tasks never finished: {left}")
        return bad, ch
    finally:
        ch.stop_all()


# -- processes, by pid -------------------------------------------------------------------

def _kill(pid: int, sig) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _stop_group(p: subprocess.Popen, sig, grace: float = 3.0) -> None:
    try:
        os.killpg(p.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        p.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        p.wait(timeout=10)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _pids() -> list[int]:
    return [int(n) for n in os.listdir("/proc") if n.isdigit()]


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _cwd(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return ""


__all__ = ["Chaos", "run", "ACTIONS"]
