"""What the explorer page asks for, as plain functions (JSON-ready dicts): compile a kernel's
source to every backend with each output line linked to its source line, and run it on the
emulator and every available target with generated inputs.

Both are used by :mod:`anywave.explore.server` and are testable without a browser. The source
is the user's Python: importing it runs its module-level code, and a kernel may write out of
bounds or never end. So nothing of it runs in the calling process: each compile, and each
target of a run, happens in a child process (``multiprocessing``'s ``forkserver``, which
preloads this module, so a child starts in milliseconds and shares no driver state with the
server) that is killed when it overruns its time budget. A child that crashes or is killed
costs only its own answer; the server and later requests are unaffected.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import linecache
import multiprocessing
import re
import shutil
import signal
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from anywave.errors import WaveError

#: the example the page starts with
EXAMPLE = '''\
import anywave as aw


@aw.kernel
def saxpy(a: aw.f32, x: aw.In[aw.f32], y: aw.Buffer[aw.f32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        y[i] = a * x[i] + y[i]
        if i < 2:
            aw.print("thread {}: y = {}", i, y[i])
'''

#: panel titles of the backends the page shows first (others from the registry follow)
TITLES = {"wave": "WAVE assembly", "ptx": "PTX", "opencl": "OpenCL C", "sycl": "SYCL", "hip": "HIP",
          "metal": "MSL (Metal)"}

#: default time budgets (seconds of wall-clock time) of one compile and of one target's run
#: (a SYCL compile alone may take 20 s on a loaded CPU); the child is killed past them
COMPILE_TIMEOUT = 120.0
RUN_TIMEOUT = 120.0

_WHERE = re.compile(r"kernel\.py:(\d+)(?::(\d+))?")
_CTX_LOCK = threading.Lock()
_CTX: Any = None

class ExploreError(WaveError):
    """A request the explorer cannot serve (no kernel in the source, unknown kernel ...)."""


def _load(source: str, where: Path) -> dict[str, Any]:
    from anywave.compiler.cli_compile import load_kernels

    path = where / "kernel.py"
    path.write_text(source)
    linecache.cache.pop(str(path), None)  # a rewritten file: never serve stale source lines
    kernels = load_kernels(path)
    if not kernels:
        raise ExploreError("the source defines no @aw.kernel function")
    return kernels


def _error(e: BaseException, where: Path) -> dict[str, Any]:
    loc = getattr(e, "loc", None)
    line = getattr(loc, "line", None) if loc is not None else None
    col = getattr(loc, "col", None) if loc is not None else None
    text = str(e)
    if line is None:
        m = _WHERE.search(text)
        if m:
            line, col = int(m.group(1)), int(m.group(2) or 0)
    text = text.replace(str(where) + "/", "")
    return {"message": text, "line": line, "col": col}


def _link(text: str, marker: re.Pattern[str], drop: bool) -> list[list[Any]]:
    """Split ``text`` into [line, source line or None] pairs; a line matching ``marker`` sets
    the source line of the lines after it (and is dropped when ``drop``)."""
    out: list[list[Any]] = []
    cur: int | None = None
    for line in text.splitlines():
        m = marker.search(line)
        if m:
            cur = int(m.group(1))
            if drop:
                continue
            out.append([line, cur])
            continue
        if not line.strip() or line.lstrip().startswith((".kernel", ".end", ".arg", ".registers", "}")):
            out.append([line, None])
            continue
        out.append([line, cur])
    return out


_MARKERS = {
    "wave": (re.compile(r'^\s*\.loc "[^"]*" (\d+)'), True),
    "ptx": (re.compile(r"//.*\([^()]*:(\d+):\d+\)\s*$"), False),
}
_C_MARKER = (re.compile(r"^\s*/\* .*:(\d+) \*/\s*$"), True)


# ----------------------------------------------------------------------------- child processes

def _context() -> Any:
    global _CTX
    with _CTX_LOCK:
        if _CTX is None:
            if "forkserver" in multiprocessing.get_all_start_methods():
                ctx = multiprocessing.get_context("forkserver")
                # what every child needs, imported once; no driver is loaded here (each child
                # starts its target's runtime itself, so no driver state crosses a fork)
                ctx.set_forkserver_preload(["anywave", "anywave.asm", "anywave.backends.registry",
                                            "anywave.compiler.cli_compile", "anywave.jit.targets",
                                            "anywave.explore.service"])
            else:  # pragma: no cover - Windows
                ctx = multiprocessing.get_context("spawn")
            _CTX = ctx
        return _CTX


def _child_main(conn: Any, fn: Any, args: tuple[Any, ...]) -> None:
    # runs in the child: one call, its answer (or its error's text) through the pipe
    try:
        out: tuple[str, Any] = ("ok", fn(*args))
    except BaseException as e:  # noqa: BLE001 - anything the user's code raises is the answer
        out = ("raised", f"{type(e).__name__}: {e}")
    try:
        conn.send(out)
    finally:
        conn.close()


def _how_it_ended(code: int | None) -> str:
    if code is None:
        return "did not end"
    if code < 0:
        try:
            return f"was killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


def isolated(fn: Any, args: tuple[Any, ...], timeout: float) -> tuple[str, Any]:
    """Call ``fn(*args)`` in a fresh child process with a budget of ``timeout`` seconds
    (wall clock). ``fn`` and its answer must pickle.

    Returns ``("ok", answer)``, or ``(kind, message)`` with kind ``"raised"`` (the text of the
    exception it raised), ``"timeout"`` (the child was killed at the budget) or ``"died"``
    (the child ended without answering: a crash, a signal, ``os._exit``)."""
    ctx = _context()
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child_main, args=(send, fn, args), daemon=True)
    proc.start()
    send.close()
    kind, value = "timeout", None
    try:
        if recv.poll(timeout):
            try:
                kind, value = recv.recv()
            except (EOFError, OSError):
                kind = "died"
    finally:
        recv.close()
        if kind != "ok":
            proc.kill()
        proc.join(10.0)
        if proc.is_alive():  # pragma: no cover - a child stuck after answering
            proc.kill()
            proc.join()
    if kind == "timeout":
        return kind, f"did not finish within the explorer's budget of {timeout:g} s; its process was stopped"
    if kind == "died":
        return kind, f"its process {_how_it_ended(proc.exitcode)} before answering (a crash: for example an " \
                     "out-of-bounds access on a target without bounds checks)"
    return kind, value


def _isolated_in_dir(fn: Any, args: tuple[Any, ...], timeout: float) -> tuple[str, Any]:
    # the child writes the source into a directory the parent owns and removes, so a child
    # killed at its budget leaves nothing behind
    where = Path(tempfile.mkdtemp(prefix="anywave-explore-"))
    try:
        return isolated(fn, (*args, where), timeout)
    finally:
        shutil.rmtree(where, ignore_errors=True)


def _budget(timeout: float | None, default: float, what: str) -> float:
    t = default if timeout is None else timeout
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 < t < float("inf"):
        raise ValueError(f"{what} must be a finite number of seconds > 0, got {t!r}")
    return float(t)


# ----------------------------------------------------------------------------- compile

def _compile_here(source: str, kernel: str | None, wave_width: int, where: Path) -> dict[str, Any]:
    # in the child: import the source, compile, translate to every backend
    from anywave.asm import disassemble
    from anywave.backends.registry import backends, translate

    try:
        kernels = _load(source, where)
        name = kernel if kernel in kernels else next(iter(kernels))
        module = kernels[name].compile()
    except (WaveError, SyntaxError) as e:
        return {"ok": False, "kernels": [], "kernel": None, "outputs": {}, "error": _error(e, where)}
    outputs: dict[str, Any] = {}
    marker, drop = _MARKERS["wave"]
    wave = disassemble(module).replace(str(where) + "/", "")
    outputs["wave"] = {"title": TITLES["wave"], "lines": _link(wave, marker, drop), "error": None}
    for b in backends():
        title = TITLES.get(b.name, b.language)
        try:
            if b.arch_default:
                text = translate(b.name, module, comments=True)
            else:
                w = wave_width if wave_width in b.wave_widths else b.default_wave_width
                text = translate(b.name, module, wave_width=w, comments=True)
                title += f" (W={w})"
        except WaveError as e:
            outputs[b.name] = {"title": title, "lines": [], "error": str(e)}
            continue
        marker, drop = _MARKERS.get(b.name, _C_MARKER)
        lines = _link(text, marker, drop)
        outputs[b.name] = {"title": title, "lines": [[t.replace(str(where) + "/", ""), s] for t, s in lines],
                           "error": None}
    return {"ok": True, "kernels": list(kernels), "kernel": name, "outputs": outputs, "error": None}


def compile_source(source: str, kernel: str | None = None, wave_width: int = 32, *,
                   timeout: float | None = None) -> dict[str, Any]:
    """Compile ``source`` (in a child process, see the module docstring); returns ``{"ok",
    "kernels", "kernel", "outputs", "error"}``.

    ``outputs`` maps a panel name (``wave`` and every registered backend) to ``{"title",
    "lines": [[text, source line or None], ...], "error"}``; ``error`` (when ``ok`` is false)
    is ``{"message" (with the caret excerpt), "line", "col"}``. ``timeout``: the budget in
    seconds (default :data:`COMPILE_TIMEOUT`); past it the child is killed and the answer is
    an error saying so.

    Raises:
        ValueError: ``timeout`` is not a finite number > 0.
    """
    budget = _budget(timeout, COMPILE_TIMEOUT, "timeout")
    kind, value = _isolated_in_dir(_compile_here, (source, kernel, wave_width), budget)
    if kind == "ok":
        return value
    return {"ok": False, "kernels": [], "kernel": None, "outputs": {},
            "error": {"message": f"compiling {value}", "line": None, "col": None}}


# ----------------------------------------------------------------------------- run

def _inputs(kf: Any, n: int, seed: int) -> tuple[dict[str, Any], list[str]]:
    rng = np.random.default_rng(seed)
    args: dict[str, Any] = {}
    written: list[str] = []
    for p in kf.params:
        if p.kind == "const":
            continue
        if p.kind == "buffer":
            dt = np.dtype(p.ann.elem.np_dtype)
            if p.ann.access & 2:
                written.append(p.name)
            if dt.kind == "f":
                a = rng.standard_normal(n).astype(dt)
            elif dt.kind in "iu":
                a = rng.integers(0, 100, n).astype(dt)
            else:
                a = np.zeros(n, dt)
            if not p.ann.access & 1:
                a = np.zeros(n, dt)
            args[p.name] = a
        else:
            t: Any = p.ann
            args[p.name] = n if t.is_int else 1.5
    return args, written


def _run_here(source: str, kernel: str | None, wave_width: int, n: int, workgroup: int, seed: int,
              target: str, where: Path) -> dict[str, Any]:
    # in the child: import and compile the source, run it on one target with generated inputs
    from anywave.jit.targets import get_target

    try:
        kernels = _load(source, where)
        name = kernel if kernel in kernels else next(iter(kernels))
        kf = kernels[name]
        kf.compile()
    except (WaveError, SyntaxError) as e:
        return {"compile_error": _error(e, where)}
    wg = kf.workgroup[0] if kf.workgroup else workgroup
    grid = -(-n // wg)
    plan = {"kernel": name, "grid": grid, "workgroup": wg}
    args, written = _inputs(kf, n, seed)
    w: int | None = wave_width
    try:
        tgt = get_target(target)
        if tgt.wave_widths is not None and wave_width not in tgt.wave_widths:
            w = tgt.wave_widths[0] if tgt.wave_widths else None
        buf = io.StringIO()
        t0 = time.perf_counter()
        with contextlib.redirect_stdout(buf):
            kf(**args, grid=(grid, 1, 1), workgroup=(wg, 1, 1), target=target, wave_width=w)
        ms = (time.perf_counter() - t0) * 1e3
    except (WaveError, ValueError, TypeError, OSError) as e:
        return {**plan, "row": {"target": target, "wave_width": w, "error": str(e).replace(str(where) + "/", "")}}
    blobs = [args[k].tobytes() for k in written]
    first = args[written[0]][:6].tolist() if written else []
    return {**plan, "blobs": blobs,
            "row": {"target": target, "wave_width": w, "ms": round(ms, 2),
                    "sha256": hashlib.sha256(b"".join(blobs)).hexdigest()[:16], "preview": first,
                    "printed": buf.getvalue().splitlines()[:20], "error": None}}


def compare_rows(rows: list[dict[str, Any]], blobs: list[list[bytes] | None]) -> None:
    """Set each row's ``identical`` (in place): True or False when both it and the emulator's
    row (``rows[0]``) have results, None when either failed (nothing to compare with)."""
    reference = blobs[0] if rows and rows[0].get("error") is None else None
    for row, b in zip(rows, blobs, strict=True):
        if row.get("error") is None:
            row["identical"] = None if reference is None or b is None else b == reference


def run_source(source: str, kernel: str | None = None, wave_width: int = 32, n: int = 1000,
               workgroup: int = 64, seed: int = 0, targets: list[str] | None = None, *,
               timeout: float | None = None) -> dict[str, Any]:
    """Run a kernel of ``source`` on the emulator (at ``wave_width``) and on every other
    available target, with generated inputs: float buffers ~ N(0, 1), integer buffers in
    0..99, write-only buffers zero, integer scalars ``n``, float scalars 1.5; grid
    ``ceil(n / workgroup)``. Each target runs in its own child process with a budget of
    ``timeout`` seconds (default :data:`RUN_TIMEOUT`): a crash or an overrun is that target's
    error, and the other targets still run.

    Returns ``{"ok", "results": [{"target", "wave_width", "ms", "sha256", "identical",
    "preview", "printed", "error"}], "error"}``; ``identical`` is True when the written buffers
    equal the emulator's bit for bit, False when they differ, None when the emulator's row (or
    this one) failed, so there is nothing to compare. ``targets`` restricts the targets besides
    the emulator (default: every available one).

    Raises:
        ValueError: ``timeout`` is not a finite number > 0.
    """
    from anywave.jit.targets import available_targets

    budget = _budget(timeout, RUN_TIMEOUT, "timeout")
    others = [t for t in available_targets() if t != "emulator" and (targets is None or t in targets)]
    rows: list[dict[str, Any]] = []
    blobs: list[list[bytes] | None] = []
    plan: dict[str, Any] | None = None
    for target in ["emulator"] + others:
        kind, value = _isolated_in_dir(_run_here, (source, kernel, wave_width, n, workgroup, seed, target), budget)
        if kind == "ok" and "compile_error" in value:
            return {"ok": False, "results": [], "error": value["compile_error"]}
        if kind != "ok":
            rows.append({"target": target, "wave_width": None, "error": f"the run {value}"})
            blobs.append(None)
            continue
        if plan is None:
            plan = {k: value[k] for k in ("kernel", "grid", "workgroup")}
            kernel = plan["kernel"]
        rows.append(value["row"])
        blobs.append(value.get("blobs"))
    compare_rows(rows, blobs)
    if plan is None:
        plan = {"kernel": kernel, "grid": None, "workgroup": None}
    return {"ok": True, **plan, "n": n, "results": rows, "error": None}
