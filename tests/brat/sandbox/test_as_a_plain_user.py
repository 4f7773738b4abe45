"""The sandbox's tests again, as a plain user (see plainuser.py); add a file to
PLAIN_USER_TESTS to have it run both ways."""

from __future__ import annotations

import pytest

from plainuser import rerun_as_plain_user

PLAIN_USER_TESTS = ["tests/brat/sandbox/test_agent_quarantine.py",
                    "tests/brat/sandbox/test_session_quarantine.py"]


@pytest.mark.slow
def test_the_quarantine_holds_for_a_plain_user_as_it_holds_for_root():
    rerun_as_plain_user(*PLAIN_USER_TESTS)
