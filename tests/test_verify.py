"""The verifier: each rule with a module that breaks it and one that keeps it."""

from __future__ import annotations

import pytest

from anywave.binary.module import Arg, DeviceAddr, Function, Instruction, Kernel, LocalAddr, Module, Pred
from anywave.binary.verify import check, verify
from anywave.errors import SourceLoc, VerifyError
from anywave.isa.table import BY_MNEMONIC
from anywave.isa.types import LIMITS, Access, ArgKind, Capability, MemoryOrder, ScalarType, Scope
from test_wbin import saxpy_module

I = Instruction.make  # noqa: E741
B, S = ArgKind.BUFFER, ArgKind.SCALAR


def kmod(code, *, args=None, registers=8, local=0, caps=Capability.NONE, functions=(), **kw) -> Module:
    k = Kernel("k", list(args or []), registers, local, capabilities=caps, code=list(code), **kw)
    return Module([k], list(functions))


def one(m: Module, *words: str) -> str:
    """Exactly one problem, containing every word."""
    problems = check(m)
    assert len(problems) == 1, problems
    for w in words:
        assert w in problems[0], (w, problems[0])
    return problems[0]


def ok(m: Module) -> None:
    assert check(m) == []
    verify(m)


def test_sample_is_valid():
    ok(saxpy_module())


def test_verify_raises_with_all_problems():
    m = kmod([I("add.i32", 9, 0, 0), I("else")], registers=4)
    with pytest.raises(VerifyError) as ei:
        verify(m)
    assert len(ei.value.problems) == 2
    assert "2 problems" in str(ei.value)


def test_problem_names_owner_index_mnemonic_and_location():
    code = [I("nop"), I("add.i32", 5, 0, 0, loc=SourceLoc("k.wave", 7, 5))]
    msg = one(kmod(code, registers=4), "r5", "4 registers")
    assert msg.startswith("kernel 'k', instruction 1 (add.i32) at k.wave:7:5:")


# ----------------------------------------------------------------------------- registers

def test_registers_single_pair_quad_and_address():
    ok(kmod([I("add.i32", 3, 2, 1)], registers=4))
    one(kmod([I("add.i32", 4, 0, 0)], registers=4), "operand 0", "r4")
    i64 = Capability.INT64
    ok(kmod([I("add.i64", 2, 0, 2)], registers=4, caps=i64))
    one(kmod([I("add.i64", 3, 0, 0)], registers=4, caps=i64), "r3:r4")
    buf = [Arg("x", B, ScalarType.U32, Access.READWRITE)]
    ok(kmod([I("ld.device.b128", 0, DeviceAddr(0, 0, 0))], args=buf, registers=4))
    one(kmod([I("ld.device.b128", 1, DeviceAddr(0, 0, 0))], args=buf, registers=4), "r1:r4")
    one(kmod([I("ld.device.b32", 0, DeviceAddr(0, 6, 0))], args=buf, registers=4), "operand 1", "r6")
    one(kmod([I("ld.device.b32.o64", 0, DeviceAddr(0, 3, 0))], args=buf, registers=4,
             caps=Capability.OFFSET64), "r3:r4")
    one(kmod([I("ld.local.b32", 0, LocalAddr(9, 0))], registers=4, local=64), "r9")


def test_register_count_range():
    one(kmod([], registers=0), "register count 0")
    one(kmod([], registers=256), "register count 256")
    ok(kmod([], registers=255))
    ok(kmod([], registers=1))


def test_function_registers_checked_against_each_calling_kernel():
    f = Function("f", [I("mov.b32", 10, 0)])
    k_small = Kernel("small", registers=8, code=[I("call", 0)])
    k_big = Kernel("big", registers=16, code=[I("call", 0)])
    m = Module([k_small, k_big], [f])
    msg = one(m, "r10")
    assert "function 'f' (called from kernel 'small')" in msg
    ok(Module([k_big], [f]))
    # transitively: kernel -> g -> f
    g = Function("g", [I("call", 1)])
    one(Module([Kernel("t", registers=8, code=[I("call", 0)])], [g, f]), "called from kernel 't'", "r10")


def test_predicates():
    # predicate fields are checked by the encoding range rule
    one(kmod([Instruction(BY_MNEMONIC["setp.true"], (8,))]), "pd")
    one(kmod([Instruction(BY_MNEMONIC["selp.b32"], (0, 1, 2, Pred(9)))]), "ps")
    one(kmod([I("nop", guard=Pred(8))]), "guard predicate p8")
    ok(kmod([I("selp.b32", 0, 1, 2, Pred(7, True), guard=Pred(7))]))


def test_operand_shape():
    one(kmod([Instruction(BY_MNEMONIC["add.i32"], (0, 1))]), "takes 3 operands")
    one(kmod([Instruction(BY_MNEMONIC["add.i32"], (0, 1, "r2"))]), "operand 2", "int")
    one(kmod([Instruction(BY_MNEMONIC["movi.b32"], (0, 1 << 40))]), "imm32")


# ----------------------------------------------------------------------------- control flow

def test_balanced_if_else_endif():
    p = Pred(0)
    ok(kmod([I("if", p), I("nop"), I("else"), I("nop"), I("endif")]))
    one(kmod([I("if", p), I("nop")]), "if at instruction 0 is never closed", "endif")
    one(kmod([I("endif")]), "instruction 0 (endif)", "without a matching if")
    one(kmod([I("else")]), "else without a matching if")
    one(kmod([I("if", p), I("else"), I("else"), I("endif")]), "instruction 2", "second else")


def test_loops_and_nesting():
    p = Pred(1)
    ok(kmod([I("loop"), I("if", p), I("break"), I("endif"), I("continue", guard=p), I("endloop")]))
    one(kmod([I("loop")]), "loop at instruction 0 is never closed")
    one(kmod([I("endloop")]), "without a matching loop")
    # improperly nested: loop closed while an if inside it is open
    problems = check(kmod([I("loop"), I("if", p), I("endloop"), I("endif")]))
    assert any("endloop without a matching loop" in x and "innermost open region is the if" in x
               for x in problems)


def test_break_continue_only_inside_loop_of_same_body():
    one(kmod([I("break")]), "break outside a loop")
    one(kmod([I("if", Pred(0)), I("continue"), I("endif")]), "continue outside a loop")
    f = Function("f", [I("break")])
    one(kmod([I("loop"), I("call", 0), I("endloop")], functions=[f]), "function 'f'", "break outside a loop")


def test_nesting_depth_limit():
    n = LIMITS.max_control_nesting
    ok(kmod([I("loop")] * n + [I("endloop")] * n))
    one(kmod([I("loop")] * (n + 1) + [I("endloop")] * (n + 1)), f"depth {n + 1}", f"limit {n}")


def test_guards_not_allowed_on_no_guard_records():
    for mn, ops in (("barrier", ()), ("fence", (Scope.WORKGROUP, MemoryOrder.ACQ_REL)), ("endif", ())):
        code = [I("if", Pred(0))] if mn == "endif" else []
        code.append(I(mn, *ops, guard=Pred(1)))
        problems = check(kmod(code))
        assert any("may not carry a guard" in x and f"({mn})" in x for x in problems), problems
    ok(kmod([I("loop"), I("break", guard=Pred(1, True)), I("endloop"), I("halt", guard=Pred(2))]))


# ----------------------------------------------------------------------------- arguments

def test_buffer_operands_name_buffers():
    args = [Arg("n", S, ScalarType.U32), Arg("x", B, ScalarType.F32)]
    ok(kmod([I("ld.device.b32", 0, DeviceAddr(1, 1, 0))], args=args))
    one(kmod([I("ld.device.b32", 0, DeviceAddr(0, 1, 0))], args=args), "'n'", "scalar, not a buffer")
    one(kmod([I("ld.device.b32", 0, DeviceAddr(2, 1, 0))], args=args), "index 2 does not exist")


def test_ldarg_names_scalar_of_right_width():
    args = [Arg("x", B, ScalarType.F32), Arg("n", S, ScalarType.U32), Arg("h", S, ScalarType.F16),
            Arg("d", S, ScalarType.F64)]
    ok(kmod([I("ldarg.b32", 0, 1), I("ldarg.b32", 0, 2), I("ldarg.b64", 2, 3)], args=args))
    one(kmod([I("ldarg.b32", 0, 0)], args=args), "'x'", "buffer")
    one(kmod([I("ldarg.b32", 0, 3)], args=args), "ldarg.b32", "'d'", "f64")
    one(kmod([I("ldarg.b64", 0, 1)], args=args), "ldarg.b64", "'n'", "u32")
    one(kmod([I("ldarg.b32", 0, 4)], args=args), "argument index 4 does not exist")


def test_buffer_access_rules():
    def args(access):
        return [Arg("x", B, ScalarType.U32, access)]
    ld = I("ld.device.b32", 0, DeviceAddr(0, 1, 0))
    st = I("st.device.b32", DeviceAddr(0, 1, 0), 0)
    at = I("atom.device.add.u32", 0, DeviceAddr(0, 1, 0), 2, Scope.DEVICE, MemoryOrder.RELAXED)
    red = I("red.device.add.u32", DeviceAddr(0, 1, 0), 2, Scope.DEVICE, MemoryOrder.RELAXED)
    ok(kmod([ld], args=args(Access.READ)))
    ok(kmod([st], args=args(Access.WRITE)))
    ok(kmod([ld, st, at, red], args=args(Access.READWRITE)))
    one(kmod([st], args=args(Access.READ)), "store to buffer 'x' declared read")
    one(kmod([ld], args=args(Access.WRITE)), "load from buffer 'x' declared write")
    one(kmod([at], args=args(Access.READ)), "atomic", "readwrite")
    one(kmod([red], args=args(Access.WRITE)), "atomic", "declared write")


def test_abi_rules():
    one(kmod([], args=[Arg("x", B, ScalarType.U8), Arg("x", B, ScalarType.U8)]), "duplicate argument name")
    one(kmod([], args=[Arg("1x", B, ScalarType.U8)]), "not an identifier")
    one(kmod([], args=[Arg("x", B, ScalarType.B32)]), "buffer element type b32")
    one(kmod([], args=[Arg("x", S, ScalarType.U8)]), "scalar type u8")
    one(kmod([], args=[Arg("x", S, ScalarType.U32, Access.WRITE)]), "read-only")
    ok(kmod([], args=[Arg("x", B, t) for t in []] + [Arg("s_1", S, ScalarType.BF16)]))


def test_names_unique_and_identifiers():
    one(Module([Kernel("k"), Kernel("k")]), "kernel name 'k' is used twice")
    one(Module([Kernel("k-1")]), "kernel name 'k-1' is not an identifier")
    one(Module([Kernel("k")], [Function("f"), Function("f")]), "function name 'f' is used twice")
    one(Module([Kernel("k")], [Function("k")]), "both a kernel and a function")
    ok(Module([Kernel("k"), Kernel("k2")], [Function("f")]))


# ----------------------------------------------------------------------------- memory

def test_local_memory():
    ld = I("ld.local.b32", 0, LocalAddr(1, 60))
    ok(kmod([ld], local=64))
    one(kmod([ld], local=0), "declares 0 bytes")
    one(kmod([ld], local=62), "offset 60", "always beyond", "62 bytes")
    one(kmod([I("ld.local.b32", 0, LocalAddr(1, 64))], local=64), "offset 64")
    ok(kmod([I("ld.local.b32", 0, LocalAddr(1, -4))], local=64))  # register may cover a negative offset
    one(kmod([I("atom.local.add.u32", 0, LocalAddr(1, 0), 2)], local=0), "declares 0 bytes")


def test_immediate_offset_alignment():
    buf = [Arg("x", B, ScalarType.U32, Access.READWRITE)]
    ok(kmod([I("ld.device.b64", 0, DeviceAddr(0, 2, 24))], args=buf))
    one(kmod([I("ld.device.b64", 0, DeviceAddr(0, 2, 20))], args=buf), "offset 20", "width 8")
    one(kmod([I("st.local.b16", LocalAddr(0, 3), 1)], local=16), "offset 3", "width 2")
    ok(kmod([I("st.local.b8", LocalAddr(0, 3), 1)], local=16))
    one(kmod([I("ld.device.b128", 0, DeviceAddr(0, 4, 8))], args=buf), "width 16")


def test_mma_needs_a_tile_of_local_memory():
    caps = Capability.MMA | Capability.WAVE_OPS | Capability.F16
    mma = I("mma.m16n16k16.f32.f16", 0, 1, 2, 3)
    ok(kmod([mma], local=4096, caps=caps))
    one(kmod([mma], local=512, caps=caps), "mma needs at least 1024 bytes")


# ----------------------------------------------------------------------------- capabilities, calls

def test_capabilities_cover_kernel_and_called_functions():
    ok(kmod([I("add.f64", 0, 2, 4)], caps=Capability.F64))
    one(kmod([I("add.f64", 0, 2, 4)]), "capabilities not declared: f64")
    f = Function("f", [I("shfl.xor.b32", 0, 1, 2)])
    one(kmod([I("call", 0)], functions=[f]), "wave_ops")
    ok(kmod([I("call", 0)], functions=[f], caps=Capability.WAVE_OPS))


def test_call_targets_exist():
    one(kmod([I("call", 3)], functions=[Function("f")]), "function index 3 does not exist")


def test_no_recursion():
    f = Function("f", [I("call", 1)])
    g = Function("g", [I("call", 0)])
    msg = one(kmod([I("call", 0)], functions=[f, g]), "recursion")
    assert "'f' -> 'g' -> 'f'" in msg
    one(kmod([], functions=[Function("self", [I("call", 0)])]), "'self' -> 'self'")


def test_call_depth_limit():
    def chain(n):
        fs = [Function(f"f{i}", [I("call", i + 1)] if i + 1 < n else [I("nop")]) for i in range(n)]
        return kmod([I("call", 0)], functions=fs)
    ok(chain(LIMITS.max_call_depth))
    one(chain(LIMITS.max_call_depth + 1), f"call depth {LIMITS.max_call_depth + 1}")
    # thousands of functions: no recursion error in the verifier itself
    assert any("call depth" in p for p in check(chain(3000)))


# ----------------------------------------------------------------------------- workgroup, flags

def test_workgroup_fields():
    ok(kmod([], workgroup_size=(16, 4, 2), max_workgroup_size=128))
    one(kmod([], workgroup_size=(16, 4, 4), max_workgroup_size=128), "256 threads", "128")
    one(kmod([], workgroup_size=(0, 1, 1)), "workgroup size (0, 1, 1)")
    one(kmod([], max_workgroup_size=0), "max workgroup size 0")
    ok(kmod([], max_workgroup_size=1024))


def test_undefined_capability_and_flag_bits():
    one(kmod([], caps=Capability(1 << 12)), "undefined bits")
    one(kmod([], flags=4), "flags 4")
    ok(kmod([], flags=1))


def test_check_never_raises_on_garbage():
    m = Module([Kernel("k", code=["nonsense"])])  # type: ignore[list-item]
    assert "not an Instruction" in check(m)[0]


def test_module_version():
    m = kmod([])
    m.version = (1, 2)
    one(m, "format version 1.2 is not supported", "1.0, 1.1")
    m.version = (1, 1)
    ok(m)
    # barrier.wave is WAVE 1.1 (spec §1.4): a module declaring 1.0 may not use it
    w = kmod([I("barrier.wave")])
    w.kernels[0].capabilities = Capability.WAVE_OPS
    one(w, "declares WAVE 1.0 but uses barrier.wave")
    w.version = (1, 1)
    ok(w)


def test_source_locations_must_be_storable():
    one(kmod([I("nop", loc=SourceLoc("a\0b.py", 1, 1))]), "source location", "NUL")
    one(kmod([I("nop", loc=SourceLoc("a.py", 1 << 32, 1))]), "source location")
    ok(kmod([I("nop", loc=SourceLoc("ä.py", 0, 0))]))


@pytest.mark.parametrize("t, cap", [("f16", Capability.F16), ("bf16", Capability.BF16)])
def test_16_bit_float_immediate_must_have_a_zero_high_half(t, cap):
    ok(kmod([I(f"movi.{t}", 1, 0x3C00)], caps=cap))
    one(kmod([I(f"movi.{t}", 1, 0x13C00)], caps=cap), f"movi.{t}", "0x00013c00", "bits 16-31")


@pytest.mark.parametrize("order", list(MemoryOrder))
def test_non_returning_device_atomic_order(order):
    buf = [Arg("y", B, ScalarType.U32, Access.READWRITE)]
    m = kmod([I("red.device.add.u32", DeviceAddr(0, 1, 0), 2, Scope.DEVICE, order)], args=buf)
    if order in (MemoryOrder.RELAXED, MemoryOrder.RELEASE):
        ok(m)
    else:
        one(m, "red.device.add.u32", order.spelling, ".relaxed or .release")
    # the returning form may acquire
    ok(kmod([I("atom.device.add.u32", 3, DeviceAddr(0, 1, 0), 2, Scope.DEVICE, order)], args=buf))
