"""The .git/brat/ tree is named in one module, and no record can make it name a path elsewhere."""

from __future__ import annotations

import os

import pytest

from git_brat.brat import layout
from git_brat.errors import UsageError
from git_brat.git.store import Store

TID = "0123456789abcdef0123456789abcdef"


def test_every_path_lies_under_the_common_dirs_brat_folder(repo):
    store = Store.discover(str(repo))
    root = os.path.join(store.common_dir, "brat")
    paths = [layout.worktree(store, TID), layout.session_log(store, TID),
             layout.session_dir(store, TID), layout.session_pid(store, TID),
             layout.session_prompt(store, TID), layout.bin_dir(store),
             layout.refinery_worktree(store), layout.merge_log(store, TID),
             layout.refinery_kick(store), layout.refinery_check(store), layout.hub_config(store),
             layout.deacon_stamp(store), layout.mayor_exchange(store, 3),
             layout.mayor_answer(store, 3)]
    paths += [f(store, role) for role in layout.ROLES for f in (layout.pid_file, layout.role_log)]
    assert all(p.startswith(root + os.sep) for p in paths)
    assert len(set(paths)) == len(paths)


@pytest.mark.parametrize("bad", ["../../hooks/pre-push", "/etc/passwd", "", TID + "/x",
                                 TID.upper(), TID[:-1], "..", "a" * 64])
def test_an_id_from_a_record_that_is_not_an_entity_id_never_becomes_a_path(repo, bad):
    store = Store.discover(str(repo))
    for build in (layout.worktree, layout.session_log, layout.session_dir, layout.merge_log):
        with pytest.raises(UsageError, match="not an entity id"):
            build(store, bad)


def test_the_session_logs_listed_are_the_logs_in_the_sessions_folder(repo):
    store = Store.discover(str(repo))
    os.makedirs(layout.sessions(store))
    for name in (f"{TID}.log", "notes.log", f"{TID}.txt"):
        open(os.path.join(layout.sessions(store), name), "w").close()
    assert layout.session_logs(store) == [
        (TID, layout.session_log(store, TID)),
        ("notes", os.path.join(layout.sessions(store), "notes.log"))]
