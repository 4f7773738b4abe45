"""The README's commands, run verbatim: the two at the top, the tour, the workflows, the tracker."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from pathlib import Path

from helpers import ROOT, git, make_repo, status
from witnesskit import AGENTS

README = (ROOT / "README.md").read_text()


def blocks() -> list[list[str]]:
    """The commands of each ```sh block (comments after `#` dropped)."""
    out = []
    for body in re.findall(r"```sh\n(.*?)```", README, re.S):
        out.append([re.sub(r"\s+#.*$", "", line).strip() for line in body.splitlines()
                    if line.strip() and not line.lstrip().startswith("#")])
    return out


def sh(cmd: str, cwd: Path, env: dict, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", cmd], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def test_the_two_commands_at_the_top_are_the_ones_ci_runs():
    install_demo, tests = blocks()[0]
    assert install_demo == "pip install . && git brat demo"
    ci = (ROOT / ".ci" / "run").read_text()
    assert tests in ci.splitlines(), "the README's test command must be the one .ci/run runs"


def test_the_demo_command_runs_verbatim(tmp_path):
    cmd = blocks()[0][0].split("&&")[1].strip()
    proc = sh(cmd, tmp_path, dict(os.environ), timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "The convoy has landed" in proc.stdout


def test_the_tour_the_workflows_and_the_tracker_run_verbatim(tmp_path):
    repo = make_repo(tmp_path / "repo")
    (repo / "src").mkdir()
    (repo / "src" / "calc.py").write_text("def div(a, b):\n    return a / b\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "calc")
    # Offline: `claude` is the scripted stand-in, answering the mayor with this plan.
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"convoy": {"title": "Bugs in src/", "body": "found by reading"},
                                "tasks": [{"key": "div0", "title": "div() by zero",
                                           "body": "FAKE: write src/calc.py # guard\n"
                                                   "FAKE: commit guard div\nFAKE: done guarded",
                                           "paths": ["src/calc.py"], "priority": 1,
                                           "needs": []}]}))
    env = {**os.environ, "PATH": f"{AGENTS}{os.pathsep}{os.environ['PATH']}",
           "FAKE_PLAN": str(plan)}
    tour, workflows, tracker = blocks()[1:4]
    for cmd in tour + workflows + tracker:
        if cmd.endswith("--watch"):
            continue
        if "<task>" in cmd:   # the one placeholder: the task the tour's agent finished
            done = json.loads(sh("git brat task list --json", repo, env).stdout)
            [t] = [t["id"] for t in done if t["status"] == "needs-review"]
            cmd = cmd.replace("<task>", t)
        proc = sh(cmd, repo, env)
        assert proc.returncode == 0, (cmd, proc.stdout, proc.stderr)
    # The tour did its job: a convoy from the mayor, the agent's work merged.
    out = json.loads(sh("git brat task list --json", repo, env).stdout)
    div0 = next(t for t in out if t["title"] == "div() by zero")
    assert div0["status"] == "merged"
    assert "# guard" in git(repo, "show", "main:src/calc.py")
    # `status --watch` redraws until Ctrl-C, then exits 0.
    watch = next(c for c in tour if c.endswith("--watch"))
    proc = subprocess.Popen(["bash", "-c", f"exec {watch}"], cwd=repo, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        import time
        time.sleep(3)
        os.killpg(proc.pid, signal.SIGINT)     # Ctrl-C: the terminal signals the whole group
        out, _err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode in (0, -signal.SIGINT) and "CONVOYS" in out
    assert status(repo) == "?? .brat/" or status(repo).startswith("?? .brat/")
