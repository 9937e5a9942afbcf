"""The CUDA suite (tests/cuda_suite, issue 28) on an NVIDIA GPU: each kernel file built by NVRTC
(``--fmad=false``) and by anywave's CUDA front end from the same source, launched by the same
host program (tests/cuda_suite/cases.py) with the same launch geometry, data on the device
(torch CUDA tensors): the outputs compared bit for bit, and the two timed.

    PYTHONPATH=src python3 bench/bench_cuda_suite.py [--reps 7] [--cases a,b] [--size bench|test]
    PYTHONPATH=src python3 bench/bench_cuda_suite.py --nvrtc-only    # no GPU: NVRTC builds to PTX only

After the suite (unless ``--no-add``): issue 28's element-wise add over 2^28 floats written the
plain way (one element per thread), timed as torch.add, NVRTC's build of the CUDA source,
anywave's build of the same source and the Python-language kernel (``plain_add_2_28`` in the JSON).

Per case:

1. correctness at the ``test`` size: both builds against the case's NumPy reference at W = 32
   (the warp of NVIDIA GPUs);
2. at ``--size`` (default ``bench``): one warm-up run of each, then ``--reps`` timed runs
   interleaved (anywave, NVRTC, anywave, ...), each a fresh ``prepare`` (untimed) and a ``run``
   timed with CUDA events on the current stream (the host program's launches, and its reads
   where it has them, as BFS's loop does); medians; the outputs of the last runs compared bit
   for bit;
3. ``speed = nvrtc_ms / anywave_ms`` (1.0: as fast as NVRTC), and the geometric mean.

NVRTC cannot include host headers, so the script gives it a folder of small stand-ins for
``<cfloat>``, ``<climits>``, ``<cmath>`` and ``<cuda_runtime.h>`` (numeric limits; the CUDA
built-ins are NVRTC's own); the kernels' text is unchanged. Needs torch with CUDA,
cuda-bindings (``cuda.bindings.driver``, ``cuda.bindings.nvrtc``) and libclang (anywave's
``cuda-frontend`` extra). Writes ``$OUT/cuda_suite.json`` (or ``bench/results/`` when OUT is
unset) with the device, commit and date.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "cuda_suite"))
from cases import CASES, HERE  # noqa: E402

#: stand-ins for the host headers NVRTC cannot open (numeric limits as <cfloat>/<climits> give them)
NVRTC_HEADERS = {
    "cfloat": "#pragma once\n#define FLT_MAX 3.40282347e+38F\n#define FLT_MIN 1.17549435e-38F\n"
              "#define FLT_EPSILON 1.19209290e-07F\n#define DBL_MAX 1.7976931348623157e+308\n"
              "#define DBL_MIN 2.2250738585072014e-308\n#define DBL_EPSILON 2.2204460492503131e-16\n",
    "climits": "#pragma once\n#define INT_MAX 2147483647\n#define INT_MIN (-2147483647 - 1)\n"
               "#define UINT_MAX 4294967295U\n#define LLONG_MAX 9223372036854775807LL\n",
    "cmath": "#pragma once\n", "cuda_runtime.h": "#pragma once\n",
}
NVRTC_HEADERS["float.h"] = NVRTC_HEADERS["cfloat"]
NVRTC_HEADERS["limits.h"] = NVRTC_HEADERS["climits"]
NVRTC_HEADERS["math.h"] = NVRTC_HEADERS["cmath"]


def _check(r: Any, what: str) -> Any:
    """The values after a cuda-bindings call's status (raises on an error)."""
    err, *rest = r if isinstance(r, tuple) else (r,)
    if int(err) != 0:
        raise RuntimeError(f"{what} failed: {err!r}")
    return rest[0] if len(rest) == 1 else rest


def nvrtc_ptx(path: Path, names: list[str], arch: str, include: str) -> tuple[bytes, dict[str, str]]:
    """PTX of the CUDA file ``path`` built by NVRTC with ``--fmad=false`` for ``arch``
    (``compute_90``), and the lowered (mangled) name of each kernel in ``names``."""
    from cuda.bindings import nvrtc

    prog = _check(nvrtc.nvrtcCreateProgram(path.read_bytes(), path.name.encode(), 0, [], []), "nvrtcCreateProgram")
    for n in names:
        _check(nvrtc.nvrtcAddNameExpression(prog, n.encode()), "nvrtcAddNameExpression")
    opts = [b"--fmad=false", f"-arch={arch}".encode(), f"-I{path.parent}".encode(), f"-I{include}".encode(),
            b"-std=c++17"]
    res = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
    size = _check(nvrtc.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize")
    log = bytearray(size)  # not b" " * size: for size 1 that is the shared b" ", which NVRTC would overwrite
    nvrtc.nvrtcGetProgramLog(prog, log)
    if int(res[0]) != 0:
        raise RuntimeError(f"NVRTC could not build {path.name}:\n{log.decode(errors='replace')}")
    lowered = {n: _check(nvrtc.nvrtcGetLoweredName(prog, n.encode()), "nvrtcGetLoweredName").decode() for n in names}
    size = _check(nvrtc.nvrtcGetPTXSize(prog), "nvrtcGetPTXSize")
    ptx = bytearray(size)
    _check(nvrtc.nvrtcGetPTX(prog, ptx), "nvrtcGetPTX")
    return bytes(ptx), lowered


def kernel_names() -> dict[str, list[str]]:
    """The kernels each suite file's cases launch (found by running ``prepare`` with a recorder)."""
    class Rec:
        def __init__(self) -> None:
            self.seen: dict[str, list[str]] = {}

        def kernel(self, file: str, name: str) -> tuple[str, str]:
            self.seen.setdefault(file, [])
            if name not in self.seen[file]:
                self.seen[file].append(name)
            return (file, name)

        def array(self, a: np.ndarray) -> np.ndarray:
            return a

    rec = Rec()
    for case in CASES:
        case.prepare(rec, case.make(np.random.default_rng(0), "test"))
    return rec.seen


# ----------------------------------------------------------------------------- runners (torch CUDA tensors)

class TorchArrays:
    """Device arrays as torch CUDA tensors (structured and bool NumPy arrays as raw bytes)."""

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        self.dtypes: dict[int, np.dtype] = {}

    def array(self, a: np.ndarray) -> Any:
        a = np.ascontiguousarray(a)
        raw = a.dtype.fields is not None or a.dtype == np.bool_
        host = self.torch.from_numpy(a.view(np.uint8).copy() if raw else a.copy())
        t = host.to("cuda")
        self.dtypes[id(t)] = a.dtype
        t._aw_shape = a.shape  # type: ignore[attr-defined]
        return t

    def numpy(self, t: Any) -> np.ndarray:
        a = t.cpu().numpy()
        dt = self.dtypes.get(id(t))
        if dt is not None and (dt.fields is not None or dt == np.bool_):
            a = a.view(dt)
        return a.reshape(getattr(t, "_aw_shape", a.shape))

    def copy_in(self, t: Any, a: np.ndarray) -> None:
        a = np.ascontiguousarray(a)
        t.copy_(self.torch.from_numpy(a.view(np.uint8) if a.dtype.fields is not None else a).reshape(t.shape))


class AnywaveRunner(TorchArrays):
    def __init__(self, torch: Any, aw: Any) -> None:
        super().__init__(torch)
        self.aw = aw
        self.kernels: dict[tuple[str, str], Any] = {}

    def kernel(self, file: str, name: str) -> Any:
        if (file, name) not in self.kernels:
            self.kernels[(file, name)] = self.aw.cuda_kernel(HERE / file, name)
        return self.kernels[(file, name)]

    def launch(self, k: Any, grid: Any, block: Any, *args: Any, shared: int = 0, **constants: Any) -> None:
        args = tuple(self._view(k, i, a) for i, a in enumerate(args))
        constants = {n: self._view(k, n, a) for n, a in constants.items()}
        k(*args, grid=grid, workgroup=block, target="cuda", shared_bytes=shared, **constants)

    def _view(self, k: Any, which: Any, a: Any) -> Any:
        """A raw-byte tensor (structs, bools) as the buffer's ABI element type."""
        if not isinstance(a, self.torch.Tensor):
            return a
        p = k.params[which] if isinstance(which, int) else next(q for q in k.params if q.name == which)
        want = {"u8": self.torch.uint8}.get(p.ann.elem.name)
        if a.dtype == self.torch.uint8 and want is None:
            return a.view(getattr(self.torch, {"f32": "float32", "i32": "int32", "u32": "uint32"}[p.ann.elem.name]))
        return a


class NvrtcRunner(TorchArrays):
    """Kernels from NVRTC's PTX, launched with cuLaunchKernel on torch's current stream."""

    CT = {"i32": ctypes.c_int, "u32": ctypes.c_uint, "i64": ctypes.c_longlong, "u64": ctypes.c_ulonglong,
          "f32": ctypes.c_float, "f64": ctypes.c_double}

    def __init__(self, torch: Any, aw: Any, arch: str, include: str) -> None:
        super().__init__(torch)
        from cuda.bindings import driver

        self.driver = driver
        self.aw = aw
        self.arch, self.include = arch, include
        self.modules: dict[str, tuple[Any, dict[str, str]]] = {}
        self.kernels: dict[tuple[str, str], Any] = {}
        self.names = kernel_names()
        # torch's device, through its primary context (the one torch's tensors live in)
        _check(driver.cuInit(0), "cuInit")
        dev = _check(driver.cuDeviceGet(torch.cuda.current_device()), "cuDeviceGet")
        self.context = _check(driver.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")

    def kernel(self, file: str, name: str) -> Any:
        key = (file, name)
        if key not in self.kernels:
            if file not in self.modules:
                ptx, lowered = nvrtc_ptx(HERE / file, self.names[file], self.arch, self.include)
                _check(self.driver.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")
                image = np.frombuffer(ptx, dtype=np.uint8).copy()  # NUL-terminated PTX text
                mod = _check(self.driver.cuModuleLoadData(image.ctypes.data), "cuModuleLoadData")
                self._images = getattr(self, "_images", []) + [image]
                self.modules[file] = (mod, lowered)
            mod, lowered = self.modules[file]
            fn = _check(self.driver.cuModuleGetFunction(mod, lowered[name].encode()), "cuModuleGetFunction")
            params = self.aw.cuda_kernel(HERE / file, name).params  # the C signature's types
            self.kernels[key] = (fn, mod, params)
        return self.kernels[key]

    def launch(self, k: Any, grid: Any, block: Any, *args: Any, shared: int = 0, **constants: Any) -> None:
        fn, mod, params = k
        stream = self.torch.cuda.current_stream().cuda_stream
        _check(self.driver.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")
        for name, t in constants.items():
            ptr, size = _check(self.driver.cuModuleGetGlobal(mod, name.encode()), "cuModuleGetGlobal")
            nbytes = min(int(size), t.numel() * t.element_size())
            _check(self.driver.cuMemcpyDtoDAsync(ptr, self.driver.CUdeviceptr(t.data_ptr()), nbytes,
                                                 self.driver.CUstream(stream)), "cuMemcpyDtoDAsync")
        vals, types = [], []
        for p, a in zip(params, args, strict=False):
            if p.kind == "buffer":
                vals.append(a.data_ptr())
                types.append(ctypes.c_void_p)
            else:
                vals.append(a)
                types.append(self.CT[p.ann.name])
        g = tuple(grid) + (1,) * (3 - len(grid)) if isinstance(grid, tuple) else (grid, 1, 1)
        b = tuple(block) + (1,) * (3 - len(block)) if isinstance(block, tuple) else (block, 1, 1)
        _check(self.driver.cuLaunchKernel(fn, *g, *b, shared, self.driver.CUstream(stream),
                                          (tuple(vals), tuple(types)), 0), "cuLaunchKernel")


def _bits(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    return a.view(np.uint8)


def _same(a: np.ndarray, b: np.ndarray) -> tuple[bool, int]:
    x, y = _bits(a), _bits(b)
    if x.shape != y.shape:
        return False, -1
    return bool(np.array_equal(x, y)), int((x != y).sum())


def timed(torch: Any, case: Any, runner: Any, inputs: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    """(milliseconds, outputs) of one run: prepare (untimed), then run between CUDA events."""
    state = case.prepare(runner, inputs)
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    out = case.run(runner, state)
    e1.record()
    torch.cuda.synchronize()
    return e0.elapsed_time(e1), out


ADD_CU = r"""
__global__ void add_plain(const float* x, const float* y, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] + y[i];
}
"""


def interleaved_medians(torch: Any, runs: dict[str, Any], reps: int) -> dict[str, float]:
    """Milliseconds of each ``runs[name]()`` (a launch on torch's current stream): CUDA events
    around each call, the runs interleaved ``reps`` times, the median per name."""
    times: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(reps):
        for k, f in runs.items():
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            f()
            e1.record()
            torch.cuda.synchronize()
            times[k].append(e0.elapsed_time(e1))
    return {k: statistics.median(v) for k, v in times.items()}


def plain_add(torch: Any, aw: Any, arch: str, include: str, reps: int) -> dict[str, Any]:
    """Issue 28's element-wise add over 2^28 floats written the plain way (one element per
    thread, 256 threads per workgroup): torch.add, the CUDA source built by NVRTC, the same source
    by anywave's CUDA front end, and the Python-language kernel; medians of ``reps`` interleaved
    runs (CUDA events around each launch), each result compared bit for bit with torch's."""
    n = 1 << 28
    g = torch.Generator(device="cuda").manual_seed(28)
    x = torch.randn(n, device="cuda", generator=g)
    y = torch.randn(n, device="cuda", generator=g)
    out = torch.empty_like(x)

    @aw.kernel
    def add_py(x: aw.In[aw.f32], y: aw.In[aw.f32], out: aw.Out[aw.f32], n: aw.i32):
        i = aw.global_id(0)
        if i < n:
            out[i] = x[i] + y[i]

    with tempfile.TemporaryDirectory() as d:
        src = Path(d, "add_plain.cu")
        src.write_text(ADD_CU)
        ptx, lowered = nvrtc_ptx(src, ["add_plain"], arch, include)
    from cuda.bindings import driver

    image = np.frombuffer(ptx, dtype=np.uint8).copy()
    mod = _check(driver.cuModuleLoadData(image.ctypes.data), "cuModuleLoadData")
    fn = _check(driver.cuModuleGetFunction(mod, lowered["add_plain"].encode()), "cuModuleGetFunction")
    awc = aw.cuda_kernel(ADD_CU, "add_plain")
    grid = (n + 255) // 256

    def nvrtc() -> None:
        stream = torch.cuda.current_stream().cuda_stream
        _check(driver.cuLaunchKernel(fn, grid, 1, 1, 256, 1, 1, 0, driver.CUstream(stream),
                                     ((x.data_ptr(), y.data_ptr(), out.data_ptr(), n),
                                      (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int)), 0),
               "cuLaunchKernel")

    runs = {"torch_add": lambda: torch.add(x, y, out=out), "nvrtc": nvrtc,
            "anywave_cuda": lambda: awc(x, y, out, n, grid=grid, workgroup=256, target="cuda"),
            "anywave_python": lambda: add_py(x, y, out, n, grid=grid, workgroup=256, target="cuda")}
    ref = x + y
    row: dict[str, Any] = {"n": n, "workgroup": 256}
    for k, f in runs.items():  # warm-up (compiles), and the bits
        out.zero_()
        f()
        torch.cuda.synchronize()
        row[f"{k}_same_bits_as_torch"] = bool(torch.equal(out.view(torch.int32), ref.view(torch.int32)))
    med = interleaved_medians(torch, runs, reps)
    row.update({f"{k}_ms": v for k, v in med.items()})
    row.update({f"{k}_over_torch": med["torch_add"] / med[k] for k in runs if k != "torch_add"})
    row["tb_per_s"] = {k: 12 * n / (v * 1e-3) / 1e12 for k, v in med.items()}
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--cases", default="", help="comma-separated case names (default: all)")
    ap.add_argument("--size", default="bench", choices=("bench", "test"))
    ap.add_argument("--nvrtc-only", action="store_true", help="build every file with NVRTC to PTX and stop")
    ap.add_argument("--no-add", dest="add", action="store_false",
                    help="skip the plain element-wise add over 2^28 floats (torch.add, NVRTC, anywave)")
    a = ap.parse_args()
    include = tempfile.mkdtemp(prefix="aw_nvrtc_include_")
    for name, text in NVRTC_HEADERS.items():
        Path(include, name).write_text(text)
    if a.nvrtc_only:
        for file, names in kernel_names().items():
            ptx, lowered = nvrtc_ptx(HERE / file, names, "compute_90", include)
            print(f"{file}: {len(ptx)} bytes of PTX; {lowered}")
        return 0

    import torch

    import anywave as aw

    if not torch.cuda.is_available():
        print("no CUDA device (torch.cuda.is_available() is False); --nvrtc-only builds the PTX alone")
        return 2
    torch.zeros(1, device="cuda")  # the primary context, current on this thread (cuModuleLoadData needs it)
    major, minor = torch.cuda.get_device_capability()
    arch = f"compute_{major}{minor}"
    wanted = {c for c in a.cases.split(",") if c}
    cases = [c for c in CASES if not wanted or c.name in wanted]
    results = []
    for case in cases:
        row: dict[str, Any] = {"case": case.name, "file": case.file, "w_dependent": case.w_dependent}
        try:
            awr, nvr = AnywaveRunner(torch, aw), NvrtcRunner(torch, aw, arch, include)
            # 1. correctness at the test size against the NumPy reference (W = 32)
            small = case.make(np.random.default_rng(sum(map(ord, case.name))), "test")
            exp = case.reference(small, 32)
            for label, r in (("anywave", awr), ("nvrtc", nvr)):
                out = case.execute(r, small)
                bad = [n for n, e in exp.items() if not _same(r.numpy(out[n]), e)[0]]
                row[f"{label}_matches_reference"] = not bad
                if bad:
                    row[f"{label}_reference_mismatch"] = bad
            # 2. the timed comparison
            inputs = case.make(np.random.default_rng(1), a.size)
            timed(torch, case, awr, inputs)  # warm-up (anywave compiles at its first launch)
            timed(torch, case, nvr, inputs)
            t_aw, t_nv = [], []
            out_aw = out_nv = None
            for _ in range(a.reps):
                ms, out_aw = timed(torch, case, awr, inputs)
                t_aw.append(ms)
                ms, out_nv = timed(torch, case, nvr, inputs)
                t_nv.append(ms)
            same, diff = True, {}
            for n in out_aw:
                ok, nd = _same(awr.numpy(out_aw[n]), nvr.numpy(out_nv[n]))
                same &= ok
                if not ok:
                    diff[n] = nd
            row.update(anywave_ms=statistics.median(t_aw), nvrtc_ms=statistics.median(t_nv), anywave_all_ms=t_aw,
                       nvrtc_all_ms=t_nv, same_bits=same, differing_bytes=diff,
                       speed=statistics.median(t_nv) / statistics.median(t_aw))
        except Exception as e:  # noqa: BLE001 - one case's failure is recorded, the others still run
            row["error"] = f"{type(e).__name__}: {e}"
        print(json.dumps({k: v for k, v in row.items() if not k.endswith("_all_ms")}), flush=True)
        results.append(row)
    add_row: dict[str, Any] = {}
    if a.add:
        try:
            add_row = plain_add(torch, aw, arch, include, max(a.reps, 10))
        except Exception as e:  # noqa: BLE001 - recorded, the suite's figures still count
            add_row = {"error": f"{type(e).__name__}: {e}"}
        print(json.dumps(add_row), flush=True)
    speeds = [r["speed"] for r in results if "speed" in r]
    commit = os.environ.get("ANYWAVE_COMMIT", "")  # the tree sent to a device machine (its git HEAD may be stale)
    try:
        commit = commit or subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                                          check=False).stdout.strip()
    except OSError:
        commit = ""
    doc = {
        "bench": "bench_cuda_suite", "device": torch.cuda.get_device_name(), "arch": arch, "commit": commit,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "size": a.size, "reps": a.reps, "nvrtc_options": ["--fmad=false", f"-arch={arch}", "-std=c++17"],
        "geomean_speed": math.exp(sum(map(math.log, speeds)) / len(speeds)) if speeds else None,
        "min_speed": min(speeds) if speeds else None,
        "all_same_bits": all(r.get("same_bits") for r in results),
        "cases": results,
        "plain_add_2_28": add_row,
    }
    out_dir = Path(os.environ.get("OUT") or ROOT / "bench" / "results")
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "cuda_suite.json"
    path.write_text(json.dumps(doc, indent=1))
    print(f"geomean speed (NVRTC ms / anywave ms): {doc['geomean_speed']}; min {doc['min_speed']}; "
          f"all the same bits: {doc['all_same_bits']}; wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
