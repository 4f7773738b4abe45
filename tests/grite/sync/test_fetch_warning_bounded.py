"""A fetch of many forged logs warns in a bounded line: a count, the first few, the rest summed up."""

from __future__ import annotations

from gritekit import forge_log
from helpers import git, make_repo, run
from sync_helpers import clone, seeded_hub

from git_brat.grite.model import events as ev

LOGS = 60


def test_many_forged_logs_make_one_short_warning_with_their_count_and_the_first_few(tmp_path):
    hub = seeded_hub(tmp_path)
    victim = clone(str(hub), tmp_path / "victim")
    git(victim, "config", "grite.requireSigned", "true")   # so every unsigned batch is refused
    git(victim, "fetch", "-q")
    pusher = make_repo(tmp_path / "pusher")
    for i in range(LOGS):
        e = ev.make_event(f"{i:032x}", f"{i:016x}", 1, 0, ev.Create("issue", {"title": f"spam {i}",
                                                                       "state": "open"}))
        forge_log(pusher, f"{i:016x}", [e])
    git(pusher, "push", "-q", str(hub), "refs/grite/replicas/*:refs/grite/replicas/*")

    err = run(["git", "fetch", "-q"], victim).err
    # (git runs the hook once per ref transaction: the fetch's, then the relay's)
    lines = [ln for ln in err.splitlines() if "grite" in ln]
    assert 1 <= len(lines) <= 2 and all(len(ln) < 1200 for ln in lines), (len(lines), len(err))
    [summed] = [ln for ln in lines if "batches not believed:" in ln]
    count = int(summed.split(" batches not believed")[0].rsplit(" ", 1)[1])
    assert count > 40 and f"; and {count - 3} more (`git grite doctor` lists them)" in summed
    assert summed.count("/grite/replicas/") == 3
