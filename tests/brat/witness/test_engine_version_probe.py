"""Asking an engine its version runs only a shipped preset's binary installed outside the
repository, in an empty directory, bounded: never a command from the config or the tree."""

from __future__ import annotations

import json
import os


from helpers import git


def _script(path, marker, version="1.0.0"):
    path.write_text(f"#!/bin/sh\necho \"$(pwd) $*\" >> {marker}\necho '{version}'\n")
    path.chmod(0o755)


def test_listing_engines_runs_no_command_from_the_committed_config(bench, repo, tmp_path):
    marker = tmp_path / "PWNED"
    (repo / "tools").mkdir()
    _script(repo / "tools" / "claude", marker)
    _script(tmp_path / "my-agent", marker)
    bench.config(engines__claude__command='["./tools/claude", "-p", "{prompt}"]',
                 engines__mine__command=json.dumps([str(tmp_path / "my-agent"), "{prompt}"]))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "pin the claude wrapper")
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    infos = {i["name"]: i for i in bench.json("engine", "list", env=env)}
    assert infos["claude"]["version"] == "" and infos["mine"]["version"] == ""
    bench.json("engine", "show", "mine", env=env)
    assert not marker.exists()
    # The witness asks the version of the engine it is about to run: not of this one either.
    bench.task(bench.convoy(), "t", "commit a")
    bench.config(witness__sandbox="none")   # the marker lies outside a session's sandbox
    bench.brat("witness", "run", "--once", "--engine", "mine", env=env, check=False)
    assert "--version" not in marker.read_text()     # it ran once: for the task


def test_a_preset_binary_inside_the_repository_is_not_asked_its_version(bench, repo, tmp_path):
    marker = tmp_path / "PWNED"
    (repo / "tools").mkdir()
    _script(repo / "tools" / "codex", marker)
    env = {"PATH": f"{repo / 'tools'}{os.pathsep}{bench.env['PATH']}",
           "XDG_CACHE_HOME": str(tmp_path / "cache")}
    info = bench.json("engine", "show", "codex", env=env)
    assert info["path"] == str(repo / "tools" / "codex") and info["version"] == ""
    assert not marker.exists()


def test_an_installed_preset_is_asked_in_an_empty_directory_not_the_checkout(
        bench, repo, tmp_path):
    marker = tmp_path / "asked"
    bindir = tmp_path / "bin"
    bindir.mkdir()
    _script(bindir / "codex", marker, "codex-cli 0.9.9")
    env = {"PATH": f"{bindir}{os.pathsep}{bench.env['PATH']}",
           "XDG_CACHE_HOME": str(tmp_path / "cache")}
    assert bench.json("engine", "show", "codex", env=env)["version"] == "codex-cli 0.9.9"
    cwd, args = marker.read_text().split()
    assert args == "--version"
    assert not cwd.startswith(str(repo)) and not os.path.exists(cwd)
