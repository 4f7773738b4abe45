"""`git brat demo --ui`: the demo runs with the board serving its repository, left up afterwards."""

from __future__ import annotations

import json
import os
import signal

import boardkit
from helpers import brat, brat_json, run


def test_demo_with_the_board_serves_the_loop_and_leaves_the_board_up(tmp_path, repo):
    where = tmp_path / "demo"
    demo_repo = where / "textstats"
    state = demo_repo / ".git" / "brat" / "ui.json"
    try:
        out = json.loads(run(["git", "brat", "demo", "--fast", "--ui", "--pause", "0", "--dir",
                              str(where), "--json"], repo, timeout=600).out)
        assert out["ok"] and out["kept"] and out["board"].startswith("http://127.0.0.1:")
        assert any(s["title"].startswith("git brat ui") for s in out["steps"])
        running = json.loads(state.read_text())
        assert running["url"] == out["board"]
        board = boardkit.Board(None, {k: running[k] for k in ("url", "port", "pid")})
        convoys = board.get_json("/api/v1/convoys")
        assert [c["status"] for c in convoys] == ["landed"]
        assert board.get_json("/api/v1/tasks") == brat_json(demo_repo, "task", "list")
        assert brat_json(demo_repo, "ui", "stop")["pid"] == running["pid"]
        assert brat(demo_repo, "ui", "stop", check=False).returncode == 3
    finally:
        if state.exists():   # the test failed with the board up: stop it by its pid
            try:
                os.kill(json.loads(state.read_text())["pid"], signal.SIGTERM)
            except (ProcessLookupError, ValueError, KeyError):
                pass
