"""WAVE -> HIP C++: the HIP table of the shared C-family renderer (:mod:`anywave.backends.cfamily`).

``translate(module, wave_width=64)`` gives a :class:`~anywave.backends.cfamily.CProgram` whose
text compiles with ``hipcc --genco`` (or hiprtc) for AMD GPUs, and -- through the header
``anywave/runtime/hip_nvidia/hip_to_cuda.h`` -- with NVRTC for NVIDIA GPUs.

W is the device's ``warpSize``: 64 on CDNA (gfx90a, gfx94x), 32 on RDNA (gfx10xx/11xx in their
default wave32 mode). Nothing here assumes one width: lane numbers, ballots (64-bit
``__ballot``), shuffles and the written-out f32 butterfly/Kogge-Stone steps all follow W, and
every kernel with wave operations carries a preprocessor guard that stops the compile when the
compiler's wavefront size (``__AMDGCN_WAVEFRONT_SIZE``, or 32 on NVIDIA) is not W.

Spellings: ``__shfl``/``__ballot``/``__any`` for wave operations; ``__syncthreads`` for
``barrier``; ``__threadfence_block``/``__threadfence``/``__threadfence_system`` for fences of
wave+workgroup/device/system scope (sequentially consistent, so at least as strong as any
order asked for); atomics are clang's ``__hip_atomic_*`` builtins with the instruction's exact
memory order and scope (``sub`` is ``fetch_add`` of the two's-complement negation, which wraps
identically); ``__shared__`` local memory; bit casts ``__uint_as_float`` and friends. f32
``sqrt`` goes through the correctly rounded f64 square root (one rounding of the exact root is
the correctly rounded f32 root, since 53 >= 2*24 + 2), because ROCm 5.x lowers f32 ``sqrt`` to
the 1-ulp ``v_sqrt_f32``. Contraction is off (``#pragma clang fp contract(off)`` and
:data:`BUILD_OPTIONS`; NVRTC gets ``--fmad=false``).
"""

from __future__ import annotations

from anywave.backends.cfamily import FULL_FEATURES, SPIN_SIDE_EFFECT, CProgram, Dialect, Features, render
from anywave.binary.module import Module
from anywave.isa.types import MemoryOrder, Scope

#: wavefront sizes of AMD GPUs (CDNA 64, RDNA 32 by default); NVIDIA (HIP on CUDA) is 32
WAVE_WIDTHS = (32, 64)

#: hipcc options every program needs (in addition to ``--genco --offload-arch=gfxNNN``)
#: ``-fno-finite-loops``: clang may otherwise assume every loop ends (C++ [intro.progress]) and
#: delete one that does not, so a spinning kernel fell through into other code (a SIGSEGV in
#: CI); WAVE defines a loop without an exit as spinning until the launch is interrupted.
BUILD_OPTIONS = ("-ffp-contract=off", "-fno-fast-math", "-fhip-fp32-correctly-rounded-divide-sqrt", "-fno-finite-loops")

_ORDER = {MemoryOrder.RELAXED: "__ATOMIC_RELAXED", MemoryOrder.ACQUIRE: "__ATOMIC_ACQUIRE",
          MemoryOrder.RELEASE: "__ATOMIC_RELEASE", MemoryOrder.ACQ_REL: "__ATOMIC_ACQ_REL",
          MemoryOrder.SEQ_CST: "__ATOMIC_SEQ_CST"}
_SCOPE = {Scope.WAVE: "__HIP_MEMORY_SCOPE_WAVEFRONT", Scope.WORKGROUP: "__HIP_MEMORY_SCOPE_WORKGROUP",
          Scope.DEVICE: "__HIP_MEMORY_SCOPE_AGENT", Scope.SYSTEM: "__HIP_MEMORY_SCOPE_SYSTEM"}
_FENCE = {Scope.WAVE: "__threadfence_block();", Scope.WORKGROUP: "__threadfence_block();",
          Scope.DEVICE: "__threadfence();", Scope.SYSTEM: "__threadfence_system();"}
#: overloaded (float, double) wrappers: the renderer uses one name for both precisions
_MATH2 = {"sqrt": ("(float)__dsqrt_rn((double)a)", "__dsqrt_rn(a)"), "floor": ("floorf(a)", "floor(a)"),
          "ceil": ("ceilf(a)", "ceil(a)"), "trunc": ("truncf(a)", "trunc(a)"), "rint": ("rintf(a)", "rint(a)")}


def _header(f: Features) -> str:
    lines = [
        "#if !defined(__HIPCC_RTC__)",
        "#include <hip/hip_runtime.h>",
        "#endif",
        "#if defined(__clang__)",
        "#pragma clang fp contract(off)",
        "#endif",
        "#if defined(__AMDGCN_WAVEFRONT_SIZE) && !defined(AW_DEVICE_WAVE_SIZE)",
        "#define AW_DEVICE_WAVE_SIZE __AMDGCN_WAVEFRONT_SIZE",
        "#endif",
        "#define AW_FN static inline __device__",
        "typedef unsigned char u8; typedef signed char i8; typedef unsigned short u16; typedef short i16;",
        "typedef unsigned int u32; typedef int i32; typedef unsigned long u64; typedef long i64;",
        "#define AW_F32(u) __uint_as_float((u32)(u))",
        "#define AW_U32(x) __float_as_uint((float)(x))",
        "#define AW_F64(u) __longlong_as_double((long long)(u64)(u))",
        "#define AW_U64(x) ((u64)__double_as_longlong((double)(x)))",
        "#define AW_RINT rintf",
        f"#define AW_HAS_F64 {int(f.fp64)}",
        "AW_FN u32 aw_ctz(u32 x) { return x == 0u ? 32u : (u32)(__ffs(x) - 1); }",
        "AW_FN u32 aw_ctz(u64 x) { return x == 0ul ? 64u : (u32)(__ffsll((long long)x) - 1); }",
        "AW_FN float aw_fma(float a, float b, float c) { return fmaf(a, b, c); }",
        "AW_FN double aw_fma(double a, double b, double c) { return fma(a, b, c); }",
    ]
    for op, (fl, db) in _MATH2.items():
        lines.append(f"AW_FN float aw_{op}(float a) {{ return {fl}; }} "
                     f"AW_FN double aw_{op}(double a) {{ return {db}; }}")
    return "\n".join(lines)


def _rmw(space: str, op: str, ctype: str, addr: str, val: str, scope: Scope, order: MemoryOrder) -> str:
    if op == "sub":  # clang 15 has no __hip_atomic_fetch_sub; x - v == x + (0 - v) modulo 2^32
        op, val = "add", f"0u - (u32)({val})"
    fn = "__hip_atomic_exchange" if op == "exch" else f"__hip_atomic_fetch_{op}"
    return f"{fn}(({ctype}*)({addr}), ({ctype})({val}), {_ORDER[order]}, {_SCOPE[scope]})"


def _cas(space: str, addr: str, expected: str, desired: str, scope: Scope, order: MemoryOrder) -> str:
    return (f"__hip_atomic_compare_exchange_strong((u32*)({addr}), &{expected}, {desired}, {_ORDER[order]}, "
            f"__ATOMIC_RELAXED, {_SCOPE[scope]});")


def _fence(scope: Scope, order: MemoryOrder) -> str:
    return "/* fence .relaxed: no ordering */" if order is MemoryOrder.RELAXED else _FENCE[scope]


def _kernel_open(name: str, params: list[str], W: int, wave: bool, lm: int) -> str:
    guard = (f"#if defined(AW_DEVICE_WAVE_SIZE) && AW_DEVICE_WAVE_SIZE != {W}\n"
             f"#error \"{name} was rendered for wave width {W}; this target's wavefront size differs\"\n"
             "#endif\n") if wave else ""
    return f"{guard}extern \"C\" __global__ void __launch_bounds__(1024) {name}({', '.join(params)}) {{"


HIP = Dialect(
    name="hip",
    vec4="uint4", vec4_make=lambda xs: "make_uint4(" + ", ".join(xs) + ")",
    header=_header,
    kernel_open=_kernel_open,
    kernel_preamble=lambda W, wave: "",
    global_ptr=lambda t: f"{t}*",
    local_ptr=lambda t: f"{t}*",
    buffer_param=lambda n: f"u8* {n}",
    u32_param=lambda n: f"const u32 {n}",
    u64_param=lambda n: f"const u64 {n}",
    local_decl=lambda n: f"__shared__ __attribute__((aligned(16))) u8 aw_lm[{n}];",
    local_linear_id="threadIdx.x",
    group_id=lambda i: "blockIdx." + "xyz"[i],
    num_groups=lambda i: "gridDim." + "xyz"[i],
    barrier="__syncthreads();",
    fence=_fence,
    atomic_rmw=_rmw,
    atomic_cas=_cas,
    math={"sqrt": "aw_sqrt", "fma": "aw_fma", "floor": "aw_floor", "ceil": "aw_ceil", "trunc": "aw_trunc",
          "rint": "aw_rint", "ex2": "exp2f", "lg2": "log2f", "sin": "sinf", "cos": "cosf", "tanh": "tanhf"},
    popcount="__popc", clz="__clz", ctz="aw_ctz",
    shuffle=lambda v, i: f"__shfl((u32)({v}), (int)({i}))",
    ballot=lambda b: f"(u64)__ballot((int)({b}))",
    any_lane=lambda b: f"__any((int)({b}))",
    wave_barrier=("__builtin_amdgcn_fence(__ATOMIC_RELEASE, \"wavefront\"); __builtin_amdgcn_wave_barrier(); "
                  "__builtin_amdgcn_fence(__ATOMIC_ACQUIRE, \"wavefront\");"),
    # the fences of the wave barrier above cover global memory and LDS alike
    wave_sync=("__builtin_amdgcn_fence(__ATOMIC_RELEASE, \"wavefront\"); __builtin_amdgcn_wave_barrier(); "
               "__builtin_amdgcn_fence(__ATOMIC_ACQUIRE, \"wavefront\");"),
    build_notes=" ".join(BUILD_OPTIONS),
    spin_side_effect=SPIN_SIDE_EFFECT,
)


def translate(module: Module, wave_width: int = 64, features: Features = FULL_FEATURES,
              kernels: list[str] | None = None, checked: bool = False) -> CProgram:
    """Render ``module`` as HIP C++ for wavefront size ``wave_width`` (the device's ``warpSize``:
    64 on CDNA, 32 on RDNA and on NVIDIA).

    Kernels needing what ``features`` lacks are listed in ``CProgram.refused``.

    Raises:
        CFamilyError: ``wave_width`` not 32 or 64, or an unknown kernel name.
    """
    if wave_width not in WAVE_WIDTHS:
        from anywave.backends.cfamily import CFamilyError

        raise CFamilyError("hip", [f"wave width {wave_width!r} is not a HIP wavefront size {WAVE_WIDTHS}"])
    return render(module, HIP, wave_width, features, kernels, checked)
