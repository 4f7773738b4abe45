"""What names the lock remote: a committed file may name one of this clone's remotes, nothing else."""

from __future__ import annotations

from helpers import brat, git, grite, grite_json
from sync_helpers import clone, seeded_hub


def _commit_locks_remote(repo, value: str) -> None:
    (repo / ".brat").mkdir(exist_ok=True)
    (repo / ".brat" / "config.toml").write_text(f"[locks]\nremote = {value!r}\n".replace("'", '"'))
    git(repo, "add", ".brat/config.toml")
    git(repo, "commit", "-q", "-m", "locks")


def test_a_pulled_locks_remote_that_is_an_option_runs_nothing_and_is_refused(tmp_path):
    hub = seeded_hub(tmp_path)
    victim = clone(str(hub), tmp_path / "victim")
    mark = tmp_path / "PWNED"
    _commit_locks_remote(victim, f"--upload-pack=touch {mark};:")
    proc = grite(victim, "lock", "status")            # not approved: it waits, nothing runs
    assert "waits for approval" in proc.err and not mark.exists()
    brat(victim, "trust")                             # approved, it is still no remote name
    for argv in (["lock", "status"], ["lock", "gc"], ["lock", "acquire", "task:t1"]):
        proc = grite(victim, *argv, check=False)
        assert proc.returncode == 2, (argv, proc.out, proc.err)
        assert "is not a remote name or URL" in proc.err
        assert not mark.exists()
    assert git(victim, "for-each-ref", "refs/grite/locks/") == ""   # nothing decided anywhere


def test_a_committed_url_or_path_is_never_used_to_decide_leases(tmp_path):
    hub = seeded_hub(tmp_path)
    elsewhere = seeded_hub(tmp_path, "elsewhere.git")   # a repository the committer controls
    victim = clone(str(hub), tmp_path / "victim")
    _commit_locks_remote(victim, str(elsewhere))
    brat(victim, "trust")
    proc = grite(victim, "lock", "acquire", "task:t1", check=False)
    assert proc.returncode == 2 and "not a remote of this clone" in proc.err
    assert "git remote add" in proc.err
    assert git(elsewhere, "for-each-ref", "refs/grite/locks/") == ""
    assert git(victim, "for-each-ref", "refs/grite/locks/") == ""
    # Naming one of this clone's remotes is what the file is for.
    _commit_locks_remote(victim, "origin")
    brat(victim, "trust")
    assert grite_json(victim, "lock", "acquire", "task:t1")["remote"] == "origin"


def test_an_option_in_local_git_config_is_refused_too(tmp_path):
    hub = seeded_hub(tmp_path)
    victim = clone(str(hub), tmp_path / "victim")
    git(victim, "config", "grite.lockRemote", "--receive-pack=false")
    proc = grite(victim, "lock", "acquire", "task:t1", check=False)
    assert proc.returncode == 2 and "is not a remote name or URL" in proc.err
    assert git(hub, "for-each-ref", "refs/grite/locks/") == ""
