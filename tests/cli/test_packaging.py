"""What a user installs works: the wheel holds every module of the tree, installs into a fresh
virtualenv and imports there; hook shims an earlier release wrote keep working."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from helpers import ROOT, git, grite, run
from sync_helpers import clone, refs, seeded_hub

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def source_modules() -> list[str]:
    """Every module of the checkout's package, as an import name."""
    out = []
    for path in sorted((ROOT / "git_brat").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        out.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return out


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The checkout's wheel, built once for every test worker: two builds at once would share
    the checkout's build/ directory and spoil each other."""
    import portalocker
    shared = tmp_path_factory.getbasetemp().parent / "wheel"
    shared.mkdir(exist_ok=True)
    with portalocker.Lock(str(shared / ".lock"), timeout=600):
        if not any(shared.glob("git_brat-*.whl")):
            subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                            "--no-build-isolation", "-q", "-w", str(shared), str(ROOT)],
                           check=True, capture_output=True)
    return next(shared.glob("git_brat-*.whl"))


def test_the_wheel_holds_every_module_of_the_tree_the_man_pages_and_the_shims(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = [m for m in source_modules()
               if m.replace(".", "/") + ".py" not in names
               and m.replace(".", "/") + "/__init__.py" not in names]
    assert not missing, f"left out of the wheel: {missing}"
    for page in ("git-grite.1", "git-brat.1"):
        assert any(n.endswith(f".data/data/share/man/man1/{page}") for n in names)
    for hook in ("reference-transaction", "post-merge", "post-rewrite", "pre-push",
                 "post-receive"):
        assert any(n.endswith(f".data/data/share/git-brat/hooks/{hook}") for n in names)
    assert any(n.endswith("templates/feature.yaml") for n in names)
    for static in ("board.js", "board.css"):   # the web board's script and style
        assert any(n.endswith(f"git_brat/brat/ui/static/{static}") for n in names)


@pytest.fixture(scope="module")
def fresh_venv(wheel, tmp_path_factory) -> Path:
    """A new virtualenv with the wheel installed (its dependencies are this interpreter's: the
    machine may be offline, and they are not what is under test)."""
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
    py = venv / "bin" / "python"
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          check=True, capture_output=True, text=True).stdout.strip()
    # The wheel first, into the empty venv (pip must not see a git-brat installed next to the
    # dependencies and call it satisfied); then the dependencies, from the running interpreter,
    # *after* the venv's own site-packages, so the wheel's git_brat wins over any other copy.
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
                   check=True, capture_output=True)
    deps = [p for p in {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")} if p]
    Path(site, "zz_test_dependencies.pth").write_text("\n".join(deps) + "\n")
    return venv


def test_every_module_imports_from_the_wheel_in_a_fresh_venv(fresh_venv, tmp_path):
    py = fresh_venv / "bin" / "python"
    code = ("import importlib, sys, git_brat\n"
            "assert git_brat.__file__.startswith(sys.prefix), git_brat.__file__\n"
            "bad = []\n"
            "for name in sys.argv[1:]:\n"
            "    try:\n"
            "        importlib.import_module(name)\n"
            "    except Exception as exc:\n"
            "        bad.append(f'{name}: {exc!r}')\n"
            "print('\\n'.join(bad)); sys.exit(1 if bad else 0)\n")
    libraries = [m for m in source_modules() if not m.endswith(".__main__")]
    proc = run([str(py), "-c", code, *libraries], tmp_path, check=False, env={"PYTHONPATH": ""})
    assert proc.returncode == 0, proc.out + proc.err
    for program in ("grite", "brat"):   # the __main__ modules: `python -m git_brat.brat`
        assert f"git-{program}" in run([str(py), "-m", f"git_brat.{program}", "--version"],
                                       tmp_path, env={"PYTHONPATH": ""}).out


def test_the_installed_commands_run_and_init_finds_the_installed_shims(fresh_venv, repo):
    bin_dir = fresh_venv / "bin"
    env = {"PATH": f"{bin_dir}{os.pathsep}/usr/bin:/bin", "PYTHONPATH": ""}
    assert "git-grite" in run([str(bin_dir / "git-grite"), "--version"], repo, env=env).out
    assert "git-brat" in run([str(bin_dir / "git-brat"), "--version"], repo, env=env).out
    run(["git", "grite", "init"], repo, env=env)
    shim = (repo / ".git" / "hooks" / "reference-transaction").read_text()
    assert shlex.quote(str(bin_dir / "python")) in shim or str(bin_dir / "python") in shim


def _old_shim(hook: str) -> str:
    """The shim the previous release's `git grite init` wrote, for this interpreter and tree."""
    text = (FIXTURES / "hooks-0.1.0" / hook).read_text()
    return (text.replace("@GRITE_PY@", shlex.quote(os.path.abspath(sys.executable)))
                .replace("@GRITE_ROOT@", shlex.quote(str(ROOT))))


def test_hook_shims_written_by_the_previous_release_still_import_fetched_logs(tmp_path):
    hub = seeded_hub(tmp_path)
    a = clone(str(hub), tmp_path / "a")
    b = clone(str(hub), tmp_path / "b")
    for hook in ("reference-transaction", "post-merge", "post-rewrite", "pre-push"):
        path = b / ".git" / "hooks" / hook
        path.write_text(_old_shim(hook))
        path.chmod(0o755)
    grite(a, "issue", "create", "Written on a")
    grite(a, "sync")
    pulled = run(["git", "pull", "-q"], b)
    assert "hook failed" not in pulled.err and "Traceback" not in pulled.err, pulled.err
    # The shim ran `git_brat.grite.cli.main hook …`: the import stamp names what was fetched.
    stamp = (b / ".git" / "grite" / "sync" / "imported").read_text().strip()
    fetched = [line for line in git(b, "for-each-ref", "--format=%(objectname) %(refname)",
                                    "refs/remotes/**/grite/replicas/*",
                                    "refs/remotes/**/grite/wal").splitlines()]
    assert fetched and stamp == "\n".join(fetched)
    assert any(k.startswith("refs/remotes/origin/grite/replicas/") for k in refs(b))


def test_the_brat_entry_point_the_old_shims_name_still_runs(tmp_path):
    # The post-merge/post-rewrite/reference-transaction/post-receive shims start the
    # refinery through exactly this line.
    line = _old_shim("post-merge")
    assert "from git_brat.brat.cli import main; main()" in line
    proc = run([sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv.pop(1)); "
                "from git_brat.brat.cli import main; main()", str(ROOT), "--version"], tmp_path)
    assert "git-brat" in proc.out
