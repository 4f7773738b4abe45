"""The refinery's target branch: a name git accepts, where work lands by default in a
repository, and why a name cannot be the target here."""

from __future__ import annotations


def valid_branch(name: str) -> bool:
    """A name git accepts for a branch (the rules of git check-ref-format --branch)."""
    return not (name.startswith(("-", "/")) or name.endswith(("/", ".lock", "."))
                or any(s in name for s in ("..", "@{", "//")) or name == "@" or not name
                or any(c.isspace() or c in "~^:?*[\\" or ord(c) < 32 for c in name))


def default_target(store) -> str:
    """Where work lands in this repository (see Store.default_branch_candidates), except that
    with both main and master present, the one checked out is taken (a stale main lying
    beside the master everyone works on is not the target)."""
    names = [b for b in store.default_branch_candidates() if valid_branch(b)]
    current = store.current_branch()
    remote_head = any(store.refs.read(f"refs/remotes/{r}/HEAD".encode())
                      for r in store.remotes())   # a clone: its remote's HEAD says
    if not remote_head and current in ("main", "master") and \
            store.refs.read(f"refs/heads/{current}".encode()):
        return current
    return names[0]


def target_branch_problem(store, branch: str) -> str | None:
    """Why branch cannot be the refinery's target here (None: it can): it exists neither as a
    local branch nor on any remote this clone knows of."""
    if store.refs.read(f"refs/heads/{branch}".encode()):
        return None
    for name in store.refs.under(b"refs/remotes/"):
        if name.decode().split("/", 3)[3:] == [branch]:
            return None
    if not store.refs.under(b"refs/heads/") and store.current_branch() == branch:
        return None   # a repository without a commit yet: its first one makes the branch
    have = sorted(n.decode().removeprefix("refs/heads/") for n in store.refs.under(b"refs/heads/")
                  if not n.startswith(b"refs/heads/brat/"))[:8]
    return (f"branch {branch!r} exists neither here nor on a remote"
            + (f" (branches here: {', '.join(have)})" if have else ""))
