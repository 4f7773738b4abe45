"""A scripted fake model server on 127.0.0.1 for driving the real coding-agent CLIs offline.

One port serves the four API shapes the engines speak:

- Anthropic Messages:        POST /v1/messages (SSE or not), HEAD /, POST /v1/messages/count_tokens
- OpenAI Chat Completions:   POST /v1/chat/completions (SSE or not)
- OpenAI Responses:          POST /v1/responses (SSE or not)
- Gemini:                    POST .../models/M:streamGenerateContent?alt=sse, :generateContent,
                             :countTokens
- and GET .../models (an OpenAI-style and a Gemini-style list in one answer).

The replies are scripted from the request itself. The task text holds a line

    FAKE-EDIT: greeting.txt: hello from ENGINE

(optionally `FAKE-COMMIT: message`, and `FAKE-CAT: PATH...`: the first turn reads those paths
with the shell instead, as a hostile model would, for the sandbox to refuse; a request naming FAKE-FAIL gets a 400 error instead;
with FAKE-HANG the first request after the read is never answered, see FakeModel; with
FakeModel(limit=...) every model request is answered 429 in its provider's words, see
limit_reply). Counting
the tool calls already answered in the conversation since the last message naming FAKE-EDIT
(calls, not results: a resumed gemini conversation repeats a result), the server answers with

  turn 1  a tool call that reads the file (a read tool found by name, else the shell: cat),
  turn 2  a tool call that writes "hello from ENGINE\\n" to it (a write tool, else the shell),
  turn 3  a shell tool call running `git add -A && git commit -m MSG`,
  then    a final text, "FAKE-DONE ...".

Arguments are filled from each tool's own JSON schema (file_path/filePath/path..., content/
file_text..., command/cmd...). Absolute paths are made from the working directory that the
engine's system prompt names: any absolute path in the request that is a directory holding a
`.git` (the deepest one wins), else the `workdir` given to FakeModel. Requests without tools get plain text: aider's edit turn a
SEARCH/REPLACE (or whole-file) block, its commit-message turn a one-line message, anything else
(titles, summaries) a short text; a JSON-schema request (gemini's next-speaker check) JSON.

Every request is appended to `server.requests` (method, path, headers, body) and, with
`log_path`, written there as one JSON line.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, NamedTuple

DIRECTIVE = re.compile(r"FAKE-EDIT:\s*([^\s:]+)\s*:[ \t]*([^\n\r\"\\<]*)")
COMMIT = re.compile(r"FAKE-COMMIT:[ \t]*([^\n\r\"\\<]+)")
# FAKE-USAGE: IN OUT in the task: every reply reports IN input and OUT output tokens (else 100, 20)
USAGE = re.compile(r"FAKE-USAGE:[ \t]*(\d{1,7})[ \t]+(\d{1,7})")
CAT = re.compile(r"FAKE-CAT:[ \t]*([^\n\r\"\\<]+)")
ABSPATH = re.compile(r"(/[^\s\"'<>`|*?,;()\[\]{}]+)")


# -- reading a request ------------------------------------------------------------------------

def strings(obj: Any):
    """Every string inside a JSON value."""
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for value in obj.values():
            yield from strings(value)
    elif isinstance(obj, list):
        for value in obj:
            yield from strings(value)


class Directive(NamedTuple):
    file: str
    content: str
    message: str
    reads: tuple[str, ...] = ()     # FAKE-CAT's paths: read with the shell first


def find_directive(obj: Any) -> Directive | None:
    """The last FAKE-EDIT line in `obj` (with its FAKE-COMMIT and FAKE-CAT), or None."""
    found = None
    commit = ""
    reads: tuple[str, ...] = ()
    for s in strings(obj):
        for m in DIRECTIVE.finditer(s):
            found = (m.group(1), m.group(2).strip())
        for m in COMMIT.finditer(s):
            commit = m.group(1).strip()
        for m in CAT.finditer(s):
            reads = tuple(m.group(1).split())
    if found is None:
        return None
    return Directive(found[0], found[1], commit or f"fake: edit {found[0]}", reads)


def find_workdir(body: Any) -> str:
    """The deepest absolute directory named in the request that holds a .git (file or dir)."""
    best = ""
    seen: set[str] = set()
    for s in strings(body):
        if "/" not in s:
            continue
        for m in ABSPATH.finditer(s):
            path = m.group(1).rstrip(".:/")
            while path and path not in seen:
                seen.add(path)
                try:
                    if os.path.isdir(path) and os.path.exists(os.path.join(path, ".git")):
                        if len(path) > len(best):
                            best = path
                        break
                except OSError:
                    break
                parent = os.path.dirname(path)
                if parent == path or len(parent) <= 1:
                    break
                path = parent
    return best


def count_tool_results(obj: Any) -> int:
    """Tool results anywhere in a request, in any of the four API shapes."""
    if isinstance(obj, list):
        return sum(count_tool_results(v) for v in obj)
    if not isinstance(obj, dict):
        return 0
    here = int(obj.get("type") == "tool_result" or obj.get("role") == "tool"
               or str(obj.get("type", "")).endswith("call_output")
               or "functionResponse" in obj)
    return here + sum(count_tool_results(v) for v in obj.values()
                      if isinstance(v, (dict, list)))


def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


READ_NAMES = ("read", "readfile", "view", "readtextfile", "fileread", "viewfile", "cat")
WRITE_NAMES = ("write", "writefile", "create", "createfile", "writetofile", "filewrite",
               "str_replace_based_edit_tool")
SHELL_NAMES = ("bash", "shell", "runshellcommand", "execcommand", "exec", "terminal",
               "runterminalcommand", "runcommand", "shellcommand", "localshell", "command")


def pick_tool(tools: dict[str, dict], names: tuple[str, ...]) -> str | None:
    by_norm = {_norm(n): n for n in tools}
    for want in names:
        if _norm(want) in by_norm:
            return by_norm[_norm(want)]
    return None


def pick_shell(tools: dict[str, dict]) -> str | None:
    exact = pick_tool(tools, SHELL_NAMES)
    if exact:
        return exact
    for name in tools:
        n = _norm(name)
        if any(w in n for w in ("bash", "shell", "terminal", "execcommand", "runcommand")):
            return name
    return None


PATH_KEYS = ("file_path", "filePath", "filepath", "absolute_path", "path", "target_file",
             "file", "filename", "fileName")
CONTENT_KEYS = ("content", "file_text", "contents", "text", "new_content", "fileContent",
                "data", "body")
COMMAND_KEYS = ("command", "cmd", "commandLine", "script", "input")


def _props(schema: dict) -> tuple[dict, list]:
    if not isinstance(schema, dict):
        return {}, []
    props = schema.get("properties") or {}
    return (props if isinstance(props, dict) else {}), list(schema.get("required") or [])


def _fill_required(args: dict, props: dict, required: list) -> None:
    """Give every required argument not yet set a harmless value of its type."""
    for key in required:
        if key in args:
            continue
        spec = props.get(key) or {}
        typ = spec.get("type")
        if isinstance(typ, list):
            typ = next((t for t in typ if t != "null"), "string")
        if spec.get("enum"):
            args[key] = spec["enum"][0]
        elif typ == "boolean":
            args[key] = False
        elif typ in ("integer", "number"):
            args[key] = 60000 if "timeout" in key.lower() else 1
        elif typ == "array":
            args[key] = []
        elif typ == "object":
            args[key] = {}
        else:
            args[key] = "fake" if "desc" not in key.lower() else "run a command"


def _first(props: dict, keys: tuple[str, ...]) -> str | None:
    for key in keys:
        if key in props:
            return key
    lowered = {k.lower(): k for k in props}
    for key in keys:
        if key.lower() in lowered:
            return lowered[key.lower()]
    return None


def file_args(schema: dict, path: str, content: str | None) -> dict:
    props, required = _props(schema)
    args: dict[str, Any] = {}
    pkey = _first(props, PATH_KEYS) or "file_path"
    args[pkey] = path
    if content is not None:
        ckey = _first(props, CONTENT_KEYS) or "content"
        args[ckey] = content
        if "command" in props and (props["command"].get("enum") or []):
            enum = props["command"]["enum"]
            args["command"] = "create" if "create" in enum else enum[0]
    _fill_required(args, props, required)
    return args


def shell_args(schema: dict, command: str, workdir: str) -> dict:
    props, required = _props(schema)
    args: dict[str, Any] = {}
    ckey = _first(props, COMMAND_KEYS) or "command"
    spec = props.get(ckey) or {}
    if spec.get("type") == "array":
        args[ckey] = ["bash", "-lc", command]
    else:
        args[ckey] = command
    for key in ("workdir", "cwd", "dir_path", "directory", "working_directory"):
        if key in props and workdir:
            args[key] = workdir
    for key in props:
        if "desc" in key.lower() and key not in args:
            args[key] = "run a command"
    _fill_required(args, props, required)
    return args


class Plan:
    """What to answer: a tool call (name, args) or a final text."""

    def __init__(self, tool: str | None = None, args: dict | None = None, text: str = ""):
        self.tool, self.args, self.text = tool, args or {}, text


def plan_turn(tools: dict[str, dict], done: int, directive: Directive | None,
              workdir: str) -> Plan:
    """The next step for a conversation with `done` tool results since the task."""
    if directive is None:
        return Plan(text="OK")
    rel, content, message = directive.file, directive.content, directive.message
    path = os.path.join(workdir, rel) if workdir else rel
    shell = pick_shell(tools)
    cd = f"cd {shlex.quote(workdir)} && " if workdir else ""
    if done == 0 and shell and directive.reads:
        paths = " ".join(shlex.quote(p) for p in directive.reads)
        return Plan(shell, shell_args(tools[shell], f"{cd}cat {paths}; true", workdir))
    if done == 0:
        read = pick_tool(tools, READ_NAMES)
        if read:
            return Plan(read, file_args(tools[read], path, None))
        if shell:
            return Plan(shell, shell_args(tools[shell], f"{cd}cat {shlex.quote(rel)} || true",
                                          workdir))
        done = 1
    if done == 1:
        write = pick_tool(tools, WRITE_NAMES)
        if write and _norm(write) in ("create", "createfile") and workdir \
                and os.path.exists(path):
            write = None        # a create tool refuses a file that is there: use the shell
        if write:
            return Plan(write, file_args(tools[write], path, content + "\n"))
        if shell:
            cmd = f"{cd}printf '%s\\n' {shlex.quote(content)} > {shlex.quote(rel)}"
            return Plan(shell, shell_args(tools[shell], cmd, workdir))
        done = 2
    if done == 2 and shell:
        cmd = f"{cd}git add -A && git commit -m {shlex.quote(message)}"
        return Plan(shell, shell_args(tools[shell], cmd, workdir))
    return Plan(text=f"FAKE-DONE: wrote {rel} and committed it.")


def aider_reply(body: dict, directive: Directive, workdir: str) -> str:
    rel, content = directive.file, directive.content
    text = "\n".join(strings(body.get("messages") or []))
    old = None
    if workdir:
        try:
            with open(os.path.join(workdir, rel), encoding="utf-8") as f:
                old = f.read()
        except OSError:
            old = None
    if "SEARCH" in text and "REPLACE" in text:
        search = old if old else ""
        if search and not search.endswith("\n"):
            search += "\n"
        return (f"Writing the file.\n\n{rel}\n```\n<<<<<<< SEARCH\n{search}=======\n"
                f"{content}\n>>>>>>> REPLACE\n```\n")
    return f"Writing the file.\n\n{rel}\n```\n{content}\n```\n"


# -- the server -------------------------------------------------------------------------------

def usage_of(body: Any) -> tuple[int, int]:
    """(input, output) tokens a reply reports: FAKE-USAGE's numbers, else 100 and 20."""
    for text in strings(body):
        m = USAGE.search(text)
        if m:
            return int(m.group(1)), int(m.group(2))
    return 100, 20
# -- scripted limits ---------------------------------------------------------------------------

def api_of(path: str) -> str | None:
    """Which model API a POST path is (None: not a model request)."""
    if path.endswith("/messages"):
        return "anthropic"
    if path.endswith("/chat/completions"):
        return "chat"
    if path.endswith("/responses"):
        return "responses"
    if ":streamGenerateContent" in path or ":generateContent" in path:
        return "gemini"
    return None


def limit_reply(api: str, limit: dict) -> tuple[dict, dict[str, str]]:
    """A 429 as the provider behind `api` words it, and its headers. limit: {"shape": rate
    (per-minute), quota (out of credit), usage (a plan's usage limit, with "resets_in" seconds),
    daily (gemini's daily quota); "retry_after": seconds for a retry-after header (None: none)}."""
    shape = limit.get("shape", "rate")
    headers = {}
    if limit.get("retry_after") is not None:
        headers["retry-after"] = str(limit["retry_after"])
    resets_in = int(limit.get("resets_in", 3600))
    if api == "anthropic":
        kind, text = "rate_limit_error", ("This request would exceed your account's rate limit. "
                                          "Please try again later.")
        return {"type": "error", "error": {"type": kind, "message": text}}, headers
    if api == "gemini":
        quota = ("GenerateRequestsPerDayPerProjectPerModel-FreeTier" if shape == "daily"
                 else "GenerateRequestsPerMinutePerProjectPerModel-FreeTier")
        details = [{"@type": "type.googleapis.com/google.rpc.QuotaFailure",
                    "violations": [{"quotaMetric": "generate_content_requests",
                                    "quotaId": quota}]}]
        if shape != "daily":
            details.append({"@type": "type.googleapis.com/google.rpc.RetryInfo",
                            "retryDelay": f"{limit.get('retry_after') or 2}s"})
        text = ("You exceeded your current quota. limit: 0" if shape == "daily"
                else "Resource has been exhausted (e.g. check quota).")
        return {"error": {"code": 429, "message": text, "status": "RESOURCE_EXHAUSTED",
                          "details": details}}, headers
    if shape == "usage":
        return {"error": {"type": "usage_limit_reached", "message": "The usage limit has been "
                          "reached", "plan_type": "plus", "resets_in_seconds": resets_in,
                          "resets_at": _now() + resets_in}}, headers
    if shape == "quota":
        return {"error": {"message": "You exceeded your current quota, please check your plan "
                          "and billing details.", "type": "insufficient_quota", "param": None,
                          "code": "insufficient_quota"}}, headers
    return {"error": {"message": "Rate limit reached for fake-model on requests per min (RPM): "
                      "Limit 3, Used 3, Requested 1. Please try again in 20s.",
                      "type": "requests", "param": None, "code": "rate_limit_exceeded"}}, headers


def _now() -> int:
    return int(time.time())


class FakeModel:
    """`with FakeModel() as fm:` serves on fm.url (http://127.0.0.1:PORT) in a thread."""

    def __init__(self, log_path: str | None = None, host: str = "127.0.0.1", port: int = 0,
                 workdir: str = "", hang_marker: str = "", reply: str = "",
                 limit: dict | None = None):
        self.reply = reply              # the final text of a request with no FAKE-EDIT task
        # A scripted usage or rate limit (see limit_reply): every model request is answered
        # 429 while it lasts ("count" requests; absent or -1: all of them).
        self.limit = dict(limit) if limit else None
        self.log_path = log_path
        self.workdir = workdir          # used when a request names no work tree (aider's)
        # FAKE-HANG in the task: the first request after the read gets no answer until its
        # client goes away; hang_marker (a path) is created when that happens.
        self.hang_marker = hang_marker
        self.hung = False
        self._stopping = threading.Event()
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        self._host, self._port = host, port
        self.server: ThreadingHTTPServer | None = None
        self.thread: threading.Thread | None = None

    # lifecycle
    def start(self) -> "FakeModel":
        handler = type("Handler", (_Handler,), {"fake": self})
        self.server = ThreadingHTTPServer((self._host, self._port), handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, name="fakemodel",
                                       kwargs={"poll_interval": 0.1}, daemon=True)
        self.thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None
        if self.thread is not None:
            self.thread.join(timeout=5)
            self.thread = None

    def __enter__(self) -> "FakeModel":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self.server is not None
        return self.server.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def record(self, entry: dict) -> None:
        with self._lock:
            self.requests.append(entry)
            if self.log_path:
                with open(self.log_path, "a", encoding="utf-8") as f:
                    f.write(json.dumps(entry) + "\n")

    def should_hang(self, body: Any, done: int) -> bool:
        with self._lock:
            if self.hung or done != 1 or not any("FAKE-HANG" in s for s in strings(body)):
                return False
            self.hung = True
        if self.hang_marker:
            with open(self.hang_marker, "w") as f:
                f.write("hung\n")
        return True

    def model_requests(self) -> list[dict]:
        """The requests that asked for a completion (not HEAD, lists or token counts)."""
        return [r for r in self.requests if r.get("kind") not in (None, "other")]

    def clear(self) -> None:
        with self._lock:
            self.requests.clear()


class _Handler(BaseHTTPRequestHandler):
    fake: FakeModel
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # quiet
        pass

    # plumbing
    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not length and self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            raw = b"".join(chunks)
        if self.headers.get("Content-Encoding", "") in ("gzip", "deflate", "zstd", "br"):
            import gzip
            import zlib
            enc = self.headers["Content-Encoding"]
            try:
                raw = gzip.decompress(raw) if enc == "gzip" else zlib.decompress(raw)
            except Exception:  # noqa: BLE001 - log what we could not read
                pass
        try:
            return json.loads(raw.decode("utf-8")) if raw else {}
        except (UnicodeDecodeError, json.JSONDecodeError):
            return {"_raw": raw.decode("utf-8", "replace")}

    def _send_json(self, obj: Any, status: int = 200) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("request-id", "req_fake")
        self.end_headers()
        self.wfile.write(data)

    def _start_sse(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.send_header("request-id", "req_fake")
        self.end_headers()
        self.close_connection = True

    def _event(self, data: Any, event: str | None = None) -> None:
        out = ""
        if event:
            out += f"event: {event}\n"
        out += "data: " + (data if isinstance(data, str) else json.dumps(data)) + "\n\n"
        self.wfile.write(out.encode())
        self.wfile.flush()

    def _log(self, kind: str, body: Any) -> None:
        self.fake.record({"t": time.time(), "method": self.command, "path": self.path,
                          "kind": kind, "headers": dict(self.headers.items()),
                          "tool_results": count_tool_results(body), "body": body,
                          "usage": list(usage_of(body))})

    def _hang_if_asked(self, body: Any, done: int) -> None:
        """Answer nothing (FAKE-HANG) until the client hangs up or the server stops."""
        if not self.fake.should_hang(body, done):
            return
        import select
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not self.fake._stopping.is_set():
            ready, _, _ = select.select([self.connection], [], [], 0.2)
            if ready:
                try:
                    if not self.connection.recv(1, socket.MSG_PEEK):
                        break           # the client is gone
                except OSError:
                    break
        self.close_connection = True
        raise ConnectionResetError("hung up")

    def _limited(self, path: str, body: Any) -> bool:
        """Answer a model request 429 while the scripted limit lasts (FakeModel.limit)."""
        api = api_of(path)
        limit = self.fake.limit
        if limit is None or api is None:
            return False
        with self.fake._lock:
            left = limit.get("count", -1)
            if left == 0:
                return False
            if left > 0:
                limit["count"] = left - 1
        self._log("limited", body)
        payload, headers = limit_reply(api, limit)
        data = json.dumps(payload).encode()
        self.send_response(429)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass
        return True

    # methods
    def do_HEAD(self) -> None:
        self._log("other", None)
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        self._log("other", None)
        path = self.path.split("?")[0]
        if path.rstrip("/").endswith("/models") or path.rstrip("/") == "/models":
            self._send_json({
                "object": "list",
                "data": [{"id": m, "object": "model", "created": 0, "owned_by": "fake",
                          "type": "model", "display_name": m}
                         for m in ("fake-model", "gpt-4o", "claude-sonnet-4-5")],
                "models": [{"name": "models/gemini-2.5-flash", "displayName": "fake",
                            "supportedGenerationMethods": ["generateContent"]}],
                "has_more": False})
            return
        if path in ("/", "/health", "/healthz"):
            self._send_json({"ok": True})
            return
        self._send_json({"error": {"message": f"fake model: no GET {path}",
                                   "type": "not_found"}}, 404)

    def do_POST(self) -> None:
        body = self._body()
        path = self.path.split("?")[0]
        if any("FAKE-FAIL" in s for s in strings(body)):
            # A task asking for a refusal: a non-retryable 400 in every API's error shape.
            self._log("refused", body)
            self._send_json({"type": "error", "error": {
                "type": "invalid_request_error", "code": 400, "status": "INVALID_ARGUMENT",
                "message": "fake model: this request is refused (FAKE-FAIL)"}}, 400)
            return
        if self._limited(path, body):
            return
        try:
            if path.endswith("/messages/count_tokens"):
                self._log("other", body)
                self._send_json({"input_tokens": 100})
            elif path.endswith("/messages"):
                self._log("anthropic", body)
                self._anthropic(body)
            elif path.endswith("/chat/completions"):
                self._log("chat", body)
                self._chat(body)
            elif path.endswith("/responses"):
                self._log("responses", body)
                self._responses(body)
            elif ":streamGenerateContent" in path or ":generateContent" in path:
                self._log("gemini", body)
                self._gemini(body, stream=":streamGenerateContent" in path)
            elif ":countTokens" in path:
                self._log("other", body)
                self._send_json({"totalTokens": 100})
            else:
                self._log("other", body)
                self._send_json({"error": {"message": f"fake model: no POST {path}",
                                           "type": "not_found"}}, 404)
        except (BrokenPipeError, ConnectionResetError):
            pass

    # -- Anthropic Messages ------------------------------------------------------------
    def _anthropic(self, body: dict) -> None:
        msgs = body.get("messages") or []
        tools = {t["name"]: t.get("input_schema") or {} for t in body.get("tools") or []
                 if isinstance(t, dict) and t.get("name")}
        start = _last_directive_index(msgs)
        done = 0
        for m in msgs[start + 1 if start >= 0 else 0:]:
            if m.get("role") == "assistant" and isinstance(m.get("content"), list):
                done += sum(1 for c in m["content"]
                            if isinstance(c, dict) and c.get("type") == "tool_use")
        directive = find_directive(msgs[start]) if start >= 0 else None
        if tools:
            self._hang_if_asked(body, done)
        plan = plan_turn(tools, done, directive, find_workdir(body)) if tools else \
            Plan(text=_plain_text(body, directive))
        if directive is None and self.fake.reply and not plan.tool:
            plan = Plan(text=self.fake.reply)
        model = body.get("model") or "claude-fake"
        mid = "msg_" + uuid.uuid4().hex[:24]
        n_in, n_out = usage_of(body)
        usage = {"input_tokens": n_in, "output_tokens": n_out, "cache_creation_input_tokens": 0,
                 "cache_read_input_tokens": 0}
        if plan.tool:
            block = {"type": "tool_use", "id": "toolu_" + uuid.uuid4().hex[:24],
                     "name": plan.tool, "input": plan.args}
            stop = "tool_use"
        else:
            block = {"type": "text", "text": plan.text}
            stop = "end_turn"
        if not body.get("stream"):
            self._send_json({"id": mid, "type": "message", "role": "assistant", "model": model,
                             "content": [block], "stop_reason": stop, "stop_sequence": None,
                             "usage": usage})
            return
        self._start_sse()
        self._event({"type": "message_start", "message": {
            "id": mid, "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": usage}}, "message_start")
        if plan.tool:
            self._event({"type": "content_block_start", "index": 0, "content_block": {
                **block, "input": {}}}, "content_block_start")
            self._event({"type": "content_block_delta", "index": 0, "delta": {
                "type": "input_json_delta", "partial_json": json.dumps(plan.args)}},
                "content_block_delta")
        else:
            self._event({"type": "content_block_start", "index": 0, "content_block": {
                "type": "text", "text": ""}}, "content_block_start")
            self._event({"type": "content_block_delta", "index": 0, "delta": {
                "type": "text_delta", "text": plan.text}}, "content_block_delta")
        self._event({"type": "content_block_stop", "index": 0}, "content_block_stop")
        self._event({"type": "message_delta", "delta": {"stop_reason": stop,
                                                        "stop_sequence": None},
                     "usage": {"output_tokens": n_out}}, "message_delta")
        self._event({"type": "message_stop"}, "message_stop")

    # -- OpenAI Chat Completions -------------------------------------------------------
    def _chat(self, body: dict) -> None:
        msgs = body.get("messages") or []
        tools = {}
        for t in body.get("tools") or []:
            fn = t.get("function") if isinstance(t, dict) else None
            if isinstance(fn, dict) and fn.get("name"):
                tools[fn["name"]] = fn.get("parameters") or {}
        start = _last_directive_index(msgs)
        done = sum(len(m.get("tool_calls") or []) for m in msgs[start + 1 if start >= 0 else 0:]
                   if m.get("role") == "assistant")
        directive = find_directive(msgs[start]) if start >= 0 else None
        workdir = find_workdir(body) or self.fake.workdir
        if tools:
            self._hang_if_asked(body, done)
            plan = plan_turn(tools, done, directive, workdir)
        elif directive and _is_aider_edit(body):
            self._hang_if_asked(body, 1)        # aider's one edit turn stands for the write
            plan = Plan(text=aider_reply(body, directive, workdir))
        else:
            plan = Plan(text=_plain_text(body, directive))
        model = body.get("model") or "fake-model"
        cid = "chatcmpl-" + uuid.uuid4().hex[:20]
        n_in, n_out = usage_of(body)
        usage = {"prompt_tokens": n_in, "completion_tokens": n_out, "total_tokens": n_in + n_out}
        if plan.tool:
            call = {"id": "call_" + uuid.uuid4().hex[:20], "type": "function",
                    "function": {"name": plan.tool, "arguments": json.dumps(plan.args)}}
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
            finish = "tool_calls"
        else:
            message = {"role": "assistant", "content": plan.text}
            finish = "stop"
        if not body.get("stream"):
            self._send_json({"id": cid, "object": "chat.completion", "created": _now(),
                             "model": model, "choices": [{"index": 0, "message": message,
                                                          "finish_reason": finish}],
                             "usage": usage})
            return
        self._start_sse()

        def chunk(delta: dict, finish_reason: str | None = None, **extra) -> dict:
            return {"id": cid, "object": "chat.completion.chunk", "created": _now(),
                    "model": model, "choices": [{"index": 0, "delta": delta,
                                                 "finish_reason": finish_reason}], **extra}
        if plan.tool:
            call = message["tool_calls"][0]
            self._event(chunk({"role": "assistant", "content": None, "tool_calls": [
                {"index": 0, "id": call["id"], "type": "function",
                 "function": {"name": plan.tool, "arguments": ""}}]}))
            self._event(chunk({"tool_calls": [{"index": 0, "function": {
                "arguments": call["function"]["arguments"]}}]}))
        else:
            self._event(chunk({"role": "assistant", "content": ""}))
            self._event(chunk({"content": plan.text}))
        self._event(chunk({}, finish))
        if (body.get("stream_options") or {}).get("include_usage"):
            self._event({"id": cid, "object": "chat.completion.chunk", "created": _now(),
                         "model": model, "choices": [], "usage": usage})
        self._event("[DONE]")

    # -- OpenAI Responses --------------------------------------------------------------
    def _responses(self, body: dict) -> None:
        items = body.get("input") or []
        if isinstance(items, str):
            items = [{"role": "user", "content": items}]
        tools = {}
        for t in body.get("tools") or []:
            if isinstance(t, dict) and t.get("type") == "function" and t.get("name"):
                tools[t["name"]] = t.get("parameters") or {}
            elif isinstance(t, dict) and t.get("type") == "local_shell":
                tools["local_shell"] = {"properties": {"command": {"type": "array"}}}
        start = _last_directive_index(items)
        done = sum(1 for it in items[start + 1 if start >= 0 else 0:]
                   if isinstance(it, dict) and str(it.get("type", "")).endswith("call")
                   and it.get("type") != "web_search_call")
        directive = find_directive(items[start]) if start >= 0 else None
        if tools:
            self._hang_if_asked(body, done)
        plan = plan_turn(tools, done, directive, find_workdir(body)) if tools else \
            Plan(text=_plain_text(body, directive))
        rid = "resp_" + uuid.uuid4().hex[:24]
        model = body.get("model") or "fake-model"
        if plan.tool == "local_shell":
            item = {"type": "local_shell_call", "id": "lsh_" + uuid.uuid4().hex[:16],
                    "call_id": "call_" + uuid.uuid4().hex[:16], "status": "completed",
                    "action": {"type": "exec", "command": plan.args["command"]}}
        elif plan.tool:
            item = {"type": "function_call", "id": "fc_" + uuid.uuid4().hex[:16],
                    "call_id": "call_" + uuid.uuid4().hex[:16], "name": plan.tool,
                    "arguments": json.dumps(plan.args), "status": "completed"}
        else:
            item = {"type": "message", "id": "msg_" + uuid.uuid4().hex[:16],
                    "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": plan.text, "annotations": []}]}
        n_in, n_out = usage_of(body)
        usage = {"input_tokens": n_in, "input_tokens_details": {"cached_tokens": 0},
                 "output_tokens": n_out, "output_tokens_details": {"reasoning_tokens": 0},
                 "total_tokens": n_in + n_out}
        base = {"id": rid, "object": "response", "created_at": _now(), "model": model}
        done_resp = {**base, "status": "completed", "output": [item], "usage": usage}
        if not body.get("stream"):
            self._send_json(done_resp)
            return
        self._start_sse()
        seq = iter(range(1000))
        self._event({"type": "response.created", "sequence_number": next(seq),
                     "response": {**base, "status": "in_progress", "output": []}},
                    "response.created")
        self._event({"type": "response.in_progress", "sequence_number": next(seq),
                     "response": {**base, "status": "in_progress", "output": []}},
                    "response.in_progress")
        if item["type"] == "message":
            added = {**item, "status": "in_progress", "content": []}
            self._event({"type": "response.output_item.added", "sequence_number": next(seq),
                         "output_index": 0, "item": added}, "response.output_item.added")
            self._event({"type": "response.content_part.added", "sequence_number": next(seq),
                         "item_id": item["id"], "output_index": 0, "content_index": 0,
                         "part": {"type": "output_text", "text": "", "annotations": []}},
                        "response.content_part.added")
            self._event({"type": "response.output_text.delta", "sequence_number": next(seq),
                         "item_id": item["id"], "output_index": 0, "content_index": 0,
                         "delta": plan.text}, "response.output_text.delta")
            self._event({"type": "response.output_text.done", "sequence_number": next(seq),
                         "item_id": item["id"], "output_index": 0, "content_index": 0,
                         "text": plan.text}, "response.output_text.done")
            self._event({"type": "response.content_part.done", "sequence_number": next(seq),
                         "item_id": item["id"], "output_index": 0, "content_index": 0,
                         "part": item["content"][0]}, "response.content_part.done")
        else:
            self._event({"type": "response.output_item.added", "sequence_number": next(seq),
                         "output_index": 0, "item": {**item, "status": "in_progress"}},
                        "response.output_item.added")
        self._event({"type": "response.output_item.done", "sequence_number": next(seq),
                     "output_index": 0, "item": item}, "response.output_item.done")
        self._event({"type": "response.completed", "sequence_number": next(seq),
                     "response": done_resp}, "response.completed")

    # -- Gemini ------------------------------------------------------------------------
    def _gemini(self, body: dict, stream: bool) -> None:
        contents = body.get("contents") or []
        tools = {}
        for t in body.get("tools") or []:
            for fd in (t.get("functionDeclarations") or t.get("function_declarations") or []
                       if isinstance(t, dict) else []):
                if fd.get("name"):
                    tools[fd["name"]] = (fd.get("parametersJsonSchema") or fd.get("parameters")
                                         or {})
        start = _last_directive_index(contents)
        done = 0
        for c in contents[start + 1 if start >= 0 else 0:]:
            for part in c.get("parts") or []:
                if isinstance(part, dict) and ("functionCall" in part
                                               or "function_call" in part):
                    done += 1
        directive = find_directive(contents[start]) if start >= 0 else None
        gen = body.get("generationConfig") or body.get("generation_config") or {}
        if gen.get("responseMimeType") == "application/json" or gen.get("responseJsonSchema") \
                or gen.get("responseSchema"):
            plan = Plan(text=json.dumps({"reasoning": "The task is done.",
                                         "next_speaker": "user", "model_choice": "flash",
                                         "complexity_reasoning": "simple",
                                         "complexity_score": 1}))
        elif tools:
            self._hang_if_asked(body, done)
            plan = plan_turn(tools, done, directive, find_workdir(body))
        else:
            plan = Plan(text=_plain_text(body, directive))
        if plan.tool:
            part = {"functionCall": {"name": plan.tool, "args": plan.args}}
        else:
            part = {"text": plan.text}
        reply = {"candidates": [{"content": {"role": "model", "parts": [part]},
                                 "finishReason": "STOP", "index": 0}],
                 "usageMetadata": {"promptTokenCount": usage_of(body)[0],
                                   "candidatesTokenCount": usage_of(body)[1],
                                   "totalTokenCount": sum(usage_of(body))},
                 "modelVersion": "gemini-2.5-flash", "responseId": uuid.uuid4().hex[:16]}
        if not stream:
            self._send_json(reply)
            return
        self._start_sse()
        self._event(reply)


def _last_directive_index(msgs: list) -> int:
    """Index of the last message naming FAKE-EDIT (-1: none)."""
    for i in range(len(msgs) - 1, -1, -1):
        if find_directive(msgs[i]) is not None:
            # A tool result quoting the task text is not the task.
            m = msgs[i]
            if isinstance(m, dict) and (m.get("role") == "tool" or str(m.get("type", ""))
                                        .endswith("call_output")):
                continue
            if isinstance(m, dict) and isinstance(m.get("content"), list) and m["content"] \
                    and all(isinstance(c, dict) and c.get("type") == "tool_result"
                            for c in m["content"]):
                continue
            if isinstance(m, dict) and isinstance(m.get("parts"), list) and m["parts"] \
                    and all(isinstance(p, dict) and "functionResponse" in p
                            for p in m["parts"]):
                continue
            return i
    return -1


def _is_aider_edit(body: dict) -> bool:
    text = "\n".join(strings(body.get("messages") or []))
    return "SEARCH" in text or "file listing" in text or "*file listing*" in text


def _plain_text(body: dict, directive) -> str:
    text = "\n".join(strings(body))
    if "commit message" in text.lower():
        return directive[2] if directive else "fake: a change"
    return "Fake title" if "title" in text.lower() else "OK"
