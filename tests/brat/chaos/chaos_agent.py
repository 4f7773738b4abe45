#!/usr/bin/env python3
"""A stand-in agent for the chaos test: makes its task's one change so that doing it twice (a
session resumed on the branch after a crash) changes nothing, commits, and reports done.

Prompt lines it obeys: `CHAOS: put FILE TEXT` (FILE holds TEXT), `CHAOS: slot FILE N TEXT` (the
line `slot-N` of FILE becomes `slot-N TEXT`). Each run leaves its pid in $CHAOS_PIDS so the test
can kill it, and stop it whatever happens. $CHAOS_SLEEP: seconds of "thinking" first.
"""
import os
import subprocess
import sys
import time

if sys.argv[-1] == "--version":
    print("chaos-agent 1.0")
    sys.exit(0)
pids = os.environ.get("CHAOS_PIDS")
if pids:
    with open(os.path.join(pids, str(os.getpid())), "w"):
        pass
time.sleep(float(os.environ.get("CHAOS_SLEEP", "0.3")))
for line in sys.argv[-1].splitlines():
    if not line.startswith("CHAOS: "):
        continue
    action, path, rest = line[7:].strip().split(" ", 2)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    if action == "put":
        with open(path, "w") as f:
            f.write(rest + "\n")
    elif action == "slot":
        n, text = rest.split(" ", 1)
        with open(path) as f:
            lines = f.read().splitlines()
        lines = [f"slot-{n} {text}" if x == f"slot-{n}" else x for x in lines]
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
subprocess.run(["git", "add", "-A"], check=True)
if subprocess.run(["git", "diff", "--cached", "--quiet"]).returncode != 0:
    subprocess.run(["git", "commit", "-q", "-m", "chaos work"], check=True)
subprocess.run(["git", "brat", "task", "done", "-m", "ok"], check=False)
