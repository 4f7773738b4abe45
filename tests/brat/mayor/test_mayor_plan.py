"""The mayor's plan parser and context helpers, as a library: no engine, no repository."""

from __future__ import annotations

import json

import pytest

from fake_mayor import PLAN, plan_with
from git_brat.brat.mayor import context as mayor
from git_brat.brat.mayor import plan as mayor_plan
from git_brat.brat.mayor.plan import PlanError, TasksPlan, WorkflowPlan


def _err(text: str, max_tasks: int = 10) -> str:
    with pytest.raises(PlanError) as info:
        mayor_plan.parse(text, max_tasks)
    return info.value.message


def test_the_plan_is_found_bare_in_prose_or_fenced_and_the_last_one_wins():
    bare = json.dumps(PLAN)
    for text in (bare, f"  \n{bare}\n", f"Plan: {bare} -- done {{not json}}",
                 f"```json\n{json.dumps(PLAN, indent=1)}\n```", f"```\n{bare}\n```"):
        plan = mayor_plan.parse(text, 10)
        assert isinstance(plan, TasksPlan) and [t.key for t in plan.tasks] == ["tabs", "tests", "docs"]
    other = json.dumps({"convoy": {"title": "Second"}, "tasks": [{"key": "x", "title": "X"}]})
    assert mayor_plan.parse(f"First {bare}\nNo, this one: {other}", 10).convoy.title == "Second"
    example = '{"hint": 1}'   # JSON that is not a plan is passed over
    assert mayor_plan.parse(f"{example}\n{bare}", 10).convoy.title == "Fix the parser"
    wf = mayor_plan.parse('{"workflow": "fix-bug", "vars": {"bug": "x"}}', 10)
    assert isinstance(wf, WorkflowPlan) and wf.vars == {"bug": "x"}


def test_defaults_and_normalisation():
    plan = mayor_plan.parse(json.dumps({"convoy": {"title": " C "}, "tasks": [
        {"key": " a ", "title": " A ", "paths": ["x", "x", " y "]},
        {"key": "b", "title": "B", "needs": ["a", "a"]}]}), 10)
    a, b = plan.tasks
    assert plan.convoy.title == "C" and plan.convoy.body == ""
    assert (a.key, a.title, a.priority, a.paths, a.needs) == ("a", "A", 2, ["x", "y"], [])
    assert b.needs == ["a"]


@pytest.mark.parametrize("plan,message", [
    (plan_with(tabs={"needs": ["docs"]}), "tasks form a cycle: tabs -> docs -> tabs"),
    (plan_with(tabs={"needs": ["tabs"]}), "task 'tabs' needs itself"),
    (plan_with(tests={"needs": ["zz"]}), "task 'tests' needs unknown task 'zz' (keys: tabs, tests, docs)"),
    (plan_with(docs={"title": ""}), "task 'docs' has an empty title"),
    (plan_with(docs={"title": "two\nlines"}), "task 'docs' has a title of more than one line"),
    (plan_with(docs={"priority": -1}), "task 'docs' has priority -1, out of range: use 0"),
    (plan_with(docs={"priority": "high"}), "invalid plan: task 'docs': priority: Expected `int`"),
    (plan_with(docs={"need": ["tabs"]}), "invalid plan: task 'docs': Object contains unknown field `need`"),
    (plan_with(docs={"key": "tabs"}), "task key 'tabs' is used twice"),
    (plan_with(docs={"key": " "}), "task number 3 has no key"),
    (plan_with(docs={"paths": [""]}), "task 'docs' has an empty or multi-line path"),
    ({"convoy": {"title": ""}, "tasks": [{"key": "a", "title": "A"}]}, "the convoy has an empty title"),
    ({"convoy": {"title": "C"}, "tasks": []}, "the plan has no tasks"),
    ({"tasks": [{"key": "a", "title": "A"}]}, 'the plan has no "convoy"'),
    ({"convoy": {"title": "C"}, "tasks": [{"title": "A"}]}, "task number 1: Object missing required field `key`"),
    ({"workflow": "x", "tasks": []}, 'the plan has both "workflow" and "tasks"'),
    ({"workflow": "x", "vars": {"n": 3}}, "invalid workflow plan: vars[...]: Expected `str`, got `int`"),
])
def test_each_bad_plan_gets_a_precise_message_naming_the_task(plan, message):
    assert message in _err(json.dumps(plan))


def test_the_task_limit_names_the_first_task_over_it():
    plan = {"convoy": {"title": "C"}, "tasks": [{"key": f"k{i}", "title": "T"} for i in range(4)]}
    assert _err(json.dumps(plan), 3) == ("the plan has 4 tasks, more than mayor.max_tasks = 3 "
                                         "(task 'k3' is number 4)")
    assert len(mayor_plan.parse(json.dumps(plan), 4).tasks) == 4


def test_no_plan_malformed_json_and_empty_answers():
    assert _err("") == "the answer is empty"
    assert _err("Nothing to do here.").startswith("no JSON plan in the answer")
    assert _err('{"convoy": {"title": "x"}, "tasks": [}').startswith(
        "no valid JSON plan in the answer (malformed JSON")
    assert "fenced block" in _err("```json\n{\"tasks\": [\n```")
    assert _err('{"convoy": {"title": "x"}, "tasks": [{"key": "a", "title": NaN}]}').startswith(
        "no valid JSON plan")


def test_layout_lists_every_path_when_it_fits_and_summarizes_directories_when_not():
    files = ["README.md", "setup.py"] + [f"src/pkg/m{i}.py" for i in range(50)] + \
            [f"tests/t{i}.py" for i in range(30)] + ["docs/a/b.md"]
    assert mayor.layout(files, 1000) == files
    assert mayor.layout(files, 10) == ["README.md", "docs/ (1 file)", "setup.py",
                                       "src/ (50 files)", "tests/ (30 files)"]
    deeper = [f for f in files if not f.startswith("tests/")]
    assert mayor.layout(deeper, 5) == ["README.md", "docs/a/ (1 file)", "setup.py",
                                       "src/pkg/ (50 files)"]
    assert mayor.layout(files, 3) == [f"({len(files)} files; too many top-level entries to list)"]


def test_the_schema_shown_to_the_engine_is_never_taken_for_a_plan():
    for text in (mayor_plan.SCHEMA, mayor_plan.WORKFLOW_SCHEMA,
                 mayor_plan.SCHEMA + "\n" + mayor_plan.WORKFLOW_SCHEMA):
        with pytest.raises(PlanError):
            mayor_plan.find_json(text)
