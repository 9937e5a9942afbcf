"""``aw.print(fmt, *values)``: kernel-side printing, lowered to plain stores.

No new instruction: the compiler turns each call into ordinary WAVE code that appends one
*record* to a hidden device buffer (the kernel's last argument, ``_aw_print``, u32,
readwrite), and the host formats the records after the launch. So it works unchanged on
every backend and target, and the output is the same everywhere: records are sorted by
(workgroup, thread, program order) before formatting, whatever order the device wrote them.

Buffer layout (u32 words):

====== ===============================================================================
word   meaning
====== ===============================================================================
0      next free word (the host sets it to 2; every record adds its length atomically)
1      capacity in words (the buffer's length, set by the host)
2..    records, each ``[site + 1, workgroup linear id, thread linear id, value words...]``
====== ===============================================================================

``site`` indexes the kernel's :attr:`~anywave.binary.module.Kernel.prints` (format string and
value types); 32-bit values take one word (their bits), 64-bit values two (low, high), bools
are 0/1 (type ``pred``), f16/bf16 are widened exactly to f32. A record that does not fit is not written, but
the counter still advances, so the host knows how many records were lost and says so
(``[aw.print: output truncated ...]``). The workgroup linear id is
``(z * num_workgroups_y + y) * num_workgroups_x + x``.

The buffer holds :data:`DEFAULT_WORDS` words unless ``ANYWAVE_PRINT_BUFFER`` (bytes) says
otherwise.
"""

from __future__ import annotations

import ast
import os
import string
import sys
from collections.abc import Callable
from typing import Any, TextIO

import numpy as np

from anywave.binary.module import PRINT_ARG, Kernel, PrintFormat
from anywave.isa.types import Access, MemoryOrder, ScalarType, Scope
from anywave.isa.types import SpecialRegister as SR

from . import ir
from . import lower_threads as _threads
from . import types as ty
from .builder import Builder

#: default buffer size in words (4 MiB)
DEFAULT_WORDS = 1 << 20
HEADER_WORDS = 2
RECORD_HEADER = 3

_FIELD_TYPES = (ty.i32, ty.u32, ty.i64, ty.u64, ty.f32, ty.f64, ty.bool_)


def parse_format(fmt: str) -> int:
    """Number of replacement fields of ``fmt`` (``{}`` or ``{:spec}``; auto-numbered only).

    Raises:
        ValueError: malformed braces, or a field with a name or number.
    """
    n = 0
    for _text, name, _spec, _conv in string.Formatter().parse(fmt):
        if name is None:
            continue
        if name != "":
            raise ValueError(f"field {{{name}}}: aw.print takes automatic fields only ({{}} or {{:spec}})")
        n += 1
    return n


# ----------------------------------------------------------------------------- compiler side

def lower(bld: Builder, node: ast.Call, discard: bool = False) -> None:
    """Emit the IR of one ``aw.print`` call (``bld``: the kernel's :class:`~anywave.compiler.builder.Builder`)."""
    if node.keywords:
        raise bld.err(node, f"aw.print() takes no keyword arguments, got {node.keywords[0].arg!r}")
    if not node.args:
        raise bld.err(node, "aw.print(fmt, *values) needs a format string")
    mark = len(bld.body)
    fmt = bld.visit(node.args[0])
    bld.node = node
    if not isinstance(fmt, str):
        what = "a runtime value" if isinstance(fmt, (ir.Value, ir.PredUse)) else repr(fmt)
        raise bld.err(node.args[0], f"aw.print: the format must be a compile-time string, got {what}; "
                      "write aw.print(\"x={}\", x)")
    del bld.body[mark:]
    try:
        nfields = parse_format(fmt)
    except ValueError as e:
        raise bld.err(node.args[0], f"aw.print: bad format string {fmt!r}: {e}") from None
    values = [bld.visit(a) for a in node.args[1:]]
    bld.node = node
    if len(values) != nfields:
        raise bld.err(node, f"aw.print: the format {fmt!r} has {nfields} field(s) but {len(values)} value(s) "
                      "were given")
    words: list[Any] = []
    types: list[ScalarType] = []
    for a, v in zip(node.args[1:], values, strict=True):
        if isinstance(v, ir.PredUse):
            v = bld.pred_value(v)
        if isinstance(v, (bool, int, float, np.generic)):
            v = bld.const(v, bld.default_type(v, a), a)
        if not isinstance(v, ir.Value):
            raise bld.err(a, f"aw.print can print numbers and bools, not {type(v).__name__}")
        t = v.type
        if t is ty.pred:
            v, t = bld.pred_to_bool(v), ty.bool_
        if t in (ty.f16, ty.bf16):
            v, t = bld.cast(v, ty.f32, a), ty.f32
        if t not in _FIELD_TYPES:
            raise bld.err(a, f"aw.print cannot print a {t.name} value")
        if t is ty.bool_:
            words.append(bld.cast(v, ty.u32, a))
            types.append(ScalarType.PRED)
            continue
        types.append(t.scalar)
        if t.bits == 64:
            b = v if t is ty.u64 else bld.bitcast(v, ty.u64, a)
            words.append(bld.cast(b, ty.u32, a))
            words.append(bld.cast(bld.binop(ast.RShift, b, 32, a), ty.u32, a))
        else:
            words.append(v if t is ty.u32 else bld.bitcast(v, ty.u32, a))
    bld.node = node
    where = f"{bld.src.loc(node).file}:{bld.src.loc(node).line}"
    site = bld.add_print(PrintFormat(fmt, tuple(types), where))
    buf = bld.print_buffer_index()
    n = RECORD_HEADER + len(words)
    zero = bld.const(0, ty.u32)
    off = bld.new(ty.u32)
    bld.emit("atom.device.add.u32", off, ir.DevAddr(buf, zero), bld.const(n, ty.u32), Scope.DEVICE,
             MemoryOrder.RELAXED)
    cap = bld.new(ty.u32)
    bld.emit("ld.device.b32", cap, ir.DevAddr(buf, bld.const(4, ty.u32)))
    end = bld.alu("add", ty.u32, off, bld.const(n, ty.u32), node=node)
    fits = bld.compare("le", end, cap, node)
    cond = bld.as_pred(fits, node)
    n_if = ir.If(cond, loc=bld.src.loc(node))
    saved = bld.body
    bld.body = n_if.then
    wg = _workgroup_linear(bld, node)
    tid = _threads.special_register(bld, SR.THREAD_LINEAR_ID)
    record = [bld.const(site + 1, ty.u32), bld.bitcast(wg, ty.u32, node), bld.bitcast(tid, ty.u32, node)] + words
    byte = bld.alu("shl", ty.u32, off, bld.const(2, ty.u32), node=node)
    for k, w in enumerate(record):
        bld.emit("st.device.b32", ir.DevAddr(buf, _plus(bld, byte, 4 * k, node)), w)
    bld.body = saved
    bld.body.append(n_if)


def _plus(bld: Builder, v: Any, k: int, node: ast.AST) -> Any:
    return v if k == 0 else bld.alu("add", ty.u32, v, bld.const(k, ty.u32), node=node)


def _workgroup_linear(bld: Builder, node: ast.AST) -> Any:
    x, y, z = (_threads.special_register(bld, r) for r in (SR.WORKGROUP_ID_X, SR.WORKGROUP_ID_Y, SR.WORKGROUP_ID_Z))
    nx, ny = _threads.special_register(bld, SR.GRID_SIZE_X), _threads.special_register(bld, SR.GRID_SIZE_Y)
    zy = bld.alu("add", ty.i32, bld.alu("mul", ty.i32, z, ny, node=node), y, node=node)
    return bld.alu("add", ty.i32, bld.alu("mul", ty.i32, zy, nx, node=node), x, node=node)


PRINT_BUFFER_TYPE = ty.BufferType(ty.u32, Access.READWRITE)


# ----------------------------------------------------------------------------- host side

def buffer_words() -> int:
    """Words of the print buffer: ``ANYWAVE_PRINT_BUFFER`` (bytes, at least 64) or
    :data:`DEFAULT_WORDS`. Raises ValueError for a value that is not an integer >= 64."""
    raw = os.environ.get("ANYWAVE_PRINT_BUFFER")
    if not raw:
        return DEFAULT_WORDS
    try:
        nbytes = int(raw, 0)
    except ValueError:
        raise ValueError(f"ANYWAVE_PRINT_BUFFER={raw!r}: expected a size in bytes (an integer >= 64)") from None
    if nbytes < 64:
        raise ValueError(f"ANYWAVE_PRINT_BUFFER={raw!r}: expected a size in bytes (an integer >= 64)")
    return nbytes // 4


def new_buffer(words: int | None = None) -> np.ndarray:
    """A fresh print buffer (u32, header set)."""
    n = buffer_words() if words is None else int(words)
    buf = np.zeros(n, np.uint32)
    buf[0] = HEADER_WORDS
    buf[1] = n
    return buf


def has_prints(kernel: Kernel) -> bool:
    return bool(kernel.prints) and bool(kernel.args) and kernel.args[-1].name == PRINT_ARG


def _decode(t: ScalarType, words: list[int]) -> Any:
    if t is ScalarType.PRED:
        return bool(words[0])
    if t in (ScalarType.I32, ScalarType.U32, ScalarType.F32):
        raw = np.array(words[:1], np.uint32)
        return raw.view({ScalarType.I32: np.int32, ScalarType.U32: np.uint32, ScalarType.F32: np.float32}[t])[0]
    raw = np.array([words[0] | (words[1] << 32)], np.uint64)
    return raw.view({ScalarType.I64: np.int64, ScalarType.U64: np.uint64, ScalarType.F64: np.float64}[t])[0]


def _py(v: Any) -> Any:
    if isinstance(v, np.float32):
        return v  # str() gives the shortest repr of the f32 value ("0.1", not 0.10000000149011612)
    if isinstance(v, np.floating):
        return float(v)
    if isinstance(v, np.integer):
        return int(v)
    return v


def _format(fmt: str, vals: list[Any]) -> str:
    """``fmt.format(*vals)``, except that an f32 value in a plain field (``{}``, ``{!s}``,
    ``{!r}``) prints as its shortest repr ("0.1"), as NumPy's ``str`` does."""
    out: list[str] = []
    k = 0
    for literal, name, spec, conv in string.Formatter().parse(fmt):
        out.append(literal)
        if name is None:
            continue
        v = vals[k]
        k += 1
        if isinstance(v, np.float32) and (conv or not spec):
            v = str(v)
        elif conv:
            v = {"r": repr, "s": str, "a": ascii}[conv](v)
        out.append(format(v, spec or ""))
    return "".join(out)


def format_records(kernel: Kernel, buf: np.ndarray) -> tuple[list[str], str]:
    """(lines in thread order, truncation note or "") from a print buffer after a launch.

    Lines are ordered by (workgroup linear id, thread linear id, program order); each is the
    call's format applied to its values (Python ``int``/``float``/``bool``; f32 values stay
    ``numpy.float32`` so that ``{}`` prints their shortest repr)."""
    words = buf.tolist()
    used, cap = int(words[0]), int(words[1])
    recs: list[tuple[int, int, int, str]] = []
    pos = HEADER_WORDS
    limit = min(used, cap)
    sites = kernel.prints
    while pos + RECORD_HEADER <= limit:
        head = int(words[pos])
        if not 1 <= head <= len(sites):
            break  # an unwritten (lost) record: the rest was not stored either
        pf = sites[head - 1]
        nwords = sum(2 if ScalarType(t).bits == 64 else 1 for t in pf.types)
        if pos + RECORD_HEADER + nwords > limit:
            break
        vals: list[Any] = []
        p = pos + RECORD_HEADER
        for t in pf.types:
            t = ScalarType(t)
            w = 2 if t.bits == 64 else 1
            vals.append(_py(_decode(t, words[p:p + w])))
            p += w
        try:
            text = _format(pf.format, vals)
        except (ValueError, TypeError, IndexError) as e:
            text = f"[aw.print at {pf.where}: cannot format {vals!r} with {pf.format!r}: {e}]"
        recs.append((int(words[pos + 1]), int(words[pos + 2]), pos, text))
        pos = p
    recs.sort()
    note = ""
    if used > cap:
        note = (f"[aw.print: output truncated: the kernel wrote {used - HEADER_WORDS} words of records, the "
                f"buffer holds {cap - HEADER_WORDS}; {len(recs)} record(s) shown. Raise the limit with "
                f"ANYWAVE_PRINT_BUFFER=<bytes> (now {cap * 4})]")
    return [r[3] for r in recs], note


def flush(kernel: Kernel, buf: np.ndarray, out: TextIO | None = None) -> list[str]:
    """Write the formatted records (and the truncation note, if any) to ``out`` (default
    ``sys.stdout``, looked up at call time); returns the lines written."""
    lines, note = format_records(kernel, buf)
    stream = sys.stdout if out is None else out
    for line in lines:
        stream.write(line + "\n")
    if note:
        stream.write(note + "\n")
    stream.flush()
    return lines + ([note] if note else [])


def launch_with_prints(kernel: Kernel, values: list[Any], launch: Callable[[list[Any]], Any]) -> Any:
    """Append a fresh print buffer to ``values`` when ``kernel`` prints, run ``launch(values)``,
    then flush the records."""
    if not has_prints(kernel):
        return launch(values)
    buf = new_buffer()
    result = launch([*values, buf])
    flush(kernel, buf)
    return result
