"""Exceptions that carry a message a user can act on, and the exit code the CLI returns."""

from __future__ import annotations

# Exit codes, documented in docs/reference.md and the man pages.
EXIT_OK = 0
EXIT_FAILURE = 1      # an operation failed (git error, I/O)
EXIT_USAGE = 2        # bad input: flags, values, empty title, ambiguous id
EXIT_NOT_FOUND = 3    # an id or name that does not exist
EXIT_NO_REPO = 4      # not in a git repository, or grite not initialised
EXIT_CONFLICT = 5     # contention: lease held by another, ref stayed locked, refused transition
EXIT_PROBLEMS = 6     # doctor found problems (and did not fix them all)


class GriteError(Exception):
    """An error with a one-line message for the user and an exit code."""

    exit_code = EXIT_FAILURE

    def __init__(self, message: str, exit_code: int | None = None):
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code

    @property
    def message(self) -> str:
        return str(self.args[0])


class UsageError(GriteError):
    exit_code = EXIT_USAGE


class NotFound(GriteError):
    exit_code = EXIT_NOT_FOUND


class NotARepository(GriteError):
    exit_code = EXIT_NO_REPO


class Conflict(GriteError):
    exit_code = EXIT_CONFLICT


class RefLocked(Conflict):
    """Another writer holds a ref's .lock file."""

    def __init__(self, ref: str, lock_path: str):
        super().__init__(f"{ref} is locked by another writer ({lock_path}); "
                         f"if no grite process is running, `git grite doctor --fix` clears it")
        self.ref, self.lock_path = ref, lock_path


class RemoteUnreachable(GriteError):
    """A remote could not be reached (network, path, daemon down, timeout)."""

    def __init__(self, remote: str, detail: str):
        super().__init__(f"remote {remote} unreachable: {detail}")
        self.remote, self.detail = remote, detail


class CorruptObject(GriteError):
    """A commit or blob in a log that cannot be read or decoded."""

    def __init__(self, sha: str, detail: str):
        super().__init__(f"corrupt record {sha}: {detail}")
        self.sha, self.detail = sha, detail


DEEPEN_HINT = "`git grite deepen` fetches the rest of the history"


class HistoryCut(GriteError):
    """Whole logs were needed, and this clone holds them only from a snapshot on."""
