"""The man pages are generated from the click definitions and cannot drift from them."""

from __future__ import annotations

import shutil
import sys

import click
import pytest

from helpers import ROOT, run

PAGES = {"git-brat": "git_brat.brat.cli", "git-grite": "git_brat.grite.cli"}


def _cli(name: str) -> click.Group:
    import importlib
    return importlib.import_module(PAGES[name]).cli


def _walk(cmd: click.Command, path: list[str], parent=None):
    ctx = click.Context(cmd, info_name=path[-1], parent=parent, **cmd.context_settings)
    yield path, cmd, ctx
    if isinstance(cmd, click.Group):
        for name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, name)
            if not sub.hidden:
                yield from _walk(sub, [*path, name], ctx)


def _roff(text: str) -> str:
    return text.replace("-", r"\-")


def test_committed_pages_are_what_the_generator_makes():
    proc = run([sys.executable, "-m", "git_brat.manpage", "--check"], ROOT, check=False,
               timeout=60)
    assert proc.returncode == 0, ("man pages are out of date; run scripts/gen-man\n" + proc.err)


def test_a_stale_page_is_reported_and_rewritten(tmp_path):
    for name in PAGES:
        shutil.copy(ROOT / "man" / "man1" / f"{name}.1", tmp_path)
    page = tmp_path / "git-brat.1"
    page.write_text(page.read_text().replace("task create", "task make"))
    proc = run([sys.executable, "-m", "git_brat.manpage", "--check", "--dir", str(tmp_path)], ROOT,
               check=False, timeout=60)
    assert proc.returncode == 1 and "git-brat.1" in proc.err and "git-grite.1" not in proc.err
    run(["sh", str(ROOT / "scripts" / "gen-man"), "--dir", str(tmp_path)], ROOT, timeout=60)
    assert page.read_text() == (ROOT / "man" / "man1" / "git-brat.1").read_text()


@pytest.mark.parametrize("name", sorted(PAGES))
def test_every_command_and_option_is_in_the_page(name):
    page = (ROOT / "man" / "man1" / f"{name}.1").read_text()
    seen = 0
    for path, cmd, ctx in _walk(_cli(name), [name.replace("-", " ")]):
        if len(path) > 1:
            assert f'.SS "{_roff(" ".join(path))} ' in page, f"{' '.join(path)} missing"
            seen += 1
        entry = page.split(f'.SS "{_roff(" ".join(path))} ', 1)[-1].split(".SS ", 1)[0]
        for param in cmd.get_params(ctx):
            if not isinstance(param, click.Option) or param.hidden:
                continue
            if "--help" in param.opts and len(path) > 1:
                continue
            for opt in param.opts + param.secondary_opts:
                where = page if len(path) == 1 else entry
                assert rf"\fB{_roff(opt)}\fR" in where, f"{' '.join(path)} {opt} missing"
    assert seen > 20


@pytest.mark.skipif(shutil.which("man") is None, reason="man is not installed")
@pytest.mark.parametrize("name", sorted(PAGES))
def test_the_pages_render_without_warnings(name):
    proc = run(["man", "--warnings", "-l", str(ROOT / "man" / "man1" / f"{name}.1")], ROOT,
               env={"MANPAGER": "cat", "PAGER": "cat", "MANWIDTH": "100"}, timeout=60)
    assert proc.err == ""
    assert f"{name.upper()}(1)" in proc.out and "EXIT STATUS" in proc.out
    assert f"{name.replace('-', ' ')} completion [OPTIONS]" in proc.out


@pytest.mark.skipif(shutil.which("man") is None, reason="man is not installed")
def test_git_brat_help_opens_the_man_page(repo):
    proc = run(["git", "brat", "--help"], repo, env={"MANPAGER": "cat", "PAGER": "cat",
                                                     "MANWIDTH": "100"}, timeout=60)
    assert "GIT-BRAT(1)" in proc.out and "git brat task create" in proc.out


def test_the_generator_is_not_imported_by_the_clis():
    code = ("import sys, git_brat.brat.cli, git_brat.grite.cli; "
            "print(sorted(m for m in sys.modules if 'manpage' in m))")
    assert run([sys.executable, "-c", code], ROOT, timeout=60).out.strip() == "[]"
