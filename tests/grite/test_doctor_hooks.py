"""`git grite doctor` notices tampering with the hooks git runs on every ref update: a line added
to grite's shim, and any hook added or changed since grite was installed, hidden or not."""

from __future__ import annotations

import hashlib
import json

from helpers import grite


def _doctor(repo, *args):
    proc = grite(repo, "doctor", "--json", *args, check=False)
    return proc.returncode, json.loads(proc.out)


def test_a_line_appended_to_a_grite_shim_is_reported_then_rewritten_by_fix(grepo):
    shim = grepo / ".git" / "hooks" / "post-merge"
    with open(shim, "a") as f:
        f.write("echo backdoor >> /tmp/x\n")
    code, report = _doctor(grepo)
    assert code == 6 and not report["ok"]
    [f] = [f for f in report["findings"] if f["subject"] == str(shim)]
    assert f["kind"] == "hook-changed" and not f["fixed"]
    code, report = _doctor(grepo, "--fix")
    assert "backdoor" not in shim.read_text()
    assert _doctor(grepo)[0] == 0


def test_a_hidden_hook_dropped_after_install_is_listed_with_its_hash_and_reported(grepo):
    hidden = grepo / ".git" / "hooks" / ".grite" / "reference-transaction"
    hidden.write_text("#!/bin/sh\necho hidden >> /tmp/x\n")
    hidden.chmod(0o755)
    visible = grepo / ".git" / "hooks" / "pre-commit"
    visible.write_text("#!/bin/sh\nexit 0\n")
    visible.chmod(0o755)
    code, report = _doctor(grepo)
    assert code == 6
    hooks = {h["path"]: h for h in report["hooks"]}
    assert hooks[str(hidden)]["hidden"] and hooks[str(hidden)]["state"] == "unknown"
    assert hooks[str(hidden)]["sha256"] == hashlib.sha256(hidden.read_bytes()).hexdigest()
    assert not hooks[str(visible)]["hidden"] and hooks[str(visible)]["state"] == "unknown"
    kinds = {f["subject"]: f["kind"] for f in report["findings"]}
    assert kinds[str(hidden)] == "hook-unknown" and kinds[str(visible)] == "hook-unknown"
    human = grite(grepo, "doctor", check=False)
    assert human.returncode == 6 and str(hidden) in human.out
    # A repair does not vouch for it; the user does, by installing again.
    assert _doctor(grepo, "--fix")[0] == 6
    grite(grepo, "init")
    code, report = _doctor(grepo)
    assert code == 0 and {h["state"] for h in report["hooks"]} == {"recorded"}


def test_a_hook_chained_at_install_is_recorded_and_a_later_change_reported(repo):
    hook = repo / ".git" / "hooks" / "post-merge"
    hook.write_text("#!/bin/sh\necho mine\n")
    hook.chmod(0o755)
    grite(repo, "init")
    chained = repo / ".git" / "hooks" / ".grite" / "post-merge"
    code, report = _doctor(repo)
    assert code == 0
    assert {h["path"]: h["state"] for h in report["hooks"]} == {str(chained): "recorded"}
    with open(chained, "a") as f:
        f.write("echo changed\n")
    code, report = _doctor(repo)
    assert code == 6
    [f] = [f for f in report["findings"] if f["subject"] == str(chained)]
    assert f["kind"] == "hook-changed" and "since grite was installed" in f["detail"]
