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
