"""Ctrl-C during a wait on a compiled runtime (issue 11, item 17; issue 31, item 7).

Waits on OpenCL events and SYCL queues are made from Python (a poll, or a worker thread joined
with a timeout) so that the main thread runs Python's signal handler. Two things can still keep
a Ctrl-C from working, and this module handles both:

* a vendor runtime may install its own C-level ``SIGINT`` handler when it starts (the SYCL
  runtime on the Intel OpenCL CPU device does): Python's handler is then never called.
  :func:`restore_sigint` re-installs Python's handler (from the main thread) before each wait;
* after the interrupt the kernel keeps running (a device kernel cannot be cancelled), and the
  runtime's exit-time destructors wait for it -- the process would hang at exit.
  :func:`abandon` keeps what the command uses alive (host arrays it may still write) and, once
  per process, registers an exit hook: if an abandoned command is still running when the
  interpreter exits, it says so on stderr, flushes the standard streams and ends the process at
  once with status 130 (128 + SIGINT, the shell's convention for Ctrl-C), skipping the
  destructors that would wait forever.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

#: (what, still running?, kept alive) of each wait abandoned by Ctrl-C
_ABANDONED: list[tuple[str, Callable[[], bool], Any]] = []
_HOOKED = False
_LOCK = threading.Lock()


def restore_sigint() -> None:
    """Re-install Python's ``SIGINT`` handler at the C level (main thread only; a no-op where the
    handler is not one Python installed, e.g. ignored on purpose)."""
    if threading.current_thread() is not threading.main_thread():
        return
    try:
        h = signal.getsignal(signal.SIGINT)
        if callable(h) or h is signal.default_int_handler:
            signal.signal(signal.SIGINT, h)
    except (ValueError, OSError, TypeError):  # pragma: no cover - no signals here
        pass


def abandon(what: str, still_running: Callable[[], bool], keep: Any = None) -> None:
    """Record a command left running by an interrupted wait: ``keep`` stays alive for the rest of
    the process (a kernel or copy that finishes later never writes into freed memory), and the
    exit hook (module docs) ends the process without waiting for ``what`` if
    ``still_running()`` is then still true."""
    global _HOOKED
    with _LOCK:
        _ABANDONED.append((what, still_running, keep))
        if not _HOOKED:
            _HOOKED = True
            atexit.register(_exit_hook)


def abandoned() -> list[str]:
    """Descriptions of the commands still running after an interrupted wait."""
    out = []
    for what, running, _ in list(_ABANDONED):
        try:
            if running():
                out.append(what)
        except Exception:  # noqa: BLE001 - a runtime already torn down: treat as finished
            continue
    return out


def _exit_hook() -> None:
    left = abandoned()
    if not left:
        return
    try:
        sys.stderr.write(f"anywave: {len(left)} command(s) interrupted by Ctrl-C still running ({left[0]}); "
                         "exiting without waiting for them\n")
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(130)
