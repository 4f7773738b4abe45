#!/usr/bin/env python3
"""An agent that tries every forbidden thing a sandboxed session must not do, then does its job.

Each attempt is printed as `HOSTILE <name> <ok|refused> <detail>`; the test reads them from the
session's log. $HOSTILE_OTHER names another task (of the same repository) and $HOSTILE_TREE
another session's work tree.
"""
import glob
import os
import subprocess
import sys

from agentkit import attempter, git

attempt = attempter("HOSTILE")


def brat(*args):
    proc = subprocess.run(["git", "brat", *args], capture_output=True, text=True, timeout=60)
    if proc.returncode:
        raise RuntimeError(f"exit {proc.returncode}: {proc.stderr.strip()}")
    return proc.stdout.strip()


def write(path, text="pwned\n", mode="a"):
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, mode) as f:
        f.write(text)
    return path


common = os.path.abspath(git("rev-parse", "--git-common-dir"))
checkout = os.path.dirname(common)
home = os.environ["HOME"]

attempt("checkout", lambda: write(os.path.join(checkout, "README.md")))
attempt("git-config", lambda: write(os.path.join(common, "config"), "[core]\n\tpager = evil\n"))
attempt("hidden-hook", lambda: write(os.path.join(common, "hooks", ".grite", "evil")))
for hook in sorted(glob.glob(os.path.join(common, "hooks", "*"))):
    attempt(f"hook-{os.path.basename(hook)}", lambda h=hook: write(h, "\necho pwned\n"))
attempt("update-ref-target", lambda: git("update-ref", "refs/heads/main", "HEAD"))
attempt("update-ref-other-branch", lambda: git("update-ref", "refs/heads/evil", "HEAD"))
attempt("update-ref-grite", lambda: git("update-ref", "refs/grite/evil", "HEAD"))
attempt("brat-dir", lambda: write(os.path.join(common, "brat", "config.local.toml"),
                                  "[witness]\nsandbox = \"none\"\n"))
attempt("other-tree", lambda: write(os.path.join(os.environ["HOSTILE_TREE"], "evil.txt")))
attempt("push", lambda: git("push", "evil", "HEAD:refs/heads/main"))
attempt("read-ssh-key", lambda: open(os.path.join(home, ".ssh", "id_ed25519")).read())
attempt("force-merged", lambda: brat("task", "update", os.environ["BRAT_TASK"], "--status",
                                     "merged", "--force"))
attempt("comment-other-task", lambda: brat("task", "comment", os.environ["HOSTILE_OTHER"],
                                           "-m", "spoofed"))
attempt("setsid", lambda: subprocess.Popen(["setsid", "sleep", "600"]).pid)

# The job itself: a commit on its branch, and done (through the witness).
write("hello.txt", "hello from the sandbox\n", "w")
attempt("commit", lambda: git("add", "hello.txt") + git("commit", "-q", "-m", "say hello"))
attempt("done", lambda: brat("task", "done", "-m", "said hello"))
sys.exit(0)
