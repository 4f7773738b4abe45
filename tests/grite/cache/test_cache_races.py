"""Readers and writers sharing one cache: no reader ever misses what was acknowledged before it read."""

from __future__ import annotations

import subprocess
import sys

import msgspec

from helpers import ROOT, grite_json

# Creates issues and closes every other one; a line is written only after the append returned.
WRITER = """
import sys
sys.path.insert(0, {root!r})
from git_brat.grite.repo import Grite
from git_brat.grite import issues
g = Grite.open()
with open(sys.argv[2], "a") as acks:
    for i in range(int(sys.argv[1])):
        iid = issues.create(g, f"{{sys.argv[3]}}-{{i}}")
        print("c", iid, file=acks, flush=True)
        if i % 2:
            issues.set_state(g, iid, "closed")
            print("x", iid, file=acks, flush=True)
"""

# Lists repeatedly (fresh cache objects, as separate commands would) and checks each answer
# against what writers had acknowledged before the list started.
READER = """
import glob, sys, time
sys.path.insert(0, {root!r})
import msgspec
from git_brat.grite.repo import Grite
deadline = time.monotonic() + 120
for n in range(int(sys.argv[1])):
    if time.monotonic() > deadline:
        break
    created, closed = set(), set()
    for path in glob.glob(sys.argv[2] + "/*.acks"):
        for line in open(path).read().splitlines():
            kind, iid = line.split()
            (created if kind == "c" else closed).add(iid)
    g = Grite.open()
    which = ("all", "open", "closed")[n % 3]
    listed = {{i["id"]: i["state"] for i in msgspec.json.decode(g.cache.issue_list_json(which))}}
    if n % 2:
        state = g.cache.state()
        missing = [i for i in created if i not in state.entities]
        assert not missing, f"state lacks acknowledged {{missing[:3]}}"
    if which == "all":
        assert created <= set(listed), f"list lacks {{sorted(created - set(listed))[:3]}}"
        stale = [i for i in closed if listed[i] != "closed"]
        assert not stale, f"closed issues listed open: {{stale[:3]}}"
    elif which == "closed":
        assert closed <= set(listed), f"closed list lacks {{sorted(closed - set(listed))[:3]}}"
    else:   # (an issue open at the start may be closed by now: only the converse is checked)
        assert not closed & set(listed), "a closed issue in the open list"
    print(n, len(listed), flush=True)
"""


def test_concurrent_readers_never_miss_an_acknowledged_write(grepo, tmp_path):
    writers = [subprocess.Popen([sys.executable, "-c", WRITER.format(root=str(ROOT)), "30",
                                 str(tmp_path / f"w{n}.acks"), f"w{n}"], cwd=grepo,
                                stderr=subprocess.PIPE, text=True) for n in range(3)]
    readers = [subprocess.Popen([sys.executable, "-c", READER.format(root=str(ROOT)), "40",
                                 str(tmp_path)], cwd=grepo, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True) for _ in range(3)]
    for p in writers:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    for p in readers:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        assert len(out.splitlines()) >= 5   # it really read, several times
    final = grite_json(grepo, "issue", "list", "--state", "all")
    assert len(final) == 90 and sum(i["state"] == "closed" for i in final) == 45
    # And the shared cache agrees with a replay from nothing.
    from git_brat.grite.cache.projection import Cache
    from git_brat.git.store import Store
    from git_brat.grite.model.state import canonical
    store = Store.discover(str(grepo))
    assert canonical(Cache(store).state()) == canonical(Cache(store).rebuild(full=True))
    assert msgspec.json.decode(Cache(store).issue_list_json("all")) == final
