"""The kernel language's intrinsics: ids, synchronisation, local memory, atomics, wave
operations, exact math, fast math, bit operations, casts and loop helpers.

Every name here is a marker the compiler recognises inside ``@aw.kernel``/``@aw.func`` bodies
(by identity, however the user imports it). Called outside a kernel they raise
:class:`~anywave.compiler.errors.CompileError`.

Ids and sizes are ``i32`` (the special registers are u32, but every id fits in 31 bits and a
signed index mixes with ``n: aw.i32`` without casts). Scopes and orders are strings:
``scope`` in {"wave", "workgroup", "device", "system"}, ``order`` in {"relaxed", "acquire",
"release", "acq_rel", "seq_cst"}.

Wave operations under control flow. A wave operation (``wave_shfl*``, ``wave_broadcast``,
``wave_ballot``, ``wave_any``/``wave_all``, the reductions and scans) reads the lanes that
execute it (spec §8.8). Python's conditional constructs evaluate only the branch they take,
and so does the compiler: in ``aw.wave_shfl(v, 0) if c else -1`` (and in ``c and
aw.wave_sum(v)``, ``c or ...``) the wave operation is inside a branch and runs only in the
lanes where it is taken, so lanes where ``c`` is false are inactive sources and the result
differs from running it in every lane. ``aw.where(c, aw.wave_shfl(v, 0), -1)`` evaluates
both operands in every lane first (like NumPy's ``where``) and then selects: use it when every
lane must take part in the wave operation.
"""

from __future__ import annotations

from typing import Any

from .errors import CompileError


class Intrinsic:
    """A language primitive; ``name`` selects the compiler's handler."""

    def __init__(self, name: str, doc: str) -> None:
        self.name = name
        self.__doc__ = doc
        self.__name__ = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise CompileError(f"aw.{self.name}() can only be used inside an @aw.kernel or @aw.func body")

    def __repr__(self) -> str:
        return f"<anywave intrinsic {self.name}>"


from .mma_lang import DOCS as _MMA_DOCS  # noqa: E402

_DOCS = {
    # ids
    "global_id": "global_id(d=0) -> i32: workgroup_id(d) * workgroup_size(d) + local_id(d)",
    "local_id": "local_id(d=0) -> i32: the thread's id inside its workgroup along d",
    "thread_id": "thread_id(d=0) -> i32: alias of local_id",
    "workgroup_id": "workgroup_id(d=0) -> i32",
    "workgroup_size": "workgroup_size(d=0) -> i32: threads per workgroup along d",
    "num_workgroups": "num_workgroups(d=0) -> i32: workgroups in the grid along d",
    "thread_linear_id": "thread_linear_id() -> i32: x + y*sx + z*sx*sy inside the workgroup",
    "lane_id": "lane_id() -> i32: lane inside the wave (0..W-1)",
    "wave_id": "wave_id() -> i32: wave inside the workgroup",
    "wave_width": "wave_width() -> i32: W of the target (8, 16, 32 or 64) — never assume 32",
    "num_waves": "num_waves() -> i32: waves in this workgroup",
    # sync and memory
    "barrier": "barrier(): workgroup execution barrier (+ workgroup acq_rel fence)",
    "fence": "fence(scope='device', order='acq_rel'): memory fence",
    "local_array": "local_array(dtype, shape) -> local array: per-workgroup memory, 1-D or 2-D, "
                   "shape a compile-time int or tuple",
    "load2": "load2(buf, i) -> (v0, v1): elements i, i+1 of a buffer/view/local array of 32-bit elements "
             "in one 64-bit access; i must be even (byte offset a multiple of 8)",
    "load4": "load4(buf, i) -> (v0, v1, v2, v3): elements i..i+3 in one 128-bit access; i a multiple of 4",
    "store2": "store2(buf, i, (v0, v1)): elements i, i+1 in one 64-bit access; i even",
    "store4": "store4(buf, i, (v0, v1, v2, v3)): elements i..i+3 in one 128-bit access; i a multiple of 4",
    "async_copy": "async_copy(dst, i, src, j, n=1): start copying n elements from element j of buffer/view src "
                  "to element i of local array dst (same dtype; n * element size = 4, 8 or 16 bytes, both offsets "
                  "multiples of it); the elements are defined only after aw.async_wait (spec §4.5)",
    "async_commit": "async_commit(): close this thread's async copies since its previous commit into one group",
    "async_wait": "async_wait(pending=0): wait until at most `pending` (compile-time 0..7) of this thread's most "
                  "recently committed groups are in flight; other threads see the data after a following barrier",
    "register_array": "register_array(dtype, shape, fill=0) -> per-thread registers of compile-time shape "
                      "(<= 256 elements), indexed only by compile-time ints (aw.static_range)",
    "view": "view(buf, shape, strides=None) -> the buffer as an n-D row-major array: v[i, j] is "
            "element i*shape[1] + j; shape entries are compile-time ints or integer values",
    # atomics: (target, index, value, scope=, order=) -> old value (red form when unused)
    "atomic_add": "atomic_add(buf, i, v, scope='device', order='relaxed') -> old (i32/u32/f32)",
    "atomic_sub": "atomic_sub(buf, i, v, ...) -> old (i32/u32)",
    "atomic_min": "atomic_min(buf, i, v, ...) -> old (i32/u32)",
    "atomic_max": "atomic_max(buf, i, v, ...) -> old (i32/u32)",
    "atomic_and": "atomic_and(buf, i, v, ...) -> old (32-bit ints)",
    "atomic_or": "atomic_or(buf, i, v, ...) -> old (32-bit ints)",
    "atomic_xor": "atomic_xor(buf, i, v, ...) -> old (32-bit ints)",
    "atomic_exch": "atomic_exch(buf, i, v, ...) -> old (any 32-bit type)",
    "atomic_cas": "atomic_cas(buf, i, cmp, v, ...) -> old; stores v where old == cmp (bitwise)",
    # wave ops
    "wave_shfl": "wave_shfl(v, lane) -> v of lane `lane` (own v if out of range/inactive)",
    "wave_shfl_up": "wave_shfl_up(v, d) -> v of lane_id - d",
    "wave_shfl_down": "wave_shfl_down(v, d) -> v of lane_id + d",
    "wave_shfl_xor": "wave_shfl_xor(v, m) -> v of lane_id ^ m",
    "wave_broadcast": "wave_broadcast(v, lane) -> v of `lane` (taken from the lowest active lane's lane)",
    "wave_ballot": "wave_ballot(cond) -> u64 mask of active lanes where cond holds",
    "wave_any": "wave_any(cond) -> bool",
    "wave_all": "wave_all(cond) -> bool",
    "wave_sum": "wave_sum(v) -> sum over active lanes (f32: the spec's butterfly order)",
    "wave_min": "wave_min(v)", "wave_max": "wave_max(v)",
    "wave_and": "wave_and(v)", "wave_or": "wave_or(v)", "wave_xor": "wave_xor(v)",
    "wave_prefix_sum": "wave_prefix_sum(v, exclusive=False) -> prefix sum over active lanes",
    # exact math (deterministic class)
    "sqrt": "sqrt(x): correctly rounded", "floor": "floor(x)", "ceil": "ceil(x)",
    "trunc": "trunc(x)", "rint": "rint(x): nearest, ties to even", "fma": "fma(a, b, c): one rounding",
    # approximate math (*.approx.f32; documented ulp bounds in docs/spec.md)
    "fast_exp2": "fast_exp2(x): ex2.approx.f32", "fast_log2": "fast_log2(x): lg2.approx.f32",
    "fast_exp": "fast_exp(x): ex2.approx.f32(x * log2(e))", "fast_log": "fast_log(x): lg2.approx.f32(x) * ln 2",
    "fast_sin": "fast_sin(x): sin.approx.f32", "fast_cos": "fast_cos(x): cos.approx.f32",
    "fast_tanh": "fast_tanh(x): tanh.approx.f32", "fast_rsqrt": "fast_rsqrt(x): rsqrt.approx.f32",
    "fast_rcp": "fast_rcp(x): rcp.approx.f32",
    # bits
    "popc": "popc(x: 32-bit int) -> i32", "clz": "clz(x) -> i32", "ctz": "ctz(x) -> i32",
    "brev": "brev(x)", "mulhi": "mulhi(a, b): high 32 bits of the product",
    # casts and selection
    "cast": "cast(x, dtype): value conversion (cvt)", "bitcast": "bitcast(x, dtype): same bits",
    "where": "where(cond, a, b): select without branching (both sides evaluated)",
    "dtype_of": "dtype_of(x) -> the compile-time dtype of a value (for generic @aw.func code)",
    # loops
    "static_range": "static_range(stop) / (start, stop[, step]): fully unrolled at compile time",
    "range": "range(start, stop, step, unroll=k): a runtime loop, body replicated k times",
    # debugging
    "print": "print(fmt, *values): per-thread print; fmt is a compile-time str.format string with one {} "
             "field per value (numbers and bools); lines appear after the launch in thread order",
    # mma
    "mma": "mma(D, A, B, C): D = A @ B + C on 16x16 local tiles (A, B f16/bf16; C, D f32)",
}
_DOCS.update(_MMA_DOCS)

for _name, _doc in _DOCS.items():
    globals()[_name] = Intrinsic(_name, _doc)

INTRINSICS: dict[str, Intrinsic] = {n: globals()[n] for n in _DOCS}
# names that shadow Python builtins are exported under their own name only
__all__ = sorted(INTRINSICS)
