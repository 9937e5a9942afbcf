"""What the explorer page asks for, as plain functions (JSON-ready dicts): compile a kernel's
source to every backend with each output line linked to its source line, and run it on the
emulator and every available target with generated inputs.

Both are used by :mod:`anywave.explore.server` and are testable without a browser.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import linecache
import re
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

_LOCK = threading.Lock()
_DIR = Path(tempfile.mkdtemp(prefix="anywave-explore-"))
_WHERE = re.compile(r"kernel\.py:(\d+)(?::(\d+))?")


class ExploreError(WaveError):
    """A request the explorer cannot serve (no kernel in the source, unknown kernel ...)."""


def _load(source: str) -> dict[str, Any]:
    from anywave.compiler.cli_compile import load_kernels

    path = _DIR / "kernel.py"
    path.write_text(source)
    linecache.cache.pop(str(path), None)  # a rewritten file: never serve stale source lines
    kernels = load_kernels(path)
    if not kernels:
        raise ExploreError("the source defines no @aw.kernel function")
    return kernels


def _error(e: BaseException) -> dict[str, Any]:
    loc = getattr(e, "loc", None)
    line = getattr(loc, "line", None) if loc is not None else None
    col = getattr(loc, "col", None) if loc is not None else None
    text = str(e)
    if line is None:
        m = _WHERE.search(text)
        if m:
            line, col = int(m.group(1)), int(m.group(2) or 0)
    text = text.replace(str(_DIR) + "/", "")
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


def compile_source(source: str, kernel: str | None = None, wave_width: int = 32) -> dict[str, Any]:
    """Compile ``source``; returns ``{"ok", "kernels", "kernel", "outputs", "error"}``.

    ``outputs`` maps a panel name (``wave`` and every registered backend) to ``{"title",
    "lines": [[text, source line or None], ...], "error"}``; ``error`` (when ``ok`` is false)
    is ``{"message" (with the caret excerpt), "line", "col"}``.
    """
    from anywave.asm import disassemble
    from anywave.backends.registry import backends, translate

    with _LOCK:
        try:
            kernels = _load(source)
            name = kernel if kernel in kernels else next(iter(kernels))
            module = kernels[name].compile()
        except (WaveError, SyntaxError) as e:
            return {"ok": False, "kernels": [], "kernel": None, "outputs": {}, "error": _error(e)}
    outputs: dict[str, Any] = {}
    marker, drop = _MARKERS["wave"]
    wave = disassemble(module).replace(str(_DIR) + "/", "")
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
        outputs[b.name] = {"title": title, "lines": [[t.replace(str(_DIR) + "/", ""), s] for t, s in lines],
                           "error": None}
    return {"ok": True, "kernels": list(kernels), "kernel": name, "outputs": outputs, "error": None}


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


def run_source(source: str, kernel: str | None = None, wave_width: int = 32, n: int = 1000,
               workgroup: int = 64, seed: int = 0, targets: list[str] | None = None) -> dict[str, Any]:
    """Run a kernel of ``source`` on the emulator (at ``wave_width``) and on every other
    available target, with generated inputs: float buffers ~ N(0, 1), integer buffers in
    0..99, write-only buffers zero, integer scalars ``n``, float scalars 1.5; grid
    ``ceil(n / workgroup)``. Returns ``{"ok", "results": [{"target", "wave_width", "ms",
    "sha256", "identical", "preview", "printed", "error"}], "error"}`` (``identical``: the
    written buffers equal the emulator's bit for bit). ``targets`` restricts the targets besides
    the emulator (default: every available one).
    """
    from anywave.jit.targets import available_targets, get_target

    with _LOCK:
        try:
            kernels = _load(source)
            name = kernel if kernel in kernels else next(iter(kernels))
            kf = kernels[name]
            kf.compile()
        except (WaveError, SyntaxError) as e:
            return {"ok": False, "results": [], "error": _error(e)}
    wg = kf.workgroup[0] if kf.workgroup else workgroup
    grid = -(-n // wg)
    results = []
    reference: list[bytes] | None = None
    others = [t for t in available_targets() if t != "emulator" and (targets is None or t in targets)]
    for target in ["emulator"] + others:
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
            results.append({"target": target, "wave_width": w, "error": str(e)})
            continue
        blobs = [args[k].tobytes() for k in written]
        if reference is None:
            reference = blobs
        h = hashlib.sha256(b"".join(blobs)).hexdigest()[:16]
        first = args[written[0]][:6].tolist() if written else []
        results.append({"target": target, "wave_width": w, "ms": round(ms, 2), "sha256": h,
                        "identical": blobs == reference, "preview": first,
                        "printed": buf.getvalue().splitlines()[:20], "error": None})
    return {"ok": True, "kernel": name, "grid": grid, "workgroup": wg, "n": n, "results": results, "error": None}
