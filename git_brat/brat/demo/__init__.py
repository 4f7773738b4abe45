"""`git brat demo`: the whole loop on a small buggy project — mayor, witness, a crash, refinery, landed."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess

import tempfile
import time
from typing import Callable

import msgspec

from git_brat import process
from git_brat.brat import layout
from git_brat.brat.demo import project as demo_project
from git_brat.git import run as git

DELAY = 20.0        # seconds the demo agents pause mid-edit in the run that gets crashed


class Step(msgspec.Struct):
    title: str
    commands: list[str]
    result: str


class DemoResult(msgspec.Struct):
    directory: str
    kept: bool
    engine: str
    steps: list[Step]
    ok: bool
    seconds: float = 0.0
    explore: list[str] = []
    board: str = ""            # the board's address, with --ui


class DemoFailed(Exception):
    pass


class Demo:
    """Runs each step as real `git` and `git brat` processes in a throwaway repository."""

    def __init__(self, root: str, engine: str, fast: bool, say: Callable[[str], None],
                 ui: bool = False, pause: float = 0.0):
        self.root, self.engine, self.fast, self.say = root, engine, fast, say
        self.ui, self.pause = ui, pause
        self.board: dict = {}      # the board `--ui` started: url, port, pid
        self.repo = os.path.join(root, "textstats")
        self.steps: list[Step] = []
        self._cmds: list[str] = []
        gitconfig = os.path.join(root, "gitconfig")
        with open(gitconfig, "w") as f:   # the user's own git config never leaks in or out
            f.write("[init]\n\tdefaultBranch = main\n[advice]\n\tdetachedHead = false\n"
                    "[user]\n\tname = Demo User\n\temail = demo@example.invalid\n")
        self.env = dict(os.environ, GIT_CONFIG_GLOBAL=gitconfig, GIT_CONFIG_NOSYSTEM="1",
                        GIT_TERMINAL_PROMPT="0")
        for var in ("GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_INDEX_FILE",
                    "GRITE_ACTOR", "GRITE_HOLDER", "BRAT_SESSION", "BRAT_TASK", "BRAT_DEMO_DELAY"):
            self.env.pop(var, None)

    # -- running -------------------------------------------------------------------

    def _brat(self, args: tuple[str, ...]) -> list[str]:
        return [*process.launcher("brat"), *args]   # this very installation, whatever PATH says

    def run(self, *args: str, ok: tuple[int, ...] = (0,), env: dict | None = None,
            show: bool = True) -> str:
        """`git <args>` in the demo's repository (`git brat ...` by this installation); its
        output. DemoFailed with the last line it printed when it exits otherwise than ok."""
        if show:
            self._cmds.append(f"$ git {shlex.join(args)}")
        full = {**self.env, **(env or {})}
        if args[:1] == ("brat",):
            proc = subprocess.run(self._brat(args[1:]), cwd=self.repo, env=full,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  stdin=subprocess.DEVNULL, timeout=600)
            code, out, err = proc.returncode, proc.stdout, proc.stderr
        else:
            res = git.run(list(args), cwd=self.repo, env=full, timeout=600)
            code, out, err = res.code, res.out, res.err
        if code not in ok:
            last = (err.strip().splitlines() or [""])[-1]
            raise DemoFailed(f"`git {shlex.join(args)}` exited {code}: {last}")
        return out

    def json(self, *args: str, **kw):
        return json.loads(self.run(*args, "--json", **kw))

    def step(self, title: str, result: str) -> None:
        if self.pause and self.steps:   # with the board open: time to watch each step land
            time.sleep(self.pause)
        self.steps.append(Step(title, self._cmds, result))
        self._cmds = []
        self.say(f"\n== {title}")
        for c in self.steps[-1].commands:
            self.say(f"   {c}")
        for line in result.splitlines():
            self.say(f"   {line}")

    def unittest(self) -> str:
        proc = subprocess.run(demo_project.CHECK.split(), cwd=self.repo, env=self.env,
                              capture_output=True, text=True, timeout=120)
        return (proc.stderr.strip().splitlines() or ["(no output)"])[-1]

    # -- the story -----------------------------------------------------------------

    def play(self) -> None:
        self._project()
        self._init()
        convoy = self._plan()
        if self.fast:
            self._work("The witness runs an agent session per ready task, in parallel")
        else:
            self._crash()
            self._work("The next witness run recovers the crashed sessions and resumes them")
            self._recovery_report()
        self._refine("The refinery runs the project's tests and merges what passes")
        self._work("The task that needed the median fix is ready now: an agent takes it")
        self._refine("The refinery merges the last fix")
        self._landed(convoy)

    def _project(self) -> None:
        os.makedirs(self.repo)
        for rel, text in demo_project.FILES.items():
            path = os.path.join(self.repo, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text)
        self.run("init", "-q")
        self.run("add", ".")
        self.run("commit", "-q", "-m", "textstats: first version")
        self._cmds.append(f"$ {demo_project.CHECK}")
        self.step("A small Python project with three real bugs; its tests fail",
                  f"{self.repo}\ntests: {self.unittest()}")

    def _init(self) -> None:
        self.run("brat", "init")
        for key, value in (("witness.engine", self.engine), ("mayor.engine", self.engine),
                           ("witness.concurrency", "3"), ("witness.backoff", "0"),
                           ("refinery.check", demo_project.CHECK), ("refinery.batch", "3"),
                           # the demo has no human to approve: its check is the gate
                           ("refinery.review", "auto")):
            self.run("brat", "config", "set", key, value)
        self.run("add", ".brat", show=False)
        self.run("commit", "-q", "-m", "git-brat configuration", show=False)
        label = " (a scripted agent shipped with git-brat, not an AI)" if self.engine == "demo" else ""
        self.step("git brat init: the event log in git refs, hooks, .brat/config.toml",
                  f"engine: {self.engine}{label}\nthe merge check: {demo_project.CHECK}\n"
                  f"review: auto (the check lands what passes; a team's default is human: "
                  f"`git brat task approve`)")
        if self.ui:
            self._board()

    def _board(self) -> None:
        """Open the web board on the demo's repository: the rest of the loop happens in it."""
        self.board = self.json("brat", "ui", "--detach")
        self.step("git brat ui: the board, live in your browser (it stays up after the demo)",
                  f"{self.board['url']}\nstop it: git -C {self.repo} brat ui stop")

    def _plan(self) -> str:
        out = self.json("brat", "mayor", "ask", "find the bugs", "--yes")
        convoy = out.get("convoy") or (out.get("created") or {}).get("convoy")
        tasks = self.json("brat", "task", "list")
        titles = {t["id"]: t["title"] for t in tasks}
        lines = [f"convoy {convoy[:7]}: {len(tasks)} tasks"] + [
            f"  {t['id'][:7]}  {t['title']}" + (f"  (needs {', '.join(n[:7] for n in t['needs'])})"
                                                if t["needs"] else "") for t in tasks]
        dep = [t for t in tasks if t["needs"]]
        if dep:
            lines.append(f"\"{dep[0]['title']}\" waits for \"{titles[dep[0]['needs'][0]]}\"")
        self.step("The mayor turns one request into a convoy of tasks", "\n".join(lines))
        return convoy

    def _crash(self) -> None:
        """Start the witness with slow agents, then SIGKILL it while they are mid-edit."""
        argv = self._brat(("witness", "run", "--once"))
        self._cmds.append("$ git brat witness run --once &")
        env = {**self.env, "BRAT_DEMO_DELAY": str(DELAY)}
        w = subprocess.Popen(argv, cwd=self.repo, env=env, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
        try:
            deadline = time.monotonic() + 60
            editing = []
            while time.monotonic() < deadline and w.poll() is None:
                live = self.json("brat", "session", "list", show=False)
                editing = [s for s in live if s["status"] == "running" and
                           "editing" in self._log(s["id"])]
                if live and len(editing) == len(live) and len(live) >= 2:
                    break
                time.sleep(0.2)
            if not editing:
                raise DemoFailed("the witness's sessions did not start")
            os.kill(w.pid, signal.SIGKILL)
            w.wait(10)
        finally:
            if w.poll() is None:
                os.killpg(w.pid, signal.SIGKILL)
                w.wait(10)
        self._cmds.append(f"$ kill -9 {w.pid}      # the witness dies mid-session")
        self.step("The witness starts an agent per ready task... and is SIGKILLed mid-session",
                  f"{len(editing)} sessions were running, their agents half-way through an "
                  f"edit:\n" + "\n".join(f"  session {s['id'][:7]}  task {s['task'][:7]}"
                                         for s in editing))

    def _log(self, sid: str) -> str:
        from git_brat.git.store import Store
        try:
            with open(layout.session_log(Store.discover(self.repo), sid)) as f:
                return f.read()
        except OSError:
            return ""

    def _work(self, title: str) -> None:
        out = self.json("brat", "witness", "run", "--once")
        lines = []
        for r in out["recovered"]:
            # A sandboxed agent dies with its witness; an unconfined one is left running
            # until recovery stops it (which of the two a session was decides the words).
            what = ["crashed", "its orphaned agent stopped" if r["killed"] else
                    "its agent already gone"] + \
                ([f"its unsaved edit committed as {r['salvaged'][:7]}"] if r["salvaged"] else [])
            lines.append(f"recovered session {r['session'][:7]}: " + ", ".join(what))
        for e in out["ended"]:
            lines.append(f"session {e['session'][:7]}  task {e['task'][:7]}: {e['status']} "
                         f"({e['reason']}) -> {e['task_status']}")
        if out["failed"]:
            raise DemoFailed(f"{out['failed']} task(s) failed; see `git brat session list --all`")
        self.step(title, "\n".join(lines) or "nothing was ready")

    def _recovery_report(self) -> None:
        out = self.run("brat", "status")
        rec = out[out.index("RECOVERY"):] if "RECOVERY" in out else out
        self.step("git brat status: what the crash cost, in its recovery report", rec.rstrip())

    def _refine(self, title: str) -> None:
        out = self.json("brat", "refinery", "run", "--once")
        lines = []
        for p in out.get("passes", []):
            for o in p.get("outcomes", []):
                lines.append(f"task {o['task'][:7]}: {o['result']}")
        self._cmds.append(f"$ {demo_project.CHECK}")
        lines.append(f"main now: {self.unittest()}")
        self.step(title, "\n".join(lines))

    def _landed(self, convoy: str) -> None:
        c = self.json("brat", "convoy", "show", convoy)
        out = self.run("brat", "status")
        if c["status"] != "landed":
            raise DemoFailed(f"the convoy is {c['status']}, not landed")
        self.step("The convoy has landed", out.rstrip())


def run(directory: str | None, keep: bool, say: Callable[[str], None], engine: str = "demo",
        fast: bool = False, ui: bool = False, pause: float = 0.0) -> DemoResult:
    root = os.path.abspath(directory) if directory else tempfile.mkdtemp(prefix="git-brat-demo-")
    if directory:
        if os.path.exists(root):
            from git_brat.errors import UsageError
            raise UsageError(f"{root} already exists; give a new directory for the demo")
        os.makedirs(root)
    demo = Demo(root, engine, fast, say, ui, pause)
    ok = True
    started = time.monotonic()
    try:
        demo.play()
    except (DemoFailed, subprocess.SubprocessError, OSError, ValueError, KeyError) as exc:
        ok = False
        say(f"\ndemo failed: {exc}")
    kept = keep or directory is not None or not ok or bool(demo.board)   # the board serves it
    repo = demo.repo
    explore = [f"git -C {repo} log --oneline --graph main",
               f"git -C {repo} log --oneline refs/grite/wal | head",
               f"git -C {repo} brat session list --all",
               f"git -C {repo} brat session log <session>"] if kept else []
    if demo.board:
        explore += [f"the board: {demo.board['url']}", f"git -C {repo} brat ui stop"]
    if not kept:
        shutil.rmtree(root, ignore_errors=True)
    return DemoResult(root, kept, engine, demo.steps, ok, round(time.monotonic() - started, 1),
                      explore, demo.board.get("url", ""))
