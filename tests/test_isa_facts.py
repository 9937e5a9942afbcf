"""The facts the instruction table carries for its consumers (issue 13, item 1): semantic keys,
region roles, operand roles, purity, combine operations and identities, and the index from
(op, variant, type) to record. Expectations are written out by hand from docs/spec.md or
derived from the operand kinds / flags independently of the code that computes the fields."""

from __future__ import annotations

import math
import struct

import pytest

from anywave.isa import BY_MNEMONIC, INSTRUCTIONS, InstructionLookupError, lookup, mnemonic, semantics
from anywave.isa.table import Category, Flag, Operand, Role
from anywave.isa.types import ScalarType as T

M = BY_MNEMONIC


# ----------------------------------------------------------------------------- sem

def test_overloaded_ops_get_one_semantic_key_per_meaning():
    pairs = [("and.b32", "and.pred"), ("or.b32", "or.pred"), ("xor.b32", "xor.pred"), ("mov.b32", "mov.pred"),
             ("min.i32", "min.f32"), ("max.u32", "max.f32"), ("add.i32", "add.f32"), ("neg.i64", "neg.f64"),
             ("abs.i32", "abs.f16"), ("div.u32", "div.f32")]
    for a, b in pairs:
        assert M[a].op == M[b].op
        assert M[a].sem != M[b].sem, (a, b)
    assert M["and.b32"].sem == "bit.and" and M["and.pred"].sem == "pred.and"
    assert M["min.i32"].sem == "int.min" and M["min.f32"].sem == "float.min"
    assert M["mov.b32"].sem == "move.mov" and M["mov.pred"].sem == "pred.mov"


def test_records_of_one_semantic_key_share_category_and_op():
    by: dict[str, set] = {}
    for d in INSTRUCTIONS:
        by.setdefault(d.sem, set()).add((d.op, d.category if d.category not in (
            Category.LOCAL_MEMORY, Category.DEVICE_MEMORY) else "memory", d.type is T.PRED))
    bad = {s: v for s, v in by.items() if len(v) != 1}
    assert not bad


def test_semantic_keys_are_domain_dot_op_and_never_mnemonics():
    for d in INSTRUCTIONS:
        domain, op = d.sem.split(".")
        assert op == d.op and domain.isalpha(), d.mnemonic
        assert d.sem not in BY_MNEMONIC


# ----------------------------------------------------------------------------- role

def test_region_roles():
    control = [d for d in INSTRUCTIONS if d.category is Category.CONTROL and d.mnemonic != "nop"]
    assert {d.mnemonic for d in control} == {"if", "else", "endif", "loop", "endloop", "break", "continue",
                                              "call", "ret", "halt"}
    for d in INSTRUCTIONS:
        if d in control:
            assert d.role is Role(d.mnemonic) and d.role == d.mnemonic
        else:
            assert d.role is None, d.mnemonic
    assert [r for r in Role if r.opens] == [Role.IF, Role.LOOP]
    assert [r for r in Role if r.closes] == [Role.ENDIF, Role.ENDLOOP]
    assert (Role.IF.closer, Role.ELSE.closer, Role.LOOP.closer) == (Role.ENDIF, Role.ENDIF, Role.ENDLOOP)
    assert (Role.ELSE.opener, Role.ENDIF.opener, Role.ENDLOOP.opener) == (Role.IF, Role.IF, Role.LOOP)
    assert {r for r in Role if r.exits} == {Role.BREAK, Role.CONTINUE, Role.RET, Role.HALT}
    # every structured or terminating record has a role
    for d in INSTRUCTIONS:
        if d.flags & (Flag.STRUCTURED | Flag.TERMINATOR):
            assert d.role is not None, d.mnemonic


# ----------------------------------------------------------------------------- operands

_DEST = {Operand.RD, Operand.RD64, Operand.RD128, Operand.PD, Operand.FD}
_SRC = {Operand.RS, Operand.RS64, Operand.RS128, Operand.PS, Operand.FS, Operand.DADDR, Operand.DADDR64,
        Operand.LADDR}


def test_dests_srcs_immediates_partition_the_operands():
    for d in INSTRUCTIONS:
        n = len(d.operands)
        assert sorted(d.dests + d.srcs + d.immediates) == list(range(n)), d.mnemonic
        assert all(d.operands[i] in _DEST for i in d.dests)
        assert all(d.operands[i] in _SRC for i in d.srcs)
        assert all(d.operands[i] not in _DEST | _SRC for i in d.immediates)


@pytest.mark.parametrize("mn, dests, srcs, imms", [
    ("add.i32", (0,), (1, 2), ()),
    ("mad.i32", (0,), (1, 2, 3), ()),
    ("selp.b64", (0,), (1, 2, 3), ()),
    ("setp.lt.f32", (0,), (1, 2), ()),
    ("movi.f64", (0,), (), (1,)),
    ("mov.sr", (0,), (), (1,)),
    ("ldarg.b32", (0,), (), (1,)),
    ("ld.device.b32.o64", (0,), (1,), ()),
    ("st.local.b128", (), (0, 1), ()),
    ("atom.device.cas.b32", (0,), (1, 2, 3), (4, 5)),
    ("red.local.add.u32", (), (0, 1), ()),
    ("fence", (), (), (0, 1)),
    ("if", (), (0,), ()),
    ("call", (), (), (0,)),
    ("ballot.b64", (0,), (1,), ()),
    ("mma.store.local.m4n4k4.f32", (), (0, 1, 2), ()),
    ("mma.mma.m16n16k16.f32.bf16", (0,), (1, 2, 3), ()),
])
def test_operand_roles_by_hand(mn, dests, srcs, imms):
    d = M[mn]
    assert (d.dests, d.srcs, d.immediates) == (dests, srcs, imms)


def test_addr64():
    assert {d.mnemonic for d in INSTRUCTIONS if d.addr64} == {d.mnemonic for d in INSTRUCTIONS
                                                              if d.mnemonic.endswith(".o64")}


# ----------------------------------------------------------------------------- purity

@pytest.mark.parametrize("mn", ["add.i32", "div.i32", "rem.u64", "fma.f32", "sqrt.f64", "ex2.approx.f32",
                                "and.b64", "shr.i32", "setp.unord.f16", "selp.b32", "and.pred", "setp.true",
                                "cvt.f32.i64", "cvt.f16x2.f32", "mov.b64", "movi.b32", "mov.sr", "ldarg.b64",
                                "mma.mma.m4n4k4.f32.f32", "nop"])
def test_pure_records(mn):
    assert M[mn].pure


@pytest.mark.parametrize("mn", ["ld.local.b32", "st.device.b8", "atom.local.add.u32", "red.device.or.b32",
                                "shfl.idx.b32", "ballot.b64", "wred.add.f32", "wscan.excl.add.u32", "barrier",
                                "fence", "if", "endloop", "break", "call", "ret", "halt", "mma.m16n16k16.f32.f16",
                                "mma.load.a.local.m4n4k4.f32", "mma.fill.m16n16k16.f32"])
def test_impure_records(mn):
    assert not M[mn].pure


def test_ir_purity_is_unchanged():
    """The IR's ``Op.is_pure`` (now from the table) agrees, record by record, with the rule
    the compiler used before the table carried purity."""
    from anywave.compiler.ir import Op

    impure = (Flag.LOAD | Flag.STORE | Flag.ATOMIC | Flag.WAVE_COLLECTIVE | Flag.BARRIER | Flag.STRUCTURED
              | Flag.TERMINATOR)
    for d in INSTRUCTIONS:
        old = (not (d.flags & impure) and d.op not in ("fence", "call", "nop") and d.category is not Category.MMA
               and any(k.is_dest for k in d.operands))
        assert Op(d, [None] * len(d.operands)).is_pure == old, d.mnemonic


# ----------------------------------------------------------------------------- combine / identity

def test_combine_operations():
    for d in INSTRUCTIONS:
        if d.op == "wred":
            assert d.combine == d.mnemonic.split(".")[1]
        elif d.op == "wscan":
            assert d.combine == "add"
        elif d.op in ("atom", "red"):
            assert d.combine == d.mnemonic.split(".")[2]
        else:
            assert d.combine is None, d.mnemonic


def _f(bits: int, t: T) -> float:
    if t is T.F32:
        return struct.unpack("<f", struct.pack("<I", bits))[0]
    raise AssertionError(t)


def _bits(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


_INT_SAMPLES = [0, 1, 2, 7, 0x7FFFFFFF, 0x80000000, 0x80000001, 0xFFFFFFFE, 0xFFFFFFFF, 0x12345678]
_F32_SAMPLES = [0.0, -0.0, 1.5, -2.25, math.inf, -math.inf, 1e-45, -1e-45, 3.4028234663852886e38]


def _int_combine(op: str, t: T, a: int, b: int) -> int:
    def s(x: int) -> int:
        return x - (1 << 32) if t.is_signed and x >= 1 << 31 else x
    if op in ("add", "sub"):
        return ((a + b) if op == "add" else (a - b)) & 0xFFFFFFFF
    if op in ("min", "max"):
        r = (min if op == "min" else max)(s(a), s(b))
        return r & 0xFFFFFFFF
    return {"and": a & b, "or": a | b, "xor": a ^ b}[op]


@pytest.mark.parametrize("d", [d for d in INSTRUCTIONS if d.combine not in (None, "exch", "cas")],
                         ids=lambda d: d.mnemonic)
def test_identity_is_the_identity_of_the_combine(d):
    e = semantics.identity(d)
    assert e == semantics.identity(d.combine, d.type)
    if d.type is T.F32:
        if d.combine == "add":
            for x in _F32_SAMPLES:
                assert _bits(_f(e, T.F32) + x) == _bits(x), x  # bit-exact, -0 and +0 included
        else:  # minimumNumber / maximumNumber ignore a NaN operand (spec §8.2)
            assert math.isnan(_f(e, T.F32)) and e == 0x7FC00000
        return
    for x in _INT_SAMPLES:
        if d.combine == "sub":
            assert _int_combine("sub", d.type, x, e) == x
        else:
            assert _int_combine(d.combine, d.type, e, x) == x, hex(x)
            assert _int_combine(d.combine, d.type, x, e) == x, hex(x)


def test_identity_other_types_and_errors():
    assert semantics.identity("add", T.F64) == 0x8000000000000000
    assert semantics.identity("min", T.F16) == 0x7E00 and semantics.identity("max", T.BF16) == 0x7FC0
    assert semantics.identity("min", T.I64) == (1 << 63) - 1 and semantics.identity("max", T.I64) == 1 << 63
    assert semantics.identity("and", T.B64) == (1 << 64) - 1 and semantics.identity("max", T.U64) == 0
    for bad in (("exch", T.B32), ("cas", T.B32), ("frob", T.U32), ("add", T.PRED), ("and", T.F32),
                ("add", T.F16X2)):
        with pytest.raises(ValueError):
            semantics.identity(*bad)
    with pytest.raises(ValueError, match="not a reduction"):
        semantics.combine(M["add.i32"])


def test_canonical_nans_match_the_emulator():
    from anywave.emu import floats as fl

    assert semantics.CANONICAL_NAN == {T.F32: int(fl.F32_NAN), T.F64: int(fl.F64_NAN), T.F16: int(fl.F16_NAN),
                                       T.BF16: int(fl.BF16_NAN)}


def test_reduction_facts():
    r = semantics.reduction(M["wred.add.f32"])
    assert (r.combine, r.type, r.identity, r.order, r.exclusive_first) == ("add", T.F32, 0x80000000, "butterfly",
                                                                             None)
    assert semantics.reduction(M["wred.min.f32"]).order == "any"
    r = semantics.reduction(M["wscan.excl.add.f32"])
    assert (r.identity, r.order, r.exclusive_first) == (0x80000000, "kogge-stone", 0)
    assert semantics.reduction(M["wscan.incl.add.u32"]).exclusive_first is None
    r = semantics.reduction(M["atom.device.cas.b32"])
    assert (r.combine, r.identity, r.order) == ("cas", None, "sequential")
    assert semantics.reduction(M["add.i32"]) is None


# ----------------------------------------------------------------------------- index

@pytest.mark.parametrize("d", INSTRUCTIONS, ids=lambda d: d.mnemonic)
def test_lookup_finds_every_record(d):
    assert lookup(d.op, d.variant, d.type, src_type=d.src_type, addr64=d.addr64) is d
    assert lookup(d.sem, d.variant, d.type, src_type=d.src_type, addr64=d.addr64) is d
    assert lookup(d.mnemonic) is d  # the old lookup(mnemonic) call


def test_mnemonic_examples():
    assert mnemonic("add", type="u32") == "add.i32"  # sign-free: the i32 record serves u32
    assert mnemonic("add", type=T.I64) == "add.i64"
    assert mnemonic("and", type="i32") == "and.b32" and mnemonic("and", type="pred") == "and.pred"
    assert mnemonic("pred.and") == "and.pred"
    assert mnemonic("shr", type="u32") == "shr.u32" and mnemonic("shr", type="i64") == "shr.i64"
    assert mnemonic("min", type="u32") == "min.u32" and mnemonic("min", type="f32") == "min.f32"
    assert mnemonic("setp", "lt", "f16") == "setp.lt.f16"
    assert mnemonic("ld", "device", "b32") == "ld.device.b32"
    assert mnemonic("ld", "device", "b32", addr64=True) == "ld.device.b32.o64"
    assert mnemonic("atom", "local.add", "f32") == "atom.local.add.f32"
    assert mnemonic("atom", "device.add", "i32") == "atom.device.add.u32"  # wrapping: sign-free
    assert mnemonic("red", "local.and", "i32") == "red.local.and.b32"
    assert mnemonic("atom", "device.min", "i32") == "atom.device.min.i32"
    assert mnemonic("cvt", type="f32", src_type="i64") == "cvt.f32.i64"
    assert mnemonic("mma", type="f32", src_type="bf16") == "mma.m16n16k16.f32.bf16"
    assert mnemonic("wscan", "excl", "u32") == "wscan.excl.add.u32"
    assert mnemonic("movi", type="u32") == "movi.u32"  # exact type first


@pytest.mark.parametrize("args, kw, match", [
    (("abs",), {"type": "u32"}, "types of 'abs'"),  # abs is not sign-free: no u32 form
    (("shr",), {"type": "b32"}, "types of 'shr'"),  # logical vs arithmetic: no bit form
    (("atom", "device.max"), {"type": "b32"}, "types of 'atom'"),  # signed vs unsigned max
    (("setp",), {"type": "f32"}, "ambiguous: setp.eq.f32"),
    (("frob",), {}, "valid operations"),
    (("ld", "global", "b32"), {}, "exists as"),
    (("add",), {"type": "f99"}, "unknown type"),
])
def test_lookup_errors_name_what_is_valid(args, kw, match):
    with pytest.raises(InstructionLookupError, match=match):
        lookup(*args, **kw)
    with pytest.raises(KeyError):  # also a KeyError, as the old lookup raised
        lookup(*args, **kw)


def _old_frontend_mn(op: str, t: T) -> str | None:
    """The frontend's f-string rule (compiler/frontend.py ``mn()`` before issue 13)."""
    s = t.spelling
    b = 64 if t.bits == 64 else 32
    if t.is_float:
        c = f"{op}.{s}"
    elif op in ("add", "sub", "mul", "neg", "mad"):
        c = f"{op}.i{b}"
    elif op in ("and", "or", "xor", "not", "shl", "popc", "clz", "ctz", "brev"):
        c = f"{op}.b{b}"
    else:
        c = f"{op}.{s}"
    return c if c in BY_MNEMONIC else None


def test_mnemonic_agrees_with_the_frontends_rule():
    ops = sorted({d.op for d in INSTRUCTIONS})
    for t in (T.I32, T.U32, T.I64, T.U64, T.F16, T.BF16, T.F32, T.F64):
        for op in ops:
            old = _old_frontend_mn(op, t)
            if old is not None:
                assert mnemonic(op, type=t) == old, (op, t)
