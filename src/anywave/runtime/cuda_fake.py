"""A no-GPU stand-in for ``cuda.bindings.driver`` (:class:`FakeDriver`), for measuring the CUDA
runtime's pure-Python host overhead and testing its launch path without a GPU. Re-exported as
``anywave.runtime.cuda.FakeDriver``."""

from __future__ import annotations

from typing import Any


class FakeDriver:
    """A no-GPU stand-in for ``cuda.bindings.driver``: every call the runtime makes, with the same
    signature and the same ``(CUresult, value...)`` result tuples, doing nothing (or the least
    that keeps the runtime going). For measuring the runtime's pure-Python host overhead and
    for testing its launch path without a GPU::

        fake = FakeDriver()
        cuda._DRV, cuda._init_state = fake, None   # what tests/test_cuda.py's fixture does
        tgt = cuda.CudaTarget(0)

    ``cuLaunchKernel`` is a plain no-op returning ``(0, None)``; to see what a launch passed,
    set ``on_launch`` (called as ``on_launch(f, grid, block, shared, stream, kernel_params)``
    while the parameter buffer is still valid) or make ``launch_status``/``ctx_status``/
    ``sync_status`` a nonzero CUresult to make those calls fail. The device it reports is an
    H200-like sm_90 (132 SMs, 1024 threads per block)."""

    class _Names:
        def __getattr__(self, name: str) -> str:
            return name

    CUdevice_attribute = _Names()
    CUfunction_attribute = _Names()
    CUjitInputType = _Names()

    _ATTRS = {
        "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR": 9, "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR": 0,
        "CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT": 132, "CU_DEVICE_ATTRIBUTE_WARP_SIZE": 32,
        "CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK": 1024, "CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X": 1024,
        "CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y": 1024, "CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z": 64,
        "CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X": 2**31 - 1, "CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y": 65535,
        "CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z": 65535, "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK": 49152,
        "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN": 232448,
        "CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK": 65536, "CU_DEVICE_ATTRIBUTE_CLOCK_RATE": 1980000,
    }
    _FUNC_ATTRS = {"CU_FUNC_ATTRIBUTE_NUM_REGS": 32, "CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK": 1024,
                   "CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES": 0}

    def __init__(self) -> None:
        self.ctx_status = 0
        self.launch_status = 0
        self.sync_status = 0
        self.on_launch: Any = None
        self.ctx_sets = 0
        self.current: Any = None
        self._next = 0x10000
        self._heap = 0x10000000  # next fake device address (cuMemAlloc)
        ok = (0, None)

        def cuLaunchKernel(f: Any, gx: int, gy: int, gz: int, bx: int, by: int, bz: int,  # noqa: N802
                           shared: int, stream: Any, params: Any, extra: Any) -> tuple[int, None]:
            if self.on_launch is not None:
                self.on_launch(f, (gx, gy, gz), (bx, by, bz), shared, stream, params)
            return (self.launch_status, None) if self.launch_status else ok

        def cuCtxSetCurrent(ctx: Any) -> tuple[int]:  # noqa: N802
            self.ctx_sets += 1
            self.current = ctx
            return (self.ctx_status,)

        # instance attributes, not methods: a plain function call, as cheap as the fake can be
        self.cuLaunchKernel = cuLaunchKernel
        self.cuCtxSetCurrent = cuCtxSetCurrent

    def native_entries(self, function: Any, context: Any) -> dict[str, Any]:
        """C-callable stand-ins for ``cuLaunchKernel`` and ``cuCtxSetCurrent`` (ctypes callbacks
        that call this fake's own, so ``on_launch``, the statuses and graph capture behave as
        for the Python launcher) and integer handles for ``function`` and ``context``, for the
        native launcher (:mod:`anywave.runtime.cuda_native`). An exception inside a callback is kept in
        ``native_error`` and reported to the launcher as CUDA_ERROR_UNKNOWN (999)."""
        import ctypes

        handles = self.__dict__.setdefault("_native_handles", {})
        fkey, ckey = len(handles) + 1, len(handles) + 2
        handles[fkey], handles[ckey] = function, context
        u = ctypes.c_uint
        launch_t = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, u, u, u, u, u, u, u, ctypes.c_void_p,
                                    ctypes.c_void_p, ctypes.c_void_p)
        ctx_t = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)

        def launch(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra):  # noqa: ANN001
            try:
                return int(self.cuLaunchKernel(handles[f], gx, gy, gz, bx, by, bz, shared, stream or 0,
                                               params or 0, 0)[0])
            except Exception as e:  # noqa: BLE001 - a C caller cannot take a Python exception
                self.native_error = e
                return 999

        def ctx_set(c):  # noqa: ANN001
            try:
                return int(self.cuCtxSetCurrent(handles[c])[0])
            except Exception as e:  # noqa: BLE001
                self.native_error = e
                return 999

        cl, cc = launch_t(launch), ctx_t(ctx_set)
        return {"launch": ctypes.cast(cl, ctypes.c_void_p).value, "ctx_set": ctypes.cast(cc, ctypes.c_void_p).value,
                "fn": fkey, "ctx": ckey, "keep": (cl, cc)}

    def _handle(self) -> int:
        self._next += 0x100
        return self._next

    def cuInit(self, flags: int) -> tuple[int]:  # noqa: N802
        return (0,)

    def cuDriverGetVersion(self) -> tuple[int, int]:  # noqa: N802
        return (0, 13000)

    def cuDeviceGetCount(self) -> tuple[int, int]:  # noqa: N802
        return (0, 1)

    def cuDeviceGet(self, ordinal: int) -> tuple[int, int]:  # noqa: N802
        return (0, ordinal)

    def cuDeviceGetName(self, n: int, dev: int) -> tuple[int, bytes]:  # noqa: N802
        return (0, b"fake H200 (no GPU)\0")

    def cuDeviceTotalMem(self, dev: int) -> tuple[int, int]:  # noqa: N802
        return (0, 141 << 30)

    def cuDeviceGetAttribute(self, attr: str, dev: int) -> tuple[int, int]:  # noqa: N802
        return (0, self._ATTRS[attr])

    def cuDevicePrimaryCtxRetain(self, dev: int) -> tuple[int, int]:  # noqa: N802
        return (0, 0xC0000 + dev)

    def cuCtxGetCurrent(self) -> tuple[int, Any]:  # noqa: N802
        return (0, self.current)

    def cuLinkCreate(self, n: int, opts: Any, vals: Any) -> tuple[int, None]:  # noqa: N802
        return (999, None)  # CUDA_ERROR_UNKNOWN: the runtime then loads the PTX itself

    def cuModuleLoadData(self, image: Any) -> tuple[int, int]:  # noqa: N802
        return (0, self._handle())

    def cuModuleGetFunction(self, module: Any, name: bytes) -> tuple[int, str]:  # noqa: N802
        return (0, f"function {name.decode()} of module {module:#x}")

    def cuFuncGetAttribute(self, attr: str, fn: Any) -> tuple[int, int]:  # noqa: N802
        return (0, self._FUNC_ATTRS[attr])

    def cuFuncSetAttribute(self, fn: Any, attr: str, value: int) -> tuple[int]:  # noqa: N802
        return (0,)

    def cuStreamSynchronize(self, stream: Any) -> tuple[int]:  # noqa: N802
        return (self.sync_status,)

    def cuMemAlloc(self, n: int) -> tuple[int, int]:  # noqa: N802
        # a bump allocator: distinct, non-overlapping, 256-byte aligned ranges of the size asked
        p = self._heap
        self._heap += (max(n, 16) + 255) // 256 * 256
        return (0, p)

    def cuMemFree(self, p: int) -> tuple[int]:  # noqa: N802
        return (0,)

    def cuMemcpyHtoD(self, dst: int, src: int, n: int) -> tuple[int]:  # noqa: N802
        return (0,)

    def cuMemcpyDtoH(self, dst: int, src: int, n: int) -> tuple[int]:  # noqa: N802
        return (0,)

    def cuModuleGetGlobal(self, module: Any, name: bytes) -> tuple[int, int, int]:  # noqa: N802
        """A module global (the PTX constant bank): a fresh fake address of 64 KiB."""
        return (0, self.cuMemAlloc(65536)[1], 65536)

    def cuMemcpyDtoDAsync(self, dst: int, src: int, n: int, stream: Any) -> tuple[int]:  # noqa: N802
        """Records ``(dst, src, n, stream)`` in ``copies`` (created on first use)."""
        if not hasattr(self, "copies"):
            self.copies: list[tuple[int, int, int, int]] = []
        self.copies.append((int(dst), int(src), int(n), int(stream or 0)))
        return (0,)

    def cuStreamIsCapturing(self, stream: Any) -> tuple[int, int]:  # noqa: N802
        return (0, int(int(stream or 0) in getattr(self, "_capturing", {})))

    def cuCtxSynchronize(self) -> tuple[int]:  # noqa: N802
        return (self.sync_status,)

    CUpointer_attribute = _Names()

    def cuPointerGetAttribute(self, attr: str, ptr: int) -> tuple[int, int]:  # noqa: N802
        return (0, 0)

    # stream capture (CUDA graphs): a graph records the launches made on a capturing stream,
    # and cuGraphLaunch replays them through on_launch, as the device would run them
    CUstreamCaptureMode = _Names()

    def cuStreamCreate(self, flags: int) -> tuple[int, int]:  # noqa: N802
        return (0, self._handle())

    def cuStreamBeginCapture(self, stream: Any, mode: Any) -> tuple[int]:  # noqa: N802
        if not hasattr(self, "_capturing"):
            self._capturing: dict[int, list[Any]] = {}
            self._graphs: dict[int, list[Any]] = {}
            real = self.cuLaunchKernel

            def cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shared, st, params, extra):  # noqa: N802
                rec = self._capturing.get(int(st))
                if rec is not None:  # recorded with a copy of the argument words, as the driver does
                    import ctypes

                    n = getattr(self, "capture_nargs", 0)
                    ptrs = (ctypes.c_void_p * max(n, 1)).from_address(params) if params else []
                    words = (ctypes.c_uint64 * max(n, 1))(*[ctypes.c_uint64.from_address(ptrs[i]).value
                                                           for i in range(n)])
                    wptrs = (ctypes.c_void_p * max(n, 1))(*[ctypes.addressof(words) + 8 * i for i in range(n)])
                    rec.append((f, gx, gy, gz, bx, by, bz, shared, words, wptrs))
                    return (0, None)
                return real(f, gx, gy, gz, bx, by, bz, shared, st, params, extra)

            self.cuLaunchKernel = cuLaunchKernel
        if int(stream) in self._capturing:
            return (900,)  # CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED (already capturing)
        self._capturing[int(stream)] = []
        return (0,)

    def cuStreamEndCapture(self, stream: Any) -> tuple[int, Any]:  # noqa: N802
        rec = self._capturing.pop(int(stream), None)
        if rec is None:
            return (901, None)  # CUDA_ERROR_STREAM_CAPTURE_INVALIDATED
        g = self._handle()
        self._graphs[g] = rec
        return (0, g)

    def cuGraphInstantiate(self, graph: Any, flags: int) -> tuple[int, Any]:  # noqa: N802
        return (0, graph)

    def cuGraphLaunch(self, exec_: Any, stream: Any) -> tuple[int]:  # noqa: N802
        import ctypes

        for f, gx, gy, gz, bx, by, bz, shared, _, wptrs in self._graphs[exec_]:
            if self.on_launch is not None:
                self.on_launch(f, (gx, gy, gz), (bx, by, bz), shared, stream, ctypes.addressof(wptrs))
        return (0,)

    def cuGraphExecDestroy(self, exec_: Any) -> tuple[int]:  # noqa: N802
        return (0,)

    def cuGraphDestroy(self, graph: Any) -> tuple[int]:  # noqa: N802
        self._graphs.pop(graph, None)
        return (0,)

    def cuGetErrorName(self, err: Any) -> tuple[int, bytes]:  # noqa: N802
        return (0, f"CUDA_ERROR_{int(err)}".encode())

    def cuGetErrorString(self, err: Any) -> tuple[int, bytes]:  # noqa: N802
        return (0, b"fake driver error")
