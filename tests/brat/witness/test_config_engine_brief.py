"""An engine defined in .brat/config.toml says what the presets say: the file it loads its
instructions from, the folder it finds skills in, and the meter its spending is read with."""

from __future__ import annotations

import json

import pytest

from helpers import git
from witnesskit import make_bench

# A small agent of its own: says what it found where its config says it reads, reports its
# tokens as aider does, commits and is done.
AGENT = r'''
import json, os, subprocess, sys
def read(path):
    try:
        return open(path).read()
    except OSError:
        return None
print("SEEN " + json.dumps({"instructions": read("HOLD.md"),
                            "skill": read(".hold/skills/greet/SKILL.md")}))
print("Tokens: 2.6k sent, 21 received. Cost: $0.01 message, $0.02 session.")
open("hello.txt", "w").write("hi\n")
subprocess.run(["git", "add", "hello.txt"], check=True)
subprocess.run(["git", "commit", "-qm", "greet"], check=True)
subprocess.run(["git", "brat", "task", "done", "-m", "greeted"], check=True)
'''

SKILL = "---\nname: greet\ndescription: How this project greets people.\n---\nSay hi.\n"


@pytest.mark.slow
def test_a_config_engine_gets_its_instructions_file_and_skills_and_its_usage_metered(
        repo, tmp_path):
    bench = make_bench(repo, tmp_path)
    agent = tmp_path / "hold_agent.py"
    agent.write_text(AGENT)
    (repo / "AGENTS.md").write_text("Greet people politely.\n")
    (repo / ".brat" / "skills" / "greet").mkdir(parents=True)
    (repo / ".brat" / "skills" / "greet" / "SKILL.md").write_text(SKILL)
    git(repo, "add", "AGENTS.md", ".brat/skills")
    git(repo, "commit", "-qm", "instructions and a skill")
    bench.config(engines__hold__command=json.dumps(["python3", str(agent), "{prompt}"]),
                 engines__hold__instructions="HOLD.md", engines__hold__skills=".hold/skills",
                 engines__hold__meter="aider-lines", witness__engine="hold")
    shown = bench.json("engine", "show", "hold")
    assert (shown["instructions"], shown["skills"], shown["meter"]) == \
        ("HOLD.md", ".hold/skills", "aider-lines")

    t = bench.task(bench.convoy(), "Greet", body="greet the world")
    bench.brat("witness", "run", "--once")
    assert bench.show(t)["status"] == "needs-review"
    [s] = bench.sessions(t)
    session = bench.session(s["id"])
    with open(session["log"]) as f:
        seen = json.loads(next(line[5:] for line in f if line.startswith("SEEN ")))
    assert "Greet people politely." in seen["instructions"]
    assert "git brat task done" in seen["instructions"]   # the agent protocol
    assert seen["skill"] == SKILL
    assert (session["spent"]["input"], session["spent"]["output"]) == (2600, 21)
    assert bench.show(t)["spent"]["tokens"] == 2621
    files = git(repo, "ls-tree", "-r", "--name-only", f"brat/{t}").splitlines()
    assert "hello.txt" in files and "HOLD.md" not in files
    assert not any(f.startswith(".hold/") for f in files)


def test_a_config_engine_path_outside_the_work_tree_or_an_unknown_meter_is_refused(
        repo, tmp_path):
    bench = make_bench(repo, tmp_path)
    config = (repo / ".brat" / "config.toml").read_bytes()
    for key, value, why in (("instructions", "../HOLD.md", "inside the work tree"),
                            ("instructions", "/etc/motd", "not an absolute one"),
                            ("skills", ".git/hooks", "not in .git"),
                            ("instructions", ".brat/config.toml", "not in .git or .brat"),
                            ("skills", "a/../../b", "inside the work tree"),
                            ("meter", "tokens-please", "claude-json")):
        out = bench.brat("config", "set", f"engines.hold.{key}", value, check=False)
        assert out.returncode == 2, (key, value)
        assert f"engines.hold.{key}" in out.err and why in out.err
        assert len(out.err.splitlines()) == 1
    assert (repo / ".brat" / "config.toml").read_bytes() == config
