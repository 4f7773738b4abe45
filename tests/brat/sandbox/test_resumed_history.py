"""A conversation resumed from files (aider's: its resume id is the directory of the session it
began in) finds those files writable in the sandbox, since the sandbox shows a session only its
own directory. The resume id comes from the log, which any replica writes: only the directory
here of one of the task's own sessions is let through, never another path that looks like one.
(tests/engines/test_engine_limits.py::...[aider-rate] runs the real aider through it.)"""

from __future__ import annotations

import os

from helpers import make_repo
from git_brat.brat import layout
from git_brat.brat.witness import confine
from git_brat.git.store import Store

SID = "ab" * 16
TASK_SESSIONS = {SID, "cd" * 16}


def test_a_resumed_aider_conversation_writes_on_in_the_session_directory_it_began_in(tmp_path):
    store = Store.discover(str(make_repo(tmp_path / "repo")))
    history = confine.engine_dir(store, SID)
    os.makedirs(history)
    resumed = confine.resumed_engine_dir(store, layout.session_dir(store, SID), TASK_SESSIONS)
    assert resumed == history


def test_a_forged_resume_id_naming_a_directory_elsewhere_opens_nothing(tmp_path):
    store = Store.discover(str(make_repo(tmp_path / "repo")))
    os.makedirs(confine.engine_dir(store, SID))
    elsewhere = tmp_path / "home" / "brat" / "sessions" / SID   # fits aider's id format
    (elsewhere / "engine").mkdir(parents=True)
    assert confine.resumed_engine_dir(store, str(elsewhere), TASK_SESSIONS) == ""
    assert confine.resumed_engine_dir(store, layout.session_dir(store, SID) + "/../x",
                                      TASK_SESSIONS) == ""
    # a directory of ours swapped for a link to elsewhere: not followed out
    os.rmdir(confine.engine_dir(store, SID))
    os.symlink(elsewhere / "engine", confine.engine_dir(store, SID))
    assert confine.resumed_engine_dir(store, layout.session_dir(store, SID), TASK_SESSIONS) == ""


def test_a_resume_id_naming_another_tasks_session_leaves_its_history_read_only(tmp_path):
    store = Store.discover(str(make_repo(tmp_path / "repo")))
    os.makedirs(confine.engine_dir(store, SID))
    assert confine.resumed_engine_dir(store, layout.session_dir(store, SID), {"cd" * 16}) == ""
