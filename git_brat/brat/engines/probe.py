"""Which engines are installed here, and at what version (asked once per installed file)."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading

import msgspec

from git_brat.brat.engines.invoke import Invocation, invocation
from git_brat.brat.engines.presets import METER_NAMES, PRESETS, Preset, meter


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
    sandbox: str = ""            # where its sessions run here: bwrap or none (witness.sandbox)
    instructions: str = ""       # the file in the work tree it loads instructions from
    skills: str = ""             # the folder in the work tree it finds skills in
    meter: str = ""              # how its spending is read (presets.METERS; "": not read)


# Generous: `engine list` asks every engine at once, and a node tool that relaunches itself
# (gemini) took over 15 s on a busy two-core machine. The answer is remembered, so a slow
# probe is paid once per installed file.
PROBE_TIMEOUT = 60.0


def repository_dirs(toplevel: str | None, common_dir: str) -> tuple[str, ...]:
    """The directories whose files are the repository's (never run by a probe): the work tree
    and the main checkout (or the git directory itself when bare)."""
    main = os.path.dirname(common_dir) if os.path.basename(common_dir) == ".git" else common_dir
    return tuple(d for d in (toplevel, main) if d)
PROBE_OUTPUT = 4096      # bytes of a probe's output read (the version is its first line)


def probe_path(p: Preset, repo: "str | tuple[str, ...]" = "") -> str | None:
    """The absolute path of a shipped preset's own binary on PATH when it may be asked its
    version; None otherwise.

    A version probe runs before anyone chose to run an engine (`engine list`, the witness's
    start), so it runs only what the user installed: never a command from .brat/config.toml
    (anyone who can push writes that file), never a binary inside the repository (a committed
    ./tools/claude, or a relative or in-repo directory on PATH)."""
    shipped = PRESETS.get(p.name)
    if not p.builtin or shipped is None or not p.version_args or p.binary != shipped.binary \
            or list(p.version_args) != list(shipped.version_args) or os.sep in p.binary:
        return None
    path = shutil.which(p.binary)
    if not path or not os.path.isabs(path):
        return None
    real = os.path.realpath(path)
    for top in (repo,) if isinstance(repo, str) else repo:
        top = os.path.realpath(top) if top else ""
        if top and (real == top or real.startswith(top.rstrip(os.sep) + os.sep)):
            return None
    return path


def version_of(p: Preset, path: str | None, timeout: float = PROBE_TIMEOUT,
               repo: "str | tuple[str, ...]" = "") -> str:
    """The first line `path --version` prints (a preset's version_args); "" if it says nothing
    or may not be asked (probe_path). Run in an empty temporary directory, never the user's
    checkout, with a timeout and its output capped. Remembered per binary file (its real path,
    size and mtime): node tools take seconds to start, and an installed file's version never
    changes."""
    if not path or path != probe_path(p, repo):
        return ""
    key = _version_key(path, p.version_args)
    known = _known_versions()
    if key and key in known:
        return known[key]
    import tempfile
    try:
        with tempfile.TemporaryDirectory(prefix="git-brat-probe-") as cwd, \
                tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            proc = subprocess.run([path, *p.version_args], stdin=subprocess.DEVNULL,
                                  stdout=out, stderr=err, cwd=cwd, timeout=timeout)
            # The version is what it prints; warnings go to stderr (codex warns there when it
            # cannot make its helper links), which counts only when stdout says nothing.
            texts = []
            for f in (out, err):
                f.seek(0)
                texts.append(f.read(PROBE_OUTPUT).decode("utf-8", "replace").strip())
    except (OSError, subprocess.SubprocessError):
        return ""
    text = texts[0] or texts[1]
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


def info(p: Preset, workdir: str = "<worktree>", with_version: bool = True,
         repo: "str | tuple[str, ...]" = "") -> EngineInfo:
    """What `engine list/show` show of an engine; its version only per probe_path (`repo`: the
    repository's top, whose files are never run)."""
    path = shutil.which(p.binary) if p.binary else None
    inv = invocation(p, "<prompt>", workdir, "<session-dir>", session_uuid="<uuid>") \
        if p.argv else Invocation([], dict(p.env), None, False)
    return EngineInfo(p.name, p.binary, path,
                      version_of(p, path, repo=repo) if with_version else "",
                      p.package, p.builtin, p.resumes, p.prompt, p.result, p.model, inv.argv,
                      dict(p.env), p.timeout, instructions=p.instructions, skills=p.skills,
                      meter=next((n for n in METER_NAMES if p.usage is not None
                                  and meter(n) == p.usage), ""))
