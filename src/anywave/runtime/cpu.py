"""The ``cpu`` target (issue 29): WAVE compiled to native code by the C compiler already on the
machine, run on every core, bit-identical to the emulator.

:mod:`anywave.backends.cpu` writes C (each value a vector of the workgroup's lanes); this
module compiles it with ``cc`` (``$CC``, else ``cc``, ``gcc`` or ``clang`` on ``PATH``) into a
shared object cached under the anywave cache (``<cache>/cpu``, keyed by the C text's hash, the
compiler's version, the flags and the host CPU), loads it with ctypes and runs workgroups on a
pool of threads (ctypes releases the GIL during the call), one range of workgroups per task.

Compiler flags (:data:`CFLAGS`): ``-O3 -march=native`` (the host's vector units),
``-ffp-contract=off`` (no fused multiply-add unless the kernel wrote ``fma``),
``-fno-fast-math``, ``-fno-math-errno`` (libm's ``sqrt`` may be a vector instruction; errno is
never read), ``-fwrapv -fno-strict-aliasing`` (integer wrap-around and the buffers' bytes read
through several types are defined, as the prelude assumes). A library whose C text exceeds
:data:`LARGE_SOURCE_BYTES` is compiled at ``-O1`` instead (:func:`cflags`): GCC's time on huge
straight-line functions grows far faster than the code improves — the conformance group
``alu_literal`` (1.8 MB of C, ten kernels of ~580 instructions each) took 72 s at ``-O3``, 66 s at
``-O2`` and 17 s at ``-O1`` with GCC 12.2 on a 2-core host. The level changes no result: the
flags above leave GCC no licence to change a value at any level (no contraction, no fast-math,
defined wrap-around and aliasing).

Safety: kernels run the bounds-checked build unless ``check=False`` (an out-of-bounds access
raises :class:`~anywave.errors.OutOfBoundsError` after the launch, naming buffer, offset and
line, and never writes into the process); a divergent barrier raises :class:`CpuError`; Ctrl-C
stops a running launch (every loop back-edge polls a stop flag) and raises
``KeyboardInterrupt``. A kernel that loops forever runs until interrupted, like on the other
compiled targets.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import wait as fwait
from pathlib import Path
from typing import Any

import numpy as np

from anywave.errors import WaveError
from anywave.isa.types import Access, Capability
from anywave.runtime.driver import Driver
from anywave.runtime.targets import RunnerTarget

#: flags every kernel library is compiled with (module docs)
CFLAGS = ("-O3", "-march=native", "-ffp-contract=off", "-fno-fast-math", "-fno-math-errno", "-fno-trapping-math",
          "-fwrapv",
          "-fno-strict-aliasing", "-fPIC", "-shared", "-w")
#: C text larger than this (bytes) compiles at -O1 (module docs)
LARGE_SOURCE_BYTES = 256 << 10


def cflags(text: str) -> tuple[str, ...]:
    """The compiler flags for C ``text``: :data:`CFLAGS`, with ``-O1`` for ``-O3`` when the text
    exceeds :data:`LARGE_SOURCE_BYTES` (module docs)."""
    if len(text) <= LARGE_SOURCE_BYTES:
        return CFLAGS
    return tuple("-O1" if f == "-O3" else f for f in CFLAGS)


#: the most threads one workgroup may have on this target
MAX_WORKGROUP = 1024
#: bytes of local memory per workgroup
LOCAL_MEMORY = 65536
#: stack of each worker thread (lane state lives there: registers x lanes)
STACK_BYTES = 64 << 20


class CpuError(WaveError):
    """The cpu target cannot run here (no C compiler) or a launch failed; the message says why."""


def find_compiler() -> str | None:
    """The C compiler the cpu target uses: ``$CC`` if set, else the first of ``cc``, ``gcc``,
    ``clang`` on ``PATH``; None when there is none."""
    env = os.environ.get("CC", "").strip()
    if env:
        return shutil.which(env.split()[0]) and env
    for c in ("cc", "gcc", "clang"):
        if shutil.which(c):
            return c
    return None


class CpuDevice:
    """The host CPU as a device: the compiler, its version, the worker pool and the libraries."""

    def __init__(self) -> None:
        cc = find_compiler()
        if cc is None:
            raise CpuError("the cpu target needs a C compiler and none was found: set CC, or install one "
                           "(cc, gcc or clang on PATH; e.g. 'apt install gcc', 'xcode-select --install')")
        self.cc = cc
        try:
            r = subprocess.run([*cc.split(), "--version"], capture_output=True, text=True, timeout=30)
            self.cc_version = (r.stdout or r.stderr).splitlines()[0] if (r.stdout or r.stderr) else cc
        except (OSError, subprocess.SubprocessError) as e:
            raise CpuError(f"the C compiler {cc!r} does not run: {e}") from e
        self.cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        self.name = f"{_cpu_model()} ({self.cores} cores, {self.cc_version})"
        self.fp64 = True
        from anywave.backends.cfamily import Features
        from anywave.backends.cpu import WAVE_WIDTHS

        self.features = Features(fp64=True, wave_widths=WAVE_WIDTHS)
        self.local_memory = LOCAL_MEMORY
        self.max_workgroup = MAX_WORKGROUP
        self._libs: dict[str, Any] = {}
        self._by_program: dict[int, tuple[Any, Any]] = {}
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()

    def capabilities(self) -> Capability:
        return (Capability.F16 | Capability.BF16 | Capability.INT64 | Capability.OFFSET64 | Capability.ATOMIC_F32
                | Capability.F64 | Capability.WAVE_OPS)

    def pool(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                old = threading.stack_size()
                threading.stack_size(STACK_BYTES)
                try:
                    self._pool = ThreadPoolExecutor(self.cores, thread_name_prefix="anywave-cpu")
                    # start the threads now, while the stack size holds
                    fwait([self._pool.submit(lambda: None) for _ in range(self.cores)])
                finally:
                    threading.stack_size(old)
            return self._pool

    def library_of(self, program: Any) -> Any:
        """The loaded shared object of a rendered program (looked up once per program object)."""
        ent = self._by_program.get(id(program))
        if ent is not None and ent[0] is program:
            return ent[1]
        lib = self.library(program.text)
        self._by_program[id(program)] = (program, lib)
        return lib

    def library(self, text: str) -> Any:
        """The loaded shared object of C ``text`` (compiled once, cached on disk)."""
        parts = [text, self.cc_version, " ".join(cflags(text)), _cpu_flags()]
        key = hashlib.sha256("\0".join(parts).encode()).hexdigest()
        with self._lock:
            lib = self._libs.get(key)
            if lib is None:
                lib = self._libs[key] = ctypes.CDLL(str(self._build(text, key)))
            return lib

    def _build(self, text: str, key: str) -> Path:
        from anywave.cache import CacheSecurityError, atomic_write, safe_subdir, verified_read

        d = safe_subdir("cpu")
        out = d / f"k_{key[:32]}.so"
        if out.exists():
            try:
                if verified_read(out) is not None:
                    return out
            except CacheSecurityError:
                raise
            except OSError:
                pass
        with tempfile.TemporaryDirectory(prefix="anywave-cpu-") as tmp:
            src, so = Path(tmp) / "k.c", Path(tmp) / "k.so"
            src.write_text(text)
            cmd = [*self.cc.split(), *cflags(text), str(src), "-o", str(so), "-lm"]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                raise CpuError(f"compiling a kernel library with {self.cc!r} failed (exit {r.returncode}): "
                               f"{(r.stderr or r.stdout)[:3000]}")
            atomic_write(out, so.read_bytes(), record_hash=True)
        return out


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "host CPU"


@functools.cache
def _cpu_flags() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return hashlib.sha256(line.encode()).hexdigest()
    except OSError:
        pass
    return platform.machine()


_DEVICE: CpuDevice | None = None
_DEVICE_ERR: str | None = None
_DLOCK = threading.Lock()


def get_device() -> CpuDevice:
    """The process-wide cpu device. Raises CpuError when there is no usable C compiler."""
    global _DEVICE, _DEVICE_ERR
    with _DLOCK:
        if _DEVICE is None and _DEVICE_ERR is None:
            try:
                _DEVICE = CpuDevice()
            except CpuError as e:
                _DEVICE_ERR = str(e)
        if _DEVICE is None:
            raise CpuError(_DEVICE_ERR or "cpu target unavailable")
        return _DEVICE


def status() -> tuple[bool, str]:
    """(usable, reason) of the cpu target; never raises."""
    try:
        return True, get_device().name
    except CpuError as e:
        return False, str(e)


_FN = ctypes.CFUNCTYPE  # noqa: F841 - kept for readers: the kernel signature is below
_ARGTYPES = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32,
             ctypes.c_void_p, ctypes.c_void_p]


class CpuRunner(Driver):
    """The ``cpu`` target's driver and a conformance runner:
    ``runner(module, kernel, grid, workgroup, args, wave_width)`` runs ``kernel`` with NumPy
    ``args`` updated in place."""

    error = CpuError
    check_default = True

    def __init__(self, device: CpuDevice | None = None) -> None:
        super().__init__()
        self.dev = device or get_device()

    def translate(self, module: Any, wave_width: int, checked: bool) -> Any:
        from anywave.backends.cpu import translate

        return translate(module, wave_width, checked=checked)

    def __call__(self, module: Any, kernel: str, grid: Sequence[int], workgroup: Sequence[int],
                 args: dict[str, Any], wave_width: int, *, sync: bool = True, check: bool | None = None,
                 **_: Any) -> None:
        """Run ``kernel`` (synchronous; ``sync`` is accepted for the target protocol).

        Raises:
            OutOfBoundsError: (checked build, the default) a memory access left its buffer.
            CpuError: a divergent barrier, a compile failure, a refused kernel, bad arguments.
            KeyboardInterrupt: Ctrl-C during the launch (the launch is stopped)."""
        launch = self.prepare(module, kernel, grid, workgroup, args, wave_width, check)
        if launch.dims is None:
            return
        info, k, margs = launch.info, launch.kernel, launch.margs
        P = launch.threads
        if info.frame_bytes(P) > STACK_BYTES // 2:
            raise CpuError(f"kernel {kernel!r} needs {info.frame_bytes(P)} bytes of lane state per workgroup of {P} "
                           f"threads; the cpu target's worker stacks hold {STACK_BYTES // 2}")
        lib = self.dev.library_of(launch.program)
        fn = getattr(lib, info.c_name)
        fn.argtypes, fn.restype = _ARGTYPES, ctypes.c_int
        nb = len(k.args)
        ptrs = (ctypes.c_void_p * max(nb, 1))()
        sizes = np.zeros(max(nb, 1), np.uint64)
        scal = np.zeros(max(nb, 1), np.uint64)
        back: list[tuple[np.ndarray, np.ndarray]] = []
        keep: list[np.ndarray] = []
        pad = np.zeros(16, np.uint8)
        for i, (kind, v, a) in enumerate(margs):
            if kind != "buffer":
                scal[i] = int(v)
                continue
            if not isinstance(v, np.ndarray):
                raise CpuError(f"buffer argument {a.name!r} of kernel {kernel!r} is a {type(v).__name__}; the cpu "
                               "target takes NumPy arrays or host-memory arrays")
            written = a.access is not Access.READ and v.size > 0
            host = v if v.flags.c_contiguous else np.ascontiguousarray(v)
            if written and not host.flags.writeable:
                raise CpuError(f"buffer argument {a.name!r} of kernel {kernel!r} is written but the array is "
                               "read-only")
            if host is not v and written:
                back.append((v, host))
            keep.append(host)
            ptrs[i] = host.ctypes.data if host.size else pad.ctypes.data
            sizes[i] = host.nbytes
        g3, wg = launch.grid, launch.workgroup
        dims = np.array([wg[0], wg[1], wg[2], g3[0], g3[1], g3[2], P], np.uint32)
        err = np.zeros(8, np.uint32)
        stop = np.zeros(1, np.int32)
        G = g3[0] * g3[1] * g3[2]
        parts = min(G, self.dev.cores * 4) if G > 1 else 1
        bounds = [G * j // parts for j in range(parts + 1)]
        call_args = (ctypes.cast(ptrs, ctypes.c_void_p), sizes.ctypes.data, scal.ctypes.data, dims.ctypes.data)

        def run(lo: int, hi: int) -> int:
            return int(fn(*call_args, lo, hi, err.ctypes.data, stop.ctypes.data))

        pool = self.dev.pool()
        futs = [pool.submit(run, bounds[j], bounds[j + 1]) for j in range(parts) if bounds[j + 1] > bounds[j]]
        try:
            pending = set(futs)
            while pending:
                _done, pending = fwait(pending, timeout=0.05)
        except BaseException:
            stop[0] = 1  # every loop back-edge and workgroup start polls it
            fwait(futs)
            raise
        rcs = [f.result() for f in futs]
        for orig, host in back:
            orig[...] = host
        if int(err[0]) == 2:
            from anywave.backends.cpu import ERR_DIVERGENT_BARRIER  # noqa: F401 - the code's meaning

            site = info.sites[int(err[4])] if int(err[4]) < len(info.sites) else None
            where = site.describe() if site is not None else "a barrier"
            raise CpuError(f"divergent barrier in kernel {kernel!r} on the cpu target at {where}: in workgroup "
                           f"{int(err[3])} {int(err[1])} of {int(err[2])} threads arrived; every thread of a "
                           "workgroup must reach the same barrier")
        if int(err[0]) == 1:
            from anywave.backends.bounds import raise_if_failed

            raise_if_failed(err, k, info.sites, launch.bounds_sizes(), info.local_memory, f"cpu ({self.dev.name})")
        if any(rc == 1 for rc in rcs):  # pragma: no cover - only with a stop and no exception
            raise KeyboardInterrupt


def cpu_runner() -> CpuRunner:
    """A conformance runner on the cpu target. Raises CpuError without a C compiler."""
    return CpuRunner()


class CpuTarget(RunnerTarget):
    """The ``cpu`` target for :mod:`anywave.runtime.targets`: ``info`` and ``launch``."""

    name = "cpu"

    def make_runner(self) -> CpuRunner:
        return CpuRunner()


def register() -> None:
    """Register the ``cpu`` target with :mod:`anywave.runtime.targets`."""
    CpuTarget.register(status)
