"""`git brat demo`: a narrated run of the real commands in a throwaway hub and two clones."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from typing import Callable

import msgspec

SAMPLE = {
    "README.md": "# calc\n\nA tiny calculator the demo's agents work on.\n",
    "calc.py": "def add(a, b):\n    return a + b\n",
}


class Step(msgspec.Struct):
    title: str
    commands: list[str]
    result: str


class DemoResult(msgspec.Struct):
    directory: str
    kept: bool
    steps: list[Step]
    ok: bool


class Demo:
    """Runs each step as real `git`, `git grite` and `git brat` processes."""

    def __init__(self, root: str, say: Callable[[str], None]):
        self.root, self.say = root, say
        self.steps: list[Step] = []
        self._cmds: list[str] = []
        gitconfig = os.path.join(root, "gitconfig")
        with open(gitconfig, "w") as f:   # the user's own git config never leaks in or out
            f.write("[init]\n\tdefaultBranch = main\n[advice]\n\tdetachedHead = false\n")
        self.env = dict(os.environ, GIT_CONFIG_GLOBAL=gitconfig, GIT_CONFIG_NOSYSTEM="1",
                        GIT_TERMINAL_PROMPT="0")
        for var in ("GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GRITE_ACTOR", "GRITE_HOLDER"):
            self.env.pop(var, None)

    # -- running -------------------------------------------------------------------

    def _argv(self, args: tuple[str, ...]) -> list[str]:
        if args[:1] in (("grite",), ("brat",)):   # this very installation, whatever PATH says
            return [sys.executable, "-m", f"git_brat.{args[0]}", *args[1:]]
        return ["git", *args]

    def start(self, who: str, *args: str) -> subprocess.Popen:
        self._cmds.append(f"{who}$ git {shlex.join(args)}")
        return subprocess.Popen(self._argv(args), cwd=os.path.join(self.root, who), env=self._env(who),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def run(self, who: str, *args: str, ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess:
        self._cmds.append(f"{who}$ git {shlex.join(args)}")
        proc = subprocess.run(self._argv(args), cwd=os.path.join(self.root, who), env=self._env(who),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if proc.returncode not in ok:
            last = (proc.stderr.strip().splitlines() or [""])[-1]
            raise DemoFailed(f"`git {shlex.join(args)}` ({who}) exited {proc.returncode}: {last}")
        return proc

    def json(self, who: str, *args: str):
        return json.loads(self.run(who, *args, "--json").stdout)

    def _env(self, who: str) -> dict:
        name = who.capitalize() if who != "hub.git" else "Hub"
        return dict(self.env, GIT_AUTHOR_NAME=name, GIT_COMMITTER_NAME=name,
                    GIT_AUTHOR_EMAIL=f"{who}@demo.invalid", GIT_COMMITTER_EMAIL=f"{who}@demo.invalid")

    def start_agent(self, who: str, resource: str) -> subprocess.Popen:
        """A stand-in agent: takes a 2 s lease through the remote and renews it every 0.5 s."""
        grite = [sys.executable, "-m", "git_brat.grite", "lock"]
        script = (
            "import subprocess, sys, time\n"
            f"g, res = {grite!r}, {resource!r}\n"
            "base = ['--remote', 'origin', '--skew', '0']\n"
            "subprocess.run(g + ['acquire', res, '--ttl', '2'] + base, check=True,\n"
            "               stdout=subprocess.DEVNULL)\n"
            "print('held', flush=True)\n"
            "for _ in range(120):\n"
            "    time.sleep(0.5)\n"
            "    subprocess.run(g + ['renew', res, '--ttl', '2'] + base, stdout=subprocess.DEVNULL)\n")
        self._cmds.append(f"{who}$ (agent) git grite lock acquire {resource} --ttl 2, "
                          "then `lock renew` every 0.5 s")
        proc = subprocess.Popen([sys.executable, "-c", script], cwd=os.path.join(self.root, who),
                                env=self._env(who), stdout=subprocess.PIPE, text=True,
                                start_new_session=True)
        if proc.stdout.readline().strip() != "held":
            raise DemoFailed("the stand-in agent could not take its lease")
        return proc

    def step(self, title: str, result: str) -> None:
        self.steps.append(Step(title, self._cmds, result))
        self._cmds = []
        self.say(f"\n== {title}")
        for c in self.steps[-1].commands:
            self.say(f"   {c}")
        for line in result.splitlines():
            self.say(f"   {line}")

    # -- the story -----------------------------------------------------------------

    def play(self) -> None:
        os.makedirs(os.path.join(self.root, "alice"))
        subprocess.run(["git", "init", "-q", "--bare", os.path.join(self.root, "hub.git")],
                       env=self.env, check=True)
        self.run("alice", "init", "-q")
        for name, text in SAMPLE.items():
            with open(os.path.join(self.root, "alice", name), "w") as f:
                f.write(text)
        self.run("alice", "add", ".")
        self.run("alice", "commit", "-q", "-m", "calc: first version")
        self.run("alice", "remote", "add", "origin", "../hub.git")
        self.run("alice", "push", "-q", "-u", "origin", "main")
        init = self.json("alice", "brat", "init")
        self.step("Alice sets up git-brat in her clone",
                  f"wrote {init['config']}; hooks installed in {init['grite']['hooks_dir']}; "
                  f"remotes set up for sync: {', '.join(init['grite']['remotes']) or '-'}")

        run = self.json("alice", "brat", "workflow", "run", "feature",
                        "--var", "feature=Add a subtract function", "--var", "area=calc.py")
        tasks = {t["step"]: t["id"] for t in run["tasks"]}
        ready = self.json("alice", "brat", "task", "ready")
        self.step("A workflow turns one request into a convoy of tasks, in one atomic batch",
                  f"convoy {run['convoy'][:7]} \"{run['title']}\"\n" + "\n".join(
                      f"  {t['step']:<10} {t['id'][:7]}  {t['title']}" for t in run["tasks"])
                  + f"\nready now: {', '.join(t['title'] for t in ready)}")

        self.run("alice", "push", "-q")
        self._cmds.append("$ git clone -q hub.git bob")
        subprocess.run(["git", "clone", "-q", "hub.git", "bob"], cwd=self.root, env=self._env("bob"),
                       check=True)
        self.run("bob", "brat", "init")
        seen = self.json("bob", "brat", "task", "list")
        self.step("A plain `git push` published the log; Bob's fresh clone sees every task",
                  f"Bob sees {len(seen)} tasks: " + ", ".join(t["status"] for t in seen))

        design = tasks["design"]
        racers = [self.start(who, "grite", "lock", "acquire", f"task:{design}", "--remote", "origin",
                             "--ttl", "60", "--json") for who in ("alice", "bob")]
        outcomes = [(who, p.wait(60), p.communicate()[0]) for who, p in zip(("alice", "bob"), racers)]
        winners = [w for w, code, _ in outcomes if code == 0]
        refused = [w for w, code, _ in outcomes if code == 5]
        if len(winners) != 1 or len(refused) != 1:
            raise DemoFailed(f"expected one lease winner and one refusal, got exit codes "
                             f"{', '.join(f'{w}: {code}' for w, code, _ in outcomes)}")
        winner = winners[0]
        self.step("Alice and Bob race to claim the design task through the remote",
                  f"winner: {winner} (the other was refused: the lease is live)")

        for status in ("running", "needs-review", "merging", "merged"):
            self.run(winner, "brat", "task", "update", design, "--status", status)
        self.run(winner, "grite", "lock", "release", f"task:{design}", "--remote", "origin")
        refused = self.run(winner, "brat", "task", "update", design, "--status", "running",
                           ok=(5,)).stderr.strip()
        self.step(f"{winner.capitalize()} moves the task through the state machine, one event each",
                  "queued -> running -> needs-review -> merging -> merged\n"
                  f"an invalid move is refused: {refused.split('error: ', 1)[-1]}")

        implement = f"task:{tasks['implement']}"
        agent = self.start_agent("bob", implement)
        held = self.run("alice", "grite", "lock", "acquire", implement, "--remote", "origin",
                        "--skew", "0", ok=(5,))
        os.killpg(agent.pid, signal.SIGKILL)   # the agent dies hard, mid-heartbeat
        agent.wait()
        taken = self.json("alice", "grite", "lock", "acquire", implement, "--remote", "origin",
                          "--skew", "0", "--wait", "20")
        self.step("Bob's agent holds the next task's lease with heartbeats, then is SIGKILLed",
                  f"while it lives: {held.stderr.strip().split('error: ', 1)[-1]}\n"
                  f"once its lease expires Alice takes over, with a higher fencing token "
                  f"({_token(taken)}), so a revived zombie's late writes are rejected on replay")

        self.run(winner, "push", "-q")
        other = "bob" if winner == "alice" else "alice"
        self.run(other, "pull", "-q", "--rebase")
        status = self.run(other, "brat", "status").stdout
        log = self.run(other, "grite", "log", "-n", "6").stdout
        leases = self.run("alice", "grite", "lock", "status", "--remote", "origin").stdout
        self.step(f"After a plain `git pull`, {other.capitalize()} sees the same state",
                  status.rstrip() + "\n\nthe audit trail (git grite log -n 6):\n" + log.rstrip()
                  + "\n\nthe leases, as the remote decided them (git grite lock status):\n"
                  + leases.rstrip())
        doctor = self.json(other, "grite", "doctor")
        self.step("Everything replays from the log", "git grite doctor: " + (
            "ok" if doctor["ok"] else "problems found") + f" ({doctor['events']} events in "
            f"{doctor['commits']} commits across {len(doctor['logs'])} logs)")


class DemoFailed(Exception):
    pass


def _token(lease_json) -> str:
    return str(lease_json.get("token") or lease_json.get("lease", {}).get("token", "?"))


def run(directory: str | None, keep: bool, say: Callable[[str], None]) -> DemoResult:
    root = os.path.abspath(directory) if directory else tempfile.mkdtemp(prefix="git-brat-demo-")
    if directory:
        if os.path.exists(root):
            from git_brat.grite.errors import UsageError
            raise UsageError(f"{root} already exists; give a new directory for the demo")
        os.makedirs(root)
    demo = Demo(root, say)
    ok = True
    try:
        demo.play()
    except (DemoFailed, subprocess.SubprocessError, OSError, ValueError) as exc:
        ok = False
        say(f"\ndemo failed: {exc}")
    kept = keep or directory is not None or not ok
    if not kept:
        shutil.rmtree(root, ignore_errors=True)
    return DemoResult(root, kept, demo.steps, ok)
