"""Conformance cases for the kernel language's performance constructs (group ``perf``).

The kernels are written in the Python language (``aw.load2/load4/store2/store4`` on device and
local memory, ``aw.register_array``, ``aw.view``) and compiled; each case carries the
compiled ``.wave`` text, so every target runs exactly what the compiler emits for them. The
expected outputs are computed here with NumPy from the kernels' definitions, independently of
the compiler and the emulator.
"""

from __future__ import annotations

import functools

import numpy as np

import anywave as aw
from anywave.conformance.build import SENTINEL, rng_for
from anywave.conformance.case import Case

WG = 64
GROUPS = 2


@aw.kernel
def perf_vector_access(a: aw.In[aw.u32], o4: aw.Out[aw.u32], o2: aw.Out[aw.u32], ol: aw.Out[aw.u32]):
    t = aw.local_id(0)
    g = aw.global_id(0)
    tile = aw.local_array(aw.u32, 4 * WG)
    v = aw.load4(a, 4 * g)
    aw.store4(o4, 4 * g, (v[3], v[2], v[1], v[0]))
    w = aw.load2(a, 2 * g)
    aw.store2(o2, 2 * g, w[1] ^ 0xFFFFFFFF, w[0])
    aw.store4(tile, 4 * t, v)
    aw.barrier()
    u = aw.load4(tile, 4 * (WG - 1 - t))
    u2 = aw.load2(tile, 2 * t)
    aw.store4(ol, 4 * g, (u[0] + u2[0], u[1], u[2] + u2[1], u[3]))


@aw.kernel
def perf_register_array(a: aw.In[aw.i32], out: aw.Out[aw.i32], k: aw.i32):
    g = aw.global_id(0)
    acc = aw.register_array(aw.i32, (2, 3), fill=7)
    for kk in range(k):
        for i in aw.static_range(2):
            for j in aw.static_range(3):
                acc[i, j] = acc[i, j] * (i + 2) + a[kk * 6 + i * 3 + j] + g
    for i in aw.static_range(2):
        for j in aw.static_range(3):
            out[g * 6 + i * 3 + j] = acc[i, j]


@aw.kernel
def perf_view(a: aw.In[aw.f32], out: aw.Out[aw.f32], ev: aw.Out[aw.f32], rows: aw.i32, cols: aw.i32):
    x = aw.view(a, (rows, cols))
    y = aw.view(out, (cols, rows))
    evens = aw.view(a, (rows, cols // 2), strides=(cols, 2))
    e = aw.view(ev, (rows, cols // 2))
    c = aw.global_id(0)
    r = aw.global_id(1)
    if r < rows and c < cols:
        y[c, r] = x[r, c]
        if c < cols // 2:
            e[r, c] = evens[r, c] * 2.0


def _wave_text(kernel: aw.jit.KernelFunction) -> str:
    from anywave.asm.disassembler import disassemble

    text = disassemble(kernel.compile())
    body = text[text.index(".kernel"):]
    return "\n".join(line for line in body.splitlines() if not line.strip().startswith(".loc ")) + "\n"


@functools.lru_cache(maxsize=1)
def cases() -> list[Case]:
    out: list[Case] = []
    n = WG * GROUPS
    rng = rng_for("perf_vector_access")
    a = rng.integers(0, 1 << 32, 4 * n, dtype=np.uint64).astype(np.uint32)
    q = a.reshape(n, 4)
    o4 = q[:, ::-1].reshape(-1)
    pairs = a[:2 * n].reshape(n, 2)
    o2 = np.stack([pairs[:, 1] ^ np.uint32(0xFFFFFFFF), pairs[:, 0]], axis=1).reshape(-1)
    ol = np.empty((n, 4), np.uint32)
    for grp in range(GROUPS):
        tile = q[grp * WG:(grp + 1) * WG].reshape(-1)
        for t in range(WG):
            u = tile[4 * (WG - 1 - t):4 * (WG - t)]
            u2 = tile[2 * t:2 * t + 2]
            ol[grp * WG + t] = [(int(u[0]) + int(u2[0])) & 0xFFFFFFFF, u[1],
                                (int(u[2]) + int(u2[1])) & 0xFFFFFFFF, u[3]]
    sent = np.full(4 * n, SENTINEL[32], np.uint32)
    out.append(Case("perf_vector_access", "perf", _wave_text(perf_vector_access), (GROUPS, 1, 1), (WG, 1, 1),
                    {"a": a, "o4": sent.copy(), "o2": np.full(2 * n, SENTINEL[32], np.uint32), "ol": sent.copy()},
                    {"o4": o4, "o2": o2, "ol": ol.reshape(-1)},
                    description="aw.load4/store4/load2/store2 on device and local memory"))

    rng = rng_for("perf_register_array")
    k = 5
    ai = rng.integers(-1000, 1000, 6 * k, dtype=np.int64).astype(np.int32)
    acc = np.full((n, 2, 3), 7, np.int64)
    g = np.arange(n, dtype=np.int64)[:, None, None]
    for kk in range(k):
        acc = (acc * np.array([2, 3])[None, :, None] + ai[kk * 6:(kk + 1) * 6].reshape(1, 2, 3) + g) % (1 << 32)
    exp = acc.astype(np.uint64).astype(np.uint32).view(np.int32).reshape(-1)
    out.append(Case("perf_register_array", "perf", _wave_text(perf_register_array), (GROUPS, 1, 1), (WG, 1, 1),
                    {"a": ai, "out": np.zeros(6 * n, np.int32), "k": np.int32(k)}, {"out": exp},
                    description="aw.register_array indexed by aw.static_range variables in a run-time loop"))

    rng = rng_for("perf_view")
    rows, cols = 12, 18
    af = rng.standard_normal(rows * cols).astype(np.float32)
    x = af.reshape(rows, cols)
    out.append(Case("perf_view", "perf", _wave_text(perf_view), (3, 2, 1), (8, 8, 1),
                    {"a": af, "out": np.zeros(rows * cols, np.float32), "ev": np.zeros(rows * cols // 2, np.float32),
                     "rows": np.int32(rows), "cols": np.int32(cols)},
                    {"out": np.ascontiguousarray(x.T).reshape(-1),
                     "ev": (x[:, ::2] * np.float32(2)).astype(np.float32).reshape(-1)},
                    description="aw.view: 2-D indexing with run-time shapes and strides"))
    return out

