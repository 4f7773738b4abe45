"""`git brat init` and `git brat config`: the user's .brat/config.toml, validated with clear errors."""

from __future__ import annotations

import os
import tomllib

import msgspec
import pytest

from bratkit import fail
from git_brat.brat import config
from helpers import brat, brat_json, git, make_repo, run, status, wal_tip


def _every_key() -> dict[str, list[str]]:
    return {sec: [f.name for f in msgspec.inspect.type_info(cls).fields]
            for sec, cls in config.SECTIONS.items() if sec != "hub"}   # hub: a hub's own file


def test_init_sets_up_grite_and_writes_a_config_with_every_key_and_its_default(repo):
    assert status(repo) == ""
    out = brat_json(repo, "init")
    assert out["config_created"] and out["config"] == ".brat/config.toml"
    assert out["grite"]["replica"] and out["grite"]["created"]
    for hook in out["grite"].get("hooks", []):   # installed as `git grite init` installs them
        assert os.path.exists(os.path.join(out["grite"]["hooks_dir"], hook["hook"]))
    # The config is the only thing in the work tree, and it is meant to be committed.
    assert status(repo) == "?? .brat/config.toml"
    text = (repo / ".brat" / "config.toml").read_text()
    data = tomllib.loads(text)
    defaults = msgspec.to_builtins(config.Config())
    for section, keys in _every_key().items():
        assert sorted(data[section]) == sorted(keys)
        for key in keys:
            assert data[section][key] == defaults[section][key], f"{section}.{key}"
    lines = text.splitlines()
    for section, keys in _every_key().items():
        for key in keys:
            i = next(n for n, line in enumerate(lines) if line.startswith(f"{key} = "))
            above = []
            while lines[i - 1].startswith("#"):
                i -= 1
                above.insert(0, lines[i])
            assert "Default:" in " ".join(above) and "Allowed:" in " ".join(above), key
    assert "# [engines.claude]" in text   # engine overrides documented by example
    # Grite works right away.
    assert brat_json(repo, "convoy", "list") == []


def test_init_is_idempotent_and_never_touches_an_existing_config(repo):
    brat(repo, "init")
    path = repo / ".brat" / "config.toml"
    edited = path.read_text().replace("concurrency = 2", "concurrency = 7  # ours")
    path.write_text(edited)
    tip = wal_tip(repo)
    out = brat_json(repo, "init")
    assert not out["config_created"] and not out["grite"]["created"]
    assert path.read_text() == edited
    assert wal_tip(repo) == tip
    assert "kept .brat/config.toml" in brat(repo, "init").out


def _target(repo) -> str:
    return brat_json(repo, "config", "get", "refinery.target_branch")["value"]


def test_init_on_a_feature_branch_targets_the_remotes_default_branch(tmp_path):
    seed = make_repo(tmp_path / "seed")
    git(seed, "branch", "-m", "trunk")
    git(tmp_path, "clone", "-q", "--bare", str(seed), str(tmp_path / "hub.git"))
    repo = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(tmp_path / "hub.git"), str(repo))
    git(repo, "checkout", "-q", "-b", "feature/parser")
    brat(repo, "init")
    assert _target(repo) == "trunk"


def test_init_on_a_feature_branch_without_a_remote_targets_main(tmp_path):
    repo = make_repo(tmp_path / "r")
    git(repo, "checkout", "-q", "-b", "feature/parser")
    brat(repo, "init")
    assert _target(repo) == "main"


def test_init_targets_the_checked_out_branch_when_nothing_else_names_one(tmp_path):
    repo = make_repo(tmp_path / "r")
    git(repo, "branch", "-m", "trunk")
    brat(repo, "init")
    assert _target(repo) == "trunk"


def test_init_in_a_bare_repository_is_refused_and_writes_nothing(repo, tmp_path):
    bare = tmp_path / "hub.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(bare))
    code, msg = fail(bare, "init")
    assert code == 2 and "bare" in msg and "work tree" in msg and "git brat init --hub" in msg
    assert not (bare / "grite").exists()
    assert run(["git", "for-each-ref", "refs/grite"], bare).out == ""


def test_init_with_a_broken_config_stops_before_writing_anything(repo):
    (repo / ".brat").mkdir()
    (repo / ".brat" / "config.toml").write_text("[witness]\nconcurency = 3\n")
    code, msg = fail(repo, "init")
    assert code == 2 and "unknown key witness.concurency" in msg
    assert wal_tip(repo) is None and not (repo / ".git" / "grite").exists()


BAD_CONFIGS = [
    ("[witness]\nconcurency = 3\n",
     "unknown key witness.concurency (allowed in [witness]: engine, concurrency, timeout"),
    ("colour = 1\n", "unknown key colour (allowed at the top level: witness, refinery, deacon"),
    ("[witness]\nconcurrency = \"two\"\n",
     'witness.concurrency = "two" is not allowed: expected an integer from 1 to 64'),
    ("[witness]\nconcurrency = 0\n",
     "witness.concurrency = 0 is not allowed: expected an integer from 1 to 64"),
    ("[refinery]\nmerge_policy = \"octopus\"\n",
     'refinery.merge_policy = "octopus" is not allowed: expected one of "merge", "rebase", "squash"'),
    ("[refinery]\npush = \"yes\"\n", 'refinery.push = "yes" is not allowed: expected true or false'),
    ("[deacon]\ninterval = -5\n", "deacon.interval = -5 is not allowed: expected a number > 0"),
    ("witness = 3\n", "witness must be a table"),
    ("[engines.mine]\nmodel = \"x\"\n", "engines.mine is not a preset"),
    ("[engines.claude]\nprompt = \"pipe\"\n",
     'engines.claude.prompt = "pipe" is not allowed: expected one of "arg", "file", "stdin"'),
    ("[engines.claude]\ncommand = []\n",
     "engines.claude.command = [] is not allowed: expected a non-empty list of strings"),
    ("[engines.claude]\nenv = {A = 1}\n",
     "engines.claude.env = {A = 1} is not allowed: expected a table of strings"),
    ("[witness]\nengine = \"robot\"\n",
     'witness.engine = "robot" is not allowed: expected one of aider, claude'),
    ("[witness]\nheartbeat = 200\n", "witness.heartbeat (200) must be less than witness.lease_ttl (120)"),
    ("[refinery]\ntarget_branch = \"a..b\"\n", "expected a valid branch name"),
    ("[witness\n", "not valid TOML"),
]


@pytest.mark.parametrize("text,expected", BAD_CONFIGS, ids=[b[1][:40] for b in BAD_CONFIGS])
def test_a_bad_config_is_refused_naming_the_key_and_what_is_allowed(brepo, text, expected):
    (brepo / ".brat" / "config.toml").write_text(text)
    for cmd in (["status"], ["config", "get", "witness.concurrency"]):
        code, msg = fail(brepo, *cmd)
        assert code == 2
        assert msg.startswith(".brat/config.toml: ") and expected in msg, msg


def test_config_get_shows_effective_values_and_set_changes_them_keeping_comments(brepo):
    path = brepo / ".brat" / "config.toml"
    before = path.read_text()
    comments = [line for line in before.splitlines() if line.startswith("#")]
    assert brat(brepo, "config", "get", "witness.concurrency").out.strip() == "2"
    assert brat(brepo, "config", "set", "witness.concurrency", "4").out.strip() == \
        "witness.concurrency = 4"
    assert brat_json(brepo, "config", "get", "witness.concurrency")["value"] == 4
    brat(brepo, "config", "set", "refinery.check", "make test")
    assert brat(brepo, "config", "get", "refinery.check").out.strip() == "make test"
    brat(brepo, "config", "set", "refinery.merge_policy", "squash")
    brat(brepo, "config", "set", "engines.claude.model", "opus")
    brat(brepo, "config", "set", "engines.shell.command", '["./agent.sh", "{prompt}"]')
    brat(brepo, "config", "set", "witness.engine", "shell")
    brat(brepo, "config", "set", "engines.shell.env", '{TOKEN_FILE = "/tmp/t"}')
    after = path.read_text()
    assert [line for line in after.splitlines() if line.startswith("#")] == comments
    everything = brat_json(brepo, "config", "get")
    assert everything["witness"]["engine"] == "shell" and everything["witness"]["concurrency"] == 4
    assert everything["engines"]["claude"]["model"] == "opus"
    assert everything["engines"]["shell"]["command"] == ["./agent.sh", "{prompt}"]
    assert everything["engines"]["shell"]["env"] == {"TOKEN_FILE": "/tmp/t"}
    assert tomllib.loads(after)["refinery"]["merge_policy"] == "squash"
    assert brat_json(brepo, "config", "get", "witness")["value"]["concurrency"] == 4
    assert "concurrency = 4" in brat(brepo, "config", "get").out


@pytest.mark.parametrize("key,value,code,expected", [
    ("witness.concurrency", "0", 2, "witness.concurrency = 0 is not allowed: expected an integer from 1 to 64"),
    ("witness.concurrency", "many", 2, "witness.concurrency = many is not allowed"),
    ("witness.concurrency", "-3", 2, "witness.concurrency = -3 is not allowed"),
    ("refinery.merge_policy", "octopus", 2, 'expected one of "merge", "rebase", "squash"'),
    ("witness.concurency", "3", 3, "unknown config key witness.concurency (keys in [witness]: engine"),
    ("nonsense.key", "3", 3, "unknown config key nonsense.key (sections: witness, refinery"),
    ("witness", "3", 2, "witness is a section"),
    ("engines.robot.model", "x", 2, "engines.robot is not a preset"),
    ("witness.engine", "shell", 2, "witness.engine = \"shell\" needs engines.shell.command"),
    ("witness.heartbeat", "500", 2, "must be less than witness.lease_ttl"),
])
def test_config_set_refuses_bad_values_and_writes_nothing(brepo, key, value, code, expected):
    path = brepo / ".brat" / "config.toml"
    before = path.read_bytes()
    got, msg = fail(brepo, "config", "set", key, value)
    assert got == code and expected in msg, msg
    assert path.read_bytes() == before


def test_config_set_without_a_config_file_writes_the_full_file(repo):
    brat(repo, "init")
    (repo / ".brat" / "config.toml").unlink()
    brat(repo, "config", "set", "deacon.interval", "15")
    data = tomllib.loads((repo / ".brat" / "config.toml").read_text())
    assert data["deacon"]["interval"] == 15 and data["witness"]["concurrency"] == 2


def test_config_works_from_a_subdirectory(brepo):
    sub = brepo / "src" / "deep"
    sub.mkdir(parents=True)
    brat(sub, "config", "set", "witness.concurrency", "3")
    assert brat_json(sub, "config", "get", "witness.concurrency")["value"] == 3
    assert not (sub / ".brat").exists()


def test_init_ignores_a_remote_head_that_is_no_valid_branch_name(tmp_path):
    seed = make_repo(tmp_path / "seed")
    hub = tmp_path / "hub.git"
    git(tmp_path, "clone", "-q", "--bare", str(seed), str(hub))
    git(hub, "update-ref", "refs/heads/-x", "main")
    git(hub, "symbolic-ref", "HEAD", "refs/heads/-x")
    repo = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--no-checkout", str(hub), str(repo))
    git(repo, "checkout", "-q", "-b", "main", "origin/main")
    brat(repo, "init")
    assert _target(repo) == "main"
    brat(repo, "status")   # the config it wrote is one every command accepts


def test_the_reference_documents_every_config_key():
    import msgspec
    from git_brat.brat import config as c
    from helpers import ROOT
    ref = (ROOT / "docs" / "reference.md").read_text()
    for sec, cls in c.SECTIONS.items():
        for f in msgspec.inspect.type_info(cls).fields:
            assert f"`{sec}.{f.name}`" in ref, f"{sec}.{f.name} is not in docs/reference.md"
    for f in msgspec.inspect.type_info(c.Engine).fields:
        assert f"`engines.<name>.{f.name}`" in ref


def test_an_infinite_number_is_refused_in_config(brepo):
    proc = brat(brepo, "config", "set", "witness.timeout", "inf", check=False)
    assert proc.returncode == 2 and "witness.timeout" in proc.err
    text = (brepo / ".brat" / "config.toml").read_text()
    (brepo / ".brat" / "config.toml").write_text(text.replace("timeout = 3600", "timeout = inf", 1))
    proc = brat(brepo, "status", check=False)
    assert proc.returncode == 2 and "witness.timeout = inf is not allowed" in proc.err
