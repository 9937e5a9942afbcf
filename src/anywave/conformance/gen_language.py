"""Cases for the kernel-language idioms of issue 28 (part 2), written in the kernel language and
compiled by ``@aw.kernel``, so every target runs what the compiler emits for them:

* **local memory sized at launch** (``aw.local_array(T, aw.dynamic)``, the launch's
  ``local_bytes``): a kernel is compiled once per size, so each size is a kernel of its own with
  that ``.local_memory`` (256 bytes, and 32,768: the spec's ``min_local_memory``, §11.3); two
  views (f32 and u32) of the same bytes. Expected: the blocks reversed (NumPy);
* **bool buffers** (``aw.bool_``: one byte per element, ``u8`` in the ABI): a non-zero byte
  reads as true, stores write 0 or 1. Expected: NumPy on the bytes;
* **aw.finfo / aw.iinfo in a kernel**: the limits stored, and used in a comparison and a
  saturation. Expected: NumPy's ``finfo``/``iinfo``;
* **dtype-generic kernels** (a type as a compile-time parameter): one kernel source specialised
  for f32 and i32 (group ``language``) and f16 (``language.f16``): ``x*x + x`` and the maximum
  from ``-finfo(T).max`` / ``iinfo(T).min``. Expected: :mod:`refsem`'s rounding for floats,
  Python ints (wrapped) for ints;
* **aw.pow** (docs/spec.md §8.18): every special case of the section and ordinary values.
  Expected: :func:`refsem.f32_pow`, a transcription of the section's text on exact arithmetic;
* **compile-time ints typed like literals**: a ``u32`` value meets ints from ``aw.static_range``,
  a top-level constant and an ``aw.Const[int]`` parameter in ``<``, ``>>``, ``-`` (wrapping) and
  ``//``, with values whose high bit is set, where i32 typing would give other results.
  Expected: Python ints.

As in :mod:`gen_compiled`, a case's kernel text is the compiler's output disassembled, so the
suite stays ``.wave`` data.
"""

# no ``from __future__ import annotations``: the kernels below are annotated with closure
# variables and the type parameter T, which must be evaluated where the kernel is defined
import functools
import typing
from typing import Any

import numpy as np

from anywave.conformance import refsem as R
from anywave.conformance.build import SENTINEL, launch_1d, rng_for
from anywave.conformance.case import EXACT, Case
from anywave.conformance.gen_compiled import _source

GROUP = "language"
GROUP_F16 = "language.f16"

#: the type parameter of the generic kernel (matched to its compile-time parameter ``T``)
T = typing.TypeVar("T")


# ----------------------------------------------------------------------------- local memory sized at launch

def _dynamic_kernel(name: str) -> Any:
    import anywave as aw

    def dyn(x: aw.In[aw.f32], bits: aw.Out[aw.u32]) -> None:
        s = aw.local_array(aw.f32, aw.dynamic)
        u = aw.local_array(aw.u32, aw.dynamic)
        n = s.shape[0]
        t = aw.local_id(0)
        base = aw.workgroup_id(0) * n
        for j in range(t, n, 64):
            s[j] = x[base + j]
        aw.barrier()
        for j in range(t, n, 64):
            bits[base + j] = u[n - 1 - j]

    return aw.kernel(dyn, name=name)


def dynamic_local_cases() -> list[Case]:
    out: list[Case] = []
    for nbytes, grid in ((256, 3), (32768, 1)):
        name = f"lang_local_bytes_{nbytes}"
        n = nbytes // 4
        x = rng_for(name).standard_normal(grid * n).astype(np.float32)
        src, caps = _source(_dynamic_kernel(name), local_bytes=nbytes)
        want = x.reshape(grid, n)[:, ::-1].reshape(-1).view(np.uint32).copy()
        out.append(Case(name, GROUP, src, (grid, 1, 1), (64, 1, 1),
                        {"x": x, "bits": np.full(grid * n, SENTINEL[32], np.uint32)}, {"bits": want}, EXACT,
                        requires=caps, description=f"aw.local_array(f32 and u32, aw.dynamic) with local_bytes={nbytes}:"
                        " each workgroup's block reversed through local memory"))
    return out


# ----------------------------------------------------------------------------- bool buffers

def _bool_kernel(name: str) -> Any:
    import anywave as aw

    def flags(x: aw.In[aw.f32], m: aw.In[aw.bool_], big: aw.Out[aw.bool_], inv: aw.Out[aw.bool_],
              both: aw.Out[aw.bool_], y: aw.Buffer[aw.f32], n: aw.i32) -> None:
        i = aw.global_id(0)
        if i < n:
            b = x[i] > 0.5
            big[i] = b
            inv[i] = not m[i]
            both[i] = b and m[i]
            if m[i]:
                y[i] = x[i]

    return aw.kernel(flags, name=name)


def bool_cases() -> list[Case]:
    name = "lang_bool_buffers"
    n = 150
    rng = rng_for(name)
    x = rng.random(n).astype(np.float32)
    m = (rng.random(n) < 0.5).astype(np.uint8)
    nz = np.flatnonzero(m)
    m[nz[::3]] = rng.choice(np.array([2, 7, 0x80, 0xFF], np.uint8), len(nz[::3]))  # any non-zero byte is true
    y0 = np.full(n, -1.0, np.float32)
    big = (x > 0.5).astype(np.uint8)
    t = (m != 0).astype(np.uint8)
    want = {"big": big, "inv": 1 - t, "both": big & t, "y": np.where(t == 1, x, y0).astype(np.float32)}
    src, caps = _source(_bool_kernel(name))
    sentinel = np.full(n, SENTINEL[8], np.uint8)
    grid, wg = launch_1d(n)
    args = {"x": x, "m": m, "big": sentinel, "inv": sentinel.copy(), "both": sentinel.copy(), "y": y0, "n": np.int32(n)}
    return [Case(name, GROUP, src, grid, wg, args, want, EXACT, requires=caps,
                 description="aw.bool_ buffers (one byte): non-zero bytes read as true, stores write 0 or 1")]


# ----------------------------------------------------------------------------- finfo / iinfo

def _limits_kernel(name: str) -> Any:
    import anywave as aw

    def limits(x: aw.In[aw.f32], v: aw.In[aw.i32], flim: aw.Out[aw.f32], ilim: aw.Out[aw.i32],
               ulim: aw.Out[aw.u32], cls: aw.Out[aw.u32], sat: aw.Out[aw.i32], n: aw.i32) -> None:
        i = aw.global_id(0)
        if i == 0:
            flim[0] = aw.finfo(aw.f32).max
            flim[1] = aw.finfo(aw.f32).min
            flim[2] = aw.finfo(aw.f32).eps
            flim[3] = aw.finfo(aw.f32).epsneg
            flim[4] = aw.finfo(aw.f32).tiny
            flim[5] = aw.finfo(aw.f32).smallest_subnormal
            ilim[0] = aw.iinfo(aw.i32).min
            ilim[1] = aw.iinfo(aw.i32).max
            ilim[2] = aw.i32(aw.iinfo(aw.i16).min)
            ilim[3] = aw.i32(aw.iinfo(aw.i8).max)
            ulim[0] = aw.iinfo(aw.u32).max
            ulim[1] = aw.u32(aw.iinfo(aw.u16).max)
            ulim[2] = aw.u32(aw.iinfo(aw.u8).max)
        if i < n:
            a = abs(x[i])
            c = aw.u32(0)
            if a <= aw.finfo(aw.f32).max:
                c = c + 1
            if a < aw.finfo(aw.f32).tiny:
                c = c + 2
            if x[i] == 1.0 + aw.finfo(aw.f32).eps:
                c = c + 4
            cls[i] = c
            sat[i] = min(max(v[i], aw.i32(aw.iinfo(aw.i16).min)), aw.i32(aw.iinfo(aw.i16).max))

    return aw.kernel(limits, name=name)


def limits_cases() -> list[Case]:
    name = "lang_finfo_iinfo"
    fi = np.finfo(np.float32)
    specials = [0.0, -0.0, 1.0, float(1 + fi.eps), float(1 + 2 * fi.eps), float(fi.max), float(-fi.max), np.inf,
                -np.inf, np.nan, float(fi.tiny), float(-fi.tiny), float(fi.smallest_subnormal),
                float(np.nextafter(fi.tiny, np.float32(0))), 3.5, -1e-40]
    x = np.array(specials, np.float32)
    ints = [0, 1, -1, 32767, 32768, -32768, -32769, 2**31 - 1, -(2**31), 70000, -70000, 12345, -12345,
            100000, -100000, 5]
    v = np.array(ints, np.int32)
    n = len(specials)
    ax = np.abs(x.astype(np.float64))
    cls = ((ax <= fi.max).astype(np.uint32) + 2 * (ax < fi.tiny) + 4 * (x == np.float32(1 + fi.eps))).astype(np.uint32)
    i16, i8, u16, u8 = np.iinfo(np.int16), np.iinfo(np.int8), np.iinfo(np.uint16), np.iinfo(np.uint8)
    want = {
        "flim": np.array([fi.max, fi.min, fi.eps, fi.epsneg, fi.tiny, fi.smallest_subnormal], np.float32),
        "ilim": np.array([np.iinfo(np.int32).min, np.iinfo(np.int32).max, i16.min, i8.max], np.int32),
        "ulim": np.array([np.iinfo(np.uint32).max, u16.max, u8.max], np.uint32),
        "cls": cls,
        "sat": np.clip(v.astype(np.int64), i16.min, i16.max).astype(np.int32),
    }
    args = {"x": x, "v": v, "flim": np.full(6, SENTINEL[32], np.uint32).view(np.float32),
            "ilim": np.full(4, SENTINEL[32], np.uint32).view(np.int32), "ulim": np.full(3, SENTINEL[32], np.uint32),
            "cls": np.full(n, SENTINEL[32], np.uint32), "sat": np.full(n, SENTINEL[32], np.uint32).view(np.int32),
            "n": np.int32(n)}
    src, caps = _source(_limits_kernel(name))
    return [Case(name, GROUP, src, (1, 1, 1), (32, 1, 1), args, want, EXACT, requires=caps,
                 description="aw.finfo / aw.iinfo in a kernel: the limits stored, a classification and a saturation")]


# ----------------------------------------------------------------------------- dtype-generic kernels

def _generic_kernel(name: str) -> Any:
    import anywave as aw

    def generic(x: aw.In[T], y: aw.Out[T], top: aw.Out[T], n: aw.i32, T: aw.constexpr) -> None:  # type: ignore[valid-type]
        i = aw.global_id(0)
        if i < n:
            y[i] = x[i] * x[i] + x[i]
        if i == 0:
            if T.is_float:
                best = -aw.finfo(T).max
            else:
                best = aw.iinfo(T).min
            for j in range(n):
                best = max(best, x[j])
            top[0] = best

    return aw.kernel(generic, name=name)


def generic_cases() -> list[Case]:
    import anywave as aw

    out: list[Case] = []
    n = 80
    for tname, t, group in (("f32", aw.f32, GROUP), ("i32", aw.i32, GROUP), ("f16", aw.f16, GROUP_F16)):
        name = f"lang_generic_{tname}"
        rng = rng_for(name)
        if tname == "i32":
            x = rng.integers(-(2**31), 2**31, n, dtype=np.int64).astype(np.int32)
            x[:4] = [46341, -46341, 2**31 - 1, -(2**31)]  # products that wrap
            y = np.array([(int(v) * int(v) + int(v) + 2**31) % 2**32 - 2**31 for v in x], np.int64).astype(np.int32)
            top = np.array([x.max()], np.int32)
            sentinel = np.full(n, SENTINEL[32], np.uint32).view(np.int32)
        else:
            fmt, dt = (R.F32, np.float32) if tname == "f32" else (R.F16, np.float16)
            x = (rng.standard_normal(n) * 40).astype(dt)
            if tname == "f16":
                x[:3] = [250.0, -300.0, 0.0]  # x*x overflows f16 to inf at 256 and beyond
            ud = np.uint32 if tname == "f32" else np.uint16
            xb = [int(b) for b in x.view(ud)]
            y = np.array([R.f_add(fmt, R.f_mul(fmt, b, b), b) for b in xb], ud).view(dt)
            top = np.array([max(float(v) for v in x)], dt)
            sentinel = np.full(n, SENTINEL[fmt.bits], ud).view(dt)
        src, caps = _source(_generic_kernel(name), T=t)
        out.append(Case(name, group, src, (2, 1, 1), (64, 1, 1),
                        {"x": x, "y": sentinel, "top": sentinel[:1].copy(), "n": np.int32(n)},
                        {"y": y, "top": top}, EXACT, requires=caps,
                        description=f"a dtype-generic kernel specialised for T = {tname}: x*x + x (two roundings or "
                        "wrapping) and the maximum from -finfo(T).max / iinfo(T).min"))
    return out


# ----------------------------------------------------------------------------- aw.pow

#: x and y values for every special case of spec §8.18 (zeros, ±1, ±inf, NaNs with payloads,
#: odd and even integers, non-integers, 2^24 - 1 (odd) and 2^24 (even), subnormals, extremes)
POW_X = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, np.inf, -np.inf, 1e-45, -1e-45, 3e38, -3e38,
         0.99999994, 1.0000001]
POW_Y = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, 2.5, -2.5, np.inf, -np.inf, 16777215.0,
         -16777215.0, 16777216.0, 1e-45, 3e38, -3e38]
#: NaN bit patterns (quiet, signalling, negative with a payload): every one gives the canonical NaN
POW_NANS = [0x7FC00000, 0x7F800001, 0xFFC00123]


def _pow_kernel(name: str) -> Any:
    import anywave as aw

    def pw(x: aw.In[aw.f32], y: aw.In[aw.f32], out: aw.Out[aw.f32], n: aw.i32) -> None:
        i = aw.global_id(0)
        if i < n:
            out[i] = aw.pow(x[i], y[i])

    return aw.kernel(pw, name=name)


def _pow_arguments(name: str) -> tuple[np.ndarray, np.ndarray]:
    """The special pairs, NaN with every y of a few and every x with NaN, and ordinary values:
    x across the range with y keeping x^y finite (some results subnormal), negative x with
    integer y, x near 1 with large y."""
    f = np.float32
    xb = [int(v) for v in np.array(POW_X, f).view(np.uint32)]
    yb = [int(v) for v in np.array(POW_Y, f).view(np.uint32)]
    pairs = [(a, b) for a in xb for b in yb]
    pairs += [(nan, b) for nan in POW_NANS for b in yb[:4]] + [(a, nan) for nan in POW_NANS for a in xb[:6]]
    rng = rng_for(name)
    k = 64
    x = np.exp(rng.uniform(np.log(1e-40), np.log(3e38), k))
    y = rng.uniform(-149, 127, k) / np.log2(x)
    y[:16] = rng.uniform(-6, 6, 16)
    x[16:32] = -np.clip(x[16:32], 1e-3, 1e3)
    y[16:32] = np.rint(rng.uniform(-30, 30, 16))
    x[32:40] = 1 + rng.uniform(-1e-3, 1e-3, 8)
    y[32:40] = rng.uniform(-5e4, 5e4, 8)
    xo, yo = x.astype(f).view(np.uint32), y.astype(f).view(np.uint32)
    pairs += list(zip((int(v) for v in xo), (int(v) for v in yo), strict=True))
    return np.array([a for a, _ in pairs], np.uint32), np.array([b for _, b in pairs], np.uint32)


@functools.cache
def _pow_expected(xs: bytes, ys: bytes) -> np.ndarray:
    x, y = np.frombuffer(xs, np.uint32), np.frombuffer(ys, np.uint32)
    return np.array([R.f32_pow(int(a), int(b)) for a, b in zip(x, y, strict=True)], np.uint32)


def pow_cases() -> list[Case]:
    name = "lang_pow"
    xb, yb = _pow_arguments(name)
    n = len(xb)
    src, caps = _source(_pow_kernel(name))
    grid, wg = launch_1d(n)
    xs, ys = xb.tobytes(), yb.tobytes()

    def expected(w: int) -> dict[str, np.ndarray]:  # noqa: ARG001 - the same at every W
        # computed on first use (about a second of exact arithmetic), not when the suite loads
        return {"out": _pow_expected(xs, ys).view(np.float32)}

    return [Case(name, GROUP, src, grid, wg,
                 {"x": xb.view(np.float32), "y": yb.view(np.float32),
                  "out": np.full(n, SENTINEL[32], np.uint32).view(np.float32), "n": np.int32(n)},
                 expected, EXACT, requires=caps,
                 description="aw.pow (spec §8.18): every special case and ordinary values, bit for bit")]


# ----------------------------------------------------------------------------- compile-time ints

#: a top-level compile-time int that fits u32 but not i32 (a literal of that value is u32)
_HIGH = 3_000_000_000


def _ctint_kernel(name: str) -> Any:
    import anywave as aw

    def ctints(x: aw.In[aw.u32], lt: aw.Out[aw.u32], shr: aw.Out[aw.u32], wrap: aw.Out[aw.u32],
               div: aw.Out[aw.u32], *, d: aw.Const[int]) -> None:
        # no bounds guard: a name assigned in an aw.static_range body is a compile-time int only
        # where the loop is at the top level or in another such body (not inside a run-time if)
        i = aw.global_id(0)
        v = x[i]
        high = _HIGH
        c = aw.u32(0)
        s = aw.u32(0)
        for k in aw.static_range(4):
            off = 1 << (8 * k)
            if v < off:
                c = c + 1
            s = s ^ (v >> (4 * k + 1))
        if v >= high:
            c = c + 16
        lt[i] = c
        shr[i] = s
        wrap[i] = (v - d) // 3
        div[i] = v // d + v % d

    return aw.kernel(ctints, name=name)


def ctint_cases() -> list[Case]:
    name = "lang_ct_ints"
    d = 7
    rng = rng_for(name)
    vals = [0, 1, 5, 6, 7, 255, 256, 65535, 65536, 2**24 - 1, 2**24, 2**31 - 1, 2**31, 2**31 + 1, _HIGH - 1, _HIGH,
            0xFFFFFFF0, 0xFFFFFFFF] + [int(v) for v in rng.integers(0, 2**32, 110, dtype=np.uint64)]
    n = len(vals)
    m = 0xFFFFFFFF
    lt, shr, wrap, div = [], [], [], []
    for v in vals:  # unsigned 32-bit semantics throughout (Python ints, wrapped)
        lt.append(sum(v < (1 << (8 * k)) for k in range(4)) + 16 * (v >= _HIGH))
        s = 0
        for k in range(4):
            s ^= v >> (4 * k + 1)
        shr.append(s)
        wrap.append(((v - d) & m) // 3)
        div.append((v // d + v % d) & m)
    src, caps = _source(_ctint_kernel(name), d=d)
    grid, wg = launch_1d(n)  # n = 128: every thread has a value
    args = {"x": np.array(vals, np.uint32)}
    args.update({k: np.full(n, SENTINEL[32], np.uint32) for k in ("lt", "shr", "wrap", "div")})
    want = {k: np.array(v, np.uint32) for k, v in (("lt", lt), ("shr", shr), ("wrap", wrap), ("div", div))}
    return [Case(name, GROUP, src, grid, wg, args, want, EXACT, requires=caps,
                 description="compile-time ints (aw.static_range, a top-level constant past i32, aw.Const[int]) "
                 "take a u32 operand's type: unsigned <, >>, wrapping - and //")]


def cases() -> list[Case]:
    """Every case of this module."""
    return (dynamic_local_cases() + bool_cases() + limits_cases() + generic_cases() + pow_cases()
            + ctint_cases())
