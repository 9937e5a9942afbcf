"""The explorer's HTTP server: the standard library's ``http.server`` serving the bundled page
(``static/``, no CDN) and two JSON endpoints, ``POST /api/compile`` and ``POST /api/run``
(:mod:`anywave.explore.service`). It binds to 127.0.0.1 by default: the page compiles and
runs the Python it is sent, so it is for the local user only, and it defends that:

* **Host and Origin.** Every request must name the server by a loopback name
  (``127.0.0.1``, ``localhost``, ``[::1]``, or the address it was bound to) with its port in
  ``Host``; a browser's ``Origin``, when sent, must be ``http://`` one of those. A
  DNS-rebinding page (a foreign ``Host``) and a cross-site form or ``fetch`` (a foreign
  ``Origin``) get 403 before anything is read.
* **A per-session token.** The server makes a random token at start and writes it into the
  page it serves (``<meta name="anywave-token">``); every ``POST`` must carry it in the
  ``X-Anywave-Token`` header. Another site cannot read the page (same-origin policy), and a
  custom header cannot be sent cross-site without a CORS preflight, which this server never
  grants. No request body is parsed, and no user code runs, before these checks pass.
* **Bounded reads.** ``Content-Length`` must be a decimal number from 0 to :data:`MAX_BODY`
  (411 when absent, 400 when malformed, 413 when larger); each socket read times out after
  :data:`READ_TIMEOUT` s and a request must arrive whole within :data:`REQUEST_DEADLINE` s;
  at most :data:`MAX_THREADS` requests are served at once (503 beyond).
* **Strict bodies.** The body must be a JSON object with the documented fields and types;
  anything else is 400 with a JSON ``{"ok": false, "error": {"message"}}`` saying what was
  wrong. An unexpected failure is 500 with the same shape, never a traceback.

The user's code runs in child processes with time budgets (:mod:`anywave.explore.service`).
"""

from __future__ import annotations

import hmac
import json
import math
import secrets
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any

from . import service

_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
          ".css": "text/css; charset=utf-8", ".png": "image/png"}
#: largest request body accepted (bytes)
MAX_BODY = 1 << 20
#: seconds one socket read may wait for the client
READ_TIMEOUT = 10.0
#: seconds a request (line, headers and body) may take to arrive in full
REQUEST_DEADLINE = 30.0
#: requests served at once; more get 503 at once
MAX_THREADS = 16
#: the header that carries the session token
TOKEN_HEADER = "X-Anywave-Token"
#: the largest ``n`` of a run (elements per generated buffer)
MAX_N = 1 << 20
_LOOPBACK = ("127.0.0.1", "localhost", "[::1]")
_META = "<!--anywave-token-->"


class _Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class Handler(BaseHTTPRequestHandler):
    server_version = "anywave-explore"
    timeout = READ_TIMEOUT  # socketserver.StreamRequestHandler: settimeout on the connection
    server: ExplorerServer

    def setup(self) -> None:
        super().setup()
        # a client that trickles its request (a byte per READ_TIMEOUT) is cut off at the deadline
        self._arrived = threading.Event()
        self._watch = threading.Timer(REQUEST_DEADLINE, self._cut_off)
        self._watch.daemon = True
        self._watch.start()

    def _cut_off(self) -> None:
        if not self._arrived.is_set():
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def finish(self) -> None:
        self._watch.cancel()
        try:
            super().finish()
        except OSError:
            pass

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        if getattr(self.server, "verbose", False):
            super().log_message(format, *args)

    def _send(self, status: int, body: bytes, ctype: str) -> None:
        self._arrived.set()
        try:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)
        except OSError:
            pass  # the client went away: nothing to tell it
        self.close_connection = True

    def _json(self, status: int, obj: Any) -> None:
        self._send(status, json.dumps(obj).encode(), "application/json")

    def _fail(self, status: int, message: str) -> None:
        self._json(status, {"ok": False, "error": {"message": message, "line": None, "col": None}})

    # ------------------------------------------------------------------ the checks

    def _check_host(self) -> None:
        port = self.server.server_address[1]
        names = self.server.allowed_names
        hosts = self.headers.get_all("Host") or []
        host = hosts[0] if len(hosts) == 1 else None
        if host is None or host.strip().lower() not in {f"{n}:{port}" for n in names}:
            raise _Refused(403, f"Host header {host!r} is not this server (expected one of "
                                f"{', '.join(f'{n}:{port}' for n in names)})")
        origin = self.headers.get("Origin")
        if origin is not None and origin.strip().lower() not in {f"http://{n}:{port}" for n in names}:
            raise _Refused(403, f"requests from origin {origin!r} are refused (the explorer serves only its "
                                "own page)")
        if self.headers.get("Sec-Fetch-Site", "").lower() == "cross-site":
            raise _Refused(403, "cross-site requests are refused")

    def _check_token(self) -> None:
        got = self.headers.get(TOKEN_HEADER, "")
        if not hmac.compare_digest(got.encode("utf-8", "replace"), self.server.token.encode()):
            raise _Refused(403, f"missing or wrong {TOKEN_HEADER} header (reload the page: it carries the "
                                "session's token)")

    def _read_body(self) -> bytes:
        raw = self.headers.get_all("Content-Length")
        if not raw:
            raise _Refused(411, "a POST needs a Content-Length header")
        text = raw[0].strip()
        if len(raw) > 1 or not text.isascii() or not text.isdigit():
            shown = ", ".join(raw)
            raise _Refused(400, f"Content-Length must be one decimal number of bytes, got {shown[:80]!r}")
        length = int(text) if len(text) <= 18 else MAX_BODY + 1
        if length > MAX_BODY:
            raise _Refused(413, f"request body of {length} bytes is larger than {MAX_BODY} bytes")
        if self.headers.get("Transfer-Encoding"):
            raise _Refused(400, "Transfer-Encoding is not supported (send Content-Length)")
        try:
            body = self.rfile.read(length)
        except OSError as e:  # a read timeout or a reset
            raise _Refused(408, f"the request body did not arrive ({e})") from None
        if len(body) != length:
            raise _Refused(400, f"the body ended after {len(body)} of {length} bytes")
        self._arrived.set()
        return body

    # ------------------------------------------------------------------ methods

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        try:
            self._check_host()
        except _Refused as e:
            self._fail(e.status, str(e))
            return
        self._arrived.set()
        path = self.path.split("?", 1)[0]
        if path == "/":
            path = "/index.html"
        if path == "/api/example":
            self._json(200, {"source": service.EXAMPLE})
            return
        name = path.lstrip("/")
        if "/" in name or "\\" in name or name.startswith(".") or not name:
            self._send(404, b"not found", "text/plain")
            return
        try:
            data = resources.files("anywave.explore").joinpath("static", name).read_bytes()
        except (OSError, ValueError):
            self._send(404, b"not found", "text/plain")
            return
        if name == "index.html":
            meta = f'<meta name="anywave-token" content="{self.server.token}">'
            data = data.replace(_META.encode(), meta.encode())
        ext = name[name.rfind("."):]
        self._send(200, data, _TYPES.get(ext, "application/octet-stream"))

    def do_POST(self) -> None:  # noqa: N802
        try:
            self._check_host()
            self._check_token()
            if self.path not in ("/api/compile", "/api/run"):
                raise _Refused(404, f"no endpoint {self.path[:200]!r} (POST /api/compile or /api/run)")
            req = parse_request(self._read_body(), self.path == "/api/run")
        except _Refused as e:
            self._fail(e.status, str(e))
            return
        try:
            if self.path == "/api/compile":
                out = service.compile_source(req["source"], req["kernel"], req["wave_width"],
                                             timeout=self.server.compile_timeout)
            else:
                out = service.run_source(req["source"], req["kernel"], req["wave_width"], n=req["n"],
                                         targets=self.server.targets, timeout=self.server.run_timeout)
        except Exception as e:  # noqa: BLE001 - the answer says so; the server keeps serving
            self.server.internal_errors += 1
            self._fail(500, f"internal error: {type(e).__name__}: {e}")
            return
        self._json(200, out)


def _refuse(message: str) -> _Refused:
    return _Refused(400, f"bad request: {message}")


def parse_request(body: bytes, run: bool) -> dict[str, Any]:
    """The checked fields of a request body: ``{"source": str, "kernel": str | None,
    "wave_width": 8 | 16 | 32 | 64, "n": int in 1..MAX_N}`` (defaults: ``""``, None, 32, 1000).

    Raises:
        _Refused (400): the body is not UTF-8 JSON, not an object, or a field has the wrong type
            or value (the message names the field, the value and what is valid)."""
    try:
        req = json.loads(body.decode("utf-8") or "{}", parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise _refuse(f"the body is not JSON ({str(e)[:200]})") from None
    if not isinstance(req, dict):
        raise _refuse(f"the body must be a JSON object, got {type(req).__name__}")
    source = req.get("source", "")
    if not isinstance(source, str):
        raise _refuse(f"'source' must be a string, got {type(source).__name__}")
    kernel = req.get("kernel")
    if kernel is not None and not isinstance(kernel, str):
        raise _refuse(f"'kernel' must be a string or null, got {type(kernel).__name__}")
    w = req.get("wave_width", 32)
    if isinstance(w, bool) or not isinstance(w, int) or w not in (8, 16, 32, 64):
        raise _refuse(f"'wave_width' must be 8, 16, 32 or 64, got {_show(w)}")
    n = req.get("n", 1000)
    if run:
        if isinstance(n, float) and math.isfinite(n) and n.is_integer():
            n = int(n)
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_N:
            raise _refuse(f"'n' must be an integer from 1 to {MAX_N}, got {_show(n)}")
    return {"source": source, "kernel": kernel, "wave_width": w, "n": n}


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _show(v: Any) -> str:
    text = json.dumps(v) if isinstance(v, (int, float, str, bool, type(None))) else type(v).__name__
    return text if len(text) <= 60 else text[:57] + "..."


class ExplorerServer(ThreadingHTTPServer):
    """A :class:`ThreadingHTTPServer` with the explorer's session token, allowed host names,
    time budgets and a bound of :data:`MAX_THREADS` requests at once."""

    daemon_threads = True
    block_on_close = False

    def __init__(self, address: tuple[str, int], targets: list[str] | None = None, verbose: bool = False,
                 compile_timeout: float | None = None, run_timeout: float | None = None,
                 max_threads: int = MAX_THREADS) -> None:
        super().__init__(address, Handler)
        self.max_threads = max_threads
        self.token = secrets.token_urlsafe(32)
        self.targets = targets
        self.verbose = verbose
        self.compile_timeout = compile_timeout
        self.run_timeout = run_timeout
        bound = address[0].strip().lower()
        extra = () if bound in ("", "0.0.0.0", "::") else ((f"[{bound}]" if ":" in bound else bound),)
        self.allowed_names = tuple(dict.fromkeys((*_LOOPBACK, *extra)))
        self._slots = threading.BoundedSemaphore(max_threads)
        #: requests whose handling raised past the handler (each printed as one line on stderr)
        self.internal_errors = 0

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            body = json.dumps({"ok": False, "error": {"message": f"busy: {self.max_threads} requests are being "
                                                                 "served; try again", "line": None, "col": None}})
            try:
                request.settimeout(1.0)
                request.sendall((f"HTTP/1.0 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                                 f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n{body}").encode())
            except OSError:
                pass
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        # one line, not a traceback (the full one with verbose); the server keeps serving
        import sys

        e = sys.exc_info()[1]
        if isinstance(e, (ConnectionError, TimeoutError)):
            return  # the client went away or stalled: nothing is wrong with the server
        self.internal_errors += 1
        if self.verbose:
            super().handle_error(request, client_address)
        else:
            print(f"anywave explore: internal error serving {client_address}: {type(e).__name__}: {e}",
                  file=sys.stderr, flush=True)


def make_server(host: str = "127.0.0.1", port: int = 0, verbose: bool = False,
                targets: list[str] | None = None, compile_timeout: float | None = None,
                run_timeout: float | None = None, max_threads: int = MAX_THREADS) -> ExplorerServer:
    """A server bound to ``host:port`` (0: any free port; read ``server.server_address``);
    ``targets`` restricts the targets Run uses besides the emulator (default: all available);
    ``compile_timeout`` / ``run_timeout``: seconds a compile / one target's run may take
    (defaults :data:`anywave.explore.service.COMPILE_TIMEOUT` / ``RUN_TIMEOUT``). The session
    token is ``server.token``; ``max_threads``: requests served at once (503 beyond).

    Raises:
        ValueError: a timeout that is not a finite number > 0, or ``max_threads`` < 1."""
    if isinstance(max_threads, bool) or not isinstance(max_threads, int) or max_threads < 1:
        raise ValueError(f"max_threads must be an int >= 1, got {max_threads!r}")
    for name, t in (("compile_timeout", compile_timeout), ("run_timeout", run_timeout)):
        if t is not None:
            service._budget(t, 1.0, name)
    return ExplorerServer((host, port), targets=targets, verbose=verbose, compile_timeout=compile_timeout,
                          run_timeout=run_timeout, max_threads=max_threads)


def serve_in_thread(host: str = "127.0.0.1", port: int = 0, targets: list[str] | None = None,
                    **options: Any) -> tuple[ExplorerServer, str]:
    """Start a server in a daemon thread; returns (server, base URL). Stop it with
    ``server.shutdown()``; ``options`` go to :func:`make_server`."""
    srv = make_server(host, port, targets=targets, **options)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    h, p = srv.server_address[:2]
    return srv, f"http://{h}:{p}/"
