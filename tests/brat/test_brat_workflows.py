"""`git brat workflow …`: templates → a convoy and its tasks in one batch, or a precise error and nothing."""

from __future__ import annotations

import os
import textwrap

import pytest

from bratkit import fail, log_commits
from git_brat.brat import workflows
from helpers import brat, brat_json, status, wal_tip

SHIPPED = {"feature": ("workflow", ["design", "implement", "test"]),
           "code-review": ("convoy", ["correctness", "security", "performance", "synthesis"]),
           "fix-bug": ("workflow", ["reproduce", "fix", "regression-test"])}


def _write(repo, name, text) -> None:
    d = repo / ".brat" / "workflows"
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_text(textwrap.dedent(text).lstrip("\n"))


def test_shipped_templates_are_listed_and_run_by_name_without_copying(brepo):
    infos = {i["name"]: i for i in brat_json(brepo, "workflow", "list")}
    assert set(infos) == set(SHIPPED)
    for name, (wtype, _steps) in SHIPPED.items():
        assert infos[name]["type"] == wtype and infos[name]["shipped"] and infos[name]["error"] is None
    out = brat(brepo, "workflow", "list").out
    assert all(len(line) <= 80 for line in out.splitlines()) and "shipped" in out
    before = status(brepo)

    commits = log_commits(brepo)
    run = brat_json(brepo, "workflow", "run", "feature", "--var", "feature=CSV export")
    assert log_commits(brepo) == commits + 1              # convoy + every task: one batch
    assert [t["step"] for t in run["tasks"]] == ["design", "implement", "test"]
    ids = {t["step"]: t["id"] for t in run["tasks"]}
    c = brat_json(brepo, "convoy", "show", run["convoy"])
    assert c["title"] == "Feature: CSV export" and c["workflow"] == "feature"
    assert c["vars"]["feature"] == "CSV export" and c["vars"]["area"] == "the code base"
    tasks = {t["step"]: t for t in c["tasks"]}
    assert tasks["design"]["title"] == "Design: CSV export" and tasks["design"]["priority"] == 1
    assert tasks["implement"]["needs"] == [ids["design"]]
    assert tasks["test"]["needs"] == [ids["implement"]]
    body = brat_json(brepo, "task", "show", ids["implement"])["body"]
    assert "Implement this feature: CSV export" in body and "{{" not in body
    assert [t["id"] for t in brat_json(brepo, "task", "ready")] == [ids["design"]]

    review = brat_json(brepo, "workflow", "run", "code-review", "--var", "target=branch topic",
                       "--var", "focus=Check the SQL.")
    legs = {t["step"]: t for t in review["tasks"]}
    assert list(legs) == SHIPPED["code-review"][1]
    assert sorted(legs["synthesis"]["needs"]) == sorted(legs[s]["id"] for s in
                                                        ("correctness", "security", "performance"))
    ready = {t["id"] for t in brat_json(brepo, "task", "ready", "--convoy", review["convoy"])}
    assert ready == {legs[s]["id"] for s in ("correctness", "security", "performance")}
    assert "Check the SQL." in brat_json(brepo, "task", "show", legs["security"]["id"])["body"]

    fix = brat_json(brepo, "workflow", "run", "fix-bug", "--var", "bug=Crash on empty input")
    steps = [t["step"] for t in fix["tasks"]]
    assert steps == SHIPPED["fix-bug"][1]
    assert fix["title"] == "Fix: Crash on empty input"
    assert status(brepo) == before                          # nothing in the work tree


def test_run_human_output_and_dry_run_writes_nothing(brepo):
    tip = wal_tip(brepo)
    out = brat(brepo, "workflow", "run", "fix-bug", "--var", "bug=Off by one", "--dry-run").out
    assert out.startswith('would create convoy') and "regression-test" in out
    assert wal_tip(brepo) == tip
    dry = brat_json(brepo, "workflow", "run", "fix-bug", "--var", "bug=Off by one", "--dry-run")
    assert dry["dry_run"] and len(dry["tasks"]) == 3
    assert wal_tip(brepo) == tip and brat_json(brepo, "convoy", "list") == []
    out = brat(brepo, "workflow", "run", "fix-bug", "--var", "bug=Off by one").out
    assert out.startswith("created convoy") and "(needs reproduce)" in out


def test_show_describes_inputs_and_steps(brepo):
    wf = brat_json(brepo, "workflow", "show", "code-review")
    assert wf["type"] == "convoy" and wf["source"] == "shipped:code-review.yaml"
    assert [(i["name"], i["required"]) for i in wf["inputs"]] == [("target", True), ("focus", False)]
    assert [s["role"] for s in wf["steps"]] == ["leg", "leg", "leg", "synthesis"]
    out = brat(brepo, "workflow", "show", "feature").out
    assert "required" in out and "(needs design)" in out
    code, msg = fail(brepo, "workflow", "show", "nope")
    assert code == 3 and "no workflow named 'nope' (available: code-review, feature, fix-bug)" in msg


def test_copy_then_the_local_template_overrides_the_shipped_one(brepo):
    out = brat_json(brepo, "workflow", "copy", "feature")
    assert out == {"name": "feature", "path": ".brat/workflows/feature.yaml"}
    local = brepo / ".brat" / "workflows" / "feature.yaml"
    shipped = os.path.join(workflows.shipped_dir(), "feature.yaml")
    assert local.read_bytes() == open(shipped, "rb").read()
    assert "?? .brat/workflows/feature.yaml" in status(brepo)
    local.write_text(local.read_text().replace('title: "Feature: {{feature}}"',
                                               'title: "Our feature: {{feature}}"'))
    info = {i["name"]: i for i in brat_json(brepo, "workflow", "list")}["feature"]
    assert info["overrides"] and not info["shipped"] and info["source"] == ".brat/workflows/feature.yaml"
    run = brat_json(brepo, "workflow", "run", "feature", "--var", "feature=X")
    assert run["title"] == "Our feature: X"
    before = local.read_bytes()
    code, msg = fail(brepo, "workflow", "copy", "feature")
    assert code == 2 and "already exists" in msg and "--force" in msg
    assert local.read_bytes() == before
    brat(brepo, "workflow", "copy", "feature", "--force")
    assert local.read_bytes() == open(shipped, "rb").read()
    code, msg = fail(brepo, "workflow", "copy", "mine")
    assert code == 3 and "no shipped workflow named 'mine'" in msg


def test_a_local_convoy_template_with_a_synthesis_on_some_legs(brepo):
    _write(brepo, "audit.yaml", """
        type: convoy
        description: Audit a module.
        inputs:
          module:
            required: true
          depth:
            default: shallow
        title: "Audit {{module}}"
        legs:
          - id: deps
            title: "Audit dependencies of {{module}}"
            priority: 0
            paths: ["{{module}}/requirements.txt"]
          - id: licences
            title: "Audit licences of {{module}}"
          - id: docs
            title: "Audit docs of {{module}} ({{depth}})"
        synthesis:
          id: report
          title: "Audit report for {{module}}"
          needs: [deps, licences]
    """)
    run = brat_json(brepo, "workflow", "run", "audit", "--var", "module=core")
    t = {x["step"]: x for x in run["tasks"]}
    assert sorted(t["report"]["needs"]) == sorted([t["deps"]["id"], t["licences"]["id"]])
    assert t["docs"]["title"] == "Audit docs of core (shallow)"
    shown = brat_json(brepo, "task", "show", t["deps"]["id"])
    assert shown["paths"] == ["core/requirements.txt"] and shown["priority"] == 0
    assert [x["id"] for x in brat_json(brepo, "task", "ready")][0] == t["deps"]["id"]


BASE = """
    type: workflow
    inputs:
      what:
        required: true
    steps:
      - id: a
        title: "A {{what}}"
      - id: b
        title: B
        needs: [a]
"""

BAD_TEMPLATES = [
    ("type: workflow\nsteps:\n  - id: a\n    title: [unclosed\n", 5, "malformed YAML"),
    ("type: workflow\nsteps:\n\t- id: a\n", 3, "malformed YAML: found character '\\t'"),
    ("", 1, "the file is empty"),
    ("- a\n- b\n", 1, "the workflow must be a mapping"),
    ("steps: []\n", 1, "missing `type:`"),
    ("type: pipeline\nsteps: []\n", 1, "type 'pipeline' is not allowed: use workflow or convoy"),
    ("type: workflow\ntype: convoy\n", 2, "duplicate key 'type' in the workflow (first on line 1)"),
    ("type: workflow\nstep:\n  - id: a\n", 2, "unknown key 'step' in the workflow (allowed:"),
    ("type: workflow\n", 1, "needs `steps:`"),
    ("type: workflow\nsteps: []\n", 2, "steps must not be empty"),
    ("type: workflow\nsteps:\n  - title: A\n", 3, "a step needs an `id:`"),
    ("type: workflow\nsteps:\n  - id: a\n", 3, "step 'a' needs a `title:`"),
    ("type: workflow\nsteps:\n  - id: a\n    title: A\n    colour: red\n", 5,
     "unknown key 'colour' in a step (allowed: id, title, body, needs, depends_on, priority, paths, labels)"),
    ("type: workflow\nsteps:\n  - id: a\n    title: A\n  - id: a\n    title: B\n", 5,
     "duplicate step id 'a' (first on line 3)"),
    ("type: workflow\nsteps:\n  - id: a\n    title: A\n  - id: b\n    title: B\n    needs:\n"
     "      - a\n      - c\n", 9, "step 'b' needs unknown step 'c' (steps: a, b)"),
    ("type: workflow\nsteps:\n  - id: a\n    title: A\n    needs: a\n", 5, "step 'a' needs itself"),
    ("type: workflow\nsteps:\n  - id: a\n    title: A\n    needs: [c]\n  - id: b\n    title: B\n"
     "    needs: [a]\n  - id: c\n    title: C\n    needs: [b]\n", 3,
     "steps form a cycle: a -> c -> b -> a"),
    ("type: workflow\nsteps:\n  - id: a\n    title: A\n    priority: 9\n", 5,
     "priority 9 is not allowed: use 0 (most urgent) to 4"),
    ("type: workflow\nsteps:\n  - id: a\n    title: A\n    priority: high\n", 5,
     "priority must be an integer from 0 to 4, not 'high'"),
    ("type: workflow\ninputs:\n  x: {}\nsteps:\n  - id: a\n    title: A\n    body: |\n"
     "      hello\n      {{y}}\n", 9, "placeholder {{y}} names an undeclared input (declared inputs: x)"),
    ("type: workflow\nsteps:\n  - id: a\n    title: 'A {{ x y }}'\n", 4, "malformed placeholder"),
    ("type: workflow\ninputs:\n  x:\n    required: true\n    default: y\nsteps:\n  - id: a\n"
     "    title: A\n", 5, "input 'x' is required, so it cannot have a default"),
    ("type: workflow\ninputs:\n  x:\n    required: maybe\nsteps:\n  - id: a\n    title: A\n", 4,
     "input 'x' required must be true or false"),
    ("type: workflow\nlegs: []\nsteps: []\n", 2, "`legs` is not allowed in a type: workflow template"),
    ("type: convoy\nlegs:\n  - id: a\n    title: A\n", 1, "needs `synthesis:`"),
    ("type: convoy\nlegs:\n  - id: a\n    title: A\n    needs: [b]\nsynthesis:\n  title: S\n", 5,
     "legs run in parallel: `needs` is not allowed in a leg"),
    ("type: convoy\nlegs:\n  - id: a\n    title: A\nsynthesis:\n  title: S\n  needs: [a, z]\n", 7,
     "the synthesis needs 'z', which is not a leg (legs: a)"),
    ("type: convoy\nlegs:\n  - id: a\n    title: A\nsynthesis:\n  id: a\n  title: S\n", 6,
     "duplicate step id 'a'"),
]


@pytest.mark.parametrize("text,line,expected", BAD_TEMPLATES,
                         ids=[f"{i}-{b[2][:30]}" for i, b in enumerate(BAD_TEMPLATES)])
def test_every_bad_template_gives_file_and_line_and_creates_nothing(brepo, text, line, expected):
    (brepo / ".brat" / "workflows").mkdir(parents=True)
    (brepo / ".brat" / "workflows" / "bad.yaml").write_text(text)
    tip, before = wal_tip(brepo), status(brepo)
    code, msg = fail(brepo, "workflow", "run", "bad")
    assert code == 2
    assert msg.startswith(f".brat/workflows/bad.yaml:{line}: ") and expected in msg, msg
    assert wal_tip(brepo) == tip and status(brepo) == before
    assert brat_json(brepo, "convoy", "list") == [] and brat_json(brepo, "task", "list") == []
    # The list still works and shows the problem; show gives the same error.
    [info] = [i for i in brat_json(brepo, "workflow", "list") if i["name"] == "bad"]
    assert info["error"] == msg
    assert fail(brepo, "workflow", "show", "bad")[1] == msg


@pytest.mark.parametrize("args,code,expected", [
    (["--var", "what=x", "--var", "colour=red"], 2,
     ".brat/workflows/base.yaml:2: workflow base has no input 'colour' (declared: what)"),
    ([], 2, ".brat/workflows/base.yaml:3: workflow base needs input 'what': pass --var what=VALUE"),
    (["--var", "what="], 2, ".brat/workflows/base.yaml:3: workflow base needs input 'what'"),
    (["--var", "what"], 2, "--var 'what' is not KEY=VALUE"),
    (["--var", "what=a", "--var", "what=b"], 2, "--var what given twice"),
    (["--var", "what=two\nlines"], 2, "the title of step 'a' must be one non-empty line"),
])
def test_bad_inputs_give_a_precise_error_and_create_nothing(brepo, args, code, expected):
    _write(brepo, "base.yaml", BASE)
    tip = wal_tip(brepo)
    got, msg = fail(brepo, "workflow", "run", "base", *args)
    assert got == code and expected in msg, msg
    assert wal_tip(brepo) == tip and brat_json(brepo, "convoy", "list") == []


def test_unknown_or_invalid_workflow_names(brepo):
    code, msg = fail(brepo, "workflow", "run", "nope")
    assert code == 3 and "no workflow named 'nope'" in msg
    code, msg = fail(brepo, "workflow", "run", "../etc/passwd")
    assert code == 2 and "invalid workflow name" in msg
    assert wal_tip(brepo) is not None and brat_json(brepo, "convoy", "list") == []


def test_workflow_run_refuses_an_invalid_config_as_status_does(grepo):
    brat(grepo, "init")
    (grepo / ".brat" / "config.toml").write_text("[witness]\nconcurrency = -3\n")
    assert brat(grepo, "status", check=False).returncode == 2
    tip = wal_tip(grepo)
    proc = brat(grepo, "workflow", "run", "feature", "--var", "feature=x", check=False)
    assert proc.returncode == 2 and "config.toml" in proc.err
    assert wal_tip(grepo) == tip


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
