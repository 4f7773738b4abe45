"""git-brat's and grite's sections of AGENTS.md (`git brat init --agents-md`, asked in a terminal;
`git grite agents-md`) and grite's skill (`git grite skill install`): added only when asked,
updated in place, never through a link, the rest of the file kept."""

from __future__ import annotations

import os

import pexpect

from helpers import brat, brat_json, git, grite, grite_json

MINE = "# Our rules\n\nTabs, never spaces.\n"


def test_init_adds_its_section_only_when_asked_and_keeps_the_rest_of_agents_md(repo):
    (repo / "AGENTS.md").write_text(MINE)
    out = brat(repo, "init").out                      # not a terminal, no flag: not added
    assert "no git-brat section" in out and (repo / "AGENTS.md").read_text() == MINE
    assert brat_json(repo, "init", "--agents-md")["agents_md"] == "added"
    text = (repo / "AGENTS.md").read_text()
    assert text.startswith(MINE) and "git brat task done" in text and "git brat kb" in text
    assert brat_json(repo, "init", "--agents-md")["agents_md"] == "unchanged"
    # an older section is replaced where it stands, whatever follows it
    old = text.replace("git brat kb search", "OLD-LINE") + "\n## After\n\nkept\n"
    (repo / "AGENTS.md").write_text(old)
    assert brat_json(repo, "init", "--agents-md")["agents_md"] == "updated"
    new = (repo / "AGENTS.md").read_text()
    assert "OLD-LINE" not in new and new.endswith("## After\n\nkept\n") and new.count(
        "brat:begin") == 1


def test_init_in_a_terminal_asks_before_touching_agents_md(repo):
    child = pexpect.spawn("git-brat", ["init"], cwd=str(repo), env=dict(os.environ),
                          encoding="utf-8", timeout=60)
    try:
        child.expect_exact("Add a git-brat section to AGENTS.md")
        child.sendline("y")
        child.expect_exact("AGENTS.md: git-brat section added")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert "git brat task done" in (repo / "AGENTS.md").read_text()


def test_a_symlinked_agents_md_is_never_written_through(repo, tmp_path):
    victim = tmp_path / "victim.md"
    victim.write_text("keep\n")
    os.symlink(victim, repo / "AGENTS.md")
    brat(repo, "init")
    for proc in (brat(repo, "init", "--agents-md", check=False),
                 grite(repo, "agents-md", check=False)):
        assert proc.returncode == 2 and "symbolic link" in proc.err
    assert victim.read_text() == "keep\n" and os.path.islink(repo / "AGENTS.md")


def test_grites_section_and_skill_reach_the_witness_as_a_project_skill(repo):
    from git_brat.brat.witness import brief
    from git_brat.git.store import Store
    grite(repo, "init")
    assert grite_json(repo, "agents-md")["result"] == "added"
    assert "git grite issue list" in (repo / "AGENTS.md").read_text()
    assert grite_json(repo, "skill", "install", "--dir", ".brat/skills")["path"] == \
        ".brat/skills/grite/SKILL.md"
    assert grite(repo, "skill", "install", "--dir", "../out", check=False).returncode == 2
    assert not (repo.parent / "out").exists()
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "grite for agents")
    [skill] = brief.skills(Store.discover(str(repo)), git(repo, "rev-parse", "HEAD"))
    assert skill.name == "grite" and "git grite" in skill.description
