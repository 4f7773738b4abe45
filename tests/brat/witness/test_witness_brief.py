"""The project's instructions and skills reach every engine where it reads them (witness/brief.py):
written untracked into the session's tree, never over a tracked file, never committed, and never
through a link an agent left in the tree."""

from __future__ import annotations

import os

from helpers import git

SKILL = ("---\nname: deploy-notes\ndescription: SKILL-DESC-7731 how this project ships a "
         "release\n---\n\nRun `make release` and nothing else.\n")


def commit_instructions(repo, agents="Always run MARK-INSTR-4410 before committing.\n"):
    (repo / "AGENTS.md").write_text(agents)
    skill = repo / ".brat" / "skills" / "deploy-notes"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(SKILL)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "instructions and a skill")


def test_claude_reads_the_projects_instructions_and_skills_from_files_that_never_land_on_its_branch(
        repo, tmp_path):
    from witnesskit import make_bench
    bench = make_bench(repo, tmp_path / "bench", engine="claude")
    commit_instructions(repo)
    before = git(repo, "status", "--porcelain")
    t = bench.task(bench.convoy(), "Greet", "write hello.txt hi", "commit greet")
    bench.brat("witness", "run", "--once")
    (run,) = bench.runs()
    # CLAUDE.md (claude reads no AGENTS.md) holds the project's AGENTS.md and the protocol ...
    assert "MARK-INSTR-4410" in run["claude_md"]
    assert "git brat task done" in run["claude_md"]
    # ... so the prompt no longer repeats them
    assert "MARK-INSTR-4410" not in run["prompt"]
    assert run["skills"] == {"deploy-notes": SKILL}
    # the agent's `git add -A` left them out, and so did the witness's salvage
    assert git(repo, "diff", "--name-only", f"main...brat/{t}").splitlines() == ["hello.txt"]
    assert bench.show(t)["status"] == "needs-review"
    assert git(repo, "status", "--porcelain") == before


def test_a_tracked_instructions_file_is_never_overwritten_and_the_prompt_carries_the_rest(
        repo, tmp_path):
    from witnesskit import make_bench
    bench = make_bench(repo, tmp_path / "bench", engine="claude")
    (repo / "CLAUDE.md").write_text("The team's own CLAUDE.md.\n")
    commit_instructions(repo)
    bench.task(bench.convoy(), "Greet", "write hello.txt hi", "commit greet")
    bench.brat("witness", "run", "--once")
    (run,) = bench.runs()
    assert run["claude_md"] == "The team's own CLAUDE.md.\n"
    assert "MARK-INSTR-4410" in run["prompt"]                  # AGENTS.md, which claude skips
    assert "The team's own CLAUDE.md." not in run["prompt"]    # not twice
    assert run["skills"] == {"deploy-notes": SKILL}


def test_links_an_agent_left_in_its_tree_are_replaced_never_written_through(repo, tmp_path):
    """A leftover tree (a session that ended, its tree kept) where the agent made .claude a
    link to a directory outside and CLAUDE.md a hard link to a file outside: the witness's
    write lands in the tree only."""
    from git_brat.brat.engines import PRESETS
    from git_brat.brat.witness import brief
    from git_brat.git.store import Store
    commit_instructions(repo)
    wt = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", "-b", "brat/x", str(wt))
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim").write_text("keep me\n")
    os.symlink(outside, wt / ".claude")
    os.link(outside / "victim", wt / "CLAUDE.md")
    store = Store.discover(str(repo))
    engine_dir = tmp_path / "engine"
    engine_dir.mkdir()
    got = brief.write(store, git(repo, "rev-parse", "HEAD"), str(wt), PRESETS["claude"],
                      str(engine_dir))
    assert (outside / "victim").read_text() == "keep me\n"
    assert os.listdir(outside) == ["victim"]
    assert "MARK-INSTR-4410" in (wt / "CLAUDE.md").read_text()
    assert got.written[0] == "CLAUDE.md" and "AGENTS.md" in got.engine_reads
    assert any(r.startswith(".claude/skills/deploy-notes/SKILL.md") for r in got.refused)


def test_aider_reads_the_instructions_and_the_skills_text_from_a_file_outside_its_tree(
        repo, tmp_path):
    from git_brat.brat.engines import PRESETS, invocation
    from git_brat.brat.witness import brief
    from git_brat.git.store import Store
    commit_instructions(repo)
    engine_dir = tmp_path / "engine"
    engine_dir.mkdir()
    got = brief.write(Store.discover(str(repo)), git(repo, "rev-parse", "HEAD"), str(repo),
                      PRESETS["aider"], str(engine_dir))
    assert got.written == [] and got.brief_file == str(engine_dir / "instructions.md")
    text = (engine_dir / "instructions.md").read_text()
    assert "MARK-INSTR-4410" in text and "SKILL-DESC-7731" in text
    argv = invocation(PRESETS["aider"], "p", str(repo), str(tmp_path), brief=got.brief_file).argv
    assert argv[argv.index("--read") + 1] == got.brief_file
    assert git(repo, "status", "--porcelain") == ""


def test_a_leftover_tree_is_salvaged_without_the_files_an_earlier_session_was_given(
        repo, tmp_path):
    """A tree an earlier session left (its end cut short) holds that session's CLAUDE.md and
    skills beside real work: the next session keeps the work, not those files."""
    from witnesskit import make_bench
    bench = make_bench(repo, tmp_path / "bench", engine="claude")
    commit_instructions(repo)
    t = bench.task(bench.convoy(), "Greet", "write hello.txt hi", "commit greet")
    wt = repo / ".git" / "brat" / "worktrees" / t
    git(repo, "worktree", "add", "-q", "-b", f"brat/{t}", str(wt))
    (wt / "left.txt").write_text("work an earlier agent left\n")
    (wt / "CLAUDE.md").write_text("an earlier session's instructions\n")
    (wt / ".claude" / "skills" / "deploy-notes").mkdir(parents=True)
    (wt / ".claude" / "skills" / "deploy-notes" / "SKILL.md").write_text(SKILL)
    bench.brat("witness", "run", "--once")
    files = git(repo, "diff", "--name-only", f"main...brat/{t}").splitlines()
    assert files == ["hello.txt", "left.txt"], files
