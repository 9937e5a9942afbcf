"""CUDA runtime driver on NVIDIA's own Python bindings (``cuda.bindings.driver``).

* Device discovery and properties (:func:`list_devices`, :class:`CudaDevice`).
* Module load: WAVE module → PTX (:mod:`anywave.backends.ptx`) → cubin through the driver's
  linker, cached on disk keyed by PTX hash + arch + driver version (atomic writes); a
  cache hit loads the cubin without JIT.
* Launch with the kernel's ABI: buffers become device pointers (``.param .u64``), scalars
  are passed by value (32- or 64-bit slots, converted exactly as the emulator does).
  NumPy arrays are copied in and (when the kernel may write them) out; objects exposing
  ``__cuda_array_interface__`` (PyTorch, CuPy, Numba) are used zero-copy on the caller's
  stream.
* Resource checks before launch (workgroup shape, registers, shared memory, grid) and driver
  errors as :class:`CudaError` naming the kernel and launch shape.
* :class:`CudaTarget` is a :class:`~anywave.runtime.driver.Driver` like every other runtime's:
  the base's program cache, kernel lookup, check default and runner protocol; its launchers
  (bound launchers, a launch plan's native or Python launcher, stream handles) are the driver's
  hooks, in :mod:`anywave.runtime.cuda_launch` and :mod:`anywave.runtime.cuda_native`.

The optional dependency is ``cuda-python`` (``pip install 'anywave[cuda]'``).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from anywave.abi import check_constant_bytes, dims3
from anywave.errors import LaunchConfigError, WaveError
from anywave.isa.types import Access, Capability
from anywave.runtime.cuda_fake import FakeDriver  # noqa: F401 - re-exported (it lived here)
from anywave.runtime.cuda_launch import (
    LaunchPlan,
    bind_launcher,
    cai_contiguous,
    exact_dims,
    native_launcher,
    param_buffers,
    python_launcher,
    stream_handle,
)
from anywave.runtime.driver import Dims, Driver, PlanLayout, buffer_nbytes, resolve_check

#: the NVIDIA warp: the one W the PTX backend and HIP on NVIDIA run
WAVE_WIDTH = 32


class CudaError(WaveError):
    """A CUDA driver call failed, or a launch was refused; the message names the call, the
    driver's error name/text and (for launches) the kernel and launch shape."""


# ------------------------------------------------------------------------ driver access

_lock = threading.Lock()
_init_state: tuple[bool, str] | None = None


def _driver() -> Any:
    global _DRV
    if _DRV is None:
        from cuda.bindings import driver

        _DRV = driver
    return _DRV


def _err_text(err: Any) -> str:
    drv = _driver()
    try:
        e1, name = drv.cuGetErrorName(err)
        e2, text = drv.cuGetErrorString(err)
        name = name.decode() if isinstance(name, bytes) else str(name)
        text = text.decode() if isinstance(text, bytes) else str(text)
        return f"{name}: {text}"
    except Exception:  # noqa: BLE001
        return str(err)


def _check(result: Any, what: str) -> Any:
    """Unpack a cuda.bindings result tuple; raise CudaError when its status is not success."""
    if isinstance(result, tuple):
        err, rest = result[0], result[1:]
    else:
        err, rest = result, ()
    if int(err) != 0:
        raise CudaError(f"{what} failed: {_err_text(err)}")
    if not rest:
        return None
    return rest[0] if len(rest) == 1 else rest


def driver_status() -> tuple[bool, str]:
    """(True, "") when cuda-python imports, the driver initialises and a device exists;
    otherwise (False, reason). Never raises."""
    global _init_state
    with _lock:
        if _init_state is not None:
            return _init_state
        try:
            drv = _driver()
        except Exception as e:  # noqa: BLE001
            _init_state = (False, f"cuda-python is not installed ({type(e).__name__}: {e}); "
                                  "pip install 'cuda-python>=12'")
            return _init_state
        try:
            _check(drv.cuInit(0), "cuInit")
            n = _check(drv.cuDeviceGetCount(), "cuDeviceGetCount")
        except Exception as e:  # noqa: BLE001 - no driver library raises, not returns
            _init_state = (False, f"no usable NVIDIA driver: {type(e).__name__}: {e}")
            return _init_state
        _init_state = (True, "") if n > 0 else (False, "the NVIDIA driver reports no CUDA device")
        return _init_state


def driver_version() -> int:
    """The driver's CUDA version as an int (13000 = 13.0). Raises CudaError without a driver."""
    _require()
    return int(_check(_driver().cuDriverGetVersion(), "cuDriverGetVersion"))


def _require() -> None:
    ok, reason = driver_status()
    if not ok:
        raise CudaError(reason)


# ------------------------------------------------------------------------ devices

@dataclass(frozen=True)
class DeviceProperties:
    """Properties of one CUDA device (sizes in bytes)."""

    ordinal: int
    name: str
    compute_capability: tuple[int, int]
    multiprocessors: int
    total_memory: int
    warp_size: int
    max_threads_per_block: int
    max_block_dims: tuple[int, int, int]
    max_grid_dims: tuple[int, int, int]
    shared_memory_per_block: int
    shared_memory_per_block_optin: int
    registers_per_block: int
    clock_khz: int
    driver_version: int

    @property
    def arch(self) -> str:
        return f"sm_{self.compute_capability[0]}{self.compute_capability[1]}"


def _attr(dev: Any, name: str) -> int:
    drv = _driver()
    a = getattr(drv.CUdevice_attribute, name)
    return int(_check(drv.cuDeviceGetAttribute(a, dev), f"cuDeviceGetAttribute({name})"))


def device_properties(ordinal: int = 0) -> DeviceProperties:
    """Properties of device ``ordinal``.

    Raises:
        CudaError: no driver, or no such device (the message gives the device count).
    """
    _require()
    drv = _driver()
    n = int(_check(drv.cuDeviceGetCount(), "cuDeviceGetCount"))
    if not 0 <= ordinal < n:
        raise CudaError(f"CUDA device {ordinal} does not exist; {n} device(s): 0..{n - 1}")
    dev = _check(drv.cuDeviceGet(ordinal), "cuDeviceGet")
    raw = _check(drv.cuDeviceGetName(256, dev), "cuDeviceGetName")
    name = raw.split(b"\0", 1)[0].decode() if isinstance(raw, bytes) else str(raw)
    mem = int(_check(drv.cuDeviceTotalMem(dev), "cuDeviceTotalMem"))
    p = "CU_DEVICE_ATTRIBUTE_"
    return DeviceProperties(
        ordinal, name,
        (_attr(dev, p + "COMPUTE_CAPABILITY_MAJOR"), _attr(dev, p + "COMPUTE_CAPABILITY_MINOR")),
        _attr(dev, p + "MULTIPROCESSOR_COUNT"), mem, _attr(dev, p + "WARP_SIZE"),
        _attr(dev, p + "MAX_THREADS_PER_BLOCK"),
        (_attr(dev, p + "MAX_BLOCK_DIM_X"), _attr(dev, p + "MAX_BLOCK_DIM_Y"), _attr(dev, p + "MAX_BLOCK_DIM_Z")),
        (_attr(dev, p + "MAX_GRID_DIM_X"), _attr(dev, p + "MAX_GRID_DIM_Y"), _attr(dev, p + "MAX_GRID_DIM_Z")),
        _attr(dev, p + "MAX_SHARED_MEMORY_PER_BLOCK"), _attr(dev, p + "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
        _attr(dev, p + "MAX_REGISTERS_PER_BLOCK"), _attr(dev, p + "CLOCK_RATE"), driver_version(),
    )


class CudaDevice:
    """One device with its primary context (shared with PyTorch/CuPy)."""

    def __init__(self, ordinal: int = 0) -> None:
        self.props = device_properties(ordinal)
        drv = _driver()
        self.handle = _check(drv.cuDeviceGet(ordinal), "cuDeviceGet")
        self.context = _check(drv.cuDevicePrimaryCtxRetain(self.handle), "cuDevicePrimaryCtxRetain")

    def activate(self) -> None:
        _check(_driver().cuCtxSetCurrent(self.context), "cuCtxSetCurrent")

    def capabilities(self) -> Capability:
        """Capabilities this device offers through the PTX backend."""
        caps = (Capability.F16 | Capability.F64 | Capability.INT64 | Capability.WAVE_OPS
                | Capability.ATOMIC_F32 | Capability.OFFSET64 | Capability.MMA | Capability.MMA_ACC)
        if self.props.compute_capability >= (8, 0):
            caps |= Capability.BF16  # fma.rn.bf16 needs sm_80
        return caps

    def target_info(self) -> Any:
        from anywave.runtime.targets import TargetInfo

        p = self.props
        return TargetInfo(
            "cuda", p.name, WAVE_WIDTH, self.capabilities(), p.shared_memory_per_block_optin,
            p.max_threads_per_block, p.max_block_dims, p.max_grid_dims,
            {"ordinal": p.ordinal, "compute_capability": f"{p.compute_capability[0]}.{p.compute_capability[1]}",
             "arch": p.arch, "multiprocessors": p.multiprocessors, "total_memory": p.total_memory,
             "warp_size": p.warp_size, "registers_per_block": p.registers_per_block,
             "driver_version": p.driver_version, "clock_khz": p.clock_khz})


def list_devices() -> list[CudaDevice]:
    """Every CUDA device (empty when no driver/device)."""
    ok, _ = driver_status()
    if not ok:
        return []
    n = int(_check(_driver().cuDeviceGetCount(), "cuDeviceGetCount"))
    return [CudaDevice(i) for i in range(n)]


# ------------------------------------------------------------------------ cubin cache

def cache_dir() -> Path:
    """Directory of the on-disk cubin cache: ``<anywave cache>/cuda``, created 0700 and checked
    (:func:`anywave.cache.safe_subdir`; a read-only cache falls back to a private
    temporary directory).

    Raises:
        CacheSecurityError: the directory is another user's or writable by others."""
    from anywave.cache import safe_subdir

    try:
        return safe_subdir("cuda")
    except OSError:
        from anywave.cache import cache_dir as root

        return root() / "cuda"  # not creatable now: loads miss, stores fail quietly


def _atomic_write(path: Path, data: bytes) -> None:
    """Write a cache entry atomically with its content hash (see :func:`_read_cached`)."""
    from anywave.cache import atomic_write

    atomic_write(path, data, record_hash=True)


def _read_cached(path: Path) -> bytes | None:
    """A cubin from the cache, or None when absent or damaged (its recorded SHA-256 differs).

    Raises:
        CacheSecurityError: the entry is another user's or writable by others."""
    from anywave.cache import verified_read

    return verified_read(path)


def _link_cubin(ptx: bytes) -> bytes:
    """PTX → cubin through the driver's linker (cuLink*)."""
    import ctypes

    drv = _driver()
    state = _check(drv.cuLinkCreate(0, [], []), "cuLinkCreate")
    try:
        _check(drv.cuLinkAddData(state, drv.CUjitInputType.CU_JIT_INPUT_PTX, ptx, len(ptx),
                                 b"anywave.ptx", 0, [], []), "cuLinkAddData")
        ptr, size = _check(drv.cuLinkComplete(state), "cuLinkComplete")
        return ctypes.string_at(int(ptr), int(size))
    finally:
        drv.cuLinkDestroy(state)


# ------------------------------------------------------------------------ loaded modules

@dataclass
class LoadedKernel:
    name: str
    function: Any
    info: Any  # PtxKernel
    num_regs: int
    max_threads: int
    static_shared: int


class ConstBank:
    """The constant bank of one loaded module (``__wa_cbank``, :data:`anywave.backends.ptx.PTX_CONST_BANK`):
    the device address of its 64 KiB, filled from a kernel's constant buffer on the launch's
    stream just before the kernel, under ``lock`` (held from the copy to the kernel's launch, so
    no other launch of the module refills it in between). A launch on another stream than the
    previous one first waits for the device's work in the context (``cuCtxSynchronize``: the
    previous stream's handle may have been destroyed since, so it is never used again), so a
    kernel still reading the bank is not overwritten -- except while this stream is being
    captured into a graph, where the copy becomes a node of the graph."""

    def __init__(self, ptr: int, device: int = 0) -> None:
        self.ptr = ptr
        #: the ordinal of the device the module is loaded on
        self.device = device
        self.lock = threading.Lock()
        self.stream: int | None = None

    def fill(self, drv: Any, src: int, nbytes: int, hstream: int, shape: str) -> None:
        """Copy ``nbytes`` at device address ``src`` to the bank on ``hstream`` (the caller holds
        ``lock`` until the kernel is launched). Raises CudaError."""
        key = int(hstream or 0)  # a handle object (CUstream) or an int: compared as an int
        if self.stream is not None and self.stream != key:
            capturing = drv.cuStreamIsCapturing(hstream)
            if not int(capturing[0]) and not int(capturing[1]):
                r = drv.cuCtxSynchronize()
                if int(r[0]):
                    raise CudaError(f"{shape}: waiting for the constant bank's previous launches: {_err_text(r[0])}")
        if nbytes:
            r = drv.cuMemcpyDtoDAsync(self.ptr, src, nbytes, hstream)
            if int(r[0]):
                raise CudaError(f"{shape}: copying the constant buffer to the constant bank: {_err_text(r[0])}")
        self.stream = key


class LoadedModule:
    """A WAVE module translated, linked and loaded on one device."""

    def __init__(self, device: CudaDevice, module: Any, *, use_cache: bool = True, checked: bool = False) -> None:
        from anywave.backends.ptx import translate

        self.device = device
        self.module = module
        self.program = translate(module, device.props.arch, checked=checked) if checked else \
            translate(module, device.props.arch)
        ptx = self.program.text.encode() + b"\0"
        key = hashlib.sha256(ptx + device.props.arch.encode() + str(device.props.driver_version).encode())
        self.cache_path = cache_dir() / f"{key.hexdigest()}.cubin"
        self.cache_hit = False
        drv = _driver()
        device.activate()
        image: bytes | None = None
        if use_cache:
            image = _read_cached(self.cache_path)
            self.cache_hit = image is not None
        if image is None:
            try:
                image = _link_cubin(ptx)
                if use_cache:
                    try:
                        _atomic_write(self.cache_path, image)
                    except OSError:
                        pass  # a read-only cache directory is not an error
            except CudaError:
                image = None
        self.image_kind = "cubin" if image is not None else "ptx"
        data = np.frombuffer(image if image is not None else ptx, dtype=np.uint8).copy()
        try:
            self.handle = _check(drv.cuModuleLoadData(data.ctypes.data), "cuModuleLoadData")
        except CudaError as e:
            raise CudaError(f"loading the PTX of kernels {list(self.program.kernels)} for "
                            f"{device.props.arch} failed: {e}") from None
        self.kernels: dict[str, LoadedKernel] = {}
        #: kernels the backend refused here, with the reason (none: PTX raises at translation)
        self.refused: dict[str, str] = {}
        a = drv.CUfunction_attribute
        for name, info in self.program.kernels.items():
            fn = _check(drv.cuModuleGetFunction(self.handle, name.encode()), f"cuModuleGetFunction({name})")
            regs = int(_check(drv.cuFuncGetAttribute(a.CU_FUNC_ATTRIBUTE_NUM_REGS, fn), "cuFuncGetAttribute"))
            mt = int(_check(drv.cuFuncGetAttribute(a.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, fn),
                            "cuFuncGetAttribute"))
            sh = int(_check(drv.cuFuncGetAttribute(a.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, fn),
                            "cuFuncGetAttribute"))
            if info.dynamic_shared:
                _check(drv.cuFuncSetAttribute(fn, a.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                              info.dynamic_shared), "cuFuncSetAttribute")
            self.kernels[name] = LoadedKernel(name, fn, info, regs, mt, sh)
        #: the module's constant bank (kernels that read a constant buffer from it), else None
        self.bank: ConstBank | None = None
        if any(info.const_bank >= 0 for info in self.program.kernels.values()):
            from anywave.backends.ptx import CONST_BANK

            ptr, _size = _check(drv.cuModuleGetGlobal(self.handle, CONST_BANK.encode()), "cuModuleGetGlobal")
            self.bank = ConstBank(int(ptr), device.props.ordinal)


# ------------------------------------------------------------------------ the target

_DRV: Any = None  # cuda.bindings.driver once imported (see _driver)
_TORCH_TENSOR: Any = None  # torch.Tensor once torch has been imported by someone


def _torch_tensor_type() -> Any:
    """``torch.Tensor`` when torch is already imported (never imports it), else None."""
    global _TORCH_TENSOR
    torch = sys.modules.get("torch")
    _TORCH_TENSOR = getattr(torch, "Tensor", None) if torch is not None else None
    return _TORCH_TENSOR


def _bindings_context_setter(context: Any) -> tuple[Any, Any, bool, str]:
    """(set, argument, returns a result tuple, description): cuCtxSetCurrent via cuda.bindings."""
    return (_driver().cuCtxSetCurrent, context, True, "cuda.bindings cuCtxSetCurrent")


def _ctypes_context_setter(context: Any) -> tuple[Any, Any, bool, str] | None:
    """cuCtxSetCurrent called through ctypes on the libcuda that cuda.bindings has already
    loaded (``RTLD_NOLOAD``: never a second copy of the driver), about half the cost of the
    bindings' call. Used only after checking that both see the same driver state (a context
    set through the bindings reads back through ctypes); None when that cannot be shown (not
    Linux, not the real cuda.bindings driver, libcuda not loaded under its soname)."""
    drv = _driver()
    if getattr(drv, "__name__", "") != "cuda.bindings.driver" or not sys.platform.startswith("linux"):
        return None
    try:
        lib = ctypes.CDLL("libcuda.so.1", mode=os.RTLD_NOLOAD | os.RTLD_NOW)
        set_ctx, get_ctx = lib.cuCtxSetCurrent, lib.cuCtxGetCurrent
        set_ctx.argtypes, set_ctx.restype = [ctypes.c_void_p], ctypes.c_int
        get_ctx.argtypes, get_ctx.restype = [ctypes.POINTER(ctypes.c_void_p)], ctypes.c_int
        want = int(context)
        previous = _check(drv.cuCtxGetCurrent(), "cuCtxGetCurrent")
        _check(drv.cuCtxSetCurrent(context), "cuCtxSetCurrent")
        seen = ctypes.c_void_p()
        same = get_ctx(ctypes.byref(seen)) == 0 and (seen.value or 0) == want
        _check(drv.cuCtxSetCurrent(previous), "cuCtxSetCurrent")
    except Exception:  # noqa: BLE001 - no usable ctypes route: the bindings' call is used
        return None
    if not same:
        return None
    return (set_ctx, ctypes.c_void_p(want), False, "ctypes cuCtxSetCurrent (libcuda loaded by cuda.bindings)")


_get_ident = threading.get_ident


#: whether ANYWAVE_CHECK was set when this module was imported (launch(check=None) then
#: resolves it per launch; without it the unchecked fast path pays one global read)
_CHECK_ENV = bool(os.environ.get("ANYWAVE_CHECK"))


def _missing(names: list[str], args: Mapping[str, Any]) -> Any:
    missing = [n for n in names if n not in args]
    unknown = [n for n in args if n not in names]
    raise TypeError(f"arguments missing {missing}, unknown {unknown}; ABI: {names}")


def _constant_checked(fast: Any, constant: list[tuple[int, str]], k: Any, error: Any,
                      bank: tuple[int, ConstBank, int | None, int] | None = None, shape: str = "") -> Any:
    """``fast`` (a plan launcher) preceded by the launch rule of constant buffers (docs/spec.md
    §12): ``constant`` holds (position in a call's arguments, ABI name) of each constant buffer;
    their ``nbytes`` total at most ``LIMITS.max_constant_bytes``, else ``error`` as
    :func:`anywave.abi.check_constant_bytes` words it. A value without ``nbytes`` (another
    layout) is left to ``fast``, which answers MISS for it. ``bank``: (position of the buffer
    the kernel reads from the constant bank, the module's :class:`ConstBank`, the torch device
    whose current stream the plan launches on or None, the plan's stream handle): that buffer
    is copied to the bank on the launch's stream, under the bank's lock, before ``fast``."""
    from anywave.isa.types import LIMITS

    limit = LIMITS.max_constant_bytes

    def checked(args: Any) -> None:
        total = 0
        for i, _ in constant:
            total += getattr(args[i], "nbytes", 0)
        if total > limit:
            check_constant_bytes(k, [(name, getattr(args[i], "nbytes", 0)) for i, name in constant], error)

    if bank is None:
        def launcher(args: Any) -> Any:
            checked(args)
            return fast(args)
    else:
        pos, cb, torch_device, stream = bank
        tensor = _TORCH_TENSOR or _torch_tensor_type()
        current = None
        if torch_device is not None:  # the plan launches on torch's current stream of this device
            import torch

            current = torch.cuda.current_stream

        def launcher(args: Any) -> Any:
            checked(args)
            v = args[pos]
            if tensor is not None and isinstance(v, tensor):
                # a tensor of another device is the launcher's MISS: no copy from it
                src = v.data_ptr() if v.is_cuda and v.get_device() == cb.device else None
            else:
                src = getattr(v, "ptr", None)
            if src is None:  # not a device buffer: the launcher's MISS (nothing launched)
                return fast(args)
            hs = current(torch_device).cuda_stream if current is not None else stream
            drv = _DRV or _driver()
            with cb.lock:
                cb.fill(drv, int(src), int(v.nbytes), int(hs), shape)
                return fast(args)

    for attr in ("path", "guarded", "parts", "keep"):
        if hasattr(fast, attr):
            setattr(launcher, attr, getattr(fast, attr))
    return launcher


class CudaTarget(Driver):
    """The PTX backend on one CUDA device (W = 32), on the runtimes' :class:`Driver` base.

    ``launch(module, kernel, grid, workgroup, args, stream=None)`` runs a kernel; modules are
    translated and loaded once per module object (the base's program cache: :meth:`translate`
    makes a :class:`LoadedModule`). As a conformance runner (:meth:`__call__`, what
    :func:`cuda_runner` returns) it takes ``runner(module, kernel, grid, workgroup, args, W)``
    like every other driver. Its launchers are the driver's hooks: :meth:`plan_launcher` (a
    kernel-language launch plan's native or generated Python launcher,
    :mod:`anywave.runtime.cuda_launch`), :meth:`bind` (a launch whose arguments the kernel
    language checked: a layout's first call, plans with NumPy arguments or the bounds-checked
    build) and :meth:`stream_handle`; ``launch`` (which checks every argument) keeps its own
    bound launchers for repeated launches of a module."""

    error = CudaError
    streams = True

    def __init__(self, device: int = 0, *, use_cache: bool = True, wave_width: int | None = None) -> None:
        if wave_width is not None and wave_width != WAVE_WIDTH:
            raise LaunchConfigError(f"wave_width {wave_width!r} is not offered by the cuda target; it runs "
                                    f"[{WAVE_WIDTH}]")
        super().__init__()
        self.device = CudaDevice(device)
        self.info = self.device.target_info()
        self.use_cache = use_cache
        self._plans: dict[tuple[Any, ...], tuple[Any, LaunchPlan]] = {}
        #: how launches make the device's context current (see _ctypes_context_setter)
        self._context_setter = (_ctypes_context_setter(self.device.context)
                                or _bindings_context_setter(self.device.context))
        #: bound launchers by (id(module), kernel, grid, type(grid), workgroup, type(workgroup),
        #: thread id); keys seen once wait in _fast_seen
        self._fast: dict[tuple[Any, ...], Any] = {}
        self._fast_seen: set[tuple[Any, ...]] = set()

    # ---- the Driver base's hooks
    def translate(self, module: Any, wave_width: int, checked: bool) -> LoadedModule:
        """``module`` (a Module, ``.wbin`` bytes or a path) as PTX at W = 32, linked and loaded
        on the device (the cubin cached on disk); ``checked``: the bounds-checked build."""
        from anywave.abi import load_program

        return LoadedModule(self.device, load_program(module), use_cache=self.use_cache, checked=checked)

    def device_limits(self) -> tuple[str, int | None, int | None]:
        p = self.device.props
        return p.name, p.shared_memory_per_block_optin, p.max_threads_per_block

    def buffer_ok(self, value: Any) -> bool:
        return True  # NumPy arrays (copied), device arrays, __cuda_array_interface__ objects: see launch

    def stream_handle(self, stream: Any) -> int:
        """The driver's handle of ``stream`` (:func:`anywave.runtime.cuda_launch.stream_handle`)."""
        return stream_handle(stream)

    def plan_launcher(self, module: Any, kernel: str, grid: Dims, workgroup: Dims, layout: PlanLayout) -> Any:
        """The launcher of a kernel-language launch plan (every buffer device memory, unchecked
        build): the native one (:func:`~anywave.runtime.cuda_launch.native_launcher`), else the
        generated Python one with the reason in its ``path`` (``"python: <reason>"``). Its
        ``parts`` (native) / ``keep`` (Python) are :meth:`launch_parts`. For a kernel with
        constant buffers, their bytes are checked first at every call (docs/spec.md §12).

        Raises:
            CudaError: the device refuses the geometry."""
        parts = self.launch_parts(module, kernel, grid, workgroup)
        fast, why = native_launcher(parts, layout.specs, layout.nargs, layout.stream, layout.torch_device,
                                    layout.guards, layout.undefined)
        if fast is None:
            fast = python_launcher(parts, layout.specs, layout.nargs, layout.stream, layout.torch_device)
            fast.path = f"python: {why}"
            fast.guarded = False
        from anywave.runtime.arrays import mark_used

        mark_used(parts["space"])
        constant = [(layout.specs[j][0], a.name) for j, a in enumerate(parts["args"]) if a.is_buffer and a.constant]
        if constant:
            # the launch rule of constant buffers (docs/spec.md §12: their bytes, at every call)
            # before the launcher; a value of another layout (no nbytes) is the launcher's MISS
            plan = self._plan_for(module, kernel)
            bank = None
            if plan.bank is not None:  # and the buffer the kernel reads from the constant bank
                bank = (layout.specs[plan.bank[0]][0], plan.bank[1], layout.torch_device, layout.stream)
            fast = _constant_checked(fast, constant, plan.k, self.error, bank, parts["shape"])
        return fast

    def bind(self, module: Any, kernel: str, grid: Any, workgroup: Any, wave_width: int | None = None, *,
             check: bool | None = None, sync: bool = True, stream: Any = None) -> Any:
        """The launch of ``kernel`` with this geometry and these options (see :meth:`launch`),
        checked now except for its arguments (the module loaded, the kernel found, the device's
        limits for the geometry), for a caller that checks them itself (a kernel-language launch
        plan whose :meth:`plan_launcher` does not apply: NumPy arguments, the bounds-checked build,
        the first call of a layout): ``bound(values)`` launches with ``values`` in ABI order,
        checked by the caller (device buffers as their objects, NumPy arrays C-contiguous and
        writable where written, scalars Python ints in range or floats), and returns the
        :class:`~anywave.runtime.targets.LaunchResult`. No argument is checked again; NumPy arrays
        are still copied in and (written ones) back.

        Raises:
            LaunchConfigError: W != 32; CudaError: a refused kernel or geometry."""
        if wave_width is not None and wave_width != WAVE_WIDTH:
            raise LaunchConfigError(f"the CUDA target has W = {WAVE_WIDTH}, asked for W = {wave_width}")
        g, wg = dims3(grid, "grid"), dims3(workgroup, "workgroup")
        result = self._result(kernel)
        if resolve_check(check, self.check_default):
            plan = self._bounds_checked_plan(module, kernel)
            self._check_geometry(plan, g, wg)

            def checked_bound(values: Sequence[Any]) -> Any:
                self._launch_bounds_checked(module, kernel, g, wg, values, stream, plan=plan)
                return result

            return checked_bound
        plan = self._plan_for(module, kernel)
        self._check_geometry(plan, g, wg)

        def bound(values: Sequence[Any]) -> Any:
            self._launch_checked(module, kernel, g, wg, values, stream, sync, plan=plan, prechecked=True)
            return result

        return bound

    def __call__(self, module: Any, kernel: str, grid: Any, workgroup: Any, args: Mapping[str, Any] | Sequence[Any],
                 wave_width: int = WAVE_WIDTH, *, sync: bool = True, check: bool | None = None, stream: Any = None,
                 **_: Any) -> None:
        """The conformance runner's call (``runner(module, kernel, grid, workgroup, args, W)``):
        :meth:`launch` at W = 32.

        Raises:
            LaunchConfigError: W != 32; and what :meth:`launch` raises."""
        if wave_width != WAVE_WIDTH:
            raise LaunchConfigError(f"the CUDA target has W = {WAVE_WIDTH}, asked for W = {wave_width}")
        self.launch(module, kernel, grid, workgroup, args, stream=stream, sync=sync, check=check)

    # ---- loading and launching
    def load(self, module: Any, checked: bool = False) -> LoadedModule:
        """Translate + link + load ``module`` (cached per module object and on disk;
        ``checked``: the bounds-checked build, cached apart)."""
        return self.program(module, WAVE_WIDTH, checked)

    def _failer(self, shape: str) -> Any:
        """``fail(call, status)``: raises CudaError naming ``shape`` (kernel and launch sizes), the
        driver call and its error (a ctypes status is named as the bindings name it)."""
        drv = _DRV or _driver()

        def fail(call: str, err: Any) -> None:
            if type(err) is int and hasattr(drv, "CUresult"):  # a ctypes status: name it as the bindings do
                try:
                    err = drv.CUresult(err)
                except Exception:  # noqa: BLE001
                    pass
            raise CudaError(f"{shape}: {call} failed: {_err_text(err)}")

        return fail

    def launch(self, module: Any, kernel: str, grid: int | Sequence[int],
               workgroup: int | Sequence[int], args: Mapping[str, Any] | Sequence[Any], *,
               stream: Any = None, sync: bool = True, check: bool | None = None) -> Any:
        """Run ``kernel`` of ``module`` on the device.

        Args:
            module: a Module, ``.wbin`` bytes or a path (as :func:`anywave.emu.emulate`).
            kernel: kernel name.
            grid, workgroup: workgroups / threads per workgroup, 1-3 ints.
            args: by name or in ABI order. Buffers: NumPy arrays (copied in; copied back when
                the kernel may write them) or device arrays with ``__cuda_array_interface__``
                (zero-copy). Scalars: numbers converted to the ABI type exactly as the emulator
                does.
            stream: a CUDA stream (handle int, or an object with ``cuda_stream``/``ptr``/
                ``handle``); default the legacy default stream.
            sync: wait for completion (always done when NumPy arrays must be copied back).
            check: run the bounds-checked build (:mod:`anywave.backends.bounds`; default: on when
                ``ANYWAVE_CHECK=1``): the first out-of-bounds access raises OutOfBoundsError after
                the launch (which then always synchronises). A separate build: unchecked launches
                are unchanged.

        Raises:
            OutOfBoundsError: (checked build) a memory access left its buffer.
            CudaError: driver failure or a launch the device cannot run (names kernel and shape).
            TypeError / ValueError: bad arguments (the message lists the ABI).

        The per-kernel work (module lookup, ABI, parameter buffers) is prepared once and cached
        (:class:`~anywave.runtime.cuda_launch.LaunchPlan`); a launch geometry is checked once per
        plan. A repeated launch (same module object, kernel, grid and workgroup, same thread) whose
        buffers are all device arrays goes through a bound launcher
        (:func:`~anywave.runtime.cuda_launch.bind_launcher`) that writes the
        argument values into a prebuilt parameter block and calls ``cuLaunchKernel``, so that it
        costs little more than the driver call; anything else takes the checked path.

        Thread safety: launches from several threads are safe; each thread's bound launchers
        own their parameter block, and the checked path fills the plan's block under a lock.
        The device's context is made current on the calling thread at every launch.
        """
        if check is not None or _CHECK_ENV:
            if resolve_check(check, self.check_default):
                self._launch_bounds_checked(module, kernel, grid, workgroup, args, stream)
                return self._result(kernel)
        # a bound launcher keeps its module alive, so id(module) in its key cannot be reused
        try:
            bound = self._fast.get((id(module), kernel, grid, type(grid), workgroup, type(workgroup), _get_ident()))
        except TypeError:  # unhashable grid or workgroup (a list): the checked path
            bound = None
        if bound is not None and bound(args, stream, sync):
            return self._result(kernel)
        plan, g, wg = self._launch_checked(module, kernel, grid, workgroup, args, stream, sync)
        if plan is not None and not plan.constant and exact_dims(grid) and exact_dims(workgroup):
            key = (id(module), kernel, grid, type(grid), workgroup, type(workgroup), _get_ident())
            if key in self._fast_seen:
                if len(self._fast) < 1024:
                    self._fast[key] = bind_launcher(
                        plan, g, wg, module, drv=_DRV or _driver(), context_setter=self._context_setter,
                        fail=self._failer(plan.shape(g, wg)), tensor_type=_TORCH_TENSOR or _torch_tensor_type(),
                        array_type=_array_type(), space=memory_space(self.device.props.ordinal))
            elif len(self._fast_seen) < 4096:
                self._fast_seen.add(key)
        return self._result(kernel)

    def _result(self, kernel: str) -> Any:
        """The (immutable, cached) :class:`~anywave.runtime.targets.LaunchResult`: which W ran."""
        cache = self.__dict__.setdefault("_results", {})
        r = cache.get(kernel)
        if r is None:
            from anywave.runtime.targets import LaunchResult

            r = cache[kernel] = LaunchResult(kernel, "cuda", self.info.device, self.info.wave_width)
        return r

    def _launch_bounds_checked(self, module: Any, kernel: str, grid: int | Sequence[int],
                               workgroup: int | Sequence[int], args: Mapping[str, Any] | Sequence[Any],
                               stream: Any, plan: LaunchPlan | None = None) -> None:
        """A launch of the bounds-checked build: the hidden parameters (buffer sizes, error
        record) are appended as extra arguments of an extended ABI, the launch synchronises,
        and the error record is checked (:func:`anywave.backends.bounds.raise_if_failed`).
        ``plan`` (:meth:`bind`): the build's plan, with ``args`` in ABI order and checked by the
        caller (not checked again)."""
        from anywave.backends.bounds import new_error_record, raise_if_failed

        prechecked = plan is not None
        if plan is None:
            plan = self._bounds_checked_plan(module, kernel)
        k = plan.lk.info  # PtxKernel: sites, local memory
        wave_args = plan.args[:len(plan.args) - sum(1 for a in plan.args if a.name.startswith("__wa_"))]
        names = [a.name for a in wave_args]
        if prechecked:
            values = list(args)
        elif isinstance(args, Mapping):
            values = [args[n] if n in args else _missing(names, args) for n in names]
            if len(args) != len(names):
                _missing(names, args)
        else:
            values = list(args)
        if len(values) != len(names):
            raise TypeError(f"kernel {kernel!r} takes {len(names)} arguments {names}, got {len(values)}")
        sizes = [buffer_nbytes(v) if a.is_buffer else 0 for a, v in zip(wave_args, values, strict=True)]
        record = new_error_record()
        ext = values + [int(n) for a, n in zip(wave_args, sizes, strict=True) if a.is_buffer] + [record]
        self._launch_checked(module, kernel, grid, workgroup, ext, stream, True, plan=plan, prechecked=prechecked)
        raise_if_failed(record, plan.k, k.sites, sizes, k.local_memory, f"CUDA ({self.device.props.name})")

    def _bounds_checked_plan(self, module: Any, kernel: str) -> LaunchPlan:
        """The plan of the bounds-checked build of ``kernel``: its ABI extended by the hidden
        parameters (a u64 size per buffer, the u32 error record). Raises CudaError: a refused or
        absent kernel."""
        import dataclasses

        from anywave.binary.module import Arg
        from anywave.isa.types import ArgKind, ScalarType

        key = (id(module), kernel, "bounds-checked")
        entry = self._plans.get(key)
        if entry is not None and entry[0] is module:
            return entry[1]
        lm = self.load(module, checked=True)
        self.kernel_info(lm, lm.module, kernel)  # refused or absent: the driver's error
        k = lm.module.kernel(kernel)
        hidden = [Arg(f"__wa_n{i}", ArgKind.SCALAR, ScalarType.U64) for i, a in enumerate(k.args) if a.is_buffer]
        hidden.append(Arg("__wa_err", ArgKind.BUFFER, ScalarType.U32, Access.READWRITE))
        plan = LaunchPlan(lm.kernels[kernel], dataclasses.replace(k, args=list(k.args) + hidden))
        self._plans[key] = (module, plan)
        return plan

    def begin_capture(self) -> CudaCapture:
        """Start recording launches into a CUDA graph (``cuStreamBeginCapture`` on the device's
        capture stream, thread-local mode: other threads' CUDA calls are unaffected). Launches
        on :attr:`CudaCapture.stream` are recorded until :meth:`CudaCapture.end`.

        Raises:
            CudaError: the driver refuses (a capture already open on the stream)."""
        st = _capture_stream(self.device)
        self.device.activate()
        drv = _driver()
        _check(drv.cuStreamBeginCapture(st, drv.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
               "cuStreamBeginCapture")
        return CudaCapture(self.device, st)

    def launch_parts(self, module: Any, kernel: str, grid: tuple[int, int, int],
                     workgroup: tuple[int, int, int]) -> dict[str, Any]:
        """What a caller needs to launch one kernel and geometry without this class (checked
        once here): a fresh parameter block (``u64``, ``u32``: slot i's 32-bit value is
        ``u32[2i]``; ``kp`` its address), ``kinds`` per ABI argument (0 buffer address,
        1 32-bit scalar, 2 64-bit scalar), ``scalar(arg, value)`` (the exact ABI word),
        ``args`` (the ABI), the driver function ``fn``, ``launch`` (``cuLaunchKernel``),
        ``set_ctx``/``ctx``/``ctx_tuple`` (make the context current), ``shared`` bytes,
        ``f32``/``f64`` (the block as floats: slot i's f32 is ``f32[2i]``, its f64 ``f64[i]``),
        ``fail(call, status)`` (raises CudaError naming the kernel and shape), ``space`` (the
        device's memory space) and ``shape``. :meth:`plan_launcher` generates a launch plan's
        launcher from these; the block must be used by one thread at a time.

        Raises:
            CudaError: the device refuses the geometry."""
        plan = self._plan_for(module, kernel)
        g, wg = dims3(grid, "grid"), dims3(workgroup, "workgroup")
        shape = plan.shape(g, wg)
        self._check_geometry(plan, g, wg)
        drv = _DRV or _driver()
        u64, u32, ptrs, kp = param_buffers(len(plan.args))
        set_ctx, ctx_arg, ctx_tuple, _ = self._context_setter
        fail = self._failer(shape)
        return {"u64": u64, "u32": u32, "ptrs": ptrs, "kp": kp, "kinds": list(plan.kinds), "args": plan.args,
                "f32": (ctypes.c_float * (2 * max(len(plan.args), 1))).from_buffer(u64),
                "f64": (ctypes.c_double * max(len(plan.args), 1)).from_buffer(u64),
                "scalar": plan.scalar, "fn": plan.function, "launch": drv.cuLaunchKernel, "set_ctx": set_ctx,
                "ctx": ctx_arg, "ctx_tuple": ctx_tuple, "shared": plan.dynamic_shared, "fail": fail,
                "space": memory_space(self.device.props.ordinal), "shape": shape, "grid": g, "workgroup": wg,
                "module": module, "native": self._native_entries(plan.function)}

    def _native_entries(self, function: Any) -> dict[str, Any] | str:
        """The driver entries a native launcher (:mod:`anywave.runtime.cuda_native`) calls: ``launch``
        and ``ctx_set`` (addresses of ``cuLaunchKernel`` and ``cuCtxSetCurrent`` in the
        ``libcuda.so.1`` that cuda.bindings loaded), ``fn`` and ``ctx`` (the handles as
        integers), ``keep`` (objects to keep alive); or the reason there are none (a string).
        A driver object with its own ``native_entries`` (:class:`FakeDriver`) supplies them."""
        drv = _DRV or _driver()
        own = getattr(drv, "native_entries", None)
        if own is not None:
            return own(function, self.device.context)
        how = self._context_setter[3]
        if not how.startswith("ctypes"):
            return ("the libcuda.so.1 that cuda.bindings uses could not be reached through dlopen "
                    f"(context set by {how})")
        try:
            lib = ctypes.CDLL("libcuda.so.1", mode=os.RTLD_NOLOAD | os.RTLD_NOW)
            launch = ctypes.cast(lib.cuLaunchKernel, ctypes.c_void_p).value
            ctx_set = ctypes.cast(lib.cuCtxSetCurrent, ctypes.c_void_p).value
            fn, ctx = int(function), int(self.device.context)
        except Exception as e:  # noqa: BLE001 - the Python launcher is used instead
            return f"the driver entries are not reachable: {type(e).__name__}: {e}"
        return {"launch": launch, "ctx_set": ctx_set, "fn": fn, "ctx": ctx, "keep": (lib, function)}

    def _plan_for(self, module: Any, kernel: str) -> LaunchPlan:
        entry = self._plans.get((id(module), kernel))
        if entry is None or entry[0] is not module:
            return self._plan(module, kernel)
        return entry[1]

    def _check_geometry(self, plan: LaunchPlan, g: tuple[int, int, int], wg: tuple[int, int, int]) -> None:
        """:meth:`_check_launch` once per plan and geometry (the checked ones remembered)."""
        if (g, wg) not in plan.checked:
            self._check_launch(plan.k, plan.lk, g, wg, f"kernel {plan.k.name!r} grid={g} workgroup={wg}")
            if len(plan.checked) < 64:
                plan.checked.add((g, wg))

    def _launch_checked(self, module: Any, kernel: str, grid: int | Sequence[int],
                        workgroup: int | Sequence[int], args: Mapping[str, Any] | Sequence[Any],
                        stream: Any, sync: bool, plan: LaunchPlan | None = None,
                        prechecked: bool = False) -> tuple[LaunchPlan | None, Any, Any]:
        """:meth:`launch` with every check. Returns (plan, grid, workgroup) when a bound launcher
        could repeat this launch (arguments in a list, tuple or dict, and device arrays only),
        else (None, ...). ``plan``: use this plan (the bounds-checked build's, or :meth:`bind`'s)
        instead of the module's own. ``prechecked`` (:meth:`bind`): ``args`` are in ABI order and
        checked by the caller, so no argument is checked here (NumPy arrays are still copied, and
        the scalars converted by :meth:`LaunchPlan.word`)."""
        entry = self._plans.get((id(module), kernel)) if plan is None else (module, plan)
        if entry is None or entry[0] is not module:
            plan = self._plan(module, kernel)
        else:
            plan = entry[1]
        g, wg = dims3(grid, "grid"), dims3(workgroup, "workgroup")
        self._check_geometry(plan, g, wg)
        names = plan.names
        if prechecked:
            values: Sequence[Any] = args  # type: ignore[assignment]
        elif type(args) is list or type(args) is tuple:
            values: Sequence[Any] = args
            if len(values) != len(names):
                raise TypeError(f"{plan.shape(g, wg)}: takes {len(names)} arguments {names}, got {len(values)}")
        elif isinstance(args, Mapping):
            if len(args) != len(names) or any(n not in args for n in names):
                missing = [n for n in names if n not in args]
                unknown = [n for n in args if n not in names]
                raise TypeError(f"{plan.shape(g, wg)}: arguments missing {missing}, unknown {unknown}; "
                                f"ABI: {names}")
            values = [args[n] for n in names]
        else:
            values = list(args)
            if len(values) != len(names):
                raise TypeError(f"{plan.shape(g, wg)}: takes {len(names)} arguments {names}, got {len(values)}")
        if plan.constant:  # the launch rule of constant buffers (docs/spec.md §12), before any copy
            check_constant_bytes(plan.k, [(names[i], buffer_nbytes(values[i])) for i in plan.constant], self.error)
        drv = _DRV or _driver()
        hstream = 0 if stream is None else stream_handle(stream)
        allocations: list[int] = []
        copy_back: list[tuple[np.ndarray, int, int]] = []
        tensor = _TORCH_TENSOR or _torch_tensor_type()
        try:
            with plan.lock:
                u32, u64 = plan.u32, plan.u64
                for (i, kind, a, lo, hi, mask), v in zip(plan.slots, values, strict=True):
                    if kind == 0:  # buffer: a device pointer
                        if prechecked:
                            ptr = self._checked_pointer(a, v, allocations, copy_back, tensor)
                        elif tensor is not None and isinstance(v, tensor) and v.is_cuda and v.is_contiguous():
                            ptr = v.data_ptr()
                            if ptr & 15:
                                raise ValueError(f"{plan.shape(g, wg)}: buffer argument {a.name!r} is not "
                                                 f"16-byte aligned (address {ptr:#x})")
                        else:
                            ptr = self._buffer_pointer(a, v, plan.shape(g, wg), allocations, copy_back, hstream)
                        u64[i] = ptr
                    else:  # scalar: a Python int of an integer type directly, else exactly as the emulator
                        if prechecked:
                            word = plan.word(i, v)
                        else:
                            word = v & mask if type(v) is int and lo <= v <= hi else plan.scalar(a, v)
                        if kind == 1:
                            u32[2 * i] = word
                        else:
                            u64[i] = word
                set_ctx, ctx_arg, ctx_tuple, _ = self._context_setter
                e = set_ctx(ctx_arg)
                e = e[0] if ctx_tuple else (drv.CUresult(e) if e and hasattr(drv, "CUresult") else e)
                if int(e):
                    raise CudaError(f"{plan.shape(g, wg)}: cuCtxSetCurrent failed: {_err_text(e)}")
                if plan.bank is None:
                    r = drv.cuLaunchKernel(plan.function, g[0], g[1], g[2], wg[0], wg[1], wg[2],
                                           plan.dynamic_shared, hstream, plan.kp, 0)
                else:  # the constant buffer into the module's constant bank, then the kernel
                    bi, bank = plan.bank
                    with bank.lock:
                        bank.fill(drv, int(u64[bi]), buffer_nbytes(values[bi]), hstream, plan.shape(g, wg))
                        r = drv.cuLaunchKernel(plan.function, g[0], g[1], g[2], wg[0], wg[1], wg[2],
                                               plan.dynamic_shared, hstream, plan.kp, 0)
            if int(r[0]):
                raise CudaError(f"{plan.shape(g, wg)}: cuLaunchKernel failed: {_err_text(r[0])}")
            if sync or copy_back:
                try:
                    _check(drv.cuStreamSynchronize(hstream), "cuStreamSynchronize")
                except CudaError as e:
                    raise CudaError(f"{plan.shape(g, wg)}: {e}") from None
            for arr, dptr, nbytes in copy_back:
                _check(drv.cuMemcpyDtoH(arr.ctypes.data, dptr, nbytes), "cuMemcpyDtoH")
        finally:
            for p in allocations:
                drv.cuMemFree(p)
        repeatable = not allocations and (type(args) is list or type(args) is tuple or type(args) is dict)
        return (plan if repeatable else None), g, wg

    def _plan(self, module: Any, kernel: str) -> LaunchPlan:
        lm = self.load(module)
        self.kernel_info(lm, lm.module, kernel)  # refused or absent: the driver's error
        plan = LaunchPlan(lm.kernels[kernel], lm.module.kernel(kernel))
        if plan.lk.info.const_bank >= 0:
            plan.bank = (plan.lk.info.const_bank, lm.bank)
        self._plans[(id(module), kernel)] = (module, plan)
        return plan

    def _check_launch(self, k: Any, lk: LoadedKernel, g: tuple[int, int, int], wg: tuple[int, int, int],
                      shape: str) -> None:
        p = self.device.props
        total = wg[0] * wg[1] * wg[2]
        problems = []
        if k.workgroup_size is not None and tuple(k.workgroup_size) != wg:
            problems.append(f"the kernel requires workgroup size {tuple(k.workgroup_size)}")
        if k.max_workgroup_size is not None and total > k.max_workgroup_size:
            problems.append(f"{total} threads exceed the kernel's maximum {k.max_workgroup_size}")
        if any(w > m for w, m in zip(wg, p.max_block_dims, strict=True)):
            problems.append(f"workgroup exceeds the device's per-dimension maximum {p.max_block_dims}")
        if total > lk.max_threads:
            problems.append(f"{total} threads exceed {lk.max_threads}, the most this kernel can run per "
                            f"workgroup ({lk.num_regs} registers per thread, {p.registers_per_block} per block)")
        if any(x > m for x, m in zip(g, p.max_grid_dims, strict=True)):
            problems.append(f"grid exceeds the device's maximum {p.max_grid_dims}")
        if lk.info.wave_groups and total % (4 * WAVE_WIDTH):
            problems.append(f"the kernel uses mma.group, whose waves work in groups of 4 (docs/spec.md §8.14): a "
                            f"workgroup needs a multiple of {4 * WAVE_WIDTH} threads, got {total}")
        shared = lk.static_shared + lk.info.dynamic_shared
        if shared > p.shared_memory_per_block_optin:
            problems.append(f"{shared} bytes of local memory exceed the device's {p.shared_memory_per_block_optin}")
        if problems:
            raise CudaError(f"launch refused: {shape}: " + "; ".join(problems))

    def _checked_pointer(self, a: Any, v: Any, allocations: list[int], copy_back: list[tuple[np.ndarray, int, int]],
                         tensor: Any) -> int:
        """The device pointer of buffer ``a`` = ``v``, checked by the caller (:meth:`bind`): a CUDA
        tensor's, a device array's, a ``__cuda_array_interface__`` object's; a NumPy array
        (C-contiguous, writable where written) is copied to a fresh allocation (and back after the
        launch where the kernel writes it)."""
        from anywave.runtime.arrays import Array

        if type(v) is Array:
            return v.ptr
        if tensor is not None and isinstance(v, tensor):
            return int(v.data_ptr())
        if not isinstance(v, np.ndarray):
            return int(v.__cuda_array_interface__["data"][0])
        drv = _driver()
        nbytes = int(v.nbytes)
        dptr = int(_check(drv.cuMemAlloc(max(nbytes, 16)), f"cuMemAlloc({nbytes}) for {a.name!r}"))
        allocations.append(dptr)
        if nbytes:
            _check(drv.cuMemcpyHtoD(dptr, v.ctypes.data, nbytes), "cuMemcpyHtoD")
            if a.access & Access.WRITE:
                copy_back.append((v, dptr, nbytes))
        return dptr

    def _buffer_pointer(self, a: Any, v: Any, shape: str, allocations: list[int],
                        copy_back: list[tuple[np.ndarray, int, int]], hstream: int) -> int:
        drv = _driver()
        from anywave.runtime.arrays import Array

        if isinstance(v, Array):
            if v.space.kind == "host":
                v = v._host_view()
            elif v.space.kind != "cuda" or v.space.device != self.device.props.ordinal:
                raise ValueError(f"{shape}: buffer argument {a.name!r} is a {v.target} array; this target is "
                                 f"cuda:{self.device.props.ordinal}")
            else:
                return v.ptr
        cai = getattr(v, "__cuda_array_interface__", None)
        if cai is not None:
            if not cai_contiguous(cai):
                raise ValueError(f"{shape}: buffer argument {a.name!r} must be C-contiguous")
            ptr = int(cai["data"][0])
            if ptr % 16:
                raise ValueError(f"{shape}: buffer argument {a.name!r} is not 16-byte aligned (address {ptr:#x})")
            return ptr
        if not isinstance(v, np.ndarray):
            raise TypeError(f"{shape}: buffer argument {a.name!r} takes a NumPy array or an object with "
                            f"__cuda_array_interface__, got {type(v).__name__}")
        writable = bool(a.access & Access.WRITE)
        if not v.flags.c_contiguous:
            if writable:
                raise ValueError(f"{shape}: buffer argument {a.name!r} is written and must be C-contiguous")
            v = np.ascontiguousarray(v)
        nbytes = int(v.nbytes)
        dptr = int(_check(drv.cuMemAlloc(max(nbytes, 16)), f"cuMemAlloc({nbytes}) for {a.name!r}"))
        allocations.append(dptr)
        if nbytes:
            _check(drv.cuMemcpyHtoD(dptr, v.ctypes.data, nbytes), "cuMemcpyHtoD")
        if writable and nbytes:
            if not v.flags.writeable:
                raise ValueError(f"{shape}: buffer argument {a.name!r} is declared {a.access.spelling} "
                                 "but the array is read-only")
            copy_back.append((v, dptr, nbytes))
        return dptr


# ------------------------------------------------------------------------ device memory

class CudaGraph:
    """A captured sequence of launches on one device (a CUDA graph, instantiated once):
    :meth:`launch` replays it on a stream with one ``cuGraphLaunch``. Made by
    :meth:`CudaTarget.begin_capture` / :meth:`CudaCapture.end`. The argument words (buffer
    addresses, scalar values) are those of the captured launches: a replay reads and writes
    the same memory, which must stay alive as long as the graph."""

    def __init__(self, device: CudaDevice, graph: Any, exec_: Any, stream: Any, kernels: int) -> None:
        self.device, self._graph, self._exec, self._stream = device, graph, exec_, stream
        self.kernels = kernels
        self._launch = _driver().cuGraphLaunch

    def launch(self, stream: Any = None) -> None:
        """Enqueue one replay on ``stream`` (None: the capture's own stream); asynchronous.

        Raises:
            CudaError: the driver refuses the launch."""
        r = self._launch(self._exec, self._stream if stream is None else stream)
        e = r[0] if isinstance(r, tuple) else r
        if int(e):
            raise CudaError(f"cuGraphLaunch of a graph of {self.kernels} launches failed: {_err_text(e)}")

    def close(self) -> None:
        """Free the graph and its executable (the capture stream stays with the device)."""
        drv = _driver()
        if self._exec is not None:
            drv.cuGraphExecDestroy(self._exec)
            drv.cuGraphDestroy(self._graph)
            self._exec = self._graph = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - at interpreter exit the driver may be gone
            pass


class CudaCapture:
    """An open stream capture (:meth:`CudaTarget.begin_capture`): launches enqueued on
    :attr:`stream` are recorded, not run, until :meth:`end`."""

    def __init__(self, device: CudaDevice, stream: Any) -> None:
        self.device, self.stream = device, stream
        self.handle = int(stream)
        self.kernels = 0

    def end(self) -> CudaGraph:
        """Stop recording and instantiate the graph.

        Raises:
            CudaError: the capture was invalidated (an operation that is not permitted during
                capture, such as a synchronous copy or a wait, ran on the stream)."""
        drv = _driver()
        self.device.activate()
        graph = _check(drv.cuStreamEndCapture(self.stream), "cuStreamEndCapture")
        exec_ = _check(drv.cuGraphInstantiate(graph, 0), "cuGraphInstantiate")
        return CudaGraph(self.device, graph, exec_, self.stream, self.kernels)

    def abort(self) -> None:
        """End the capture and discard what it recorded (after an error inside the block)."""
        drv = _driver()
        try:
            r = drv.cuStreamEndCapture(self.stream)
            if isinstance(r, tuple) and len(r) > 1 and r[1] is not None and not int(r[0]):
                drv.cuGraphDestroy(r[1])
        except Exception:  # noqa: BLE001 - the error that ended the block is the one to report
            pass


_CAPTURE_STREAMS: dict[int, Any] = {}


def _capture_stream(device: CudaDevice) -> Any:
    """The device's capture stream (non-blocking, created once: a graph replays on it)."""
    ordinal = device.props.ordinal
    st = _CAPTURE_STREAMS.get(ordinal)
    if st is None:
        device.activate()
        st = _CAPTURE_STREAMS[ordinal] = _check(_driver().cuStreamCreate(1), "cuStreamCreate")  # NON_BLOCKING
    return st


def _array_type() -> Any:
    from anywave.runtime.arrays import Array

    return Array


class CudaMemory:
    """The ``cuda`` memory space of one device (:class:`anywave.runtime.arrays.MemorySpace`):
    ``cuMemAlloc`` / ``cuMemFree`` / ``cuMemcpy*`` through cuda.bindings in the device's
    primary context (the one PyTorch and CuPy use)."""

    kind = name = "cuda"

    def __init__(self, device: int = 0) -> None:
        self.device = int(device)
        self.dev = CudaDevice(self.device)
        #: the last launches enqueued without waiting (named when a later wait fails)
        self.pending: str = ""

    def allocate(self, nbytes: int) -> tuple[Any, int, Any]:
        drv = _driver()
        self.dev.activate()
        ptr = int(_check(drv.cuMemAlloc(max(int(nbytes), 16)), f"cuMemAlloc({nbytes}) on cuda:{self.device}"))

        def free() -> None:
            try:
                self.dev.activate()
                drv.cuMemFree(ptr)
            except Exception:  # noqa: BLE001 - at interpreter exit the driver may be gone
                pass

        return ptr, ptr, free

    def from_host(self, handle: Any, host: np.ndarray) -> None:
        self.synchronize()
        _check(_driver().cuMemcpyHtoD(int(handle), host.ctypes.data, host.nbytes), "cuMemcpyHtoD")

    def to_host(self, handle: Any, host: np.ndarray) -> None:
        self.synchronize()
        _check(_driver().cuMemcpyDtoH(host.ctypes.data, int(handle), host.nbytes), "cuMemcpyDtoH")

    def synchronize(self) -> None:
        """``cuCtxSynchronize`` on the device (every stream). A failed launch raises CudaError
        naming the launches enqueued since the last wait."""
        self.dev.activate()
        r = _driver().cuCtxSynchronize()
        pending, self.pending = self.pending, ""
        e = r[0] if isinstance(r, tuple) else r
        if int(e):
            raise CudaError(f"an enqueued launch on cuda:{self.device} failed ({pending or 'unknown kernel'}): "
                            f"{_err_text(e)}")


_MEMORY: dict[int, CudaMemory] = {}


def memory_space(device: int = 0) -> CudaMemory:
    """The ``cuda`` memory space of device ``device`` (one per process and device).

    Raises:
        CudaError: no driver or no such device."""
    sp = _MEMORY.get(device)
    if sp is None:
        sp = _MEMORY[device] = CudaMemory(device)
    return sp


def pointer_device(ptr: int) -> int:
    """The device ordinal a CUDA device address belongs to (``cuPointerGetAttribute``).

    Raises:
        CudaError: not an address the driver knows."""
    drv = _driver()
    attr = drv.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
    return int(_check(drv.cuPointerGetAttribute(attr, ptr), f"cuPointerGetAttribute({ptr:#x})"))


def load_example(name: str) -> Any:
    """Assemble a bundled example kernel (``anywave/examples/NAME.wave``)."""
    from importlib import resources

    from anywave.asm import assemble

    text = resources.files("anywave.examples").joinpath(f"{name}.wave").read_text()
    return assemble(text, f"examples/{name}.wave")


_PROBED: tuple[Any, tuple[Any, ...]] | None = None  # (driver, TargetInfo of each device): see register


def register() -> None:
    """Register the ``cuda`` target with :mod:`anywave.runtime.targets` (unavailable, with the
    reason, without cuda-python, a driver or a device)."""
    from anywave.runtime.targets import register_target

    def probe() -> tuple[bool, str, Sequence[Any]]:
        global _PROBED
        ok, reason = driver_status()
        if not ok:
            return False, reason, ()
        # the devices of one driver do not change within a process (enumerated at cuInit): their
        # descriptions are queried once per driver object (a launch's full path probes its target)
        hit = _PROBED
        if hit is None or hit[0] is not _DRV:
            hit = _PROBED = (_DRV, tuple(d.target_info() for d in list_devices()))
        return True, "", hit[1]

    register_target("cuda", probe, lambda **options: CudaTarget(**options))


def cuda_runner(target: CudaTarget | None = None) -> CudaTarget:
    """A conformance-suite runner (``runner(module, kernel, grid, workgroup, args, W)``) on CUDA:
    the driver itself (:meth:`CudaTarget.__call__`), as ``opencl_runner()`` is OpenCL's.

    Raises (when called) LaunchConfigError (a ValueError) for W != 32."""
    return target or CudaTarget()
