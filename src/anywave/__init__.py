"""anywave: write a GPU kernel once, run it bit-identically on any vendor's device.

See docs/spec.md for the WAVE instruction set this package implements.

The kernel language (``import anywave as aw``)::

    @aw.kernel
    def saxpy(a: aw.f32, x: aw.In[aw.f32], y: aw.Buffer[aw.f32], n: aw.i32):
        i = aw.global_id(0)
        if i < n:
            y[i] = a * x[i] + y[i]

    saxpy(2.0, x, y, len(x), grid=(len(x) + 255) // 256, workgroup=256)

Buffers take NumPy arrays, torch tensors, CuPy arrays, DLPack / ``__cuda_array_interface__``
objects, or device arrays that stay on a target between launches: ``aw.array(data,
target="cuda")``, ``aw.empty``/``aw.zeros(shape, dtype, target=...)``, ``.numpy()`` to copy
back, ``aw.synchronize()`` to wait for asynchronous launches (:mod:`anywave.runtime.arrays`).

Types: ``i32 u32 i64 u64 f16 bf16 f32 f64 bool_``; buffers ``Buffer[T]`` (read-write),
``In[T]`` (read), ``Out[T]`` (write); ``Const[int]`` (or keyword-only parameters) for
compile-time constants. Intrinsics: :mod:`anywave.compiler.language`; block-level helpers and
precise math: :mod:`anywave.compiler.stdlib`.
"""

__version__ = "0.1.0"

from anywave.compiler import (  # noqa: E402
    Buffer,
    CompileError,
    Const,
    Constant,
    In,
    LaunchError,
    Out,
    bf16,
    bool_,
    constexpr,
    dynamic,
    f16,
    f32,
    f64,
    func,
    i8,
    i16,
    i32,
    i64,
    u8,
    u16,
    u32,
    u64,
)
from anywave.compiler.language import *  # noqa: E402,F401,F403
from anywave.compiler.stdlib import *  # noqa: E402,F401,F403
from anywave.emu import emulate  # noqa: E402
from anywave.jit import Graph, available_targets, graph, kernel, register_target  # noqa: E402
from anywave.jit.autotune import autotune  # noqa: E402
from anywave.jit.cuda import cuda_kernel  # noqa: E402
from anywave.runtime.arrays import (  # noqa: E402
    Array,
    array,
    empty,
    from_dlpack,
    from_torch,
    synchronize,
    to_torch,
    zeros,
)

__all__ = [
    "Array", "Graph", "array", "empty", "graph", "from_dlpack", "from_torch", "synchronize", "to_torch", "zeros",
    "Buffer", "CompileError", "Const", "Constant", "autotune", "In", "LaunchError", "Out", "available_targets",
    "bf16", "bool_",
    "emulate", "f16", "f32", "f64", "func", "i8", "i16", "i32", "i64", "kernel", "register_target", "u8", "u16",
    "u32", "u64", "cuda_kernel", "constexpr", "dynamic",
]

#: ``aw.bool`` is ``aw.bool_`` (as NumPy 2 spells ``np.bool``); not in ``__all__``, so that
#: ``from anywave import *`` never shadows Python's ``bool``
bool = bool_  # noqa: A001
