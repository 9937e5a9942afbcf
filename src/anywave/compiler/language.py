"""The kernel language's intrinsics: ids, synchronisation, local memory, atomics, wave
operations, exact math, fast math, bit operations, casts and loop helpers.

Every name here is a marker (:class:`~anywave.compiler.bindings.Intrinsic`) the compiler
recognises inside ``@aw.kernel``/``@aw.func`` bodies (by identity, however the user imports
it). Called outside a kernel they raise :class:`~anywave.compiler.errors.CompileError`.

This module is also the registry: each marker is declared with its documentation and the
function that lowers a call of it to IR (``lower(builder, call_node, discard)``, the builder a
:class:`~anywave.compiler.builder.Builder`), in the module of its subject: ``lower_threads``,
``lower_wave``, ``lower_math``, ``frontend_perf``, ``mma_lang``, ``debugprint``, ``numlimits``. A marker without
a lowering is a CompileError at the call.

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

from functools import partial as _p

from . import debugprint as _debugprint
from . import frontend_perf as _perf
from . import lower_math as _math
from . import lower_threads as _threads
from . import lower_wave as _wave
from . import mma_lang as _mma
from .bindings import Intrinsic
from .numlimits import finfo, iinfo  # noqa: F401 - intrinsics that are host functions too

# name = Intrinsic(name, documentation, lowering); the names that shadow Python builtins
# (range, print) are exported under their own name only

# ids
global_id = Intrinsic("global_id", "global_id(d=0) -> i32: workgroup_id(d) * workgroup_size(d) + local_id(d)",
                      lower=_p(_threads.lower_dim_id, name="global_id"))
local_id = Intrinsic("local_id", "local_id(d=0) -> i32: the thread's id inside its workgroup along d",
                     lower=_p(_threads.lower_dim_id, name="local_id"))
thread_id = Intrinsic("thread_id", "thread_id(d=0) -> i32: alias of local_id",
                      lower=_p(_threads.lower_dim_id, name="thread_id"))
workgroup_id = Intrinsic("workgroup_id", "workgroup_id(d=0) -> i32",
                         lower=_p(_threads.lower_dim_id, name="workgroup_id"))
workgroup_size = Intrinsic("workgroup_size", "workgroup_size(d=0) -> i32: threads per workgroup along d",
                           lower=_p(_threads.lower_dim_id, name="workgroup_size"))
num_workgroups = Intrinsic("num_workgroups", "num_workgroups(d=0) -> i32: workgroups in the grid along d",
                           lower=_p(_threads.lower_dim_id, name="num_workgroups"))
thread_linear_id = Intrinsic("thread_linear_id", "thread_linear_id() -> i32: x + y*sx + z*sx*sy inside the workgroup",
                             lower=_p(_threads.lower_special_register, name="thread_linear_id"))
lane_id = Intrinsic("lane_id", "lane_id() -> i32: lane inside the wave (0..W-1)",
                    lower=_p(_threads.lower_special_register, name="lane_id"))
wave_id = Intrinsic("wave_id", "wave_id() -> i32: wave inside the workgroup",
                    lower=_p(_threads.lower_special_register, name="wave_id"))
wave_width = Intrinsic("wave_width", "wave_width() -> i32: W of the target (8, 16, 32 or 64) — never assume 32",
                       lower=_p(_threads.lower_special_register, name="wave_width"))
num_waves = Intrinsic("num_waves", "num_waves() -> i32: waves in this workgroup",
                      lower=_p(_threads.lower_special_register, name="num_waves"))

# sync and memory
barrier = Intrinsic("barrier", "barrier(): workgroup execution barrier (+ workgroup acq_rel fence)",
                    lower=_threads.lower_barrier)
wave_barrier = Intrinsic("wave_barrier", "wave_barrier(): barrier of the lanes of this wave that execute it (CUDA's "
                        "__syncwarp()): their memory accesses before it happen before their accesses after it; "
                        "nothing is ordered between waves (spec §7.10)",
                        lower=_threads.lower_wave_barrier)
fence = Intrinsic("fence", "fence(scope='device', order='acq_rel'): memory fence",
                  lower=_threads.lower_fence)
local_array = Intrinsic("local_array", "local_array(dtype, shape) -> local array: per-workgroup memory, 1-D or 2-D, "
                        "shape a compile-time int or tuple",
                        lower=_threads.lower_local_array)
load2 = Intrinsic("load2", "load2(buf, i) -> (v0, v1): elements i, i+1 of a buffer/view/local array of 32-bit "
                  "elements in one 64-bit access; i must be even (byte offset a multiple of 8)",
                  lower=_p(_perf.lower_vector_load, n=2))
load4 = Intrinsic("load4", "load4(buf, i) -> (v0, v1, v2, v3): elements i..i+3 in one 128-bit access; i a multiple "
                  "of 4",
                  lower=_p(_perf.lower_vector_load, n=4))
store2 = Intrinsic("store2", "store2(buf, i, (v0, v1)): elements i, i+1 in one 64-bit access; i even",
                   lower=_p(_perf.lower_vector_store, n=2))
store4 = Intrinsic("store4", "store4(buf, i, (v0, v1, v2, v3)): elements i..i+3 in one 128-bit access; i a multiple "
                   "of 4",
                   lower=_p(_perf.lower_vector_store, n=4))
register_array = Intrinsic("register_array", "register_array(dtype, shape, fill=0) -> per-thread registers of "
                           "compile-time shape (<= 256 elements), indexed only by compile-time ints "
                           "(aw.static_range)",
                           lower=_perf.lower_register_array)
view = Intrinsic("view", "view(buf, shape, strides=None) -> the buffer as an n-D row-major array: v[i, j] is "
                 "element i*shape[1] + j; shape entries are compile-time ints or integer values",
                 lower=_perf.lower_view)
async_copy = Intrinsic("async_copy", "async_copy(dst, i, src, j, n=1): start copying n elements from element j of "
                       "buffer/view src to element i of local array dst (same dtype; n * element size = 4, 8 or 16 "
                       "bytes, both offsets multiples of it); defined only after aw.async_wait (spec §4.5)",
                       lower=_perf.lower_async_copy)
async_commit = Intrinsic("async_commit", "async_commit(): close this thread's async copies since its previous "
                         "commit into one group", lower=_perf.lower_async_commit)
async_wait = Intrinsic("async_wait", "async_wait(pending=0): wait until at most `pending` (compile-time 0..7) of "
                       "this thread's most recently committed groups are in flight; other threads see the data "
                       "after a following barrier", lower=_perf.lower_async_wait)

# atomics: (target, index, value, scope=, order=) -> old value (red form when unused)
atomic_add = Intrinsic("atomic_add", "atomic_add(buf, i, v, scope='device', order='relaxed') -> old (i32/u32/f32)",
                       lower=_p(_threads.lower_atomic, op="add"))
atomic_sub = Intrinsic("atomic_sub", "atomic_sub(buf, i, v, ...) -> old (i32/u32)",
                       lower=_p(_threads.lower_atomic, op="sub"))
atomic_min = Intrinsic("atomic_min", "atomic_min(buf, i, v, ...) -> old (i32/u32)",
                       lower=_p(_threads.lower_atomic, op="min"))
atomic_max = Intrinsic("atomic_max", "atomic_max(buf, i, v, ...) -> old (i32/u32)",
                       lower=_p(_threads.lower_atomic, op="max"))
atomic_and = Intrinsic("atomic_and", "atomic_and(buf, i, v, ...) -> old (32-bit ints)",
                       lower=_p(_threads.lower_atomic, op="and"))
atomic_or = Intrinsic("atomic_or", "atomic_or(buf, i, v, ...) -> old (32-bit ints)",
                      lower=_p(_threads.lower_atomic, op="or"))
atomic_xor = Intrinsic("atomic_xor", "atomic_xor(buf, i, v, ...) -> old (32-bit ints)",
                       lower=_p(_threads.lower_atomic, op="xor"))
atomic_exch = Intrinsic("atomic_exch", "atomic_exch(buf, i, v, ...) -> old (any 32-bit type)",
                        lower=_p(_threads.lower_atomic, op="exch"))
atomic_cas = Intrinsic("atomic_cas", "atomic_cas(buf, i, cmp, v, ...) -> old; stores v where old == cmp (bitwise)",
                       lower=_p(_threads.lower_atomic, op="cas"))

# wave ops
wave_shfl = Intrinsic("wave_shfl", "wave_shfl(v, lane) -> v of lane `lane` (own v if out of range/inactive)",
                      lower=_p(_wave.lower_shuffle, name="wave_shfl"))
wave_shfl_up = Intrinsic("wave_shfl_up", "wave_shfl_up(v, d) -> v of lane_id - d",
                         lower=_p(_wave.lower_shuffle, name="wave_shfl_up"))
wave_shfl_down = Intrinsic("wave_shfl_down", "wave_shfl_down(v, d) -> v of lane_id + d",
                           lower=_p(_wave.lower_shuffle, name="wave_shfl_down"))
wave_shfl_xor = Intrinsic("wave_shfl_xor", "wave_shfl_xor(v, m) -> v of lane_id ^ m",
                          lower=_p(_wave.lower_shuffle, name="wave_shfl_xor"))
wave_broadcast = Intrinsic("wave_broadcast", "wave_broadcast(v, lane) -> v of `lane` (taken from the lowest active "
                           "lane's lane)",
                           lower=_p(_wave.lower_shuffle, name="wave_broadcast"))
wave_ballot = Intrinsic("wave_ballot", "wave_ballot(cond) -> u64 mask of active lanes where cond holds",
                        lower=_wave.lower_wave_ballot)
wave_any = Intrinsic("wave_any", "wave_any(cond) -> bool",
                     lower=_wave.lower_wave_any)
wave_all = Intrinsic("wave_all", "wave_all(cond) -> bool",
                     lower=_wave.lower_wave_all)
wave_sum = Intrinsic("wave_sum", "wave_sum(v) -> sum over active lanes (f32: the spec's butterfly order)",
                     lower=_p(_wave.lower_wave_reduce, op="sum"))
wave_min = Intrinsic("wave_min", "wave_min(v)",
                     lower=_p(_wave.lower_wave_reduce, op="min"))
wave_max = Intrinsic("wave_max", "wave_max(v)",
                     lower=_p(_wave.lower_wave_reduce, op="max"))
wave_and = Intrinsic("wave_and", "wave_and(v)",
                     lower=_p(_wave.lower_wave_reduce, op="and"))
wave_or = Intrinsic("wave_or", "wave_or(v)",
                    lower=_p(_wave.lower_wave_reduce, op="or"))
wave_xor = Intrinsic("wave_xor", "wave_xor(v)",
                     lower=_p(_wave.lower_wave_reduce, op="xor"))
wave_prefix_sum = Intrinsic("wave_prefix_sum", "wave_prefix_sum(v, exclusive=False) -> prefix sum over active lanes",
                            lower=_wave.lower_wave_prefix_sum)

# exact math (deterministic class)
sqrt = Intrinsic("sqrt", "sqrt(x): correctly rounded",
                 lower=_p(_math.lower_float_unary, name="sqrt"))
floor = Intrinsic("floor", "floor(x)",
                  lower=_p(_math.lower_float_unary, name="floor"))
ceil = Intrinsic("ceil", "ceil(x)",
                 lower=_p(_math.lower_float_unary, name="ceil"))
trunc = Intrinsic("trunc", "trunc(x)",
                  lower=_p(_math.lower_float_unary, name="trunc"))
rint = Intrinsic("rint", "rint(x): nearest, ties to even",
                 lower=_p(_math.lower_float_unary, name="rint"))
fma = Intrinsic("fma", "fma(a, b, c): one rounding",
                lower=_math.lower_fma)

# approximate math (*.approx.f32; documented ulp bounds in docs/spec.md)
fast_exp2 = Intrinsic("fast_exp2", "fast_exp2(x): ex2.approx.f32",
                      lower=_p(_math.lower_fast, name="exp2"))
fast_log2 = Intrinsic("fast_log2", "fast_log2(x): lg2.approx.f32",
                      lower=_p(_math.lower_fast, name="log2"))
fast_exp = Intrinsic("fast_exp", "fast_exp(x): ex2.approx.f32(x * log2(e))",
                     lower=_p(_math.lower_fast, name="exp"))
fast_log = Intrinsic("fast_log", "fast_log(x): lg2.approx.f32(x) * ln 2",
                     lower=_p(_math.lower_fast, name="log"))
fast_sin = Intrinsic("fast_sin", "fast_sin(x): sin.approx.f32",
                     lower=_p(_math.lower_fast, name="sin"))
fast_cos = Intrinsic("fast_cos", "fast_cos(x): cos.approx.f32",
                     lower=_p(_math.lower_fast, name="cos"))
fast_tanh = Intrinsic("fast_tanh", "fast_tanh(x): tanh.approx.f32",
                      lower=_p(_math.lower_fast, name="tanh"))
fast_rsqrt = Intrinsic("fast_rsqrt", "fast_rsqrt(x): rsqrt.approx.f32",
                       lower=_p(_math.lower_fast, name="rsqrt"))
fast_rcp = Intrinsic("fast_rcp", "fast_rcp(x): rcp.approx.f32",
                     lower=_p(_math.lower_fast, name="rcp"))

# bits
popc = Intrinsic("popc", "popc(x: 32-bit int) -> i32",
                 lower=_p(_math.lower_bits, name="popc"))
clz = Intrinsic("clz", "clz(x) -> i32",
                lower=_p(_math.lower_bits, name="clz"))
ctz = Intrinsic("ctz", "ctz(x) -> i32",
                lower=_p(_math.lower_bits, name="ctz"))
brev = Intrinsic("brev", "brev(x)",
                 lower=_p(_math.lower_bits, name="brev"))
mulhi = Intrinsic("mulhi", "mulhi(a, b): high 32 bits of the product",
                  lower=_math.lower_mulhi)

# casts and selection
cast = Intrinsic("cast", "cast(x, dtype): value conversion (cvt)",
                 lower=_math.lower_cast)
bitcast = Intrinsic("bitcast", "bitcast(x, dtype): same bits",
                    lower=_math.lower_bitcast)
where = Intrinsic("where", "where(cond, a, b): select without branching (both sides evaluated)",
                  lower=_math.lower_where)
dtype_of = Intrinsic("dtype_of", "dtype_of(x) -> the compile-time dtype of a value (for generic @aw.func code)",
                     lower=_math.lower_dtype_of)

# loops
static_range = Intrinsic("static_range", "static_range(stop) / (start, stop[, step]): fully unrolled at compile time",
                         lower=_math.lower_loop_marker)
range = Intrinsic("range", "range(start, stop, step, unroll=k): a runtime loop, body replicated k times",
                  lower=_math.lower_loop_marker)

# debugging
print = Intrinsic("print", "print(fmt, *values): per-thread print; fmt is a compile-time str.format string with one "
                  "{} field per value (numbers and bools); lines appear after the launch in thread order",
                  lower=_debugprint.lower)

# mma
mma = Intrinsic("mma", "mma(D, A, B, C): D = A @ B + C on 16x16 local tiles (A, B f16/bf16; C, D f32)",
                lower=_mma.lower_mma)

# fragment MMA (docs/spec.md §8.14)
fragment = Intrinsic("fragment", "fragment(role, dtype): an MMA fragment ('a'/'b': f16/bf16 16x16; 'acc': f32 "
                     "16x16, +0.0)",
                     lower=_mma.lower_fragment)
mma_load = Intrinsic("mma_load", "mma_load(frag, src, i, j): load a 16x16 block (local 2-D array at (i, j), or "
                     "buffer offset i, ld j)",
                     lower=_mma.lower_mma_load)
mma_store = Intrinsic("mma_store", "mma_store(dst, acc, i, j): store an accumulator (local 2-D array at (i, j), or "
                      "offset i, ld j)",
                      lower=_mma.lower_mma_store)
mma_sync = Intrinsic("mma_sync", "mma_sync(d, a, b, c): d = a @ b + c on fragments (tensor cores where the target "
                     "has them)",
                     lower=_mma.lower_mma_sync)
mma_group = Intrinsic("mma_group", "mma_group(acc, a, tile, offset, panel_stride): four waves together; each "
                      "adds a @ B to its 16xN strip acc (N/16 fragments), B the 16xN tile at offset bytes of the "
                      "local array tile in the swizzled panel layout (docs/spec.md §8.14)",
                      lower=_mma.lower_mma_group)
mma_group_async = Intrinsic("mma_group_async", "mma_group_async(acc, a, tile, offset, panel_stride): mma_group "
                            "left in flight until mma_group_wait (docs/spec.md §8.14)",
                            lower=_mma.lower_mma_group_async)
mma_group_wait = Intrinsic("mma_group_wait", "mma_group_wait(n): wait until at most n of this wave's mma_group_async "
                           "are in flight", lower=_mma.lower_mma_group_wait)
mma_scale = Intrinsic("mma_scale", "mma_scale(acc, s): acc *= s element-wise; mma_scale(d, a, s): d = a * s",
                      lower=_mma.lower_mma_scale)
mma_fill = Intrinsic("mma_fill", "mma_fill(acc, v): every element = v",
                     lower=_mma.lower_mma_fill)
mma_bias = Intrinsic("mma_bias", "mma_bias(acc, bias, j0): acc[i][j] += bias[j0 + j]",
                     lower=_mma.lower_mma_bias)
mma_group_bt = Intrinsic("mma_group_bt", "mma_group_bt(acc, a, tile, offset): mma_group with B given transposed (N "
                         "rows of 16 k in the swizzled row layout, docs/spec.md §8.14)",
                         lower=_mma.lower_mma_group_bt)
mma_rowmax = Intrinsic("mma_rowmax", "mma_rowmax(d, strip, c): d[i][j] = max(c[i][j], max of row i of the strip)",
                       lower=_mma.lower_mma_rowmax)
mma_rowsum = Intrinsic("mma_rowsum", "mma_rowsum(d, strip, c): d[i][j] = c[i][j] + the sum of row i of the strip",
                       lower=_mma.lower_mma_rowsum)
mma_exp2 = Intrinsic("mma_exp2", "mma_exp2(d, a, b, s): d = 2^(a*s - b) element-wise (one fma)",
                     lower=_mma.lower_mma_exp2)
mma_mul = Intrinsic("mma_mul", "mma_mul(d, a, b): d = a * b element-wise", lower=_mma.lower_mma_mul)
mma_div = Intrinsic("mma_div", "mma_div(d, a, b): d = a / b element-wise", lower=_mma.lower_mma_div)
mma_mask = Intrinsic("mma_mask", "mma_mask(d, a, diag, cols): d[i][j] = a[i][j] where j - i <= diag and j < cols, "
                     "else -inf", lower=_mma.lower_mma_mask)
mma_cvt = Intrinsic("mma_cvt", "mma_cvt(a, acc): A fragment a = acc rounded to a's 16-bit type",
                    lower=_mma.lower_mma_cvt)
fragments = Intrinsic("fragments", "fragments(count, role, dtype): a tuple of count fragments",
                      lower=_mma.lower_fragments)

#: every marker by name (the registry the frontend and the docs read)
INTRINSICS: dict[str, Intrinsic] = {v.name: v for v in list(globals().values()) if isinstance(v, Intrinsic)}
__all__ = sorted(INTRINSICS)
