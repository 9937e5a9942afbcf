"""HIP runtime driver for AMD GPUs on AMD's ``hip-python`` (``from hip import hip, hiprtc``).

**Never run on AMD hardware**: no AMD GPU was available while writing it. What is checked here is
that its HIP source compiles with ``hipcc --genco`` for gfx90a/gfx940/gfx1030 (tests/test_hip.py),
that the same source runs bit-exactly on NVIDIA through :mod:`anywave.runtime.hip_nvidia`, and
that a machine without hip-python reports the target as unavailable with the reason.

* Device discovery: ``hipGetDeviceCount`` / ``hipGetDeviceProperties`` (name, ``gcnArchName``,
  ``warpSize`` = W: 64 on CDNA, 32 on RDNA).
* Compile: :mod:`anywave.backends.hip` at the device's W -> hiprtc with
  ``--offload-arch=<gcnArchName>`` and the backend's build options -> code object, cached per
  module object.
* Launch: ``hipModuleLaunchKernel`` with the C-family ABI (WAVE arguments, then the three
  workgroup sizes; a 1-D workgroup padded to whole waves). Buffers: NumPy arrays (copied in and,
  when writable, back), or device arrays through ``__cuda_array_interface__`` (which ROCm builds
  of PyTorch/CuPy expose) or DLPack (``__dlpack_device__`` of kind ROCm) used zero-copy.

Selected (target ``hip``) when hip-python imports and reports at least one device.
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from anywave.errors import WaveError
from anywave.isa.types import Access, Capability
from anywave.runtime.driver import Driver

#: DLPack device type of ROCm memory (dlpack.h: kDLROCM)
DLPACK_ROCM = 10


class HipError(WaveError):
    """hip-python is missing, a HIP/hiprtc call failed, or a launch was refused (the message says which)."""


def _import_hip() -> tuple[Any, Any]:
    """(hip, hiprtc) modules of hip-python. Raises HipError when they cannot be imported."""
    try:
        from hip import hip, hiprtc
    except Exception as e:  # noqa: BLE001 - ImportError, or a missing libamdhip64.so (OSError)
        raise HipError(f"hip-python is not usable ({type(e).__name__}: {e}); on a ROCm machine: "
                       "pip install hip-python (matching the ROCm version)") from e
    return hip, hiprtc


def _ok(result: Any, what: str) -> Any:
    """Unpack a hip-python result tuple ``(err, *values)``; raise HipError on failure."""
    err, rest = (result[0], result[1:]) if isinstance(result, tuple) else (result, ())
    code = getattr(err, "value", err)
    if int(code) != 0:
        raise HipError(f"{what} failed: {err}")
    return None if not rest else (rest[0] if len(rest) == 1 else rest)


def status() -> tuple[bool, str]:
    """(usable, reason) of the ``hip`` target here; never raises."""
    try:
        hip, _ = _import_hip()
        n = _ok(hip.hipGetDeviceCount(), "hipGetDeviceCount")
    except HipError as e:
        return False, str(e)
    except Exception as e:  # noqa: BLE001
        return False, f"HIP runtime unusable: {type(e).__name__}: {e}"
    return (True, "") if int(n) > 0 else (False, "the HIP runtime reports no AMD GPU")


def _text(v: Any) -> str:
    return v.decode(errors="replace").split("\0", 1)[0] if isinstance(v, bytes) else str(v)


class HipTarget(Driver):
    """The HIP backend on one AMD device. ``launch(module, kernel, grid, workgroup, args)``."""

    error = HipError

    def __init__(self, device: int = 0) -> None:
        super().__init__()
        hip, self.hiprtc = _import_hip()
        self.hip = hip
        _ok(hip.hipSetDevice(device), f"hipSetDevice({device})")
        props = hip.hipDeviceProp_t()
        _ok(hip.hipGetDeviceProperties(props, device), "hipGetDeviceProperties")
        self.arch = _text(props.gcnArchName).split(":")[0]  # "gfx90a:sramecc+:xnack-" -> "gfx90a"
        self.wave_width = int(props.warpSize)
        from anywave.backends.cfamily import Features
        from anywave.runtime.targets import TargetInfo

        self.features = Features(fp64=True, wave_widths=(self.wave_width,))
        caps = (Capability.F16 | Capability.BF16 | Capability.F64 | Capability.INT64 | Capability.OFFSET64
                | Capability.ATOMIC_F32 | Capability.WAVE_OPS | Capability.MMA)
        self.local_memory = int(props.sharedMemPerBlock)
        self.max_threads = int(props.maxThreadsPerBlock)
        self.info = TargetInfo("hip", _text(props.name), self.wave_width, caps, self.local_memory,
                               self.max_threads, tuple(int(x) for x in props.maxThreadsDim),  # type: ignore[arg-type]
                               tuple(int(x) for x in props.maxGridSize),  # type: ignore[arg-type]
                               {"arch": self.arch, "ordinal": device})

    def device_limits(self) -> tuple[str, int | None, int | None]:
        return self.info.device, self.local_memory, self.max_threads

    def translate(self, module: Any, wave_width: int, checked: bool) -> Any:
        from anywave.backends.hip import translate

        return translate(module, wave_width, self.features)  # no bounds-checked build

    def compile(self, source: str) -> bytes:
        """hiprtc: HIP source -> code object for this device. Raises HipError with the log."""
        from anywave.backends.hip import BUILD_OPTIONS

        rtc = self.hiprtc
        prog = _ok(rtc.hiprtcCreateProgram(source.encode(), b"anywave.hip", 0, [], []), "hiprtcCreateProgram")
        opts = [f"--offload-arch={self.arch}".encode(), *(o.encode() for o in BUILD_OPTIONS)]
        err = rtc.hiprtcCompileProgram(prog, len(opts), opts)
        if int(getattr(err[0], "value", err[0])) != 0:
            n = _ok(rtc.hiprtcGetProgramLogSize(prog), "hiprtcGetProgramLogSize")
            log = bytearray(int(n))
            rtc.hiprtcGetProgramLog(prog, log)
            raise HipError(f"hiprtc failed for {self.arch}:\n{bytes(log).decode(errors='replace')[:4000]}")
        n = _ok(rtc.hiprtcGetCodeSize(prog), "hiprtcGetCodeSize")
        code = bytearray(int(n))
        _ok(rtc.hiprtcGetCode(prog, code), "hiprtcGetCode")
        return bytes(code)

    def load(self, module: Any) -> tuple[Any, Any]:
        """(CProgram, hipModule_t) of ``module`` at this device's W (cached per module object)."""
        prog = self.program(module, self.wave_width)
        handle, _ = self._loaded(module, prog)
        return prog, handle

    def _loaded(self, module: Any, prog: Any) -> tuple[Any, dict[str, Any]]:
        """(hipModule_t, its functions by kernel name) of a rendered program, loaded once."""

        def make() -> tuple[Any, dict[str, Any]]:
            return _ok(self.hip.hipModuleLoadData(self.compile(prog.text)), "hipModuleLoadData"), {}

        return self._programs.get(module, "hip module", make)

    def buffer_ok(self, v: Any) -> bool:
        return True  # device arrays (__cuda_array_interface__, ROCm DLPack) or anything NumPy can copy

    def _device_pointer(self, v: Any) -> int | None:
        cai = getattr(v, "__cuda_array_interface__", None)
        if cai is not None:
            return int(cai["data"][0])
        dev = getattr(v, "__dlpack_device__", None)
        if dev is not None and int(dev()[0]) == DLPACK_ROCM:
            ptr = getattr(v, "data_ptr", None)  # torch tensors on ROCm
            if ptr is not None:
                return int(ptr())
        return None

    def launch(self, module: Any, kernel: str, grid: Sequence[int], workgroup: Sequence[int],
               args: Mapping[str, Any], wave_width: int | None = None) -> None:
        """Run ``kernel``; NumPy buffers in ``args`` are updated in place.

        Raises:
            HipError: refused kernel, bad arguments, or a HIP failure (naming kernel and shape)."""
        if wave_width is not None and wave_width != self.wave_width:
            raise HipError(f"device {self.info.device} has W = {self.wave_width}, asked for W = {wave_width}")
        launch = self.prepare(module, kernel, grid, workgroup, args, self.wave_width, check=False)
        self.run(launch, launch.margs, True)

    def bind(self, module: Any, kernel: str, grid: Sequence[int], workgroup: Sequence[int],
             wave_width: int | None = None, *, check: bool | None = None, sync: bool = True) -> Any:
        """:meth:`Driver.bind <anywave.runtime.driver.Driver.bind>` at this device's W, without a
        bounds-checked build (the launches are synchronous).

        Raises:
            HipError: another W; and what :meth:`launch` raises, except the argument errors."""
        if wave_width is not None and wave_width != self.wave_width:
            raise HipError(f"device {self.info.device} has W = {self.wave_width}, asked for W = {wave_width}")
        return super().bind(module, kernel, grid, workgroup, self.wave_width, check=False, sync=True)

    def run(self, launch: Any, margs: list[tuple[str, Any, Any]], sync: bool) -> None:
        """Launch ``launch`` with ``margs`` (checked by :meth:`prepare` or by the layer that bound
        it), synchronously; see :meth:`launch`."""
        if launch.dims is None:
            return
        hip = self.hip
        kernel, module = launch.kernel.name, launch.module
        info, g, wg, P = launch.info, launch.grid, launch.workgroup, launch.threads
        handle, fns = self._loaded(module, launch.program)
        if kernel not in fns:
            fns[kernel] = _ok(hip.hipModuleGetFunction(handle, info.c_name.encode()), "hipModuleGetFunction")
        extra: list[Any] = []
        allocs: list[Any] = []
        back: list[tuple[np.ndarray, Any]] = []
        h2d, d2h = hip.hipMemcpyKind.hipMemcpyHostToDevice, hip.hipMemcpyKind.hipMemcpyDeviceToHost
        try:
            for kind, v, a in margs:
                if kind == "buffer":
                    ptr = self._device_pointer(v)
                    if ptr is not None:
                        extra.append(ctypes.c_void_p(ptr))
                        continue
                    host = np.ascontiguousarray(v)
                    dptr = _ok(hip.hipMalloc(max(int(host.nbytes), 16)), "hipMalloc")
                    allocs.append(dptr)
                    if host.nbytes:
                        _ok(hip.hipMemcpy(dptr, host, host.nbytes, h2d), "hipMemcpy H2D")
                    if a.access & Access.WRITE and host.nbytes:
                        back.append((v, dptr))
                    extra.append(dptr)
                else:
                    extra.append(ctypes.c_uint64(int(v)) if kind == "u64" else ctypes.c_uint32(int(v)))
            extra += [ctypes.c_uint32(wg[0]), ctypes.c_uint32(wg[1]), ctypes.c_uint32(wg[2])]
            _ok(hip.hipModuleLaunchKernel(fns[kernel], g[0], g[1], g[2], P, 1, 1, sharedMemBytes=0, stream=None,
                                          kernelParams=None, extra=tuple(extra)),
                f"hipModuleLaunchKernel({kernel!r}, grid={g}, workgroup={wg})")
            _ok(hip.hipDeviceSynchronize(), f"kernel {kernel!r} grid={g} workgroup={wg}")
            for arr, dptr in back:
                host = np.empty_like(np.ascontiguousarray(arr))
                _ok(hip.hipMemcpy(host, dptr, host.nbytes, d2h), "hipMemcpy D2H")
                arr[...] = host
        finally:
            for p in allocs:
                hip.hipFree(p)

    __call__ = launch


def register() -> None:
    """Register the ``hip`` target with :mod:`anywave.runtime.targets` (unavailable, with the
    reason, where hip-python or an AMD GPU is missing)."""
    from anywave.runtime import targets

    def probe() -> tuple[bool, str, Sequence[Any]]:
        ok, why = status()
        if not ok:
            return False, why, ()
        return True, "", (HipTarget().info,)

    targets.register_target("hip", probe, HipTarget)
