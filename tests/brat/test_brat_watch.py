"""`git brat status --watch`: redraws in place on a terminal until Ctrl-C, then exits 0."""

from __future__ import annotations

import json
import os

import pexpect

from bratkit import convoy
from helpers import brat
import signal
import subprocess
import time

CLEAR = "\x1b[H\x1b[2J"


def _spawn(repo, *args) -> pexpect.spawn:
    # git-brat itself (what `git brat` runs): the git wrapper dies of SIGINT by its own
    # default, so only the program's own exit status shows that Ctrl-C is a clean stop.
    return pexpect.spawn("git-brat", ["status", "--watch", *args], cwd=str(repo),
                         env=dict(os.environ), encoding="utf-8", timeout=30,
                         dimensions=(50, 80))


def test_watch_refreshes_in_place_and_stops_cleanly_on_ctrl_c(brepo):
    convoy(brepo, "First convoy")
    child = _spawn(brepo, "--interval", "0.3")
    try:
        child.expect_exact(CLEAR)
        child.expect_exact("First convoy")
        child.expect_exact("refreshing every 0.3s; Ctrl-C to stop")
        convoy(brepo, "Second convoy")       # written by another process meanwhile
        child.expect_exact(CLEAR)            # a second redraw, in place
        child.expect_exact("Second convoy")  # ... showing the new state
        child.sendintr()
        child.expect(pexpect.EOF)
        assert "Traceback" not in child.before and "error" not in child.before
    finally:
        child.close(force=True)
    assert child.exitstatus == 0, (child.exitstatus, child.signalstatus)


def test_watch_json_prints_one_document_per_refresh(brepo):
    convoy(brepo, "Only")
    child = _spawn(brepo, "--interval", "0.2", "--json")
    docs = []
    try:
        while len(docs) < 2:
            child.expect("\r\n")
            if child.before.strip():
                docs.append(json.loads(child.before))
        child.sendintr()
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
    assert all([c["title"] for c in d["convoys"]] == ["Only"] for d in docs)
    assert docs[0]["generated_at"] < docs[1]["generated_at"]


def test_watch_through_git_stops_on_ctrl_c_without_a_traceback(brepo):
    convoy(brepo, "Via git")
    child = pexpect.spawn("git", ["brat", "status", "--watch", "--interval", "0.2"],
                          cwd=str(brepo), env=dict(os.environ), encoding="utf-8", timeout=30)
    try:
        child.expect_exact("Via git")
        child.expect_exact(CLEAR)
        child.sendintr()
        child.expect(pexpect.EOF)
        assert "Traceback" not in child.before and "error" not in child.before
    finally:
        child.close(force=True)


def test_watch_rejects_a_bad_interval(brepo):
    proc = brat(brepo, "status", "--watch", "--interval", "0", check=False)
    assert proc.returncode == 2 and "0.1" in proc.err


def test_status_watch_into_a_pipe_writes_no_screen_codes_and_fits_the_width(grepo):
    brat(grepo, "init")
    brat(grepo, "convoy", "create", "A convoy with a rather long title that will not fit in forty")
    env = dict(os.environ, COLUMNS="40")
    proc = subprocess.Popen(["git-brat", "status", "--watch", "--interval", "0.2"], cwd=grepo,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    lines, deadline = [], time.monotonic() + 60
    while sum("refreshing every" in ln for ln in lines) < 2 and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line.decode())
    proc.send_signal(signal.SIGINT)
    rest, _err = proc.communicate(timeout=30)
    text = "".join(lines) + rest.decode()
    assert "\x1b" not in text and "CONVOYS" in text
    assert max(len(line) for line in text.splitlines()) <= 40, text
