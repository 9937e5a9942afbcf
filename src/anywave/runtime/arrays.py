"""Device arrays and the buffer-argument protocol shared by every target (issue 12).

Two halves:

* :func:`describe` turns anything a user may pass for a buffer argument into a
  :class:`Memory` record (where the bytes live, their address range, dtype, contiguity,
  read-only flag) without copying: NumPy arrays, torch tensors (CPU and CUDA), CuPy arrays,
  objects with ``__cuda_array_interface__``, ``__dlpack__`` (+ ``__dlpack_device__``) or
  ``__array_interface__``, DLPack capsules, memoryviews, and anywave's own :class:`Array`.
* :class:`Array` is memory owned by one target's device, allocated through a
  :class:`MemorySpace` of that target (``cuda``: ``cuMemAlloc`` through cuda.bindings;
  ``opencl``: ``cl.Buffer``; ``sycl``: USM through the shim; ``vulkan``: device-local
  ``VkBuffer`` with staged copies; ``emulator``: NumPy). Launches
  read and write it in place; nothing moves to the host until :meth:`Array.numpy`.

A new target plugs in with :func:`register_memory_space` and a class with the five members of
:class:`MemorySpace` (``kind``, ``device``, ``allocate``, ``from_host``, ``to_host``,
``synchronize``); its launch then receives :class:`Array` objects of its own kind.

Memory kinds: ``host`` (memory the CPU addresses: NumPy, CPU tensors, the emulator's arrays),
``cuda``, ``opencl``, ``sycl``, ``vulkan``. Which kinds a target takes: :data:`TARGET_MEMORY`.
"""

from __future__ import annotations

import math
import operator
import os
import sys
import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from anywave.errors import WaveError

__all__ = [
    "Array", "ArgumentError", "Memory", "MemorySpace", "TARGET_MEMORY", "array", "check_aliasing", "describe",
    "empty", "from_dlpack", "from_torch", "memory_space", "register_memory_space", "synchronize", "to_torch",
    "zeros",
]


class ArgumentError(WaveError, TypeError):
    """A buffer argument anywave cannot use as given: an unknown kind of object, memory of the
    wrong device, a strided view, read-only memory for a written buffer, or two arguments
    overlapping where one is written. The message names the argument and what is valid."""


#: the memory kinds each target's launch takes without a copy ("host" memory is copied in and
#: out by targets that cannot address it: CUDA and SYCL)
TARGET_MEMORY: dict[str, tuple[str, ...]] = {
    "emulator": ("host",), "cpu": ("host",), "opencl": ("opencl", "host"), "sycl": ("sycl", "host"),
    "cuda": ("cuda", "host"),
    # Vulkan: device-local buffers; host memory is staged in and out by the launch
    "vulkan": ("vulkan", "host"),
}

#: DLPack device types (dlpack.h, ``DLDeviceType``)
DL_CPU, DL_CUDA, DL_CUDA_HOST, DL_OPENCL, DL_CUDA_MANAGED, DL_ONEAPI = 1, 2, 3, 4, 13, 14


@dataclass(frozen=True)
class Memory:
    """One buffer argument as a target sees it (no bytes copied to make it).

    Attributes:
        kind: ``host``, ``cuda``, ``opencl``, ``sycl`` ... (where the bytes live).
        device: device ordinal within the kind (0 for host memory).
        base: identity of the address space the range lives in (0 for flat address spaces:
            host, CUDA unified addresses, USM; the allocation's id for handle-only memory).
        start, nbytes: byte range ``[start, start + nbytes)`` in that space.
        dtype: element dtype (NumPy), or None when unknown.
        contiguous: C-contiguous (the kernel indexes flat row-major memory).
        readonly: the producer forbids writes.
        value: what the target's launch receives (a NumPy array for host memory, an
            :class:`Array` for device arrays, the object itself for CUDA memory).
        stream: the CUDA stream the producer orders its work on (handle), or None.
    """

    kind: str
    device: int
    base: int
    start: int
    nbytes: int
    dtype: np.dtype | None
    contiguous: bool
    readonly: bool
    value: Any
    stream: int | None = None

    def overlaps(self, other: Memory) -> bool:
        """The two ranges share at least one byte (same kind, device and address space)."""
        return (self.nbytes > 0 and other.nbytes > 0 and self.kind == other.kind and self.device == other.device
                and self.base == other.base and self.start < other.start + other.nbytes
                and other.start < self.start + self.nbytes)


# ----------------------------------------------------------------------------- memory spaces

class MemorySpace(Protocol):
    """Allocation API of one device (what a target offers :class:`Array`)."""

    kind: str  #: memory kind of its allocations (``cuda``, ``opencl`` ...)
    device: int  #: device ordinal
    name: str  #: the target name whose launches take this memory

    def allocate(self, nbytes: int) -> tuple[Any, int, Callable[[], None]]:
        """``(handle, address, free)``: ``nbytes`` (>= 1) of device memory; address 0 when the
        memory has no address the host can name (then ``base`` is the handle's id)."""

    def from_host(self, handle: Any, host: np.ndarray) -> None:
        """Copy the bytes of the C-contiguous ``host`` into the allocation (after earlier work)."""

    def to_host(self, handle: Any, host: np.ndarray) -> None:
        """Wait for earlier work, then copy the allocation's first ``host.nbytes`` bytes out."""

    def synchronize(self) -> None:
        """Wait for every launch enqueued on this device; raise its error if one failed."""


class HostSpace:
    """The emulator's memory: NumPy byte arrays (16-byte aligned, spec §4.2)."""

    kind, device, name = "host", 0, "emulator"

    def allocate(self, nbytes: int) -> tuple[Any, int, Callable[[], None]]:
        raw = np.empty(nbytes + 16, np.uint8)
        off = (-raw.ctypes.data) % 16
        buf = raw[off:off + nbytes]
        return buf, int(buf.ctypes.data), lambda: None

    def from_host(self, handle: Any, host: np.ndarray) -> None:
        handle[:host.nbytes] = host.reshape(-1).view(np.uint8)

    def to_host(self, handle: Any, host: np.ndarray) -> None:
        host.reshape(-1).view(np.uint8)[...] = handle[:host.nbytes]

    def synchronize(self) -> None:
        pass


class CpuSpace(HostSpace):
    """The native CPU target's memory: host memory, as the emulator's (the two share arrays)."""

    name = "cpu"


_SPACE_FACTORIES: dict[str, Callable[[int], MemorySpace]] = {}
_SPACES: dict[tuple[str, int], MemorySpace] = {}
_SPACES_LOCK = threading.Lock()
#: spaces that have had work enqueued (what :func:`synchronize` waits for)
_USED: dict[tuple[str, int], MemorySpace] = {}


def register_memory_space(target: str, factory: Callable[[int], MemorySpace]) -> None:
    """Make ``aw.array(..., target=target)`` allocate through ``factory(device)``."""
    _SPACE_FACTORIES[target] = factory


def _lazy(module: str, attr: str = "memory_space") -> Callable[[int], MemorySpace]:
    def make(device: int) -> MemorySpace:
        import importlib

        return getattr(importlib.import_module(module), attr)(device)

    return make


register_memory_space("emulator", lambda device: HostSpace())
register_memory_space("cpu", lambda device: CpuSpace())
register_memory_space("cuda", _lazy("anywave.runtime.cuda"))
register_memory_space("opencl", _lazy("anywave.runtime.opencl"))
register_memory_space("sycl", _lazy("anywave.runtime.sycl"))
register_memory_space("vulkan", _lazy("anywave.runtime.vulkan"))


def _split_target(target: str | None) -> tuple[str, int | None]:
    if target is None:
        from anywave.runtime.targets import preferred_names

        return os.environ.get("ANYWAVE_TARGET") or preferred_names()[0], None
    name, _, dev = str(target).partition(":")
    if dev:
        try:
            return name, int(dev)
        except ValueError:
            raise ArgumentError(f"target {target!r}: the device after ':' must be an int (e.g. 'cuda:1')") from None
    return name, None


def memory_space(target: str | None = None) -> MemorySpace:
    """The memory space of ``target`` (``"cuda"``, ``"cuda:1"``, ``"opencl"``, ``"sycl"``,
    ``"emulator"``; None: the default target, as launches choose it).

    Raises:
        ArgumentError: a target without device memory; TargetUnavailable: not usable here.
    """
    name, dev = _split_target(target)
    dev = dev or 0
    key = (name, dev)
    sp = _SPACES.get(key)
    if sp is None:
        f = _SPACE_FACTORIES.get(name)
        if f is None:
            raise ArgumentError(f"target {name!r} has no device arrays; targets with them: {sorted(_SPACE_FACTORIES)}")
        with _SPACES_LOCK:
            sp = _SPACES.get(key)
            if sp is None:
                sp = _SPACES[key] = f(dev)
    return sp


def _forget_used_after_fork() -> None:
    _USED.clear()  # the parent's enqueued work is not this process's to wait for


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_used_after_fork)


def mark_used(space: MemorySpace) -> None:
    """Record that work was enqueued on ``space`` (for :func:`synchronize`)."""
    _USED[(space.kind, space.device)] = space


def synchronize() -> None:
    """Wait for every asynchronous launch anywave has enqueued (CUDA streams of the devices
    used, OpenCL queues, SYCL queues). A failed launch raises its target's error here, naming
    the kernel and launch shape."""
    for sp in list(_USED.values()):
        sp.synchronize()


# ----------------------------------------------------------------------------- arrays

#: the most bytes one array may have: sizes are 64-bit on every target (spec §4.2's 64-bit
#: offsets), and a signed 64-bit byte count is what the drivers' size arguments take
MAX_NBYTES = 2**63 - 1


def _shape(shape: Any) -> tuple[int, ...]:
    """``shape`` (an int or a sequence of ints) as a tuple of Python ints.

    Raises:
        ArgumentError: not integers (floats, bools, strings ... are refused, not truncated) or
            a negative size."""
    if isinstance(shape, (str, bytes)) or isinstance(shape, (bool, np.bool_)):
        raise ArgumentError(f"shape must be an int or a tuple of ints, got {shape!r}")
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    try:
        dims = list(shape)
    except TypeError:
        raise ArgumentError(f"shape must be an int or a tuple of ints, got {shape!r}") from None
    out = []
    for s in dims:
        if isinstance(s, (bool, np.bool_)):
            raise ArgumentError(f"shape {shape!r}: {s!r} is a bool, not a size")
        try:
            out.append(operator.index(s))
        except TypeError:
            raise ArgumentError(f"shape must be an int or a tuple of ints, got {shape!r} "
                                f"({type(s).__name__} {s!r} is not an integer)") from None
    if any(s < 0 for s in out):
        raise ArgumentError(f"shape {tuple(out)} has a negative size")
    return tuple(out)


def _nbytes(shape: tuple[int, ...], dtype: np.dtype) -> int:
    """Bytes of an array of ``shape`` and ``dtype``, computed exactly (Python ints: no wrap-around).

    Raises:
        ArgumentError: more than :data:`MAX_NBYTES` bytes."""
    n = math.prod(shape) * dtype.itemsize
    if n > MAX_NBYTES:
        raise ArgumentError(f"shape {shape} of {dtype} is {math.prod(shape)} elements = {n} bytes; an array holds "
                            f"at most {MAX_NBYTES} bytes (2^63 - 1)")
    return n


def _memory_dtypes() -> tuple[np.dtype, ...]:
    from anywave.compiler.types import BY_NAME

    return tuple(dict.fromkeys(np.dtype(t.np_dtype) for t in BY_NAME.values() if t.np_dtype is not None))


def _check_dtype(dt: np.dtype, what: str = "dtype") -> np.dtype:
    """``dt`` when it is an element type of a WAVE buffer (bool, 8-64-bit integers, f16, bf16,
    f32, f64, native byte order).

    Raises:
        ArgumentError: object, string, bytes, complex, structured, datetime, non-native byte
            order ... (their bytes are not values a kernel can use; an object array's bytes are
            pointers that a device copy would keep without references)."""
    ok = _memory_dtypes()
    if dt in ok and dt.isnative:
        return dt
    names = ", ".join(str(d) for d in ok)
    hint = ""
    if dt.kind == "c":
        hint = " (store the real and imaginary parts as two float arrays, or view as float: a.view(np.float32))"
    elif dt.kind in "OSUV" and dt not in ok:
        hint = " (its bytes are not numbers a kernel can use)"
    elif not dt.isnative:
        hint = f" (non-native byte order: convert with a.astype({dt.newbyteorder('=').str!r}))"
    raise ArgumentError(f"{what} {dt!r} is not an element type of anywave arrays{hint}; valid: {names}")


def _np_dtype(dtype: Any) -> np.dtype:
    from anywave.compiler.types import DType

    if isinstance(dtype, DType):
        if dtype.np_dtype is None:
            raise ArgumentError(f"aw.{dtype.name} has no memory representation; use aw.u8 or aw.i32")
        return np.dtype(dtype.np_dtype)
    try:
        dt = np.dtype(dtype)
    except (TypeError, ValueError):
        raise ArgumentError(f"dtype {dtype!r} is not a NumPy dtype or an anywave type (aw.f32 ...)") from None
    return _check_dtype(dt)


class Array:
    """A C-contiguous array in one target's device memory (see the module docstring).

    Attributes:
        shape: tuple of ints; dtype: NumPy dtype; nbytes: bytes; target: the target name
            whose launches take it (``cuda:0`` style for CUDA devices other than 0);
        space: its :class:`MemorySpace`; ptr: device address (0 for OpenCL buffers).

    Create with :func:`array`, :func:`empty`, :func:`zeros`, :func:`from_dlpack` or
    :func:`from_torch`. ``.numpy()`` copies back (waiting for the launches before it).
    """

    __slots__ = ("shape", "dtype", "nbytes", "space", "handle", "ptr", "base", "offset", "_owner", "_free",
                 "__weakref__")

    def __init__(self, space: MemorySpace, shape: tuple[int, ...], dtype: np.dtype, handle: Any, ptr: int,
                 owner: Any = None, free: Callable[[], None] | None = None, base: int = 0, offset: int = 0) -> None:
        self.space, self.shape, self.dtype = space, shape, dtype
        self.nbytes = math.prod(shape) * dtype.itemsize
        self.handle, self.ptr, self._owner = handle, ptr, owner
        self.base, self.offset = base, offset
        self._free = weakref.finalize(self, free) if free is not None else None

    @property
    def target(self) -> str:
        sp = self.space
        return sp.name if sp.device == 0 else f"{sp.name}:{sp.device}"

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def numpy(self) -> np.ndarray:
        """A NumPy copy (shape, dtype as this array), after the launches enqueued before it."""
        out = np.empty(self.shape, self.dtype)
        if out.nbytes:
            self.space.to_host(self.handle, out)
        return out

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def assign(self, values: Any) -> Array:
        """Copy ``values`` (array-like, broadcast to this shape) into the array; returns it."""
        try:
            host = np.ascontiguousarray(np.broadcast_to(np.asarray(values, dtype=self.dtype), self.shape))
        except (TypeError, ValueError, OverflowError) as e:
            raise ArgumentError(f"cannot assign a {type(values).__name__} to an array of shape {self.shape} and "
                                f"dtype {self.dtype}: {e}") from None
        if host.nbytes:
            self.space.from_host(self.handle, host)
        return self

    def reshape(self, *shape: Any) -> Array:
        """The same memory with another shape (same number of elements; no copy)."""
        new = _shape(shape[0] if len(shape) == 1 else shape)
        if math.prod(new) != self.size:
            raise ArgumentError(f"cannot reshape an array of {self.size} elements {self.shape} to {new}")
        return Array(self.space, new, self.dtype, self.handle, self.ptr, owner=self, base=self.base,
                     offset=self.offset)

    # ---- interchange
    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:  # noqa: PLW3201 - the protocol's name
        if self.space.kind != "cuda":
            raise AttributeError(f"a {self.space.kind} array has no __cuda_array_interface__")
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.ptr, False), "version": 3,
                "strides": None, "stream": 1}

    def __dlpack_device__(self) -> tuple[int, int]:
        k = self.space.kind
        if k == "host":
            return (DL_CPU, 0)
        if k == "cuda":
            return (DL_CUDA, self.space.device)
        raise ArgumentError(f"a {k} array cannot be exported through DLPack (its memory has no address the "
                            "consumer could use); copy it with .numpy()")

    def __dlpack__(self, *, stream: Any = None, max_version: Any = None, dl_device: Any = None,
                   copy: Any = None) -> Any:
        k = self.space.kind
        if k == "host":
            return self._host_view().__dlpack__()
        if k == "cuda":
            self.space.synchronize()  # the consumer's stream then sees finished data
            torch = sys.modules.get("torch")
            if torch is None:
                try:
                    import torch
                except ImportError:
                    torch = None
            if torch is not None:
                return torch.as_tensor(_CaiView(self), device=f"cuda:{self.space.device}").__dlpack__()
            try:
                import cupy
            except ImportError:
                raise ArgumentError("exporting a CUDA array through DLPack needs PyTorch or CuPy (their DLPack "
                                    "producers are used)") from None
            return cupy.asarray(_CaiView(self)).toDlpack()
        self.__dlpack_device__()  # raises the reason
        raise AssertionError("unreachable")

    def _host_view(self) -> np.ndarray:
        """The host memory of a ``host`` array as a NumPy view (zero-copy)."""
        h = self.handle
        return h[self.offset:self.offset + self.nbytes].view(self.dtype).reshape(self.shape)

    def __repr__(self) -> str:
        return f"aw.Array(shape={self.shape}, dtype={self.dtype}, target={self.target!r})"


class _CaiView:
    """An object exposing an :class:`Array`'s ``__cuda_array_interface__`` (keeps it alive)."""

    def __init__(self, a: Array) -> None:
        self._a = a
        self.__cuda_array_interface__ = a.__cuda_array_interface__


def empty(shape: Any, dtype: Any = np.float32, *, target: str | None = None) -> Array:
    """An uninitialised array of ``shape`` (int or tuple) and ``dtype`` (NumPy dtype or
    ``aw.f32`` ...) on ``target`` (``"cuda"``, ``"cuda:1"``, ``"opencl"``, ``"sycl"``,
    ``"vulkan"``, ``"emulator"``; None: the default target).

    Raises:
        ArgumentError: bad shape/dtype or a target without device memory;
        TargetUnavailable / driver errors: the target is not usable or out of memory.
    """
    shp, dt = _shape(shape), _np_dtype(dtype)
    nbytes = _nbytes(shp, dt)
    sp = memory_space(target)
    handle, ptr, free = sp.allocate(max(nbytes, 16))
    return Array(sp, shp, dt, handle, ptr, free=free, base=0 if ptr else id(handle))


def zeros(shape: Any, dtype: Any = np.float32, *, target: str | None = None) -> Array:
    """As :func:`empty`, filled with zero bytes (on the device where the space can: Vulkan)."""
    a = empty(shape, dtype, target=target)
    zero = getattr(a.space, "zero", None)
    if zero is not None:
        zero(a.handle)
    elif a.nbytes:
        a.assign(np.zeros(a.shape, a.dtype))
    return a


def array(data: Any, dtype: Any = None, *, target: str | None = None) -> Array:
    """A device array holding a copy of ``data`` (NumPy array, list, anything ``np.asarray``
    takes); ``dtype`` defaults to the data's (float64 data stays float64: say ``aw.f32``).

    Raises: as :func:`empty`; ArgumentError also for data NumPy cannot make one array of
    (ragged lists ...) or of an element type anywave arrays do not hold (objects, strings,
    complex numbers)."""
    dt = None if dtype is None else _np_dtype(dtype)
    if isinstance(data, Array):
        data = data.numpy()
    try:
        host = np.asarray(data, dtype=dt, order="C")  # ascontiguousarray would make a 0-d array 1-d
    except (TypeError, ValueError, OverflowError) as e:
        raise ArgumentError(f"aw.array: cannot make an array{'' if dt is None else f' of {dt}'} from a "
                            f"{type(data).__name__}: {e}") from None
    _check_dtype(host.dtype, "the data's dtype")
    a = empty(host.shape, host.dtype, target=target)
    if host.nbytes:
        a.assign(host)
    return a


# ----------------------------------------------------------------------------- interop

def _dl_device(obj: Any) -> tuple[int, int]:
    try:
        t, d = obj.__dlpack_device__()
        return int(t), int(d)
    except Exception as e:  # noqa: BLE001
        raise ArgumentError(f"{type(obj).__name__}.__dlpack_device__() failed: {e}") from None


def _torch_from_dlpack(obj: Any, what: str | None = None) -> Any:
    try:
        import torch
    except ImportError:
        return None
    try:
        return torch.from_dlpack(obj)
    except Exception as e:  # noqa: BLE001 - torch's reasons (a consumed capsule, an unknown device) vary
        hint = " (a capsule can be read once: pass the producer, e.g. the tensor itself)" if _is_capsule(obj) else ""
        thing = "DLPack capsule" if _is_capsule(obj) else f"DLPack producer {type(obj).__name__}"
        raise ArgumentError(f"{what + ': ' if what else ''}the {thing} cannot be read: "
                            f"{str(e).splitlines()[0] if str(e) else type(e).__name__}{hint}") from None


def torch_buffer_problem(t: Any) -> str | None:
    """Why a torch tensor has no plain memory a kernel could use as a buffer (a sparse, MKL-DNN
    or quantized layout, a meta tensor, a lazy conjugate or negative view, a wrapper without
    storage), or None when it has."""
    import torch

    if t.layout is not torch.strided:
        return f"a {str(t.layout).removeprefix('torch.')} tensor has no dense memory (use .to_dense())"
    if t.is_meta:
        return "a meta tensor has no memory"
    if t.is_quantized:
        return "a quantized tensor's memory holds quantized values (use .dequantize())"
    if t.is_conj() or t.is_neg():
        return "a lazy conjugate/negative view's memory holds other values (use .resolve_conj() / .resolve_neg())"
    try:
        t.data_ptr()
    except Exception as e:  # noqa: BLE001 - tensor subclasses and functorch wrappers raise their own
        return f"its memory cannot be taken ({str(e).splitlines()[0] if str(e) else type(e).__name__})"
    return None


def torch_write_problem(t: Any) -> str | None:
    """Why torch would refuse an in-place write of tensor ``t`` here (as its own in-place ops
    do: a leaf that requires grad, or a view of one, while grad mode is on), or None."""
    if not t.requires_grad:
        return None
    import torch

    if not torch.is_grad_enabled():
        return None
    if t.is_leaf:
        return ("it is a leaf tensor that requires grad, and torch refuses in-place writes to those (write it under "
                "torch.no_grad(), or pass a tensor that does not require grad)")
    base = t._base
    if base is not None and base.is_leaf and base.requires_grad:
        return ("it is a view of a leaf tensor that requires grad, and torch refuses in-place writes to those (write "
                "it under torch.no_grad())")
    return None


def _increment_version_fn() -> Any:
    import torch

    raw = getattr(torch._C, "_increment_version", None)
    if raw is not None:
        return raw  # what torch.autograd.graph.increment_version calls, minus its isinstance test
    from torch.autograd.graph import increment_version

    return increment_version


def bump_versions(tensors: Sequence[Any]) -> None:
    """Tell autograd that the kernel writes ``tensors`` in place
    (``torch.autograd.graph.increment_version``): a tensor saved for backward and then
    written makes ``backward()`` raise, as after torch's own in-place ops."""
    global _BUMP
    if _BUMP is None:
        _BUMP = _increment_version_fn()
    _BUMP(tensors)


_BUMP: Any = None


def from_dlpack(obj: Any) -> Array:
    """An :class:`Array` over the memory of a DLPack producer (an object with ``__dlpack__``
    or a ``dltensor`` capsule), zero-copy: host memory becomes an ``emulator`` array (NumPy),
    CUDA memory a ``cuda`` array. Must be C-contiguous.

    Raises:
        ArgumentError: another device type, or a strided tensor."""
    if _is_capsule(obj):
        t = _torch_from_dlpack(obj)
        if t is None:
            raise ArgumentError("reading a DLPack capsule needs PyTorch (torch.from_dlpack); pass the producer "
                                "object itself instead")
        return from_torch(t)
    dev, idx = _dl_device(obj)
    if dev in (DL_CPU, DL_CUDA_HOST):
        host = np.from_dlpack(obj)
        return _wrap_host(host, "the DLPack array")
    if dev in (DL_CUDA, DL_CUDA_MANAGED):
        t = _torch_from_dlpack(obj)
        if t is None:
            raise ArgumentError("reading CUDA memory through DLPack needs PyTorch (torch.from_dlpack)")
        return from_torch(t)
    raise ArgumentError(f"DLPack device type {dev} is not one anywave arrays live on (CPU {DL_CPU}, "
                        f"CUDA {DL_CUDA})")


def _wrap_host(host: np.ndarray, what: str) -> Array:
    if not host.flags.c_contiguous:
        raise ArgumentError(f"{what} is not C-contiguous (make a contiguous copy first)")
    _check_dtype(host.dtype, f"the dtype of {what}")
    raw = host.reshape(-1).view(np.uint8) if host.size else np.zeros(0, np.uint8)
    return Array(memory_space("emulator"), tuple(host.shape), host.dtype, raw, int(host.ctypes.data),
                 owner=host)


def from_torch(t: Any) -> Array:
    """An :class:`Array` sharing a torch tensor's memory (zero-copy; CPU → an ``emulator``
    array, CUDA device d → a ``cuda:d`` array). The tensor is kept alive.

    Raises:
        ArgumentError: a non-contiguous tensor or a device other than CPU/CUDA."""
    import torch

    if not isinstance(t, torch.Tensor):
        raise ArgumentError(f"from_torch takes a torch.Tensor, got {type(t).__name__}")
    bad = torch_buffer_problem(t)
    if bad is not None:
        raise ArgumentError(f"from_torch: the tensor (shape {tuple(t.shape)}, {t.dtype}, {t.layout}, on {t.device}) "
                            f"cannot become an anywave array: {bad}")
    t = t.detach()
    if not t.is_contiguous():
        raise ArgumentError(f"the tensor (shape {tuple(t.shape)}, strides {t.stride()}) is not contiguous; "
                            "call .contiguous() first")
    dt = _torch_np_dtype(t)
    if dt is None:
        raise ArgumentError(f"torch dtype {t.dtype} has no anywave type")
    if t.device.type == "cpu":
        host = _torch_host_view(t, dt)
        return Array(memory_space("emulator"), tuple(t.shape), dt, host.reshape(-1).view(np.uint8),
                     t.data_ptr(), owner=t)
    if t.device.type == "cuda":
        sp = memory_space(f"cuda:{t.device.index or 0}")
        return Array(sp, tuple(t.shape), dt, t.data_ptr(), t.data_ptr(), owner=t)
    raise ArgumentError(f"tensors on {t.device} cannot become anywave arrays (CPU and CUDA can)")


def to_torch(a: Array) -> Any:
    """A torch tensor sharing the memory of ``a`` (zero-copy; host and CUDA arrays).

    Raises:
        ArgumentError: an OpenCL or SYCL array (copy with ``torch.from_numpy(a.numpy())``)."""
    import torch

    if a.space.kind == "host":
        return torch.from_numpy(a._host_view())
    if a.space.kind == "cuda":
        a.space.synchronize()
        return torch.as_tensor(_CaiView(a), device=f"cuda:{a.space.device}")
    raise ArgumentError(f"a {a.space.kind} array cannot share its memory with torch; copy it with "
                        "torch.from_numpy(a.numpy())")


_TORCH_TO_NP = {"float32": np.dtype(np.float32), "float64": np.dtype(np.float64), "float16": np.dtype(np.float16),
                "int8": np.dtype(np.int8), "int16": np.dtype(np.int16), "int32": np.dtype(np.int32),
                "int64": np.dtype(np.int64), "uint8": np.dtype(np.uint8), "uint16": np.dtype(np.uint16),
                "uint32": np.dtype(np.uint32), "uint64": np.dtype(np.uint64), "bool": np.dtype(np.bool_)}


def _torch_np_dtype(t: Any) -> np.dtype | None:
    """The NumPy dtype of torch tensor ``t``'s elements, None for one NumPy has no dtype for
    (bfloat16 through ml_dtypes, imported here on first need: it is slow to import)."""
    name = str(t.dtype).removeprefix("torch.")
    if name == "bfloat16" and name not in _TORCH_TO_NP:
        import ml_dtypes

        _TORCH_TO_NP["bfloat16"] = np.dtype(ml_dtypes.bfloat16)
    return _TORCH_TO_NP.get(name)


def _torch_host_view(t: Any, dt: np.dtype) -> np.ndarray:
    """A NumPy view (dtype ``dt``) of a contiguous CPU tensor's memory (bf16 included)."""
    import torch

    if t.numel() == 0:
        return np.zeros(t.shape, dt)
    # a contiguous tensor's elements are dense from its data pointer, whatever the strides of
    # its size-1 dimensions say (a (1,) tensor of stride 0 is contiguous); view them as such
    flat = t.as_strided((t.numel(),), (1,))
    return flat.view(torch.uint8).numpy().view(dt).reshape(tuple(t.shape))


def _is_capsule(v: Any) -> bool:
    return type(v).__name__ == "PyCapsule"


# ----------------------------------------------------------------------------- describe

def _contiguous_strides(shape: Sequence[int], strides: Sequence[int] | None, itemsize: int) -> bool:
    if strides is None:
        return True
    acc, ok = itemsize, True
    for n, s in zip(reversed(tuple(shape)), reversed(tuple(strides)), strict=True):
        if n != 1 and s != acc:
            ok = False
        acc *= n
    return ok or acc == 0


def _host_memory(a: np.ndarray, value: Any = None) -> Memory:
    ptr = a.__array_interface__["data"][0] if a.size else 0
    return Memory("host", 0, 0, ptr, a.nbytes, a.dtype, bool(a.flags.c_contiguous), not a.flags.writeable,
                  a if value is None else value)


def describe(v: Any, what: str = "argument") -> Memory:
    """The :class:`Memory` behind one buffer argument (see the module docstring for what is
    accepted). ``what`` names the argument in errors.

    Raises:
        ArgumentError: an object that is not an array of any known kind (lists, for one: they
            have no memory a kernel could write; use ``np.asarray`` or :func:`array`)."""
    if isinstance(v, np.ndarray):
        # a subclass (np.matrix, a masked array ...) is used through a plain ndarray view of the
        # same memory: its own indexing rules (a matrix stays 2-D when flattened) are not the kernel's
        return _host_memory(v, None if type(v) is np.ndarray else v.view(np.ndarray))
    if isinstance(v, Array):
        sp = v.space
        if sp.kind == "host":
            return Memory("host", 0, 0, v.ptr + v.offset, v.nbytes, v.dtype, True, False, v._host_view())
        return Memory(sp.kind, sp.device, v.base, v.ptr + v.offset, v.nbytes, v.dtype, True, False, v)
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(v, torch.Tensor):
        return _torch_memory(v, what)
    cai = getattr(v, "__cuda_array_interface__", None)
    if cai is not None:
        return _cai_memory(v, cai, what)
    if hasattr(v, "__dlpack__") and hasattr(v, "__dlpack_device__"):
        dev, _ = _dl_device(v)
        if dev in (DL_CPU, DL_CUDA_HOST):
            try:
                host = np.from_dlpack(v)
            except Exception as e:  # noqa: BLE001
                raise ArgumentError(f"{what}: np.from_dlpack failed on the {type(v).__name__}: {e}") from None
            return _host_memory(host)
        t = _torch_from_dlpack(v, what)
        if t is None:
            raise ArgumentError(f"{what}: a {type(v).__name__} on DLPack device type {dev} needs PyTorch to read")
        return _torch_memory(t, what, keep=v)
    if _is_capsule(v):
        t = _torch_from_dlpack(v, what)
        if t is None:
            raise ArgumentError(f"{what}: reading a DLPack capsule needs PyTorch (torch.from_dlpack)")
        return _torch_memory(t, what)
    if hasattr(v, "__array_interface__") or isinstance(v, (memoryview, bytearray)):
        return _host_memory(np.asarray(v))
    raise ArgumentError(f"{what}: got a {type(v).__name__}; a buffer argument takes a NumPy array, a torch "
                        "tensor, a CuPy array, an anywave array (aw.array/aw.empty/aw.zeros), or any object with "
                        "__cuda_array_interface__, __dlpack__ or __array_interface__")


def _torch_memory(t: Any, what: str, keep: Any = None) -> Memory:
    bad = torch_buffer_problem(t)
    if bad is not None:
        raise ArgumentError(f"{what}: the torch tensor (shape {tuple(t.shape)}, {t.dtype}, {t.layout}, on {t.device}) "
                            f"cannot be a buffer: {bad}")
    dt = _torch_np_dtype(t)
    contiguous = bool(t.is_contiguous())
    dev = t.device
    if dev.type == "cpu":
        if dt is None or not contiguous:
            return Memory("host", 0, 0, t.data_ptr(), t.numel() * t.element_size(), dt, contiguous, False, None)
        return Memory("host", 0, 0, t.data_ptr(), t.numel() * t.element_size(), dt, True, False,
                      _torch_host_view(t.detach(), dt))
    if dev.type == "cuda":
        idx = dev.index if dev.index is not None else 0
        return Memory("cuda", idx, 0, t.data_ptr(), t.numel() * t.element_size(), dt, contiguous, False,
                      t if keep is None else t, _torch_stream(idx))
    return Memory(dev.type, dev.index or 0, 0, t.data_ptr(), t.numel() * t.element_size(), dt, contiguous, False, t)


def _torch_stream(index: int) -> int:
    """PyTorch's current CUDA stream handle on device ``index`` (the raw getter inductor uses,
    else ``torch.cuda.current_stream``)."""
    torch = sys.modules["torch"]
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return int(raw(index))
    return int(torch.cuda.current_stream(index).cuda_stream)


def _cai_memory(v: Any, cai: dict[str, Any], what: str) -> Memory:
    try:
        dt = np.dtype(cai["typestr"])
        shape = tuple(int(s) for s in cai["shape"])
        ptr, ro = int(cai["data"][0]), bool(cai["data"][1])
    except Exception as e:  # noqa: BLE001
        raise ArgumentError(f"{what}: malformed __cuda_array_interface__ of a {type(v).__name__}: {e}") from None
    n = int(np.prod(shape, dtype=np.int64))
    contiguous = _contiguous_strides(shape, cai.get("strides"), dt.itemsize)
    dev = getattr(getattr(v, "device", None), "id", None)  # CuPy
    if dev is None:
        dev = _cuda_pointer_device(ptr) if n else 0
    s = cai.get("stream")
    stream = None if s is None else (0 if int(s) == 1 else int(s))
    return Memory("cuda", int(dev), 0, ptr, n * dt.itemsize, dt, contiguous, ro, v, stream)


def _cuda_pointer_device(ptr: int) -> int:
    # the driver's query, found as the memory spaces are (by name): arrays sit below the drivers
    return _lazy("anywave.runtime.cuda", "pointer_device")(ptr)


def check_aliasing(mems: Sequence[tuple[str, Memory, bool]], kernel: str) -> None:
    """Refuse overlapping buffers where either is written (spec §4.2: "a runtime should reject
    such a launch"). ``mems``: ``(argument name, memory, written)`` per buffer argument.

    Raises:
        ArgumentError: naming both arguments and the shared byte range."""
    n = len(mems)
    for i in range(n):
        ni, mi, wi = mems[i]
        for j in range(i + 1, n):
            nj, mj, wj = mems[j]
            if (wi or wj) and mi.overlaps(mj):
                lo, hi = max(mi.start, mj.start), min(mi.start + mi.nbytes, mj.start + mj.nbytes)
                written = " and ".join(x for x, w in ((ni, wi), (nj, wj)) if w)
                raise ArgumentError(
                    f"kernel {kernel!r}: buffer arguments {ni!r} and {nj!r} overlap ({hi - lo} shared bytes) and "
                    f"{written} {'is' if ' and ' not in written else 'are'} written by the kernel; spec §4.2 forbids "
                    "overlapping buffers when either is written (pass a copy, e.g. b.copy())")
