#!/usr/bin/env python3
"""A scripted stand-in for a coding agent, for what real engines can't be made to do on demand.

It reads its prompt (argv, or stdin with --stdin) and obeys lines `FAKE: ACTION ARGS` in it:
write FILE TEXT, commit MSG, done MSG (said from a subdirectory), block MSG, comment MSG,
kb KIND PATH TEXT, exit N, fail-first, hang, hang-once, sleep S, orphan (a setsid child),
error-json [MSG], print LINE. With $FAKE_PLAN
set, a request for a plan (the mayor's) is answered with that file. Every run appends one JSON line to $FAKE_RECORD:
its argv, cwd, pid, process group, session and prompt. Installed as `claude` too, it speaks
claude's flags: -p PROMPT, --session-id ID / --resume ID, and prints claude's JSON result.
"""
import json
import os
import subprocess
import sys
import time

args = sys.argv[1:]
name = os.path.basename(sys.argv[0])
session = ""
if name == "claude":
    prompt = args[args.index("-p") + 1]
    for flag in ("--session-id", "--resume"):
        if flag in args:
            session = args[args.index(flag) + 1]
elif args and args[0] == "--stdin":
    prompt = sys.stdin.read()
else:
    prompt = args[-1] if args else ""

def _read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def _listdir(path):
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


record = os.environ.get("FAKE_RECORD")
if record:
    with open(record, "a") as f:
        f.write(json.dumps({"argv": sys.argv, "cwd": os.getcwd(), "pid": os.getpid(),
                            "pgid": os.getpgid(0), "session": os.environ.get("BRAT_SESSION"),
                            "task": os.environ.get("BRAT_TASK"), "prompt": prompt,
                            "author": os.environ.get("GIT_AUTHOR_NAME"),
                            "api_key": os.environ.get("FAKE_API_KEY"),
                            "preset_env": os.environ.get("FAKE_PRESET_ENV"),
                            "claude_md": _read("CLAUDE.md"),
                            "skills": {d: _read(os.path.join(".claude/skills", d, "SKILL.md"))
                                       for d in _listdir(".claude/skills")}}) + "\n")

plan = os.environ.get("FAKE_PLAN")
if plan and '"tasks"' in prompt and '"convoy"' in prompt:   # asked for a plan, as the mayor asks
    with open(plan) as f:
        answer = f.read()
    print(json.dumps({"type": "result", "is_error": False, "result": answer,
                      "session_id": session}) if name == "claude" else answer)
    sys.exit(0)

state = os.environ.get("FAKE_STATE", os.path.join(os.path.dirname(record or "."), "fake-state"))
rc = 0
for line in prompt.splitlines():
    if not line.startswith("FAKE: "):
        continue
    action, _, rest = line[6:].strip().partition(" ")
    if action == "write":
        path, _, text = rest.partition(" ")
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "a") as f:
            f.write(text + "\n")
    elif action == "commit":
        subprocess.run(["git", "add", "-A"], check=True)
        subprocess.run(["git", "commit", "-q", "-m", rest or "fake work"], check=True)
    elif action in ("done", "block", "comment"):
        os.makedirs("sub/dir", exist_ok=True)
        proc = subprocess.run(["git", "brat", "task", action, "-m", rest], cwd="sub/dir",
                              capture_output=True, text=True)
        print(f"task {action}: rc={proc.returncode} {proc.stdout.strip()} {proc.stderr.strip()}")
        if proc.returncode:
            rc = 9
    elif action == "kb":   # kb KIND PATH TEXT: a knowledge note about PATH
        kind, _, rest = rest.partition(" ")
        path, _, text = rest.partition(" ")
        proc = subprocess.run(["git", "brat", "kb", "add", "--kind", kind, "--path", path,
                               "-m", text, "--json"], capture_output=True, text=True)
        print(f"kb add: rc={proc.returncode} {proc.stdout.strip()} {proc.stderr.strip()}")
        if proc.returncode:
            rc = 9
    elif action == "exit":
        rc = int(rest)
    elif action == "fail-first":
        os.makedirs(state, exist_ok=True)
        marker = os.path.join(state, "failed-once-" + os.environ.get("BRAT_TASK", ""))
        if not os.path.exists(marker):
            open(marker, "w").close()
            print("failing on purpose the first time", file=sys.stderr)
            sys.exit(3)
    elif action == "sleep":
        time.sleep(float(rest))
    elif action == "orphan":   # a child that leaves the agent's process group (setsid)
        child = subprocess.Popen(["sleep", "600"], start_new_session=True)
        with open((record or os.path.join(state, "record")) + ".orphans", "a") as f:
            f.write(f"{child.pid}\n")
    elif action == "hang-once":
        os.makedirs(state, exist_ok=True)
        marker = os.path.join(state, "hung-once-" + os.environ.get("BRAT_TASK", ""))
        if os.path.exists(marker):
            continue
        open(marker, "w").close()
        action = "hang"
    if action == "hang":
        child = subprocess.Popen(["sleep", "600"])
        if record:
            with open(record + ".pids", "a") as f:
                f.write(f"{os.getpid()} {child.pid}\n")
        sys.stdout.flush()
        while True:
            time.sleep(1)
    elif action == "print":   # a line of output as an engine prints it (its usage reports)
        print(rest, flush=True)
    elif action == "error-json":
        # The message may be given (backslash escapes decoded: an engine's output is anyone's).
        message = rest.encode().decode("unicode_escape") if rest else "model overloaded"
        print(json.dumps({"type": "result", "is_error": True, "result": message,
                          "session_id": session}))
        sys.exit(0)
if name == "claude":
    print(json.dumps({"type": "result", "is_error": False, "result": "finished",
                      "session_id": session, "num_turns": 1}))
sys.exit(rc)
