"""Committed workflow templates are hostile input: bounded in depth and size, regular files only;
a bad one is one line of error, never a traceback."""

from __future__ import annotations

import os

from bratkit import fail
from git_brat.brat.workflows import MAX_BYTES
from helpers import brat, brat_json


def _dir(repo):
    d = repo / ".brat" / "workflows"
    d.mkdir(parents=True, exist_ok=True)
    return d


def test_a_50000_deep_template_is_one_line_of_error_and_the_list_still_works(brepo):
    (_dir(brepo) / "deep.yaml").write_text(
        "type: workflow\ndescription: d\ntitle: x\nsteps: " + "[" * 50000 + "]" * 50000 + "\n")
    listed = brat(brepo, "workflow", "list", check=False)
    assert listed.returncode == 0 and "Traceback" not in listed.err
    (row,) = [line for line in listed.out.splitlines() if line.startswith("deep ")]
    assert "INVALID" in row and "deep.yaml:4" in row
    [info] = [i for i in brat_json(brepo, "workflow", "list") if i["name"] == "deep"]
    assert info["error"].startswith(".brat/workflows/deep.yaml:4: malformed YAML: nested deeper")
    code, msg = fail(brepo, "workflow", "show", "deep")
    assert code == 2 and msg == info["error"]
    code, _msg = fail(brepo, "workflow", "run", "deep", "--dry-run")
    assert code == 2


def test_an_oversized_or_symlinked_template_is_not_read(brepo, tmp_path):
    d = _dir(brepo)
    (d / "big.yaml").write_text("type: workflow\ntitle: x\n# " + "x" * MAX_BYTES + "\n")
    secret = tmp_path / "secret.yaml"
    secret.write_text("type: workflow\ndescription: THE-SECRET\ntitle: x\nsteps:\n"
                      "  - id: a\n    title: A\n")
    os.symlink(secret, d / "link.yaml")
    code, msg = fail(brepo, "workflow", "show", "big")
    assert code == 2 and msg.startswith(".brat/workflows/big.yaml: larger than")
    code, msg = fail(brepo, "workflow", "show", "link")
    assert code == 2 and "not a regular file" in msg and "THE-SECRET" not in msg
    infos = {i["name"]: i for i in brat_json(brepo, "workflow", "list")}
    assert infos["big"]["error"] and infos["link"]["error"]
    assert "THE-SECRET" not in str(infos)
