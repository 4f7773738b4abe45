"""What syncs of a failed check is a redacted excerpt, redacted before it is cut; what stays local
(a detached role's output) only the user reads; a title's credential stays out of the log
commit's subject too."""

from __future__ import annotations

import os
import stat
import sys

from git_brat import process
from git_brat.brat.refinery.checking import TAIL_CHARS, TAIL_LINES, excerpt
from helpers import brat, git
from secret_shapes import PEM, PEM_BODY

TOKEN = "sk-ant-api03-" + "Zq9" * 2000


def test_a_key_the_excerpt_cut_splits_is_redacted_whole():
    out = excerpt(b"building\n" + TOKEN.encode() + b"\n1 failed\n")
    assert len(out) <= TAIL_CHARS and "Zq9" not in out and out.endswith("[redacted]\n1 failed")


def test_a_private_key_whose_start_is_lines_before_the_excerpt_is_redacted():
    lines = PEM.splitlines()
    output = "\n".join([lines[0], *(["QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo="] * 60), *lines[1:], "E"])
    out = excerpt(output.encode())
    assert len(out.splitlines()) <= TAIL_LINES and out.endswith("[redacted]\nE")
    assert "QUJDREVGR0hJSktMTU5P" not in out and PEM_BODY.splitlines()[0] not in out


def test_a_check_printing_megabytes_costs_only_its_excerpt():
    big = (b"ok line of a long test run\n" * 200_000) + b"password: hunter2\nFAILED\n"
    out = excerpt(big)
    assert out.endswith("password: [redacted]\nFAILED") and len(out) <= TAIL_CHARS


def test_a_detached_role_writes_its_output_where_only_its_user_reads(tmp_path):
    log = tmp_path / "brat" / "witness.log"
    pf = process.detach([sys.executable, "-c", "print('engine said: sk-ant-api03-xyz')"],
                        role="witness", cwd=str(tmp_path), env=dict(os.environ), log=str(log))
    try:
        os.waitpid(pf.pid, 0)
    except ChildProcessError:
        pass
    assert stat.S_IMODE(log.stat().st_mode) == 0o600 and "engine said" in log.read_text()


def test_a_credential_in_a_title_stays_out_of_the_log_commit_subject(brepo):
    cid = brat(brepo, "convoy", "create", "c").out.strip()
    secret = "ghp_aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5"
    tid = brat(brepo, "task", "create", "--convoy", cid, f"rotate {secret}").out.strip()
    assert secret not in git(brepo, "log", "--format=%B", "refs/grite/wal")
    shown = brat(brepo, "task", "show", tid).out
    assert "rotate [redacted]" in shown and secret not in shown
