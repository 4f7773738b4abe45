"""Fixtures shared by the refinery's tests."""

from __future__ import annotations

import pytest

from bratkit import convoy
from helpers import git


@pytest.fixture
def queue(brepo):
    """A repository on another branch than the target, so the target is not checked out."""
    git(brepo, "checkout", "-q", "-b", "work")
    return brepo, convoy(brepo, "Ship it")
