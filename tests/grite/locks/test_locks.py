"""`git grite lock`: acquire, renew, release, status, gc on one clone."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings, strategies as st

from git_brat.grite import locks
from git_brat.errors import UsageError
from helpers import git, grite, grite_json, run, status, wal_tip


def _lock_refs(repo) -> str:
    return git(repo, "for-each-ref", "refs/grite/locks/")


def test_acquire_status_release_and_the_token_keeps_increasing(grepo):
    got = grite_json(grepo, "lock", "acquire", "task:t-3f2a", "--ttl", "120", "--holder", "alice")
    assert (got["resource"], got["holder"], got["state"], got["token"], got["action"]) == (
        "task:t-3f2a", "alice", "held", 1, "acquire")
    assert 110 < got["remaining"] <= 120 and got["mode"] == "local"
    assert got["ref"] == "refs/grite/locks/task/t-3f2a"
    assert got["pid"] > 0 and got["host"] and got["actor"]

    [shown] = grite_json(grepo, "lock", "status")
    for key in ("resource", "holder", "expires_at", "remaining", "state", "token"):
        assert key in shown
    assert shown["state"] == "held" and shown["expires_at"] == got["expires_at"]

    out = grite(grepo, "lock", "release", "task:t-3f2a", "--holder", "alice").out
    assert out.startswith("released task:t-3f2a: token 1")
    # Released, not deleted: the record stays and the next grant is token 2.
    [kept] = grite_json(grepo, "lock", "status", "task:t-3f2a")
    assert (kept["state"], kept["token"], kept["remaining"]) == ("released", 1, 0.0)
    again = grite(grepo, "lock", "release", "task:t-3f2a", "--holder", "alice").out
    assert "already released" in again
    assert grite_json(grepo, "lock", "acquire", "task:t-3f2a", "--holder", "bob")["token"] == 2


def test_acquiring_a_lease_you_hold_extends_it_and_keeps_the_token(grepo):
    first = grite_json(grepo, "lock", "acquire", "repo:global", "--ttl", "10", "--holder", "alice")
    second = grite_json(grepo, "lock", "acquire", "repo:global", "--ttl", "100", "--holder", "alice")
    assert second["action"] == "extend" and second["token"] == first["token"] == 1
    assert second["expires_at"] > first["expires_at"]
    renewed = grite_json(grepo, "lock", "renew", "repo:global", "--holder", "alice")
    assert renewed["token"] == 1 and renewed["last_action"] == "renew" and renewed["remaining"] > 90


def test_another_holder_is_refused_while_live_and_takes_over_after_ttl_plus_skew(grepo):
    # The skew margin is wide enough that two commands fit in it on a loaded 2-core machine.
    ttl, skew = 0.5, 6.0
    got = grite_json(grepo, "lock", "acquire", "task:t-1", "--ttl", str(ttl), "--holder", "alice",
                     "--skew", str(skew))
    expires = locks.history(_g(grepo), "task:t-1")[0].expires_at
    refused = grite(grepo, "lock", "acquire", "task:t-1", "--holder", "bob", "--skew", str(skew),
                    check=False)
    assert refused.returncode == 5
    assert refused.err.count("\n") == 1 and "task:t-1 is held by alice (token 1)" in refused.err
    _sleep_until(expires + 200)      # past the holder's expiry, inside the skew margin
    [mid] = grite_json(grepo, "lock", "status", "--skew", str(skew))
    assert mid["state"] == "held" or time.time() * 1000 > expires + skew * 1000
    inside = grite(grepo, "lock", "acquire", "task:t-1", "--holder", "bob", "--skew", str(skew),
                   check=False)
    if inside.returncode != 5:
        # A machine so loaded that the command decided after the margin: then, and only then,
        # taking over was right; the record's own decision time says which.
        assert inside.returncode == 0, inside.err
        took = locks.history(_g(grepo), "task:t-1")[0]
        assert took.action == "takeover" and took.acquired_at > expires + skew * 1000
        return
    _sleep_until(expires + skew * 1000 + 50)
    [late] = grite_json(grepo, "lock", "status", "--skew", str(skew))
    assert late["state"] == "expired" and late["remaining"] == 0.0
    took = grite_json(grepo, "lock", "acquire", "task:t-1", "--holder", "bob", "--skew", str(skew))
    assert (took["holder"], took["token"], took["action"]) == ("bob", got["token"] + 1, "takeover")


def test_renew_and_release_by_a_non_holder_are_refused_and_change_nothing(grepo):
    grite(grepo, "lock", "acquire", "task:t-2", "--holder", "alice")
    before = _lock_refs(grepo)
    for cmd in ("renew", "release"):
        proc = grite(grepo, "lock", cmd, "task:t-2", "--holder", "mallory", check=False)
        assert proc.returncode == 5
        assert f"held by alice, not mallory: only the holder {cmd}s it" in proc.err
    assert _lock_refs(grepo) == before
    missing = grite(grepo, "lock", "renew", "task:nope", check=False)
    assert missing.returncode == 3 and "no lease on task:nope" in missing.err


def test_forced_release_by_someone_else_is_recorded_in_the_lease_history(grepo):
    grite(grepo, "lock", "acquire", "task:t-3", "--holder", "alice")
    out = grite_json(grepo, "lock", "release", "task:t-3", "--holder", "ops", "--force")
    assert (out["state"], out["last_action"], out["by"], out["holder"]) == (
        "released", "force-release", "ops", "alice")
    log = git(grepo, "log", "--format=%s", "refs/grite/locks/task/t-3").splitlines()
    assert log == ["grite: lock.force-release task:t-3 token 1 holder alice by ops",
                   "grite: lock.acquire task:t-3 token 1 holder alice"]
    record = git(grepo, "show", "refs/grite/locks/task/t-3:lease")
    assert '"action":"force-release"' in record and '"by":"ops"' in record


def test_forced_takeover_of_a_live_lease_gets_a_new_token(grepo):
    grite(grepo, "lock", "acquire", "task:t-4", "--holder", "alice")
    took = grite_json(grepo, "lock", "acquire", "task:t-4", "--holder", "ops", "--force")
    assert (took["token"], took["last_action"], took["by"]) == (2, "force-takeover", "ops")


@pytest.mark.parametrize("bad", [
    "t-3f2a", "task:", ":x", "Task:x", "task:a..b", "task:../etc", "task:a\x01b", "task:a\nb",
    "task:a\x7fb", "task:a b", "task:a@{1}", "task:x.lock", "task:dir/x.lock/y", "task:.hidden",
    "task:a/.b", "task:a//b", "task:/a", "task:a/", "task:a.", "task:a~1", "task:a^", "task:a:b",
    "task:a?", "task:a*", "task:a[", "task:a\\b", "task:@", "task:" + "x" * 201,
])
def test_invalid_resource_names_are_one_line_errors_and_write_nothing(grepo, bad):
    tip = wal_tip(grepo)
    commands = ("acquire", "renew", "release", "status") if bad == "task:a..b" else ("acquire",)
    for cmd in commands:
        proc = grite(grepo, "lock", cmd, bad, check=False)
        assert proc.returncode == 2, (cmd, proc.err)
        assert proc.err.startswith("git-grite: error: invalid resource") and proc.err.count("\n") == 1
    assert _lock_refs(grepo) == "" and wal_tip(grepo) == tip


def test_a_nul_byte_in_a_resource_is_refused_by_the_library():
    with pytest.raises(UsageError, match="control characters"):
        locks.ref_for("task:a\x00b")


def test_resource_names_map_to_refs_git_accepts(grepo):
    cases = {"task:t-3f2a": "refs/grite/locks/task/t-3f2a",
             "repo:global": "refs/grite/locks/repo/global",
             "path:src/parser": "refs/grite/locks/path/src%2Fparser",
             "path:src": "refs/grite/locks/path/src",
             "path:naïve/100%": "refs/grite/locks/path/na%C3%AFve%2F100%25"}
    for resource, ref in cases.items():
        assert locks.ref_for(resource).decode() == ref
        assert locks.resource_of(ref.encode()) == resource
        grite(grepo, "lock", "acquire", resource)
    # A path and a path inside it are separate leases (no file/directory clash between refs).
    assert sorted(s["resource"] for s in grite_json(grepo, "lock", "status")) == sorted(cases)


@settings(max_examples=60, deadline=None)
@given(name=st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1,
                    max_size=12))
def test_every_accepted_name_maps_to_a_ref_that_git_check_ref_format_accepts(tmp_path_factory, name):
    try:
        ref = locks.ref_for("path:" + name)
    except UsageError:
        return
    assert run(["git", "check-ref-format", ref.decode()], tmp_path_factory.getbasetemp(),
               check=False).returncode == 0, ref
    assert locks.resource_of(ref) == "path:" + name


def test_refname_rules_agree_with_git_check_ref_format(tmp_path):
    samples = ["refs/a/b", "refs/a..b", "refs/a/.b", "refs/a/b.lock", "refs/a b", "refs/a/b.",
               "refs/a@{b", "refs//a", "refs/a/", "refs/a~b", "refs/a^b", "refs/a:b", "refs/a?b",
               "refs/a*b", "refs/a[b", "refs/a\\b", "refs/a\x01b", "refs/a\x7fb", "refs/ok%2Fx",
               "@", "refs/@", "refs/a@b", "refs/.a", "refs/a.lock/b"]
    for ref in samples:
        git_ok = run(["git", "check-ref-format", ref], tmp_path, check=False).returncode == 0
        assert (locks.refname_problem(ref) is None) == git_ok, ref


def test_holder_defaults_to_grite_holder_then_the_current_actor(grepo):
    actor = grite_json(grepo, "actor", "show")["id"]
    assert grite_json(grepo, "lock", "acquire", "task:a")["holder"] == actor
    env_holder = grite_json(grepo, "lock", "acquire", "task:b", env={"GRITE_HOLDER": "agent-7",
                                                                      "GRITE_SESSION": "s-1"})
    assert (env_holder["holder"], env_holder["session"]) == ("agent-7", "s-1")
    # The same holder from another process extends rather than being refused.
    assert grite_json(grepo, "lock", "acquire", "task:b", "--holder", "agent-7")["action"] == "extend"
    bad = grite(grepo, "lock", "acquire", "task:c", "--holder", "a\x01b", check=False)
    assert bad.returncode == 2 and "invalid holder" in bad.err


def test_every_grant_is_recorded_as_a_lease_token_event(grepo):
    grite(grepo, "lock", "acquire", "task:t-5", "--holder", "alice")
    grite(grepo, "lock", "renew", "task:t-5", "--holder", "alice")       # no new token
    grite(grepo, "lock", "release", "task:t-5", "--holder", "alice")
    grite(grepo, "lock", "acquire", "task:t-5", "--holder", "bob")
    leases = [e for e in grite_json(grepo, "log") if e["op"] == "lease"]
    assert [(e["detail"]["resource"], e["detail"]["token"], e["detail"]["holder"]) for e in leases] == [
        ("task:t-5", 1, "alice"), ("task:t-5", 2, "bob")]
    released_at = locks.history(_g(grepo), "task:t-5")[1].released_at
    assert leases[1]["detail"]["prev_end"] == released_at > 0


def test_lock_gc_releases_expired_leases_and_keeps_their_tokens(grepo):
    grite(grepo, "lock", "acquire", "task:dead", "--holder", "a", "--ttl", "0.2")
    grite(grepo, "lock", "acquire", "task:alive", "--holder", "b", "--ttl", "300")
    time.sleep(0.4)
    dry = grite_json(grepo, "lock", "gc", "--skew", "0", "--dry-run")
    assert [d["resource"] for d in dry] == ["task:dead"]
    assert grite_json(grepo, "lock", "status", "task:dead", "--skew", "0")[0]["state"] == "expired"
    assert grite(grepo, "lock", "gc", "--skew", "1000").out.strip() == "no expired leases"
    done = grite_json(grepo, "lock", "gc", "--skew", "0")
    assert [(d["resource"], d["state"], d["token"]) for d in done] == [("task:dead", "released", 1)]
    dead = locks.history(_g(grepo), "task:dead")
    assert dead[0].action == "expire" and dead[0].released_at == dead[1].expires_at
    assert grite_json(grepo, "lock", "status", "task:alive")[0]["state"] == "held"
    assert grite_json(grepo, "lock", "acquire", "task:dead", "--holder", "c")["token"] == 2


def test_settings_come_from_git_config_and_bad_values_are_usage_errors(grepo):
    git(grepo, "config", "grite.lockTtl", "7")
    got = grite_json(grepo, "lock", "acquire", "task:cfg")
    assert 5 < got["remaining"] <= 7
    git(grepo, "config", "grite.lockSkew", "soon")
    bad = grite(grepo, "lock", "status", check=False)
    assert bad.returncode == 2 and "bad git config grite.lockSkew=soon: expected seconds" in bad.err
    git(grepo, "config", "--unset", "grite.lockSkew")
    assert grite(grepo, "lock", "acquire", "task:x", "--ttl", "0", check=False).returncode == 2
    assert grite(grepo, "lock", "acquire", "task:x", "--remote", "o", "--local",
                 check=False).returncode == 2
    assert "grite.lockSkew" in grite(grepo, "lock", "--help").out


def test_lock_commands_work_from_a_subdirectory_and_leave_git_status_clean(grepo):
    sub = grepo / "deep" / "er"
    sub.mkdir(parents=True)
    (grepo / "deep" / "er" / ".keep").write_text("")
    git(grepo, "add", ".")
    git(grepo, "commit", "-q", "-m", "sub")
    grite(sub, "lock", "acquire", "path:deep/er")
    assert "path:deep/er" in grite(sub, "lock", "status").out
    grite(sub, "lock", "renew", "path:deep/er")
    grite(sub, "lock", "release", "path:deep/er")
    grite(sub, "lock", "gc")
    assert status(grepo) == ""


def test_lock_needs_grite_init(repo):
    proc = grite(repo, "lock", "acquire", "task:x", check=False)
    assert proc.returncode == 4 and "git grite init" in proc.err


def _g(repo):
    from git_brat.grite.repo import Grite
    return Grite.open(str(repo))


def _sleep_until(ms: float) -> None:
    time.sleep(max(0.0, ms / 1000 - time.time()))
