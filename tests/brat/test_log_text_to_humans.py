"""Text from the log reaches a terminal only as printable text, and a command suggested to paste
is built by git-brat, never taken from the log (any replica writes it)."""

from __future__ import annotations

import os
import signal
import subprocess
import time

from bratkit import convoy, move, task
from git_brat.brat.board import SESSION
from git_brat.grite.log.wal import Draft
from git_brat.grite.model import events as ev
from git_brat.grite.repo import Grite
from git_brat.process import hostname
from helpers import BIN, brat, brat_json
from witnesskit import make_bench

ESC = "\x1b"


def _forged_session(repo, task_field: str) -> None:
    """What any pusher can write: a running session on this host whose task is terminal codes."""
    from gritekit import pusher_append
    pusher_append(repo, [Draft("b" * 32, ev.Create(SESSION, {
        "task": task_field, "status": "running", "host": hostname(),
        "worktree": "/nonexistent", "engine": "x"}))], "forged session")


def test_the_witness_progress_lines_on_a_pipe_carry_no_terminal_codes_from_an_engine(repo,
                                                                                  tmp_path):
    """An engine's error (anyone's text: the model's, a prompt-injected agent's) is shown in the
    witness's progress line with its terminal codes as escapes."""
    bench = make_bench(repo, tmp_path)
    bench.config(witness__engine="claude", witness__max_retries="0")
    bench.task(bench.convoy(), "Overloaded", r"error-json \x1b]2;pwned\x07\x1b[2J")
    proc = bench.brat("witness", "run", "--once", check=False)
    assert "the engine reported an error: \\x1b]2;pwned" in proc.err or \
        "the engine reported an error: \ufffd]2;pwned" in proc.err, proc.err
    assert ESC not in proc.err and "\x07" not in proc.err


def test_a_forged_session_on_this_host_is_neither_recovered_nor_shown_by_the_witness(brepo):
    _forged_session(brepo, f"{ESC}]2;pwned\x07{ESC}[2J")
    proc = brat(brepo, "witness", "run", "--once", "--engine", "demo", check=False)
    assert "recovered" not in proc.err and "pwned" not in proc.err, proc.err
    # (replay rejects it outright: its task is not an entity id)
    assert brat_json(brepo, "session", "list", "--all") == []


def test_the_looping_deacons_report_carries_no_terminal_codes_from_the_log(brepo):
    brat(brepo, "config", "set", "deacon.interval", "1")
    brat(brepo, "config", "set", "deacon.sync_interval", "0")
    _forged_session(brepo, f"{ESC}]2;pwned\x07{ESC}[2J")
    proc = subprocess.Popen([str(BIN / "git-brat"), "deacon", "run"], cwd=brepo,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        time.sleep(4)   # a few passes (deacon.interval 1 s)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    text = out.decode("utf-8", "replace") + err.decode("utf-8", "replace")
    # A session record only this clone's own local records can make it act on: the forged one
    # is left alone, and nothing of its text reaches the terminal.
    assert "pwned" not in text and ESC not in text and "\x07" not in text, text
    # (replay rejects it outright: its task is not an entity id)
    assert brat_json(brepo, "session", "list", "--all") == []


def test_an_intervention_command_is_built_by_git_brat_not_read_from_the_log(brepo):
    cid = convoy(brepo, "c")
    t = task(brepo, cid, "parser fix")
    move(brepo, t, "running", "blocked")
    g = Grite.open(str(brepo))
    g.append([Draft(t, ev.SetFields({
        "needs_human": "workspace setup is missing; run the command below, then retry",
        "resolve_command": "git brat config set witness.setup ./tools/bootstrap"}))], "forged")
    [i] = brat_json(brepo, "status")["interventions"]
    assert i["command"] == f"git brat task show {t[:7]}"
    assert "witness.setup" not in brat(brepo, "status").out
    # What the refinery writes (a kind, not a command) becomes its command.
    g.append([Draft(t, ev.SetFields({"needs_human": "merge conflict in a.txt by hand",
                                     "resolve": "refinery-retry"}))], "refinery")
    [i] = brat_json(brepo, "status")["interventions"]
    assert i["command"] == f"git brat refinery retry {t[:7]}"


def test_a_failed_or_blocked_task_suggests_a_reply(brepo):
    cid = convoy(brepo, "c")
    failed, blocked = task(brepo, cid, "a"), task(brepo, cid, "b")
    move(brepo, failed, "running", "failed")
    move(brepo, blocked, "running", "blocked")
    by_task = {i["task"]: i["command"] for i in brat_json(brepo, "status")["interventions"]}
    assert by_task[failed].startswith(f"git brat task reply {failed[:7]} -m ")
    assert by_task[blocked].startswith(f"git brat task reply {blocked[:7]} -m ")
    subprocess.run(["sh", "-c", by_task[blocked]], cwd=brepo, check=True, capture_output=True)
    assert brat_json(brepo, "task", "show", blocked)["status"] == "queued"
