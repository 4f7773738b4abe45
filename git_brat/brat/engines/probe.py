"""Which engines are installed here, and at what version (asked once per installed file)."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading

import msgspec

from git_brat.brat.engines.invoke import Invocation, invocation
from git_brat.brat.engines.presets import Preset



class EngineInfo(msgspec.Struct):
    name: str
    binary: str
    path: str | None             # where it is on PATH (None: not installed)
    version: str
    package: str
    builtin: bool
    resumes: bool
    prompt: str
    result: str
    model: str
    argv: list[str]              # what a session would run (prompt shown as <prompt>)
    env: dict[str, str]
    timeout: float | None


def version_of(p: Preset, path: str | None, timeout: float = 60.0) -> str:
    """The first line `path --version` prints (a preset's version_args); "" if it says nothing.
    Remembered per binary file (its real path, size and mtime): node tools take seconds to
    start, and an installed file's version never changes."""
    if not path or not p.version_args:
        return ""
    key = _version_key(path, p.version_args)
    known = _known_versions()
    if key and key in known:
        return known[key]
    try:
        proc = subprocess.run([path, *p.version_args], stdin=subprocess.DEVNULL,
                              capture_output=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return ""
    text = (proc.stdout or proc.stderr).decode("utf-8", "replace").strip()
    version = text.splitlines()[0][:80] if text else ""
    if key and version and proc.returncode == 0:
        _remember_version(key, version)
    return version


_versions_lock = threading.Lock()


def _version_key(path: str, args: list[str]) -> str:
    try:
        real = os.path.realpath(path)
        st = os.stat(real)
    except OSError:
        return ""
    return "\0".join([real, str(st.st_size), str(st.st_mtime_ns), *args])


def _versions_file() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "git-brat", "engine-versions.json")


def _known_versions() -> dict[str, str]:
    try:
        with open(_versions_file(), "rb") as f:
            return msgspec.json.decode(f.read(), type=dict[str, str])
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return {}


def _remember_version(key: str, version: str) -> None:
    """Best effort (a read-only HOME just probes each time); probes run in threads at once,
    so each write is a whole new file renamed into place."""
    import tempfile
    with _versions_lock:
        path = _versions_file()
        known = {k: v for k, v in _known_versions().items() if os.path.exists(k.split("\0")[0])}
        known[key] = version
        tmp = ""
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".versions-")
            with os.fdopen(fd, "wb") as f:
                f.write(msgspec.json.encode(known))
            os.replace(tmp, path)
        except OSError:
            if tmp and os.path.exists(tmp):
                os.unlink(tmp)


def info(p: Preset, workdir: str = "<worktree>", with_version: bool = True) -> EngineInfo:
    path = shutil.which(p.binary) if p.binary else None
    inv = invocation(p, "<prompt>", workdir, "<session-dir>", session_uuid="<uuid>") \
        if p.argv else Invocation([], dict(p.env), None, False)
    return EngineInfo(p.name, p.binary, path, version_of(p, path) if with_version else "",
                      p.package, p.builtin, p.resumes, p.prompt, p.result, p.model, inv.argv,
                      dict(p.env), p.timeout)
