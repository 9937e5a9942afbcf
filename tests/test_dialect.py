"""The reference toolchain dialect: detection, the flat-memory ABI, the alias mapping and
the bundled reference-dialect example programs."""

from __future__ import annotations

from fractions import Fraction
from importlib.resources import files

import pytest

from anywave.asm import AsmError, assemble, dialect, disassemble
from anywave.binary.module import KERNEL_FLAG_FLAT, DeviceAddr, Instruction, LocalAddr, Pred
from anywave.isa.table import BY_MNEMONIC
from anywave.isa.types import Access, ArgKind, Capability, MemoryOrder, ScalarType, Scope, SpecialRegister

I = Instruction.make  # noqa: E741


def _example(name: str) -> str:
    return files("anywave").joinpath("examples", name).read_text()


def _body(kernel_code: list[Instruction], registers: int) -> list[Instruction]:
    prologue = kernel_code[:registers]
    assert prologue == [I("ldarg.b32", r, r + 1) for r in range(registers)]
    return kernel_code[registers:]


def test_vector_add_example_abi_and_code() -> None:
    m = assemble(_example("ref_vector_add.wave"), "ref_vector_add.wave")
    (kern,) = m.kernels
    assert kern.flags & KERNEL_FLAG_FLAT
    assert kern.registers == 8 and kern.workgroup_size == (64, 1, 1)
    assert [(a.name, a.kind, a.type, a.access) for a in kern.args] == (
        [("memory", ArgKind.BUFFER, ScalarType.U8, Access.READWRITE)]
        + [(f"init_r{i}", ArgKind.SCALAR, ScalarType.U32, Access.READ) for i in range(8)])
    mem = lambda r: DeviceAddr(0, r, 0)  # noqa: E731
    assert _body(kern.code, 8) == [
        I("mov.sr", 0, SpecialRegister.THREAD_ID_X),
        I("movi.b32", 1, 2), I("shl.b32", 2, 0, 1), I("ld.device.b32", 3, mem(2)),
        I("movi.b32", 4, 256), I("add.i32", 5, 2, 4), I("ld.device.b32", 4, mem(5)),
        I("add.i32", 5, 3, 4), I("movi.b32", 6, 512), I("add.i32", 7, 2, 6),
        I("st.device.b32", mem(7), 5), I("halt")]
    assert kern.capabilities == Capability.NONE


def test_wave_sum_example() -> None:
    (kern,) = assemble(_example("ref_wave_sum.wave")).kernels
    body = _body(kern.code, 8)
    assert I("wred.add.u32", 4, 3) in body
    assert I("setp.eq.i32", 0, 5, 6) in body
    assert I("red.device.add.u32", DeviceAddr(0, 7, 0), 4, Scope.DEVICE, MemoryOrder.RELAXED) in body
    assert kern.capabilities == Capability.WAVE_OPS


def test_label_function_example() -> None:
    m = assemble(_example("ref_clamp_loop.wave"))
    (kern,) = m.kernels
    assert [f.name for f in m.functions] == ["clamp_to_100"]
    body = _body(kern.code, 8)
    assert I("call", 0) in body and body[-1] == I("halt")
    assert m.functions[0].code == [I("movi.b32", 6, 100), I("setp.gt.u32", 2, 4, 6),
                                   I("mov.b32", 4, 6, guard=Pred(2)), I("ret")]
    assert [i.mnemonic for i in body].count("loop") == 1


@pytest.mark.parametrize("name", ["ref_vector_add.wave", "ref_wave_sum.wave", "ref_clamp_loop.wave"])
def test_examples_reassemble_as_native(name: str) -> None:
    m = assemble(_example(name))
    text = disassemble(m)
    assert ".flags flat" in text and ".arg memory buffer u8 readwrite" in text
    assert assemble(text) == m


def _one(line: str, registers: int = 8) -> Instruction:
    m = assemble(f".kernel k\n.registers {registers}\n.dialect reference\n    {line}\n.end\n")
    return m.kernels[0].code[registers]


@pytest.mark.parametrize("line, expected", [
    ("mov r1, r2", I("mov.b32", 1, 2)),
    ("mov r1, sr_lane_id", I("mov.sr", 1, SpecialRegister.LANE_ID)),
    ("mov_sr r0, sr_wave_width", I("mov.sr", 0, SpecialRegister.WAVE_WIDTH)),
    ("mov_imm r1, 0x40a00000", I("movi.b32", 1, 0x40A00000)),
    ("mov_imm r1, 5.0", I("movi.f32", 1, 0x40A00000)),
    ("imul_hi r1, r2, r3", I("mulhi.i32", 1, 2, 3)),
    ("imad r1, r2, r3, r4", I("mad.i32", 1, 2, 3, 4)),
    ("imod r1, r2, r3", I("rem.i32", 1, 2, 3)),
    ("fround r1, r2", I("rint.f32", 1, 2)),
    ("frsqrt r1, r2", I("rsqrt.approx.f32", 1, 2)),
    ("fexp2 r1, r2", I("ex2.approx.f32", 1, 2)),
    ("sar r1, r2, r3", I("shr.i32", 1, 2, 3)),
    ("shr r1, r2, r3", I("shr.u32", 1, 2, 3)),
    ("icmp_lt p0, r1, r2", I("setp.lt.i32", 0, 1, 2)),
    ("icmp.lt p0, r1, r2", I("setp.lt.i32", 0, 1, 2)),
    ("ucmp_ge p1, r1, r2", I("setp.ge.u32", 1, 1, 2)),
    ("fcmp_ne p2, r1, r2", I("setp.ne.f32", 2, 1, 2)),
    ("select r1, !p2, r3, r4", I("selp.b32", 1, 3, 4, Pred(2, True))),
    ("cvt_f32_i32 r1, r2", I("cvt.f32.i32", 1, 2)),
    ("device_load_u8 r1, r2", I("ld.device.u8", 1, DeviceAddr(0, 2, 0))),
    ("device_load.u32 r1, r2", I("ld.device.b32", 1, DeviceAddr(0, 2, 0))),
    ("device_load_u32.streaming r1, r2", I("ld.device.b32", 1, DeviceAddr(0, 2, 0))),
    ("device_load_u32 r1, r2, .uncached", I("ld.device.b32", 1, DeviceAddr(0, 2, 0))),
    ("device_load_u64 r4, r2", I("ld.device.b64", 4, DeviceAddr(0, 2, 0))),
    ("device_store_u16 r2, r5", I("st.device.b16", DeviceAddr(0, 2, 0), 5)),
    ("device_store_u128 r2, r4", I("st.device.b128", DeviceAddr(0, 2, 0), 4)),
    ("local_load_u32 r1, r2", I("ld.local.b32", 1, LocalAddr(2, 0))),
    ("local_store_u32 r2, r1", I("st.local.b32", LocalAddr(2, 0), 1)),
    ("atomic_add r1, r2, r3, .device", I("atom.device.add.u32", 1, DeviceAddr(0, 2, 0), 3, Scope.DEVICE,
                                          MemoryOrder.RELAXED)),
    ("atomic_max r1, r2, r3, workgroup", I("atom.device.max.u32", 1, DeviceAddr(0, 2, 0), 3,
                                            Scope.WORKGROUP, MemoryOrder.RELAXED)),
    ("atomic_or r2, r3", I("red.device.or.b32", DeviceAddr(0, 2, 0), 3, Scope.DEVICE, MemoryOrder.RELAXED)),
    ("atomic_cas r1, r2, r3, r4", I("atom.device.cas.b32", 1, DeviceAddr(0, 2, 0), 3, 4, Scope.DEVICE,
                                     MemoryOrder.RELAXED)),
    ("atomic_exchange r1, r2, r3", I("atom.device.exch.b32", 1, DeviceAddr(0, 2, 0), 3, Scope.DEVICE,
                                      MemoryOrder.RELAXED)),
    ("local_atomic_sub r1, r2, r3", I("atom.local.sub.u32", 1, LocalAddr(2, 0), 3)),
    ("wave_shuffle_xor r1, r2, r3", I("shfl.xor.b32", 1, 2, 3)),
    ("wave_ballot r2, p1", I("ballot.b64", 2, Pred(1))),
    ("wave_any p1, !p2", I("any.pred", 1, Pred(2, True))),
    ("wave_reduce_min r1, r2", I("wred.min.i32", 1, 2)),
    ("wave_prefix_sum r1, r2", I("wscan.excl.add.u32", 1, 2)),
    ("fence_acquire", I("fence", Scope.DEVICE, MemoryOrder.ACQUIRE)),
    ("fence_release .workgroup", I("fence", Scope.WORKGROUP, MemoryOrder.RELEASE)),
    ("wait", I("nop")),
    ("barrier", I("barrier")),
    ("@!p1 iadd r1, r2, r3", I("add.i32", 1, 2, 3, guard=Pred(1, True))),
    ("add.f32 r1, r2, r3", I("add.f32", 1, 2, 3)),  # native mnemonics work too
])
def test_alias(line: str, expected: Instruction) -> None:
    assert _one(line) == expected


def test_every_alias_targets_real_records() -> None:
    for name, alias in dialect.ALIASES.items():
        assert alias.native and all(n in BY_MNEMONIC for n in alias.native), name
        assert name not in BY_MNEMONIC  # an alias never shadows a native spelling


def test_detection_rule() -> None:
    native = ".kernel k\n.arg s scalar u32\n    halt\n.end\n"
    assert assemble(native).kernels[0].flags == 0
    shared_only = ".kernel k\n    barrier\n    halt\n.end\n"  # spellings both dialects share
    assert assemble(shared_only).kernels[0].flags == 0
    ref = ".kernel k\n.registers 2\n    iadd r0, r0, r1\n    halt\n.end\n"
    m = assemble(ref)
    assert m.kernels[0].flags == KERNEL_FLAG_FLAT and len(m.kernels[0].args) == 3
    explicit = ".kernel k\n.registers 1\n.dialect reference\n    halt\n.end\n"
    assert assemble(explicit).kernels[0].flags == KERNEL_FLAG_FLAT
    # with .arg the kernel is native, so a reference mnemonic is unknown
    with pytest.raises(AsmError, match="unknown mnemonic 'iadd'"):
        assemble(".kernel k\n.arg s scalar u32\n    iadd r0, r0, r1\n.end\n")


def test_registers_inferred_when_absent() -> None:
    (kern,) = assemble(".kernel k\n    iadd r5, r0, r1\n    halt\n.end\n").kernels
    assert kern.registers == 6 and len(kern.args) == 7
    assert kern.code[:6] == [I("ldarg.b32", r, r + 1) for r in range(6)]


def test_reference_diagnostics() -> None:
    with pytest.raises(AsmError) as info:
        assemble(".kernel k\n.registers 4\n    iadd r1, r2\n.end\n", "r.wave")
    assert "wrong operand count: add.i32" in info.value.message and info.value.loc.col == 5
    with pytest.raises(AsmError, match=r"unknown mnemonic 'iaddd' \(did you mean 'iadd'"):
        assemble(".kernel k\n.registers 4\n    iadd r1, r2, r3\n    iaddd r1, r2, r3\n.end\n")
    with pytest.raises(AsmError, match="no form of 'mov' accepts these operands"):
        assemble(".kernel k\n.registers 4\n.dialect reference\n    mov r1, bogus\n.end\n")
    with pytest.raises(AsmError, match="call to undefined function 'nowhere'"):
        assemble(".kernel k\n.registers 4\n    call nowhere\n    iadd r1, r1, r1\n.end\n")
    with pytest.raises(AsmError, match=".arg is not allowed"):
        assemble(".kernel k\n.arg s scalar u32\n.dialect reference\n.end\n")
    with pytest.raises(AsmError, match="labels are only allowed"):
        assemble(".func f\nhere:\n    ret\n.end\n")


# --- issue 11 item 8: bf16 (and f16) arithmetic mnemonics of the reference toolchain

_VECTOR_ADD_16 = """
; c[i] = a[i] OP b[i] on 16-bit floats; a at byte offset r1, b at r2, c at r3, n in r13
.kernel vadd16
.registers 16
    mov_sr r0, sr_thread_id_x
    ucmp_lt p0, r0, r13
    if p0
    mov_imm r5, 2
    imul r6, r0, r5
    iadd r7, r1, r6
    device_load_u16 r8, r7
    iadd r9, r2, r6
    device_load_u16 r10, r9
    {op} r11, r8, r10
    iadd r12, r3, r6
    device_store_u16 r12, r11
    endif
    halt
.end
"""


@pytest.mark.parametrize("op,dtype", [("badd", "bf16"), ("bsub", "bf16"), ("bmul", "bf16"), ("hadd", "f16")])
@pytest.mark.parametrize("W", [8, 16, 32, 64])
def test_reference_16bit_float_arithmetic_runs_like_numpy(op: str, dtype: str, W: int) -> None:
    """A vector_add_bf16-style reference kernel assembles (badd was 'unknown mnemonic') and
    matches NumPy/ml_dtypes: each result is the exact operation (Fraction) rounded once to
    the 16-bit type, ties to even."""
    import ml_dtypes
    import numpy as np

    from anywave.emu.machine import emulate_flat

    ft = ml_dtypes.bfloat16 if dtype == "bf16" else np.float16
    rng = np.random.default_rng(11)
    n = 40
    a = (rng.standard_normal(n) * 100).astype(ft)
    b = (rng.standard_normal(n) * 100).astype(ft)
    want = np.array([_round16(_exact(op, float(x), float(y)), ft) for x, y in zip(a, b, strict=True)], np.uint16)
    mem = np.zeros(3 * 2 * n, np.uint8)
    mem[: 2 * n] = a.view(np.uint8)
    mem[2 * n: 4 * n] = b.view(np.uint8)
    m = assemble(_VECTOR_ADD_16.format(op=op), "vadd16.wave")
    emulate_flat(m, "vadd16", mem, {1: 0, 2: 2 * n, 3: 4 * n, 13: n}, grid=1, workgroup=64, wave_width=W)
    got = mem[4 * n:].view(ft)
    assert got.view(np.uint16).tolist() == want.tolist()


def test_bf16_aliases_map_to_bf16_records() -> None:
    for ref, native in (("badd", "add.bf16"), ("bsub", "sub.bf16"), ("bmul", "mul.bf16"), ("bma", "fma.bf16"),
                        ("badd2", "add.bf16x2"), ("bmul2", "mul.bf16x2"), ("bma2", "fma.bf16x2")):
        assert dialect.ALIASES[ref].native == (native,)


def _exact(op: str, x: float, y: float) -> Fraction:
    fx, fy = Fraction(x), Fraction(y)
    return {"badd": fx + fy, "bsub": fx - fy, "bmul": fx * fy, "hadd": fx + fy}[op]


def _round16(v: Fraction, ft) -> int:
    """Bits of the 16-bit float nearest to v (ties to even), from NumPy's neighbours."""
    import numpy as np

    b = int(np.array([float(v)], np.float64).astype(ft).view(np.uint16)[0])
    cands = []
    for c in (b - 1, b, b + 1):
        f = np.array([c & 0xFFFF], np.uint16).view(ft)[0].astype(np.float64)
        if np.isfinite(f):
            cands.append((abs(Fraction(float(f)) - v), c & 1, c & 0xFFFF))
    return min(cands)[2]
