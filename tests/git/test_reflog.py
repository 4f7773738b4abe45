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


def test_writers_making_the_same_reflog_directory_at_once_all_move_their_refs(repo):
    """The first leases of a clone: refs under one new directory, each written with a reflog
    line by its own thread at the same moment (the witness's workers claiming tasks). dulwich
    makes a reflog's directories by look-then-mkdir; a writer losing that race used to see
    FileExistsError, its ref update aborted (a granted lease never mirrored, its task never run)."""
    import threading

    from git_brat.git.store import Store
    sha = git(repo, "rev-parse", "HEAD").encode()
    threads, rounds, errors = 8, 100, []
    for r in range(rounds):
        barrier = threading.Barrier(threads)
        # Every level is new in each round, and each level is a chance for the race.
        names = [f"refs/grite/locks/r{r}/a/b/c/d/t{i}".encode() for i in range(threads)]

        def write(name: bytes) -> None:
            store = Store.discover(str(repo))   # one per thread, as the witness has
            barrier.wait(30)
            try:
                assert store.refs.cas(name, None, sha, b"grite: lock.acquire")
            except Exception as exc:   # noqa: BLE001 - collected, asserted below
                errors.append(f"{name.decode()}: {type(exc).__name__}: {exc}")
        workers = [threading.Thread(target=write, args=(n,)) for n in names]
        for w in workers:
            w.start()
        for w in workers:
            w.join(60)
    assert errors == []
    out = git(repo, "for-each-ref", "--format=%(refname)", "refs/grite/locks/")
    assert len(out.split()) == threads * rounds
    for r in (0, rounds - 1):
        assert (repo / ".git" / "logs" / f"refs/grite/locks/r{r}/a/b/c/d/t0").read_text().count(
            "grite: lock.acquire") == 1
