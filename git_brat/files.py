"""Small file helpers: atomic replace, so a crash never leaves a half-written file."""

from __future__ import annotations

import os
import tempfile


def ensure_dir(path: str) -> None:
    """os.makedirs(exist_ok=True), but calm when another process deletes the directory at the
    same moment (makedirs then sees EEXIST, looks again, and finds nothing)."""
    for _attempt in range(5):   # bounded: each round either creates it or sees it
        try:
            os.makedirs(path, exist_ok=True)
            return
        except FileExistsError:
            if os.path.isdir(path):
                return
    os.makedirs(path, exist_ok=True)


def atomic_write(path: str, data: bytes) -> None:
    """Write data to path via a temp file in the same directory and os.replace."""
    directory = os.path.dirname(path) or "."
    ensure_dir(directory)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix="~")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


class LockTimeout(OSError):
    """Another process held a lock file for the whole timeout."""


class FileLock:
    """An exclusive lock on a file, polled (a wedged holder gives an error, not a hang).

    flock on POSIX; portalocker elsewhere. Not portalocker everywhere: importing it costs
    ~27 ms (it reads its package metadata), more than the rest of a write.
    """

    def __init__(self, path: str, timeout: float, interval: float = 0.01):
        self.path, self.timeout, self.interval = path, timeout, interval
        self._fd: int | None = None
        self._other = None

    def acquire(self) -> "FileLock":
        try:
            import fcntl
        except ImportError:   # not POSIX
            import portalocker
            self._other = portalocker.Lock(self.path, mode="a", timeout=self.timeout,
                                           check_interval=self.interval,
                                           flags=portalocker.LOCK_EX | portalocker.LOCK_NB)
            self._other.acquire()
            return self
        import time
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                self._fd = fd
                return self
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    raise LockTimeout(f"{self.path} stayed locked for {self.timeout:g} s by another "
                                      f"process; if none is running, delete the file") from None
                time.sleep(self.interval)
            except BaseException:
                os.close(fd)
                raise

    def release(self) -> None:
        if self._other is not None:
            self._other.release()
            self._other = None
        elif self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)   # closing the only descriptor drops the flock

    def __enter__(self) -> "FileLock":
        return self.acquire()

    def __exit__(self, *exc) -> bool:
        self.release()
        return False
