"""The ``cpu`` target (issue 29): WAVE compiled to native code by the C compiler already on the
machine, run on every core, bit-identical to the emulator.

:mod:`anywave.backends.cpu` writes C (each value a vector of the workgroup's lanes); this
module compiles it with ``cc`` (``$CC``, else ``cc``, ``gcc`` or ``clang`` on ``PATH``) into a
shared object cached under the anywave cache (``<cache>/cpu``, keyed by the C text's hash, the
compiler's version, the flags and the host CPU), loads it with ctypes and runs workgroups on a
pool of threads written in C (:data:`POOL_C`, compiled and cached the same way): the pool's
threads claim grains of workgroups through an atomic counter; the launching thread claims
grains too when the kernel has no loop (its run time is bounded by its size), and otherwise
waits in 50 ms slices so that Ctrl-C is seen. A launch reuses everything that depends only on
(module, kernel, grid, workgroup, W, build) and checks only the arguments
(:meth:`CpuRunner.__call__`).

Compiler flags (:data:`CFLAGS`): ``-O3 -march=native`` (the host's vector units),
``-ffp-contract=off`` (no fused multiply-add unless the kernel wrote ``fma``),
``-fno-fast-math``, ``-fno-math-errno`` (libm's ``sqrt`` may be a vector instruction; errno is
never read), ``-fno-trapping-math`` (floating-point exceptions are never read: the compiler may
evaluate an operation whose lane does not execute it; no value changes), ``-fwrapv
-fno-strict-aliasing`` (integer wrap-around and the buffers' bytes read
through several types are defined, as the prelude assumes). A library whose C text exceeds
:data:`LARGE_SOURCE_BYTES` is compiled at ``-O1`` instead, and every library at ``-O0`` under
``ANYWAVE_TARGET_OPT=0`` (:func:`cflags`, :func:`anywave.runtime.targets.optimize_target_code`): GCC's time on huge
straight-line functions grows far faster than the code improves — the conformance group
``alu_literal`` (1.8 MB of C, ten kernels of ~580 instructions each) took 72 s at ``-O3``, 66 s at
``-O2`` and 17 s at ``-O1`` with GCC 12.2 on a 2-core host. The level changes no result: the
flags above leave GCC no licence to change a value at any level (no contraction, no fast-math,
defined wrap-around and aliasing).

Precompiled header: every program of the backend begins with the same C text
(:data:`anywave.backends.cpu.PREFIX`: the header, the C-family prelude and the vector helpers,
whose ``<immintrin.h>`` alone is ~0.8 s of GCC's parsing at ``-march=native``). With GCC the
runtime compiles that text once into a precompiled header under ``<cache>/cpu`` (keyed by the
text, the compiler, the flags and the host CPU; written atomically with its SHA-256, verified
before first use in a process, rebuilt when damaged; made when a process builds its second
library in that cache, ~1 s and ~27 MB) and compiles each program's kernels with ``-include`` of
it: a small kernel's library then builds in ~0.2 s instead of ~0.7 s (2-core
host, GCC 12.2). The machine code is the same (GCC reads the header's declarations from the
precompiled form instead of parsing them; where it finds that form unusable it parses the header
text itself, which is the same text). ``ANYWAVE_CPU_PCH=0`` turns it off; other compilers compile
the whole text.

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
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from anywave.errors import WaveError
from anywave.isa.types import Access, ArgKind, Capability
from anywave.runtime.driver import Driver
from anywave.runtime.targets import RunnerTarget

#: flags every kernel library is compiled with (module docs)
CFLAGS = ("-O3", "-march=native", "-ffp-contract=off", "-fno-fast-math", "-fno-math-errno", "-fno-trapping-math",
          "-fwrapv",
          "-fno-strict-aliasing", "-fPIC", "-shared", "-w")
#: C text larger than this (bytes) compiles at -O1 (module docs)
LARGE_SOURCE_BYTES = 256 << 10


def cflags(text: str, optimize: bool | None = None) -> tuple[str, ...]:
    """The compiler flags for C ``text``: :data:`CFLAGS`, with ``-O1`` for ``-O3`` when the text
    exceeds :data:`LARGE_SOURCE_BYTES` (module docs), and ``-O0`` whatever its size when
    ``optimize`` is False (None: :func:`anywave.runtime.targets.optimize_target_code`)."""
    if optimize is None:
        from anywave.runtime.targets import optimize_target_code

        optimize = optimize_target_code()
    if optimize and len(text) <= LARGE_SOURCE_BYTES:
        return CFLAGS
    level = "-O1" if optimize else "-O0"
    return tuple(level if f == "-O3" else f for f in CFLAGS)


#: the most threads one workgroup may have on this target
MAX_WORKGROUP = 1024
#: bytes of local memory per workgroup
LOCAL_MEMORY = 65536
#: stack of each worker thread (lane state lives there: registers x lanes)
STACK_BYTES = 64 << 20


#: the worker pool (C, compiled and cached like a kernel library): the workgroups of a launch are
#: claimed in grains by the pool's threads through an atomic counter; the launching thread waits
#: in C in slices of ``timeout_ms`` and comes back to Python between them, so Ctrl-C is seen
POOL_C = r"""
#include <pthread.h>
#include <stdint.h>
#include <time.h>
#include <errno.h>
typedef int (*aw_kfn)(uint8_t **, const uint64_t *, const uint64_t *, const uint32_t *, uint32_t, uint32_t,
                      uint32_t *, volatile int *);
typedef struct {
  aw_kfn fn; uint8_t **bufs; const uint64_t *sizes; const uint64_t *scal; const uint32_t *dims;
  uint32_t *err; volatile int *stop; uint32_t G, grain;
  uint64_t next;  /* 64 bits: the claims pass 2^32 when G is near it (up to 2^32 - 1 workgroups) */
  uint32_t done; int rc, users;
} aw_job;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv_work = PTHREAD_COND_INITIALIZER, cv_done = PTHREAD_COND_INITIALIZER;
static aw_job *cur; static uint64_t gen; static int nthreads;
static void child(void) {
  pthread_mutex_init(&mu, 0); pthread_cond_init(&cv_work, 0); pthread_cond_init(&cv_done, 0);
  cur = 0; nthreads = 0;
}
static void run_job(aw_job *j) {
  for (;;) {
    const uint64_t lo = __atomic_fetch_add(&j->next, (uint64_t)j->grain, __ATOMIC_RELAXED);
    if (lo >= j->G) return;
    const uint32_t hi = lo + j->grain < j->G ? (uint32_t)(lo + j->grain) : j->G;
    int rc = j->fn(j->bufs, j->sizes, j->scal, j->dims, (uint32_t)lo, hi, j->err, j->stop);
    if (rc) __atomic_or_fetch(&j->rc, 1 << rc, __ATOMIC_RELAXED);
    if (__atomic_add_fetch(&j->done, hi - lo, __ATOMIC_ACQ_REL) == j->G) {
      pthread_mutex_lock(&mu); pthread_cond_broadcast(&cv_done); pthread_mutex_unlock(&mu);
    }
  }
}
static void *worker(void *arg) {
  (void)arg;
  uint64_t seen = 0;
  pthread_mutex_lock(&mu);
  for (;;) {
    while (gen == seen) pthread_cond_wait(&cv_work, &mu);
    seen = gen;
    aw_job *j = cur;
    if (j) ++j->users;  /* the launching thread waits for users to leave before freeing the job */
    pthread_mutex_unlock(&mu);
    if (j) run_job(j);
    pthread_mutex_lock(&mu);
    if (j && --j->users == 0) pthread_cond_broadcast(&cv_done);
  }
  return 0;
}
/* start the pool's threads (once); 0 on success */
int aw_pool_init(int n, uint64_t stack) {
  static int registered = 0;
  if (!registered) { pthread_atfork(0, 0, child); registered = 1; }
  if (nthreads) return 0;
  pthread_attr_t at; pthread_attr_init(&at); pthread_attr_setstacksize(&at, stack);
  pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
  for (int i = 0; i < n; ++i) {
    pthread_t t;
    if (pthread_create(&t, &at, worker, 0)) { pthread_attr_destroy(&at); return -1; }
  }
  pthread_attr_destroy(&at);
  nthreads = n;
  return 0;
}
/* offer the job to the pool's threads, waking `wake` of them (a thread already awake takes it too) */
void aw_pool_start(aw_job *j, int wake) {
  pthread_mutex_lock(&mu); cur = j; ++gen;
  if (wake >= nthreads) pthread_cond_broadcast(&cv_work);
  else for (int i = 0; i < wake; ++i) pthread_cond_signal(&cv_work);
  pthread_mutex_unlock(&mu);
}
static double now_us(void) {
  struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e6 + t.tv_nsec * 1e-3;
}
/* a job of a kernel without loops (bounded time), run by the launching thread, which wakes `wake`
   pool threads only once it has worked `solo_us` microseconds with grains left: waking a thread
   and waiting for it costs tens of microseconds, more than a small launch's whole work. After
   `help_us` it hands the rest to every pool thread and returns, so that the caller can wait in
   slices and see Ctrl-C. 1: done, no pool thread took part; 0: wait with aw_pool_wait */
int aw_pool_solo(aw_job *j, int wake, double solo_us, double help_us) {
  const double t0 = now_us();
  int woken = 0;
  for (;;) {
    const uint64_t lo = __atomic_fetch_add(&j->next, (uint64_t)j->grain, __ATOMIC_RELAXED);
    if (lo >= j->G) return !woken;
    const uint32_t hi = lo + j->grain < j->G ? (uint32_t)(lo + j->grain) : j->G;
    int rc = j->fn(j->bufs, j->sizes, j->scal, j->dims, (uint32_t)lo, hi, j->err, j->stop);
    if (rc) __atomic_or_fetch(&j->rc, 1 << rc, __ATOMIC_RELAXED);
    if (__atomic_add_fetch(&j->done, hi - lo, __ATOMIC_ACQ_REL) == j->G) {
      if (woken) { pthread_mutex_lock(&mu); pthread_cond_broadcast(&cv_done); pthread_mutex_unlock(&mu); }
      return !woken;
    }
    const double t = now_us() - t0;
    if (t > help_us) { aw_pool_start(j, nthreads); return 0; }
    if (!woken && wake > 0 && t > solo_us) { aw_pool_start(j, wake); woken = 1; }
  }
}
/* after an exception in the launching thread: no grain is claimed any more, the pool lets go of
   the job, and this returns once no pool thread is inside it (the caller has set the stop flag,
   which every workgroup start and loop back-edge polls); the job may then be reused */
void aw_pool_cancel(aw_job *j) {
  pthread_mutex_lock(&mu);
  if (cur == j) cur = 0;
  __atomic_store_n(&j->next, (uint64_t)1 << 62, __ATOMIC_RELAXED);
  while (j->users) pthread_cond_wait(&cv_done, &mu);
  pthread_mutex_unlock(&mu);
}
/* wait for the job up to timeout_ms: 1 done, 0 not yet */
int aw_pool_wait(aw_job *j, int timeout_ms) {
  struct timespec ts; clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_nsec += (long)timeout_ms * 1000000L; ts.tv_sec += ts.tv_nsec / 1000000000L; ts.tv_nsec %= 1000000000L;
  pthread_mutex_lock(&mu);
  int r = 0;
  while (__atomic_load_n(&j->done, __ATOMIC_ACQUIRE) < j->G || j->users) {
    if (cur == j && __atomic_load_n(&j->done, __ATOMIC_ACQUIRE) >= j->G) cur = 0;  /* no new worker joins */
    if (pthread_cond_timedwait(&cv_done, &mu, &ts) == ETIMEDOUT) break;
  }
  r = __atomic_load_n(&j->done, __ATOMIC_ACQUIRE) >= j->G && !j->users;
  if (r && cur == j) cur = 0;
  pthread_mutex_unlock(&mu);
  return r;
}
"""


class _Job(ctypes.Structure):
    _fields_ = [("fn", ctypes.c_void_p), ("bufs", ctypes.c_void_p), ("sizes", ctypes.c_void_p),
                ("scal", ctypes.c_void_p), ("dims", ctypes.c_void_p), ("err", ctypes.c_void_p),
                ("stop", ctypes.c_void_p), ("G", ctypes.c_uint32), ("grain", ctypes.c_uint32),
                ("next", ctypes.c_uint64), ("done", ctypes.c_uint32), ("rc", ctypes.c_int),
                ("users", ctypes.c_int)]


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
        self._by_program: dict[tuple[int, bool], tuple[Any, Any]] = {}
        self._lock = threading.Lock()
        self._gcc: bool | None = None
        self._pch: dict[tuple[str, str], Path | None] = {}  # (cache dir, key) -> prefix header (None: none)
        self._pch_wanted: dict[str, int] = {}  # cache dir -> libraries built there without a header
        self._pch_lock = threading.Lock()
        self._pool: Any = None
        self._pool_lock = threading.Lock()
        self._launch_lock = threading.Lock()  # one launch at a time on the pool
        self._pool_pid = os.getpid()
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._after_fork)

    def _after_fork(self) -> None:
        """In a forked child: fresh locks (another thread of the parent may have held one at the
        fork) and, at the next launch, the pool's threads started again (POOL_C's fork handler
        has forgotten the parent's, which do not exist here)."""
        self._lock = threading.Lock()
        self._pch_lock = threading.Lock()
        self._pool_lock = threading.Lock()
        self._launch_lock = threading.Lock()

    def capabilities(self) -> Capability:
        return (Capability.F16 | Capability.BF16 | Capability.INT64 | Capability.OFFSET64 | Capability.ATOMIC_F32
                | Capability.F64 | Capability.WAVE_OPS)

    def pool(self) -> Any:
        """The worker pool (:data:`POOL_C`): its functions, the threads started once."""
        with self._pool_lock:
            if self._pool is None:
                lib = self.library(POOL_C)
                lib.aw_pool_init.argtypes, lib.aw_pool_init.restype = [ctypes.c_int, ctypes.c_uint64], ctypes.c_int
                lib.aw_pool_start.argtypes, lib.aw_pool_start.restype = [ctypes.c_void_p, ctypes.c_int], None
                lib.aw_pool_wait.argtypes, lib.aw_pool_wait.restype = [ctypes.c_void_p, ctypes.c_int], ctypes.c_int
                lib.aw_pool_solo.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_double, ctypes.c_double]
                lib.aw_pool_solo.restype = ctypes.c_int
                lib.aw_pool_cancel.argtypes, lib.aw_pool_cancel.restype = [ctypes.c_void_p], None
                if lib.aw_pool_init(self.cores, STACK_BYTES) != 0:
                    raise CpuError(f"the cpu target could not start {self.cores} worker threads")
                self._pool, self._pool_pid = lib, os.getpid()
            elif self._pool_pid != os.getpid():  # a forked child: start its own threads
                if self._pool.aw_pool_init(self.cores, STACK_BYTES) != 0:
                    raise CpuError(f"the cpu target could not start {self.cores} worker threads")
                self._pool_pid = os.getpid()
            return self._pool

    def library_of(self, program: Any, optimize: bool | None = None) -> Any:
        """The loaded shared object of a rendered program (looked up once per program object and
        level; ``optimize`` as :func:`cflags`)."""
        if optimize is None:
            from anywave.runtime.targets import optimize_target_code

            optimize = optimize_target_code()
        key = (id(program), optimize)
        ent = self._by_program.get(key)
        if ent is not None and ent[0] is program:
            return ent[1]
        lib = self.library(program.text, optimize)
        self._by_program[key] = (program, lib)
        return lib

    def _is_gcc(self) -> bool:
        """Whether the compiler is GCC (not Clang, which also defines ``__GNUC__``): the one whose
        precompiled headers :meth:`_prefix_header` makes."""
        if self._gcc is None:
            try:
                r = subprocess.run([*self.cc.split(), "-dM", "-E", "-x", "c", os.devnull], capture_output=True,
                                   text=True, timeout=60)
                self._gcc = r.returncode == 0 and "__GNUC__" in r.stdout and "__clang__" not in r.stdout
            except (OSError, subprocess.SubprocessError):
                self._gcc = False
        return self._gcc

    def _prefix_header(self, flags: Sequence[str]) -> Path | None:
        """The header file holding :data:`anywave.backends.cpu.PREFIX` beside its precompiled form
        for ``flags`` (module docs), built on first need; None where there is none to use (not
        GCC, ``ANYWAVE_CPU_PCH=0``, or its build failed: the caller compiles the whole text)."""
        from anywave.backends.cpu import PREFIX
        from anywave.cache import atomic_write, safe_subdir, verified_read

        if os.environ.get("ANYWAVE_CPU_PCH", "1") == "0" or "-O1" in flags or not self._is_gcc():
            return None  # (the -O1 of a large text: its compile is long anyway, one header is enough)
        flags = tuple(f for f in flags if f != "-shared")
        key = hashlib.sha256("\0".join([PREFIX, self.cc_version, " ".join(flags), _cpu_flags()]).encode()).hexdigest()
        d = safe_subdir("cpu")
        with self._pch_lock:
            got = self._pch.get((str(d), key), False)
            if got is None or (got and got.exists()):
                return got
            header = d / f"prefix_{key[:32]}.h"
            gch = header.with_name(header.name + ".gch")
            text = verified_read(header)
            if text != PREFIX.encode() or verified_read(gch) is None:
                # made at the second library this process builds in this cache (the first
                # compiles its whole text): a cache that only ever gets one pays nothing for it
                seen = self._pch_wanted.get(str(d), 0)
                self._pch_wanted[str(d)] = seen + 1
                if seen == 0:
                    return None
                try:  # (a full disk or a failed build: the whole text, as without a header)
                    with tempfile.TemporaryDirectory(prefix="anywave-cpu-pch-") as tmp:
                        h = Path(tmp) / "p.h"
                        h.write_text(PREFIX)
                        r = subprocess.run([*self.cc.split(), *flags, "-x", "c-header", str(h), "-o",
                                            str(h) + ".gch"], capture_output=True, text=True)
                        if r.returncode != 0:
                            raise OSError(f"the precompiled header did not build: {r.stderr[:200]}")
                        atomic_write(header, PREFIX.encode(), record_hash=True)
                        atomic_write(gch, Path(str(h) + ".gch").read_bytes(), record_hash=True)
                except OSError:
                    self._pch[(str(d), key)] = None
                    return None
            self._pch[(str(d), key)] = header
            return header

    def library(self, text: str, optimize: bool | None = None) -> Any:
        """The loaded shared object of C ``text`` (compiled once, cached on disk); ``optimize`` as
        :func:`cflags`."""
        flags = cflags(text, optimize)
        parts = [text, self.cc_version, " ".join(flags), _cpu_flags()]
        key = hashlib.sha256("\0".join(parts).encode()).hexdigest()
        with self._lock:
            lib = self._libs.get(key)
            if lib is None:
                lib = self._libs[key] = ctypes.CDLL(str(self._build(text, key, flags)))
            return lib

    def _build(self, text: str, key: str, flags: tuple[str, ...]) -> Path:
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
        from anywave.backends.cpu import PREFIX

        header = self._prefix_header(flags) if text.startswith(PREFIX + "\n") else None
        with tempfile.TemporaryDirectory(prefix="anywave-cpu-") as tmp:
            src, so = Path(tmp) / "k.c", Path(tmp) / "k.so"
            r = None
            if header is not None:  # the same text: the prefix through its precompiled header
                src.write_text(text[len(PREFIX) + 1:])
                r = subprocess.run([*self.cc.split(), *flags, "-include", str(header), str(src), "-o", str(so), "-lm"],
                                   capture_output=True, text=True)
            if r is None or r.returncode != 0:  # (the header gone meanwhile: the whole text decides)
                src.write_text(text)
                r = subprocess.run([*self.cc.split(), *flags, str(src), "-o", str(so), "-lm"], capture_output=True,
                                   text=True)
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


@dataclass
class _Plan:
    """What every launch of one prepared (program, kernel, sizes) reuses (:meth:`CpuRunner._plan`):
    also the argument words, error record, stop flag and job the C side reads, filled again at
    each launch under the device's launch lock (one launch at a time on the pool)."""

    program: Any  # the rendered program it was made from (the cache key's id is checked against it)
    kernel: Any
    info: Any
    fn: int
    dims: Any
    G: int
    params: list
    ptrs: Any = None
    sizes: Any = None
    scal: Any = None
    err: Any = None
    stop: Any = None
    job: Any = None


_PAD = (ctypes.c_uint8 * 16)()  # what an empty buffer points at
#: prepared launches whose reusable part is kept (least recently used dropped first)
PLAN_CACHE = 256
#: microseconds the launching thread runs a kernel without loops alone before it wakes the pool's
#: other threads (aw_pool_solo): waking one and waiting for it cost 15-27 us a launch on the
#: 2-core development host (a 256-thread add: 24 us a call with 1 workgroup, 43-51 us with 2-16
#: when woken at once, 24-27 us alone); 20 us beat 50 us at 64-1024 workgroups there
#: (bench/bench_cpu_launch.py, bench/results/cpu_launch_*.json)
SOLO_US = 20.0
#: microseconds after which the launching thread hands a loop-free kernel's remaining workgroups
#: to the pool and waits in slices instead (so Ctrl-C is seen within about this long)
HELP_US = 50_000.0


class CpuRunner(Driver):
    """The ``cpu`` target's driver and a conformance runner:
    ``runner(module, kernel, grid, workgroup, args, wave_width)`` runs ``kernel`` with NumPy
    ``args`` updated in place."""

    error = CpuError
    check_default = True

    def __init__(self, device: CpuDevice | None = None) -> None:
        super().__init__()
        self.dev = device or get_device()
        self._plans: OrderedDict[tuple, _Plan] = OrderedDict()
        self._plans_lock = threading.Lock()

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
        self.run(launch, launch.margs, sync)

    def check_launch(self, launch: Any) -> None:
        """At most 2^32 - 1 workgroups in all (the kernel functions number them with 32 bits;
        each dimension's own limit is checked before): CpuError."""
        if launch.dims is None:
            return
        g = tuple(launch.grid)
        total = g[0] * g[1] * g[2]
        if total >= 2**32:
            raise CpuError(f"kernel {launch.kernel.name!r}: grid {g[0]} x {g[1]} x {g[2]} is {total} workgroups; "
                           f"the cpu target runs at most {2**32 - 1} in one launch (split it into several launches)")

    def check_args(self, launch: Any) -> None:
        """A buffer that is not a NumPy array, or read-only memory for a written buffer (CpuError)."""
        if launch.dims is None:
            return  # an empty grid runs nothing
        kernel = launch.kernel.name
        for kind, v, a in launch.margs:
            if kind != "buffer":
                continue
            if not isinstance(v, np.ndarray):
                raise CpuError(f"buffer argument {a.name!r} of kernel {kernel!r} is a {type(v).__name__}; the cpu "
                               "target takes NumPy arrays or host-memory arrays")
            # (a strided array is copied by the launch: only a contiguous one is used in place)
            if a.access is not Access.READ and v.size > 0 and v.flags.c_contiguous and not v.flags.writeable:
                raise CpuError(f"buffer argument {a.name!r} of kernel {kernel!r} is written but the array is "
                               "read-only")

    def run(self, launch: Any, margs: list[tuple[str, Any, Any]], sync: bool) -> None:
        """Launch ``launch`` with ``margs`` (checked: :meth:`check_args`, or by the layer that bound
        it); synchronous. See :meth:`__call__`."""
        if launch.dims is None:
            return
        plan = launch.built
        if plan is None:  # (once per launch plan: the build's flags read the environment)
            plan = launch.built = self._plan(launch)
        lock = self.dev._launch_lock
        while not lock.acquire(timeout=0.05):  # in slices: Ctrl-C (interrupt_main too) ends the wait
            pass
        try:
            self._run(plan, *self._words(plan, margs))
        finally:
            lock.release()

    def _plan(self, launch: Any) -> _Plan:
        """The reusable part of ``launch``: the compiled function, the launch sizes, the ABI;
        made once per (program, ``ANYWAVE_TARGET_OPT`` level, kernel, sizes) and kept
        (:data:`PLAN_CACHE` of them)."""
        from anywave.runtime.targets import optimize_target_code

        info, k = launch.info, launch.kernel
        g3, wg, P = tuple(launch.grid), tuple(launch.workgroup), launch.threads
        optimize = optimize_target_code()
        key = (id(launch.program), optimize, info.c_name, g3, wg, P)
        with self._plans_lock:
            plan = self._plans.get(key)
            if plan is not None and plan.program is launch.program:
                self._plans.move_to_end(key)
                return plan
        if info.frame_bytes(P) > STACK_BYTES // 2:
            raise CpuError(f"kernel {k.name!r} needs {info.frame_bytes(P)} bytes of lane state per workgroup of {P} "
                           f"threads; the cpu target's worker stacks hold {STACK_BYTES // 2}")
        lib = self.dev.library_of(launch.program, optimize)
        fn = ctypes.cast(getattr(lib, info.c_name), ctypes.c_void_p).value
        dims = (ctypes.c_uint32 * 7)(wg[0], wg[1], wg[2], g3[0], g3[1], g3[2], P)
        params = [(a.name, a.kind is ArgKind.BUFFER, a) for a in k.args]
        plan = _Plan(launch.program, k, info, fn, dims, g3[0] * g3[1] * g3[2], params)
        n = max(len(params), 1)
        plan.ptrs, plan.sizes, plan.scal = (ctypes.c_void_p * n)(), (ctypes.c_uint64 * n)(), (ctypes.c_uint64 * n)()
        plan.err, plan.stop = (ctypes.c_uint32 * 8)(), ctypes.c_int(0)
        plan.job = _Job(fn, ctypes.addressof(plan.ptrs), ctypes.addressof(plan.sizes), ctypes.addressof(plan.scal),
                        ctypes.addressof(dims), ctypes.addressof(plan.err), ctypes.addressof(plan.stop), plan.G,
                        max(1, plan.G // (self.dev.cores * 32)), 0, 0, 0, 0)
        with self._plans_lock:
            self._plans[key] = plan
            while len(self._plans) > PLAN_CACHE:
                self._plans.popitem(last=False)
        return plan

    @staticmethod
    def _words(plan: _Plan, margs: list[tuple[str, Any, Any]]) -> tuple[list, list]:
        """The launch's argument words from checked ``margs``, written into the plan's arrays
        (under the launch lock): (arrays to keep alive, copies to write back)."""
        ptrs, sizes, scal = plan.ptrs, plan.sizes, plan.scal
        keep: list[Any] = []
        back: list[tuple[np.ndarray, np.ndarray]] = []
        for i, (kind, v, a) in enumerate(margs):
            if kind != "buffer":
                scal[i] = int(v)
                continue
            host = v if v.flags.c_contiguous else np.ascontiguousarray(v)
            if host is not v and a.access is not Access.READ and v.size > 0:
                back.append((v, host))
            keep.append(host)
            ptrs[i] = host.ctypes.data if host.size else ctypes.addressof(_PAD)
            sizes[i] = host.nbytes
        return keep, back

    def _run(self, plan: _Plan, keep: list, back: list) -> None:
        """Run the plan's workgroups (the caller holds the device's launch lock); then errors,
        copies back. ``keep``: the arrays whose memory the words point at."""
        pool = self.dev.pool()
        err, job = plan.err, plan.job
        ctypes.memset(err, 0, ctypes.sizeof(err))
        plan.stop.value = 0
        job.next = job.done = job.rc = job.users = 0
        jp = ctypes.addressof(job)
        G = plan.G
        try:
            if not plan.info.loops:
                # a kernel without loops ends in a bounded time: the launching thread runs it,
                # wakes the pool's other threads only after SOLO_US with workgroups left, and hands
                # the rest to the pool after HELP_US (aw_pool_solo)
                done = pool.aw_pool_solo(jp, min(self.dev.cores - 1, G - 1), SOLO_US, HELP_US)
            else:
                # a kernel with loops runs on the pool only, and this thread waits in slices, so
                # Ctrl-C stops it
                pool.aw_pool_start(jp, self.dev.cores)
                done = 0
            while not done:
                done = pool.aw_pool_wait(jp, 50)
        except BaseException:
            # (a KeyboardInterrupt may land anywhere above, the job started or not): stop the
            # kernel, take the job back from the pool, then let the exception go
            plan.stop.value = 1  # every loop back-edge and workgroup start polls it
            pool.aw_pool_cancel(jp)
            raise
        for orig, host in back:
            orig[...] = host
        if err[0]:
            self._errors(plan, err, [int(plan.sizes[i]) if is_buf else 0
                                     for i, (_n, is_buf, _a) in enumerate(plan.params)])
        if job.rc & (1 << 1):  # pragma: no cover - only with a stop and no exception
            raise KeyboardInterrupt

    def _errors(self, plan: _Plan, err: Any, sizes: list[int]) -> None:
        info, k = plan.info, plan.kernel
        kernel = k.name
        if int(err[0]) == 2:
            from anywave.backends.cpu import ERR_DIVERGENT_BARRIER  # noqa: F401 - the code's meaning

            site = info.sites[int(err[4])] if int(err[4]) < len(info.sites) else None
            where = site.describe() if site is not None else "a barrier"
            raise CpuError(f"divergent barrier in kernel {kernel!r} on the cpu target at {where}: in workgroup "
                           f"{int(err[3])} {int(err[1])} of {int(err[2])} threads arrived; every thread of a "
                           "workgroup must reach the same barrier")
        if int(err[0]) == 1:
            from anywave.backends.bounds import raise_if_failed

            raise_if_failed(err, k, info.sites, sizes, info.local_memory, f"cpu ({self.dev.name})")


def cpu_runner() -> CpuRunner:
    """A conformance runner on the cpu target. Raises CpuError without a C compiler."""
    return CpuRunner()


class CpuTarget(RunnerTarget):
    """The ``cpu`` target for :mod:`anywave.runtime.targets`: ``info`` and ``launch``."""

    name = "cpu"

    def make_runner(self) -> CpuRunner:
        return CpuRunner()

    @staticmethod
    def refuses(module: Any, kernel: Any, workgroup: Any = None) -> str | None:
        """Why the cpu target cannot run ``kernel`` (a :class:`~anywave.binary.module.Kernel`
        of ``module``), at ``workgroup`` threads (x, y, z) if given, or None: the backend's
        refusals (:func:`anywave.backends.cpu.refusal`), more local memory than
        :data:`LOCAL_MEMORY`, a workgroup over :data:`MAX_WORKGROUP` threads."""
        from anywave.backends.cpu import refusal

        why = refusal(module, kernel)
        if why is None and kernel.local_memory > LOCAL_MEMORY:
            why = f"{kernel.local_memory} bytes of local memory (the cpu target has {LOCAL_MEMORY})"
        if why is None and workgroup is not None and workgroup[0] * workgroup[1] * workgroup[2] > MAX_WORKGROUP:
            why = f"workgroups of {workgroup[0] * workgroup[1] * workgroup[2]} threads (at most {MAX_WORKGROUP})"
        return why


def register() -> None:
    """Register the ``cpu`` target with :mod:`anywave.runtime.targets`."""
    CpuTarget.register(status)
