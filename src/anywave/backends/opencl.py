"""WAVE -> OpenCL C (3.0, with the Khronos sub-group extensions): the OpenCL table of the
shared C-family renderer (:mod:`anywave.backends.cfamily`).

``translate(module, wave_width=16)`` gives a :class:`~anywave.backends.cfamily.CProgram`
whose text builds with :data:`BUILD_OPTIONS`. Sub-group size W is forced on kernels with
wave operations with ``intel_reqd_sub_group_size(W)`` (cl_intel_required_subgroup_size);
wave operations use ``sub_group_shuffle`` (cl_khr_subgroup_shuffle), ``sub_group_ballot``
(cl_khr_subgroup_ballot) and ``sub_group_any`` (cl_khr_subgroups). Atomics are the OpenCL
C 2.0/3.0 ``atomic_*_explicit`` functions with the instruction's memory order and scope.
Arithmetic is kept exact by ``#pragma OPENCL FP_CONTRACT OFF`` and the build options
(correctly rounded divide/sqrt, no fast-math, denormals kept: ``-cl-denorms-are-zero`` is
never passed).
"""

from __future__ import annotations

from anywave.backends.cfamily import FULL_FEATURES, CProgram, Dialect, Features, render
from anywave.binary.module import Module
from anywave.isa.types import MemoryOrder, Scope

#: options every program is built with (OpenCL 3.0 spec §5.8.4)
BUILD_OPTIONS = "-cl-std=CL3.0 -cl-fp32-correctly-rounded-divide-sqrt"


#: :data:`BUILD_OPTIONS` without the optimiser (OpenCL 3.0 §5.8.4.2)
BUILD_OPTIONS_UNOPTIMISED = BUILD_OPTIONS + " -cl-opt-disable"


def build_options(optimize: bool = True) -> str:
    """The options a runtime builds the text with: :data:`BUILD_OPTIONS`, or
    :data:`BUILD_OPTIONS_UNOPTIMISED` when ``optimize`` is False
    (:func:`anywave.runtime.targets.optimize_target_code`)."""
    return BUILD_OPTIONS if optimize else BUILD_OPTIONS_UNOPTIMISED

_ORDER = {MemoryOrder.RELAXED: "memory_order_relaxed", MemoryOrder.ACQUIRE: "memory_order_acquire",
          MemoryOrder.RELEASE: "memory_order_release", MemoryOrder.ACQ_REL: "memory_order_acq_rel",
          MemoryOrder.SEQ_CST: "memory_order_seq_cst"}
_SCOPE = {Scope.WAVE: "memory_scope_sub_group", Scope.WORKGROUP: "memory_scope_work_group",
          Scope.DEVICE: "memory_scope_device", Scope.SYSTEM: "memory_scope_device"}
_RMW = {"add": "add", "sub": "sub", "min": "min", "max": "max", "and": "and", "or": "or", "xor": "xor"}


def _header(f: Features) -> str:
    lines = [
        "#pragma OPENCL FP_CONTRACT OFF",
        "#pragma OPENCL EXTENSION cl_khr_fp64 : enable" if f.fp64 else "",
        "typedef uchar u8; typedef char i8; typedef ushort u16; typedef short i16;",
        "typedef uint u32; typedef int i32; typedef ulong u64; typedef long i64;",
        "#define AW_F32(u) as_float((u32)(u))",
        "#define AW_U32(x) as_uint((float)(x))",
        "#define AW_F64(u) as_double((u64)(u))",
        "#define AW_U64(x) as_ulong((double)(x))",
        "#define AW_RINT rint",
        f"#define AW_HAS_F64 {int(f.fp64)}",
    ]
    if f.wave_widths:
        lines.append("static inline u64 aw_ballot(bool b) {\n"
                     "  uint4 v = sub_group_ballot(b ? 1 : 0); return (u64)v.x | ((u64)v.y << 32);\n}")
    return "\n".join(lines)


def _atomic_ptr(space: str, ctype: str, addr: str) -> str:
    q = "__global" if space == "device" else "__local"
    at = {"u32": "atomic_uint", "i32": "atomic_int"}[ctype]
    return f"((volatile {q} {at}*){addr})"


def _rmw(space: str, op: str, ctype: str, addr: str, val: str, scope: Scope, order: MemoryOrder) -> str:
    fn = "atomic_exchange_explicit" if op == "exch" else f"atomic_fetch_{_RMW[op]}_explicit"
    return f"{fn}({_atomic_ptr(space, ctype, addr)}, {val}, {_ORDER[order]}, {_SCOPE[scope]})"


def _cas(space: str, addr: str, expected: str, desired: str, scope: Scope, order: MemoryOrder) -> str:
    return (f"atomic_compare_exchange_strong_explicit({_atomic_ptr(space, 'u32', addr)}, &{expected}, "
            f"{desired}, {_ORDER[order]}, memory_order_relaxed, {_SCOPE[scope]});")


def _fence(scope: Scope, order: MemoryOrder) -> str:
    if order is MemoryOrder.RELAXED:
        return "/* fence .relaxed: no ordering */"
    return (f"atomic_work_item_fence(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE, {_ORDER[order]}, "
            f"{_SCOPE[scope]});")


def _kernel_open(name: str, params: list[str], W: int, wave: bool, lm: int) -> str:
    attr = f"__attribute__((intel_reqd_sub_group_size({W})))\n" if wave else ""
    return f"{attr}__kernel void {name}({', '.join(params)}) {{"


OPENCL = Dialect(
    name="opencl",
    vec4="uint4",
    header=_header,
    kernel_open=_kernel_open,
    kernel_preamble=lambda W, wave: "",
    global_ptr=lambda t: f"__global {t}*",
    local_ptr=lambda t: f"__local {t}*",
    buffer_param=lambda n: f"__global u8* {n}",
    u32_param=lambda n: f"const u32 {n}",
    u64_param=lambda n: f"const u64 {n}",
    local_decl=lambda n: f"__local u8 aw_lm[{n}] __attribute__((aligned(16)));",
    local_linear_id="get_local_id(0)",
    group_id=lambda i: f"get_group_id({i})",
    num_groups=lambda i: f"get_num_groups({i})",
    barrier="barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);",
    fence=_fence,
    atomic_rmw=_rmw,
    atomic_cas=_cas,
    math={"sqrt": "sqrt", "fma": "fma", "floor": "floor", "ceil": "ceil", "trunc": "trunc", "rint": "rint",
          "ex2": "exp2", "lg2": "log2", "sin": "sin", "cos": "cos", "tanh": "tanh"},
    popcount="popcount", clz="clz", ctz="ctz", rotate_left=lambda v, c: f"rotate({v}, {c})",
    shuffle=lambda v, i: f"sub_group_shuffle((u32)({v}), (u32)({i}))",
    ballot=lambda b: f"aw_ballot({b})",
    any_lane=lambda b: f"sub_group_any(({b}) ? 1 : 0)",
    wave_barrier="sub_group_barrier(CLK_LOCAL_MEM_FENCE);",
    wave_sync="sub_group_barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);",
    build_notes=BUILD_OPTIONS,
)


def translate(module: Module, wave_width: int, features: Features = FULL_FEATURES,
              kernels: list[str] | None = None, checked: bool = False) -> CProgram:
    """Render ``module`` as OpenCL C for sub-group size ``wave_width`` (8, 16, 32 or 64).

    Kernels needing what ``features`` lacks are listed in ``CProgram.refused``. ``checked``:
    a bounds-checked build (:mod:`anywave.backends.bounds`).

    Raises:
        CFamilyError: bad W or unknown kernel name.
    """
    return render(module, OPENCL, wave_width, features, kernels, checked)
