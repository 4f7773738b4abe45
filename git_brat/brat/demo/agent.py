"""The demo engine: a deterministic scripted agent (not an AI) for `git brat demo` and `--engine demo`.

As a worker it fixes the demo project's bug that its task names, runs the tests, commits and
reports `git brat task done`. Asked by the mayor for a plan, it answers the demo project's plan.
Anywhere else it says plainly that it only knows the demo project, and blocks the task.
Set BRAT_DEMO_DELAY (seconds) to make it work slowly, so a demo can crash it mid-session.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

if __package__ in (None, ""):   # run as a script by the witness: find our package
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))))

from git_brat.brat.demo import project as demo_project  # noqa: E402

MARK = "[demo engine]"


def say(text: str) -> None:
    print(f"{MARK} {text}", flush=True)


def brat(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "brat", *args], capture_output=True, text=True)


def plan_requested(prompt: str) -> bool:
    return '"tasks"' in prompt and '"convoy"' in prompt and "plan" in prompt.lower()


def work() -> int:
    shown = brat("task", "show", "--json")
    if shown.returncode != 0:
        say(f"cannot tell which task this is: {shown.stderr.strip()}")
        return 2
    task = json.loads(shown.stdout)
    fix = demo_project.fix_for(task["title"])
    if fix is None:
        say("this scripted engine only knows the demo project's bugs; blocking the task")
        brat("task", "block", "-m", "the demo engine is a scripted agent for `git brat demo` "
                                    "only: use a real engine for this task")
        return 0
    say(f"task: {task['title']}")
    delay = float(os.environ.get("BRAT_DEMO_DELAY", "0") or 0)
    with open(fix.path, encoding="utf-8") as f:
        text = f.read()
    if fix.new not in text and fix.old in text:
        say(f"editing {fix.path}")
        with open(fix.path, "w", encoding="utf-8") as f:
            f.write(text.replace(fix.old, fix.new))
        if delay:   # "thinking" with the edit not yet committed: a crash here must lose nothing
            say(f"reviewing the change ({delay:g}s)")
            time.sleep(delay)
    else:
        say(f"{fix.path} already has the fix")
    for path, content in fix.adds.items():
        if not os.path.exists(path):
            say(f"adding {path}")
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(content)
    tests = subprocess.run(demo_project.CHECK.split(), capture_output=True, text=True)
    last = (tests.stderr.strip().splitlines() or ["(no output)"])[-1]
    say(f"tests: {last}")
    subprocess.run(["git", "add", "-A"], check=True)
    if subprocess.run(["git", "diff", "--cached", "--quiet"]).returncode:
        subprocess.run(["git", "commit", "-q", "-m", fix.title], check=True)
        say(f"committed: {fix.title}")
    done = brat("task", "done", "-m", f"{fix.title} ({last})")
    if done.returncode != 0:
        say(f"task done was refused: {done.stderr.strip()}")
        return 1
    return 0


def main(argv: list[str]) -> int:
    prompt = argv[-1] if argv else sys.stdin.read()
    if plan_requested(prompt):
        print("Here is the plan for the demo project:\n\n```json\n"
              + json.dumps(demo_project.plan(), indent=2) + "\n```")
        return 0
    return work()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
