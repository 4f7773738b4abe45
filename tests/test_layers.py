"""The house keeps its plan: a folder is a layer, modules import only downward, no import cycle.

Every import counts, at any depth (inside functions too); only `if TYPE_CHECKING:` blocks are
left out, and they may point sideways, never up. A failure names the arrow or the cycle.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "git_brat"

# The floors, lowest first. A module's floor is that of the longest prefix naming it. A module
# may import from a lower floor, or from its own floor *and its own folder*; never upward.
FLOORS = [
    # the ground: errors, files, processes, the CLI edge
    ["git_brat", "git_brat.errors", "git_brat.files", "git_brat.process", "git_brat.clikit",
     "git_brat.completion", "git_brat.redact", "git_brat.approvals"],
    ["git_brat.git"],                                   # the only code that runs git
    ["git_brat.grite", "git_brat.grite.model"],         # pure
    ["git_brat.grite.log"],
    ["git_brat.grite.cache"],
    ["git_brat.grite.repo"],
    ["git_brat.grite.issues", "git_brat.grite.transfer", "git_brat.grite.audit",
     "git_brat.grite.locks", "git_brat.grite.context"],
    ["git_brat.grite.sync"],
    ["git_brat.grite.doctor", "git_brat.grite.repair", "git_brat.grite.init", "git_brat.grite.trust"],
    ["git_brat.grite.cli", "git_brat.grite.__main__"],
    ["git_brat.brat", "git_brat.brat.engines", "git_brat.brat.templates"],
    ["git_brat.brat.config", "git_brat.brat.layout"],
    ["git_brat.brat.trust", "git_brat.brat.config_text"],   # what config takes effect
    ["git_brat.brat.board"],
    ["git_brat.brat.tasks", "git_brat.brat.sessions", "git_brat.brat.review",
     "git_brat.brat.holds"],
    ["git_brat.brat.daemon", "git_brat.brat.workflows"],
    ["git_brat.brat.refinery"],
    ["git_brat.brat.witness"],
    ["git_brat.brat.mayor", "git_brat.brat.deacon", "git_brat.brat.status",
     "git_brat.brat.inbox"],
    ["git_brat.brat.ui"],                               # the web board: reads every role
    ["git_brat.brat.mcpserver"],                        # `git brat mcp`: the CLI's calls as tools
    ["git_brat.brat.demo"],
    ["git_brat.brat.init"],
    ["git_brat.brat.cli", "git_brat.brat.__main__"],
    ["git_brat.manpage", "git_brat.manpage_text"],      # reads both CLIs
]
FLOOR = {name: n for n, names in enumerate(FLOORS) for name in names}

GIT_ONLY = "git_brat.git"   # the one package allowed to import dulwich or run git
# The scripted demo agent is a program of its own that stands in for an engine: like every
# agent, it runs git itself in its work tree, as a separate process.
RUNS_GIT_AS_AN_AGENT = {"git_brat.brat.demo.agent"}


def modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


MODULES = modules()


def package_of(name: str) -> str:
    """The folder a module lives in (a package's __init__ lives in its own folder)."""
    return name if MODULES[name].name == "__init__.py" else name.rpartition(".")[0]


def floor_of(name: str) -> int:
    best = None
    for prefix, n in FLOOR.items():
        if (name == prefix or name.startswith(prefix + ".")) and (
                best is None or len(prefix) > len(best[0])):
            best = (prefix, n)
    assert best is not None, f"{name} is on no floor: add it to FLOORS in {__file__}"
    return best[1]


def _type_only(tree: ast.AST) -> set[int]:
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return skip


def imports_of(name: str, tree: ast.AST | None = None) -> list[tuple[str, int]]:
    """(module imported, line) for every own-package import in a module, at any depth."""
    path = MODULES[name]
    tree = tree or ast.parse(path.read_text(), str(path))
    skip = _type_only(tree)
    out = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names if a.name.startswith("git_brat")]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package_of(name).split(".")
                base = base[:len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if not mod.startswith("git_brat"):
                continue
            for a in node.names:
                sub = f"{mod}.{a.name}"
                out.append((sub if sub in MODULES else mod, node.lineno))
    return [(m, ln) for m, ln in out if m in MODULES and m != name]


def graph() -> dict[str, set[str]]:
    return {name: {m for m, _ in imports_of(name)} for name in MODULES}


def upward_arrows(edges: dict[str, set[str]] | None = None) -> list[str]:
    """Every import that points to a higher floor, or sideways into another folder."""
    bad = []
    for name in sorted(MODULES):
        for target in sorted((edges or graph())[name] if edges else
                             {m for m, _ in imports_of(name)}):
            me, it = floor_of(name), floor_of(target)
            if it > me:
                bad.append(f"{name} (floor {me}) imports {target} (floor {it}): upward")
            elif it == me and package_of(target) != package_of(name) \
                    and not package_of(name).startswith(package_of(target) + ".") \
                    and not package_of(target).startswith(package_of(name) + "."):
                bad.append(f"{name} imports {target}: sideways, into another folder of floor {me}")
    return bad


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_no_module_imports_in_a_cycle():
    found = cycles(graph())
    assert not found, "import cycles (imports inside functions count):\n" + "\n".join(
        " <-> ".join(c) for c in found)


def test_every_import_points_down_or_stays_in_its_folder():
    bad = upward_arrows()
    assert not bad, "imports against the layers:\n" + "\n".join(bad)


# An argv starting with "git" (but `git brat` / `git grite`: this program, not git's plumbing).
_RUNS_GIT = re.compile(r"""\[\s*["']git["']\s*(\]|,(?!\s*["'](brat|grite)["']))""")


def test_only_the_git_package_opens_dulwich_or_runs_git():
    bad = []
    for name, path in MODULES.items():
        if name == GIT_ONLY or name.startswith(GIT_ONLY + ".") or name in RUNS_GIT_AS_AN_AGENT:
            continue
        text = path.read_text()
        tree = ast.parse(text)
        for node in ast.walk(tree):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            for m in mods:
                if m == "dulwich" or m.startswith("dulwich."):
                    bad.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {m}")
        for n, line in enumerate(text.splitlines(), 1):
            if _RUNS_GIT.search(line):
                bad.append(f"{path.relative_to(ROOT)}:{n} runs git: {line.strip()}")
    assert not bad, "git is run only by git_brat/git/:\n" + "\n".join(bad)


# -- the checker checks what it says it checks --------------------------------------------

def test_an_upward_import_inside_a_function_is_caught(tmp_path):
    source = "def f():\n    from git_brat.brat import board\n    return board\n"
    tree = ast.parse(source)
    name = "git_brat.grite.model.state"
    found = [m for m, _ in imports_of(name, tree)]
    assert "git_brat.brat.board" in found
    edges = graph()
    edges[name] = edges[name] | set(found)
    assert any(a.startswith(f"{name} (floor") and "git_brat.brat.board" in a
               for a in upward_arrows(edges))


def test_a_cycle_through_a_function_level_import_is_caught():
    edges = graph()
    edges["git_brat.errors"] = edges["git_brat.errors"] | {"git_brat.grite.repo"}
    assert any("git_brat.errors" in c and "git_brat.grite.repo" in c for c in cycles(edges))


def test_imports_under_type_checking_are_left_out():
    source = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
              "    from git_brat.brat.board import Board\n")
    assert imports_of("git_brat.grite.model.state", ast.parse(source)) == []


@pytest.mark.parametrize("name", sorted(MODULES))
def test_every_module_is_on_a_floor_and_says_what_it_is(name):
    floor_of(name)
    doc = ast.get_docstring(ast.parse(MODULES[name].read_text()))
    assert doc and doc.strip(), f"{MODULES[name].relative_to(ROOT)} has no docstring"
    assert "TODO" not in doc


def test_no_module_is_over_600_lines():
    long = {str(p.relative_to(ROOT)): n for p in MODULES.values()
            if (n := len(p.read_text().splitlines())) > 600}
    assert not long, f"split these by job: {long}"
