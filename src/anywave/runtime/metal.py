"""Metal runtime driver for macOS on PyObjC's Metal framework (``pip install pyobjc-framework-Metal``).

**Never run**: written without a Mac; only its absence path is tested here (tests/test_metal.py).
The MSL it compiles is checked on Linux with a stand-in header only (see
:mod:`anywave.backends.metal`).

* Device: ``MTLCreateSystemDefaultDevice()``; W = 32 (the pipeline's
  ``threadExecutionWidth`` is checked, and a device reporting another width is refused).
* Compile: :mod:`anywave.backends.metal` -> ``newLibraryWithSource:options:error:`` with
  MSL 3.2 (``atomic_thread_fence``) and fast math off -> one compute pipeline per kernel.
* Launch: shared-storage buffers (NumPy bytes copied in and, when writable, back); scalars and
  the workgroup sizes with ``setBytes``; argument i at buffer index i (ABI order); local memory
  with ``setThreadgroupMemoryLength:atIndex:0``; ``dispatchThreadgroups`` of (P, 1, 1) threads,
  P = the workgroup padded to whole SIMD-groups.

Selected (target ``metal``) on a Mac where PyObjC's Metal imports and a device exists.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from anywave.errors import WaveError
from anywave.isa.types import Access, Capability
from anywave.runtime.driver import Driver

#: MTLLanguageVersion3_2 = (3 << 16) | 2
MSL_VERSION_3_2 = (3 << 16) | 2


class MetalError(WaveError):
    """Metal is unavailable (not macOS, PyObjC missing, no device), or a compile/launch failed."""


def _import_metal() -> Any:
    if sys.platform != "darwin":
        raise MetalError(f"Metal needs macOS; this is {sys.platform}")
    try:
        import Metal
    except Exception as e:  # noqa: BLE001
        raise MetalError(f"PyObjC's Metal framework is not installed ({type(e).__name__}: {e}); "
                         "pip install pyobjc-framework-Metal") from e
    return Metal


def status() -> tuple[bool, str]:
    """(usable, reason) of the ``metal`` target here; never raises."""
    try:
        Metal = _import_metal()
        dev = Metal.MTLCreateSystemDefaultDevice()
    except MetalError as e:
        return False, str(e)
    except Exception as e:  # noqa: BLE001
        return False, f"Metal unusable: {type(e).__name__}: {e}"
    return (True, "") if dev is not None else (False, "MTLCreateSystemDefaultDevice() returned no device")


class MetalTarget(Driver):
    """The Metal backend on the default Metal device. ``launch(module, kernel, grid, workgroup, args)``."""

    error = MetalError

    def __init__(self) -> None:
        super().__init__()
        from anywave.backends.metal import METAL_FEATURES, WAVE_WIDTH
        from anywave.runtime.targets import TargetInfo

        self.Metal = Metal = _import_metal()
        self.device = Metal.MTLCreateSystemDefaultDevice()
        if self.device is None:
            raise MetalError("no Metal device")
        self.queue = self.device.newCommandQueue()
        self.features = METAL_FEATURES
        self.local_memory = int(self.device.maxThreadgroupMemoryLength())
        caps = (Capability.F16 | Capability.BF16 | Capability.INT64 | Capability.OFFSET64
                | Capability.ATOMIC_F32 | Capability.WAVE_OPS | Capability.MMA)
        self.info = TargetInfo("metal", str(self.device.name()), WAVE_WIDTH, caps, self.local_memory, 1024,
                               (1024, 1024, 1024), (2**31 - 1, 65535, 65535), {},
                               host_memory=True)  # shared storage: unified memory the host addresses

    def device_limits(self) -> tuple[str, int | None, int | None]:
        return self.info.device, self.local_memory, None  # the pipeline's own maximum is checked at launch

    def translate(self, module: Any, wave_width: int, checked: bool) -> Any:
        from anywave.backends.metal import translate

        return translate(module)  # W = 32; no bounds-checked build

    def buffer_ok(self, v: Any) -> bool:
        return True  # anything NumPy can copy into a shared buffer

    def load(self, module: Any) -> tuple[Any, Any]:
        """(CProgram, MTLLibrary) of ``module`` (cached per module object)."""
        prog = self.program(module, self.info.wave_width)
        return prog, self._library(module, prog)[0]

    def _library(self, module: Any, prog: Any) -> tuple[Any, dict[str, Any]]:
        """(MTLLibrary, pipelines by C name) of a rendered program, compiled once."""

        def make() -> tuple[Any, dict[str, Any]]:
            opts = self.Metal.MTLCompileOptions.alloc().init()
            opts.setLanguageVersion_(MSL_VERSION_3_2)
            opts.setFastMathEnabled_(False)
            lib, err = self.device.newLibraryWithSource_options_error_(prog.text, opts, None)
            if lib is None:
                raise MetalError(f"Metal compile failed: {err}")
            return lib, {}

        return self._programs.get(module, "metal library", make)

    def _pipeline(self, module: Any, lib: Any, c_name: str) -> Any:
        cache = self._library(module, self.program(module, self.info.wave_width))[1]
        if c_name not in cache:
            fn = lib.newFunctionWithName_(c_name)
            pso, err = self.device.newComputePipelineStateWithFunction_error_(fn, None)
            if pso is None:
                raise MetalError(f"pipeline for {c_name} failed: {err}")
            if int(pso.threadExecutionWidth()) != self.info.wave_width:
                raise MetalError(f"SIMD-group width {pso.threadExecutionWidth()} is not {self.info.wave_width}")
            cache[c_name] = pso
        return cache[c_name]

    def launch(self, module: Any, kernel: str, grid: Sequence[int], workgroup: Sequence[int],
               args: Mapping[str, Any], wave_width: int | None = None) -> None:
        """Run ``kernel``; NumPy buffers in ``args`` are updated in place.

        Raises:
            MetalError: a refused kernel (fp64, .system scope), bad arguments, or a Metal failure."""
        W = self.info.wave_width
        if wave_width is not None and wave_width != W:
            raise MetalError(f"Metal has W = {W}, asked for W = {wave_width}")
        launch = self.prepare(module, kernel, grid, workgroup, args, W, check=False)
        self.run(launch, launch.margs, True)

    def bind(self, module: Any, kernel: str, grid: Sequence[int], workgroup: Sequence[int],
             wave_width: int | None = None, *, check: bool | None = None, sync: bool = True) -> Any:
        """:meth:`Driver.bind <anywave.runtime.driver.Driver.bind>` at Metal's W, without a
        bounds-checked build (the launches are synchronous).

        Raises:
            MetalError: another W; and what :meth:`launch` raises, except the argument errors."""
        W = self.info.wave_width
        if wave_width is not None and wave_width != W:
            raise MetalError(f"Metal has W = {W}, asked for W = {wave_width}")
        return super().bind(module, kernel, grid, workgroup, W, check=False, sync=True)

    def run(self, launch: Any, margs: list[tuple[str, Any, Any]], sync: bool) -> None:
        """Launch ``launch`` with ``margs`` (checked by :meth:`prepare` or by the layer that bound
        it), synchronously; see :meth:`launch`."""
        if launch.dims is None:
            return
        kernel, module = launch.kernel.name, launch.module
        info, k, g, wg, P = launch.info, launch.kernel, launch.grid, launch.workgroup, launch.threads
        _, lib = self.load(module)
        pso = self._pipeline(module, lib, info.c_name)
        if P > int(pso.maxTotalThreadsPerThreadgroup()):
            raise MetalError(f"kernel {kernel!r}: {P} threads exceed {pso.maxTotalThreadsPerThreadgroup()}")
        cb = self.queue.commandBuffer()
        enc = cb.computeCommandEncoder()
        enc.setComputePipelineState_(pso)
        back = []
        shared = 0  # MTLResourceStorageModeShared
        for i, (kind, v, a) in enumerate(margs):
            if kind == "buffer":
                host = np.ascontiguousarray(v)
                buf = self.device.newBufferWithBytes_length_options_(host.tobytes() or b"\0" * 16,
                                                                     max(host.nbytes, 16), shared)
                enc.setBuffer_offset_atIndex_(buf, 0, i)
                if a.access & Access.WRITE and host.nbytes:
                    back.append((v, buf, host.nbytes))
            else:
                data = v.tobytes()  # the ABI word, np.uint32 or np.uint64
                enc.setBytes_length_atIndex_(data, len(data), i)
        for j, n in enumerate(wg):
            enc.setBytes_length_atIndex_(np.uint32(n).tobytes(), 4, len(k.args) + j)
        if info.local_memory:
            enc.setThreadgroupMemoryLength_atIndex_(-(-info.local_memory // 16) * 16, 0)
        enc.dispatchThreadgroups_threadsPerThreadgroup_(self.Metal.MTLSizeMake(*g), self.Metal.MTLSizeMake(P, 1, 1))
        enc.endEncoding()
        cb.commit()
        cb.waitUntilCompleted()
        if cb.error() is not None:
            raise MetalError(f"kernel {kernel!r} grid={g} workgroup={wg} failed: {cb.error()}")
        for arr, buf, n in back:
            raw = buf.contents().as_buffer(n)
            arr[...] = np.frombuffer(bytes(raw), dtype=np.asarray(arr).dtype).reshape(np.shape(arr))

    __call__ = launch


def register() -> None:
    """Register the ``metal`` target with :mod:`anywave.runtime.targets`."""
    from anywave.runtime import targets

    def probe() -> tuple[bool, str, Sequence[Any]]:
        ok, why = status()
        if not ok:
            return False, why, ()
        return True, "", (MetalTarget().info,)

    targets.register_target("metal", probe, MetalTarget)
