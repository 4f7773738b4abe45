"""git brat edge cases found in review."""

from __future__ import annotations

import time

from git_brat.grite.model import events as ev
from git_brat.grite.log.wal import Draft
from git_brat.grite.repo import Grite
from helpers import brat, brat_json, wal_tip


def _task(brepo) -> str:
    convoy = brat_json(brepo, "convoy", "create", "C")["id"]
    return brat_json(brepo, "task", "create", "--convoy", convoy, "T")["id"]


def test_a_needs_human_flag_is_cleared_by_the_next_move(brepo):
    tid = _task(brepo)
    brat(brepo, "task", "update", tid, "--status", "running")
    g = Grite.open(str(brepo))
    g.append([Draft(tid, ev.SetFields({"needs_human": "merge conflict in calc.py"}))], "refinery")
    kinds = [i["kind"] for i in brat_json(brepo, "status")["interventions"]]
    assert kinds == ["needs-human"]
    brat(brepo, "task", "update", tid, "--status", "queued", "-m", "resolved by hand")
    assert brat_json(brepo, "status")["interventions"] == []


def test_intervention_commands_are_printed_whole(brepo):
    brat(brepo, "config", "set", "status.stuck_after", "0.2")
    tid = _task(brepo)
    brat(brepo, "task", "update", tid, "--status", "running")
    time.sleep(0.4)
    command = brat_json(brepo, "status")["interventions"][0]["command"]
    assert command in brat(brepo, "status").out


def test_explicit_yaml_tags_are_a_precise_error_not_a_crash(brepo):
    wf = brepo / ".brat" / "workflows"
    wf.mkdir(parents=True, exist_ok=True)
    (wf / "tagged.yaml").write_text(
        "type: workflow\ntitle: T\nsteps:\n  - id: a\n    title: A\n    priority: !!int abc\n")
    tip = wal_tip(brepo)
    proc = brat(brepo, "workflow", "run", "tagged", check=False)
    assert proc.returncode == 2 and "tagged.yaml:6" in proc.err and proc.err.count("\n") == 1
    assert wal_tip(brepo) == tip
    listed = brat(brepo, "workflow", "list", check=False)
    assert "Traceback" not in listed.err


def test_an_infinite_number_is_refused_in_config(brepo):
    proc = brat(brepo, "config", "set", "witness.timeout", "inf", check=False)
    assert proc.returncode == 2 and "witness.timeout" in proc.err
    text = (brepo / ".brat" / "config.toml").read_text()
    (brepo / ".brat" / "config.toml").write_text(text.replace("timeout = 3600", "timeout = inf", 1))
    proc = brat(brepo, "status", check=False)
    assert proc.returncode == 2 and "witness.timeout = inf is not allowed" in proc.err
