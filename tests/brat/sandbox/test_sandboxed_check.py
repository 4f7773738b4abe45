"""refinery.sandbox = "bwrap": the check reads the repository and writes only its own tree."""

from __future__ import annotations

import shutil

import pytest

from bratkit import convoy
from helpers import brat, git
from refinerykit import configure, outcomes, refine, request


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")
def test_a_sandboxed_check_cannot_change_the_repository_beyond_its_tree(brepo, tmp_path):
    repo = brepo
    git(repo, "checkout", "-q", "-b", "work")
    cid = convoy(repo, "Ship it")
    tid = request(repo, cid, "Add a", {"a.py": "a = 1\n"})
    common = repo / ".git"
    outside = tmp_path / "outside.txt"
    attempts = [f"echo evil >> {common}/config", f"echo evil > {repo}/README.md",
                f"echo evil > {common}/hooks/post-commit", f"echo evil > {outside}",
                "git update-ref refs/heads/evil HEAD", "git update-ref refs/grite/evil HEAD",
                f"git -C {repo} update-ref refs/heads/main HEAD", "git update-ref HEAD HEAD~0",
                f"echo evil > {common}/brat/config.local.toml"]
    # (outside.txt: a private /tmp holds the path there, so the write lands in it, not here)
    script = "; ".join(f"( {a} ) 2>/dev/null && echo ESCAPED-{n}"
                       for n, a in enumerate(attempts) if "outside" not in a)
    configure(repo, check=f"{script}; echo evil > {outside}; echo built > build.out; test -s build.out",
              sandbox="bwrap")
    config_before = (common / "config").read_bytes()
    readme_before = (repo / "README.md").read_bytes() if (repo / "README.md").exists() else b""
    hooks_before = sorted(p.name for p in (common / "hooks").iterdir())
    brat(repo, "config", "set", "refinery.check_timeout", "60")
    report = refine(repo)
    assert outcomes(report) == {tid: "merged"}   # the check ran, wrote its own tree, passed
    assert (common / "config").read_bytes() == config_before
    assert ((repo / "README.md").read_bytes() if (repo / "README.md").exists() else b"") \
        == readme_before
    assert sorted(p.name for p in (common / "hooks").iterdir()) == hooks_before
    assert not outside.exists()
    assert not (common / "brat" / "config.local.toml").exists()
    assert git(repo, "for-each-ref", "refs/heads/evil", "refs/grite/evil") == ""
    assert git(repo, "show", "main:a.py") == "a = 1"
    logs = list((common / "brat" / "merges").glob("*.log"))
    assert logs and not any(line.startswith("ESCAPED") for p in logs
                            for line in p.read_text().splitlines())
