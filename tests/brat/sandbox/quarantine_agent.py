#!/usr/bin/env python3
"""An agent that does its ordinary work (one commit on its branch), then one thing a session's
quarantine must not let out, chosen by argv[1]:

- fsmonitor MARKER: a nested repository whose own config runs a command (core.fsmonitor) that
  appends to MARKER, committed as a gitlink and left changed;
- head REF: its work tree's HEAD pointed at REF, changes left uncommitted;
- rewrite-loose: a loose blob of main rewritten in place in the shared object store;
- forge / missing: its own commit's blob, in its private object directory, rewritten to other
  content / deleted.

Each attempt prints `QUARANTINE <name> <ok|refused> <detail>`.
"""
import os
import subprocess
import sys
import zlib


def git(*args):
    proc = subprocess.run(["git", *args], capture_output=True, text=True, timeout=60)
    if proc.returncode:
        raise RuntimeError(f"git {args[0]} exited {proc.returncode}: {proc.stderr.strip()}")
    return proc.stdout.strip()


def attempt(name, fn):
    try:
        print(f"QUARANTINE {name} ok {str(fn())[:200]!r}", flush=True)
    except Exception as exc:
        print(f"QUARANTINE {name} refused {type(exc).__name__}: {str(exc)[:200]!r}", flush=True)


def loose(objects, sha):
    return os.path.join(objects, sha[:2], sha[2:])


def rewrite(path, body):
    tmp = path + ".t"
    with open(tmp, "wb") as f:
        f.write(zlib.compress(b"blob %d\0" % len(body) + body))
    os.replace(tmp, path)
    return path


mode, args = sys.argv[1], sys.argv[2:]
with open("work.txt", "w") as f:
    f.write("the agent's ordinary work\n")
git("add", "work.txt")
git("commit", "-q", "-m", "agent: ordinary work")
print("QUARANTINE commit ok", flush=True)
common = os.path.abspath(git("rev-parse", "--git-common-dir"))

if mode == "fsmonitor":
    marker = args[0]
    git("init", "-q", "vendor/lib")
    git("-C", "vendor/lib", "commit", "-q", "--allow-empty", "-m", "lib")
    git("-C", "vendor/lib", "config", "core.fsmonitor",
        f"echo \"ran as $(id -u) in $PWD\" >> '{marker}'; false")
    git("add", "vendor/lib")
    git("commit", "-q", "-m", "agent: a nested repository")
    with open("vendor/lib/dirty.txt", "w") as f:
        f.write("changed inside the nested repository\n")
    with open("left.txt", "w") as f:
        f.write("left uncommitted\n")
    print("QUARANTINE fsmonitor planted", flush=True)
elif mode == "head":
    with open("README", "w") as f:
        f.write("changed by the agent, left uncommitted\n")
    with open("left.txt", "w") as f:
        f.write("left uncommitted\n")
    gd = git("rev-parse", "--absolute-git-dir")
    with open(os.path.join(gd, "HEAD"), "w") as f:
        f.write(f"ref: {args[0]}\n")
    print(f"QUARANTINE head pointed at {args[0]}", flush=True)
elif mode == "rewrite-loose":
    # Wherever the blob is: objects/, or a store objects/info/alternates names.
    blob = git("rev-parse", "main:README")
    stores = [os.path.join(common, "objects")]
    try:
        with open(os.path.join(common, "objects", "info", "alternates")) as f:
            stores += [line.strip() for line in f if line.strip()]
    except OSError:
        pass
    found = [d for d in stores if os.path.isfile(loose(d, blob))]
    print(f"QUARANTINE found {'ok' if found else 'refused'} {found!r}", flush=True)
    for d in found:
        attempt("rewrite-loose", lambda: rewrite(loose(d, blob),
                                                 b"planted by the sandboxed agent\n"))
        attempt("delete-loose", lambda: os.unlink(loose(d, blob)))
elif mode in ("forge", "missing"):
    with open("secret-plan.txt", "w") as f:
        f.write("what the agent's commit says\n")
    git("add", "secret-plan.txt")
    git("commit", "-q", "-m", "agent: a commit whose blob it then changes")
    blob = git("rev-parse", "HEAD:secret-plan.txt")
    path = loose(os.path.join(common, "objects"), blob)   # the session's own, in the sandbox
    os.chmod(path, 0o644)
    if mode == "forge":
        attempt("forge", lambda: rewrite(path, b"other content under the same name\n"))
    else:
        attempt("missing", lambda: os.unlink(path))
