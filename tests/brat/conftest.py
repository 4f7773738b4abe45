"""Fixtures for git-brat tests: a repository with `git brat init` done."""

from __future__ import annotations

import pytest

from helpers import brat


@pytest.fixture
def brepo(repo):
    """A git repository (one commit, branch main) after `git brat init`."""
    brat(repo, "init")
    return repo
