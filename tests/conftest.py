"""Shared fixtures: an isolated HOME and git identity, this checkout's bin/ first on PATH."""

from __future__ import annotations

import os

import pytest

from helpers import BIN, grite, make_repo


# Whole files of slow tests: each test in them starts a real engine, a browser, a sandboxed
# session, a chaos schedule, a hub's daemon or a package install (seconds to a minute each).
# A test elsewhere that is as slow says so itself with @pytest.mark.slow. The fast tier
# (`-m "not slow"`) is for the edit-test loop; CI runs both.
SLOW_FILES = (
    "tests/engines/test_real_engines.py",
    "tests/brat/chaos/",
    "tests/brat/ui/test_ui_story.py",
    "tests/brat/ui/test_ui_browser_guard.py",
    "tests/brat/ui/test_ui_demo.py",
    "tests/brat/sandbox/",
    "tests/brat/demo/",
    "tests/brat/test_readme.py",
    "tests/cli/test_packaging.py",
)


def pytest_collection_modifyitems(config, items):
    root = config.rootpath
    for item in items:
        where = item.path.relative_to(root).as_posix() if item.path.is_relative_to(root) else ""
        if where.startswith(SLOW_FILES):
            item.add_marker(pytest.mark.slow)


def pytest_configure(config):
    # Every command a test runs is a new Python importing this checkout's package. Where
    # PYTHONDONTWRITEBYTECODE is set (CI machines set it) no process would leave bytecode for
    # the next, and each would compile the package again: 0.42 s a command instead of 0.23.
    import compileall
    compileall.compile_dir(str(BIN.parent / "git_brat"), quiet=1)


@pytest.fixture(autouse=True, scope="session")
def _isolated_environment(tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    (home / ".gitconfig").write_text(
        "[user]\n\tname = Test User\n\temail = test@example.com\n"
        "[init]\n\tdefaultBranch = main\n[protocol \"file\"]\n\tallow = always\n"
        "[advice]\n\tdetachedHead = false\n")
    saved = dict(os.environ)
    for var in list(os.environ):
        if var.startswith(("GIT_", "GRITE_", "BRAT_")):
            del os.environ[var]
    os.environ.update({
        "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
        "GIT_CONFIG_NOSYSTEM": "1", "PATH": f"{BIN}{os.pathsep}{saved.get('PATH', '')}",
        "LC_ALL": "C.UTF-8", "TZ": "UTC",
    })
    yield
    os.environ.clear()
    os.environ.update(saved)


@pytest.fixture
def repo(tmp_path):
    """A git repository with one commit, grite not initialised."""
    return make_repo(tmp_path / "repo")


@pytest.fixture
def grepo(repo):
    """A git repository with grite initialised."""
    grite(repo, "init")
    return repo
