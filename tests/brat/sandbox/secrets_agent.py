#!/usr/bin/env python3
"""An agent that reaches for the user's secrets and powers from inside its sandbox, then does
its job: remount its read-only binds read-write (as root with CAP_SYS_ADMIN it could), read the
replica's signing key, the board's token and log, the trust file, another session's log and
prompt; reach a service on this machine's loopback, the user's ssh-agent, D-Bus, gpg-agent and
an X11 display (abstract socket).

Each attempt is printed as `SECRET <name> <ok|refused> <detail>`. What to reach is in
$HOSTILE_SECRETS (JSON: name -> path, port or abstract socket name).
"""
import json
import os
import socket
import subprocess
import sys

from agentkit import attempter, git

attempt = attempter("SECRET")


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    if not data:
        raise RuntimeError("empty")
    return data[:40]


def listing(path):
    names = os.listdir(path)
    if not names:
        raise RuntimeError("empty")
    return names


def unix(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect(path)
    s.close()
    return path


def tcp(port):
    socket.create_connection(("127.0.0.1", int(port)), 5).close()
    return port


def remount(checkout):
    """mount -o remount,bind,rw every mount holding the checkout, then write the checkout."""
    done = []
    with open("/proc/self/mountinfo") as f:
        points = {line.split()[4] for line in f}
    for mp in sorted(points):
        if checkout == mp or checkout.startswith(mp.rstrip("/") + "/"):
            if subprocess.run(["mount", "-o", "remount,bind,rw", mp],
                              capture_output=True).returncode == 0:
                done.append(mp)
    with open(os.path.join(checkout, "ESCAPED.txt"), "w") as f:
        f.write("written after a remount\n")
    return done


want = json.loads(os.environ["HOSTILE_SECRETS"])
common = os.path.abspath(git("rev-parse", "--git-common-dir"))
checkout = os.path.dirname(common)
with open("/proc/self/status") as f:
    print("SECRET-INFO", " ".join(line.split()[1] for line in f
                                  if line.startswith(("CapEff", "NoNewPrivs"))), flush=True)

attempt("remount-rw", lambda: remount(checkout))
attempt("signing-keys", lambda: listing(os.path.join(common, "grite", "keys")))
attempt("board-token", lambda: read(os.path.join(common, "brat", "ui.json")))
attempt("board-log", lambda: read(os.path.join(common, "brat", "ui.log")))
attempt("trust-file", lambda: read(os.path.join(common, "brat", "trust.json")))
attempt("other-session-log", lambda: read(want["other_log"]))
attempt("other-session-prompt", lambda: read(want["other_prompt"]))
attempt("loopback-service", lambda: tcp(want["port"]))
attempt("ssh-agent-env", lambda: unix(os.environ["SSH_AUTH_SOCK"]))
attempt("ssh-agent", lambda: unix(want["ssh"]))
attempt("dbus-env", lambda: unix(os.environ["DBUS_SESSION_BUS_ADDRESS"].split("path=")[1]))
attempt("dbus", lambda: unix(want["dbus"]))
attempt("gpg-agent", lambda: unix(want["gpg"]))
attempt("x11-display-env", lambda: os.environ["DISPLAY"])
attempt("x11-abstract", lambda: unix("\0" + want["x11"]))

# The job itself: a commit on its branch, and done (through the witness).
with open("hello.txt", "w") as f:
    f.write("hello from the quarantine\n")
attempt("commit", lambda: git("add", "hello.txt") + git("commit", "-q", "-m", "say hello"))
attempt("done", lambda: subprocess.run(["git", "brat", "task", "done", "-m", "said hello"],
                                       check=True, capture_output=True, timeout=60).returncode)
sys.exit(0)
