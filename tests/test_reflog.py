"""The reflog of grite's refs names who moved them, as git's own reflog would."""

from __future__ import annotations

from helpers import git, grite


def _last_reflog_identity(repo, ref="refs/grite/wal") -> str:
    line = (repo / ".git" / "logs" / ref).read_text().splitlines()[-1]
    return line.split(" ", 2)[2].rsplit(">", 1)[0] + ">"


def test_the_reflog_names_the_configured_user(grepo):
    git(grepo, "config", "user.name", "Ada Lovelace")
    git(grepo, "config", "user.email", "ada@example.com")
    grite(grepo, "issue", "create", "One", env={"GIT_COMMITTER_NAME": "", "GIT_COMMITTER_EMAIL": ""})
    assert _last_reflog_identity(grepo) == "Ada Lovelace <ada@example.com>"


def test_the_committer_in_the_environment_wins_as_in_git(grepo):
    git(grepo, "config", "user.name", "Ada Lovelace")
    git(grepo, "config", "user.email", "ada@example.com")
    grite(grepo, "issue", "create", "One",
          env={"GIT_COMMITTER_NAME": "CI Bot", "GIT_COMMITTER_EMAIL": "ci@example.com"})
    assert _last_reflog_identity(grepo) == "CI Bot <ci@example.com>"
