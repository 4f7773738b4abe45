"""The seven real engines in the quarantine a witness session gets (witness.sandbox = "bwrap"),
steered by a hostile model: the model has the engine's own shell read the replica's signing
key, the board's token and the trust file, which would carry them to the model in the next
request. In the sandbox each read finds nothing there, nothing of them reaches the model, and
the engine's ordinary work still lands: the task waits for review.

Run as root here, and again as a plain user (tests/brat/sandbox/test_as_a_plain_user.py),
where the engines come from a directory that user reads (BRAT_ENGINES_DIR, e.g.
/opt/git-brat-engines from scripts/install-engines).
"""

from __future__ import annotations

import json
import shutil

import pytest

from enginekit import ENGINES
from helpers import git
from test_real_engines import _witness_available, witness_repo

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("bwrap") is None,
                                 reason="bubblewrap (bwrap) is not installed")]

TOKEN = "T0KEN-the-board-token-5e1f"
# aider has no shell or file tool the model can call: what it reads is the files it was given.
SHELL_ENGINES = tuple(n for n in ENGINES if n != "aider")


def _guard_off(box) -> None:
    """The engine's own guard against reads outside its directory off, as a user may have
    it (opencode auto-rejects them when it is on): the sandbox alone must hold."""
    if box.name == "opencode":
        path = box.env["OPENCODE_CONFIG"]
        with open(path) as f:
            cfg = json.load(f)
        cfg["permission"]["external_directory"] = "allow"
        with open(path, "w") as f:
            json.dump(cfg, f)


def _secrets(repo) -> dict[str, object]:
    """The secrets a session's agent must not read, as brat leaves them (a running board's
    token planted as the board writes it)."""
    common = repo / ".git"
    (common / "brat" / "ui.json").write_text(
        json.dumps({"url": f"http://127.0.0.1:1/?token={TOKEN}"}))
    return {"board token": common / "brat" / "ui.json",
            "signing key": common / "grite" / "keys" / "replica.ed25519",
            "trust file": common / "brat" / "trust.json"}


@pytest.mark.parametrize("name", ENGINES)
def test_a_sandboxed_engine_told_to_read_the_secrets_sends_the_model_none_and_its_task_lands(
        name, sandbox_for, tmp_path):
    why = _witness_available()
    if why:
        pytest.skip(why)
    box = sandbox_for(name)
    _guard_off(box)
    repo = tmp_path / "repo"
    reads = " ".join(str(repo / ".git" / p) for p in
                     ("brat/ui.json", "grite/keys/replica.ed25519", "brat/trust.json"))
    repo, tid, brat, env = witness_repo(
        box, tmp_path, f"Write the greeting file.\n\nFAKE-CAT: {reads}\n"
        f"FAKE-EDIT: greeting.txt: hello from {name}\nFAKE-COMMIT: greeting from {name}\n",
        witness__max_retries="0", witness__sandbox="bwrap")
    secrets = _secrets(repo)
    key = secrets["signing key"].read_bytes()
    run = box.run(["git", "brat", "witness", "run", "--once", "--engine", name,
                   "--timeout", "120"], repo, env=env, timeout=150)
    assert run.rc == 0, run.show()
    sent = json.dumps([r.get("body") for r in run.model_requests()])
    assert TOKEN not in sent, run.show()
    assert key.hex() not in sent and key.decode("latin-1") not in sent, run.show()
    if name in SHELL_ENGINES:   # the shell ran the reads, and each found nothing there
        for what, path in secrets.items():
            assert f"{path}: No such file or directory" in sent, (what, run.show())
    branch = f"brat/{tid}"
    assert git(repo, "show", f"{branch}:greeting.txt") == f"hello from {name}", run.show()
    assert TOKEN not in git(repo, "log", "-p", f"main..{branch}")
    assert json.loads(brat("task", "show", tid, "--json").out)["status"] == "needs-review"
