"""WAVE -> SYCL 2020 device code: the SYCL table of the shared C-family renderer
(:mod:`anywave.backends.cfamily`).

Each WAVE kernel becomes a free-function kernel (sycl_ext_oneapi_free_function_kernels)
declared ``extern "C"`` with the ``nd_range_kernel<3>`` property and, when it uses wave
operations, ``[[sycl::reqd_sub_group_size(W)]]``. Work-item queries come from
``this_work_item::get_nd_item<3>()``; dimension 2 is the fastest (SYCL's convention), so the
launcher passes the padded linear workgroup in dimension 2. Wave operations use
``select_from_group``, ``reduce_over_group`` on disjoint bits (a 64-bit ballot) and
``any_of_group``; f32 reductions and scans are written out in the spec's order. Atomics are
``sycl::atomic_ref`` on the generic address space with the instruction's order and scope;
barriers ``group_barrier``; local memory ``group_local_memory_for_overwrite``.
Any SYCL 2020 compiler with the free-function-kernel extension can build the text;
:data:`BUILD_OPTIONS` keeps the spec's arithmetic (no fast-math, no contraction).
"""

from __future__ import annotations

from anywave.backends.cfamily import FULL_FEATURES, SPIN_SIDE_EFFECT, CProgram, Dialect, Features, render
from anywave.binary.module import Module
from anywave.isa.types import MemoryOrder, Scope

#: options for the SYCL runtime compiler (clang driver spellings)
#: ``-fno-finite-loops``: clang may otherwise assume every loop ends (C++ [intro.progress]) and
#: delete one that does not, so a spinning kernel fell through into other code (a SIGSEGV in
#: CI); WAVE defines a loop without an exit as spinning until the launch is interrupted.
BUILD_OPTIONS = ("-fno-fast-math", "-ffp-contract=off", "-fno-finite-loops")


#: :data:`BUILD_OPTIONS` without the optimiser
BUILD_OPTIONS_UNOPTIMISED = ("-O0", *BUILD_OPTIONS)


def build_options(optimize: bool = True) -> tuple[str, ...]:
    """The options a runtime builds the text with: :data:`BUILD_OPTIONS`, or
    :data:`BUILD_OPTIONS_UNOPTIMISED` when ``optimize`` is False
    (:func:`anywave.runtime.targets.optimize_target_code`)."""
    return BUILD_OPTIONS if optimize else BUILD_OPTIONS_UNOPTIMISED

_ORDER = {MemoryOrder.RELAXED: "relaxed", MemoryOrder.ACQUIRE: "acquire", MemoryOrder.RELEASE: "release",
          MemoryOrder.ACQ_REL: "acq_rel", MemoryOrder.SEQ_CST: "seq_cst"}
_SCOPE = {Scope.WAVE: "sub_group", Scope.WORKGROUP: "work_group", Scope.DEVICE: "device",
          Scope.SYSTEM: "system"}
_RMW = {"add": "fetch_add", "sub": "fetch_sub", "min": "fetch_min", "max": "fetch_max", "and": "fetch_and",
        "or": "fetch_or", "xor": "fetch_xor", "exch": "exchange"}


#: the SYCL headers the generated source includes: the parts of ``<sycl/sycl.hpp>`` it uses
#: (intel-sycl-rt 2026.2.0). The whole header is about 1 s of the runtime compiler's ~2.3 s for a
#: small module (2-core host); these take it to ~1.3 s. The runtime builds a module whose build
#: fails with them again with :data:`FULL_INCLUDE` (:meth:`anywave.runtime.sycl.SyclDevice.build`)
INCLUDES = ("sycl/detail/core.hpp", "sycl/builtins.hpp", "sycl/group_algorithm.hpp", "sycl/group_barrier.hpp",
            "sycl/atomic_ref.hpp", "sycl/atomic_fence.hpp", "sycl/sub_group.hpp",
            "sycl/ext/oneapi/work_group_static.hpp", "sycl/ext/oneapi/free_function_queries.hpp")
#: the include lines of :data:`INCLUDES`, as the source spells them
INCLUDE_LINES = "\n".join(f"#include <{h}>" for h in INCLUDES)
#: the one header that has everything
FULL_INCLUDE = "#include <sycl/sycl.hpp>"


def _header(f: Features) -> str:
    return "\n".join([
        INCLUDE_LINES,
        "#include <cstdint>",
        "namespace syclexp = sycl::ext::oneapi::experimental;",
        "typedef std::uint8_t u8; typedef std::int8_t i8; typedef std::uint16_t u16; typedef std::int16_t i16;",
        "typedef std::uint32_t u32; typedef std::int32_t i32; typedef unsigned long u64; typedef long i64;",
        "#define AW_F32(u) sycl::bit_cast<float>((u32)(u))",
        "#define AW_U32(x) sycl::bit_cast<u32>((float)(x))",
        "#define AW_F64(u) sycl::bit_cast<double>((u64)(u))",
        "#define AW_U64(x) sycl::bit_cast<u64>((double)(x))",
        "#define AW_RINT sycl::rint",
        f"#define AW_HAS_F64 {int(f.fp64)}",
    ])


def _aref(ctype: str, addr: str, scope: Scope) -> str:
    return (f"sycl::atomic_ref<{ctype}, sycl::memory_order::relaxed, sycl::memory_scope::{_SCOPE[scope]}, "
            f"sycl::access::address_space::generic_space>(*({ctype}*)({addr}))")


def _rmw(space: str, op: str, ctype: str, addr: str, val: str, scope: Scope, order: MemoryOrder) -> str:
    return f"{_aref(ctype, addr, scope)}.{_RMW[op]}(({ctype})({val}), sycl::memory_order::{_ORDER[order]})"


def _cas(space: str, addr: str, expected: str, desired: str, scope: Scope, order: MemoryOrder) -> str:
    return (f"{_aref('u32', addr, scope)}.compare_exchange_strong({expected}, {desired}, "
            f"sycl::memory_order::{_ORDER[order]}, sycl::memory_order::relaxed);")


def _fence(scope: Scope, order: MemoryOrder) -> str:
    if order is MemoryOrder.RELAXED:
        return "/* fence .relaxed: no ordering */"
    return f"sycl::atomic_fence(sycl::memory_order::{_ORDER[order]}, sycl::memory_scope::{_SCOPE[scope]});"


def _kernel_open(name: str, params: list[str], W: int, wave: bool, lm: int) -> str:
    attr = f"[[sycl::reqd_sub_group_size({W})]]\n" if wave else ""
    return (f'extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<3>))\n{attr}'
            f"void {name}({', '.join(params)}) {{")


def _preamble(W: int, wave: bool) -> str:
    s = "auto aw_it = sycl::ext::oneapi::this_work_item::get_nd_item<3>();"
    if wave:
        s += " auto aw_sg = aw_it.get_sub_group();"
    return s


SYCL = Dialect(
    name="sycl",
    vec4="sycl::uint4", vec4_get=lambda v, i: f"{v}[{i}]",
    vec4_make=lambda xs: "sycl::uint4(" + ", ".join(xs) + ")",
    header=_header,
    kernel_open=_kernel_open,
    kernel_preamble=_preamble,
    global_ptr=lambda t: f"{t}*",
    local_ptr=lambda t: f"{t}*",
    buffer_param=lambda n: f"u8* {n}",
    u32_param=lambda n: f"u32 {n}",
    u64_param=lambda n: f"u64 {n}",
    local_decl=lambda n: (f"static syclexp::work_group_static<u64[{(n + 7) // 8}]> aw_lm_s; "
                          "u8* aw_lm = (u8*)&aw_lm_s[0];"),
    local_linear_id="aw_it.get_local_id(2)",
    group_id=lambda i: f"aw_it.get_group({2 - i})",
    num_groups=lambda i: f"aw_it.get_group_range({2 - i})",
    barrier="sycl::group_barrier(aw_it.get_group());",
    fence=_fence,
    atomic_rmw=_rmw,
    atomic_cas=_cas,
    math={k: f"sycl::{v}" for k, v in {"sqrt": "sqrt", "fma": "fma", "floor": "floor", "ceil": "ceil",
                                       "trunc": "trunc", "rint": "rint", "ex2": "exp2", "lg2": "log2",
                                       "sin": "sin", "cos": "cos", "tanh": "tanh"}.items()},
    popcount="sycl::popcount", clz="sycl::clz", ctz="sycl::ctz",
    shuffle=lambda v, i: f"sycl::select_from_group(aw_sg, (u32)({v}), (u32)({i}))",
    ballot=lambda b: f"sycl::reduce_over_group(aw_sg, ({b}) ? ((u64)1 << aw_lane) : (u64)0, sycl::bit_or<u64>())",
    any_lane=lambda b: f"sycl::any_of_group(aw_sg, (bool)({b}))",
    wave_barrier="sycl::group_barrier(aw_sg);",
    wave_sync="sycl::group_barrier(aw_sg);",  # SYCL 2020 §4.17.4.1: a fence on every address space
    build_notes=" ".join(BUILD_OPTIONS),
    spin_side_effect=SPIN_SIDE_EFFECT,
)


def translate(module: Module, wave_width: int, features: Features = FULL_FEATURES,
              kernels: list[str] | None = None, checked: bool = False) -> CProgram:
    """Render ``module`` as SYCL 2020 source for sub-group size ``wave_width`` (8, 16, 32, 64).

    Kernels needing what ``features`` lacks are listed in ``CProgram.refused``. ``checked``:
    a bounds-checked build (:mod:`anywave.backends.bounds`).

    Raises:
        CFamilyError: bad W or unknown kernel name.
    """
    return render(module, SYCL, wave_width, features, kernels, checked)
