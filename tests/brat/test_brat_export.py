"""A user takes the whole board out of git: `git grite export` holds issues, convoys and tasks
(with their comments and state) as JSON, Markdown or CSV; `import` takes them all back."""

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


def test_an_export_round_trips_its_issues_convoys_and_tasks_into_a_fresh_repository(
        brepo, tmp_path):
    from git_brat.grite.log.wal import Draft
    from git_brat.grite.model import events as ev
    from git_brat.grite.repo import Grite
    cid, a, b, issue = board(brepo)
    other = convoy(brepo, "Chores", "-b", "small things")
    done = task(brepo, other, "Rename", "--priority", "0")
    move(brepo, done, "running", "needs-review", "merging", "merged")
    failed = task(brepo, other, "Flaky")
    move(brepo, failed, "running", "failed")
    parked = task(brepo, other, "Later")
    move(brepo, parked, "blocked")
    brat(brepo, "task", "comment", parked, "-m", "after the release")
    Grite.open(str(brepo)).append([Draft(b, ev.AddTo("labels", "parser"))], "test: a label")
    exported = tmp_path / "board.json"
    grite(brepo, "export", "-o", str(exported))
    doc = json.loads(exported.read_text())

    fresh = make_repo(tmp_path / "fresh")
    grite(fresh, "init")
    result = grite_json(fresh, "import", str(exported))
    assert sorted(result["created"]) == sorted([issue, cid, other, a, b, done, failed, parked])
    assert (result["convoys"], result["requeued"]) == ([cid, other], [a])
    again = json.loads(grite(fresh, "export").out)
    assert [(i["id"], i["title"], i["body"]) for i in again["issues"]] == \
        [(i["id"], i["title"], i["body"]) for i in doc["issues"]]

    def work(d, key, fields):
        return sorted(tuple(str(sorted(x[f]) if isinstance(x[f], list) else x[f])
                            for f in fields) + (str([c["body"] for c in x["comments"]]),)
                      for x in d[key])
    assert work(again, "convoys", ("id", "title", "body", "workflow", "tasks")) == \
        work(doc, "convoys", ("id", "title", "body", "workflow", "tasks"))
    fields = ("id", "title", "body", "convoy", "priority", "paths", "needs", "labels", "step")
    assert work(again, "tasks", fields) == work(doc, "tasks", fields)
    statuses = {t["id"]: t["status"] for t in again["tasks"]}
    assert statuses == {a: "queued", b: "queued", done: "merged", failed: "failed",
                        parked: "blocked"}, "in flight (running) comes back queued"
    # every move one the state machine allows: replay rejected none
    assert [f for f in grite_json(fresh, "doctor")["findings"] if f["kind"] == "rejected"] == []

    tip = wal_tip(fresh)
    second = grite_json(fresh, "import", str(exported))
    assert second["created"] == [] and len(second["skipped"]) == 8
    assert wal_tip(fresh) == tip
    assert "8 already present" in grite(fresh, "import", str(exported)).out


def test_an_import_naming_a_convoy_it_lacks_writes_nothing(brepo, tmp_path):
    board(brepo)
    doc = json.loads(grite(brepo, "export").out)
    doc["convoys"] = []                  # the tasks' convoy is neither in the file nor there
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    fresh = make_repo(tmp_path / "fresh")
    grite(fresh, "init")
    tip = wal_tip(fresh)
    out = grite(fresh, "import", str(bad), check=False)
    assert out.returncode == 2 and "neither in the file nor known here" in out.err
    assert len(out.err.splitlines()) == 1 and wal_tip(fresh) == tip, "not even its issues"
    doc["convoys"] = json.loads(grite(brepo, "export").out)["convoys"]
    doc["tasks"][0]["status"] = "finished"
    bad.write_text(json.dumps(doc))
    out = grite(fresh, "import", str(bad), check=False)
    assert out.returncode == 2 and "$.tasks[0]: status 'finished'" in out.err
    assert wal_tip(fresh) == tip
