"""``anywave explore``: a local kernel explorer page.

Edit a kernel in the browser and see its WAVE assembly, PTX, OpenCL C, SYCL, HIP and MSL side
by side (hovering a line highlights the source line it came from and every line of every
panel that came from it), compile errors with the caret, and run it on the emulator and every
available target with generated inputs, with per-target results and whether they are
bit-identical. Served by the standard library's ``http.server``; the page and its script are
bundled in the package (no CDN, works offline).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register the ``explore`` subcommand."""
    p = subparsers.add_parser("explore", help="serve the kernel explorer page (edit, compile, compare, run)",
                              description="Serve a local page where you edit a kernel and see its WAVE assembly, "
                                          "PTX, OpenCL C, SYCL, HIP and MSL side by side, linked line by line to "
                                          "the source; compile errors show the caret; Run executes it on the "
                                          "emulator and every available target and reports whether the results "
                                          "are bit-identical. Stop it with Ctrl+C.")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1: the page runs the code it is sent, keep it local)")
    p.add_argument("--port", type=int, default=8765, help="port (default 8765; 0 picks a free one)")
    p.add_argument("--open", action="store_true", help="open the page in the default web browser")
    p.add_argument("--target", action="append", default=None, metavar="NAME",
                   help="run only on the emulator and this target (repeatable; default: every available one)")
    p.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                   help="time budget of one compile and of each target's run (default 120); the kernel runs in a "
                        "child process that is stopped past it")
    return p


def run(args: argparse.Namespace) -> int:
    """Serve until interrupted."""
    from .server import make_server

    try:
        srv = make_server(args.host, args.port, targets=args.target, compile_timeout=args.timeout,
                          run_timeout=args.timeout)
    except ValueError as e:
        print(f"anywave explore: {e}", file=sys.stderr)
        return 2
    h, p = srv.server_address[:2]
    url = f"http://{h}:{p}/"
    print(f"anywave explorer at {url} (Ctrl+C stops it)", flush=True)
    if args.open:
        import webbrowser

        webbrowser.open(url)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        srv.server_close()
    return 0
