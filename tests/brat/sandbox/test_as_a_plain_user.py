"""The sandbox's tests again, as a plain user (see plainuser.py); add a file to
PLAIN_USER_TESTS to have it run both ways."""

from __future__ import annotations

import pytest

from plainuser import rerun_as_plain_user, shared_engines_dir

PLAIN_USER_TESTS = ["tests/brat/sandbox/test_agent_quarantine.py",
                    "tests/brat/sandbox/test_session_quarantine.py"]


@pytest.mark.slow
def test_the_quarantine_holds_for_a_plain_user_as_it_holds_for_root():
    rerun_as_plain_user(*PLAIN_USER_TESTS)


@pytest.mark.slow
def test_the_seven_real_engines_pass_their_conformance_runs_sandboxed_as_a_plain_user_too():
    """Each real engine, sandboxed as a plain user's witness sandboxes it: its conformance run
    (edit, commit and resume; a failing model; to review through the witness; a hang stopped at
    the timeout; a crash recovered and its conversation resumed; as the mayor), and it sends its
    model none of the secrets it was told to read (the engines from a directory that user
    reads: BRAT_ENGINES_DIR, see scripts/install-engines). The unconfined runs are root's only:
    they test the engine, not the sandbox."""
    engines = shared_engines_dir()
    rerun_as_plain_user("tests/engines/test_engines_quarantined.py",
                        "tests/engines/test_real_engines.py", select="not unconfined",
                        extra={"BRAT_ENGINES_DIR": str(engines)}, workers=2, timeout=1500)
