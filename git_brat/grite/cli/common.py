"""What the `git grite` commands share: opening the repository, warning of skipped records."""

from __future__ import annotations

from git_brat.clikit import warn
from git_brat.grite.repo import Grite


def open_grite(require_init: bool = True) -> Grite:
    """The repository this command runs in (GriteError, with the fix, when it is not one)."""
    return Grite.open(require_init=require_init)


def report_problems(g: Grite) -> None:
    """Tell the user, once per command, about records replay had to skip."""
    for p in g.cache.problems:
        warn(f"skipped unreadable log record {p.sha}: {p.detail} (see `git grite doctor`)")
