"""Helpers the grite tests share: random histories, a read-only repository, hand-made snapshots."""

from __future__ import annotations

import os

import pytest
from hypothesis import strategies as st

from git_brat.git.store import Store
from git_brat.grite.cache import snapshot
from git_brat.grite.cache.projection import CACHE_VERSION, in_memory
from git_brat.grite.log.identity import load
from git_brat.grite.log.refs import grite_dir, log_tips
from git_brat.grite.model import events as ev
from helpers import git, make_repo, run


ENTITIES = ["e1" * 16, "e2" * 16, "e3" * 16]


VALUES = ["0a" * 16, "0b" * 16]   # set values: labels, or the entity ids a dependency names


ACTORS = ["a1" * 8, "b0" * 8, "ca" * 8]


@st.composite
def histories(draw):
    """A causally plausible history: removes observe tags of adds that came before them."""
    n = draw(st.integers(min_value=1, max_value=40))
    events: list[ev.Event] = []
    adds: dict[tuple[str, str, str], list[str]] = {}
    for i in range(n):
        ent = draw(st.sampled_from(ENTITIES))
        actor = draw(st.sampled_from(ACTORS))
        lamport = draw(st.integers(min_value=1, max_value=12))
        kind = draw(st.sampled_from(["create", "set", "add", "remove", "comment", "lease", "fenced"]))
        fence = None
        if kind == "create":
            op = ev.Create("issue", {"title": draw(st.sampled_from(["a", "b", "c"])), "state": "open"})
        elif kind == "set":
            op = ev.SetFields({draw(st.sampled_from(["title", "state"])): draw(st.sampled_from(["x", "y", "closed"]))})
        elif kind == "add":
            op = ev.AddTo(draw(st.sampled_from(["labels", "dep:depends_on"])), draw(st.sampled_from(VALUES)))
        elif kind == "remove":
            name, value = draw(st.sampled_from(["labels", "dep:depends_on"])), draw(st.sampled_from(VALUES))
            seen = adds.get((ent, name, value), [])
            observed = draw(st.lists(st.sampled_from(seen), unique=True)) if seen else []
            op = ev.RemoveFrom(name, value, sorted(observed))
        elif kind == "comment":
            op = ev.Comment(f"c{i}")
        elif kind == "lease":
            op = ev.LeaseToken("task:1", draw(st.integers(min_value=1, max_value=4)), actor)
        else:
            op = ev.SetFields({"status": f"s{i}"})
            fence = ev.Fence("task:1", draw(st.integers(min_value=1, max_value=4)))
        e = ev.make_event(ent, actor, lamport, 1000 + i, op, fence)
        if isinstance(op, ev.AddTo):
            adds.setdefault((ent, op.name, op.value), []).append(e.id)
        events.append(e)
    return events


def read_only(repo, *argv, check=True):
    """Run argv in repo with the whole repository mounted read-only (a private mount namespace)."""
    import shutil as _sh
    if os.geteuid() != 0 or not _sh.which("unshare"):
        pytest.skip("a read-only mount needs root and unshare")
    script = ('mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && cd "$1" && shift && '
              'exec "$@"')
    probe = run(["unshare", "-m", "sh", "-c", "mount --bind / /mnt 2>/dev/null; echo ok"], repo,
                check=False)
    if probe.returncode != 0:
        pytest.skip(f"cannot make a mount namespace here: {probe.err.strip()}")
    return run(["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", str(repo),
                *argv], repo, check=check)


def write_snapshot(repo, state, version=CACHE_VERSION):
    store = Store.discover(str(repo))
    ident = load(grite_dir(store))
    tips = list(log_tips(store).values())
    return snapshot.write_state(store, ident.replica.id, ident.git_author, in_memory(state), tips,
                                version)


def recommit(repo, snap, entries: dict[str, bytes], ref: str | None = None) -> str:
    """snap's commit made again with these tree entries in place of its own (what a peer could
    publish), on its ref (or `ref`)."""
    tree = {n: git(repo, "rev-parse", f"{snap.commit}:{n}")
            for n in git(repo, "ls-tree", "--name-only", snap.commit).split()}
    if any(n.startswith("state") for n in entries):   # the state replaced, in whatever form
        tree = {n: sha for n, sha in tree.items() if not n.startswith("state")}
    tree.update({n: run_git_blob(repo, d) for n, d in entries.items()})
    made = git(repo, "mktree", input="".join(f"100644 blob {s}\t{n}\n" for n, s in tree.items()))
    parents = [a for c in snap.meta.covers for a in ("-p", c)]
    commit = git(repo, "commit-tree", made, *parents, "-m", "re-made")
    git(repo, "update-ref", ref or snap.ref, commit)
    return commit


def run_git_blob(repo, data: bytes) -> str:
    return run(["git", "hash-object", "-w", "--stdin"], repo, input=data).out.strip()


def forge_log(repo, replica: str, payload: bytes | list[ev.Event], lamport: int = 0) -> str:
    """What any pusher can do with plain git: a log commit holding `payload` (raw bytes, or
    these events as a batch) under refs/grite/replicas/<replica>, as a fetch would leave it."""
    if not isinstance(payload, bytes):
        top = lamport or max((e.lamport for e in payload), default=0)
        payload = ev.encode_batch(ev.Batch(ev.FORMAT_VERSION, replica, top, payload))
    blob = git(repo, "hash-object", "-w", "--stdin", input=payload)
    tree = git(repo, "mktree", input=f"100644 blob {blob}\tevents\n")
    commit = git(repo, "commit-tree", tree, "-m", "grite: forged")
    git(repo, "update-ref", f"refs/grite/replicas/{replica}", commit)
    return commit


def push_spam_logs(hub, tmp_path, count: int) -> None:
    """What a pusher can do: count new logs on the hub, each one issue of its own replica's
    and actor's (a batch naming another replica's actor is not believed: another attack)."""
    pusher = make_repo(tmp_path / "pusher")
    for i in range(count):
        e = ev.make_event(f"{i:032x}", f"{i:016x}", 1, 0, ev.Create("issue", {"title": f"spam {i}",
                                                                       "state": "open"}))
        forge_log(pusher, f"{i:016x}", [e])
    git(pusher, "push", "-q", str(hub), "refs/grite/replicas/*:refs/grite/replicas/*")


def pusher_append(repo, drafts, summary: str = "grite: task.update") -> None:
    """What a pusher's own tool writes: the library's writer without its refusals (signed, as
    itself). Replay, not the writer, is what must stand against it."""
    from git_brat.grite.log import wal
    from git_brat.grite.repo import Grite
    saved = wal._refuse_out_of_bounds
    wal._refuse_out_of_bounds = lambda events: None
    try:
        Grite.open(str(repo)).append(drafts, summary)
    finally:
        wal._refuse_out_of_bounds = saved
