"""An agent (or the mayor) asks where a name is defined: grite's code context index.

Real repositories in temp dirs, the real CLI, the real tree-sitter grammars (the `context`
extra); the index is derived per clone from blob ids, never synced.
"""

from __future__ import annotations

import json
import os

import pytest

from helpers import git, grite, grite_json, make_repo, status, wal_tip

pytest.importorskip("tree_sitter", reason="the context extra: pip install 'git-brat[context]'")

SOURCES = {
    "app/server.py": "class Server:\n    def handle_request(self, req):\n        pass\n\n"
                     "def start_server():\n    pass\n",
    "web/client.js": "export class ApiClient {\n  fetchUser() {}\n}\n"
                     "const makeClient = () => new ApiClient();\n",
    "web/types.ts": "export interface UserRecord { id: number }\n"
                    "export type UserId = number;\nexport enum Role { Admin }\n",
    "svc/main.go": "package svc\n\ntype Handler struct{}\n\n"
                   "func (h *Handler) ServeHTTP() {}\n\nfunc NewHandler() *Handler { return nil }\n",
    "core/lib.rs": "pub struct Ledger;\n\nimpl Ledger {\n    pub fn balance(&self) -> u64 { 0 }\n}\n\n"
                   "pub trait Audit { fn audit(&self); }\n",
}


def commit_files(repo, files: dict[str, str | bytes], message: str = "code") -> None:
    for rel, text in files.items():
        path = repo / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
        git(repo, "add", rel)
    git(repo, "commit", "-q", "-m", message)


@pytest.fixture
def coderepo(tmp_path):
    repo = make_repo(tmp_path / "code")
    commit_files(repo, SOURCES)
    return repo


def found(repo, name, *args, cwd=None):
    return {(h["name"], h["kind"], h["path"], h["parent"])
            for h in grite_json(cwd or repo, "context", "query", name, *args)}


def test_an_agent_finds_the_definitions_of_five_languages_by_name(coderepo):
    before = status(coderepo)
    assert ("Server", "class", "app/server.py", "") in found(coderepo, "server")
    assert ("handle_request", "method", "app/server.py", "Server") in found(coderepo, "handle")
    assert ("ApiClient", "class", "web/client.js", "") in found(coderepo, "apiclient")
    assert ("makeClient", "function", "web/client.js", "") in found(coderepo, "makeclient")
    assert {("UserRecord", "interface", "web/types.ts", ""),
            ("UserId", "type", "web/types.ts", "")} <= found(coderepo, "user")
    assert ("ServeHTTP", "method", "svc/main.go", "Handler") in found(coderepo, "serve")
    assert ("balance", "method", "core/lib.rs", "Ledger") in found(coderepo, "balance")
    assert ("Audit", "trait", "core/lib.rs", "") in found(coderepo, "audit")
    exact_first = grite_json(coderepo, "context", "query", "handler")
    assert exact_first[0]["name"] == "Handler", "an exact name comes before longer ones"
    assert found(coderepo, "user", "--kind", "type") == {("UserId", "type", "web/types.ts", "")}
    assert status(coderepo) == before, "the index lives in .git/grite/context, not the tree"


def test_query_and_show_work_from_a_subdirectory_and_a_linked_worktree(coderepo, tmp_path):
    sub = coderepo / "app"
    shown = grite_json(sub, "context", "show", "server.py")
    assert shown["path"] == "app/server.py" and shown["language"] == "python"
    assert [(s["name"], s["line"]) for s in shown["symbols"]] == [
        ("Server", 1), ("handle_request", 2), ("start_server", 5)]
    human = grite(sub, "context", "query", "start").out
    assert "app/server.py:5" in human and "start_server" in human
    git(coderepo, "worktree", "add", "-q", str(tmp_path / "linked"))
    assert ("Ledger", "struct", "core/lib.rs", "") in found(coderepo, "ledger",
                                                            cwd=tmp_path / "linked")


def test_a_changed_file_is_the_only_one_parsed_again_and_a_copy_is_never_parsed(coderepo):
    first = grite_json(coderepo, "context", "index")
    assert first["parsed"] == len(SOURCES) and first["files"] == len(SOURCES)
    assert grite_json(coderepo, "context", "index")["changed"] == 0
    commit_files(coderepo, {"app/server.py": SOURCES["app/server.py"] + "def stop_server():\n"
                                                                        "    pass\n"})
    again = grite_json(coderepo, "context", "index")
    assert (again["changed"], again["parsed"]) == (1, 1)
    commit_files(coderepo, {"copy/lib.rs": SOURCES["core/lib.rs"]})
    copied = grite_json(coderepo, "context", "index")
    assert (copied["changed"], copied["parsed"], copied["reused"]) == (1, 0, 1)
    assert ("Ledger", "struct", "copy/lib.rs", "") in found(coderepo, "ledger")


def test_an_index_file_that_is_not_one_is_made_anew(coderepo):
    grite(coderepo, "context", "index")
    index = coderepo / ".git" / "grite" / "context" / "index.sqlite"
    for suffix in ("-wal", "-shm"):
        (coderepo / ".git" / "grite" / "context" / f"index.sqlite{suffix}").unlink(missing_ok=True)
    index.write_bytes(b"not a database at all" * 100)
    assert ("Server", "class", "app/server.py", "") in found(coderepo, "server")


def test_query_follows_head_without_an_explicit_index(coderepo):
    assert found(coderepo, "stop_server") == set()
    commit_files(coderepo, {"app/server.py": "def stop_server():\n    pass\n"})
    assert found(coderepo, "stop_server") == {("stop_server", "function", "app/server.py", "")}
    assert found(coderepo, "handle_request") == set(), "the old blob's symbols are gone"


def test_every_clone_gets_the_same_answer_and_nothing_of_the_index_is_synced(coderepo, tmp_path):
    mine = grite_json(coderepo, "context", "query", "e", "-n", "200")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(coderepo), str(clone))
    assert grite_json(clone, "context", "query", "e", "-n", "200") == mine
    assert os.path.exists(clone / ".git" / "grite" / "context" / "index.sqlite")
    assert git(coderepo, "for-each-ref", "refs/grite") == "", "derived data is never a ref"


def test_a_symlink_a_huge_file_and_a_binary_file_are_listed_and_never_read(coderepo):
    os.symlink("../app/server.py", coderepo / "web" / "link.py")
    os.symlink("/etc/passwd", coderepo / "web" / "passwd.py")
    git(coderepo, "add", "web/link.py", "web/passwd.py")
    huge = "".join(f"def huge_{i}():\n    pass\n" for i in range(60_000)).encode()
    commit_files(coderepo, {"gen/huge.py": huge, "gen/blob.py": b"def bin_fn():\0\n    pass\n"})
    assert len(huge) > 1 << 20
    reasons = {p: grite_json(coderepo, "context", "show", p)
               for p in ("web/link.py", "web/passwd.py", "gen/huge.py", "gen/blob.py")}
    assert {p: (s["skipped"], s["symbols"]) for p, s in reasons.items()} == {
        "web/link.py": ("symlink (not followed)", []),
        "web/passwd.py": ("symlink (not followed)", []),
        "gen/huge.py": ("too large", []),
        "gen/blob.py": ("binary", [])}
    assert {h[2] for h in found(coderepo, "server")} == {"app/server.py"}
    assert found(coderepo, "huge_1") == set() and found(coderepo, "bin_fn") == set()
    assert "not parsed: symlink" in grite(coderepo, "context", "show", "web/link.py").out
    again = grite_json(coderepo, "context", "index")
    assert (again["changed"], again["parsed"], again["skipped"]) == (0, 0, 4)


def test_bad_input_is_refused_with_its_exit_code_and_writes_nothing(tmp_path):
    empty = make_repo(tmp_path / "empty", commit=False)
    proc = grite(empty, "context", "index", check=False)
    assert proc.returncode == 2 and "no commit" in proc.stderr.decode()
    assert not (empty / ".git" / "grite" / "context").exists()
    repo = make_repo(tmp_path / "r")
    for args in (["query", " "], ["index", "--rev", "--output=x"], ["index", "--rev", "nosuch"]):
        proc = grite(repo, "context", *args, "--json", check=False)
        assert proc.returncode == 2 and proc.stdout == b"", args
        assert len(proc.stderr.decode().strip().splitlines()) == 1
    assert grite(repo, "context", "show", "README", check=False).returncode == 3
    assert not (repo / "x").exists()


def test_without_tree_sitter_the_index_names_the_extra_to_install(coderepo, tmp_path):
    hide = tmp_path / "hide" / "tree_sitter"
    hide.mkdir(parents=True)
    (hide / "__init__.py").write_text("raise ImportError('hidden by the test')\n")
    proc = grite(coderepo, "context", "query", "server", check=False,
                 env={"PYTHONPATH": str(hide.parent)})
    assert proc.returncode == 2 and "git-brat[context]" in proc.stderr.decode()


def test_the_project_context_is_set_unset_and_kept_as_events(grepo):
    tip = wal_tip(grepo)
    for bad in (["Bad-Key", "x"], ["key"], ["key", "v", "--unset"], ["key", ""]):
        proc = grite(grepo, "context", "set", *bad, "--json", check=False)
        assert proc.returncode == 2 and proc.stdout == b"", bad
    assert wal_tip(grepo) == tip, "bad input writes nothing"
    assert grite_json(grepo, "context", "set", "test_command", "pytest -q")["changed"]
    assert not grite_json(grepo, "context", "set", "test_command", "pytest -q")["changed"]
    grite(grepo, "context", "set", "language", "python")
    assert grite_json(grepo, "context", "project") == {"language": "python",
                                                       "test_command": "pytest -q"}
    grite(grepo, "context", "set", "language", "--unset")
    assert grite_json(grepo, "context", "project") == {"test_command": "pytest -q"}
    trail = json.dumps(grite_json(grepo, "log"))
    assert "context.set test_command" in trail or "ctx:test_command" in trail


def test_a_forged_project_value_that_is_not_text_is_rejected_at_replay():
    from git_brat.grite.context.project import ENTITY, values
    from git_brat.grite.model import events as ev
    from git_brat.grite.model.state import replay
    actor = "a1" * 8
    log = [ev.make_event(ENTITY, actor, 1, 1000, ev.Create("project", {})),
           ev.make_event(ENTITY, actor, 2, 1001, ev.SetFields({"ctx:test_command": "make"})),
           ev.make_event(ENTITY, actor, 3, 1002, ev.SetFields({"ctx:test_command": {"x": 1}})),
           ev.make_event(ENTITY, actor, 4, 1003, ev.SetFields({"ctx:big": "x" * 70_000}))]
    state = replay(log)
    assert values(state) == {"test_command": "make"}
    assert {log[2].id, log[3].id} <= set(state.rejected)


def test_a_tree_of_more_files_than_the_bound_is_read_only_as_far_as_the_bound(coderepo):
    from git_brat.git import blobs
    from git_brat.git.store import Store
    git_dir = Store.discover(str(coderepo)).git_dir
    tree = blobs.tree_id(git_dir, "HEAD")
    files, more = blobs.list_tree(git_dir, tree, 3)
    assert len(files) == 3 and more
    every, more = blobs.list_tree(git_dir, tree, 100)
    assert not more and {f.path for f in every} == set(SOURCES) | {"README"}
    assert all(f.mode == "100644" and f.size > 0 and len(f.blob) == 40 for f in every)
