"""HIP on NVIDIA: the HIP backend's source, compiled for an NVIDIA GPU with NVRTC, run on the CUDA driver.

The HIP text of :mod:`anywave.backends.hip` (W = 32) is compiled unchanged by NVRTC
(``cuda.bindings.nvrtc``) with :data:`HEADER` -- ``hip_to_cuda.h``, ~30 lines mapping the HIP
names the backend uses (``__shfl``, ``__ballot``, ``__hip_atomic_*`` ...) to CUDA -- given to
NVRTC as the include ``hip/hip_runtime.h``. The PTX is linked to a cubin and loaded with the
CUDA runtime's own helpers (:mod:`anywave.runtime.cuda`: ``_link_cubin``, ``CudaDevice``); a
driver too old for NVRTC's PTX falls back to NVRTC's own cubin. Launches follow the C-family
ABI: WAVE arguments in order, then the three workgroup sizes; the workgroup is one dimension
padded to whole warps (:func:`anywave.backends.cfamily.padded_workgroup`).

This is how the HIP backend's semantics are executed and checked bit-for-bit here (no AMD GPU):
``bench/hip_on_cuda_conformance.py`` runs the conformance suite this way.
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import Any

import numpy as np

from anywave.errors import WaveError
from anywave.isa.types import Access
from anywave.runtime.cuda import WAVE_WIDTH  # the NVIDIA warp: HIP on NVIDIA runs W = 32
from anywave.runtime.driver import Driver

#: the mapping header's text (hip_to_cuda.h next to this module)
HEADER = resources.files(__name__).joinpath("hip_to_cuda.h").read_text()

#: NVRTC options: no contraction, IEEE division and square root, denormals kept
NVRTC_OPTIONS = ("--fmad=false", "--prec-div=true", "--prec-sqrt=true", "--ftz=false", "-std=c++17")


class HipNvidiaError(WaveError):
    """NVRTC is missing or failed (the message carries its log), or a launch failed."""


def _nvrtc() -> Any:
    try:
        from cuda.bindings import nvrtc
    except ImportError as e:
        raise HipNvidiaError("cuda-python's NVRTC bindings are not installed (pip install cuda-python "
                             "nvidia-cuda-nvrtc)") from e
    return nvrtc


def nvrtc_compile(source: str, arch: str = "sm_90", *, cubin: bool = False) -> bytes:
    """Compile HIP ``source`` with NVRTC for NVIDIA ``arch`` (``sm_XY``).

    Returns:
        PTX text as bytes (``compute_XY``), or with ``cubin=True`` a cubin for ``sm_XY``.

    Raises:
        HipNvidiaError: NVRTC unavailable (its shared library comes from pip
            ``nvidia-cuda-nvrtc``), a bad ``arch``, or a compile error (with the log).
    """
    if not (arch.startswith("sm_") and arch[3:].isdigit()):
        raise HipNvidiaError(f"arch {arch!r} is not of the form sm_XY (e.g. sm_90)")
    nvrtc = _nvrtc()
    try:
        err, prog = nvrtc.nvrtcCreateProgram(source.encode(), b"anywave_hip.cu", 1, [HEADER.encode()],
                                             [b"hip/hip_runtime.h"])
    except Exception as e:  # noqa: BLE001 - missing libnvrtc.so raises here
        raise HipNvidiaError(f"NVRTC is unusable ({type(e).__name__}: {e}); pip install nvidia-cuda-nvrtc") from e
    if int(err):
        raise HipNvidiaError(f"nvrtcCreateProgram failed: {err}")
    try:
        target = arch if cubin else "compute_" + arch[3:]
        opts = [f"-arch={target}".encode(), *(o.encode() for o in NVRTC_OPTIONS)]
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        _, n = nvrtc.nvrtcGetProgramLogSize(prog)
        # NVRTC writes into the buffers it is given: bytearrays, never b" " * n, which for n = 1
        # (an empty log) is CPython's one shared b" ": the write made every b" " in the process
        # b"\0" (after a compile, torch's import failed on its own schema strings)
        log = bytearray(int(n))
        nvrtc.nvrtcGetProgramLog(prog, log)
        if int(err):
            text = log.decode(errors="replace").strip()
            raise HipNvidiaError(f"NVRTC failed to compile the HIP source for {target}:\n{text[:4000]}")
        if cubin:
            _, n = nvrtc.nvrtcGetCUBINSize(prog)
            buf = bytearray(int(n))
            nvrtc.nvrtcGetCUBIN(prog, buf)
        else:
            _, n = nvrtc.nvrtcGetPTXSize(prog)
            buf = bytearray(int(n))
            nvrtc.nvrtcGetPTX(prog, buf)
        return bytes(buf).rstrip(b"\0") if not cubin else bytes(buf)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def nvrtc_version() -> str:
    """NVRTC's version as ``"major.minor"``. Raises HipNvidiaError when NVRTC is unusable."""
    nvrtc = _nvrtc()
    try:
        _, major, minor = nvrtc.nvrtcVersion()
    except Exception as e:  # noqa: BLE001
        raise HipNvidiaError(f"NVRTC is unusable ({type(e).__name__}: {e})") from e
    return f"{major}.{minor}"


class HipOnCudaRunner(Driver):
    """A conformance :class:`~anywave.conformance.suite.Runner` (W = 32): renders the module as
    HIP once, compiles it with NVRTC, loads it on CUDA device ``device`` and launches kernels
    with NumPy arrays (copied in and, when writable, back) or ``__cuda_array_interface__``
    objects (zero-copy)."""

    error = HipNvidiaError

    def __init__(self, device: int = 0) -> None:
        super().__init__()
        from anywave.runtime import cuda

        self.cuda = cuda
        self.device = cuda.CudaDevice(device)
        self.arch = self.device.props.arch
        self.image_kinds: dict[Any, str] = {}

    def device_limits(self) -> tuple[str, int | None, int | None]:
        return f"HIP on NVIDIA ({self.arch})", None, None  # the CUDA driver refuses what the device cannot run

    def translate(self, module: Any, wave_width: int, checked: bool) -> Any:
        from anywave.backends.cfamily import Features
        from anywave.backends.hip import translate

        feats = Features(fp64=True, wave_widths=(WAVE_WIDTH,))
        return translate(module, WAVE_WIDTH, feats, checked=True) if checked else translate(module, WAVE_WIDTH, feats)

    def buffer_ok(self, v: Any) -> bool:
        return True  # __cuda_array_interface__ objects, or anything NumPy can copy

    def load(self, module: Any, checked: bool = False) -> tuple[Any, Any]:
        """(rendered CProgram, module handle) for ``module`` (cached per module object; the
        bounds-checked build, ``checked=True``, apart)."""
        prog = self.program(module, WAVE_WIDTH, checked)
        return prog, self._loaded(module, prog, checked)[0]

    def _loaded(self, module: Any, prog: Any, checked: bool) -> tuple[Any, dict[str, Any]]:
        """(CUmodule, its functions by kernel name) of a rendered program, linked and loaded once."""
        cuda = self.cuda

        def make() -> tuple[Any, dict[str, Any]]:
            ptx = nvrtc_compile(prog.text, self.arch)
            self.device.activate()
            try:
                image, kind = cuda._link_cubin(ptx + b"\0"), "ptx->cubin (driver linker)"
            except cuda.CudaError:  # e.g. NVRTC's PTX ISA newer than the driver: use NVRTC's cubin
                image, kind = nvrtc_compile(prog.text, self.arch, cubin=True), "cubin (NVRTC)"
            data = np.frombuffer(image, np.uint8).copy()
            handle = cuda._check(cuda._driver().cuModuleLoadData(data.ctypes.data), "cuModuleLoadData")
            self.image_kinds[(id(module), "checked") if checked else id(module)] = kind
            return handle, {}

        return self._programs.get(module, ("cuda module", checked), make)

    def __call__(self, module: Any, kernel: str, grid: Sequence[int], workgroup: Sequence[int],
                 args: Mapping[str, Any], wave_width: int = WAVE_WIDTH, check: bool | None = None,
                 **_: Any) -> None:
        """Run ``kernel``; ``check`` (default: ``ANYWAVE_CHECK=1``) runs the bounds-checked build
        (OutOfBoundsError after the launch for an access outside its buffer)."""
        if wave_width != WAVE_WIDTH:
            raise HipNvidiaError(f"HIP on NVIDIA has W = {WAVE_WIDTH}, asked for W = {wave_width}")
        cuda = self.cuda
        drv = cuda._driver()
        launch = self.prepare(module, kernel, grid, workgroup, args, WAVE_WIDTH, check)
        if launch.dims is None:
            return
        info, k, g, wg, P, checked = (launch.info, launch.kernel, launch.grid, launch.workgroup, launch.threads,
                                      launch.checked)
        handle, fns = self._loaded(module, launch.program, checked)
        fn = fns.get(kernel)
        if fn is None:
            fn = fns[kernel] = cuda._check(drv.cuModuleGetFunction(handle, info.c_name.encode()),
                                           f"cuModuleGetFunction({info.c_name})")
        slots: list[Any] = []
        allocs: list[int] = []
        back: list[tuple[np.ndarray, int]] = []
        try:
            for kind, v, a in launch.margs:
                if kind == "buffer":
                    cai = getattr(v, "__cuda_array_interface__", None)
                    if cai is not None:
                        slots.append(ctypes.c_uint64(int(cai["data"][0])))
                        continue
                    host = np.ascontiguousarray(v)
                    n = int(host.nbytes)
                    dptr = int(cuda._check(drv.cuMemAlloc(max(n, 16)), "cuMemAlloc"))
                    allocs.append(dptr)
                    if n:
                        cuda._check(drv.cuMemcpyHtoD(dptr, host.ctypes.data, n), "cuMemcpyHtoD")
                    if a.access & Access.WRITE and n:
                        back.append((v, dptr))
                    slots.append(ctypes.c_uint64(dptr))
                else:
                    slots.append(ctypes.c_uint64(int(v)) if kind == "u64" else ctypes.c_uint32(int(v)))
            slots += [ctypes.c_uint32(wg[0]), ctypes.c_uint32(wg[1]), ctypes.c_uint32(wg[2])]
            record = err_ptr = None
            if checked:
                from anywave.backends.bounds import new_error_record

                sizes = launch.bounds_sizes()
                slots += [ctypes.c_uint64(n) for a, n in zip(k.args, sizes, strict=True) if a.is_buffer]
                record = new_error_record()
                err_ptr = int(cuda._check(drv.cuMemAlloc(record.nbytes), "cuMemAlloc"))
                allocs.append(err_ptr)
                cuda._check(drv.cuMemcpyHtoD(err_ptr, record.ctypes.data, record.nbytes), "cuMemcpyHtoD")
                slots.append(ctypes.c_uint64(err_ptr))
            ptrs = (ctypes.c_void_p * len(slots))(*[ctypes.addressof(s) for s in slots])
            self.device.activate()
            cuda._check(drv.cuLaunchKernel(fn, g[0], g[1], g[2], P, 1, 1, 0, 0, ctypes.addressof(ptrs), 0),
                        f"cuLaunchKernel({kernel!r}, grid={g}, workgroup={wg} as {P} threads)")
            cuda._check(drv.cuCtxSynchronize(), f"kernel {kernel!r} grid={g} workgroup={wg}")
            for arr, dptr in back:
                host = np.empty_like(np.ascontiguousarray(arr))
                cuda._check(drv.cuMemcpyDtoH(host.ctypes.data, dptr, host.nbytes), "cuMemcpyDtoH")
                arr[...] = host
            if record is not None:
                cuda._check(drv.cuMemcpyDtoH(record.ctypes.data, err_ptr, record.nbytes), "cuMemcpyDtoH")
        finally:
            for p in allocs:
                drv.cuMemFree(p)
        if record is not None:
            from anywave.backends.bounds import raise_if_failed

            raise_if_failed(record, k, info.sites, sizes, info.local_memory, f"HIP on NVIDIA ({self.arch})")
