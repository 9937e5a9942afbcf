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

The optional dependency is ``cuda-python`` (``pip install 'anywave[cuda]'``).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from anywave.errors import WaveError
from anywave.isa.types import Access, Capability

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
                | Capability.ATOMIC_F32 | Capability.OFFSET64 | Capability.MMA)
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
    """Directory of the on-disk cubin cache (``$ANYWAVE_CACHE_DIR/cuda`` or the user cache)."""
    root = os.environ.get("ANYWAVE_CACHE_DIR")
    if root:
        return Path(root) / "cuda"
    try:
        import platformdirs

        return Path(platformdirs.user_cache_dir("anywave")) / "cuda"
    except ImportError:
        return Path.home() / ".cache" / "anywave" / "cuda"


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


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


class LoadedModule:
    """A WAVE module translated, linked and loaded on one device."""

    def __init__(self, device: CudaDevice, module: Any, *, use_cache: bool = True) -> None:
        from anywave.backends.ptx import translate

        self.device = device
        self.module = module
        self.program = translate(module, device.props.arch)
        ptx = self.program.text.encode() + b"\0"
        key = hashlib.sha256(ptx + device.props.arch.encode() + str(device.props.driver_version).encode())
        self.cache_path = cache_dir() / f"{key.hexdigest()}.cubin"
        self.cache_hit = False
        drv = _driver()
        device.activate()
        image: bytes | None = None
        if use_cache and self.cache_path.exists():
            image = self.cache_path.read_bytes()
            self.cache_hit = True
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


# ------------------------------------------------------------------------ the target

_DRV: Any = None  # cuda.bindings.driver once imported (see _driver)
_TORCH_TENSOR: Any = None  # torch.Tensor once torch has been imported by someone
_SCALAR_INT: Any = None  # anywave.emu.machine's tables, imported on first use
_scalar_word: Any = None


def _torch_tensor_type() -> Any:
    """``torch.Tensor`` when torch is already imported (never imports it), else None."""
    global _TORCH_TENSOR
    torch = sys.modules.get("torch")
    _TORCH_TENSOR = getattr(torch, "Tensor", None) if torch is not None else None
    return _TORCH_TENSOR


class _LaunchPlan:
    """Everything about one loaded kernel that does not change between launches: the ABI,
    the driver function, and a parameter buffer (one 8-byte slot per argument, and the array
    of slot pointers that ``cuLaunchKernel`` takes), refilled under ``lock`` at each launch."""

    def __init__(self, lk: LoadedKernel, k: Any) -> None:
        self.lk = lk
        self.k = k
        self.function = lk.function
        self.dynamic_shared = lk.info.dynamic_shared
        self.args = list(k.args)
        self.names = [a.name for a in self.args]
        #: 0 buffer (u64 pointer), 1 32-bit scalar, 2 64-bit scalar
        self.kinds = [0 if a.is_buffer else (2 if a.type.bits == 64 else 1) for a in self.args]
        from anywave.emu.machine import _SCALAR_INT as ints

        #: (index, kind, arg, lo, hi, mask): Python ints in [lo, hi] pass as ``v & mask``
        self.slots = []
        for i, (kind, a) in enumerate(zip(self.kinds, self.args, strict=True)):
            lo, hi = ints.get(a.type, (1, 0)) if kind else (1, 0)
            self.slots.append((i, kind, a, lo, hi, (1 << a.type.bits) - 1 if kind else 0))
        n = max(len(self.args), 1)
        self.u64 = (ctypes.c_uint64 * n)()
        self.u32 = (ctypes.c_uint32 * (2 * n)).from_buffer(self.u64)  # slot i's 32-bit value: u32[2i]
        base = ctypes.addressof(self.u64)
        self.ptrs = (ctypes.c_void_p * n)(*[base + 8 * i for i in range(n)])
        self.kp = ctypes.addressof(self.ptrs) if self.args else 0
        self.lock = threading.Lock()
        self.checked: set[tuple[tuple[int, int, int], tuple[int, int, int]]] = set()
        self._words: dict[tuple[str, type, str], int] = {}

    def shape(self, g: tuple[int, int, int], wg: tuple[int, int, int]) -> str:
        return f"kernel {self.k.name!r} grid={g} workgroup={wg}"

    def scalar(self, a: Any, v: Any) -> int:
        """The ABI word of scalar argument ``a`` = ``v``, exactly as the emulator converts it
        (numbers through a small cache keyed by type and repr, which is exact for the number
        types the emulator accepts; other values and NaNs uncached)."""
        global _SCALAR_INT, _scalar_word
        if _scalar_word is None:
            from anywave.emu import machine

            _SCALAR_INT, _scalar_word = machine._SCALAR_INT, machine._scalar_word
        tv = type(v)
        if tv is int or tv is float or isinstance(v, np.generic):
            try:
                key = (a.name, tv, repr(v))
            except Exception:  # noqa: BLE001 - an unprintable value just skips the cache
                key = None
            if key is not None and v == v:  # NaNs keep their payload: never cached
                w = self._words.get(key)
                if w is None:
                    w = _scalar_word(self.k, a.name, a.type, v)
                    if len(self._words) < 256:
                        self._words[key] = w
                return w
        return _scalar_word(self.k, a.name, a.type, v)



def _dims(value: int | Sequence[int], what: str) -> tuple[int, int, int]:
    if type(value) is int and value >= 1:
        return (value, 1, 1)
    if isinstance(value, (int, np.integer)):
        value = (int(value),)
    vals = [int(v) for v in value]
    if not 1 <= len(vals) <= 3 or any(v < 1 for v in vals):
        raise ValueError(f"{what} must be 1-3 positive ints, got {tuple(vals)}")
    return tuple(vals + [1] * (3 - len(vals)))  # type: ignore[return-value]


def _stream_handle(stream: Any) -> int:
    if stream is None:
        return 0
    for attr in ("cuda_stream", "ptr", "handle"):
        if hasattr(stream, attr):
            return int(getattr(stream, attr))
    return int(stream)


class CudaTarget:
    """The PTX backend on one CUDA device (W = 32).

    ``launch(module, kernel, grid, workgroup, args, stream=None)`` runs a kernel; modules are
    translated and loaded once per module object (kept alive by the target)."""

    def __init__(self, device: int = 0, *, use_cache: bool = True) -> None:
        self.device = CudaDevice(device)
        self.info = self.device.target_info()
        self.use_cache = use_cache
        self._modules: dict[int, tuple[Any, LoadedModule]] = {}
        self._plans: dict[tuple[int, str], tuple[Any, _LaunchPlan]] = {}

    def load(self, module: Any) -> LoadedModule:
        """Translate + link + load ``module`` (cached per module object and on disk)."""
        hit = self._modules.get(id(module))
        if hit is not None and hit[0] is module:
            return hit[1]
        from anywave.emu.machine import load_program

        mod = load_program(module)
        lm = LoadedModule(self.device, mod, use_cache=self.use_cache)
        self._modules[id(module)] = (module, lm)
        return lm

    def launch(self, module: Any, kernel: str, grid: int | Sequence[int],
               workgroup: int | Sequence[int], args: Mapping[str, Any] | Sequence[Any], *,
               stream: Any = None, sync: bool = True) -> None:
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

        Raises:
            CudaError: driver failure or a launch the device cannot run (names kernel and shape).
            TypeError / ValueError: bad arguments (the message lists the ABI).

        The per-kernel work (module lookup, ABI, parameter buffers) is prepared once and cached
        (:class:`_LaunchPlan`); a launch geometry is checked once per plan; device arrays and
        repeated scalar values take a fast path, so that a launch with device arrays costs
        little more than the driver's ``cuLaunchKernel``.
        """
        entry = self._plans.get((id(module), kernel))
        if entry is None or entry[0] is not module:
            plan = self._plan(module, kernel)
        else:
            plan = entry[1]
        g, wg = _dims(grid, "grid"), _dims(workgroup, "workgroup")
        if (g, wg) not in plan.checked:
            shape = f"kernel {kernel!r} grid={g} workgroup={wg}"
            self._check_launch(plan.k, plan.lk, g, wg, shape)
            if len(plan.checked) < 64:
                plan.checked.add((g, wg))
        names = plan.names
        if type(args) is list or type(args) is tuple:
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
        drv = _DRV or _driver()
        hstream = 0 if stream is None else _stream_handle(stream)
        allocations: list[int] = []
        copy_back: list[tuple[np.ndarray, int, int]] = []
        tensor = _TORCH_TENSOR or _torch_tensor_type()
        try:
            with plan.lock:
                u32, u64 = plan.u32, plan.u64
                for (i, kind, a, lo, hi, mask), v in zip(plan.slots, values, strict=True):
                    if kind == 0:  # buffer: a device pointer
                        if tensor is not None and isinstance(v, tensor) and v.is_cuda and v.is_contiguous():
                            ptr = v.data_ptr()
                            if ptr & 15:
                                raise ValueError(f"{plan.shape(g, wg)}: buffer argument {a.name!r} is not "
                                                 f"16-byte aligned (address {ptr:#x})")
                        else:
                            ptr = self._buffer_pointer(a, v, plan.shape(g, wg), allocations, copy_back, hstream)
                        u64[i] = ptr
                    else:  # scalar: a Python int of an integer type directly, else exactly as the emulator
                        word = v & mask if type(v) is int and lo <= v <= hi else plan.scalar(a, v)
                        if kind == 1:
                            u32[2 * i] = word
                        else:
                            u64[i] = word
                r = drv.cuCtxSetCurrent(self.device.context)
                if int(r[0]):
                    raise CudaError(f"{plan.shape(g, wg)}: cuCtxSetCurrent failed: {_err_text(r[0])}")
                r = drv.cuLaunchKernel(plan.function, g[0], g[1], g[2], wg[0], wg[1], wg[2], plan.dynamic_shared,
                                       hstream, plan.kp, 0)
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

    def _plan(self, module: Any, kernel: str) -> _LaunchPlan:
        lm = self.load(module)
        if kernel not in lm.kernels:
            raise ValueError(f"module has no kernel {kernel!r}; its kernels are {list(lm.kernels)}")
        plan = _LaunchPlan(lm.kernels[kernel], lm.module.kernel(kernel))
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
        shared = lk.static_shared + lk.info.dynamic_shared
        if shared > p.shared_memory_per_block_optin:
            problems.append(f"{shared} bytes of local memory exceed the device's {p.shared_memory_per_block_optin}")
        if problems:
            raise CudaError(f"launch refused: {shape}: " + "; ".join(problems))

    def _buffer_pointer(self, a: Any, v: Any, shape: str, allocations: list[int],
                        copy_back: list[tuple[np.ndarray, int, int]], hstream: int) -> int:
        drv = _driver()
        cai = getattr(v, "__cuda_array_interface__", None)
        if cai is not None:
            strides = cai.get("strides")
            if strides is not None:
                itemsize = np.dtype(cai["typestr"]).itemsize
                expect, acc = [], itemsize
                for n in reversed(cai["shape"]):
                    expect.insert(0, acc)
                    acc *= n
                if tuple(strides) != tuple(expect) and int(np.prod(cai["shape"])) > 1:
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


def load_example(name: str) -> Any:
    """Assemble a bundled example kernel (``anywave/examples/NAME.wave``)."""
    from importlib import resources

    from anywave.asm import assemble

    text = resources.files("anywave.examples").joinpath(f"{name}.wave").read_text()
    return assemble(text, f"examples/{name}.wave")


def cuda_runner(target: CudaTarget | None = None) -> Any:
    """A conformance-suite runner (``runner(module, kernel, grid, workgroup, args, W)``) on CUDA.

    Raises (when called) ValueError for W != 32."""
    tgt = target or CudaTarget()

    def run(module: Any, kernel: str, grid: Any, workgroup: Any, args: dict[str, Any], wave_width: int) -> None:
        if wave_width != WAVE_WIDTH:
            raise ValueError(f"the CUDA target has W = {WAVE_WIDTH}, asked for W = {wave_width}")
        tgt.launch(module, kernel, grid, workgroup, args)

    run.target = tgt  # type: ignore[attr-defined]
    return run
