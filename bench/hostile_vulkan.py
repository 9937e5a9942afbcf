"""Hostile inputs for the Vulkan target's device arrays and launches (issue 31's bar: nothing a
user does kills, hangs or silently corrupts the process; bad input gets a clear error).

Generates inputs per category, runs them in worker processes (a crash or hang of one input is
recorded and the worker restarted at the next one) and writes ``bench/results/hostile_vulkan.json``
under the key given by ``--label`` (``before`` / ``after`` a fix), with per category: inputs,
``ok`` (ran, results checked against NumPy), ``error`` (an anywave error: WaveError /
ArgumentError), ``uncaught`` (any other exception: type and message of the first few),
``wrong`` (accepted but a result or attribute differs from what NumPy computes), ``crash``
(the worker died: signal or exit status) and ``hang`` (no answer within the per-input budget).

Categories that change process state (fork, SIGINT, interpreter exit, a dispatch that never
ends, damaged pipeline-cache files) run each input in its own child process.

Usage: python bench/hostile_vulkan.py --label after [--scale 1.0] [--only CAT,...]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "hostile_vulkan.json"
CASE_BUDGET_S = 120  # per in-process input (the machine is shared and slow; a hang is far longer)

# --------------------------------------------------------------------------- kernels (worker side)

KERNELS = r'''
import anywave as aw

@aw.kernel
def axpy(x: aw.In[aw.f32], y: aw.In[aw.f32], out: aw.Out[aw.f32], a: aw.f32, n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        out[i] = a * x[i] + y[i]

@aw.kernel
def accumulate(x: aw.In[aw.f32], acc: aw.Buffer[aw.f32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        acc[i] = acc[i] + x[i]

@aw.kernel
def twice(o1: aw.Out[aw.f32], o2: aw.Out[aw.f32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        o1[i] = 1.0
        o2[i] = 2.0

@aw.kernel
def nocheck(x: aw.In[aw.f32], out: aw.Out[aw.f32], k: aw.i32):
    i = aw.global_id(0)
    out[i * k] = x[i * k] + 1.0

@aw.kernel
def forever(flag: aw.In[aw.i32], out: aw.Buffer[aw.i32]):
    i = aw.global_id(0)
    # lavapipe stops a shader's loops after 65535 turns in all (gallivm's loop limiter): launched
    # over a large grid (FOREVER_GRID), 65535 contended atomics per lane run for hours
    while flag[0] == 0:
        aw.atomic_add(out, i % 64, 1)
'''


def _kernels():  # noqa: ANN202
    import types

    mod = types.ModuleType("hostile_kernels")
    path = Path(tempfile.gettempdir()) / f"hostile_kernels_{os.getpid()}.py"
    path.write_text(KERNELS)
    mod.__file__ = str(path)
    exec(compile(KERNELS, str(path), "exec"), mod.__dict__)  # noqa: S102 - our own kernels
    return mod


# --------------------------------------------------------------------------- generated inputs

BAD_SHAPES = [-1, (-1,), (3, -2), 2**40, 2**62, 2**63, 2**64, (2**32, 2**32), (2**31, 2**31, 4), (2**21, 2**21, 2**21),
              (0,), (0, 5), (5, 0, 3), (), 1.5, "3", None, [2.0], True, (2, 1.5), (2, None), ("a",), b"12",
              3 + 0j, (2**63 - 1,), (1, 2**63), 10**30, -(2**63), (4, 4, 4, 4, 4, 4, 4, 4), 0]
DTYPES = ["float32", "float64", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "bool",
          "float16", "aw.bf16", "aw.f32", "aw.i32", "object", "U5", "S3", "complex64", "complex128",
          "struct", ">f4", "<f8", "datetime64[s]", "V8", "aw.bool_", "not-a-dtype"]


def gen_cases(cat: str, n: int, rng: random.Random) -> list[dict]:
    out: list[dict] = []
    for i in range(n):
        c: dict = {"cat": cat, "i": i, "seed": rng.randrange(2**31)}
        if cat == "shapes":
            if rng.random() < 0.5:
                shp = BAD_SHAPES[i % len(BAD_SHAPES)]
            else:
                k = rng.randrange(0, 4)
                shp = tuple(rng.choice([0, 1, 3, 17, 2**rng.randrange(8, 34), -rng.randrange(1, 9),
                                        rng.randrange(1, 100)]) for _ in range(k))
            c.update(shape=repr(shp), dtype=rng.choice(DTYPES[:13]), ctor=rng.choice(["empty", "zeros", "array"]))
        elif cat == "dtypes":
            c.update(dtype=DTYPES[i % len(DTYPES)], ctor=rng.choice(["empty", "zeros", "array", "assign", "launch"]),
                     n=rng.choice([0, 1, 5, 64, 1000]))
        elif cat == "inputs":
            c.update(kind=rng.choice(["strided", "readonly", "fortran", "negstride", "broadcast", "view0",
                                      "readonly_out", "strided_out", "list", "scalar"]),
                     n=rng.choice([1, 7, 64, 300, 1025]), via=rng.choice(["array", "assign", "launch"]))
        elif cat == "lifecycle":
            c.update(kind=rng.choice(["numpy_after_free", "double_free", "launch_after_free", "assign_after_free",
                                      "reshape_after_free", "del_pending", "gc_cycle"]),
                     n=rng.choice([1, 16, 1000]))
        elif cat == "foreign":
            c.update(kind=rng.choice(["emulator_arr", "vulkan_dev1", "vulkan_dev_neg", "vk_to_emulator",
                                      "vk_to_opencl", "opencl_arr", "torch", "list_arg", "str_target"]),
                     n=rng.choice([4, 64]))
        elif cat == "limits":
            m = 134217728
            c.update(nbytes=rng.choice([m - 16, m, m + 1, m + 16, 2 * m, m // 2 + 1, 2**32, 2**32 + 4, 2**40]),
                     ctor=rng.choice(["empty", "zeros"]))
        elif cat == "mixed":
            c.update(kinds=[rng.choice(["np", "vk", "vk", "np_f64", "np_small", "vk_small", "vk_i32"])
                            for _ in range(3)], n=rng.choice([1, 5, 64, 100, 1000, 4097]),
                     extra_n=rng.choice([0, 0, 0, 1, 64, 10**6]))
        elif cat == "aliasing":
            c.update(kind=rng.choice(["acc_same", "twice_same", "twice_reshape", "axpy_in_out", "np_same"]),
                     n=rng.choice([1, 64, 1000]))
        elif cat == "oob":
            c.update(k=rng.choice([1, 2, 16, 1000, 10**6, 2**24, -1, -1000]), n=rng.choice([1, 16, 64]),
                     grid=rng.choice([1, 4, 64, 1024]), kind=rng.choice(["vk", "np", "mixed"]))
        elif cat == "many":
            c.update(launches=rng.choice([100, 500, 1000, 3000, 5000]), kind=rng.choice(["same", "fresh", "numpy"]),
                     n=rng.choice([16, 256]))
        elif cat == "threads":
            c.update(threads=rng.choice([2, 4, 8]), launches=rng.choice([20, 100]),
                     kind=rng.choice(["shared", "own", "mixed", "numpy_read"]))
        out.append(c)
    return out


CHILD_CATS = {"fork": 6, "sigint": 4, "exit": 6, "hang": 4, "pipecache": 8}
INPROC_CATS = {"shapes": 600, "dtypes": 400, "inputs": 400, "lifecycle": 300, "foreign": 180, "limits": 40,
               "mixed": 500, "aliasing": 200, "oob": 300, "many": 30, "threads": 40}


# --------------------------------------------------------------------------- worker: one input

def _dtype(name: str):  # noqa: ANN202
    import numpy as np

    import anywave as aw

    if name == "struct":
        return np.dtype([("a", "i4"), ("b", "f4")])
    if name.startswith("aw."):
        return getattr(aw, name[3:])
    return name


def _sample(dt, n, rng):  # noqa: ANN001, ANN202
    import numpy as np

    d = np.dtype(dt) if not hasattr(dt, "np_dtype") else np.dtype(dt.np_dtype)
    if d.kind == "O":
        return np.array([object() for _ in range(n)], dtype=object)
    if d.kind in "SUV" or d.names:
        return np.zeros(n, d)
    if d.kind == "M":
        return np.arange(n).astype(d)
    if d.kind == "c":
        return (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(d)
    if d.kind == "b":
        return rng.random(n) < 0.5
    if d.kind == "f":
        return rng.standard_normal(n).astype(d)
    return rng.integers(0, 100, n).astype(d)


class Wrong(Exception):
    pass


def run_case(c: dict, K) -> str:  # noqa: ANN001, C901, PLR0912, PLR0915
    import gc

    import numpy as np

    import anywave as aw
    from anywave.runtime import vulkan

    rng = np.random.default_rng(c["seed"])
    cat = c["cat"]
    V = "vulkan"

    def check(cond: bool, what: str) -> None:
        if not cond:
            raise Wrong(what)

    if cat == "shapes":
        shp = eval(c["shape"])  # noqa: S307 - our own repr
        dt = _dtype(c["dtype"])
        if c["ctor"] == "array":
            try:
                host = np.zeros(shp, np.dtype(getattr(dt, "np_dtype", dt)))
            except Exception:  # noqa: BLE001 - NumPy refuses the shape too: try the device call anyway
                host = None
            if host is None or host.nbytes > 1 << 24:
                return "skip-numpy-refused"
            a = aw.array(host, target=V)
            got = a.numpy()
            check(got.shape == host.shape and np.array_equal(got, host), f"array round trip (shape {got.shape})")
            return "ok"
        a = getattr(aw, c["ctor"])(shp, dt, target=V)
        want = tuple(int(s) for s in ((shp,) if isinstance(shp, int) else shp))
        npd = np.dtype(getattr(dt, "np_dtype", dt))
        total = int(np.prod(want, dtype=object)) * npd.itemsize if want else npd.itemsize
        check(a.shape == want, f"shape {a.shape} != {want}")
        check(a.nbytes == total, f"nbytes {a.nbytes} != {total}")
        if total <= 1 << 24:
            h = a.numpy()
            check(h.shape == want, "numpy shape")
            if c["ctor"] == "zeros":
                check(not h.reshape(-1).view(np.uint8).any(), "zeros not zero")
        return "ok"
    if cat == "dtypes":
        dt = _dtype(c["dtype"])
        n = c["n"]
        if c["dtype"] == "not-a-dtype":
            aw.empty(n, dt, target=V)
            return "ok"
        host = _sample(dt, n, rng)
        if c["ctor"] == "array":
            a = aw.array(host, target=V)
            check(a.numpy().tobytes() == host.tobytes(), "round trip bytes")
        elif c["ctor"] in ("empty", "zeros"):
            a = getattr(aw, c["ctor"])(n, dt, target=V)
            h = a.numpy()
            if c["ctor"] == "zeros" and h.dtype.kind != "O":
                check(not h.reshape(-1).view(np.uint8).any(), "zeros")
        elif c["ctor"] == "assign":
            a = aw.empty(n, host.dtype, target=V)
            a.assign(host)
            check(a.numpy().tobytes() == host.tobytes(), "assign round trip")
        else:
            x = aw.array(host, target=V)
            out = aw.zeros(n, aw.f32, target=V)
            K.axpy(x, x, out, 1.0, n, grid=max(1, -(-n // 64)), workgroup=64, target=V)
            out.numpy()
        return "ok"
    if cat == "inputs":
        n, kind = c["n"], c["kind"]
        base = rng.standard_normal(4 * n).astype(np.float32)
        if kind == "strided":
            h = base[::3][:n]
        elif kind == "negstride":
            h = base[::-1][:n]
        elif kind == "fortran":
            h = np.asfortranarray(base[: (n // 2) * 2].reshape(-1, 2)) if n >= 2 else base[:n]
        elif kind == "broadcast":
            h = np.broadcast_to(base[:1], (n,))
        elif kind == "view0":
            h = base[:0]
        elif kind == "list":
            h = base[:n].tolist()
        elif kind == "scalar":
            h = np.float32(3.5)
        else:
            h = base[:n].copy()
            if kind.startswith("readonly"):
                h.flags.writeable = False
            elif kind == "strided_out":
                h = base[::2][:n]
        want = np.asarray(h, dtype=np.float32)
        if c["via"] == "array":
            a = aw.array(h, target=V)
            check(np.array_equal(a.numpy(), want), "array of input")
        elif c["via"] == "assign":
            a = aw.empty(np.shape(want), aw.f32, target=V)
            a.assign(h)
            check(np.array_equal(a.numpy(), want), "assign of input")
        else:
            m = want.size
            if want.ndim != 1:
                return "skip-not-1d"
            ones = np.ones(m, np.float32)
            if kind in ("readonly_out", "strided_out"):
                before = np.array(h, copy=True)
                K.axpy(aw.array(ones, target=V), ones, h, 2.0, m, grid=max(1, -(-m // 64)), workgroup=64,
                       target=V)
                check(np.array_equal(np.asarray(h), 2 * ones + ones), "written strided output")
                del before
            else:
                out = aw.zeros(m, aw.f32, target=V)
                K.axpy(h, aw.array(ones, target=V), out, 2.0, m, grid=max(1, -(-m // 64)), workgroup=64, target=V)
                check(np.array_equal(out.numpy(), np.float32(2) * want + ones), "launch on input")
        return "ok"
    if cat == "lifecycle":
        n, kind = c["n"], c["kind"]
        h = rng.standard_normal(n).astype(np.float32)
        a = aw.array(h, target=V)
        if kind == "numpy_after_free":
            a._free()
            a.numpy()
            raise Wrong("numpy() after the array was freed returned")
        if kind == "double_free":
            a._free()
            a._free()
            a.space.dev.free(a.handle)  # the driver-level free twice
            aw.synchronize()
            b = aw.array(h, target=V)  # the process still works
            check(np.array_equal(b.numpy(), h), "array after double free")
            return "ok"
        if kind == "launch_after_free":
            out = aw.zeros(n, aw.f32, target=V)
            a._free()
            K.axpy(a, a, out, 1.0, n, grid=max(1, -(-n // 64)), workgroup=64, target=V)
            out.numpy()
            raise Wrong("launch on a freed array ran")
        if kind == "assign_after_free":
            a._free()
            a.assign(h)
            raise Wrong("assign to a freed array returned")
        if kind == "reshape_after_free":
            r = a.reshape(n)
            del a
            gc.collect()
            check(np.array_equal(r.numpy(), h), "reshape keeps the owner")
            return "ok"
        if kind == "del_pending":
            acc = aw.zeros(n, aw.f32, target=V)
            for _ in range(5):
                x = aw.array(h, target=V)
                K.accumulate(x, acc, n, grid=max(1, -(-n // 64)), workgroup=64, target=V)
                del x
            check(np.allclose(acc.numpy(), 5 * h, rtol=1e-5, atol=1e-5), "accumulate with freed inputs")
            return "ok"
        if kind == "gc_cycle":
            class Holder:
                pass
            for _ in range(20):
                o = Holder()
                o.self = o
                o.a = aw.array(h, target=V)
                del o
            gc.collect()
            check(np.array_equal(a.numpy(), h), "after cycles")
            return "ok"
    if cat == "foreign":
        n, kind = c["n"], c["kind"]
        h = np.arange(n, dtype=np.float32)
        out = aw.zeros(n, aw.f32, target=V)
        if kind == "emulator_arr":
            e = aw.array(h, target="emulator")
            K.axpy(e, e, out, 1.0, n, grid=1, workgroup=64, target=V)
            out.numpy()
        elif kind == "vulkan_dev1":
            aw.zeros(n, target="vulkan:1")
        elif kind == "vulkan_dev_neg":
            aw.zeros(n, target="vulkan:-1")
        elif kind == "vk_to_emulator":
            x = aw.array(h, target=V)
            K.axpy(x, x, np.zeros(n, np.float32), 1.0, n, grid=1, workgroup=64, target="emulator")
        elif kind == "vk_to_opencl":
            x = aw.array(h, target=V)
            K.axpy(x, x, np.zeros(n, np.float32), 1.0, n, grid=1, workgroup=64, target="opencl")
        elif kind == "opencl_arr":
            e = aw.array(h, target="opencl")
            K.axpy(e, e, out, 1.0, n, grid=1, workgroup=64, target=V)
            out.numpy()
        elif kind == "torch":
            import torch

            t = torch.arange(n, dtype=torch.float32)
            K.axpy(t, t, out, 1.0, n, grid=1, workgroup=64, target=V)
            check(np.array_equal(out.numpy(), 2 * h), "torch input")
            return "ok"
        elif kind == "list_arg":
            K.axpy(h.tolist(), h, out, 1.0, n, grid=1, workgroup=64, target=V)
        elif kind == "str_target":
            aw.zeros(n, target="vulkan:x")
        return "ok"
    if cat == "limits":
        nb = c["nbytes"]
        a = getattr(aw, c["ctor"])(nb // 4, aw.f32, target=V)
        check(a.nbytes == (nb // 4) * 4, "nbytes")
        if c["ctor"] == "zeros" and nb <= 1 << 28:
            check(not a.numpy().any(), "zeros of a large array")
        del a
        gc.collect()
        return "ok"
    if cat == "mixed":
        n = c["n"]
        vals = [rng.standard_normal(n).astype(np.float32) for _ in range(3)]
        args = []
        for kind, v in zip(c["kinds"], vals, strict=True):
            if kind == "np":
                args.append(v.copy())
            elif kind == "vk":
                args.append(aw.array(v, target=V))
            elif kind == "np_f64":
                args.append(v.astype(np.float64))
            elif kind == "np_small":
                args.append(v[: max(0, n // 2)].copy())
            elif kind == "vk_small":
                args.append(aw.array(v[: max(1, n // 2)], target=V))
            elif kind == "vk_i32":
                args.append(aw.array(v.astype(np.int32), target=V))
        nn = n + c["extra_n"]
        K.axpy(args[0], args[1], args[2], 1.5, nn, grid=max(1, -(-nn // 64)), workgroup=64, target=V)
        res = args[2].numpy() if isinstance(args[2], aw.Array) else args[2]
        if c["extra_n"] == 0 and all(k in ("np", "vk") for k in c["kinds"]):
            check(np.array_equal(res, np.float32(1.5) * vals[0] + vals[1]), "mixed launch result")
        return "ok"
    if cat == "aliasing":
        n, kind = c["n"], c["kind"]
        h = rng.standard_normal(n).astype(np.float32)
        g = max(1, -(-n // 64))
        a = aw.array(h, target=V)
        if kind == "acc_same":
            K.accumulate(a, a, n, grid=g, workgroup=64, target=V)
            check(np.array_equal(a.numpy(), h + h), "acc into itself")
        elif kind == "twice_same":
            K.twice(a, a, n, grid=g, workgroup=64, target=V)
            raise Wrong(f"two outputs on one array accepted (got {a.numpy()[:2]})")
        elif kind == "twice_reshape":
            K.twice(a, a.reshape(n), n, grid=g, workgroup=64, target=V)
            raise Wrong("two outputs on one array (a reshape) accepted")
        elif kind == "axpy_in_out":
            K.axpy(a, a, a, 2.0, n, grid=g, workgroup=64, target=V)
            check(np.array_equal(a.numpy(), np.float32(2) * h + h), "axpy in place")
        else:
            hh = h.copy()
            K.twice(hh, hh, n, grid=g, workgroup=64, target=V)
            raise Wrong("two outputs on one NumPy array accepted")
        return "ok"
    if cat == "oob":
        k, n, grid = c["k"], c["n"], c["grid"]
        h = rng.standard_normal(n).astype(np.float32)
        x = aw.array(h, target=V) if c["kind"] != "np" else h.copy()
        out = aw.zeros(n, aw.f32, target=V) if c["kind"] == "vk" else np.zeros(n, np.float32)
        guard = aw.array(np.full(4096, 7.0, np.float32), target=V)  # a neighbour that must stay intact
        K.nocheck(x, out, k, grid=grid, workgroup=64, target=V)
        aw.synchronize()
        res = out.numpy() if isinstance(out, aw.Array) else out
        check(np.array_equal(guard.numpy(), np.full(4096, 7.0, np.float32)), "a neighbouring array was written")
        if k == 1 and grid * 64 >= n:
            check(np.array_equal(res, h + np.float32(1)), "in-bounds part of an OOB launch")
        return "ok"
    if cat == "many":
        L, n, kind = c["launches"], c["n"], c["kind"]
        dev = vulkan.get_device()
        h = np.ones(n, np.float32)
        g = max(1, -(-n // 64))
        acc = aw.zeros(n, aw.f32, target=V)
        x = aw.array(h, target=V)
        for _ in range(L):
            if kind == "same":
                K.accumulate(x, acc, n, grid=g, workgroup=64, target=V)
            elif kind == "fresh":
                xx = aw.array(h, target=V)
                K.accumulate(xx, acc, n, grid=g, workgroup=64, target=V)
            else:
                K.accumulate(h, acc, n, grid=g, workgroup=64, target=V)
        aw.synchronize()
        check(np.array_equal(acc.numpy(), np.full(n, L, np.float32)), "sum of many launches")
        slots = len(dev._free_slots) + len(dev._pending)
        check(slots <= vulkan.MAX_IN_FLIGHT + 1, f"{slots} command buffers after {L} launches")
        check(len(dev._sets) <= vulkan.SET_CACHE, "descriptor set cache grew past its bound")
        return "ok"
    if cat == "threads":
        import threading

        T, L, kind = c["threads"], c["launches"], c["kind"]
        n = 128
        h = np.ones(n, np.float32)
        shared = aw.zeros(n, aw.f32, target=V)
        own = [aw.zeros(n, aw.f32, target=V) for _ in range(T)]
        errs: list[BaseException] = []

        def work(t: int) -> None:
            try:
                x = aw.array(h, target=V)
                for j in range(L):
                    if kind == "shared" or (kind == "mixed" and j % 2):
                        K.accumulate(x, shared, n, grid=2, workgroup=64, target=V)
                    elif kind == "numpy_read":
                        K.accumulate(h, own[t], n, grid=2, workgroup=64, target=V)
                    else:
                        K.accumulate(x, own[t], n, grid=2, workgroup=64, target=V)
                    if j % 7 == 0:
                        own[t].numpy()
            except BaseException as e:  # noqa: BLE001
                errs.append(e)

        ths = [threading.Thread(target=work, args=(t,)) for t in range(T)]
        for t in ths:
            t.start()
        for t in ths:
            t.join()
        if errs:
            raise errs[0]
        aw.synchronize()
        if kind == "shared":
            check(np.array_equal(shared.numpy(), np.full(n, T * L, np.float32)), "shared sum")
        elif kind == "mixed":
            check(np.array_equal(shared.numpy(), np.full(n, T * (L // 2), np.float32)), "shared half")
            for o in own:
                check(np.array_equal(o.numpy(), np.full(n, L - L // 2, np.float32)), "own half")
        else:
            for o in own:
                check(np.array_equal(o.numpy(), np.full(n, L, np.float32)), "own sum")
        return "ok"
    raise ValueError(cat)


def classify(e: BaseException) -> str:
    from anywave.errors import WaveError

    if isinstance(e, Wrong):
        return "wrong"
    if isinstance(e, WaveError):
        return "error"
    return "uncaught"


def worker(cases_path: str, start: int) -> None:
    cases = json.loads(Path(cases_path).read_text())
    K = _kernels()
    import anywave as aw

    aw.zeros(4, target="vulkan").numpy()
    print("READY", flush=True)
    for c in cases[start:]:
        t0 = time.time()
        try:
            r = run_case(c, K)
            out, detail = ("skip" if r.startswith("skip") else "ok"), r
        except BaseException as e:  # noqa: BLE001
            out, detail = classify(e), f"{type(e).__name__}: {str(e)[:300]}"
        print("RES " + json.dumps({"i": c["i"], "outcome": out, "detail": detail, "s": round(time.time() - t0, 3)}),
              flush=True)


def run_inproc(cat: str, cases: list[dict]) -> list[dict]:
    """Run ``cases`` in worker processes; a worker that dies or stalls is restarted after the input."""
    tmp = Path(tempfile.mkstemp(suffix=".json")[1])
    tmp.write_text(json.dumps(cases))
    results: list[dict] = []
    start = 0
    while start < len(cases):
        p = subprocess.Popen([sys.executable, __file__, "--worker", str(tmp), str(start)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, bufsize=1)
        budget = CASE_BUDGET_S + 60  # the first answer includes start-up
        line_end = time.time() + budget
        buf = ""
        done = False
        while not done:
            left = line_end - time.time()
            r, _, _ = select.select([p.stdout], [], [], max(0.0, left))
            if not r:  # hang
                p.kill()
                p.wait()
                results.append({"i": start, "outcome": "hang", "detail": f"no answer in {budget} s"})
                start += 1
                break
            chunk = p.stdout.readline()
            if not chunk:  # the worker died
                rc = p.wait()
                err = p.stderr.read()[-600:]
                results.append({"i": start, "outcome": "crash", "detail": f"rc={rc} {err}"})
                start += 1
                break
            buf = chunk.strip()
            if buf.startswith("RES "):
                res = json.loads(buf[4:])
                results.append(res)
                start = res["i"] + 1
                line_end = time.time() + CASE_BUDGET_S
                if start >= len(cases):
                    done = True
            elif buf == "READY":
                line_end = time.time() + CASE_BUDGET_S
        if done:
            p.stdout.close()
            try:
                p.wait(timeout=120)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
                results.append({"i": -1, "outcome": "hang", "detail": "worker did not exit"})
            else:
                if p.returncode != 0:
                    results.append({"i": -1, "outcome": "crash",
                                    "detail": f"worker exit rc={p.returncode} {p.stderr.read()[-400:]}"})
    tmp.unlink()
    return results


# --------------------------------------------------------------------------- child-process categories

CHILD_PRE = KERNELS + r'''
import numpy as np, os, sys, time, signal
from anywave.errors import WaveError
V = "vulkan"
FOREVER_GRID = (64, 1024)  # see forever()
'''

FORK_CHILDREN = {
    "launch": "K = axpy; x = aw.array(np.ones(64, np.float32), target=V); o = aw.zeros(64, aw.f32, target=V)\n"
              "try:\n    axpy(x, x, o, 1.0, 64, grid=1, workgroup=64, target=V); o.numpy(); print('child: worked')\n"
              "except WaveError as e:\n    print('child: error', str(e)[:200])\n",
    "numpy": "try:\n    print('child: worked' if (a.numpy() == 1).all() else 'child: WRONG')\n"
             "except WaveError as e:\n    print('child: error', str(e)[:200])\n",
    "sync": "try:\n    aw.synchronize(); print('child: worked')\n"
            "except WaveError as e:\n    print('child: error', str(e)[:200])\n",
    "alloc": "try:\n    b = aw.zeros(16, target=V); b.numpy(); print('child: worked')\n"
             "except WaveError as e:\n    print('child: error', str(e)[:200])\n",
    "exit": "print('child: exiting')\n",
    "pool": None,
}


def fork_script(kind: str, pending: bool) -> str:
    body = FORK_CHILDREN[kind]
    s = CHILD_PRE + "a = aw.array(np.ones(64, np.float32), target=V)\nacc = aw.zeros(64, aw.f32, target=V)\n"
    if pending:
        s += "for _ in range(50):\n    accumulate(a, acc, 64, grid=1, workgroup=64, target=V)\n"
    if body is None:
        s += ("import multiprocessing as mp\ndef job(i):\n    import numpy as np\n"
              "    try:\n        b = aw.zeros(8, target=V); b.numpy(); return 'worked'\n"
              "    except WaveError as e:\n        return 'error'\n"
              "with mp.get_context('fork').Pool(2) as p:\n    print('pool:', p.map(job, range(4)))\n")
    else:
        s += ("pid = os.fork()\nif pid == 0:\n" + "".join("    " + ln + "\n" for ln in body.splitlines())
              + "    os._exit(0)\n_, st = os.waitpid(pid, 0)\nprint('parent: child status', st)\n")
    s += "print('parent: sum', acc.numpy()[0])\n"
    return s


SIGINT_SCRIPT = CHILD_PRE + r'''
# a terminal user's Ctrl-C: a process started in the background inherits SIGINT ignored
signal.signal(signal.SIGINT, signal.default_int_handler)
flag = aw.zeros(1, aw.i32, target=V)
out = aw.zeros(64, aw.i32, target=V)
forever(flag, out, grid=FOREVER_GRID, workgroup=64, target=V)
print("READY", flush=True)
t0 = time.time()
try:
    aw.synchronize()
    print("sync returned")
except KeyboardInterrupt:
    print(f"KeyboardInterrupt after {time.time() - t0:.2f} s", flush=True)
except WaveError as e:
    print("error", e)
os._exit(0)  # the dispatch never ends; leave without waiting
'''

EXIT_SCRIPTS = {
    "pending_finite": CHILD_PRE + "a = aw.array(np.ones(4096, np.float32), target=V); acc = aw.zeros(4096, aw.f32, "
    "target=V)\nfor _ in range(200):\n    accumulate(a, acc, 4096, grid=64, workgroup=64, target=V)\nprint('bye')\n",
    "pending_forever": CHILD_PRE + "flag = aw.zeros(1, aw.i32, target=V); out = aw.zeros(64, aw.i32, target=V)\n"
    "forever(flag, out, grid=FOREVER_GRID, workgroup=64, target=V)\nprint('bye')\n",
    "pending_fresh": CHILD_PRE + "acc = aw.zeros(64, aw.f32, target=V)\nfor _ in range(100):\n"
    "    accumulate(aw.array(np.ones(64, np.float32), target=V), acc, 64, grid=1, workgroup=64, target=V)\n"
    "print('bye')\n",
    "sys_exit": CHILD_PRE + "acc = aw.zeros(64, aw.f32, target=V); a = aw.array(np.ones(64, np.float32), target=V)\n"
    "for _ in range(70):\n    accumulate(a, acc, 64, grid=1, workgroup=64, target=V)\nprint('bye'); sys.exit(3)\n",
}

HANG_SCRIPT = CHILD_PRE + r'''
from anywave.runtime import vulkan
vulkan.FENCE_TIMEOUT_NS = 2 * 10**9
flag = aw.zeros(1, aw.i32, target=V)
out = aw.zeros(64, aw.i32, target=V)
x = aw.array(np.ones(64, np.float32), target=V)
y = aw.zeros(64, aw.f32, target=V)
G = FOREVER_GRID
MODE
print("alive")
os._exit(0)
'''
HANG_MODES = {
    "sync": "forever(flag, out, grid=G, workgroup=64, target=V)\ntry:\n    aw.synchronize()\nexcept WaveError as e:\n"
            "    print('timeout:', 'did not finish' in str(e))\ntry:\n    x.numpy()\nexcept WaveError as e:\n"
            "    print('later:', 'refuses' in str(e))\n",
    "numpy_arg": "try:\n    forever(np.zeros(1, np.int32), np.zeros(64, np.int32), grid=G, workgroup=64, "
                 "target=V)\n"
                 "except WaveError as e:\n    print('timeout:', 'did not finish' in str(e))\n"
                 "try:\n    aw.zeros(4, target=V)\n    y = aw.array(np.ones(4, np.float32), target=V)\n"
                 "except WaveError as e:\n"
                 "    print('later:', 'refuses' in str(e))\n",
    "numpy_read": "forever(flag, out, grid=G, workgroup=64, target=V)\ntry:\n    out.numpy()\n"
                  "except WaveError as e:\n"
                  "    print('timeout:', 'did not finish' in str(e))\ntry:\n"
                  "    accumulate(x, y, 64, grid=1, workgroup=64, target=V)\nexcept WaveError as e:\n"
                  "    print('later:', 'refuses' in str(e))\n",
    "many_behind": "forever(flag, out, grid=G, workgroup=64, target=V)\ntry:\n    for _ in range(200):\n"
                   "        accumulate(x, y, 64, grid=1, workgroup=64, target=V)\n    aw.synchronize()\n"
                   "except WaveError as e:\n    print('timeout:', 'did not finish' in str(e))\ntry:\n"
                   "    aw.synchronize()\nexcept WaveError as e:\n    print('later:', 'refuses' in str(e))\n",
}

PIPECACHE_SCRIPT = CHILD_PRE + r'''
from anywave.runtime import vulkan
try:
    x = aw.array(np.arange(64, dtype=np.float32), target=V)
    o = aw.zeros(64, aw.f32, target=V)
    axpy(x, x, o, 1.0, 64, grid=1, workgroup=64, target=V)
    assert (o.numpy() == 2 * np.arange(64)).all()
    d = vulkan.get_device()
    print("loaded", d.pipeline_cache_loaded, "saved", d.save_pipeline_cache())
except WaveError as e:  # a clear refusal (e.g. of an unusable cache dir) is not a crash
    print("anywave error:", type(e).__name__, str(e)[:300])
'''


def _prime_cache(cache: Path) -> list[Path]:
    env = dict(os.environ, ANYWAVE_CACHE_DIR=str(cache))
    child(PIPECACHE_SCRIPT, 300, env=env)
    return sorted(cache.rglob("vulkan-pipelines/*"))


def child(script: str, timeout: float, env: dict | None = None, sigint_after_ready: float | None = None) -> dict:
    t0 = time.time()
    fd, path = tempfile.mkstemp(suffix=".py")  # kernels need a source file
    os.write(fd, script.encode())
    os.close(fd)
    try:
        return _child(path, t0, timeout, env, sigint_after_ready)
    finally:
        os.unlink(path)


def _child(path: str, t0: float, timeout: float, env: dict | None, sigint_after_ready: float | None) -> dict:
    p = subprocess.Popen([sys.executable, path], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=env or os.environ.copy(), start_new_session=True)
    try:
        if sigint_after_ready is not None:
            line = p.stdout.readline()
            if "READY" in line:
                time.sleep(sigint_after_ready)
                p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        return {"outcome": "hang", "detail": (out[-300:], err[-300:]), "s": round(time.time() - t0, 1)}
    res = {"rc": p.returncode, "stdout": out[-600:], "stderr": err[-600:], "s": round(time.time() - t0, 1)}
    if sigint_after_ready is not None and "KeyboardInterrupt after" in out:
        res["sigint_latency_s"] = round(float(out.split("KeyboardInterrupt after ")[1].split()[0]), 2)
    return res


def run_child_cat(cat: str, n: int, rng: random.Random) -> list[dict]:  # noqa: C901, PLR0912
    results = []
    for i in range(n):
        if cat == "fork":
            kind = list(FORK_CHILDREN)[i % len(FORK_CHILDREN)]
            pending = bool(i % 2)
            r = child(fork_script(kind, pending), 180)
            want_sum = "parent: sum 50.0" if pending else "parent: sum 0.0"
            if r.get("outcome") == "hang":
                pass
            elif r["rc"] < 0 or r["rc"] > 1:
                r["outcome"] = "crash"
            elif "Traceback" in r["stderr"]:
                r["outcome"] = "uncaught"
            elif want_sum not in r["stdout"] or "WRONG" in r["stdout"]:
                r["outcome"] = "wrong"
            else:
                r["outcome"] = "ok"
            r["input"] = f"{kind} pending={pending}"
        elif cat == "sigint":
            r = child(SIGINT_SCRIPT, 90, sigint_after_ready=0.5 + i * 0.5)
            if r.get("outcome") != "hang":
                lat = r.get("sigint_latency_s")
                r["outcome"] = "ok" if lat is not None and lat < 3.0 + 0.5 + i * 0.5 else "hang"
            r["input"] = f"SIGINT {0.5 + i * 0.5} s into aw.synchronize()"
        elif cat == "exit":
            kind = list(EXIT_SCRIPTS)[i % len(EXIT_SCRIPTS)]
            r = child(EXIT_SCRIPTS[kind], 150)
            if r.get("outcome") != "hang":
                want_rc = 3 if kind == "sys_exit" else 0
                r["outcome"] = ("ok" if r["rc"] == want_rc and "bye" in r["stdout"] and "Traceback" not in r["stderr"]
                                else ("crash" if r["rc"] < 0 else "uncaught"))
            r["input"] = kind
        elif cat == "hang":
            mode = list(HANG_MODES)[i % len(HANG_MODES)]
            r = child(HANG_SCRIPT.replace("MODE", HANG_MODES[mode]), 120)
            if r.get("outcome") != "hang":
                good = "timeout: True" in r["stdout"] and "later: True" in r["stdout"] and "alive" in r["stdout"]
                r["outcome"] = "ok" if good and r["rc"] == 0 else ("crash" if r["rc"] < 0 else "uncaught")
            r["input"] = mode
        elif cat == "pipecache":
            damage = ["truncate", "garbage", "zero", "readonly_file", "readonly_dir", "missing_dir", "dir_is_file",
                      "full_disk"][i % 8]
            with tempfile.TemporaryDirectory() as td:
                cache = Path(td) / "cache"
                files = _prime_cache(cache)
                env = dict(os.environ, ANYWAVE_CACHE_DIR=str(cache))
                pdir = cache / "vulkan-pipelines"
                for f in files:
                    if damage == "truncate":
                        f.write_bytes(f.read_bytes()[: rng.randrange(1, max(2, f.stat().st_size))])
                    elif damage == "garbage":
                        f.write_bytes(os.urandom(rng.randrange(1, 4096)))
                    elif damage == "zero":
                        f.write_bytes(b"")
                    elif damage == "readonly_file":
                        f.chmod(0o444)
                if damage == "readonly_dir":
                    for f in files:
                        f.unlink()
                    pdir.chmod(0o555)
                elif damage == "missing_dir":
                    env["ANYWAVE_CACHE_DIR"] = str(Path(td) / "no" / "such" / "dir")
                elif damage == "dir_is_file":
                    for f in files:
                        f.unlink()
                    pdir.rmdir()
                    pdir.write_bytes(b"not a dir")
                elif damage == "full_disk":
                    env["ANYWAVE_CACHE_DIR"] = "/dev/full"
                r = child(PIPECACHE_SCRIPT, 180, env=env)
                if r.get("outcome") != "hang":
                    r["outcome"] = ("ok" if r["rc"] == 0 and "loaded" in r["stdout"]
                                    else "error" if r["rc"] == 0 and "anywave error:" in r["stdout"]
                                    else ("crash" if r["rc"] < 0 else "uncaught"))
                r["input"] = damage
                with __import__("contextlib").suppress(OSError):
                    pdir.chmod(0o755)
        results.append(r)
    return results


# --------------------------------------------------------------------------- main

def summarize(cat: str, inputs: int, results: list[dict]) -> dict:
    s = {"inputs": inputs, "ok": 0, "skip": 0, "error": 0, "uncaught": 0, "wrong": 0, "crash": 0, "hang": 0}
    examples: dict[str, list] = {}
    for r in results:
        o = r["outcome"]
        s[o] = s.get(o, 0) + 1
        if o not in ("ok", "skip", "error") or (o == "error" and len(examples.get("error", [])) < 3):
            ex = examples.setdefault(o, [])
            if len(ex) < 6:
                ex.append({k: r[k] for k in r if k in ("i", "detail", "input", "stdout", "stderr", "rc",
                                                        "sigint_latency_s")})
    s["examples"] = examples
    return s


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--label", default="after")
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--only", default="")
    ap.add_argument("--worker", nargs=2)
    a = ap.parse_args()
    if a.worker:
        worker(a.worker[0], int(a.worker[1]))
        return
    only = set(filter(None, a.only.split(",")))
    rng = random.Random(31)
    report: dict = {}
    t0 = time.time()
    for cat, n in INPROC_CATS.items():
        if only and cat not in only:
            continue
        n = max(1, int(n * a.scale))
        cases = gen_cases(cat, n, random.Random(f"{cat}-31"))
        for c in cases:
            c["i"] = cases.index(c)
        res = run_inproc(cat, cases)
        for r in res:
            if 0 <= r.get("i", -1) < len(cases):
                r["input"] = {k: v for k, v in cases[r["i"]].items() if k not in ("cat", "seed")}
        report[cat] = summarize(cat, n, res)
        print(cat, {k: v for k, v in report[cat].items() if k != "examples"}, flush=True)
    for cat, n in CHILD_CATS.items():
        if only and cat not in only:
            continue
        n = max(1, int(n * min(1.0, a.scale)))
        report[cat] = summarize(cat, n, run_child_cat(cat, n, rng))
        print(cat, {k: v for k, v in report[cat].items() if k != "examples"}, flush=True)
    total = {k: sum(v[k] for v in report.values()) for k in ("inputs", "ok", "skip", "error", "uncaught", "wrong",
                                                                "crash", "hang")}
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=HERE).stdout.strip()
    dirty = bool(subprocess.run(["git", "status", "--porcelain", "src"], capture_output=True, text=True,
                                cwd=HERE).stdout.strip())
    doc = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    if only and a.label in doc:  # a partial run updates its categories in the label's record
        report = {**doc[a.label]["categories"], **report}
        total = {k: sum(v[k] for v in report.values()) for k in total}
    doc[a.label] = {"commit": commit + ("+dirty" if dirty else ""), "date": time.strftime("%Y-%m-%d %H:%M UTC",
                                                                                         time.gmtime()),
                    "device": "Mesa lavapipe (llvmpipe, CPU)", "seconds": round(time.time() - t0),
                    "total": total, "categories": report}
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(doc, indent=1, default=str) + "\n")
    print("total", total)


if __name__ == "__main__":
    main()
