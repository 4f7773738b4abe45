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
    # Stories of whole roles (a witness session, a refinery pass, a mayor's engine, several
    # clones and a hub, a terminal): the files whose tests averaged over ~3 s each on an idle
    # 2-core machine, in a run of the fast tier that recorded every test's duration.
    "tests/brat/mayor/test_mayor.py",
    "tests/brat/mayor/test_mayor_confined.py",
    "tests/brat/mayor/test_mayor_context_files.py",
    "tests/brat/mayor/test_mayor_engine_choice.py",
    "tests/brat/mayor/test_mayor_tty.py",
    "tests/brat/refinery/test_check_output_readable.py",
    "tests/brat/refinery/test_hub_checks_what_it_lands.py",
    "tests/brat/refinery/test_red_target.py",
    "tests/brat/refinery/test_refinery_batch.py",
    "tests/brat/refinery/test_refinery_hub.py",
    "tests/brat/refinery/test_refinery_run.py",
    "tests/brat/refinery/test_refinery_standby.py",
    "tests/brat/refinery/test_refinery_trust.py",
    "tests/brat/refinery/test_refinery_witness.py",
    "tests/brat/test_brat_contracts.py",
    "tests/brat/test_brat_state_machine.py",
    "tests/brat/test_brat_status.py",
    "tests/brat/test_brat_trust.py",
    "tests/brat/test_brat_trust_engine_settings.py",
    "tests/brat/test_brat_watch.py",
    "tests/brat/test_forged_task_moves.py",
    "tests/brat/test_kb.py",
    "tests/brat/test_review_gate.py",
    "tests/brat/test_secrets_stay_local.py",
    "tests/brat/test_status_tells_the_truth.py",
    "tests/brat/ui/test_ui_decisions.py",
    "tests/brat/witness/test_attribution.py",
    "tests/brat/witness/test_engine_version_probe.py",
    "tests/brat/witness/test_hand_running_task.py",
    "tests/brat/witness/test_witness.py",
    "tests/brat/witness/test_witness_contracts.py",
    "tests/brat/witness/test_witness_limits.py",
    "tests/brat/witness/test_witness_outage.py",
    "tests/brat/witness/test_witness_race.py",
    "tests/brat/witness/test_witness_recovery.py",
    "tests/brat/witness/test_witness_resume_id.py",
    "tests/brat/witness/test_witness_spending.py",
    "tests/brat/witness/test_witness_trust.py",
    "tests/grite/cache/test_cache.py",
    "tests/grite/cache/test_snapshot.py",
    "tests/grite/locks/test_fence_tokens_from_records.py",
    "tests/grite/locks/test_lock_authority.py",
    "tests/grite/locks/test_locks_race.py",
    "tests/grite/sync/test_fetch_warning_bounded.py",
    "tests/grite/sync/test_shallow_clone.py",
)


def pytest_collection_modifyitems(config, items):
    root = config.rootpath
    for item in items:
        where = item.path.relative_to(root).as_posix() if item.path.is_relative_to(root) else ""
        if where.startswith(SLOW_FILES):
            item.add_marker(pytest.mark.slow)


def pytest_configure(config):
    # A run started in the background of a shell without job control has SIGINT ignored, and
    # every process it starts inherits that: the tests that press Ctrl-C on a command would
    # wait forever. Catching it here gives the commands the tests start the default again.
    import signal
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
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
