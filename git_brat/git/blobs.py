"""A commit's files and their blobs, read from git's object store in two processes.

For readers of a whole tree (grite's code context index): `ls-tree -r -l` lists every file with
its size, so a blob too large to read is refused before one byte of it is read, and a symlink or
a submodule is named by its mode and never followed. `cat-file --batch` then streams the blobs
chosen, bounded in count and in bytes.
"""

from __future__ import annotations

import subprocess
from typing import Iterable, Iterator, NamedTuple

from git_brat.errors import GriteError
from git_brat.git import run as git

TIMEOUT = 120.0   # seconds one listing or one stream of blobs may take
REGULAR = ("100644", "100755")


class TreeFile(NamedTuple):
    mode: str     # 100644, 100755, 120000 (a symlink), 160000 (a submodule)
    blob: str     # the blob's id ("" for a submodule's commit, never read)
    size: int     # bytes (-1: not a blob)
    path: str     # from the tree's top; not UTF-8 bytes are kept as surrogate escapes


def tree_id(git_dir: str, rev: str) -> str | None:
    """The tree a revision names (None: no such revision, or an unborn HEAD)."""
    res = git.run(["--git-dir", git_dir, "rev-parse", "--verify", "--quiet",
                   "--end-of-options", f"{rev}^{{tree}}"], timeout=TIMEOUT)
    return res.out.strip() or None if res.ok else None


def list_tree(git_dir: str, tree: str, limit: int) -> tuple[list[TreeFile], bool]:
    """Every file of a tree, recursively, with sizes; at most `limit` (and whether more were).
    Streamed: a tree of millions of entries is read only as far as the limit, then git is
    stopped."""
    out: list[TreeFile] = []
    proc = subprocess.Popen(git.argv(["ls-tree", "-r", "-l", "-z", "--full-tree",
                                      "--end-of-options", tree], git_dir=git_dir),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    more, rest = False, b""
    try:
        while not more:
            chunk = proc.stdout.read1(1 << 16)
            if not chunk:
                break
            *records, rest = (rest + chunk).split(b"\0")
            for record in records:
                if len(out) >= limit:
                    more = True
                    break
                out.append(_tree_file(record))
    finally:
        if more:
            proc.kill()
        proc.stdout.close()
        err = proc.stderr.read(1 << 16)
        proc.stderr.close()
        code = proc.wait(timeout=TIMEOUT)
    if not more and code != 0:
        raise GriteError(f"cannot list tree {tree[:12]}: "
                         f"{git.Result([], code, b'', err).error_line()}")
    return out, more


def _tree_file(record: bytes) -> TreeFile:
    meta, _tab, path = record.partition(b"\t")
    mode, kind, sha, size = meta.split()
    return TreeFile(mode.decode(), sha.decode() if kind == b"blob" else "",
                    int(size) if size != b"-" else -1, path.decode("utf-8", "surrogateescape"))


def read_blobs(git_dir: str, blobs: Iterable[str], max_size: int) -> Iterator[tuple[str, bytes]]:
    """(id, content) of each blob named, in order; one larger than max_size, or not a blob,
    is left out (its size is re-checked here: the listing that chose it is not trusted)."""
    names = list(dict.fromkeys(blobs))
    if not names:
        return
    res = git.run(["--git-dir", git_dir, "cat-file", "--batch"],
                  input=("\n".join(names) + "\n").encode(), timeout=TIMEOUT)
    if not res.ok:
        raise GriteError(f"cannot read blobs: {res.error_line()}")
    out, pos = res.stdout, 0
    for _name in names:
        end = out.index(b"\n", pos)
        header = out[pos:end].split()
        pos = end + 1
        if len(header) != 3:            # "<name> missing"
            continue
        sha, kind, size = header[0].decode(), header[1], int(header[2])
        body = out[pos:pos + size]
        pos += size + 1
        if kind == b"blob" and size <= max_size:
            yield sha, body
