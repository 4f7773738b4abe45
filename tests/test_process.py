"""The one process module: a detached child with its pid file, a recorded process told apart
from a reused pid, a whole process group stopped, this installation started as a child."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from git_brat import process

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]


def _wait_gone(pid: int, seconds: float = 10) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not process.alive(pid):
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def detached(tmp_path):
    """A detached sleeper with its pid file; stopped by the test's end, by its pid."""
    started = []

    def start(**kw):
        pf = process.detach(SLEEPER, role="sleeper", cwd=str(tmp_path), env=dict(os.environ),
                            log=str(tmp_path / "sleeper.log"), **kw)
        started.append(pf.pid)
        return pf
    yield start
    for pid in started:
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        _wait_gone(pid)


def test_a_detached_process_is_recorded_with_its_start_time_and_host(detached, tmp_path):
    path = str(tmp_path / "sleeper.pid")
    pf = detached(pid_file=path, shown=["sleep", "60"])
    on_disk = json.loads(open(path).read())
    assert on_disk["pid"] == pf.pid and on_disk["start"] == process.start_time(pf.pid) > 0
    assert on_disk["host"] == process.hostname() and on_disk["argv"] == ["sleep", "60"]
    assert os.getpgid(pf.pid) == pf.pid              # its own session and process group
    assert process.read_pid_file(path) == pf


def test_a_pid_file_whose_process_ended_is_removed_when_read(detached, tmp_path):
    path = str(tmp_path / "sleeper.pid")
    pf = detached(pid_file=path)
    os.killpg(pf.pid, signal.SIGKILL)
    assert _wait_gone(pf.pid)
    assert process.read_pid_file(path) is None
    assert not os.path.exists(path)


def test_a_reused_pid_is_not_taken_for_the_recorded_process(detached, tmp_path):
    pf = detached()
    assert process.same_process(pf.proc)
    # The same pid with another start time: what a pid the kernel gave out again looks like.
    assert not process.same_process(process.Proc(pf.pid, pf.start + 1, pf.host))
    assert not process.same_process(process.Proc(pf.pid, pf.start, "another-host"))
    # No start time ("don't check", as a forged record may say): never taken for it.
    assert not process.same_process(process.Proc(pf.pid, 0, pf.host))
    assert not process.stop_recorded_group(process.Proc(pf.pid, pf.start + 1, pf.host))
    assert not process.stop_recorded_group(process.Proc(pf.pid, 0, pf.host))
    assert process.alive(pf.pid)


def test_a_pid_file_is_forgotten_only_by_the_process_it_names(tmp_path):
    path = str(tmp_path / "role.pid")
    process.write_pid_file(path, "role", process.this_process(), ["x"])
    process.forget_pid_file(path, os.getpid() + 1)     # a successor's file: left alone
    assert os.path.exists(path)
    process.forget_pid_file(path, os.getpid())
    assert not os.path.exists(path)


def test_stopping_a_group_stops_the_children_its_leader_left(tmp_path):
    # A shell that starts a grandchild and exits: the group outlives its leader.
    marker = tmp_path / "child.pid"
    script = tmp_path / "child.py"
    script.write_text(f"import os, time\nopen({str(marker)!r}, 'w').write(str(os.getpid()))\n"
                      "time.sleep(60)\n")
    leader = subprocess.Popen(["sh", "-c", '"$0" "$1" &', sys.executable, str(script)],
                              start_new_session=True)
    recorded = process.Proc(leader.pid, process.start_time(leader.pid) or 0, process.hostname())
    try:
        deadline = time.monotonic() + 10
        while not marker.exists() or not marker.read_text():
            assert time.monotonic() < deadline, "the child never started"
            time.sleep(0.05)
        child = int(marker.read_text())
        leader.wait(timeout=10)                      # the leader is gone; its child is not
        assert process.alive(child) and process.group_alive(leader.pid)
        assert process.stop_recorded_group(recorded, grace=2)
        assert _wait_gone(child)
        assert not process.group_alive(leader.pid)
    finally:
        if leader.poll() is None:
            os.killpg(leader.pid, signal.SIGKILL)
            leader.wait()


def test_the_launcher_runs_this_installation_whatever_path_says(tmp_path):
    env = dict(os.environ, PATH="/usr/bin:/bin", PYTHONPATH="")
    for program in ("brat", "grite"):
        out = subprocess.run([*process.launcher(program), "--version"], cwd=tmp_path, env=env,
                             capture_output=True, text=True, check=True).stdout
        assert f"git-{program}" in out
    with pytest.raises(ValueError):
        process.launcher("../../evil")
