"""A user moves issues in and out in bulk: export (JSON, Markdown) and import."""

from __future__ import annotations

import json

from helpers import git, grite, grite_json, issues, make_repo, wal_tip
import subprocess


def test_export_then_import_into_another_repository_round_trips(grepo, tmp_path):
    a = grite(grepo, "issue", "create", "Parser", "-b", "body A", "-l", "bug").out.strip()
    b = grite(grepo, "issue", "create", "Lexer", "-a", "dana").out.strip()
    grite(grepo, "issue", "comment", a, "-m", "first")
    grite(grepo, "dep", "add", a, "--on", b)
    grite(grepo, "issue", "close", b)
    exported = grite(grepo, "export").out
    doc = json.loads(exported)
    assert doc["format"] == "grite-export" and len(doc["issues"]) == 2

    other = make_repo(tmp_path / "other")
    grite(other, "init")
    (tmp_path / "x.json").write_text(exported)
    result = grite_json(other, "import", str(tmp_path / "x.json"))
    assert sorted(result["created"]) == sorted([a, b])
    shown = grite_json(other, "issue", "show", a)
    assert shown["body"] == "body A" and shown["labels"] == ["bug"]
    assert [c["body"] for c in shown["comments"]] == ["first"]
    assert shown["deps"]["depends_on"] == [b]
    assert grite_json(other, "issue", "show", b)["state"] == "closed"

    tip = wal_tip(other)
    again = grite_json(other, "import", str(tmp_path / "x.json"))
    assert again["created"] == [] and sorted(again["skipped"]) == sorted([a, b])
    assert wal_tip(other) == tip, "re-importing must create nothing"


def test_import_of_a_plain_array_is_one_batch_and_idempotent(grepo, tmp_path):
    f = tmp_path / "plain.json"
    f.write_text(json.dumps([{"title": "One"}, {"title": "Two", "body": "b", "labels": ["x"]},
                             {"title": "Three", "state": "closed"}]))
    tip = wal_tip(grepo)
    grite(grepo, "import", str(f))
    assert git(grepo, "rev-list", "--count", f"{tip}..refs/grite/wal") == "1"
    listed = grite_json(grepo, "issue", "list", "--state", "all")
    assert sorted(i["title"] for i in listed) == ["One", "Three", "Two"]
    grite(grepo, "import", str(f))
    assert len(grite_json(grepo, "issue", "list", "--state", "all")) == 3


def test_import_reads_stdin(grepo):
    grite(grepo, "import", "-", input='[{"title": "From a pipe"}]')
    assert grite_json(grepo, "issue", "list")[0]["title"] == "From a pipe"


def test_markdown_export_is_readable(grepo):
    a = grite(grepo, "issue", "create", "Parser", "-b", "Details here", "-l", "bug").out.strip()
    grite(grepo, "issue", "comment", a, "-m", "seen it")
    md = grite(grepo, "export", "--format", "md").out
    assert md.startswith("# Issues")
    assert f"## Parser (`{a[:7]}`, open)" in md and "Details here" in md
    assert "labels: bug" in md and "seen it" in md


def test_export_to_a_file(grepo, tmp_path):
    grite(grepo, "issue", "create", "Parser")
    grite(grepo, "export", "-o", str(tmp_path / "out.json"))
    assert json.loads((tmp_path / "out.json").read_text())["issues"][0]["title"] == "Parser"


def test_import_refuses_an_id_that_is_not_exactly_32_hex_digits(grepo, tmp_path):
    tip = wal_tip(grepo)
    for bad in ("0123456789abcdef0123456789abcdef\n", "0123456789ABCDEF0123456789ABCDEF", "12"):
        f = tmp_path / "bad.json"
        f.write_text(json.dumps([{"id": bad, "title": "x"}]))
        proc = grite(grepo, "import", str(f), check=False)
        assert proc.returncode == 2 and proc.out == "", (bad, proc.err)
    assert wal_tip(grepo) == tip


def test_concurrent_imports_of_one_file_create_everything_once(grepo, tmp_path):
    f = tmp_path / "one.json"
    f.write_text(json.dumps([{"title": "Shared", "comments": [{"body": "once"}]}]))
    procs = [subprocess.Popen(["git", "grite", "import", str(f)], cwd=grepo,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(6)]
    for p in procs:
        p.communicate(timeout=120)
        assert p.returncode == 0
    listed = grite_json(grepo, "issue", "list")
    assert len(listed) == 1 and listed[0]["comments"] == 1


def test_an_import_whose_dependencies_form_a_cycle_is_refused(grepo, tmp_path):
    x, y = "a" * 32, "b" * 32
    doc = {"format": "grite-export", "version": 1, "issues": [
        {"id": x, "title": "X", "deps": {"depends_on": [y]}},
        {"id": y, "title": "Y", "deps": {"depends_on": [x]}}]}
    f = tmp_path / "cycle.json"
    f.write_text(json.dumps(doc))
    tip = wal_tip(grepo)
    proc = grite(grepo, "import", str(f), check=False)
    assert proc.returncode == 5 and "cycle" in proc.err and wal_tip(grepo) == tip


def test_export_takes_json_like_every_command(grepo):
    issues(grepo, "x")
    doc = json.loads(grite(grepo, "export", "--json").out)
    assert [i["title"] for i in doc["issues"]] == ["x"]
    assert grite(grepo, "export", "--json", "--format", "md", check=False).returncode == 2


def test_import_keeps_two_issues_that_share_a_title(grepo, tmp_path):
    f = tmp_path / "issues.json"
    f.write_text(json.dumps([{"title": "same"}, {"title": "same"}]))
    assert len(grite_json(grepo, "import", str(f))["created"]) == 2
    assert grite_json(grepo, "import", str(f))["created"] == []   # still idempotent
    assert len(grite_json(grepo, "issue", "list")) == 2
