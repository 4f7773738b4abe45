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


def private_dir(path: str) -> str:
    """path as a directory only its owner can enter (0700), made if missing: it holds full
    engine and check output, prompts and logs, which may carry the user's secrets."""
    ensure_dir(path)
    try:
        if os.stat(path).st_mode & 0o077:
            os.chmod(path, 0o700)
    except OSError:   # not ours to change (a shared directory): its files are 0600 still
        pass
    return path


def open_private(path: str, mode: str = "ab"):
    """open(path, mode) for writing a file only its owner reads (0600), made if missing (an
    older file of ours is narrowed to 0600 too)."""
    flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
    flags |= os.O_APPEND if mode.startswith("a") else os.O_TRUNC
    fd = os.open(path, flags, 0o600)
    try:
        os.fchmod(fd, 0o600)
    except OSError:
        pass
    return os.fdopen(fd, mode)


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


def read_inside(top: str, rel: str, limit: int) -> tuple[bytes, bool] | None:
    """The first `limit` bytes of the regular file `rel` under the directory `top`, and whether
    there was more; None when it is missing or not a regular file inside `top`.

    Files in a work tree come from whoever committed them: a symlink there may point at the
    user's secrets (~/.aws/credentials, /proc/self/environ) or at a FIFO that blocks a read.
    A symlink is followed only when it lands inside `top`; the resolved path is then opened one
    component at a time without following links, so a link swapped in meanwhile is refused too.
    """
    try:
        root = os.path.realpath(top)
        real = os.path.realpath(os.path.join(root, rel))
    except (OSError, ValueError):
        return None
    inside = os.path.relpath(real, root)
    if inside == os.curdir or inside == os.pardir or inside.startswith(os.pardir + os.sep) \
            or os.path.isabs(inside):
        return None
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    fds: list[int] = []
    try:
        fds.append(os.open(root, flags | getattr(os, "O_DIRECTORY", 0)))
        parts = inside.split(os.sep)
        for part in parts[:-1]:
            fds.append(os.open(part, flags | getattr(os, "O_DIRECTORY", 0), dir_fd=fds[-1]))
        # O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused just below).
        fd = os.open(parts[-1], flags | getattr(os, "O_NONBLOCK", 0), dir_fd=fds[-1])
        fds.append(fd)
        import stat
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, limit + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        data = b"".join(chunks)
        return data[:limit], len(data) > limit
    except (OSError, ValueError, NotImplementedError):
        return None
    finally:
        for fd in fds:
            os.close(fd)
