"""The sandbox settings: validated at `config set`, and shown by `engine list` and `status`."""

from __future__ import annotations

import shutil

import pytest

from helpers import brat, brat_json


@pytest.mark.parametrize("key, bad", [("witness.sandbox", "firejail"),
                                      ("witness.sandbox_network", "closed"),
                                      ("refinery.sandbox", "yes"),
                                      ("witness.sandbox_hide", "'~/.aws'")])
def test_a_bad_sandbox_setting_is_refused_and_nothing_is_written(brepo, key, bad):
    path = brepo / ".brat" / "config.toml"
    before = path.read_bytes()
    res = brat(brepo, "config", "set", key, bad, check=False)
    assert res.returncode == 2 and key in res.err
    assert path.read_bytes() == before


def test_sandbox_settings_are_set_and_read_back(brepo):
    brat(brepo, "config", "set", "witness.sandbox", "none")
    brat(brepo, "config", "set", "witness.sandbox_network", "none")
    brat(brepo, "config", "set", "witness.sandbox_hide", '["~/.aws", "/srv/secrets"]')
    brat(brepo, "config", "set", "refinery.sandbox", "bwrap")
    assert brat_json(brepo, "config", "get", "witness.sandbox_hide")["value"] == \
        ["~/.aws", "/srv/secrets"]
    assert brat_json(brepo, "status")["sandbox"] == "none"
    assert {i["sandbox"] for i in brat_json(brepo, "engine", "list")} == {"none"}
    assert "SESSIONS (sandbox: none)" in brat(brepo, "status").out


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")
def test_status_and_engine_list_say_sessions_run_in_bwrap_by_default(brepo):
    assert brat_json(brepo, "status")["sandbox"] == "bwrap"
    said = brat(brepo, "engine", "list").out
    assert "sessions run in: bwrap: capabilities dropped, no new privileges" in said
    assert "(witness.sandbox = auto)" in said
    assert "no capabilities" in brat_json(brepo, "status")["confinement"]


def test_a_hub_that_runs_checks_sandboxes_them_by_default_and_a_clone_does_not(monkeypatch):
    from git_brat.brat import config as c
    from git_brat.brat.engines import sandbox
    from git_brat.brat.refinery.check import sandbox_mode
    monkeypatch.setattr(sandbox, "bwrap_path", lambda: "/usr/bin/bwrap")
    hub = c.Config(hub=c.Hub(run_checks=True))
    assert sandbox_mode(hub, bare=True) == "bwrap"
    assert sandbox_mode(c.Config(), bare=False) == "none"
    assert sandbox_mode(c.Config(refinery=c.Refinery(sandbox="bwrap")), bare=False) == "bwrap"
    assert sandbox_mode(c.Config(refinery=c.Refinery(sandbox="none")), bare=True) == "none"
    monkeypatch.setattr(sandbox, "bwrap_path", lambda: None)
    assert sandbox_mode(hub, bare=True) == "none"
