"""Bad input gives one clear stderr line, a documented exit code, and writes nothing."""

from __future__ import annotations

import pytest

from helpers import grite, run, status, wal_tip
from git_brat.grite.issues import import_key


def _colliding_titles(prefix_len: int = 4) -> tuple[str, str]:
    seen = {}
    for i in range(200000):
        title = f"t{i}"
        key = import_key(title, "")[:prefix_len]
        if key in seen:
            return seen[key], title
        seen[key] = title
    raise AssertionError("no collision found")


def _refused(repo, *args, code: int) -> str:
    tip, before = wal_tip(repo), status(repo)
    proc = grite(repo, *args, check=False)
    assert proc.returncode == code, proc.err
    lines = proc.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("git-grite: error:"), proc.err
    assert proc.out == ""
    assert wal_tip(repo) == tip, "a refused command must not append to the log"
    assert status(repo) == before
    return lines[0]


@pytest.fixture
def issue(grepo):
    return grite(grepo, "issue", "create", "Existing").out.strip()


def test_empty_title_is_refused(grepo):
    assert "title must not be empty" in _refused(grepo, "issue", "create", "   ", code=2)


def test_unknown_id_is_refused(grepo, issue):
    assert "no issue with id ffffffff" in _refused(grepo, "issue", "close", "ffffffff", code=3)
    _refused(grepo, "issue", "show", "0000000000", code=3)
    _refused(grepo, "issue", "comment", "ffffffff", "-m", "x", code=3)


def test_id_that_is_not_hex_is_refused(grepo, issue):
    assert "not a valid issue id" in _refused(grepo, "issue", "close", "zz-top", code=2)


def test_ambiguous_prefix_is_refused_naming_the_candidates(grepo, tmp_path):
    a, b = _colliding_titles()
    f = tmp_path / "two.json"
    f.write_text(f'[{{"title": "{a}"}}, {{"title": "{b}"}}]')
    grite(grepo, "import", str(f))
    prefix = import_key(a, "")[:4]
    line = _refused(grepo, "issue", "close", prefix, code=2)
    assert "ambiguous" in line and import_key(a, "")[:12] in line and import_key(b, "")[:12] in line
    grite(grepo, "issue", "close", import_key(a, "")[:8])   # a longer prefix works


def test_bad_flags_are_refused(grepo, issue):
    assert "--bogus" in _refused(grepo, "issue", "create", "x", "--bogus", code=2)
    _refused(grepo, "issue", "list", "--state", "sideways", code=2)
    _refused(grepo, "dep", "add", issue, "--on", issue, "--type", "loves", code=2)
    _refused(grepo, "issue", "comment", issue, code=2)          # -m is required


def test_nothing_to_change_is_refused(grepo, issue):
    _refused(grepo, "issue", "update", issue, code=2)
    _refused(grepo, "issue", "label", issue, code=2)
    _refused(grepo, "issue", "label", issue, "--add", "two words", code=2)


def test_bad_import_writes_nothing(grepo, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('[{"title": "ok"}, {"title": ""}]')
    assert "$[1]" in _refused(grepo, "import", str(bad), code=2)
    bad.write_text('[{"title": "ok"}, {"title": "x", "state": "wip"}]')
    _refused(grepo, "import", str(bad), code=2)
    bad.write_text('{not json')
    assert "not valid JSON" in _refused(grepo, "import", str(bad), code=2)
    bad.write_text('[{"body": "no title"}]')
    assert "title" in _refused(grepo, "import", str(bad), code=2)
    _refused(grepo, "import", str(tmp_path / "missing.json"), code=3)


def test_export_to_an_unwritable_place_is_one_line(grepo, tmp_path):
    proc = grite(grepo, "export", "-o", str(tmp_path / "missing" / "x.json"), check=False)
    assert proc.returncode == 1 and proc.err.count("\n") == 1 and "cannot write" in proc.err


def test_arguments_that_are_not_utf8_are_refused_in_one_line(grepo):
    proc = run(["git", "grite", "issue", "create", b"caf\xff".decode("utf-8", "surrogateescape")],
               grepo, check=False)
    assert proc.returncode == 2 and proc.err.count("\n") == 1 and "UTF-8" in proc.err


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
