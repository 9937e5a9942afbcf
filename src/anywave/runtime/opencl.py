"""OpenCL runtime driver (pyopencl): runs WAVE modules through the OpenCL C backend.

Primary device: Intel's OpenCL CPU runtime from PyPI (``intel-opencl-rt``). Its installed
ICD file names a path that does not exist, and its library needs ``libimf.so`` from
``intel-cmplr-lib-rt`` without declaring it; :func:`setup_environment` fixes both with no
hand steps: it writes an ICD file naming the installed ``libintelocl.so`` into the anywave
cache dir (plus copies of the system's ``/etc/OpenCL/vendors`` entries, so PoCL and others
stay visible), points ``OCL_ICD_VENDORS`` at it before pyopencl first asks for platforms,
and preloads ``libimf.so``. Set ``ANYWAVE_OPENCL_DEVICE`` to a substring of a device name
to pick another device (e.g. ``pthread`` for PoCL).

Launch model: the workgroup is launched as one dimension (x*y*z threads, padded to a
multiple of W for kernels with wave operations); the kernel computes thread ids itself, so
the spec's linear lane order (x fastest) holds by construction.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from anywave.backends.cfamily import WAVE_WIDTHS, CProgram, Features
from anywave.errors import WaveError
from anywave.isa.types import Access, Capability
from anywave.runtime.driver import Driver, launch_dims, marshal_args, resolve_check  # noqa: F401 - re-exported
from anywave.runtime.targets import ProcessDevice, RunnerTarget, check_not_forked, mark_interrupted

_LOCK = threading.Lock()
_ENV_DONE = False


class OpenCLError(WaveError):
    """OpenCL is unavailable, a program failed to build, or a launch was refused; the message
    says which and why."""


def cache_dir() -> Path:
    """The checked anywave cache dir (:func:`anywave.runtime.cache.cache_dir`)."""
    from anywave.cache import cache_dir as _cache_dir

    return _cache_dir()


def _lib_dirs() -> list[Path]:
    dirs = [Path(sys.prefix) / "lib", Path(sys.base_prefix) / "lib"]
    try:
        import importlib.metadata as md

        for dist in ("intel-opencl-rt", "intel-cmplr-lib-rt"):
            try:
                files = md.files(dist) or []
            except md.PackageNotFoundError:
                continue
            for f in files:
                if f.name.startswith(("libintelocl.so", "libimf.so")):
                    dirs.append(Path(f.locate()).resolve().parent)
    except Exception:  # noqa: BLE001 - metadata lookup is best effort
        pass
    out = []
    for d in dirs:
        if d not in out and d.is_dir():
            out.append(d)
    return out


def find_intel_opencl() -> Path | None:
    """The installed ``libintelocl.so`` of the ``intel-opencl-rt`` wheel, or None."""
    for d in _lib_dirs():
        hits = sorted(d.glob("libintelocl.so*"), key=lambda p: len(p.name))
        hits = [h for h in hits if not h.name.endswith(".py")]
        if hits:
            return hits[0].resolve()
    return None


def setup_environment() -> str:
    """Make the Intel OpenCL CPU runtime from PyPI visible to the ICD loader (idempotent).

    Returns a one-line description of what was done. Never raises: problems show up later
    as "no OpenCL device" with the reason."""
    global _ENV_DONE
    with _LOCK:
        if _ENV_DONE:
            return "already set up"
        _ENV_DONE = True
        notes = []
        for d in _lib_dirs():
            imf = d / "libimf.so"
            if imf.exists():
                try:
                    ctypes.CDLL(str(imf), mode=ctypes.RTLD_GLOBAL)
                    notes.append(f"preloaded {imf}")
                except OSError as e:
                    notes.append(f"could not preload {imf}: {e}")
                break
        lib = find_intel_opencl()
        if lib is None:
            return "; ".join(notes + ["intel-opencl-rt not installed"])
        if os.environ.get("OCL_ICD_VENDORS"):
            return "; ".join(notes + [f"OCL_ICD_VENDORS already set to {os.environ['OCL_ICD_VENDORS']}"])
        entries = {"anywave-intel-cpu.icd": str(lib)}
        sysdir = Path("/etc/OpenCL/vendors")
        if sysdir.is_dir():
            for icd in sysdir.glob("*.icd"):
                try:
                    entries.setdefault("system-" + icd.name, icd.read_text().strip())
                except OSError:
                    pass
        try:
            vdir = _write_vendor_dir(entries)
        except (WaveError, OSError) as e:  # CacheSecurityError: never point the ICD loader at it
            _ENV_PROBLEMS.append(str(e))
            return "; ".join(notes + [str(e)])
        os.environ["OCL_ICD_VENDORS"] = str(vdir)
        notes.append(f"OCL_ICD_VENDORS={vdir} ({lib.name})")
        return "; ".join(notes)


#: why the ICD set-up could not be done (shown in "no OpenCL platform" errors)
_ENV_PROBLEMS: list[str] = []


def _write_vendor_dir(entries: dict[str, str]) -> Path:
    """The directory of ICD files for ``OCL_ICD_VENDORS``: ``<cache>/opencl-vendors`` (0700,
    checked), holding exactly ``entries`` (file name -> library path), each written atomically
    and read back before use. The ICD loader loads every ``.icd`` it finds there, so a
    file that is not ours refuses the directory. A cache that cannot be written (read-only,
    full) falls back, with a warning, to the cache's one fallback directory
    (:func:`anywave.runtime.cache.writable_subdir`).

    Raises:
        CacheSecurityError: the directory or an entry is another user's, writable by others,
            or holds ``.icd`` files anywave did not write."""
    from anywave.cache import CacheSecurityError, atomic_write, check_private, safe_subdir, writable_subdir

    def fill(vdir: Path) -> None:
        for name, text in entries.items():
            p = vdir / name
            want = text + "\n"
            try:
                check_private(p, directory=False)
                same = p.read_text() == want
            except FileNotFoundError:
                same = False
            if not same:
                atomic_write(p, want.encode())
            check_private(p, directory=False)
            if p.read_text() != want:
                raise OSError(f"{p} does not read back as written")
        extra = sorted(f.name for f in vdir.iterdir() if f.name.endswith(".icd") and f.name not in entries)
        if extra:
            raise CacheSecurityError(f"the anywave OpenCL vendor directory {str(vdir)!r} holds ICD files "
                                     f"anywave did not write ({', '.join(extra)}); the ICD loader would load "
                                     f"the libraries they name, so it is not used. Remove them.")

    vdir = safe_subdir("opencl-vendors")
    try:
        fill(vdir)
        return vdir
    except CacheSecurityError:
        raise
    except OSError as e:  # a full disk: the one fallback policy of the cache (no new directory per start)
        vdir = writable_subdir("opencl-vendors", f"cannot write the OpenCL ICD files in {str(vdir)!r} ({e})")
        fill(vdir)
        return vdir


def _import_cl() -> Any:
    setup_environment()
    try:
        import pyopencl as cl
    except ImportError as e:
        raise OpenCLError("pyopencl is not installed (pip install 'anywave[opencl]')") from e
    return cl


def _pick_device(cl: Any) -> Any:
    try:
        platforms = cl.get_platforms()
    except Exception as e:  # noqa: BLE001 - no ICD / no platform
        why = f"; the ICD set-up failed: {' '.join(_ENV_PROBLEMS)}" if _ENV_PROBLEMS else (
            "; install intel-opencl-rt (pip install 'anywave[opencl]')")
        raise OpenCLError(f"no OpenCL platform found ({type(e).__name__}: {e}){why}") from e
    devices = [d for p in platforms for d in p.get_devices()]
    if not devices:
        raise OpenCLError("OpenCL platforms exist but offer no device")
    want = os.environ.get("ANYWAVE_OPENCL_DEVICE", "").lower()
    if want:
        for d in devices:
            if want in d.name.lower() or want in d.platform.name.lower():
                return d
        raise OpenCLError(f"ANYWAVE_OPENCL_DEVICE={want!r} matches none of {[d.name for d in devices]}")
    for d in devices:
        if "intel" in d.platform.name.lower() and d.type & cl.device_type.CPU:
            return d
    return devices[0]


_PROBE_SRC = "\n".join(
    f"__attribute__((intel_reqd_sub_group_size({w}))) __kernel void sg{w}(__global uint* o) "
    f"{{ uint4 b = sub_group_ballot(1); o[get_local_id(0)] = sub_group_shuffle(get_sub_group_size(), 0u) + b.x * 0u; }}"
    for w in WAVE_WIDTHS)


class OpenCLDevice:
    """One OpenCL device with a context, a queue, its probed :class:`Features` and a cache of
    built programs (by source hash)."""

    def __init__(self) -> None:
        cl = self.cl = _import_cl()
        self.device = _pick_device(cl)
        self.ctx = cl.Context([self.device])
        self.queue = cl.CommandQueue(self.ctx)
        ext = set(self.device.extensions.split())
        self.extensions = ext
        self.name = self.device.name.strip()
        #: the device runs on the host CPU and addresses host memory (USE_HOST_PTR buffers are
        #: the arrays themselves): kernels run bounds-checked by default there
        self.host_memory = bool(int(self.device.type) & int(cl.device_type.CPU))
        self.fp64 = "cl_khr_fp64" in ext
        self.max_workgroup = int(self.device.max_work_group_size)
        self.local_memory = int(self.device.local_mem_size)
        widths: tuple[int, ...] = ()
        self.subgroup_note = ""
        need = {"cl_khr_subgroup_shuffle", "cl_khr_subgroup_ballot", "cl_intel_required_subgroup_size"}
        if need <= ext:
            widths = self._probe_widths()
        else:
            self.subgroup_note = f"missing {sorted(need - ext)}"
        self.features = Features(fp64=self.fp64, wave_widths=widths, cpu_device=self.host_memory)
        self._programs: dict[tuple[str, str], Any] = {}
        self._kernels: dict[tuple[int, str], tuple[Any, threading.Lock]] = {}
        self._kernels_lock = threading.Lock()

    def _probe_widths(self) -> tuple[int, ...]:
        cl = self.cl
        ok = []
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                prg = cl.Program(self.ctx, _PROBE_SRC).build("-cl-std=CL3.0")
        except Exception as e:  # noqa: BLE001
            self.subgroup_note = f"sub-group probe failed to build: {str(e)[:200]}"
            return ()
        for w in WAVE_WIDTHS:
            k = getattr(prg, f"sg{w}")
            buf = np.zeros(2 * w, np.uint32)
            mem = cl.Buffer(self.ctx, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=buf)
            try:
                k(self.queue, (2 * w,), (2 * w,), mem)
                cl.enqueue_copy(self.queue, buf, mem)
                self.queue.finish()
            except Exception:  # noqa: BLE001
                continue
            if np.all(buf == w):
                ok.append(w)
        return tuple(ok)

    def capabilities(self) -> Capability:
        caps = Capability.F16 | Capability.BF16 | Capability.INT64 | Capability.OFFSET64 | Capability.ATOMIC_F32
        if self.fp64:
            caps |= Capability.F64
        if self.features.wave_widths:
            caps |= Capability.WAVE_OPS | Capability.MMA | Capability.MMA_ACC
        return caps

    def kernel(self, built: Any, name: str) -> tuple[Any, threading.Lock]:
        """The ``cl.Kernel`` ``name`` of a built program (created once: kernel objects are costly)
        and its lock. A kernel object holds its arguments (``clSetKernelArg``) until the next
        enqueue, so setting them and enqueueing must be one step per object: launches from several
        threads hold the lock across ``kernel(queue, ...)`` (the wait is outside it; issue 31,
        item 3)."""
        key = (id(built), name)
        ent = self._kernels.get(key)
        if ent is None:
            with self._kernels_lock:
                ent = self._kernels.get(key)
                if ent is None:
                    ent = self._kernels[key] = (self.cl.Kernel(built, name), threading.Lock())
        return ent

    def build(self, prog: CProgram) -> Any:
        """The built ``cl.Program`` of a rendered program (cached by source hash).

        Raises:
            OpenCLError: the build failed (the message carries the build log's head)."""
        from anywave.backends.opencl import build_options
        from anywave.runtime.targets import optimize_target_code

        options = build_options(optimize_target_code())
        key = (prog.sha256, options)
        p = self._programs.get(key)
        if p is None:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # the build log's notes; errors still raise
                    p = self.cl.Program(self.ctx, prog.text).build(options)
            except Exception as e:  # noqa: BLE001 - carry the log
                raise OpenCLError(f"OpenCL build failed on {self.name}: {str(e)[:3000]}") from e
            self._programs[key] = p
        return p


_DEVICE = ProcessDevice(OpenCLDevice, OpenCLError, "OpenCL")


def get_device() -> OpenCLDevice:
    """The process-wide OpenCL device (created on first use).

    Raises:
        OpenCLError: OpenCL is unusable here (the message says why)."""
    return _DEVICE.get()


def status() -> tuple[bool, str]:
    """(usable, reason) for the OpenCL target on this machine; never raises."""
    return _DEVICE.status()


# --------------------------------------------------------------------------- launching

class OpenCLRunner(Driver):
    """A conformance :class:`~anywave.conformance.suite.Runner` (and the ``launch`` of the
    ``opencl`` target): ``runner(module, kernel, grid, workgroup, args, wave_width)``
    renders the module once per W, builds it once, and runs the kernel with ``args`` written
    in place."""

    error = OpenCLError

    def __init__(self, device: OpenCLDevice | None = None) -> None:
        super().__init__()
        self.dev = device or get_device()
        #: a CPU device addresses host memory: bounds-checked builds by default (issue 31, item 1)
        self.check_default = self.dev.host_memory

    def translate(self, module: Any, wave_width: int, checked: bool) -> CProgram:
        from anywave.backends.opencl import translate

        if checked:
            return translate(module, wave_width, self.dev.features, checked=True)
        return translate(module, wave_width, self.dev.features)

    def __call__(self, module: Any, kernel: str, grid: Sequence[int], workgroup: Sequence[int],
                 args: dict[str, Any], wave_width: int, *, sync: bool = True, check: bool | None = None,
                 **_: Any) -> None:
        """Run ``kernel``. NumPy buffers are used in place through ``CL_MEM_USE_HOST_PTR`` (no
        copy on a CPU device; the runtime maps them back) and make the call synchronous;
        ``opencl`` device arrays are passed as their ``cl.Buffer``. With ``sync=False`` and
        only device arrays the kernel is enqueued on the device's in-order queue and the call
        returns (errors then surface at the next ``.numpy()`` / ``aw.synchronize()``).
        ``check`` runs the bounds-checked build (always synchronous); None: ``ANYWAVE_CHECK``
        (``1``/``0``) where set, else on for a CPU device (its kernels address host memory, so an
        overrun would corrupt the process), off for a GPU. Waits let Ctrl-C through
        (:func:`wait_interruptibly`).

        Raises:
            OutOfBoundsError: (checked build) a memory access left its buffer.
            OpenCLError, VerifyError, LaunchConfigError: see the module docs."""
        launch = self.prepare(module, kernel, grid, workgroup, args, wave_width, check)
        self.run(launch, launch.margs, sync)

    def check_args(self, launch: Any) -> None:
        """A device array of another target, or read-only memory for a written buffer (OpenCLError)."""
        from anywave.runtime.arrays import Array

        if launch.dims is None:
            return  # an empty grid runs nothing
        kernel = launch.kernel.name
        for kind, v, a in launch.margs:
            if kind != "buffer":
                continue
            if isinstance(v, Array):
                if v.space.kind != "opencl":
                    raise OpenCLError(f"buffer argument {a.name!r} of kernel {kernel!r} is a {v.target} array; "
                                      "the opencl target takes opencl arrays or host memory")
                continue
            # (a strided array is copied by the launch: only a contiguous one is used in place)
            if a.access is not Access.READ and v.size > 0 and v.flags.c_contiguous and not v.flags.writeable:
                raise OpenCLError(f"buffer argument {a.name!r} of kernel {kernel!r} is written but the array "
                                  "is read-only")

    def run(self, launch: Any, margs: list[tuple[str, Any, Any]], sync: bool) -> None:
        """Launch ``launch`` with ``margs`` (checked: :meth:`check_args`, or by the layer that bound
        it); see :meth:`__call__`."""
        from anywave.runtime.arrays import Array, mark_used

        if launch.dims is None:
            return
        cl = self.dev.cl
        kernel = launch.kernel.name
        prog, info, k, checked = launch.program, launch.info, launch.kernel, launch.checked
        g3, wg, dims = launch.grid, launch.workgroup, launch.dims
        built = launch.built
        if built is None:  # (once per launch plan: the build's options read the environment)
            built = launch.built = self.dev.build(prog)
        ctx, q = self.dev.ctx, self.dev.queue
        mf = cl.mem_flags
        cargs: list[Any] = []
        back: list[tuple[np.ndarray, np.ndarray, Any]] = []
        hosts = 0
        for kind, v, a in margs:
            if kind != "buffer":
                cargs.append(v)
                continue
            if isinstance(v, Array):
                cargs.append(v.handle)
                continue
            hosts += 1
            host = np.ascontiguousarray(v)
            raw = host.reshape(-1).view(np.uint8) if host.size else np.zeros(16, np.uint8)
            written = a.access is not Access.READ and host.size > 0
            if raw.flags.writeable:
                flags = (mf.READ_WRITE if written else mf.READ_ONLY) | mf.USE_HOST_PTR
            else:  # read-only memory: the runtime may not address it in place
                flags = mf.READ_ONLY | mf.COPY_HOST_PTR
            mem = cl.Buffer(ctx, flags, hostbuf=raw)
            cargs.append(mem)
            if written:
                back.append((v, host, mem))
        cargs += [np.uint32(wg[0]), np.uint32(wg[1]), np.uint32(wg[2])]
        record = err_mem = None
        if checked:
            from anywave.backends.bounds import new_error_record

            cargs += [np.uint64(n) for (kind, _v, _a), n in zip(margs, launch.bounds_sizes(margs), strict=True)
                      if kind == "buffer"]
            record = new_error_record()
            err_mem = cl.Buffer(ctx, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=record)
            cargs.append(err_mem)
        fn, fn_lock = self.dev.kernel(built, info.c_name)
        try:
            with fn_lock:  # set-args + enqueue, atomic per kernel object
                ev = fn(q, dims[0], dims[1], *cargs)
            if sync or hosts or checked:
                wait_interruptibly(ev, keep=(cargs, back, margs, record), device=self.dev)
            for _orig, host, mem in back:
                raw = host.reshape(-1).view(np.uint8)
                mapped, _ev = cl.enqueue_map_buffer(q, mem, cl.map_flags.READ, 0, raw.shape, raw.dtype)
                if mapped.__array_interface__["data"][0] != raw.__array_interface__["data"][0]:
                    raw[...] = mapped  # the runtime kept its own copy: bring the bytes home
                mapped.base.release(q)
            if err_mem is not None:
                cl.enqueue_copy(q, record, err_mem)
            if sync or hosts or checked:
                q.finish()
            else:
                sp = memory_space()
                sp.pending = f"kernel {kernel!r} grid={g3} workgroup={wg}"
                sp.last_event = ev
                mark_used(sp)
        except Exception as e:  # noqa: BLE001
            raise OpenCLError(f"launch of {kernel!r} grid={g3} workgroup={wg} on {self.dev.name} failed: "
                              f"{type(e).__name__}: {e}") from e
        if record is not None:
            from anywave.backends.bounds import raise_if_failed

            sizes = launch.bounds_sizes(margs)
            try:
                raise_if_failed(record, k, info.sites, sizes, info.local_memory, f"OpenCL ({self.dev.name})")
            finally:
                for orig, host, _ in back:  # the in-bounds results are still copied back
                    if host is not orig:
                        orig[...] = host
        for orig, host, _ in back:
            if host is not orig:
                orig[...] = host


def wait_interruptibly(event: Any, keep: Any = None, device: Any = None) -> None:
    """Wait for an OpenCL event from Python, so that Ctrl-C (KeyboardInterrupt) gets through: a
    blocking ``clFinish``/``clWaitForEvents`` holds the main thread inside the driver, where
    Python cannot run its signal handler (issue 11, item 17; issue 31, item 7). Polls the event's
    status with a sleep that doubles from 20 us to 2 ms (a kernel of t seconds is seen done by
    about 2t). ``keep``: what the command uses (host arrays ...): on an interrupt it stays alive
    for good and the process exits without waiting for the command
    (:func:`anywave.runtime.interrupt.abandon`).

    Raises:
        KeyboardInterrupt: on Ctrl-C (the kernel keeps running on the device; the OpenCL
            device of this process is then unusable).
        pyopencl errors: the command failed (from the final ``wait``).

    On an interrupt, ``device`` (whose queue ran the command) is marked: its next command raises
    an OpenCLError while this one still runs (:func:`anywave.runtime.targets.mark_interrupted`)."""
    from anywave.runtime.interrupt import abandon, restore_sigint

    d, slept = 2e-5, 0.0
    try:
        restore_sigint()
        while int(event.command_execution_status) > 0:  # CL_COMPLETE = 0, errors < 0
            time.sleep(d)
            d = min(d * 2, 2e-3)
            slept += d
            if slept > 0.1:  # a runtime may install its own SIGINT handler while the kernel runs
                slept = 0.0
                restore_sigint()
    except BaseException:
        running = lambda: int(event.command_execution_status) > 0  # noqa: E731
        abandon("an OpenCL command", running, (event, keep))
        mark_interrupted(device, "an OpenCL command", running)
        raise
    event.wait()


def opencl_runner() -> OpenCLRunner:
    """A conformance runner on the default OpenCL device.

    Raises:
        OpenCLError: no usable OpenCL runtime."""
    return OpenCLRunner()


class OpenCLTarget(RunnerTarget):
    """The ``opencl`` target for :mod:`anywave.runtime.targets`: ``info`` and ``launch``."""

    name = "opencl"

    def make_runner(self) -> OpenCLRunner:
        return OpenCLRunner()


class OpenCLMemory:
    """The ``opencl`` memory space (:class:`anywave.runtime.arrays.MemorySpace`): ``cl.Buffer``
    objects on the process-wide device, copied with ``enqueue_copy`` on its in-order queue."""

    kind = name = "opencl"

    def __init__(self, device: int = 0) -> None:
        if device != 0:
            raise OpenCLError(f"the opencl target has one device (0), asked for device {device}")
        self.device = 0
        self.dev = get_device()
        #: the last launch enqueued without waiting (named when a later wait fails)
        self.pending = ""
        #: its event (the in-order queue's last unwaited command), for the exit hook
        self.last_event: Any = None
        from anywave.runtime.interrupt import watch

        watch(f"OpenCL ({self.dev.name})", self._busy)

    def _busy(self) -> bool:
        """Whether the last launch enqueued without waiting is unfinished (never blocks)."""
        ev = self.last_event  # (never asked in a forked child: the exit hook skips those)
        return ev is not None and int(ev.command_execution_status) > 0  # CL_COMPLETE = 0, errors < 0

    def allocate(self, nbytes: int) -> tuple[Any, int, Any]:
        check_not_forked(self.dev, OpenCLError)
        cl = self.dev.cl
        try:
            buf = cl.Buffer(self.dev.ctx, cl.mem_flags.READ_WRITE, size=max(int(nbytes), 16))
        except Exception as e:  # noqa: BLE001
            raise OpenCLError(f"allocating {nbytes} bytes on {self.dev.name} failed: {e}") from e
        return buf, 0, lambda: None  # pyopencl releases the buffer with its last reference

    def from_host(self, handle: Any, host: np.ndarray) -> None:
        check_not_forked(self.dev, OpenCLError)
        q = self.dev.queue
        raw = host.reshape(-1).view(np.uint8)
        wait_interruptibly(self.dev.cl.enqueue_copy(q, handle, raw, is_blocking=False), keep=(handle, raw),
                           device=self.dev)

    def to_host(self, handle: Any, host: np.ndarray) -> None:
        self.synchronize()
        q = self.dev.queue
        raw = host.reshape(-1).view(np.uint8)
        wait_interruptibly(self.dev.cl.enqueue_copy(q, raw, handle, is_blocking=False), keep=(handle, raw),
                           device=self.dev)

    def synchronize(self) -> None:
        """Wait for every launch enqueued on the device's queue (a marker after them, polled by
        :func:`wait_interruptibly`: Ctrl-C raises KeyboardInterrupt even while a kernel never
        ends; a blocking ``clFinish`` would hold the main thread in the driver; issue 31, item 7).

        Raises:
            OpenCLError: an enqueued launch failed (naming the last one enqueued)."""
        check_not_forked(self.dev, OpenCLError)
        pending, self.pending = self.pending, ""
        cl = self.dev.cl
        try:
            wait_interruptibly(cl.enqueue_marker(self.dev.queue), device=self.dev)
            self.dev.queue.finish()  # everything before the marker is done: returns at once
        except Exception as e:  # noqa: BLE001
            raise OpenCLError(f"an enqueued launch on {self.dev.name} failed (last enqueued: {pending or '?'}): "
                              f"{type(e).__name__}: {e}") from e


_MEMORY: list[OpenCLMemory] = []


def memory_space(device: int = 0) -> OpenCLMemory:
    """The ``opencl`` memory space (one per process).

    Raises:
        OpenCLError: OpenCL unusable here, or ``device`` != 0."""
    if device != 0 or not _MEMORY:
        sp = OpenCLMemory(device)
        _MEMORY.append(sp)
    return _MEMORY[0]


def register() -> None:
    """Register the ``opencl`` target with :mod:`anywave.runtime.targets`."""
    OpenCLTarget.register(status)
