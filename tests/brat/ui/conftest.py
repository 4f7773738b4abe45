"""Fixtures for the board's tests: one Chromium per module (Debian's, driven by Playwright),
and the directory its screenshots are kept in (helpers in boardkit.py)."""

from __future__ import annotations

import os
import shutil

import pytest

# Read when this file is imported: the session's isolated environment drops every BRAT_* variable.
ARTIFACTS = os.environ.get("BRAT_TEST_ARTIFACTS")


@pytest.fixture(scope="module")
def browser():
    """Chromium, headless; the module's tests skip, saying why, when it or Playwright is missing."""
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed "
                                                                 "(pip install '.[test]')")
    args = ["--no-sandbox"] if os.geteuid() == 0 else []
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium, args=args)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory, request):
    """Where screenshots go: $BRAT_TEST_ARTIFACTS/<module>, else a pytest temp directory."""
    name = request.module.__name__.rpartition(".")[2]
    if ARTIFACTS:
        path = os.path.join(ARTIFACTS, name)
        os.makedirs(path, exist_ok=True)
        return path
    return str(tmp_path_factory.mktemp(f"artifacts-{name}"))
