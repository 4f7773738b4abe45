"""A user takes the whole board out of git: `git grite export` holds issues, convoys and tasks
(with their comments and state) as JSON, Markdown or CSV; `import` takes the issues back."""

from __future__ import annotations

import csv
import io
import json

from bratkit import convoy, move, task
from helpers import brat, grite, grite_json, make_repo, status, wal_tip


def board(repo) -> tuple[str, str, str, str]:
    cid = convoy(repo, "Parser")
    a = task(repo, cid, "Tokenizer", "--priority", "1", "--paths", "src/lex.py")
    b = task(repo, cid, "Grammar", "--needs", a[:7])
    brat(repo, "task", "comment", a, "-m", "Use a hand-written lexer.")
    move(repo, a, "running")
    issue = grite(repo, "issue", "create", "=HYPERLINK(\"http://x\")", "-b", "line 1\nline 2"
                  ).out.strip()
    return cid, a, b, issue


def test_the_json_export_holds_convoys_and_tasks_with_comments_and_state(brepo):
    cid, a, b, issue = board(brepo)
    before = status(brepo)
    doc = json.loads(grite(brepo, "export").out)
    assert [i["id"] for i in doc["issues"]] == [issue]
    (c,) = doc["convoys"]
    assert (c["id"], c["title"], c["tasks"], c["statuses"]) == (
        cid, "Parser", [a, b], {"queued": 1, "running": 1})
    tasks = {t["id"]: t for t in doc["tasks"]}
    assert (tasks[a]["status"], tasks[a]["priority"], tasks[a]["paths"], tasks[a]["convoy"]) == (
        "running", 1, ["src/lex.py"], cid)
    assert [x["body"] for x in tasks[a]["comments"]] == ["Use a hand-written lexer."]
    assert tasks[b]["needs"] == [a] and tasks[b]["status"] == "queued"
    assert status(brepo) == before


def test_the_csv_export_is_one_row_each_and_never_a_formula(brepo):
    cid, a, b, issue = board(brepo)
    rows = list(csv.DictReader(io.StringIO(grite(brepo, "export", "--format", "csv").out)))
    assert [(r["kind"], r["id"]) for r in rows] == [
        ("issue", issue), ("convoy", cid), ("task", a), ("task", b)]
    by_id = {r["id"]: r for r in rows}
    assert by_id[issue]["title"] == "'=HYPERLINK(\"http://x\")", "a formula is quoted"
    assert by_id[issue]["body"] == "line 1\nline 2"
    assert (by_id[a]["state"], by_id[a]["group"], by_id[a]["comments"]) == ("running", cid, "1")
    assert by_id[cid]["state"] == "queued:1 running:1"
    assert grite(brepo, "export", "--format", "csv", "--json", check=False).returncode == 2


def test_the_markdown_export_has_a_section_for_convoys_and_tasks(brepo):
    cid, a, b, _issue = board(brepo)
    md = grite(brepo, "export", "--format", "md").out
    assert "# Convoys" in md and f"## Parser (`{cid[:7]}`, 1 queued, 1 running)" in md
    assert "# Tasks" in md and f"## Tokenizer (`{a[:7]}`, running)" in md
    assert f"needs `{a[:7]}`" in md and "Use a hand-written lexer." in md


def test_an_export_round_trips_its_issues_into_a_fresh_repository(brepo, tmp_path):
    board(brepo)
    exported = tmp_path / "board.json"
    grite(brepo, "export", "-o", str(exported))
    fresh = make_repo(tmp_path / "fresh")
    grite(fresh, "init")
    result = grite_json(fresh, "import", str(exported))
    doc = json.loads(exported.read_text())
    assert result["created"] == [i["id"] for i in doc["issues"]]
    assert result["left_out"] == {"convoys": 1, "tasks": 2}, "said, never silently dropped"
    again = json.loads(grite(fresh, "export").out)
    assert [(i["id"], i["title"], i["body"]) for i in again["issues"]] == \
        [(i["id"], i["title"], i["body"]) for i in doc["issues"]]
    tip = wal_tip(fresh)
    assert grite_json(fresh, "import", str(exported))["created"] == []
    assert wal_tip(fresh) == tip
    assert "1 convoys left out" in grite(fresh, "import", str(exported)).out
