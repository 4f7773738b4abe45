"""Issue 10, item 14: contracts the reference makes, checked as a user meets them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

from helpers import brat, brat_json, git, grite, grite_json, run, wal_tip


def _ids(repo, *titles):
    return [grite(repo, "issue", "create", t).out.strip() for t in titles]


def test_dependencies_show_on_both_issues_they_join(grepo):
    a, b, c = _ids(grepo, "a", "b", "c")
    grite(grepo, "dep", "add", a, "--on", b, "--type", "blocks")      # a blocks b
    grite(grepo, "dep", "add", a, "--on", c, "--type", "related_to")
    deps_b = grite_json(grepo, "dep", "list", b)
    assert deps_b["blocked_by"] == [a]
    assert grite_json(grepo, "issue", "show", b)["deps"]["blocked_by"] == [a]
    assert grite_json(grepo, "dep", "list", c)["related_to"] == [a]
    assert grite_json(grepo, "dep", "list", a)["related_to"] == [c]
    assert "blocked_by" in grite(grepo, "dep", "list", b).out


def test_export_takes_json_like_every_command(grepo):
    _ids(grepo, "x")
    doc = json.loads(grite(grepo, "export", "--json").out)
    assert [i["title"] for i in doc["issues"]] == ["x"]
    assert grite(grepo, "export", "--json", "--format", "md", check=False).returncode == 2


def test_unknown_remotes_and_overlong_ids_exit_with_the_documented_codes(grepo):
    assert grite(grepo, "sync", "nosuch", check=False).returncode == 3
    assert grite(grepo, "lock", "acquire", "task:x", "--remote", "nosuch",
                 check=False).returncode == 3
    assert grite(grepo, "issue", "show", "ab" * 17, check=False).returncode == 2


def test_doctor_refuses_a_negative_stale_after(grepo):
    assert grite(grepo, "doctor", "--stale-after", "-5", check=False).returncode == 2


def test_errors_show_undecodable_bytes_as_bytes(grepo):
    proc = run([b"git", b"grite", b"issue", b"show", b"ab\xff\xfe"], grepo, check=False)
    assert proc.returncode == 2
    assert "\\xff\\xfe" in proc.err and "udc" not in proc.err


def test_changes_that_change_nothing_write_nothing_and_say_so(grepo):
    a, b = _ids(grepo, "a", "b")
    grite(grepo, "issue", "close", a)
    grite(grepo, "dep", "add", a, "--on", b)
    tip = wal_tip(grepo)
    for argv, said in ((["issue", "close", a], "already closed"),
                       (["issue", "label", a, "--remove", "absent"], "nothing written"),
                       (["dep", "add", a, "--on", b], "already"),
                       (["issue", "update", a, "--title", "a"], "nothing written")):
        proc = grite(grepo, *argv)
        assert said in proc.out, (argv, proc.out)
        assert wal_tip(grepo) == tip, argv
    assert grite_json(grepo, "dep", "add", a, "--on", b)["changed"] is False


def test_import_keeps_two_issues_that_share_a_title(grepo, tmp_path):
    f = tmp_path / "issues.json"
    f.write_text(json.dumps([{"title": "same"}, {"title": "same"}]))
    assert len(grite_json(grepo, "import", str(f))["created"]) == 2
    assert grite_json(grepo, "import", str(f))["created"] == []   # still idempotent
    assert len(grite_json(grepo, "issue", "list")) == 2


def test_comments_are_shown_in_time_order(grepo, tmp_path):
    (iid,) = _ids(grepo, "talk")
    # A second clone comments later in time but with a lower clock than this one.
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(grepo), str(other))
    grite(other, "init")
    grite(other, "sync")
    for i in range(5):
        grite(grepo, "issue", "comment", iid, "-m", f"early {i}")
    time.sleep(0.05)
    grite(other, "issue", "comment", iid, "-m", "late")
    git(grepo, "remote", "add", "other", str(other))
    grite(grepo, "remote", "add-sync", "other")
    bodies = [c["body"] for c in grite_json(grepo, "issue", "show", iid)["comments"]]
    assert bodies == [f"early {i}" for i in range(5)] + ["late"]


def test_task_update_json_is_what_the_reference_says(grepo):
    brat(grepo, "init")
    cid = brat(grepo, "convoy", "create", "C").out.strip()
    tid = brat(grepo, "task", "create", "--convoy", cid, "T").out.strip()
    out = brat_json(grepo, "task", "update", tid, "--status", "running")
    last = out["history"][-1]
    assert out["id"] == tid and out["status"] == "running"
    assert (last["from_status"], last["to_status"], last["forced"]) == ("queued", "running", False)
    ref = (os.path.join(os.path.dirname(__file__), "..", "docs", "reference.md"))
    text = open(ref).read()
    row = next(ln for ln in text.splitlines() if ln.startswith("| `task update"))
    assert "task show" in row and "history" in row


def test_workflow_run_refuses_an_invalid_config_as_status_does(grepo):
    brat(grepo, "init")
    (grepo / ".brat" / "config.toml").write_text("[witness]\nconcurrency = -3\n")
    assert brat(grepo, "status", check=False).returncode == 2
    tip = wal_tip(grepo)
    proc = brat(grepo, "workflow", "run", "feature", "--var", "feature=x", check=False)
    assert proc.returncode == 2 and "config.toml" in proc.err
    assert wal_tip(grepo) == tip


def test_status_watch_into_a_pipe_writes_no_screen_codes_and_fits_the_width(grepo):
    brat(grepo, "init")
    brat(grepo, "convoy", "create", "A convoy with a rather long title that will not fit in forty")
    env = dict(os.environ, COLUMNS="40")
    proc = subprocess.Popen(["git-brat", "status", "--watch", "--interval", "0.2"], cwd=grepo,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    lines, deadline = [], time.monotonic() + 60
    while sum("refreshing every" in ln for ln in lines) < 2 and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line.decode())
    proc.send_signal(signal.SIGINT)
    rest, _err = proc.communicate(timeout=30)
    text = "".join(lines) + rest.decode()
    assert "\x1b" not in text and "CONVOYS" in text
    assert max(len(line) for line in text.splitlines()) <= 40, text


def test_a_rebuild_shows_its_progress_on_a_terminal_and_nowhere_else(grepo):
    import pexpect
    for i in range(3):
        grite(grepo, "issue", "create", f"issue {i}")
    for argv, done in ((["rebuild", "--full"], "rebuilt cache: "), (["doctor"], "ok")):
        child = pexpect.spawn("git", ["grite", *argv], cwd=str(grepo), timeout=60,
                              encoding="utf-8")
        try:
            child.expect("replaying the log: ")
            child.expect(done)
            child.expect(pexpect.EOF)
        finally:
            child.close(force=True)
        assert child.exitstatus == 0, argv
    assert "replaying" not in grite(grepo, "doctor").err
    piped = grite(grepo, "rebuild", "--full")
    assert "replaying" not in piped.err and "\x1b" not in piped.err
