"""Helpers for witness tests: a repository whose engine is the scripted fake agent, and its records."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from helpers import BIN, brat, brat_json

AGENTS = Path(__file__).resolve().parent / "agents"
FAKE = AGENTS / "fake_agent.py"


class Bench:
    """A repository set up for the witness, the fake agent's record file, and the env to use."""

    def __init__(self, repo: Path, tmp: Path):
        self.repo = repo
        self.record = tmp / "record.jsonl"
        self.env = {"PATH": f"{BIN}{os.pathsep}{AGENTS}{os.pathsep}{os.environ['PATH']}",
                    "FAKE_RECORD": str(self.record), "FAKE_STATE": str(tmp / "fake-state")}
        # The fake agent's record and state are its engine state: writable in a sandbox.
        tmp.mkdir(parents=True, exist_ok=True)
        self.record.touch()
        self.state = json.dumps([str(self.record), str(tmp / "fake-state") + "/"])

    def brat(self, *args, **kw):
        cwd = kw.pop("cwd", self.repo)
        return brat(cwd, *args, env={**self.env, **kw.pop("env", {})}, **kw)

    def json(self, *args, **kw):
        return brat_json(self.repo, *args, env={**self.env, **kw.pop("env", {})}, **kw)

    def config(self, **values) -> None:
        for key, value in values.items():
            self.brat("config", "set", key.replace("__", "."), value)

    def convoy(self, title="Convoy") -> str:
        return self.brat("convoy", "create", title).out.strip()

    def task(self, convoy: str, title: str, *fake_lines: str, body: str = "", **kw) -> str:
        text = "\n".join([body, *(f"FAKE: {line}" for line in fake_lines)]).strip()
        args = ["task", "create", "--convoy", convoy, title, "-b", text]
        return self.brat(*args, **kw).out.strip()

    def runs(self) -> list[dict]:
        if not self.record.exists():
            return []
        return [json.loads(line) for line in self.record.read_text().splitlines() if line]

    def agent_pids(self) -> list[int]:
        """The pids the fake agent recorded (itself, then its children), in order."""
        path = self.record.with_name(self.record.name + ".pids")
        return [int(p) for p in path.read_text().split()] if path.exists() else []

    def show(self, tid: str) -> dict:
        return self.json("task", "show", tid)

    def sessions(self, tid: str | None = None) -> list[dict]:
        args = ["session", "list", "--all"] + (["--task", tid] if tid else [])
        return self.json(*args)

    def session(self, sid: str) -> dict:
        return self.json("session", "show", sid)

    def start_witness(self, *args: str) -> subprocess.Popen:
        # bin/git-brat itself, not `git brat`: git would sit between the test and the witness.
        return subprocess.Popen([str(BIN / "git-brat"), "witness", "run", *args], cwd=self.repo,
                                env={**os.environ, **self.env}, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)

    def wait_for(self, what, timeout: float = 30.0, every: float = 0.1):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = what()
            if value:
                return value
            time.sleep(every)
        raise AssertionError(f"gave up waiting after {timeout}s")


def make_bench(repo: Path, tmp: Path, engine: str = "fake") -> Bench:
    b = Bench(repo, tmp)
    brat(repo, "init")
    b.config(engines__fake__command=json.dumps(["python3", str(FAKE), "{prompt}"]),
             witness__engine=engine, witness__backoff="0", witness__max_retries="2",
             engines__fake__state=b.state)
    # The fake agent stands in for claude too (tests/brat/agents/claude).
    for name in {engine, "claude"} - {"fake"}:
        b.config(**{f"engines__{name}__state": b.state})
    return b


def alive(pid: int) -> bool:
    """A running process (a zombie nobody reaped does not count)."""
    from git_brat.process import alive
    return alive(pid)

def kill_group(proc: subprocess.Popen) -> None:
    """Stop a process a test started (and its group), by pid, whatever state it is in."""
    try:   # its group too: what it started may outlive it
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=10)


__all__ = ["Bench", "make_bench", "alive", "kill_group", "FAKE", "AGENTS"]
