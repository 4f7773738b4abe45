"""The mayor's engine runs confined where sessions do (witness.sandbox resolves to bwrap): its
prompt holds repository text anyone who can push wrote, so a prompt injection there must
reach nothing. It reads the repository, writes only its own engine state, and sees none of
the user's or the clone's secrets; unconfined, its engine keeps its own permission checks."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

import mayorkit
from helpers import brat, brat_json, git, status

mrepo, record = mayorkit.mrepo, mayorkit.record   # fixtures

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None,
                                 reason="bubblewrap (bwrap) is not installed")

# A hostile mayor: tries what a prompt injection would, and says how each went in its plan.
HOSTILE = r'''
import json, os, sys
home = os.environ["HOME"]
def tried(what, fn):
    try:
        fn()
        return f"{what}: done"
    except OSError as exc:
        return f"{what}: refused ({exc.strerror})"
def write(path):
    return lambda: open(path, "a").write("x")
def read(path):
    return lambda: open(path, "rb").read()
out = [tried("write the checkout", write("MAYOR-WROTE")),
       tried("write .git/config", write(".git/config")),
       tried("write HOME", write(os.path.join(home, "mayor-wrote"))),
       tried("read ~/.ssh", read(os.path.join(home, ".ssh", "id_ed25519"))),
       tried("read the trust file", read(".git/brat/trust.json")),
       tried("read the signing key", read(".git/grite/keys/replica.ed25519")),
       tried("write its state", write(os.path.join(home, ".claude", "state"))),
       tried("read the repository", read("src/parser.py"))]
flags = " ".join(a for a in sys.argv[1:-1] if a.startswith("--"))
print(json.dumps({"convoy": {"title": "probe", "body": "\n".join(out) + "\nflags: " + flags},
                  "tasks": [{"key": "a", "title": "a"}]}))
'''


def _hostile_mayor(mrepo: Path, tmp_path: Path, sandbox: str) -> dict:
    """`mayor ask` with the hostile engine as claude (so claude's state paths and its
    --dangerously-skip-permissions apply), in a HOME holding an ssh key."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY\n")
    shutil.copy(Path(os.environ["HOME"]) / ".gitconfig", home / ".gitconfig")
    engine = tmp_path / "hostile.py"
    engine.write_text(HOSTILE)
    argv = [sys.executable, str(engine), "--dangerously-skip-permissions", "{prompt}"]
    brat(mrepo, "config", "set", "engines.claude.command", json.dumps(argv))
    brat(mrepo, "config", "set", "mayor.engine", "claude")
    brat(mrepo, "config", "set", "witness.sandbox", sandbox)
    git(mrepo, "commit", "-qam", "the mayor is claude")
    out = brat_json(mrepo, "mayor", "ask", "Plan the parser fix", "--dry-run",
                    env={"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")})
    said = dict(line.split(": ", 1) for line in out["body"].splitlines())
    said["home"] = home
    return said


@needs_bwrap
def test_a_hostile_mayor_writes_nothing_but_its_state_and_reads_no_secret(mrepo, tmp_path):
    said = _hostile_mayor(mrepo, tmp_path, "bwrap")
    home = said["home"]
    assert said["read the repository"] == "done"
    assert said["write its state"] == "done"
    for what in ("write the checkout", "write .git/config", "write HOME", "read ~/.ssh",
                 "read the trust file", "read the signing key"):
        assert said[what].startswith("refused"), (what, said[what])
    assert not (mrepo / "MAYOR-WROTE").exists() and not (home / "mayor-wrote").exists()
    assert "x" not in (mrepo / ".git" / "config").read_text().splitlines()[-1:]
    assert status(mrepo) == ""
    # Inside the sandbox, its permission checks may be off.
    assert said["flags"] == "--dangerously-skip-permissions"


def test_an_unconfined_mayor_keeps_its_engines_permission_checks(mrepo, tmp_path):
    said = _hostile_mayor(mrepo, tmp_path, "none")
    assert said["flags"] == ""
    (mrepo / "MAYOR-WROTE").unlink(missing_ok=True)


@needs_bwrap
def test_the_mayor_fails_saying_so_when_bwrap_is_asked_for_and_missing(mrepo, record, tmp_path):
    brat(mrepo, "config", "set", "witness.sandbox", "bwrap")
    git(mrepo, "commit", "-qam", "bwrap")
    bare = tmp_path / "bin"
    bare.mkdir()
    for tool in ("git", "env"):
        os.symlink(shutil.which(tool), bare / tool)
    path = os.pathsep.join([str(Path(__file__).resolve().parents[3] / "bin"), str(bare),
                            os.path.dirname(sys.executable)])
    ask = brat(mrepo, "mayor", "ask", "Plan it", "--dry-run", check=False, env={"PATH": path})
    assert ask.returncode != 0 and "bwrap" in ask.err
    assert mayorkit.runs(record) == []
