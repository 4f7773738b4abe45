"""The one way to run the git binary: argv, environment presets, a Result, git's error line."""

from __future__ import annotations

import os
import subprocess
from typing import Literal

from git_brat.errors import GriteError

TIMED_OUT = 124      # the exit code of a git that was killed at its timeout (as timeout(1) says)
NOT_FOUND = 127      # the exit code of a git that could not be started (as a shell says)

# With any of these set, git works on the repository they name, wherever it is run: a command
# meant for another work tree (an agent's, the refinery's) must not inherit them.
PINNING = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_PREFIX",
           "GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_QUARANTINE_PATH",
           "GIT_CEILING_DIRECTORIES", "GIT_DISCOVERY_ACROSS_FILESYSTEM", "GIT_REFLOG_ACTION")
SKIP_HOOKS = "GRITE_SKIP_HOOKS"   # grite's hook shims do nothing while this is set
NO_HOOKS = ["-c", "core.hooksPath=/dev/null"]   # and no hook of the user's runs at all
# Settings that start a program, or make git trust a cache the tree's writer keeps: off for every
# git run in a work tree an agent wrote (the roles' trees too), and in every git that one starts
# (GIT_CONFIG_PARAMETERS carries `-c` into a nested repository's git, over its own config).
TREE_PINS = [
    *NO_HOOKS, "-c", "core.fsmonitor=false", "-c", "core.untrackedCache=false",
    "-c", "core.sshCommand=false", "-c", "submodule.recurse=false",
    "-c", "fetch.recurseSubmodules=false", "-c", "diff.ignoreSubmodules=all",
    "-c", "status.submoduleSummary=false", "-c", "protocol.allow=never",
]

Preset = Literal["repo", "checkout", "worktree", "transport"]


class Result:
    """A finished git: its exit code and output (bytes as git wrote them, text decoded).

    A plain class, not a dataclass: `dataclasses` costs every command 1.5 ms to import."""

    __slots__ = ("argv", "code", "stdout", "stderr")

    def __init__(self, argv: list[str], code: int, stdout: bytes, stderr: bytes):
        self.argv, self.code, self.stdout, self.stderr = argv, code, stdout, stderr

    def __repr__(self) -> str:
        return f"Result({self.argv!r}, code={self.code})"

    @property
    def ok(self) -> bool:
        return self.code == 0

    @property
    def out(self) -> str:
        return self.stdout.decode("utf-8", "replace")

    @property
    def err(self) -> str:
        return self.stderr.decode("utf-8", "replace")

    def complaint(self) -> str | None:
        """git's first `error:`/`fatal:` line, if it printed one (see complaint())."""
        return complaint(self.stderr)

    def error_line(self) -> str:
        """What went wrong, in git's words: its first `fatal:`/`error:` line (prefix dropped),
        else the last line it printed, else which git exited how."""
        line = self.complaint()
        if line:
            return line.split(":", 1)[1].strip()
        lines = [ln.strip() for ln in (self.err or self.out).splitlines() if ln.strip()]
        return lines[-1] if lines else f"git {subcommand(self.argv)} exited {self.code}"


def complaint(stderr: bytes | str) -> str | None:
    """The first `error:`/`fatal:` line git printed, if any.

    Some reads exit 0 having come up short (rev-list over a commit-graph skips a commit it
    cannot read, saying so only on stderr), so a walk is trusted only when git stayed quiet.
    """
    text = stderr.decode("utf-8", "replace") if isinstance(stderr, bytes) else stderr
    for ln in text.splitlines():
        if ln.startswith(("error: ", "fatal: ")):
            return ln.strip()
    return None


def subcommand(argv: list[str]) -> str:
    """The git command an argv runs (`fetch` of `git --git-dir d -c k=v fetch ...`)."""
    args = argv[1:] if argv[:1] == ["git"] else argv
    i = 0
    while i < len(args) and args[i].startswith("-"):
        i += 2 if args[i] in ("-c", "-C", "--git-dir", "--work-tree") else 1
    return args[i] if i < len(args) else "git"


def argv(args: list[str], git_dir: str | None = None, hooks: bool = True,
         tree: bool = False) -> list[str]:
    """The command line: git, the repository if named, hooks off unless wanted (tree: run in
    a work tree an agent wrote, TREE_PINS, hooks off), then args."""
    pins = TREE_PINS if tree else [] if hooks else NO_HOOKS
    return ["git", *(["--git-dir", git_dir] if git_dir else []), *pins, *args]


def environment(preset: Preset = "repo", extra: dict | None = None) -> dict[str, str]:
    """The environment git runs in, by what it runs for:

    - repo: this process's own (git finds the repository as the user's git would);
    - checkout: without the variables that pin git to one repository, so a command run inside
      another work tree (an agent's) finds that work tree; hooks run as usual;
    - worktree: a checkout's, and no grite hook, no prompt, no editor (the refinery's and
      deacon's trees, and the user's check run there: nothing may wait on a person);
    - transport: this process's own, never prompting, never re-entering grite's hooks.
    """
    env = dict(os.environ)
    if preset in ("checkout", "worktree"):
        for key in PINNING:
            env.pop(key, None)
    if preset == "worktree":
        env.update({SKIP_HOOKS: "1", "GIT_TERMINAL_PROMPT": "0", "GIT_EDITOR": "true",
                    "GIT_MERGE_AUTOEDIT": "no"})
    elif preset == "transport":
        env.update({SKIP_HOOKS: "1", "GIT_TERMINAL_PROMPT": "0"})
    env.update(extra or {})
    return env


def run(args: list[str], *, cwd: str | None = None, env: dict | None = None,
        input: bytes | None = None, timeout: float | None = None, check: bool = False) -> Result:
    """Run `git *args`. A timeout or a git that cannot start is a failed Result (124, 127),
    never a raise or a hang; check: raise GriteError with git's error line when it fails."""
    full = args if args[:1] == ["git"] else ["git", *args]
    try:
        proc = subprocess.run(full, cwd=cwd, env=env, input=input,
                              stdin=subprocess.DEVNULL if input is None else None,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
        res = Result(full, proc.returncode, proc.stdout, proc.stderr)
    except subprocess.TimeoutExpired:
        res = Result(full, TIMED_OUT, b"", f"fatal: timed out after {timeout:.0f}s".encode())
    except OSError as exc:   # no git on PATH, or cwd gone
        res = Result(full, NOT_FOUND, b"", f"fatal: cannot run git: {exc}".encode())
    if check and not res.ok:
        raise GriteError(f"git {subcommand(full)} failed: {res.error_line()}")
    return res
