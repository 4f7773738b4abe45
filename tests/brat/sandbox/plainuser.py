"""Run sandbox test files again as a plain user: CI runs as root, where a sandbox that holds
only because its agent lacks privilege would pass unnoticed, and a user's sandbox differs
(bwrap needs a user namespace, pasta joins the user's own).

`rerun_as_plain_user(*files)` runs the files in a pytest of their own, as `nobody` (setpriv:
no capability, no group), with a HOME and a pytest temp directory that user owns; it fails
with that run's output when a test there fails (or skips). It skips when this process is not
root (the ordinary run is then the plain user's) or setpriv is missing. `extra` adds variables
to that run (the rest of BRAT_* is dropped); `workers` runs it on that many xdist workers.

`shared_engines_dir()`: where the real engines are, when the plain user can run all seven.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]      # the checkout: its tests and bin/
PLAIN_USER = "nobody"


def _ids(user: str) -> tuple[int, int]:
    import pwd
    entry = pwd.getpwnam(user)
    return entry.pw_uid, entry.pw_gid


def _as_user(uid: int, gid: int) -> list[str]:
    return ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups",
            "--inh-caps=-all", "--bounding-set=-all"]


def _python(as_user: list[str], env: dict[str, str], where: Path) -> str:
    """A Python of this version the plain user can run, with this one's packages: this very
    interpreter, or (when it lives where only root reaches, e.g. under /root) python3 on PATH.
    This interpreter's site-packages go on PYTHONPATH either way (env is changed so): the
    checkout's `#!/usr/bin/env python3` launchers may find another python3 first."""
    import site
    probe = "import sys; assert sys.version_info[:2] == %r; import click, msgspec, pytest" % (
        tuple(sys.version_info[:2]),)
    packages = os.pathsep.join(site.getsitepackages())
    env["PYTHONPATH"] = packages
    for python in (sys.executable, shutil.which("python3", path="/usr/local/bin:/usr/bin")):
        # started by a shell the user runs: setpriv itself execs with root's search rights
        # still in effect, so a python under /root starts from it and from nothing else
        started = [*as_user, "/bin/sh", "-c", 'exec "$0" -c "$1"', python or "", probe]
        if python and subprocess.run(started, cwd=where, env=env,
                                     capture_output=True, timeout=60).returncode == 0:
            return python
    pytest.skip(f"{PLAIN_USER} can run no Python {sys.version_info[:2]} with this one's packages")


def _checkout_copy(base: Path, uid: int, gid: int) -> Path:
    """This checkout's code and tests, copied where the plain user reads them: CI's clone may
    sit where only root reaches (under /root)."""
    dest = base / "checkout"
    skip = shutil.ignore_patterns(".git", "__pycache__", "*.pyc", ".pytest_cache")
    for part in ("git_brat", "tests", "bin", "hooks"):
        shutil.copytree(ROOT / part, dest / part, ignore=skip, symlinks=True)
    for part in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / part, dest / part)
    for path in [dest, *dest.rglob("*")]:
        os.lchown(path, uid, gid)
    return dest


def _can_rerun() -> None:
    if os.geteuid() != 0:
        pytest.skip("not root: the ordinary run of these tests is already a plain user's")
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is not installed here")


# Read at import, as tests/engines/enginekit.py does (the suite's fixtures drop BRAT_* and HOME)
ENGINES_DIR = Path(os.environ.get("BRAT_ENGINES_DIR")
                   or Path.home() / ".cache" / "git-brat-engines")
ENGINES = ("claude", "codex", "opencode", "gemini", "cn", "copilot", "aider")


def shared_engines_dir() -> Path:
    """ENGINES_DIR, when the plain user can run each of the seven engines there (aider's
    venv's python included); skips naming what it cannot reach and the fix."""
    _can_rerun()
    uid, gid = _ids(PLAIN_USER)
    python = ENGINES_DIR / "aider" / "bin" / "python"
    probe = 'for b in "$@"; do [ -x "$b" ] || echo "$b"; done; "$0" -c "" 2>/dev/null || echo "$0"'
    proc = subprocess.run([*_as_user(uid, gid), "sh", "-c", probe, str(python),
                           *(str(ENGINES_DIR / "bin" / name) for name in ENGINES)],
                          cwd="/", capture_output=True, text=True, timeout=60)
    missing = proc.stdout.split() if proc.returncode == 0 else [proc.stderr.strip()]
    if missing:
        pytest.skip(f"{PLAIN_USER} cannot run the engines in {ENGINES_DIR} ({', '.join(missing)}):"
                    " install them where every user reads them, "
                    "BRAT_ENGINES_DIR=/opt/git-brat-engines scripts/install-engines, and run "
                    "the tests with that BRAT_ENGINES_DIR")
    return ENGINES_DIR


def rerun_as_plain_user(*files: str, extra: dict[str, str] | None = None, workers: int = 0,
                        timeout: float = 900, select: str = "") -> None:
    _can_rerun()
    uid, gid = _ids(PLAIN_USER)
    base = Path(tempfile.mkdtemp(prefix="brat-plain-"))
    try:
        os.chmod(base, 0o755)
        os.chown(base, uid, gid)
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("GIT_", "GRITE_", "BRAT_", "PYTEST_", "SSH_", "XDG_"))}
        env.update({"HOME": str(base), "USER": PLAIN_USER, "LOGNAME": PLAIN_USER,
                    "PYTHONDONTWRITEBYTECODE": "1", **(extra or {})})
        where = _checkout_copy(base, uid, gid)
        python = _python(_as_user(uid, gid), env, where)
        proc = subprocess.run(
            [*_as_user(uid, gid), python, "-m", "pytest", "-q", "-rs",
             "-p", "no:cacheprovider", "--basetemp", str(base / "pytest"),
             *(["-d", "--tx", f"{workers}*popen//python={python}"] if workers else []),
             *(["-k", select] if select else []), *files],
            cwd=where, env=env, capture_output=True, text=True, timeout=timeout)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    tail = (proc.stdout + proc.stderr)[-6000:]
    assert proc.returncode == 0, f"as {PLAIN_USER} (uid {uid}):\n{tail}"
    assert " passed" in proc.stdout and " skipped" not in proc.stdout, tail
