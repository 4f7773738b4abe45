"""A conversation id read from the log (any replica writes it) reaches an engine's argv only when
it has the engine's id format: never in an option position."""

from __future__ import annotations

import json


from git_brat.brat.board import SESSION
from git_brat.grite.log.wal import Draft
from git_brat.grite.model import events as ev
from git_brat.grite.repo import Grite

HOSTILE = '--config=model_provider="attacker"'


def test_a_resume_id_shaped_like_an_option_is_refused_naming_it_and_the_task(
        bench, repo, tmp_path):
    argv_file, bindir = tmp_path / "codex-argv.json", tmp_path / "bin"
    bindir.mkdir()
    (bindir / "codex").write_text(
        "#!/usr/bin/env python3\nimport json, sys\n"
        f"open({str(argv_file)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
        "sys.exit(1)\n")
    (bindir / "codex").chmod(0o755)
    bench.config(witness__max_retries="0")
    t = bench.task(bench.convoy(), "Fix it", "commit a")
    # What a pusher's forged record says: the task's last session, a codex conversation.
    g = Grite.open(str(repo))
    g.append([Draft(ev.new_entity_id(), ev.Create(SESSION, {
        "task": t, "status": "failed", "engine": "codex", "engine_session": HOSTILE}))],
        "forged session")
    env = {"PATH": f"{bindir}:{bench.env['PATH']}"}
    bench.brat("witness", "run", "--once", "--engine", "codex", env=env, check=False)
    argvs = [json.loads(line) for line in argv_file.read_text().splitlines()] \
        if argv_file.exists() else []
    assert all(HOSTILE not in argv for argv in argvs)
    (mine,) = [s for s in bench.sessions(t) if s.get("engine") == "codex" and s["reason"]]
    assert HOSTILE in mine["reason"] and t in mine["reason"] and "refused" in mine["reason"]
