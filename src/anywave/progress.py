"""Progress lines for long runs (issue 31, item 21): the autotuner timing its configs and long
emulator launches, which are otherwise silent for tens of seconds.

Shown on stderr -- a rich progress bar on a terminal (when rich is installed), else plain lines
-- when :func:`enabled`: ``ANYWAVE_PROGRESS=1`` forces it on, ``ANYWAVE_PROGRESS=0`` off, and by
default it is on only when stderr is a terminal (so tests, pipes and logs see nothing). An
emulator launch shows progress only once it has run ``ANYWAVE_PROGRESS_AFTER`` seconds (default
2), then at most once a second.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")


def enabled(explicit: bool | None = None) -> bool:
    """Whether to show progress: ``explicit`` when given, else ``ANYWAVE_PROGRESS`` (``1``/``0``)
    where set, else whether stderr is a terminal."""
    if explicit is not None:
        return bool(explicit)
    v = os.environ.get("ANYWAVE_PROGRESS", "").strip().lower()
    if v:
        return v not in ("0", "false", "no", "off")
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def _after() -> float:
    try:
        return max(0.0, float(os.environ.get("ANYWAVE_PROGRESS_AFTER", "2")))
    except ValueError:
        return 2.0


def track(items: Iterable[T], description: str, total: int | None = None, show: bool | None = None) -> Iterator[T]:
    """``items``, with a progress line per item on stderr when :func:`enabled` (``show``)."""
    if not enabled(show):
        yield from items
        return
    seq = list(items)
    n = len(seq) if total is None else total
    if sys.stderr.isatty():
        try:
            from rich.progress import track as rich_track

            yield from rich_track(seq, description=description, total=n, transient=True)
            return
        except ImportError:
            pass
    for i, x in enumerate(seq):
        sys.stderr.write(f"{description}: {i + 1}/{n}\n")
        sys.stderr.flush()
        yield x


class Reporter:
    """Progress of ``total`` steps of one long run (an emulator launch): :meth:`update` writes
    ``"<label>: <done>/<total> <unit> (<s> s)"`` to stderr once the run has taken
    ``ANYWAVE_PROGRESS_AFTER`` seconds, at most once a second, and at the end if anything was
    shown; nothing when :func:`enabled` is false."""

    def __init__(self, label: str, total: int, unit: str, show: bool | None = None) -> None:
        self.label, self.total, self.unit = label, total, unit
        self.on = enabled(show)
        self.t0 = time.perf_counter()
        self.after = _after()
        self.last = -1.0
        self.shown = False

    def update(self, done: int) -> None:
        if not self.on:
            return
        now = time.perf_counter()
        el = now - self.t0
        if el < self.after or (self.shown and now - self.last < 1.0 and done < self.total):
            return
        self.last, self.shown = now, True
        sys.stderr.write(f"{self.label}: {done}/{self.total} {self.unit} ({el:.1f} s)\n")
        sys.stderr.flush()


def reporter(label: str, total: int, unit: str, show: Any = None) -> Reporter:
    """A :class:`Reporter` (module docs)."""
    return Reporter(label, total, unit, show)
