"""The explorer's HTTP server: the standard library's ``http.server`` serving the bundled page
(``static/``, no CDN) and two JSON endpoints, ``POST /api/compile`` and ``POST /api/run``
(:mod:`anywave.explore.service`). It binds to 127.0.0.1 by default: the page compiles and
runs the Python it is sent, so it is for the local user only.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any

from . import service

_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
          ".css": "text/css; charset=utf-8", ".png": "image/png"}
#: largest request body accepted (bytes)
MAX_BODY = 1 << 20


class Handler(BaseHTTPRequestHandler):
    server_version = "anywave-explore"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        if getattr(self.server, "verbose", False):
            super().log_message(format, *args)

    def _send(self, status: int, body: bytes, ctype: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, obj: Any) -> None:
        self._send(status, json.dumps(obj).encode(), "application/json")

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        path = self.path.split("?", 1)[0]
        if path == "/":
            path = "/index.html"
        if path == "/api/example":
            self._json(200, {"source": service.EXAMPLE})
            return
        name = path.lstrip("/")
        if "/" in name or name.startswith("."):
            self._send(404, b"not found", "text/plain")
            return
        try:
            data = resources.files("anywave.explore").joinpath("static", name).read_bytes()
        except (FileNotFoundError, IsADirectoryError, OSError):
            self._send(404, b"not found", "text/plain")
            return
        ext = name[name.rfind("."):]
        self._send(200, data, _TYPES.get(ext, "application/octet-stream"))

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self._json(413, {"ok": False, "error": {"message": f"request larger than {MAX_BODY} bytes"}})
            return
        try:
            req = json.loads(self.rfile.read(length) or b"{}")
            source = str(req.get("source", ""))
            kernel = req.get("kernel")
            w = int(req.get("wave_width", 32))
            if w not in (8, 16, 32, 64):
                raise ValueError(f"wave_width must be 8, 16, 32 or 64, got {w}")
        except (ValueError, TypeError) as e:
            self._json(400, {"ok": False, "error": {"message": f"bad request: {e}"}})
            return
        if self.path == "/api/compile":
            self._json(200, service.compile_source(source, kernel, w))
        elif self.path == "/api/run":
            n = min(max(int(req.get("n", 1000)), 1), 1 << 20)
            self._json(200, service.run_source(source, kernel, w, n=n, targets=getattr(self.server, "targets", None)))
        else:
            self._json(404, {"ok": False, "error": {"message": f"no endpoint {self.path}"}})


def make_server(host: str = "127.0.0.1", port: int = 0, verbose: bool = False,
                targets: list[str] | None = None) -> ThreadingHTTPServer:
    """A server bound to ``host:port`` (0: any free port; read ``server.server_address``);
    ``targets`` restricts the targets Run uses besides the emulator (default: all available)."""
    srv = ThreadingHTTPServer((host, port), Handler)
    srv.daemon_threads = True
    srv.verbose = verbose  # type: ignore[attr-defined]
    srv.targets = targets  # type: ignore[attr-defined]
    return srv


def serve_in_thread(host: str = "127.0.0.1", port: int = 0,
                    targets: list[str] | None = None) -> tuple[ThreadingHTTPServer, str]:
    """Start a server in a daemon thread; returns (server, base URL). Stop it with
    ``server.shutdown()``."""
    srv = make_server(host, port, targets=targets)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    h, p = srv.server_address[:2]
    return srv, f"http://{h}:{p}/"
