"""The anywave CUDA suite (issue 28): twelve CUDA kernel files of our own writing, in the style
of public GPU benchmark suites, each described here by its inputs, the sequence of launches a
host program makes, and an independent reference (NumPy, with C's float32/float64 steps).

The launches go through a *runner*, so the same description drives the tests (anywave on the
emulator and the CPU targets, tests/test_cuda_suite.py) and the H200 comparison with NVRTC
(bench/bench_cuda_suite.py). A runner has:

* ``kernel(file, name)`` -> a kernel handle (``name`` may be a template instance);
* ``launch(k, grid, block, *args, shared=0, **constants)``: ``args`` device arrays (from
  ``array``) or Python numbers in the CUDA signature's order, ``constants`` the
  ``__constant__`` variables by name, ``shared`` the bytes of ``extern __shared__`` memory;
* ``array(a)`` -> a device array holding NumPy array ``a``; ``numpy(d)`` -> its NumPy copy;
  ``copy_in(d, a)`` writes NumPy array ``a`` into device array ``d``.

A case runs in two phases: ``prepare(runner, inputs)`` makes the kernels and the device arrays
(a *state*; not timed), ``run(runner, state)`` makes the launches of the host program (timed by
the bench) and returns the outputs by name (device arrays). ``reference(inputs, w)`` gives the
expected NumPy arrays for wave width ``w`` (only kernels using warp built-ins depend on it:
their CUDA warp is ``min(w, 32)`` lanes, docs/guide/cuda.md).
``size`` selects the problem: ``"test"`` (small: the emulator runs it in seconds) or
``"bench"`` (the H200 comparison).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
f32 = np.float32


class HostArrays:
    """A runner's arrays in host memory: NumPy arrays, updated in place by the launches."""

    def array(self, a: np.ndarray) -> np.ndarray:
        return np.array(a, copy=True)

    def numpy(self, d: np.ndarray) -> np.ndarray:
        return d

    def copy_in(self, d: np.ndarray, a: np.ndarray) -> None:
        d[...] = a


@dataclass
class Case:
    name: str
    file: str
    make: Callable[[np.random.Generator, str], dict[str, Any]]
    prepare: Callable[[Any, dict[str, Any]], dict[str, Any]]
    run: Callable[[Any, dict[str, Any]], dict[str, Any]]
    reference: Callable[[dict[str, Any], int], dict[str, np.ndarray]]
    #: uses warp built-ins: results depend on the wave width (compare at equal W)
    w_dependent: bool = False

    @property
    def path(self) -> Path:
        return HERE / self.file

    def execute(self, runner: Any, inputs: dict[str, Any]) -> dict[str, Any]:
        """prepare, then run: the outputs (device arrays) by name."""
        return self.run(runner, self.prepare(runner, inputs))


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


# ----------------------------------------------------------------------------- stencil

def _stencil_make(rng: np.random.Generator, size: str) -> dict[str, Any]:
    nx, ny = (72, 40) if size == "test" else (4096, 4096)
    return {"grid": rng.standard_normal((ny, nx)).astype(f32), "iters": 3 if size == "test" else 10}


def _stencil_prep(r: Any, d: dict[str, Any]) -> dict[str, Any]:
    ny, nx = d["grid"].shape
    return {"k": r.kernel("stencil2d.cu", "jacobi2d"), "a": r.array(d["grid"]),
            "b": r.array(np.zeros_like(d["grid"])), "nx": nx, "ny": ny, "iters": d["iters"]}


def _stencil_run(r: Any, s: dict[str, Any]) -> dict[str, Any]:
    a, b, nx, ny = s["a"], s["b"], s["nx"], s["ny"]
    for _ in range(s["iters"]):
        r.launch(s["k"], (_ceil(nx, 16), _ceil(ny, 16)), (16, 16), b, a, nx, ny)
        a, b = b, a
    return {"grid": a}


def _stencil_ref(d: dict[str, Any], w: int) -> dict[str, np.ndarray]:
    g = d["grid"].copy()
    for _ in range(d["iters"]):
        n = g.copy()
        side = ((g[1:-1, :-2] + g[1:-1, 2:]) + g[:-2, 1:-1]) + g[2:, 1:-1]  # float32 sums, C's order
        n[1:-1, 1:-1] = (0.5 * g[1:-1, 1:-1].astype(np.float64) + 0.125 * side.astype(np.float64)).astype(f32)
        g = n
    return {"grid": g}


# ----------------------------------------------------------------------------- wavefront (NW)

def _nw_make(rng: np.random.Generator, size: str) -> dict[str, Any]:
    n = 48 if size == "test" else 2048
    return {"sim": rng.integers(-4, 6, (n, n)).astype(np.int32), "penalty": 3}


def _nw_prep(r: Any, d: dict[str, Any]) -> dict[str, Any]:
    n, pen = d["sim"].shape[0], d["penalty"]
    score = np.zeros((n + 1, n + 1), np.int32)
    score[0, :] = -pen * np.arange(n + 1)
    score[:, 0] = -pen * np.arange(n + 1)
    return {"k": r.kernel("nw.cu", "nw_diagonal"), "score": r.array(score), "sim": r.array(d["sim"]), "n": n,
            "pen": pen}


def _nw_run(r: Any, s: dict[str, Any]) -> dict[str, Any]:
    n = s["n"]
    for diag in range(2, 2 * n + 1):
        cells = min(n, diag - 1) - max(1, diag - n) + 1
        r.launch(s["k"], _ceil(cells, 64), 64, s["score"], s["sim"], n, diag, s["pen"])
    return {"score": s["score"]}


def _nw_ref(d: dict[str, Any], w: int) -> dict[str, np.ndarray]:
    sim, pen = d["sim"].astype(np.int64), d["penalty"]
    n = sim.shape[0]
    sc = np.zeros((n + 1, n + 1), np.int64)
    sc[0, :] = -pen * np.arange(n + 1)
    sc[:, 0] = -pen * np.arange(n + 1)
    for i in range(1, n + 1):
        for j in range(1, n + 1):
            sc[i, j] = max(sc[i - 1, j] - pen, sc[i, j - 1] - pen, sc[i - 1, j - 1] + sim[i - 1, j - 1])
    return {"score": sc.astype(np.int32)}


# ----------------------------------------------------------------------------- BFS

def _bfs_make(rng: np.random.Generator, size: str) -> dict[str, Any]:
    n = 600 if size == "test" else 1 << 20
    deg = rng.integers(1, 6, n)
    edges = rng.integers(0, n, int(deg.sum())).astype(np.int32)
    begin = np.concatenate([[0], np.cumsum(deg)[:-1]]).astype(np.int32)
    return {"begin": begin, "degree": deg.astype(np.int32), "edges": edges, "source": 0}


def _bfs_prep(r: Any, d: dict[str, Any]) -> dict[str, Any]:
    n = d["begin"].size
    nodes = np.zeros(n, [("begin", np.int32), ("degree", np.int32)])
    nodes["begin"], nodes["degree"] = d["begin"], d["degree"]
    frontier = np.zeros(n, bool)
    visited = np.zeros(n, bool)
    cost = np.full(n, -1, np.int32)
    frontier[d["source"]] = visited[d["source"]] = True
    cost[d["source"]] = 0
    return {"expand": r.kernel("bfs.cu", "bfs_expand"), "commit": r.kernel("bfs.cu", "bfs_commit"), "n": n,
            "nodes": r.array(nodes), "edges": r.array(d["edges"]), "frontier": r.array(frontier),
            "next": r.array(np.zeros(n, bool)), "visited": r.array(visited), "cost": r.array(cost),
            "changed": r.array(np.zeros(1, np.int32))}


def _bfs_run(r: Any, s: dict[str, Any]) -> dict[str, Any]:
    n, grid = s["n"], _ceil(s["n"], 256)
    zero = np.zeros(1, np.int32)
    while True:
        r.copy_in(s["changed"], zero)
        r.launch(s["expand"], grid, 256, s["nodes"], s["edges"], s["frontier"], s["next"], s["visited"], s["cost"], n)
        r.launch(s["commit"], grid, 256, s["frontier"], s["next"], s["visited"], s["changed"], n)
        if r.numpy(s["changed"])[0] == 0:
            break
    return {"cost": s["cost"]}


def _bfs_ref(d: dict[str, Any], w: int) -> dict[str, np.ndarray]:
    n = d["begin"].size
    cost = np.full(n, -1, np.int32)
    cost[d["source"]] = 0
    level = [d["source"]]
    while level:
        nxt = []
        for v in level:
            for e in range(d["begin"][v], d["begin"][v] + d["degree"][v]):
                u = int(d["edges"][e])
                if cost[u] < 0:
                    cost[u] = cost[v] + 1
                    nxt.append(u)
        level = nxt
    return {"cost": cost}


# ----------------------------------------------------------------------------- reduction (templated)

def _reduce_make(dtype: Any) -> Callable[[np.random.Generator, str], dict[str, Any]]:
    def make(rng: np.random.Generator, size: str) -> dict[str, Any]:
        n = 5000 if size == "test" else 1 << 26
        x = rng.standard_normal(n).astype(f32) if dtype is f32 else rng.integers(-1000, 1000, n).astype(np.int32)
        return {"x": x}
    return make


def _reduce_prep(inst: str, block: int) -> Callable[[Any, dict[str, Any]], dict[str, Any]]:
    def prep(r: Any, d: dict[str, Any]) -> dict[str, Any]:
        n = d["x"].size
        groups = _ceil(n, 2 * block)
        return {"k": r.kernel("reduce.cu", inst), "part": r.array(np.zeros(groups, d["x"].dtype)),
                "x": r.array(d["x"]), "n": n, "groups": groups, "block": block}
    return prep


def _reduce_run(r: Any, s: dict[str, Any]) -> dict[str, Any]:
    r.launch(s["k"], s["groups"], s["block"], s["part"], s["x"], s["n"])
    return {"partial": s["part"]}


def _reduce_ref(block: int) -> Callable[[dict[str, Any], int], dict[str, np.ndarray]]:
    def ref(d: dict[str, Any], w: int) -> dict[str, np.ndarray]:
        x = d["x"]
        warp = min(w, 32)
        n = x.size
        groups = _ceil(n, 2 * block)
        pad = np.zeros(groups * 2 * block, x.dtype)
        pad[:n] = x
        p = pad.reshape(groups, 2, block)
        s = p[:, 0, :] + p[:, 1, :]  # v = in[i] + in[i + BLOCK] (0 past the end: exact)
        h = block // 2
        while h >= 2 * warp:  # the shared-memory tree
            s[:, :h] = s[:, :h] + s[:, h:2 * h]
            h //= 2
        v = s[:, :warp] + s[:, warp:2 * warp]  # the warp tail's first step
        off = warp // 2
        while off:  # __shfl_down_sync: lane l adds lane l + off (lanes past the warp keep theirs)
            v = np.concatenate([v[:, :warp - off] + v[:, off:warp], v[:, warp - off:] + v[:, warp - off:]], 1)
            off //= 2
        return {"partial": v[:, 0].astype(x.dtype)}
    return ref


# ----------------------------------------------------------------------------- scan

def _scan_make(rng: np.random.Generator, size: str) -> dict[str, Any]:
    n = 3000 if size == "test" else 1 << 24
    return {"x": rng.standard_normal(n).astype(f32), "block": 256}


def _scan_prep(r: Any, d: dict[str, Any]) -> dict[str, Any]:
    n, b = d["x"].size, d["block"]
    groups = _ceil(n, b)
    return {"kb": r.kernel("scan.cu", "scan_blocks"), "ko": r.kernel("scan.cu", "add_offsets"), "n": n, "b": b,
            "groups": groups, "x": r.array(d["x"]), "out": r.array(np.zeros(n, f32)),
            "sums": r.array(np.zeros(groups, f32)), "scanned": r.array(np.zeros(groups, f32))}


def _scan_run(r: Any, s: dict[str, Any]) -> dict[str, Any]:
    n, b, groups = s["n"], s["b"], s["groups"]
    r.launch(s["kb"], groups, b, s["out"], s["sums"], s["x"], n, shared=2 * b * 4)
    # the block sums scanned on the host, sequentially (as a small second level would)
    r.copy_in(s["scanned"], np.cumsum(r.numpy(s["sums"]), dtype=f32))  # sequential, in float32
    r.launch(s["ko"], groups, b, s["out"], s["scanned"], n)
    return {"out": s["out"]}


def _seq_scan(s: np.ndarray) -> np.ndarray:
    out = np.empty_like(s)
    acc = f32(0)
    for i, v in enumerate(s):
        acc = f32(acc + v)
        out[i] = acc
    return out


def _scan_ref(d: dict[str, Any], w: int) -> dict[str, np.ndarray]:
    n, b = d["x"].size, d["block"]
    groups = _ceil(n, b)
    t = np.zeros(groups * b, f32)
    t[:n] = d["x"]
    t = t.reshape(groups, b)
    off = 1
    while off < b:  # Hillis-Steele: each step reads the previous buffer
        nt = t.copy()
        nt[:, off:] = t[:, off:] + t[:, :-off]
        t = nt
        off *= 2
    sums = _seq_scan(t[:, -1].copy())
    t[1:] = t[1:] + sums[:-1, None]
    return {"out": t.reshape(-1)[:n]}


# ----------------------------------------------------------------------------- transpose

def _tr_make(rng: np.random.Generator, size: str) -> dict[str, Any]:
    h, w = (70, 100) if size == "test" else (8192, 8192)
    return {"a": rng.standard_normal((h, w)).astype(f32)}


def _tr_prep(r: Any, d: dict[str, Any]) -> dict[str, Any]:
    h, w = d["a"].shape
    return {"k": r.kernel("transpose.cu", "transpose"), "out": r.array(np.zeros((w, h), f32)), "a": r.array(d["a"]),
            "h": h, "w": w}


def _tr_run(r: Any, s: dict[str, Any]) -> dict[str, Any]:
    h, w = s["h"], s["w"]
    r.launch(s["k"], (_ceil(w, 32), _ceil(h, 32)), (32, 8), s["out"], s["a"], w, h)
    return {"t": s["out"]}


def _tr_ref(d: dict[str, Any], w: int) -> dict[str, np.ndarray]:
    return {"t": np.ascontiguousarray(d["a"].T)}


# ----------------------------------------------------------------------------- matvec

def _mv_make(rng: np.random.Generator, size: str) -> dict[str, Any]:
    rows, cols = (300, 150) if size == "test" else (16384, 8192)
    return {"A": rng.standard_normal((rows, cols)).astype(f32), "x": rng.standard_normal(cols).astype(f32),
            "y": rng.standard_normal(rows).astype(f32), "alpha": 1.5, "beta": -0.5}


def _mv_prep(r: Any, d: dict[str, Any]) -> dict[str, Any]:
    rows, cols = d["A"].shape
    return {"k": r.kernel("matvec.cu", "gemv"), "y": r.array(d["y"]), "A": r.array(d["A"]), "x": r.array(d["x"]),
            "rows": rows, "cols": cols, "alpha": d["alpha"], "beta": d["beta"]}


def _mv_run(r: Any, s: dict[str, Any]) -> dict[str, Any]:
    r.launch(s["k"], _ceil(s["rows"], 128), 128, s["y"], s["A"], s["x"], s["rows"], s["cols"], s["alpha"], s["beta"])
    return {"y": s["y"]}


def _mv_ref(d: dict[str, Any], w: int) -> dict[str, np.ndarray]:
    A, x = d["A"], d["x"]
    acc = np.zeros(A.shape[0], f32)
    for j in range(A.shape[1]):  # acc += row[k] * xs[k], in column order, float32 steps
        acc = acc + A[:, j] * x[j]
    return {"y": (f32(d["alpha"]) * acc + f32(d["beta"]) * d["y"]).astype(f32)}


# ----------------------------------------------------------------------------- k-means

def _km_make(rng: np.random.Generator, size: str) -> dict[str, Any]:
    n, f, k = (700, 5, 6) if size == "test" else (1 << 20, 8, 16)
    pts = rng.standard_normal((n, f)).astype(f32)
    cen = np.zeros(16 * 8, f32)
    cen[:k * f] = pts[rng.choice(n, k, replace=False)].reshape(-1)
    return {"points": pts, "centres": cen, "k": k, "membership": rng.integers(0, k, n).astype(np.int32)}


def _km_prep(r: Any, d: dict[str, Any]) -> dict[str, Any]:
    n, f = d["points"].shape
    return {"k": r.kernel("kmeans.cu", "kmeans_assign"), "mem": r.array(d["membership"]),
            "changed": r.array(np.zeros(1, np.int32)), "points": r.array(d["points"]), "n": n, "f": f,
            "kk": d["k"], "centres": r.array(d["centres"])}


def _km_run(r: Any, s: dict[str, Any]) -> dict[str, Any]:
    r.launch(s["k"], _ceil(s["n"], 128), 128, s["mem"], s["changed"], s["points"], s["n"], s["f"], s["kk"],
             centres=s["centres"])
    return {"membership": s["mem"], "changed": s["changed"]}


def _km_ref(d: dict[str, Any], w: int) -> dict[str, np.ndarray]:
    pts, k = d["points"], d["k"]
    n, f = pts.shape
    cen = d["centres"][:k * f].reshape(k, f)
    dist = np.zeros((n, k), f32)
    for j in range(f):  # dist += d * d, feature by feature, float32 steps
        diff = pts[:, j:j + 1] - cen[None, :, j]
        dist = dist + diff * diff
    best = np.argmin(dist, axis=1).astype(np.int32)  # the first of equal distances (strict <)
    return {"membership": best, "changed": np.array([int((best != d["membership"]).sum())], np.int32)}


# ----------------------------------------------------------------------------- LU

def _lu_make(rng: np.random.Generator, size: str) -> dict[str, Any]:
    n = 40 if size == "test" else 2048
    a = rng.uniform(-1, 1, (n, n)).astype(f32)
    a[np.arange(n), np.arange(n)] += f32(n)  # diagonally dominant: no pivoting needed
    return {"a": a}


def _lu_prep(r: Any, d: dict[str, Any]) -> dict[str, Any]:
    return {"ks": r.kernel("lu.cu", "lu_scale"), "ku": r.kernel("lu.cu", "lu_update"), "n": d["a"].shape[0],
            "a": r.array(d["a"])}


def _lu_run(r: Any, s: dict[str, Any]) -> dict[str, Any]:
    n, a = s["n"], s["a"]
    for k in range(n - 1):
        m = n - 1 - k
        r.launch(s["ks"], _ceil(m, 128), 128, a, n, k)
        r.launch(s["ku"], (_ceil(m, 16), _ceil(m, 16)), (16, 16), a, n, k)
    return {"lu": a}


def _lu_ref(d: dict[str, Any], w: int) -> dict[str, np.ndarray]:
    a = d["a"].copy()
    n = a.shape[0]
    for k in range(n - 1):
        a[k + 1:, k] = a[k + 1:, k] / a[k, k]
        a[k + 1:, k + 1:] = a[k + 1:, k + 1:] - a[k + 1:, k:k + 1] * a[k:k + 1, k + 1:]
    return {"lu": a}


# ----------------------------------------------------------------------------- histogram

def _hist_make(rng: np.random.Generator, size: str) -> dict[str, Any]:
    n = 20000 if size == "test" else 1 << 28
    return {"data": rng.integers(0, 256, n, dtype=np.uint8)}


def _hist_prep(r: Any, d: dict[str, Any]) -> dict[str, Any]:
    return {"k": r.kernel("histogram.cu", "histogram256"), "h": r.array(np.zeros(256, np.uint32)),
            "data": r.array(d["data"]), "n": d["data"].size}


def _hist_run(r: Any, s: dict[str, Any]) -> dict[str, Any]:
    r.launch(s["k"], 16 if s["n"] < 1 << 20 else 1024, 256, s["h"], s["data"], s["n"])
    return {"hist": s["h"]}


def _hist_ref(d: dict[str, Any], w: int) -> dict[str, np.ndarray]:
    return {"hist": np.bincount(d["data"], minlength=256).astype(np.uint32)}


# ----------------------------------------------------------------------------- bitonic sort

def _bit_make(rng: np.random.Generator, size: str) -> dict[str, Any]:
    n = 512 if size == "test" else 1 << 22
    keys = rng.permutation(n * 4)[:n].astype(np.uint32)  # distinct keys: one sorted order
    return {"key": keys, "value": rng.standard_normal(n).astype(f32)}


def _bit_prep(r: Any, d: dict[str, Any]) -> dict[str, Any]:
    n = d["key"].size
    kv = np.zeros(n, [("key", np.uint32), ("value", f32)])
    kv["key"], kv["value"] = d["key"], d["value"]
    return {"k": r.kernel("bitonic.cu", "bitonic_step"), "kv": r.array(kv), "n": n}


def _bit_run(r: Any, s: dict[str, Any]) -> dict[str, Any]:
    k, n, a = s["k"], s["n"], s["kv"]
    size = 2
    while size <= n:
        j = size // 2
        while j > 0:
            r.launch(k, _ceil(n, 256), 256, a, j, size)
            j //= 2
        size *= 2
    return {"kv": a}


def _bit_ref(d: dict[str, Any], w: int) -> dict[str, np.ndarray]:
    order = np.argsort(d["key"])
    kv = np.zeros(d["key"].size, [("key", np.uint32), ("value", f32)])
    kv["key"], kv["value"] = d["key"][order], d["value"][order]
    return {"kv": kv}


# ----------------------------------------------------------------------------- SpMV (warp per row)

def _spmv_make(rng: np.random.Generator, size: str) -> dict[str, Any]:
    rows, cols = (200, 300) if size == "test" else (1 << 18, 1 << 18)
    nnz_row = rng.integers(0, 70 if size == "test" else 64, rows)
    row_ptr = np.concatenate([[0], np.cumsum(nnz_row)]).astype(np.int32)
    nnz = int(row_ptr[-1])
    return {"row_ptr": row_ptr, "cols": rng.integers(0, cols, nnz).astype(np.int32),
            "vals": rng.standard_normal(nnz).astype(f32), "x": rng.standard_normal(cols).astype(f32)}


def _spmv_prep(r: Any, d: dict[str, Any]) -> dict[str, Any]:
    rows = d["row_ptr"].size - 1
    return {"k": r.kernel("spmv.cu", "spmv_csr_vector"), "y": r.array(np.zeros(rows, f32)),
            "row_ptr": r.array(d["row_ptr"]), "cols": r.array(d["cols"]), "vals": r.array(d["vals"]),
            "x": r.array(d["x"]), "rows": rows}


def _spmv_run(r: Any, s: dict[str, Any]) -> dict[str, Any]:
    rows = s["rows"]
    r.launch(s["k"], _ceil(rows * 32, 128), 128, s["y"], s["row_ptr"], s["cols"], s["vals"], s["x"], rows)
    return {"y": s["y"]}


def _spmv_ref(d: dict[str, Any], w: int) -> dict[str, np.ndarray]:
    # the grid has rows * 32 threads, so at warp size < 32 the warps beyond `rows` idle
    warp = min(w, 32)
    rp, cols, vals, x = d["row_ptr"], d["cols"], d["vals"], d["x"]
    rows = rp.size - 1
    y = np.zeros(rows, f32)
    for r in range(rows):
        lanes = np.zeros(warp, f32)
        prod = vals[rp[r]:rp[r + 1]] * x[cols[rp[r]:rp[r + 1]]]
        for e, p in enumerate(prod):  # lane e % warp adds its products in order
            lanes[e % warp] = f32(lanes[e % warp] + p)
        off = warp // 2
        while off:
            lanes = np.concatenate([lanes[:warp - off] + lanes[off:], lanes[warp - off:] + lanes[warp - off:]])
            off //= 2
        y[r] = lanes[0]
    return {"y": y}


CASES = [
    Case("stencil2d", "stencil2d.cu", _stencil_make, _stencil_prep, _stencil_run, _stencil_ref),
    Case("nw_wavefront", "nw.cu", _nw_make, _nw_prep, _nw_run, _nw_ref),
    Case("bfs", "bfs.cu", _bfs_make, _bfs_prep, _bfs_run, _bfs_ref),
    Case("reduce_f32", "reduce.cu", _reduce_make(f32), _reduce_prep("reduce<float, 256>", 256), _reduce_run,
         _reduce_ref(256), w_dependent=True),
    Case("reduce_i32", "reduce.cu", _reduce_make(np.int32), _reduce_prep("reduce<int, 128>", 128), _reduce_run,
         _reduce_ref(128), w_dependent=True),
    Case("scan", "scan.cu", _scan_make, _scan_prep, _scan_run, _scan_ref),
    Case("transpose", "transpose.cu", _tr_make, _tr_prep, _tr_run, _tr_ref),
    Case("matvec", "matvec.cu", _mv_make, _mv_prep, _mv_run, _mv_ref),
    Case("kmeans", "kmeans.cu", _km_make, _km_prep, _km_run, _km_ref),
    Case("lu", "lu.cu", _lu_make, _lu_prep, _lu_run, _lu_ref),
    Case("histogram", "histogram.cu", _hist_make, _hist_prep, _hist_run, _hist_ref),
    Case("bitonic", "bitonic.cu", _bit_make, _bit_prep, _bit_run, _bit_ref),
    Case("spmv_warp", "spmv.cu", _spmv_make, _spmv_prep, _spmv_run, _spmv_ref, w_dependent=True),
]
