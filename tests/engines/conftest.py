"""Fixtures for tests/engines: an engine's offline sandbox (see enginekit)."""

from __future__ import annotations

import pytest

from enginekit import Sandbox, configure, require_engine


@pytest.fixture
def sandbox_for(tmp_path):
    """sandbox_for(NAME): engine NAME's offline config in this test's directory (skips when
    the engine is not installed or no loopback-only namespace can be had)."""
    def make(name: str) -> Sandbox:
        require_engine(name)
        root = tmp_path / f"engine-{name}"
        root.mkdir()
        return configure(name, root)
    return make


@pytest.fixture(autouse=True)
def _no_engine_left_running(tmp_path):
    """After each test, no process may still work in its directory: engines and the helpers
    they start are stopped with their session. Any found is killed (by pid) and fails the test."""
    yield
    import os
    import signal
    import time
    from enginekit import processes_under
    deadline = time.monotonic() + 3
    left = processes_under(tmp_path)
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = processes_under(tmp_path)
    for pid, _ in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert not left, f"left running: {left}"
