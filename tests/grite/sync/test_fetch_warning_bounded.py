"""A fetch of many forged logs warns in a bounded line: a count, the first few, the rest summed up."""

from __future__ import annotations

from gritekit import push_spam_logs
from helpers import git, run
from sync_helpers import clone, seeded_hub

LOGS = 60


def test_many_forged_logs_make_one_short_warning_with_their_count_and_the_first_few(tmp_path):
    hub = seeded_hub(tmp_path)
    victim = clone(str(hub), tmp_path / "victim")
    git(victim, "config", "grite.requireSigned", "true")   # so every unsigned batch is refused
    git(victim, "fetch", "-q")
    push_spam_logs(hub, tmp_path, LOGS)

    err = run(["git", "fetch", "-q"], victim).err
    # (git runs the hook once per ref transaction: the fetch's, then the relay's)
    lines = [ln for ln in err.splitlines() if "grite" in ln]
    assert 1 <= len(lines) <= 2 and all(len(ln) < 1200 for ln in lines), (len(lines), len(err))
    [summed] = [ln for ln in lines if "batches not believed:" in ln]
    count = int(summed.split(" batches not believed")[0].rsplit(" ", 1)[1])
    assert count > 40 and f"; and {count - 3} more (`git grite doctor` lists them)" in summed
    assert summed.count("/grite/replicas/") == 3
