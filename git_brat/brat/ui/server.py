"""The board's web app (Starlette): pages, the /api/v1/ JSON API, live updates, the guard at the door."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import os
import secrets
import sys
import threading
import time
from typing import Any, Callable
from urllib.parse import parse_qs, urlencode

import msgspec
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from git_brat.brat.ui import control, data
from git_brat.brat.ui.live import NeedsCount, Watcher
from git_brat.brat.ui import html as pages
from git_brat.errors import GriteError, UsageError

STATIC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "static")
STATIC_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}
PING = 15.0           # seconds between keep-alive comments on an idle event stream
LOG_POLL = 0.3        # seconds between looks at a streamed session log
MAX_BODY = 256 * 1024
PAGES_CACHED = 32     # rendered pages kept, each for the log tip it was rendered at
CACHE_SECONDS = 5.0
# Nothing but this origin's own files, no framing, no plugins, no form posted elsewhere; no
# script but the board's own file, sent with the nonce of the page that names it (a value that
# slipped through escaping still could not run). A <meta> refresh is not CSP's to stop:
# escaping does.
CSP = ("default-src 'self'; script-src {script}; style-src 'self'; img-src 'self' data:; "
       "object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'")
HEADERS = {
    "Content-Security-Policy": CSP.format(script="'none'"),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def page_headers(nonce: str) -> dict[str, str]:
    return {**HEADERS, "Content-Security-Policy": CSP.format(script=f"'nonce-{nonce}'")}


HTTP_STATUS = {2: 400, 3: 404, 4: 404, 5: 409, 7: 403}


class Guard:
    """Who may talk to the board: the token (in a header, or once in the address), the Host
    served, and for a change, this very origin with the CSRF token.

    The browser's cookie is not the token. Cookies on 127.0.0.1 go to every port of it, so
    the cookie is scoped by path instead: the board's pages live under a secret root
    (/b-<128 bits derived from the token>) and the cookie is set for that path only, so a
    server on another port receives it only if the browser visits that very path there, which
    nobody without the token can name. Outside the root only the token (in a header) is
    taken. The cookie's value is bound to this port and reads pages; a change also needs the
    CSRF token, which is never in a page: the browser gets it once, in the fragment of the
    address the token visit redirects to (never sent to any server), and keeps it in this
    origin's storage (which no other port reads). No CORS header is ever sent."""

    def __init__(self, token: str, host: str, port: int):
        self.token, self.port = token, port
        self.cookie = f"brat_ui_{port}"
        self.session = self._derive(f"cookie:{port}")
        self.csrf = self._derive(f"csrf:{port}")
        self.root = "/b-" + self._derive(f"path:{port}")[:32]
        self.hosts = allowed_hosts(host, port)
        self.any_ip = host in ("0.0.0.0", "::")

    def _derive(self, purpose: str) -> str:
        return hmac.new(self.token.encode(), purpose.encode(), hashlib.sha256).hexdigest()

    def host_ok(self, host: str) -> bool:
        if host in self.hosts:
            return True
        if self.any_ip:   # bound to every address: an IP literal, never a name (DNS rebinding)
            name, _, port = host.rpartition(":")
            return port == str(self.port) and _is_ip(name.strip("[]"))
        return False

    def token_ok(self, given: str | None) -> bool:
        return _same(given, self.token)

    def cookie_ok(self, given: str | None) -> bool:
        return _same(given, self.session)

    def csrf_ok(self, given: str | None) -> bool:
        return _same(given, self.csrf)

    def within(self, path: str) -> str | None:
        """The path below the board's root ("/" for the root itself), or None outside it."""
        n = len(self.root)
        if not _same(path[:n], self.root):   # (in constant time: the root is a secret)
            return None
        if len(path) == n:
            return "/"
        return path[n:] if path[n] == "/" else None


def _same(given: str | None, secret: str) -> bool:
    return bool(given) and hmac.compare_digest(given.encode("utf-8", "replace"), secret.encode())


def _is_ip(name: str) -> bool:
    import ipaddress
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        return False


def allowed_hosts(host: str, port: int) -> set[str]:
    out = {f"{host}:{port}"}
    if ":" in host:
        out.add(f"[{host}]:{port}")
    if host in ("127.0.0.1", "::1", "localhost"):
        out |= {f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}"}
    return out


class Door:
    """ASGI middleware: every request passes the Guard before any handler runs."""

    def __init__(self, app, guard: Guard):
        self.app, self.guard = app, guard

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        g = self.guard
        if not g.host_ok(headers.get("host", "")):
            return await _refuse(scope, receive, send, 421, "this board answers to its own "
                                                            "address only (Host refused)")
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        given = (query.get("token") or [None])[0]
        below = g.within(scope["path"])
        if given is not None and g.token_ok(given) and scope["method"] == "GET":
            return await _welcome(scope, receive, send, g, query, below or scope["path"])
        by_header = g.token_ok(headers.get("x-brat-token"))
        by_cookie = below is not None and g.cookie_ok(
            _cookies(headers.get("cookie", "")).get(g.cookie))
        if not by_header and not by_cookie:
            return await _refuse(scope, receive, send, 403, "open the board with the address "
                                 "`git brat ui` printed (it holds the token)")
        if below is not None:   # the handlers see the path below the root
            scope = {**scope, "path": below, "raw_path": below.encode("latin-1", "replace")}
        refused = _cross_site(scope["method"], headers)
        if refused:
            return await _refuse(scope, receive, send, 403, refused)
        if scope["method"] not in ("GET", "HEAD"):
            origin = headers.get("origin", "")
            if origin != f"http://{headers.get('host', '')}":
                return await _refuse(scope, receive, send, 403, "refused: a change must come "
                                                                "from the board's own page (Origin)")
            if not g.csrf_ok(headers.get("x-csrf-token")):
                return await _refuse(scope, receive, send, 403, "refused: missing or wrong "
                                     "CSRF token (open the address `git brat ui` printed again)")
        return await self.app(scope, receive, send)


async def _welcome(scope, receive, send, g: Guard, query: dict, path: str):
    """The token's visit: the browser goes to the same page under the board's root, with the
    cookie for that root, and the CSRF token in the fragment (its script keeps it); the token
    leaves the address bar."""
    rest = {k: v for k, v in query.items() if k != "token"}
    url = g.root + path + (("?" + urlencode(rest, doseq=True)) if rest else "")
    resp = RedirectResponse(f"{url}#brat-csrf={g.csrf}", status_code=303, headers=HEADERS)
    # Lax, not Strict: the browser opened on a file that sends it here (the token stays out of
    # its arguments) arrives from another site, and Strict would drop the cookie on the
    # redirect. Lax still withholds it from every other site's POST; a GET changes nothing.
    resp.set_cookie(g.cookie, g.session, httponly=True, samesite="lax", path=g.root)
    return await resp(scope, receive, send)


def _cross_site(method: str, headers: dict[str, str]) -> str | None:
    """Why a browser's request made by another site (another port of 127.0.0.1 is the same
    site, not the same origin) is refused; None when it is not one. A change comes from this
    origin only; a read from elsewhere only as a link followed (no page of another port embeds
    or fetches the board's). Browsers send Sec-Fetch-*; other clients hold the token."""
    site = headers.get("sec-fetch-site")
    if site is None or site in ("same-origin", "none"):
        return None
    if method not in ("GET", "HEAD"):
        return "refused: a change must come from the board's own page (Sec-Fetch-Site)"
    if headers.get("sec-fetch-mode") != "navigate":
        return "refused: another site's page cannot read the board (Sec-Fetch-Site)"
    return None


def _cookies(raw: str) -> dict[str, str]:
    out = {}
    for part in raw.split(";"):
        k, _, v = part.strip().partition("=")
        if k:
            out[k] = v
    return out


async def _refuse(scope, receive, send, status: int, message: str):
    resp = JSONResponse({"error": message}, status_code=status, headers=HEADERS)
    await resp(scope, receive, send)


def app(repo_path: str, token: str, host: str, port: int) -> Starlette:
    repo = data.Repo(repo_path)
    guard = Guard(token, host, port)
    watcher = Watcher(repo)

    def json_out(obj: Any, status: int = 200) -> Response:
        return Response(msgspec.json.encode(obj), status_code=status,
                        media_type="application/json", headers=HEADERS)

    def failed(exc: GriteError) -> Response:
        return json_out({"error": exc.message, "exit_code": exc.exit_code},
                        HTTP_STATUS.get(exc.exit_code, 500))

    def api(fn: Callable[..., Any]):
        async def endpoint(request: Request) -> Response:
            try:
                body = {}
                if request.method == "POST":
                    repo.writable()
                    body = await _body(request)
                out = await run_in_threadpool(fn, request, body)
                return json_out(out)
            except GriteError as exc:
                return failed(exc)
            except Exception as exc:   # noqa: BLE001 - a value no reader expected: say so, serve on
                what = "this action could not be done" if request.method == "POST" else None
                return json_out({"error": unreadable(exc, request, what), "exit_code": 1}, 500)
        return endpoint

    rendered: dict[tuple, str] = {}   # (page, query, log tip) -> its HTML

    def cached(render: Callable[[Request], str], request: Request) -> str:
        """A page as of the log's tip: every browser redrawing after one change costs one
        render (what a page shows changes only when the log does)."""
        # What the refs do not hold (a witness's process, a refinery's pid file, how long a
        # session has run) is at most CACHE_SECONDS old on a reload.
        key = (request.url.path, request.url.query, repo.tip(), int(time.time() / CACHE_SECONDS))
        if key not in rendered:
            if len(rendered) >= PAGES_CACHED:
                rendered.pop(next(iter(rendered)))
            rendered[key] = render(request)
        return rendered[key]

    counter = NeedsCount(repo, lambda: control.needs_items(*g_cfg()))
    watcher.also = counter.marker

    def view(title: str, here: str, render: Callable[[Request], str]):
        async def endpoint(request: Request) -> Response:
            needs, what = None, []
            try:
                body = await run_in_threadpool(cached, render, request)
                needs, what = await run_in_threadpool(counter.now)
            except GriteError as exc:
                body = pages.error(exc.message)
            except Exception as exc:   # noqa: BLE001 - a value no reader expected: say so, serve on
                body = pages.error(unreadable(exc, request))
            if repo.read_only:
                body = pages.READ_ONLY + body
            nonce = secrets.token_urlsafe(18)
            return HTMLResponse(pages.page(title, body, nonce, here, needs, what, guard.root),
                                headers=page_headers(nonce))
        return endpoint

    q = lambda r, k: r.query_params.get(k, "") or ""  # noqa: E731
    pid = lambda r: r.path_params["id"]  # noqa: E731

    def g_cfg():
        g = repo.reader()
        return g, repo.config(g)

    # -- pages --
    def board_page(r):
        g = repo.reader()
        return pages.board(data.board_page(g, q(r, "convoy"), q(r, "state"), q(r, "engine"),
                                           q(r, "label"), q(r, "q")),
                           None if repo.read_only else control.roles(g))

    def needs_page(_r):
        g, cfg = g_cfg()
        s = data.status(g, cfg)
        review = [m for m in s.merge_queue if m.status == "needs-review"]
        return pages.needs_you(s, review)

    def task_page(r):
        g, cfg = g_cfg()
        d = data.task_show(g, pid(r))
        b = data.board_of(g)
        title = b.convoys[d.convoy].get("title", "") if d.convoy in b.convoys else ""
        return pages.task(d, data.sessions_of_task(g, d.id), data.task_diff(g, cfg, d.id), title,
                          control.legal_actions(g, d.id, repo.read_only), control.check_output(g, d.id),
                          control.dead_sessions(g))

    def sessions_page(_r):
        g = repo.reader()
        return pages.sessions(data.session_list(g, everything=True), control.dead_sessions(g))

    def queue_page(_r):
        g, cfg = g_cfg()
        return pages.queue(data.refinery_status(g, cfg), data.refinery_log(g))

    def mayor_page(_r):
        g, cfg = g_cfg()
        return pages.mayor(data.mayor_status(g, cfg), data.mayor_log(g))

    # -- the API: the commands' --json shapes --
    def a_status(r, _b):
        g, cfg = g_cfg()
        return data.status(g, cfg, q(r, "convoy") or None)

    def a_tasks(r, _b):
        return data.task_list(repo.grite(), q(r, "convoy") or None, r.query_params.getlist("status"))

    def a_task(r, _b):
        return data.task_show(repo.grite(), pid(r))

    def a_diff(r, _b):
        g, cfg = g_cfg()
        return data.task_diff(g, cfg, pid(r))

    def a_convoys(_r, _b):
        return data.convoy_list(repo.grite())

    def a_convoy(r, _b):
        return data.convoy_show(repo.grite(), pid(r))

    def a_sessions(r, _b):
        return data.session_list(repo.grite(), q(r, "all") in ("1", "true"), q(r, "task") or None)

    def a_session(r, _b):
        return data.session_show(repo.grite(), pid(r))

    def a_log(r, _b):
        text, end, live = data.session_log(repo.grite(), pid(r), _int(q(r, "from")))
        return {"text": text, "offset": end, "live": live}

    def a_refinery(_r, _b):
        g, cfg = g_cfg()
        return data.refinery_status(g, cfg)

    def a_mayor(_r, _b):
        g, cfg = g_cfg()
        return data.mayor_status(g, cfg)

    def a_mayor_log(_r, _b):
        return data.mayor_log(repo.grite())

    def act(fn):
        return lambda r, b: fn(repo.grite(), pid(r), b)

    def _text(b: dict, key: str) -> str:
        v = b.get(key, "")
        if not isinstance(v, str):
            raise UsageError(f"{key} must be text")
        return v

    def _notes(b: dict) -> list[dict]:
        v = b.get("notes", [])
        if not isinstance(v, list) or not all(isinstance(n, dict) for n in v):
            raise UsageError("notes must be a list of {path, line, text}")
        return v

    def _priority(b: dict) -> int:
        v = b.get("priority", data.model.DEFAULT_PRIORITY)
        try:
            p = int(v) if isinstance(v, (int, str)) and not isinstance(v, bool) else -1
        except ValueError:
            p = -1
        if p not in data.model.PRIORITIES:
            raise UsageError("priority is one of 0 (most urgent) to 4")
        return p

    async def events(r: Request) -> Response:
        return await _events(r, watcher)

    async def log_stream(r: Request) -> Response:
        return await _log_stream(r, repo)

    def warm() -> None:
        """Read the board once as the server starts, before a browser asks: at 10k tasks the
        first read of every task is most of a first render."""
        try:
            data.board_of(repo.reader())
            counter.count(repo.tip())
        except Exception:   # noqa: BLE001 - the first request will say what is wrong
            pass
    threading.Thread(target=warm, name="brat-board-warm", daemon=True).start()

    routes = [
        Route("/", view("Board", "/", board_page)),
        Route("/needs-you", view("Needs you", "/needs-you", needs_page)),
        Route("/task/{id}", view("Task", "", task_page)),
        Route("/sessions", view("Sessions", "/sessions", sessions_page)),
        Route("/queue", view("Merge queue", "/queue", queue_page)),
        Route("/mayor", view("Mayor", "/mayor", mayor_page)),
        Route("/static/{name}", _static),
        Route("/events", events),
        Route("/api/v1/status", api(a_status)),
        Route("/api/v1/tasks", api(a_tasks)),
        Route("/api/v1/tasks/{id}", api(a_task)),
        Route("/api/v1/tasks/{id}/diff", api(a_diff)),
        Route("/api/v1/convoys", api(a_convoys)),
        Route("/api/v1/convoys/{id}", api(a_convoy)),
        Route("/api/v1/sessions", api(a_sessions)),
        Route("/api/v1/sessions/{id}", api(a_session)),
        Route("/api/v1/sessions/{id}/log", api(a_log)),
        Route("/api/v1/sessions/{id}/log/stream", log_stream),
        Route("/api/v1/refinery", api(a_refinery)),
        Route("/api/v1/mayor", api(a_mayor)),
        Route("/api/v1/mayor/log", api(a_mayor_log)),
        Route("/api/v1/tasks/{id}/reply", api(act(
            lambda g, t, b: data.reply(g, t, _text(b, "message"), _notes(b)))), methods=["POST"]),
        Route("/api/v1/tasks/{id}/approve", api(act(lambda g, t, b: data.approve(g, t))),
              methods=["POST"]),
        Route("/api/v1/tasks/{id}/retry", api(act(lambda g, t, b: data.retry(g, t))),
              methods=["POST"]),
        Route("/api/v1/tasks/{id}/requeue", api(act(
            lambda g, t, b: data.requeue(g, t, _text(b, "message")))), methods=["POST"]),
        Route("/api/v1/tasks/{id}/block", api(act(
            lambda g, t, b: data.block(g, t, _text(b, "message")))), methods=["POST"]),
        Route("/api/v1/tasks/{id}/drop", api(act(
            lambda g, t, b: data.drop(g, t, _text(b, "message")))), methods=["POST"]),
        Route("/api/v1/tasks/{id}/stop", api(act(
            lambda g, t, b: data.stop_task_session(g, t))), methods=["POST"]),
        Route("/api/v1/sessions/{id}/stop", api(act(
            lambda g, s, b: data.stop_session(g, s))), methods=["POST"]),
        Route("/api/v1/convoys", api(lambda r, b: control.create_convoy(
            repo.grite(), _text(b, "title"), _text(b, "body"))), methods=["POST"]),
        Route("/api/v1/tasks", api(lambda r, b: control.create_task(
            repo.grite(), _text(b, "convoy"), _text(b, "title"), _text(b, "body"),
            _priority(b))), methods=["POST"]),
        Route("/api/v1/witness/start", api(lambda r, b: control.witness_start(repo.grite())),
              methods=["POST"]),
        Route("/api/v1/witness/stop", api(lambda r, b: control.witness_stop(repo.grite())),
              methods=["POST"]),
        Route("/api/v1/refinery/pass", api(lambda r, b: control.refinery_pass(repo.grite())),
              methods=["POST"]),
        Route("/api/v1/sync/push", api(lambda r, b: control.push(repo.grite())), methods=["POST"]),
        Route("/api/v1/mayor/ask", api(
            lambda r, b: data.mayor_ask(repo, repo.grite(), _text(b, "question"))), methods=["POST"]),
        Route("/api/v1/mayor/confirm", api(
            lambda r, b: data.mayor_confirm(repo, repo.grite(), str(b.get("exchange", "")))),
            methods=["POST"]),
        Route("/api/v1/mayor/discard", api(
            lambda r, b: data.mayor_discard(repo, str(b.get("exchange", "")))), methods=["POST"]),
    ]
    return Door(Starlette(routes=routes), guard)


def unreadable(exc: Exception, request: Request, what: str | None = None) -> str:
    """What the board says (and its log records) when a record holds a value its readers did
    not expect: replay should have refused it, and the board serves on rather than fail."""
    sys.stderr.write(f"board: {type(exc).__name__} serving {request.url.path!r}\n")
    return (f"{what or 'this view could not be drawn'}: a record holds a value it cannot read "
            f"({type(exc).__name__}); `git grite doctor` lists the records replay refused")


def _int(text: str) -> int:
    try:
        return max(0, int(text or 0))
    except ValueError:
        return 0


async def _body(request: Request) -> dict:
    raw = await request.body()
    if len(raw) > MAX_BODY:
        raise UsageError("request too large")
    if not raw:
        return {}
    try:
        out = json.loads(raw)
    except ValueError:
        raise UsageError("the request body must be JSON") from None
    if not isinstance(out, dict):
        raise UsageError("the request body must be a JSON object")
    return out


async def _static(request: Request) -> Response:
    name = request.path_params["name"]
    ext = os.path.splitext(name)[1]
    if "/" in name or name.startswith(".") or ext not in STATIC_TYPES:
        return Response("not found", 404, headers=HEADERS)
    try:
        with open(os.path.join(STATIC, name), "rb") as f:
            body = f.read()
    except OSError:
        return Response("not found", 404, headers=HEADERS)
    return Response(body, media_type=STATIC_TYPES[ext], headers=HEADERS)


SSE_HEADERS = {**HEADERS, "X-Accel-Buffering": "no"}


async def _events(request: Request, watcher: Watcher) -> Response:
    """Server-sent events: `change` whenever any event log's tip moves."""
    async def stream():
        seen = -1
        watcher.start()
        yield "retry: 1000\n\n"
        while not await request.is_disconnected():
            now = await watcher.wait(seen, PING)
            if now != seen:
                if seen != -1:
                    yield f"event: change\ndata: {now}\n\n"
                seen = now
            else:
                yield ": ping\n\n"
    return StreamingResponse(stream(), media_type="text/event-stream", headers=SSE_HEADERS)


async def _log_stream(request: Request, repo: data.Repo) -> Response:
    """Server-sent events: a session's log as it grows; `end` once the session has ended."""
    sid = request.path_params["id"]
    offset = _int(request.query_params.get("from", ""))
    try:
        await run_in_threadpool(lambda: data.session_show(repo.grite(), sid))
    except GriteError as exc:
        return JSONResponse({"error": exc.message}, HTTP_STATUS.get(exc.exit_code, 500),
                            headers=HEADERS)
    except Exception as exc:   # noqa: BLE001 - a value no reader expected: say so, serve on
        return JSONResponse({"error": unreadable(exc, request)}, 500, headers=HEADERS)

    async def stream():
        nonlocal offset
        last = time.monotonic()
        while not await request.is_disconnected():
            text, end, live = await run_in_threadpool(
                lambda: data.session_log(repo.grite(), sid, offset))
            if text:
                offset = end
                last = time.monotonic()
                yield f"data: {json.dumps({'text': text, 'offset': end})}\n\n"
                continue
            if not live:
                yield "event: end\ndata: {}\n\n"
                return
            if time.monotonic() - last > PING:
                last = time.monotonic()
                yield ": ping\n\n"
            await asyncio.sleep(LOG_POLL)
    return StreamingResponse(stream(), media_type="text/event-stream", headers=SSE_HEADERS)


__all__ = ["app", "Guard", "allowed_hosts"]
