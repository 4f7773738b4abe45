"""Knowledge notes (`git brat kb`): kept as events, listed, searched, forgotten; added by agents
through the witness's gate; the notes relevant to a task reach its agent's prompt, capped; the
mayor plans with them."""

from __future__ import annotations

import json

import pytest

from helpers import brat, brat_json, git, grite


@pytest.fixture
def krepo(repo):
    brat(repo, "init")
    return repo


def test_a_note_is_added_listed_searched_shown_and_forgotten_and_its_history_stays(krepo):
    nid = brat_json(krepo, "kb", "add", "--kind", "pitfall", "--path", "src/parser/",
                    "--tag", "parser", "-m", "Tokens are bytes\nnever str: decode at the edge")["id"]
    other = brat_json(krepo, "kb", "add", "-m", "The release is cut on Fridays")["id"]
    assert {x["id"] for x in brat_json(krepo, "kb", "list")} == {nid, other}
    shown = brat_json(krepo, "kb", "show", nid[:8])
    assert shown["kind"] == "pitfall" and shown["title"] == "Tokens are bytes"
    assert shown["paths"] == ["src/parser/"] and shown["tags"] == ["parser"]
    assert [x["id"] for x in brat_json(krepo, "kb", "search", "PARSER", "decode")] == [nid]
    brat(krepo, "kb", "forget", nid, "-r", "fixed upstream")
    assert [x["id"] for x in brat_json(krepo, "kb", "list")] == [other]
    assert brat_json(krepo, "kb", "search", "decode") == []
    everything = {x["id"]: x["status"] for x in brat_json(krepo, "kb", "list", "--all")}
    assert everything == {nid: "forgotten", other: "kept"}


def test_bad_input_writes_nothing_and_says_why_on_one_line(krepo):
    tips = git(krepo, "for-each-ref", "refs/grite/")
    for args in (["--kind", "rumour", "-m", "x"], ["-m", "   "], ["-m", "x" * 9000],
                 ["--tag", "a\nb", "-m", "x"]):
        proc = brat(krepo, "kb", "add", *args, "--json", check=False)
        assert proc.returncode == 2, (args, proc.err)
        assert proc.out == "" and len(proc.err.strip().splitlines()) == 1
    assert git(krepo, "for-each-ref", "refs/grite/") == tips
    brat(krepo, "kb", "add", "-m", "a good note")   # (where a good one does write)
    assert git(krepo, "for-each-ref", "refs/grite/") != tips


def test_notes_sync_to_another_clone_through_the_log(krepo, tmp_path):
    hub = tmp_path / "hub.git"
    git(tmp_path, "init", "-q", "--bare", str(hub))
    git(krepo, "remote", "add", "origin", str(hub))
    git(krepo, "push", "-q", "origin", "main")
    grite(krepo, "remote", "add-sync", "origin")
    nid = brat_json(krepo, "kb", "add", "--kind", "convention", "-m", "Errors carry exit codes")["id"]
    grite(krepo, "sync")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(hub), str(clone))
    brat(clone, "init")
    grite(clone, "remote", "add-sync", "origin", check=False)   # (init may have done it)
    grite(clone, "sync")
    [n] = brat_json(clone, "kb", "list")
    assert n["id"] == nid and n["kind"] == "convention"


def test_the_notes_about_a_tasks_paths_reach_its_agents_prompt_and_others_do_not(
        repo, tmp_path):
    from witnesskit import make_bench
    bench = make_bench(repo, tmp_path / "bench")
    bench.brat("kb", "add", "--kind", "pitfall", "--path", "src/parser/", "-m",
               "NOTE-PARSER-1: the parser's tokens are bytes")
    bench.brat("kb", "add", "--kind", "convention", "--path", "docs/", "-m",
               "NOTE-DOCS-2: docs are in British English")
    bench.brat("kb", "add", "--kind", "architecture", "-m",
               "NOTE-GENERAL-3: every git call lives in git_brat/git/")
    forgotten = bench.json("kb", "add", "--kind", "memory", "--path", "src/parser/", "-m",
                           "NOTE-GONE-4: stale")["id"]
    bench.brat("kb", "forget", forgotten)
    c = bench.convoy()
    bench.brat("task", "create", "--convoy", c, "Fix the lexer", "--paths", "src/parser/lex.py",
               "-b", "FAKE: write src/parser/lex.py x\nFAKE: commit lexer")
    bench.brat("witness", "run", "--once")
    (run,) = bench.runs()
    assert "NOTE-PARSER-1" in run["prompt"] and "NOTE-GENERAL-3" in run["prompt"]
    assert "NOTE-DOCS-2" not in run["prompt"] and "NOTE-GONE-4" not in run["prompt"]


def test_a_prompts_notes_are_capped_in_size_the_closest_kept():
    from git_brat.brat import kb
    many = [kb.Note(id=f"{i:032x}", kind="memory", title="t", text=f"NOTE-{i} " + "x" * 900,
                    created_at=i) for i in range(40)]
    close = kb.Note(id="f" * 32, kind="pitfall", title="t", text="CLOSE " + "y" * 900,
                    paths=["src/a.py"], created_at=0)
    found = kb.relevant([*many, close], ["src/a.py"], "", budget=kb.PROMPT_BUDGET)
    assert found[0].id == close.id
    assert sum(len(n.text) for n in found) <= kb.PROMPT_BUDGET
    assert len(found) < len(many)


def test_a_sandboxed_agent_adds_a_note_through_the_gate_as_its_session(repo, tmp_path):
    from witnesskit import make_bench
    bench = make_bench(repo, tmp_path / "bench")
    t = bench.task(bench.convoy(), "Learn", "write a.txt x",
                   "kb pitfall src/a.txt NOTE-FROM-AGENT: a.txt must end with a newline",
                   "commit a")
    bench.brat("witness", "run", "--once")
    [s] = bench.sessions(t)
    assert s["sandbox"] == "bwrap"   # the gate is the sandboxed agent's only way to the log
    [n] = bench.json("kb", "list")
    assert n["text"].startswith("NOTE-FROM-AGENT") and n["kind"] == "pitfall"
    assert n["task"] == t and n["paths"] == ["src/a.txt"]
    assert bench.show(t)["status"] == "needs-review"


def test_the_mayor_plans_with_the_projects_notes(tmp_path):
    import mayorkit  # noqa: F401
    from git_brat.brat import kb
    from git_brat.brat.config import Config
    from git_brat.brat.mayor import context
    from git_brat.grite.repo import Grite
    from helpers import make_repo
    repo = make_repo(tmp_path / "m")
    brat(repo, "init")
    brat(repo, "kb", "add", "--kind", "architecture", "--path", "src/", "-m",
         "NOTE-MAYOR-9: the core never imports the CLI")
    g = Grite.open(str(repo))
    text = context.prompt(g, Config(), None, "Plan a refactor", resumed=False)
    assert "NOTE-MAYOR-9" in text and kb.KINDS[0] in text


def test_a_forged_note_whose_fields_are_mistyped_is_rejected_whole_and_never_listed(krepo):
    from gritekit import pusher_append
    from git_brat.grite.log.wal import Draft
    from git_brat.grite.model import events as ev
    good = brat_json(krepo, "kb", "add", "-m", "a real note")["id"]
    for fields in ({"note_kind": 7, "title": "t", "body": "FORGED-1", "status": "kept"},
                   {"note_kind": "pitfall", "title": "t", "body": "FORGED-2", "status": "kept",
                    "tags": ["ok", {"nested": "map"}]},
                   {"note_kind": "pitfall", "title": "t", "body": "FORGED-3", "status": "kept",
                    "tags": ["\x1b[31mred"]}):
        pusher_append(krepo, [Draft(ev.new_entity_id(), ev.Create("note", fields))],
                      "grite: note.add")
    listed = brat(krepo, "kb", "list", "--all", "--json").out
    assert "FORGED" not in listed and good in listed


def test_one_session_adds_at_most_twenty_notes_through_the_gate(repo, tmp_path):
    """Every note is an event every clone replays: an agent steered to flood the log stops at
    the gate's bound."""
    from git_brat.brat.witness.gate import MAX_NOTES
    from witnesskit import make_bench
    bench = make_bench(repo, tmp_path / "bench")
    bench.config(witness__max_retries="0")
    lines = [f"kb memory src/a.txt NOTE-FLOOD-{i}" for i in range(MAX_NOTES + 2)]
    bench.task(bench.convoy(), "Flood", *lines, "write a.txt x", "commit a")
    bench.brat("witness", "run", "--once", check=False)
    notes = bench.json("kb", "list")
    assert len(notes) == MAX_NOTES and MAX_NOTES == 20
