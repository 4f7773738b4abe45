"""Transport: fetch, push and ls-remote through the repository's remotes, bounded in time."""

from __future__ import annotations

import os
from typing import Callable

from git_brat.errors import RemoteUnreachable
from git_brat.git import run as git


class Remote:
    """The repository's traffic with remotes. git runs from `where()` (the top of the work
    tree, else the git dir) as git itself would, so relative remote URLs resolve there;
    rev(name) says which commit a name points at."""

    def __init__(self, git_dir: str, common_dir: str, where: Callable[[], str],
                 rev: Callable[[str], str | None]):
        self.git_dir = git_dir
        self.common_dir = common_dir
        self._where = where
        self._rev = rev

    def _run(self, args: list[str], env: dict, timeout: float | None,
             hooks: bool = True) -> git.Result:
        return git.run(git.argv(args, self.git_dir, hooks), env=env, timeout=timeout,
                       cwd=self._where())

    def fetch(self, remote: str, refspecs: list[str], env: dict, timeout: float | None = None,
              options: list[str] = (), keep_pack: bool = False) -> git.Result:
        """`git fetch` of exactly these refspecs (no tags, FETCH_HEAD left alone); never raises.

        options: more fetch options (--depth, --shallow-exclude); keep_pack: keep what arrives
        as the pack it came in (git would unpack a few objects loose, deflating each again:
        seconds for a snapshot's state blob of a few hundred MB).
        """
        config = ["-c", "fetch.unpackLimit=1"] if keep_pack else []
        return self._run([*config, "fetch", "--no-tags", "--no-write-fetch-head", *options,
                          "--end-of-options", remote, *refspecs], env, timeout)

    def push(self, dest: str, refspecs: list[str], env: dict,
             timeout: float | None = None) -> git.Result:
        """`git push` of exactly these refspecs, hooks skipped; never raises."""
        return self._run(["push", "--no-verify", "--porcelain", "--end-of-options", dest,
                          *refspecs], env, timeout)

    def ls_remote(self, remote: str, patterns: list[str], timeout: float) -> dict[bytes, bytes]:
        """Refs on the remote matching patterns -> sha; raise RemoteUnreachable."""
        res = self._lease_traffic(["ls-remote", "--end-of-options", remote, *patterns], remote,
                                  timeout)
        out = {}
        for line in res.stdout.splitlines():
            sha, _, name = line.partition(b"\t")
            out[name] = sha
        return out

    def fetch_objects(self, remote: str, refs: list[str], timeout: float) -> None:
        """Bring the objects of these remote refs in, changing no local ref; raise
        RemoteUnreachable."""
        self._lease_traffic(["fetch", "--no-tags", "--no-write-fetch-head",
                             "--no-recurse-submodules", "--no-auto-maintenance", "--quiet",
                             "--end-of-options", remote, *refs], remote, timeout)

    def push_lease(self, remote: str, new: bytes, ref: bytes, expected: bytes | None,
                   timeout: float) -> tuple[bool, str]:
        """Push new to ref only if the remote ref is `expected` (None: absent): (won, reason).

        The remote's receive-pack checks the old value under its ref lock, so of N racing
        pushes with the same expectation exactly one succeeds. Raises RemoteUnreachable.
        """
        lease = f"--force-with-lease={ref.decode()}:{(expected or b'').decode()}"
        res = self._lease_traffic(["push", "--porcelain", "--no-verify", "--no-follow-tags",
                                   "--no-recurse-submodules", lease, "--end-of-options", remote,
                                   f"{new.decode()}:{ref.decode()}"], remote, timeout,
                                  check=False)
        for line in res.out.splitlines():
            flag, _, rest = line.partition("\t")
            if rest.split("\t")[0].endswith(":" + ref.decode()):
                reason = rest.rpartition("(")[2].rstrip(")") if "(" in rest else rest
                return flag in (" ", "*", "+", "="), reason.strip()
        raise RemoteUnreachable(remote, res.error_line())

    def delete_leased(self, remote: str, expected: dict[bytes, bytes],
                      timeout: float) -> set[bytes]:
        """Delete these refs on the remote, each only if it is still at its expected sha, in one
        push: the refs deleted. Raises RemoteUnreachable."""
        if not expected:
            return set()
        leases = [f"--force-with-lease={ref.decode()}:{sha.decode()}"
                  for ref, sha in sorted(expected.items())]
        res = self._lease_traffic(["push", "--porcelain", "--no-verify", "--no-follow-tags",
                                   "--no-recurse-submodules", *leases, "--end-of-options", remote,
                                   *(f":{ref.decode()}" for ref in sorted(expected))], remote,
                                  timeout, check=False)
        gone = set()
        for line in res.out.splitlines():
            flag, _, rest = line.partition("\t")
            name = rest.split("\t")[0].rpartition(":")[2].encode()
            if flag == "-" and name in expected:
                gone.add(name)
        if not gone and not res.ok and "\t" not in res.out:
            raise RemoteUnreachable(remote, res.error_line())
        return gone

    def _lease_traffic(self, args: list[str], remote: str, timeout: float,
                       check: bool = True) -> git.Result:
        # A lease push is not a sync: its tracking refs need no import, so no grite hooks.
        res = self._run(args, git.environment("transport"), timeout)
        if check and not res.ok:
            raise RemoteUnreachable(remote, res.error_line())
        return res

    def push_branch(self, remote: str, new: str, branch: str, timeout: float) -> tuple[bool, str]:
        """Push new to the remote's branch (fast-forward only): (ok, git's reason when not)."""
        res = self._run(["push", "--porcelain", "--no-verify", "--end-of-options", remote,
                         f"{new}:refs/heads/{branch}"], git.environment("worktree"), timeout,
                        hooks=False)
        return res.ok, "" if res.ok else res.error_line()

    def push_task_branch(self, remote: str, new: str, branch: str,
                         timeout: float) -> tuple[bool, str]:
        """push_branch for a branch the remote's own hooks must see arrive (a hub merges task
        branches from its post-receive): none of this side's hook suppression goes along,
        which a local (file) transport would pass on to the remote's receive-pack."""
        env = git.environment("checkout", {"GIT_TERMINAL_PROMPT": "0"})
        res = self._run(["push", "--porcelain", "--no-verify", "--end-of-options", remote,
                         f"{new}:refs/heads/{branch}"], env, timeout)
        return res.ok, "" if res.ok else res.error_line()

    def fetch_branch(self, remote: str, branch: str, timeout: float) -> str | None:
        """Fetch the remote's branch into refs/remotes/<remote>/<branch>; its tip, or None."""
        res = self._run(["fetch", "-q", "--no-tags", "--no-write-fetch-head", "--end-of-options",
                         remote, f"+refs/heads/{branch}:refs/remotes/{remote}/{branch}"],
                        git.environment("worktree"), timeout, hooks=False)
        return self._rev(f"refs/remotes/{remote}/{branch}") if res.ok else None

    def shallow_commits(self) -> list[str]:
        """Commits held without their parents (`shallow`: where a shallow fetch cut history)."""
        try:
            with open(os.path.join(self.common_dir, "shallow"), encoding="ascii") as f:
                return f.read().split()
        except FileNotFoundError:
            return []
