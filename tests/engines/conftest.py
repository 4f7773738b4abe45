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
