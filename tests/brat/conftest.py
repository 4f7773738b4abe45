"""Fixtures for git-brat tests: a repository with `git brat init` done."""

from __future__ import annotations

import pytest

from helpers import brat
from witnesskit import make_bench


@pytest.fixture
def brepo(repo):
    """A git repository (one commit, branch main) after `git brat init`."""
    brat(repo, "init")
    return repo


@pytest.fixture
def bench(repo, tmp_path):
    """A repository whose witness runs the scripted fake agent (witnesskit.Bench)."""
    return make_bench(repo, tmp_path)
