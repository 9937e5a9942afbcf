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
  destructors that would wait forever;
* a launch only enqueued (``sync=False``) may still be running when the interpreter exits, also
  when no wait was interrupted: the Ctrl-C may have come just before the wait began, or the
  program simply ended. Each runtime with asynchronous launches registers, with :func:`watch`, a
  test of whether its queue still holds unfinished work. At exit, unfinished work after an
  uncaught KeyboardInterrupt ends the process at once (status 130, as above); after any other
  exit the hook says on stderr that it waits, and waits, polling -- a Ctrl-C then ends the
  process at once (status 130) instead of the runtime's destructors blocking it for good;
* a command that ran past its time limit (a Vulkan dispatch whose fence wait timed out: the
  runtime raised an error and refuses further work) may still be running in the driver's threads.
  Exiting while it runs is not safe: the C library's exit-time destructors (the driver's, LLVM's
  in Mesa's lavapipe) run while a driver thread still uses what they free, and the process dies
  of SIGSEGV or an abort after the program's last line (seen on lavapipe in about a third of such
  exits under load). :func:`overdue` records such a command; at exit the hook waits for it at
  most :data:`OVERDUE_EXIT_WAIT_S` (saying so on stderr; Ctrl-C ends the wait), and if it is still
  running then, ends the process at once with status 1, skipping those destructors.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

#: (what, still running?, kept alive) of each wait abandoned by Ctrl-C
_ABANDONED: list[tuple[str, Callable[[], bool], Any]] = []
#: (what, has unfinished work?, refuse new work) of each runtime queue that takes asynchronous launches
_WATCHED: list[tuple[str, Callable[[], bool], Callable[[], None] | None]] = []
#: (what, still running?, kept alive) of each command that ran past its time limit
_OVERDUE: list[tuple[str, Callable[[], bool], Any]] = []
#: how long the exit hook waits for an overdue command (:func:`overdue`) before it ends the
#: process without it (seconds)
OVERDUE_EXIT_WAIT_S = 60.0
#: how often the exit hook polls what it waits for (seconds)
_POLL_S = 0.05
_HOOKED = False
_LOCK = threading.Lock()
#: the process whose queues the registry describes (a forked child inherits the registry and the
#: exit hook, but not the runtimes' threads: its exit must neither query nor wait on them)
_PID = os.getpid()


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
    with _LOCK:
        _ABANDONED.append((what, still_running, keep))
        _hook()


def overdue(what: str, still_running: Callable[[], bool], keep: Any = None) -> None:
    """Record a command that ran past its time limit and may still be running (module docs):
    ``keep`` stays alive for the rest of the process, and at exit the hook waits for
    ``still_running()`` to turn false at most :data:`OVERDUE_EXIT_WAIT_S`, then ends the process
    (status 1) without the exit-time destructors that would race the command.
    ``still_running`` must never block; one that raises counts as finished."""
    with _LOCK:
        _OVERDUE.append((what, still_running, keep))
        _hook()


def watch(what: str, busy: Callable[[], bool], close: Callable[[], None] | None = None) -> None:
    """Register a runtime queue for the exit hook (module docs): ``busy()`` is true while work
    enqueued on it has not finished; it must never block, and may raise once the runtime is
    torn down (then the queue counts as idle). ``close()``, called by the exit hook before it
    waits, makes the runtime refuse new work (threads still launching at exit, daemon threads:
    the queue would never drain)."""
    with _LOCK:
        _WATCHED.append((what, busy, close))
        _hook()


class _Anchor:
    """An object whose finalizer makes :mod:`weakref` register its own exit function now."""


_ANCHOR = _Anchor()


def _hook() -> None:
    global _HOOKED, _PID
    if not _HOOKED:  # (under _LOCK) once per process
        _PID = os.getpid()
        _HOOKED = True
        # exit functions run last-registered first: weakref.finalize's (which frees device arrays,
        # and a runtime's free can wait for a kernel still using the memory) must run after ours,
        # so it is registered first (a no-op finalizer forces that; it registers only once)
        weakref.finalize(_ANCHOR, lambda: None)
        atexit.register(_exit_hook)


def _still_running(entries: list[tuple[str, Callable[[], bool]]]) -> list[str]:
    """The ``what`` of each (what, test) whose test is true; a test that raises (a runtime
    already torn down) counts as finished."""
    out = []
    for what, running in entries:
        try:
            if running():
                out.append(what)
        except Exception:  # noqa: BLE001 - a runtime already torn down: treat as finished
            continue
    return out


def abandoned() -> list[str]:
    """Descriptions of the commands still running after an interrupted wait."""
    return _still_running([(what, running) for what, running, _ in list(_ABANDONED)])


def busy_queues() -> list[str]:
    """The watched queues (:func:`watch`) that still hold unfinished work."""
    return _still_running([(what, busy) for what, busy, _ in list(_WATCHED)])


def _interrupted() -> bool:
    """Whether the interpreter is exiting on an uncaught KeyboardInterrupt (``sys.last_exc``,
    Python 3.12+, or ``sys.last_value``, set when the uncaught exception was printed)."""
    return any(isinstance(getattr(sys, n, None), KeyboardInterrupt) for n in ("last_exc", "last_value"))


def overdue_running() -> list[str]:
    """Descriptions of the commands recorded by :func:`overdue` that are still running."""
    return _still_running([(what, running) for what, running, _ in list(_OVERDUE)])


def _exit_now(message: str, status: int = 130) -> None:
    try:
        sys.stderr.write(message)
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(status)


def _wait_at_exit(pending: Callable[[], list[str]], what: str, announce: str, limit_s: float | None) -> list[str]:
    """The exit hook's wait for ``pending()`` (descriptions of what still runs) to empty: after
    an uncaught KeyboardInterrupt the process ends at once (status 130); otherwise ``announce``
    goes to stderr and the hook polls, at most ``limit_s`` seconds (None: no limit), a Ctrl-C
    ending the process at once. Returns what still runs when the wait ended."""
    left = pending()
    if not left:
        return left
    if _interrupted():
        _exit_now(f"anywave: {what} ({left[0]}) still running after Ctrl-C; exiting without waiting for it\n")
    try:
        sys.stderr.write(announce)
        sys.stderr.flush()
        t_end = None if limit_s is None else time.monotonic() + limit_s
        while left and (t_end is None or time.monotonic() < t_end):
            restore_sigint()  # a runtime's own handler would swallow the Ctrl-C
            time.sleep(_POLL_S if t_end is None else min(_POLL_S, max(0.0, t_end - time.monotonic())))
            left = pending()
    except KeyboardInterrupt:
        _exit_now(f"anywave: exiting without waiting for {what}\n")
    return left


def _exit_hook() -> None:
    if os.getpid() != _PID:  # a forked child: the queues and waits recorded are its parent's
        return
    left = abandoned()
    if left:
        _exit_now(f"anywave: {len(left)} command(s) interrupted by Ctrl-C still running ({left[0]}); "
                  "exiting without waiting for them\n")
    for _what, _busy, close in list(_WATCHED):
        if close is not None:
            try:
                close()
            except Exception:  # noqa: BLE001 - a runtime already torn down
                pass
    _wait_at_exit(busy_queues, "the enqueued work",
                  f"anywave: waiting for the work enqueued on {', '.join(busy_queues())} to finish before exiting "
                  "(Ctrl-C exits without waiting)\n", None)
    late = _wait_at_exit(overdue_running, "a command past its time limit",
                         f"anywave: waiting up to {OVERDUE_EXIT_WAIT_S:g} s for {', '.join(overdue_running())}, which "
                         "ran past its time limit, before exiting (Ctrl-C exits without waiting)\n",
                         OVERDUE_EXIT_WAIT_S)
    if late:
        _exit_now(f"anywave: {late[0]} is still running {OVERDUE_EXIT_WAIT_S:g} s after the program ended; exiting "
                  "without waiting for it (status 1)\n", status=1)
