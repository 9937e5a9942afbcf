"""WAVE -> Metal Shading Language (MSL 3.2): the Metal table of the shared C-family renderer
(:mod:`anywave.backends.cfamily`).

W = 32 (an Apple GPU SIMD-group). Wave operations use ``simd_shuffle``, ``simd_ballot`` and
``simd_any`` only -- never ``simd_sum``/``simd_prefix_*``, whose float order is unspecified; f32
reductions and scans are the spec's butterfly / Kogge-Stone steps, written out by the renderer.
Buffers are ``device u8*`` kernel arguments and scalars ``constant`` references, bound in ABI
order: WAVE argument i is ``[[buffer(i)]]``, then the three workgroup sizes. Local memory is a
``threadgroup`` argument ``[[threadgroup(0)]]`` whose length the runtime sets. Bit casts are
``as_type``. Contraction is off (``#pragma METAL fp contract(off)``, math mode ``safe``).

Refused, with the reason named per instruction:

* everything needing fp64 (Metal has no ``double``): f64 arithmetic and conversions, and the
  f16/bf16 operations that round through f64 (int -> f16/bf16, f16/bf16 ``fma``);
* atomics and fences at ``.system`` scope: Metal's widest ``thread_scope`` is the device.

How atomics map: Metal atomics (``atomic_uint``/``atomic_int`` in device or threadgroup memory)
are ``memory_order_relaxed`` only. A WAVE ``.relaxed`` atomic is that atomic; a stronger order is
the relaxed atomic bracketed by ``atomic_thread_fence(..., memory_order_seq_cst, scope)`` (MSL
3.2) -- before it for release, after it for acquire, both for acq_rel/seq_cst -- the standard
fence-based mapping, at least as strong as asked. Scopes map ``.wave`` -> simdgroup,
``.workgroup`` -> threadgroup, ``.device`` -> device. Compare-and-swap is Metal's weak CAS
retried while it fails spuriously, so it is strong.

What was checked here (no Apple hardware): every generated file compiles with
``clang++ -fsyntax-only -std=c++17`` against a stand-in ``metal_stdlib`` (tests/metal_stub/),
which catches undeclared names, wrong argument counts and types, and pointers in the wrong
address space. It cannot catch: MSL rules a C++ compiler does not know (attribute placement
and binding-index validity, the set of types allowed in each address space, limits on
argument counts and threadgroup memory), functions or overloads the real header lacks or
declares differently, and anything about execution -- the precision of ``sqrt``/division
with fast math off, denormal handling, SIMD-group layout and atomic ordering on real GPUs.
"""

from __future__ import annotations

from anywave.backends.cfamily import SPIN_SIDE_EFFECT, CProgram, Dialect, Features, render
from anywave.binary.module import Instruction, Module
from anywave.isa.types import MemoryOrder, Scope

#: Apple GPUs execute SIMD-groups of 32 threads
WAVE_WIDTH = 32
#: what a Metal device offers the renderer: no fp64, SIMD-groups of 32
METAL_FEATURES = Features(fp64=False, wave_widths=(WAVE_WIDTH,))

_SCOPE = {Scope.WAVE: "thread_scope_simdgroup", Scope.WORKGROUP: "thread_scope_threadgroup",
          Scope.DEVICE: "thread_scope_device"}
_RMW = {"add": "add", "sub": "sub", "min": "min", "max": "max", "and": "and", "or": "or", "xor": "xor"}
_SLOT = "@AW_SLOT@"  # binding placeholder, numbered in ABI order by _kernel_open


def _header(f: Features) -> str:
    lines = [
        "#include <metal_stdlib>",
        "using namespace metal;",
        "#pragma METAL fp math_mode(safe)",
        "#pragma METAL fp contract(off)",
        "typedef uchar u8; typedef char i8; typedef ushort u16; typedef short i16;",
        "typedef uint u32; typedef int i32; typedef ulong u64; typedef long i64;",
        "#define AW_F32(u) as_type<float>((u32)(u))",
        "#define AW_U32(x) as_type<u32>((float)(x))",
        "#define AW_RINT rint",
        "#define AW_HAS_F64 0",
        "static inline u32 aw_ctz(u32 x) { return ctz(x); }",
        "static inline u32 aw_ctz(u64 x) { const u32 lo = (u32)x, hi = (u32)(x >> 32);",
        "  return lo != 0u ? ctz(lo) : (hi != 0u ? 32u + ctz(hi) : 64u); }",
        "static inline uint4 aw_uint4(u32 a, u32 b, u32 c, u32 d) { uint4 v; v.x = a; v.y = b; v.z = c; v.w = d;"
        " return v; }",
    ]
    for s, name in _SCOPE.items():
        fence = f"atomic_thread_fence(mem_flags::mem_device | mem_flags::mem_threadgroup, memory_order_seq_cst, {name})"
        lines.append(f"static inline void aw_fence_{s.name.lower()}() {{ {fence}; }}")
        lines.append(f"static inline u32 aw_then_fence_{s.name.lower()}(u32 v) {{ {fence}; return v; }}")
    return "\n".join(lines)


def _atomic_ptr(space: str, ctype: str, addr: str) -> str:
    q = "device" if space == "device" else "threadgroup"
    return f"(({q} {'atomic_int' if ctype == 'i32' else 'atomic_uint'}*)({addr}))"


def _rmw(space: str, op: str, ctype: str, addr: str, val: str, scope: Scope, order: MemoryOrder) -> str:
    fn = "atomic_exchange_explicit" if op == "exch" else f"atomic_fetch_{_RMW[op]}_explicit"
    e = f"{fn}({_atomic_ptr(space, ctype, addr)}, ({ctype})({val}), memory_order_relaxed)"
    s = Scope(scope).name.lower()
    if order in (MemoryOrder.RELEASE, MemoryOrder.ACQ_REL, MemoryOrder.SEQ_CST):
        e = f"(aw_fence_{s}(), {e})"
    if order in (MemoryOrder.ACQUIRE, MemoryOrder.ACQ_REL, MemoryOrder.SEQ_CST):
        e = f"aw_then_fence_{s}((u32)({e}))"
    return e


def _cas(space: str, addr: str, expected: str, desired: str, scope: Scope, order: MemoryOrder) -> str:
    s = Scope(scope).name.lower()
    pre = f"aw_fence_{s}(); " if order in (MemoryOrder.RELEASE, MemoryOrder.ACQ_REL, MemoryOrder.SEQ_CST) else ""
    post = f" aw_fence_{s}();" if order in (MemoryOrder.ACQUIRE, MemoryOrder.ACQ_REL, MemoryOrder.SEQ_CST) else ""
    return (f"{pre}{{ const u32 aw_e0 = {expected}; while (!atomic_compare_exchange_weak_explicit("
            f"{_atomic_ptr(space, 'u32', addr)}, &{expected}, (u32)({desired}), memory_order_relaxed, "
            f"memory_order_relaxed) && {expected} == aw_e0) {{}} }}{post}")


def _fence(scope: Scope, order: MemoryOrder) -> str:
    if order is MemoryOrder.RELAXED:
        return "/* fence .relaxed: no ordering */"
    return f"aw_fence_{Scope(scope).name.lower()}();"


def _kernel_open(name: str, params: list[str], W: int, wave: bool, lm: int) -> str:
    ps = [p.replace(_SLOT, str(i)) for i, p in enumerate(params)]
    if lm:
        ps.append("threadgroup u8* aw_lm [[threadgroup(0)]]")
    ps += ["uint aw_tid [[thread_index_in_threadgroup]]", "uint3 aw_tgid [[threadgroup_position_in_grid]]",
           "uint3 aw_ntg [[threadgroups_per_grid]]"]
    return f"kernel void {name}(" + ",\n    ".join(ps) + ") {"


def _refuse(ins: Instruction) -> str | None:
    """Operand-level refusals: Metal has no system scope."""
    op = ins.defn.op
    if op in ("atom", "red") and ins.defn.variant.startswith("device."):
        scope, order = ins.operands[-2], ins.operands[-1]
    elif op == "fence":
        scope, order = ins.operands[0], ins.operands[1]
    else:
        return None
    if Scope(scope) is Scope.SYSTEM and (op != "fence" or MemoryOrder(order) is not MemoryOrder.RELAXED):
        return (f"{ins.defn.mnemonic} at scope .system: Metal's widest thread_scope is the device "
                "(use .device scope, or another target)")
    return None


METAL = Dialect(
    name="metal",
    vec4="uint4", vec4_make=lambda xs: "aw_uint4(" + ", ".join(xs) + ")",
    header=_header,
    kernel_open=_kernel_open,
    kernel_preamble=lambda W, wave: "",
    global_ptr=lambda t: f"device {t}*",
    local_ptr=lambda t: f"threadgroup {t}*",
    buffer_param=lambda n: f"device u8* {n} [[buffer({_SLOT})]]",
    u32_param=lambda n: f"constant u32& {n} [[buffer({_SLOT})]]",
    u64_param=lambda n: f"constant u64& {n} [[buffer({_SLOT})]]",
    local_decl=lambda n: f"/* aw_lm: {n} bytes of threadgroup memory, argument [[threadgroup(0)]] */",
    local_linear_id="aw_tid",
    group_id=lambda i: "aw_tgid." + "xyz"[i],
    num_groups=lambda i: "aw_ntg." + "xyz"[i],
    barrier="threadgroup_barrier(mem_flags::mem_device | mem_flags::mem_threadgroup);",
    fence=_fence,
    atomic_rmw=_rmw,
    atomic_cas=_cas,
    math={"sqrt": "sqrt", "fma": "fma", "floor": "floor", "ceil": "ceil", "trunc": "trunc", "rint": "rint",
          "ex2": "exp2", "lg2": "log2", "sin": "sin", "cos": "cos", "tanh": "tanh"},
    popcount="popcount", clz="clz", ctz="aw_ctz",
    shuffle=lambda v, i: f"simd_shuffle((u32)({v}), (ushort)({i}))",
    ballot=lambda b: f"(u64)(simd_vote::vote_t)simd_ballot((bool)({b}))",
    any_lane=lambda b: f"simd_any((bool)({b}))",
    wave_barrier="simdgroup_barrier(mem_flags::mem_threadgroup);",
    wave_sync="simdgroup_barrier(mem_flags::mem_threadgroup | mem_flags::mem_device);",
    build_notes="MTLCompileOptions: languageVersion 3.2, fast math off",
    spin_side_effect=SPIN_SIDE_EFFECT,
    goto_free=True,  # MSL has no goto: a ret in an inlined call leaves a one-trip loop
    refuse=_refuse,
)


def translate(module: Module, wave_width: int = WAVE_WIDTH, features: Features = METAL_FEATURES,
              kernels: list[str] | None = None, checked: bool = False) -> CProgram:
    """Render ``module`` as Metal Shading Language (W = 32).

    Kernels Metal cannot run (fp64, ``.system`` scope) are listed in ``CProgram.refused`` with
    the instruction and reason.

    Raises:
        CFamilyError: ``wave_width`` is not 32, ``features`` claims fp64, or an unknown kernel name.
    """
    from anywave.backends.cfamily import CFamilyError

    if wave_width != WAVE_WIDTH:
        raise CFamilyError("metal", [f"wave width {wave_width!r}: Metal SIMD-groups are {WAVE_WIDTH} wide"])
    if features.fp64:
        raise CFamilyError("metal", ["features.fp64 is True but Metal has no double precision"])
    prog = render(module, METAL, wave_width, features, kernels, checked)
    for k, why in prog.refused.items():
        prog.refused[k] = why.replace("(device has no fp64)", "(Metal has no double precision)")
    return prog
