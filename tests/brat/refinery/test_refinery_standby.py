"""A refinery that stands by for another clone's says so: whom it waits for, and until when."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

from helpers import BIN, brat, brat_json
from refinerykit import alive as _alive
from refinerykit import two_clones


def _two_clones_one_refinery(tmp_path):
    _hub, a, b = two_clones(tmp_path)
    pid = brat_json(a, "refinery", "run", "--detach")["pid"]
    deadline = time.monotonic() + 60
    while not brat_json(a, "refinery", "status")["running"]:
        assert time.monotonic() < deadline, "a's refinery never took the lease"
        time.sleep(0.2)
    return a, b, pid


def _first_stderr_line(argv, cwd, seconds: float = 30) -> tuple[str, subprocess.Popen]:
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    os.set_blocking(proc.stderr.fileno(), False)
    deadline, got = time.monotonic() + seconds, b""
    while b"\n" not in got and time.monotonic() < deadline and proc.poll() is None:
        try:
            got += os.read(proc.stderr.fileno(), 4096)
        except BlockingIOError:
            time.sleep(0.1)
    return got.decode(), proc


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


def test_a_standby_refinery_says_whom_it_waits_for_and_until_when(tmp_path):
    a, b, pid = _two_clones_one_refinery(tmp_path)
    try:
        said, standby = _first_stderr_line([str(BIN / "git-brat"), "refinery", "run"], b)
        _stop(standby)
        assert said.startswith("standing by: another refinery holds refinery:hub"), said
        assert "refinery@" in said and "lease until" in said and "refinery stop" in said
        said, waiter = _first_stderr_line(
            [str(BIN / "git-brat"), "refinery", "run", "--wait", "2", "--json"], b)
        out, _err = waiter.communicate(timeout=60)
        line = json.loads(said.splitlines()[0])["standby"]
        assert line["resource"] == "refinery:hub" and line["holder"].startswith("refinery@")
        assert line["until"] and line["waiting_until"] and line["host"]
        assert waiter.returncode == 5 and out == b""         # gave up: the error line says why
    finally:
        brat(a, "refinery", "stop")
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
