"""Each of the seven real engines, run by the witness against the fake model server: the project's
instructions (AGENTS.md) and one skill's description (.brat/skills/<name>/SKILL.md) reach the
model from the files the engine reads (the tracked AGENTS.md, or the file the witness wrote where
that engine looks), not from the prompt; none of what the witness wrote lands on the branch."""

from __future__ import annotations

import json

import pytest

from enginekit import ENGINES
from helpers import git
from test_real_engines import SANDBOXES, greeting_task

INSTR = "MARK-INSTR-5519"
DESC = "SKILL-DESC-8264"
SKILL = (f"---\nname: release-notes\ndescription: {DESC} Use when writing a release note for "
         f"this project.\n---\n\nWrite release notes as a bulleted list.\n")


@pytest.mark.slow
@pytest.mark.parametrize("sandbox", SANDBOXES)
@pytest.mark.parametrize("name", ENGINES)
def test_the_projects_instructions_and_skills_reach_every_engines_model(
        name, sandbox, sandbox_for, tmp_path):
    box, (repo, tid, _brat, env) = greeting_task(name, sandbox, sandbox_for, tmp_path)
    (repo / "AGENTS.md").write_text(f"# Project rules\n\nAlways mention {INSTR} in reviews.\n")
    skill = repo / ".brat" / "skills" / "release-notes"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(SKILL)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "instructions and a skill")
    run = box.run(["git", "brat", "witness", "run", "--once", "--engine", name,
                   "--timeout", "120"], repo, env=env, timeout=150)
    assert run.rc == 0, run.show()
    # not through the prompt: each engine read them from its own files
    [prompt] = list((repo / ".git" / "brat" / "sessions").glob("*/prompt.txt"))
    assert INSTR not in prompt.read_text() and DESC not in prompt.read_text()
    bodies = json.dumps([r.get("body") for r in run.model_requests()])
    assert INSTR in bodies, run.show()
    assert DESC in bodies, run.show()
    assert git(repo, "diff", "--name-only", f"main...brat/{tid}").splitlines() == \
        ["greeting.txt"], run.show()
    assert git(repo, "status", "--porcelain") == ""
