"""What runs, and when: nothing a fetch, a pull or an agent's work tree brings runs code here
until the user approved it; hooks start the refinery only on a local setting; a hub runs only
what its admin configured."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from bratkit import convoy, fail, status_of
from helpers import brat, brat_json, git, grite, make_repo, run, status
from refinerykit import commit_on, request
from sync_helpers import bare_hub, clone

# The attacker's side runs nothing of its own (as the repro scripts do) and signs as Mallory.
ATTACKER = {"GRITE_SKIP_HOOKS": "1", "GIT_AUTHOR_NAME": "Mallory",
            "GIT_AUTHOR_EMAIL": "mallory@evil.example", "GIT_COMMITTER_NAME": "Mallory",
            "GIT_COMMITTER_EMAIL": "mallory@evil.example"}


def _team(tmp_path: Path, config: dict[str, str] | None = None) -> tuple[Path, Path]:
    """A hub whose main holds a committed .brat/config.toml (made by `git brat init` and
    `config set` in the lead's clone), and the victim's clone after `git brat init`."""
    hub = bare_hub(tmp_path / "hub.git")
    lead = make_repo(tmp_path / "lead")
    brat(lead, "init")
    for key, value in (config or {}).items():
        brat(lead, "config", "set", key, value)
    git(lead, "add", ".brat")
    git(lead, "commit", "-q", "-m", "brat config")
    git(lead, "push", "-q", str(hub), "main")
    victim = clone(str(hub), tmp_path / "victim", init=False)
    brat(victim, "init")
    return hub, victim


def _attacker(hub: Path, tmp_path: Path) -> Path:
    att = tmp_path / "attacker"
    git(tmp_path, "clone", "-q", str(hub), str(att))
    run(["git", "grite", "init"], att, env=ATTACKER)
    return att


def _hostile_request(att: Path, cid: str, title: str, files: dict[str, str]) -> str:
    tid = run(["git", "brat", "task", "create", "--convoy", cid, title], att, env=ATTACKER).out.strip()
    for s in ("running", "needs-review"):
        run(["git", "brat", "task", "update", tid, "--status", s], att, env=ATTACKER)
    base = git(att, "rev-parse", "main")
    commit_on(att, f"brat/{tid}", files, title, base)
    return tid


def _commit_config(att: Path, text: str) -> None:
    (att / ".brat").mkdir(exist_ok=True)
    (att / ".brat" / "config.toml").write_text(text)
    run(["git", "add", ".brat"], att, env=ATTACKER)
    run(["git", "commit", "-q", "-m", "ci: tune brat"], att, env=ATTACKER)


def _push(att: Path, *refs: str) -> None:
    """Push refs and the attacker's log, under its own replica's ref (as a sync would: a log
    under another replica's name is not believed, and that is another test's attack)."""
    replica = json.loads(run(["git", "grite", "actor", "show", "--json"], att,
                             env=ATTACKER).out)["replica"]
    run(["git", "-c", "core.hooksPath=/dev/null", "push", "-q", "origin", *refs,
         f"refs/grite/wal:refs/grite/replicas/{replica}"], att, env=ATTACKER)


def _nothing_ran(marks: Path, seconds: float = 4.0) -> list[str]:
    """The marker files after waiting for anything a hook may have started in the background."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not any(marks.iterdir()):
        time.sleep(0.2)
    return sorted(p.name for p in marks.iterdir())


def test_a_pulled_check_runs_only_after_the_user_approves_it(tmp_path):
    hub, victim = _team(tmp_path)
    marks = tmp_path / "marks"
    marks.mkdir()
    att = _attacker(hub, tmp_path)
    cid = run(["git", "brat", "convoy", "create", "c"], att, env=ATTACKER).out.strip()
    tid = _hostile_request(att, cid, "tidy", {"tidy.txt": "x\n"})
    text = (att / ".brat" / "config.toml").read_text().replace(
        'check = ""', f'check = "touch {marks}/check"')
    _commit_config(att, text)
    _push(att, "main", f"brat/{tid}")
    git(victim, "pull", "-q", "--no-rebase")
    grite(victim, "sync")
    assert status_of(victim, tid) == "needs-review"
    code, msg = fail(victim, "refinery", "run", "--once")
    head = git(victim, "rev-parse", "--short", "HEAD")
    assert code == 7 and "refinery.check" in msg and head in msg and "Mallory" in msg \
        and "git brat trust" in msg
    assert _nothing_ran(marks, 0.5) == [] and status_of(victim, tid) == "needs-review"
    # Read-only commands keep working, say so, and show the approved value.
    st = brat(victim, "status")
    assert st.returncode == 0 and "not approved" in st.err
    got = brat_json(victim, "config", "get", "refinery.check")
    assert got["value"] == "" and got["approved"] is False
    shown = brat_json(victim, "trust", "--show")
    assert [(c["key"], c["approved"], c["committed"]) for c in shown["changes"]] == \
        [("refinery.check", "", f"touch {marks}/check")]
    assert not shown["recorded"] and shown["author"].startswith("Mallory")
    assert fail(victim, "refinery", "run", "--once")[0] == 7   # --show approved nothing
    # Approved: it runs.
    assert brat_json(victim, "trust")["recorded"]
    brat(victim, "task", "approve", tid)   # the victim's review of the work itself
    brat(victim, "refinery", "run", "--once")
    assert _nothing_ran(marks, 0.5) == ["check"] and status_of(victim, tid) == "merged"
    # Revoked: refused again.
    brat(victim, "trust", "--revoke")
    assert fail(victim, "witness", "run", "--once")[0] == 7


def test_settings_the_user_makes_need_no_further_approval(brepo):
    brat(brepo, "config", "set", "refinery.check", "true")       # approved as set
    brat(brepo, "config", "set", "witness.setup", "true")
    assert brat_json(brepo, "config", "get", "refinery.check") == \
        {"key": "refinery.check", "value": "true", "approved": True}
    # Edited by hand (as a pull would): unapproved until trusted ...
    path = brepo / ".brat" / "config.toml"
    path.write_text(path.read_text().replace('check = "true"', 'check = "false"'))
    assert brat_json(brepo, "config", "get", "refinery.check")["value"] == "true"
    # ... unless this clone overrides that key locally: local settings need no approval.
    out = brat_json(brepo, "config", "set", "refinery.check", "echo mine", "--local")
    assert out["local"] and out["file"].endswith(".git/brat/config.local.toml")
    assert brat_json(brepo, "config", "get", "refinery.check") == \
        {"key": "refinery.check", "value": "echo mine", "approved": True}
    assert status(brepo) == "?? .brat/config.toml"


def test_a_committed_hook_trigger_starts_nothing_on_fetch_or_pull(tmp_path):
    # The team's own recipe (s05): trigger hook and check "make test", committed and approved.
    hub, victim = _team(tmp_path, {"refinery.check": "make test", "refinery.trigger": "hook"})
    marks = tmp_path / "marks"
    marks.mkdir()
    att = _attacker(hub, tmp_path)
    cid = run(["git", "brat", "convoy", "create", "c"], att, env=ATTACKER).out.strip()
    tid = _hostile_request(att, cid, "bump deps",
                           {"Makefile": f"test:\n\ttouch {marks}/makefile\n"})
    _push(att, f"brat/{tid}")
    assert git(victim, "fetch", "-q") == ""
    # s01: a pulled commit that turns the hook on and sets a check.
    _commit_config(att, f'[refinery]\ntrigger = "hook"\ncheck = "touch {marks}/check"\n')
    _push(att, "main")
    git(victim, "pull", "-q", "--no-rebase")
    assert _nothing_ran(marks) == []
    assert not (victim / ".git" / "brat" / "refinery.log").exists()
    # status says how to turn it on here.
    brat(victim, "trust")
    hint = brat(victim, "status").err
    assert "refinery.trigger hook --local" in hint
    # Turned on locally (git config, never a file): a fetch starts the refinery.
    out = brat_json(victim, "config", "set", "refinery.trigger", "hook", "--local")
    assert out["file"] == "git config brat.hookTrigger"
    assert git(victim, "config", "brat.hookTrigger") == "true"


def test_an_agents_work_tree_cannot_configure_what_runs(brepo, tmp_path):
    # s23: the config is the repository's own, whatever work tree a command runs in.
    marks = tmp_path / "marks"
    marks.mkdir()
    cid = convoy(brepo)
    tid = request(brepo, cid, "Earlier work", {"o.txt": "o\n"})
    wt = brepo / ".git" / "brat" / "worktrees" / ("a" * 32)
    git(brepo, "worktree", "add", "-q", "-b", "agent-work", str(wt))
    (wt / ".brat").mkdir()
    (wt / ".brat" / "config.toml").write_text(
        f'[refinery]\ntrigger = "hook"\ncheck = "touch {marks}/check"\n')
    git(wt, "add", ".brat")
    git(wt, "commit", "-q", "-m", "aider: update config")
    assert brat_json(wt, "config", "get", "refinery.check")["value"] == ""
    brat(wt, "refinery", "run", "--once")
    assert _nothing_ran(marks, 0.5) == [] and status_of(brepo, tid) == "merged"
    # Nothing run from a session approves or changes the config.
    assert fail(wt, "trust")[0] == 2
    assert fail(wt, "config", "set", "refinery.check", "true")[0] == 2
    proc = brat(brepo, "trust", check=False, env={"BRAT_SESSION": "b" * 32})
    assert proc.returncode == 2


def test_a_hub_runs_pushed_code_only_when_its_admin_allows_it(tmp_path):
    # s06: the hub's check runs each pushed branch's own files.
    hub = bare_hub(tmp_path / "hub.git")
    seed = make_repo(tmp_path / "seed")
    git(seed, "push", "-q", str(hub), "main")
    brat(hub, "init", "--hub")
    marks = tmp_path / "marks"
    marks.mkdir()
    brat(hub, "config", "set", "refinery.check", "make test")
    assert brat_json(hub, "config", "get", "refinery.check")["value"] == "make test"   # r06
    assert brat_json(hub, "config", "get", "refinery.trigger")["value"] == "hook"
    att = _attacker(hub, tmp_path)
    cid = run(["git", "brat", "convoy", "create", "c"], att, env=ATTACKER).out.strip()
    tid = _hostile_request(att, cid, "docs typo",
                           {"Makefile": f"test:\n\t-touch {marks}/makefile\n"})
    _push(att, f"brat/{tid}")
    brat(hub, "task", "approve", tid)   # its admin read it: only the check stands between
    main = git(hub, "rev-parse", "main")
    code, msg = fail(hub, "refinery", "run", "--once")
    assert code == 7 and "hub.run_checks" in msg
    assert _nothing_ran(marks, 0.5) == [] and git(hub, "rev-parse", "main") == main
    brat(hub, "config", "set", "hub.run_checks", "true")
    brat(hub, "refinery", "run", "--once")
    # It ran; where bwrap is installed, sandboxed (refinery.sandbox auto on a hub): its touch
    # of a file outside its tree landed in its private /tmp, not here.
    ran = [] if shutil.which("bwrap") else ["makefile"]
    assert _nothing_ran(marks, 0.5) == ran and git(hub, "rev-parse", "main") != main
    assert status_of(hub, tid) == "merged"


def test_the_mayor_engine_must_be_one_that_exists(brepo):
    code, msg = fail(brepo, "config", "set", "mayor.engine", "nope")
    assert code == 2 and "mayor.engine" in msg and "claude" in msg and "codex" in msg
    assert 'engine = ""' in (brepo / ".brat" / "config.toml").read_text()


SWEEP_CONFIG = """\
[witness]
engine = "evil"
setup = "touch {m}/witness.setup"

[refinery]
trigger = "hook"
check = "touch {m}/refinery.check"

[mayor]
engine = "evil"

[locks]
remote = "--upload-pack=touch {m}/locks.remote;:"

[engines.evil]
command = ["sh", "-c", "touch {m}/engines.evil", "{{prompt}}"]

[engines.claude]
command = ["sh", "-c", "touch {m}/engines.claude", "{{prompt}}"]

[hub]
run_checks = true
"""


def test_nothing_a_hostile_remote_sends_runs_in_the_victims_clone(tmp_path):
    """The sweep: every code-running key set to a marker command, hostile Makefiles on every
    task branch; then what a user does every day. No marker appears."""
    hub, victim = _team(tmp_path, {"refinery.check": "make test"})
    marks = tmp_path / "marks"
    marks.mkdir()
    att = _attacker(hub, tmp_path)
    cid = run(["git", "brat", "convoy", "create", "c"], att, env=ATTACKER).out.strip()
    tids = [_hostile_request(att, cid, f"t{i}", {"Makefile": f"test:\n\ttouch {marks}/make{i}\n",
                                                  f"f{i}.txt": "x\n"}) for i in range(2)]
    _commit_config(att, SWEEP_CONFIG.format(m=marks))
    (att / "Makefile").write_text(f"all test:\n\ttouch {marks}/make-main\n")
    run(["git", "add", "Makefile"], att, env=ATTACKER)
    run(["git", "commit", "-q", "-m", "build"], att, env=ATTACKER)
    _push(att, "main", *[f"brat/{t}" for t in tids])
    steps = [
        ["git", "fetch", "-q"],
        ["git", "pull", "-q", "--no-rebase"],
        ["git", "merge", "-q", "--no-edit", f"origin/brat/{tids[0]}"],
        ["git", "brat", "status"],
        ["git", "grite", "issue", "list"],
        # `git grite lock status` reads [locks] remote itself (grite knows nothing of approval);
        # a remote name that is not an option is all it can take from there (finding 2, s04).
        ["git", "grite", "lock", "status"],
        ["git", "brat", "engine", "list"],
        ["git", "brat", "workflow", "list"],
        ["git", "grite", "doctor"],
        ["git", "brat", "deacon", "run", "--once"],
        ["git", "brat", "config", "get"],
        ["git", "brat", "refinery", "status"],
    ]
    for step in steps:
        proc = run(step, victim, check=False)
        assert "Traceback" not in proc.err, (step, proc.err)
        # git's hooks start what they start in the background: give it time to show.
        assert _nothing_ran(marks, 4.0 if step[1] != "brat" else 0.2) == [], step
    for refused in (["witness", "run", "--once"], ["refinery", "run", "--once"],
                    ["mayor", "ask", "x", "--yes"]):
        assert fail(victim, *refused)[0] == 7
    assert _nothing_ran(marks) == []
    assert json.loads(run(["git", "brat", "trust", "--show", "--json"], victim).out)["changes"]
