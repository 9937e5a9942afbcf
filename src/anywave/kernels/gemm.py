"""fp32 GEMM with register tiles: ``c = a @ b`` (+ bias, + ReLU or GELU), written in the kernel
language with the performance constructs (``aw.register_array``, ``aw.load4``/``aw.store4``).

Arithmetic order (the same as :func:`anywave.kernels.linalg.matmul` and
:func:`anywave.kernels.reference.matmul_f32`, so the bits do not depend on the tile shape, the
wave width or the target): every output starts at ``acc = +0.0`` and takes
``acc = fma(a[i, k], b[k, j], acc)`` for k = 0, 1, ..., K-1 in order; then ``acc + bias[j]``;
then ReLU (``acc if acc > 0 else +0.0``) or GELU (tanh form, the expression of
:func:`anywave.kernels.elementwise.gelu_kernel`).

Shape of the computation (the SIMT GEMM ladder, e.g. S. Boehm, "How to optimize a CUDA matmul
kernel for cuBLAS-like performance", 2022): a workgroup of ``(bm/8) * (bn/8)`` threads owns a
``bm x bn`` block of c; K advances in slices of ``bk``; each slice of a (stored transposed,
k-major, so a thread's 8 rows are two 128-bit local reads) and of b is copied to local memory
with 128-bit device loads; two local buffers alternate (double buffering: one barrier per
slice, the next slice's device loads issued before the FMAs of the current one). Each thread
keeps an 8 x 8 register tile: rows ``ty*4 + {0..3}`` and ``bm/2 + ty*4 + {0..3}``, columns
likewise with tx, so the 128-bit local reads of a wave are contiguous (no bank conflicts).

Requirements of the tiled kernel: M % bm == 0, N % bn == 0, K % bk == 0 (checked; the host
wrapper :func:`gemm` falls back to :func:`matmul`, ``anywave.kernels.matmul``, otherwise).
"""

from __future__ import annotations

from typing import Any

import numpy as np

import anywave as aw
from anywave.kernels._launch import KernelInputError, as_f32, launch_kw
from anywave.kernels.elementwise import gelu, gelu_tanh

EPILOGUES = ("none", "bias", "bias_relu", "bias_gelu")
#: (bm, bn, bk) tile configurations the autotuner may pick from; every one gives the same bits
CONFIGS = ({"bm": 128, "bn": 128, "bk": 8}, {"bm": 128, "bn": 128, "bk": 16},
           {"bm": 64, "bn": 128, "bk": 8}, {"bm": 128, "bn": 64, "bk": 8}, {"bm": 64, "bn": 64, "bk": 8})
DEFAULT = CONFIGS[0]
#: the fastest config measured on an H200 (bench/results/speed_2026-12-01.json: 0.92-0.93 of cuBLAS)
FAST = CONFIGS[1]


@aw.func
def _epilogue(v, bias, col, epilogue):
    r = v
    if epilogue != "none":
        r = r + bias[col]
    if epilogue == "bias_relu":
        r = r if r > 0.0 else 0.0
    return r


@aw.kernel
def gemm_f32_kernel(a: aw.In[aw.f32], b: aw.In[aw.f32], bias: aw.In[aw.f32], c: aw.Buffer[aw.f32],
                    m: aw.i32, n: aw.i32, k: aw.i32, *, bm: int = 128, bn: int = 128, bk: int = 8,
                    epilogue: str = "none"):
    assert bm == 64 or bm == 128, "gemm: bm must be 64 or 128"
    assert bn == 64 or bn == 128, "gemm: bn must be 64 or 128"
    assert bk == 8 or bk == 16, "gemm: bk must be 8 or 16"
    hm = bm // 2
    hn = bn // 2
    gx = bn // 8  # threads along n
    nt = (bm // 8) * gx
    # local layout: slice row kk of a (transposed) is rows 2kk, 2kk+1 of `at` (the two halves
    # of bm); buffer s of the double buffer starts at column s * (bk * bm) of row 0
    at = aw.local_array(aw.f32, (4 * bk, hm))
    bt = aw.local_array(aw.f32, (4 * bk, hn))
    t = aw.local_id(0)
    tx = t % gx
    ty = t // gx
    row0 = aw.workgroup_id(1) * bm
    col0 = aw.workgroup_id(0) * bn
    # device -> local copy: a slice of a is bm rows x bk columns, b is bk rows x bn columns
    a_per_row = bk // 4
    a_rows = nt // a_per_row  # rows of a one pass of 128-bit loads covers
    ar = t // a_per_row
    ak = (t % a_per_row) * 4
    b_per_row = bn // 4
    b_rows = nt // b_per_row
    br = t // b_per_row
    bc = (t % b_per_row) * 4
    a_src = (row0 + ar) * k + ak
    b_src = br * n + col0 + bc
    a_dst = (2 * ak + ar // hm) * hm + ar % hm
    b_dst = (2 * br + bc // hn) * hn + bc % hn
    acc = aw.register_array(aw.f32, (8, 8))
    ra = aw.register_array(aw.f32, (bm // a_rows, 4))
    rb = aw.register_array(aw.f32, (bk // b_rows, 4))
    # first slice
    for p in aw.static_range(bm // a_rows):
        v = aw.load4(a, a_src + p * a_rows * k)
        for q in aw.static_range(4):
            ra[p, q] = v[q]
    for p in aw.static_range(bk // b_rows):
        v = aw.load4(b, b_src + p * b_rows * n)
        for q in aw.static_range(4):
            rb[p, q] = v[q]
    for p in aw.static_range(bm // a_rows):
        for q in aw.static_range(4):
            # row p*a_rows of the pass lands a_rows columns further on
            at[2 * q, a_dst + p * a_rows] = ra[p, q]
    for p in aw.static_range(bk // b_rows):
        aw.store4(bt, (2 * p * b_rows, b_dst), rb[p, 0], rb[p, 1], rb[p, 2], rb[p, 3])
    aw.barrier()
    cur = 0
    for k0 in range(0, k, bk):
        # issue the next slice's device loads (the last iteration reloads its own slice: the
        # copy lands in the unused buffer, so no branch is needed)
        kn = min(k0 + bk, k - bk)
        for p in aw.static_range(bm // a_rows):
            v = aw.load4(a, a_src + p * a_rows * k + kn)
            for q in aw.static_range(4):
                ra[p, q] = v[q]
        for p in aw.static_range(bk // b_rows):
            v = aw.load4(b, b_src + (kn + p * b_rows) * n)
            for q in aw.static_range(4):
                rb[p, q] = v[q]
        ao = cur * (bk * bm) + ty * 4
        bo = cur * (bk * bn) + tx * 4
        for kk in aw.static_range(bk):
            av = aw.load4(at, (2 * kk, ao)) + aw.load4(at, (2 * kk + 1, ao))  # 8 values: a tuple
            bv = aw.load4(bt, (2 * kk, bo)) + aw.load4(bt, (2 * kk + 1, bo))
            for i in aw.static_range(8):
                for j in aw.static_range(8):
                    acc[i, j] = aw.fma(av[i], bv[j], acc[i, j])
        nxt = 1 - cur
        for p in aw.static_range(bm // a_rows):
            for q in aw.static_range(4):
                at[2 * q, nxt * (bk * bm) + a_dst + p * a_rows] = ra[p, q]
        for p in aw.static_range(bk // b_rows):
            aw.store4(bt, (2 * p * b_rows, nxt * (bk * bn) + b_dst), rb[p, 0], rb[p, 1], rb[p, 2], rb[p, 3])
        aw.barrier()
        cur = nxt
    for i in aw.static_range(8):
        r = row0 + ty * 4 + (i % 4) + (i // 4) * hm
        for h in aw.static_range(2):
            col = col0 + tx * 4 + h * hn
            vs = (_epilogue(acc[i, 4 * h], bias, col, epilogue),
                  _epilogue(acc[i, 4 * h + 1], bias, col + 1, epilogue),
                  _epilogue(acc[i, 4 * h + 2], bias, col + 2, epilogue),
                  _epilogue(acc[i, 4 * h + 3], bias, col + 3, epilogue))
            aw.store4(c, r * n + col, vs)
    if epilogue == "bias_gelu":
        # GELU of the thread's own 64 outputs, re-read from c (its own writes, in program
        # order): one copy of the tanh code instead of 64 unrolled ones
        for e in range(64):
            i = e // 8
            j = e % 8
            idx = (row0 + ty * 4 + i % 4 + (i // 4) * hm) * n + col0 + tx * 4 + j % 4 + (j // 4) * hn
            c[idx] = gelu_tanh(c[idx])

def fits(m: int, n: int, k: int, cfg: dict | None = None) -> bool:
    """Whether the tiled kernel applies to an (m, k) @ (k, n) product with tile config ``cfg``."""
    cfg = cfg or DEFAULT
    return m > 0 and n > 0 and k > 0 and m % cfg["bm"] == 0 and n % cfg["bn"] == 0 and k % cfg["bk"] == 0


def launch_shape(m: int, n: int, cfg: dict | None = None) -> tuple[tuple[int, int], int]:
    """(grid, workgroup) of :data:`gemm_f32_kernel` for an m x n output and tile config ``cfg``."""
    cfg = cfg or DEFAULT
    return (n // cfg["bn"], m // cfg["bm"]), (cfg["bm"] // 8) * (cfg["bn"] // 8)


def tuner(configs: list[dict] | tuple[dict, ...] = CONFIGS) -> Any:
    """An :class:`anywave.jit.autotune.Autotuner` of :data:`gemm_f32_kernel` over
    ``configs``, keyed by (m, n, k, epilogue)."""
    from anywave.jit.autotune import Autotuner

    return Autotuner(gemm_f32_kernel, configs, key=["m", "n", "k", "epilogue"],
                     grid=lambda cfg, a: launch_shape(a["m"], a["n"], cfg)[0],
                     workgroup=lambda cfg, a: launch_shape(a["m"], a["n"], cfg)[1])


def gemm(a: np.ndarray, b: np.ndarray, bias: np.ndarray | None = None, *, epilogue: str | None = None,
         config: dict | str | None = None, wave_width: int | None = None, target: str | None = None) -> np.ndarray:
    """``a @ b`` for float32 a: (M, K), b: (K, N), with an optional epilogue on ``bias`` (N,):
    ``"bias"``, ``"bias_relu"``, ``"bias_gelu"`` (default: ``"bias"`` when a bias is given, else
    ``"none"``). Returns float32 (M, N), bit-identical to
    :func:`anywave.kernels.reference.matmul_f32` (order: module docstring) for every config.

    ``config``: one of :data:`CONFIGS` (default :data:`DEFAULT`), or ``"auto"``: the autotuner
    times the configs that fit on the target once and remembers the choice (see
    :mod:`anywave.jit.autotune`).

    Shapes the tiled kernel does not cover (see :func:`fits`) run
    :func:`anywave.kernels.linalg.matmul` (same arithmetic order, same bits; no GELU there).

    Raises KernelInputError on mismatched shapes, an unknown epilogue, or an epilogue that
    needs a bias without one."""
    x, w = as_f32(a, "a", 2), as_f32(b, "b", 2)
    m, kk = x.shape
    if w.shape[0] != kk:
        raise KernelInputError(f"gemm: a is {x.shape} but b is {w.shape}; need b.shape[0] == {kk}")
    n = w.shape[1]
    ep = epilogue or ("none" if bias is None else "bias")
    if ep not in EPILOGUES:
        raise KernelInputError(f"gemm: epilogue {ep!r} is not one of {EPILOGUES}")
    if ep != "none" and bias is None:
        raise KernelInputError(f"gemm: epilogue {ep!r} needs a bias of shape ({n},)")
    bv = np.zeros(4, np.float32) if bias is None else as_f32(bias, "bias", 1)
    if bias is not None and bv.shape != (n,):
        raise KernelInputError(f"gemm: bias has shape {bv.shape}, expected ({n},)")
    if config == "auto":  # the autotuner's choice among the configs that fit, on this target
        cands = [c for c in CONFIGS if fits(m, n, kk, c)]
        config = tuner(cands).best_config(x, w, bv, np.empty((m, n), np.float32), m, n, kk, epilogue=ep,
                                          wave_width=wave_width, target=target) if cands else None
    cfg = config or DEFAULT
    if not fits(m, n, kk, cfg):
        if ep == "bias_gelu":
            return gelu(matmul(x, w, bv, wave_width=wave_width, target=target), wave_width=wave_width,
                        target=target)
        return matmul(x, w, None if ep == "none" else bv, relu=ep == "bias_relu", wave_width=wave_width,
                      target=target)
    out = np.empty((m, n), np.float32)
    grid, wg = launch_shape(m, n, cfg)
    gemm_f32_kernel(x, w, bv, out, m, n, kk, epilogue=ep, **cfg, grid=grid, workgroup=wg,
                    **launch_kw(wave_width, target))
    return out


def matmul(a: np.ndarray, b: np.ndarray, bias: np.ndarray | None = None, *, relu: bool = False,
           wave_width: int | None = None, target: str | None = None) -> np.ndarray:
    """``a @ b`` (+ ``bias`` per column, then ReLU if ``relu``) for float32 a: (M, K), b: (K, N),
    bias: (N,); returns float32 (M, N) (``anywave.kernels.matmul``). The register-tiled kernel
    (:data:`FAST`) where the shape fits it, else :func:`anywave.kernels.linalg.matmul`; both take
    the arithmetic order of the module docstring, so the bits are the same either way.

    Raises KernelInputError on mismatched shapes, or ``relu`` without ``bias``."""
    from anywave.kernels import linalg  # (here: a line above the kernels would move their debug locations)

    x, w, bv, epilogue = linalg.matmul_operands(a, b, bias, relu=relu)
    (m, k), n = x.shape, w.shape[1]
    if fits(m, n, k, FAST):
        return gemm(x, w, None if epilogue == "none" else bv, epilogue=epilogue, config=FAST,
                    wave_width=wave_width, target=target)
    return linalg.matmul(x, w, None if epilogue == "none" else bv, relu=relu, wave_width=wave_width,
                         target=target)
