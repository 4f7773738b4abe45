"""The agent-command gate: a sandboxed agent's `task done / comment / block / show` reach its
witness over a unix socket bound into the sandbox, and the witness writes the event.

The agent cannot write the log itself (refs/grite/ is read-only in its sandbox); the witness
writes for it, under the session's lease fence, and only about the session's own task (a
knowledge note it adds, `kb`, names that task and the session).
"""

from __future__ import annotations

import json
import os
import socket
import threading

import msgspec

from git_brat.brat import board as model
from git_brat.brat import kb
from git_brat.brat import sessions as ss
from git_brat.errors import GriteError, UsageError
from git_brat.grite.issues import summary
from git_brat.grite.model import events as ev
from git_brat.grite.model.kinds import NOTE

ENV = "BRAT_GATE"              # the socket's path, in a sandboxed session's environment
OPS = ("show", "done", "comment", "block", "kb")
MAX_REQUEST = 1 << 20
MAX_NOTES = 20                 # knowledge notes one session may add (each is an event for all)


def socket_path() -> str:
    """A new socket path in a private directory of its own: short (a unix socket's path has
    at most 107 bytes, and .git/brat/sessions/<id>/ in a deep checkout is longer)."""
    import tempfile
    return os.path.join(tempfile.mkdtemp(prefix="brat-gate-"), "sock")


class Gate:
    """One session's socket and the thread answering it (one request at a time)."""

    def __init__(self, store, sid: str, tid: str, path: str):
        self.store, self.sid, self.tid, self.path = store, sid, tid, path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(8)
        self.sock.settimeout(1.0)
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, name=f"brat-gate-{sid[:7]}",
                                       daemon=True)
        self.thread.start()

    def close(self) -> None:
        self._stop.set()
        try:   # wake the accept at once, rather than at its next timeout
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(1)
                s.connect(self.path)
        except OSError:
            pass
        self.thread.join(timeout=5)
        self.sock.close()
        for remove, path in ((os.unlink, self.path), (os.rmdir, os.path.dirname(self.path))):
            try:
                remove(path)
            except OSError:
                pass

    def _serve(self) -> None:
        from git_brat.git.store import Store
        from git_brat.grite.repo import Grite
        s = self.store
        g = Grite(Store(s.git_dir, s.common_dir, s.bare, s.cwd))   # this thread's own
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (socket.timeout, TimeoutError):
                continue
            except OSError:
                return
            if self._stop.is_set():
                conn.close()
                return
            with conn:
                conn.settimeout(30)
                try:
                    answer = answer_request(g, self.sid, self.tid, _read(conn))
                except Exception as exc:   # never let one request end the gate
                    answer = {"ok": False, "error": f"{type(exc).__name__}: {exc}",
                              "exit_code": 1}
                try:
                    conn.sendall(json.dumps(answer).encode() + b"\n")
                except OSError:
                    pass


def _read(conn: socket.socket) -> bytes:
    data = b""
    while b"\n" not in data and len(data) < MAX_REQUEST:
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def answer_request(g, sid: str, tid: str, raw: bytes) -> dict:
    """What the witness answers a request of session sid (on task tid)."""
    try:
        req = json.loads(raw.decode("utf-8"))
        if not isinstance(req, dict):
            raise ValueError
        op, ref, message = req.get("op"), req.get("task"), req.get("message", "")
        if op not in OPS or not isinstance(message, str) or \
                not (ref is None or isinstance(ref, str)):
            raise ValueError
        note = _note_request(req) if op == "kb" else None
    except (ValueError, UnicodeDecodeError):
        return {"ok": False, "error": "not a request the gate understands", "exit_code": 2}
    try:
        state = g.state(refresh=True)
        if ref:
            other = g.resolve(ref, model.TASK).id
            if other != tid:
                raise UsageError(f"refused: session {sid[:7]} works on task {tid[:7]}; it "
                                 f"cannot speak about task {other[:7]}")
        sess = state.entities.get(sid)
        if sess is None:
            raise UsageError(f"session {sid[:7]} is not in the log")
        if op == "done":
            ss.report_done(g, sess, message)
        elif op == "block":
            ss.report_block(g, sess, message)
        elif op == "comment":
            ss.comment(g, tid, sess, message)
        elif op == "kb":
            return {"ok": True, "session": sid, "note": add_note(g, sess, tid, message, *note)}
        b = model.board(g, refresh=True)
        d = b.task_detail(b.tasks[tid], model.history(g, tid))
        return {"ok": True, "session": sid, "detail": msgspec.to_builtins(d)}
    except GriteError as exc:
        return {"ok": False, "error": exc.message, "exit_code": exc.exit_code}


def _note_request(req: dict) -> tuple[str, list[str], list[str]]:
    """A `kb add` request's kind, tags and paths (ValueError: not of the types asked)."""
    kind, tags, paths = req.get("kind", "memory"), req.get("tags", []), req.get("paths", [])
    if not isinstance(kind, str) or not all(
            isinstance(x, list) and all(isinstance(t, str) for t in x) for x in (tags, paths)):
        raise ValueError
    return kind, tags, paths


def add_note(g, sess, tid: str, text: str, kind: str, tags: list[str],
             paths: list[str]) -> str:
    """A note an agent adds, written as its session (fenced by the session's lease, like its
    comments): the note names the task and session it came from."""
    added = sum(1 for n in g.state().of_kind(NOTE) if n.get("session") == sess.id)
    if added >= MAX_NOTES:
        raise UsageError(f"refused: session {sess.id[:7]} has added {added} notes already, "
                         f"the most one session may")
    nid = ev.new_entity_id()
    d = kb.drafts(nid, kind, text, tags, paths, task=tid, session=sess.id)
    ss.fenced(g, sess, d, summary("note.add", nid, d[0].op.fields["title"]))
    return nid


def ask(path: str, op: str, task: str | None, message: str = "", timeout: float = 120,
        extra: dict | None = None) -> dict:
    """(the agent's side) Send one request to the witness; its answer, or GriteError."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(path)
            s.sendall(json.dumps({"op": op, "task": task, "message": message,
                                  **(extra or {})}).encode() + b"\n")
            answer = json.loads(_read(s).decode("utf-8") or "null")
    except (OSError, ValueError) as exc:
        raise GriteError(f"cannot reach the witness at {path} ({exc}): in a sandbox, task "
                         f"commands go through it; is the session still running?") from None
    if not isinstance(answer, dict):
        raise GriteError("the witness gave no answer")
    if not answer.get("ok"):
        raise GriteError(str(answer.get("error", "refused")), int(answer.get("exit_code", 1)))
    return answer


__all__ = ["Gate", "ENV", "OPS", "ask", "answer_request", "socket_path"]
