"""Secrets an engine or a check prints, or an engine's argv holds, never reach the log (which
syncs to every clone): what it records is redacted; the full text stays in local files that
only the user can read (0600 files in 0700 directories)."""

from __future__ import annotations

import json
import stat


from bratkit import convoy
from helpers import brat, run
from refinerykit import configure, field, refine, request

ENV_KEY = "sk-ant-api03-SECRETFROMENV"
ARGV_KEY = "sk-ant-api03-SECRETINARGV"
GH_TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
SECRETS = (ENV_KEY, ARGV_KEY, GH_TOKEN, "hunter2-db-password")


def _whole_log(repo) -> str:
    return run(["git", "grite", "log", "--json"], repo).out


def _private(path) -> bool:
    return stat.S_IMODE(path.stat().st_mode) == 0o600 and \
        stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_an_engine_echoing_its_keys_leaves_them_in_its_local_log_not_in_the_synced_log(
        bench, repo):
    script = ('echo "error: 401 for key $ANTHROPIC_API_KEY"; echo "GITHUB_TOKEN=$GH"; '
              'echo "DB_PASSWORD=hunter2-db-password"; exit 1')
    bench.config(engines__mine__command=json.dumps(
        ["sh", "-c", script, "x", "--api-key", ARGV_KEY, "{prompt}"]),
        witness__engine="mine", witness__max_retries="0")
    t = bench.task(bench.convoy(), "Fix it")
    bench.brat("witness", "run", "--once", env={"ANTHROPIC_API_KEY": ENV_KEY, "GH": GH_TOKEN},
               check=False)
    (s,) = bench.sessions(t)
    assert s["status"] == "failed" and "[redacted]" in s["output_tail"]
    assert s["argv"][s["argv"].index("--api-key") + 1] == "[redacted]"
    log = _whole_log(repo)
    assert "error: 401 for key [redacted]" in log
    assert not [x for x in SECRETS if x in log]
    # The full output stays here, for this user only; so does the prompt.
    session_log = repo / ".git" / "brat" / "sessions" / f"{s['id']}.log"
    assert ENV_KEY in session_log.read_text() and _private(session_log)
    assert _private(repo / ".git" / "brat" / "sessions" / s["id"] / "prompt.txt")


def test_a_check_dumping_its_environment_leaves_the_keys_in_the_merge_log_only(brepo):
    configure(brepo, check="env | grep -i -e api_key -e token; test ! -e a.txt", max_attempts=1)
    tid = request(brepo, convoy(brepo), "Change", {"a.txt": "a\n"})
    refine(brepo, env={"ANTHROPIC_API_KEY": ENV_KEY, "GITHUB_TOKEN": GH_TOKEN})
    failure = field(brepo, tid, "last_failure")
    assert "ANTHROPIC_API_KEY=[redacted]" in failure and "GITHUB_TOKEN=[redacted]" in failure
    assert not [x for x in SECRETS if x in _whole_log(brepo)]
    (merge_log,) = (brepo / ".git" / "brat" / "merges").iterdir()
    assert ENV_KEY in merge_log.read_text() and _private(merge_log)
    assert brat(brepo, "task", "show", tid, "--json").out.count(ENV_KEY) == 0
