"""backends.lowering: the rules PTX and the C family share (step lists, identities, integer
division edge cases, narrowing paths) and the control-flow walk both drive.

Expectations are written from the spec (docs/spec.md §7.4, §8.1, §8.8, §8.11) or computed
here with NumPy / Python integers, never by the module under test."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from anywave.asm import assemble
from anywave.backends import lowering
from anywave.backends.lowering import ControlWalk, Frame, Mask, arith, collectives
from anywave.isa.table import INSTRUCTIONS
from anywave.isa.types import ScalarType

T = ScalarType
BACKENDS = Path(lowering.__file__).resolve().parent.parent


@pytest.mark.parametrize("W", [8, 16, 32, 64])
def test_step_lists_are_the_spec_orders(W: int) -> None:
    # butterfly (spec 8.8): k = 1, 2, 4, ... while k < W; Kogge-Stone the same distances
    want = []
    k = 1
    while k < W:
        want.append(k)
        k *= 2
    assert list(collectives.butterfly_steps(W)) == want
    assert list(collectives.kogge_stone_steps(W)) == want
    # a butterfly over these distances reaches every lane from every lane exactly once
    lanes = np.arange(W)
    reach = [{int(i)} for i in lanes]
    for k in collectives.butterfly_steps(W):
        reach = [reach[i] | reach[i ^ k] for i in range(W)]
    assert all(r == set(range(W)) for r in reach)


_RNG = np.random.default_rng(13)


def _combine(op: str, t: ScalarType, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The spec's combine of two u32 bit patterns (written here, independently)."""
    if t is T.F32:
        fa, fb = a.view(np.float32), b.view(np.float32)
        if op == "add":
            return (fa + fb).view(np.uint32)
        pick = np.fmin if op == "min" else np.fmax  # NaN-ignoring, like minimumNumber
        return pick(fa, fb).view(np.uint32)
    if t is T.I32:
        sa, sb = a.view(np.int32), b.view(np.int32)
        return {"add": sa + sb, "min": np.minimum(sa, sb), "max": np.maximum(sa, sb)}[op].view(np.uint32)
    return {"add": a + b, "min": np.minimum(a, b), "max": np.maximum(a, b), "and": a & b, "or": a | b,
            "xor": a ^ b}[op]


_WRED = [d for d in INSTRUCTIONS if d.op == "wred"]


@pytest.mark.parametrize("rec", _WRED, ids=[d.mnemonic for d in _WRED])
def test_reduction_identities_are_identities(rec) -> None:  # noqa: ANN001
    op, t = rec.variant, rec.type
    x = _RNG.integers(0, 2**32, 4096, dtype=np.uint64).astype(np.uint32)
    if t is T.F32:  # ordinary finite values and signed zeros
        x = _RNG.standard_normal(4096).astype(np.float32).view(np.uint32)
        x[:2] = [0x00000000, 0x80000000]
    ident = np.full_like(x, collectives.identity(rec))
    got = _combine(op, t, ident, x)
    assert np.array_equal(got, x), (op, t)
    assert np.array_equal(_combine(op, t, x, ident), x), (op, t)


def test_scan_identity_and_exclusive_lane_zero() -> None:
    # add identity: -0.0 for f32 (-0 + x = x for every x, also x = +0), 0 for integers;
    # the exclusive scan's lane 0 is +0.0 / 0 (spec 8.8)
    x = np.array([0x00000000, 0x80000000, 0x3F800000, 0xBF800000], np.uint32)
    scans = [d for d in INSTRUCTIONS if d.op == "wscan"]
    assert len(scans) == 6
    for d in scans:
        if d.type is T.F32:
            assert np.array_equal(_combine("add", T.F32, np.full_like(x, collectives.identity(d)), x), x)
        else:
            assert collectives.identity(d) == 0
        assert collectives.exclusive_first(d) == (0 if d.variant == "excl" else None)


def _spec_div(op: str, a: int, b: int, bits: int, signed: bool) -> int:
    """Spec 8.1, written out: b = 0 -> div all ones, rem a; MIN / -1 -> MIN, MIN % -1 -> 0."""
    mask = (1 << bits) - 1
    if b == 0:
        return mask if op == "div" else a & mask
    if signed and a == -(1 << (bits - 1)) and b == -1:
        return (a & mask) if op == "div" else 0
    q = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)  # truncating, as C and PTX
    return (q if op == "div" else a - q * b) & mask


def _by_rule(rule: arith.DivRule, a: int, b: int) -> int:
    """What a backend computes from a DivRule: divide by the safe divisor, patch b = 0."""
    mask = (1 << rule.bits) - 1
    minv = -rule.min_value if rule.signed else None
    safe = 1 if b == 0 or (rule.signed and a == minv and b == -1) else b
    q = abs(a) // abs(safe) * (1 if (a < 0) == (safe < 0) else -1)
    res = q if rule.op == "div" else a - q * safe
    if b == 0:
        res = mask if rule.zero_result == "all_ones" else a
    return res & mask


@pytest.mark.parametrize("t", [T.I32, T.U32, T.I64, T.U64])
@pytest.mark.parametrize("op", ["div", "rem"])
def test_div_rule_gives_the_spec_answers(op: str, t: ScalarType) -> None:
    bits, signed = t.bits, t.is_signed
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    edge = [lo, lo + 1, -1, 0, 1, 2, 7, hi - 1, hi] if signed else [0, 1, 2, 7, hi - 1, hi]
    vals = [v for v in edge if lo <= v <= hi] + [lo + int(v) % (hi - lo + 1) for v in _RNG.integers(0, 2**62, 40)]
    rule = arith.div_rule(op, t)
    for a in vals:
        for b in vals:
            assert _by_rule(rule, a, b) == _spec_div(op, a, b, bits, signed), (op, t, a, b)
    with pytest.raises(ValueError, match="div_rule"):
        arith.div_rule("mul", t)


_PRECISION = {T.F64: 53, T.F32: 24, T.F16: 11, T.BF16: 8}


@pytest.mark.parametrize("src", [T.I32, T.U32, T.I64, T.U64, T.F64, T.F32])
@pytest.mark.parametrize("dst", [T.F16, T.BF16])
def test_narrowing_paths_round_once(src: ScalarType, dst: ScalarType) -> None:
    steps = arith.narrowing_steps(src, dst)
    if src is T.F32:
        assert steps == ()  # one rounding
        return
    assert steps[-1] == arith.Step("rne", dst)
    # round-to-odd then one rounding is exact when each odd format has >= p + 2 bits for the
    # next format's precision p (Boldo & Melquiond 2008); an exact step must be lossless
    for i, st in enumerate(steps[:-1]):
        nxt = steps[i + 1].to
        assert st.mode in ("odd", "exact")
        assert _PRECISION[st.to] >= _PRECISION[nxt] + 2
        if st.mode == "exact":
            assert src.bits <= _PRECISION[st.to]  # a 32-bit integer fits f64 exactly
    if not src.is_float and src.bits == 64:
        assert steps[0] == arith.Step("odd", T.F64)  # 64 > 53 bits: not exact
    assert arith.needs_f64(src, dst)
    assert not arith.needs_f64(T.F32, dst) and not arith.needs_f64(T.I32, T.F32)


class _Record:
    """A Spelling that records what the walk asks for (mask updates as text)."""

    def __init__(self) -> None:
        self.out: list[str] = []
        self.n = 0

    def _m(self, m: Mask) -> str:
        s = f"p{m.pred.index}" if m.kind == "pred" else m.kind + (str(m.depth) if m.depth >= 0 else "")
        return ("!" if m.neg else "") + s

    def body_begin(self, code) -> None:  # noqa: ANN001
        self.out.append("begin")

    def body_end(self, code) -> None:  # noqa: ANN001
        self.out.append("end")

    def at(self, code, i: int) -> None:  # noqa: ANN001
        pass

    def instruction(self, ins) -> None:  # noqa: ANN001
        self.out.append(ins.defn.op)

    def frame_tag(self, kind: str) -> str:
        self.n += 1
        return f"{kind}{self.n}"

    def mask(self, op: str, dst: Mask, a: Mask, b: Mask | None = None) -> None:
        self.out.append(f"{self._m(dst)}={self._m(a)}" + ("" if b is None else f"{op}{self._m(b)}"))

    def condition(self, cond) -> Mask:  # noqa: ANN001
        return lowering.of_pred(cond)

    def enter(self, f: Frame, part: str) -> None:
        self.out.append(f"enter {f.tag} {part}")

    def leave(self, f: Frame, part: str) -> None:
        self.out.append(f"leave {f.tag} {part}")

    def loop_open(self, f: Frame) -> None:
        self.out.append(f"loop {f.tag}")

    def loop_close(self, f: Frame) -> None:
        self.out.append(f"repeat {f.tag}")

    def __getattr__(self, name: str):  # noqa: ANN204 - per-thread hooks
        if name.startswith("thread_"):
            return lambda *a: self.out.append(name[7:] + " " + " ".join(getattr(x, "tag", str(x)) for x in a))
        raise AttributeError(name)


_SRC = """
.func f
    ret p1
    nop
.end
.kernel k
.arg out buffer u32 readwrite
.registers 4
    loop
      if p0
        break p2
      else
        call f
      endif
      continue
    endloop
    halt
.end
"""


def test_mask_stack_updates_follow_spec_7_4() -> None:
    m = assemble(_SRC)
    rec = _Record()
    walk = ControlWalk(m, rec, mask_stack=True)
    walk.run(m.kernels[0].code)
    want = [
        "begin",
        "fo0=A", "fc0=false", "loop loop1",  # loop: remember A, no continue yet
        "fo1=A", "fp1=Aand!p0", "A=Aandp0", "enter if2 then",  # if p0
        "x=Aandp2", "fo1=fo1and!x", "fp1=fp1and!x", "A=Aand!x",  # break p2 leaves the if frame
        "leave if2 then", "A=fp1", "fp1=false", "enter if2 else",  # else
        "fo2=A", "enter call3 call", "begin",  # call f
        "x=Aandp1", "A=Aand!x",  # ret p1: leaves frames deeper than the call (none)
        "nop", "end", "leave call3 call", "A=fo2",
        "leave if2 else", "A=fo1",  # endif
        "x=A", "A=Aand!x", "fc0=fc0orx",  # continue
        "A=Aorfc0", "fc0=false", "repeat loop1", "A=fo0",  # endloop
        "x=A", "A=Aand!x",  # halt at the top: every frame (none open)
        "end",
    ]
    assert rec.out == want
    assert walk.max_depth == 3


def test_per_thread_walk_inlines_and_resolves_targets() -> None:
    m = assemble(_SRC)
    rec = _Record()
    ControlWalk(m, rec, mask_stack=False).run(m.kernels[0].code)
    assert rec.out[:4] == ["begin", "loop loop1", f"if if2 {m.kernels[0].code[1].operands[0]}", "jump break loop1 "
                           + str(m.kernels[0].code[2].guard)]
    assert "call call3" in rec.out and "endcall call3" in rec.out
    i = rec.out.index("call call3")
    assert rec.out[i + 1] == "begin" and rec.out[i + 2].startswith("ret call3")  # ret -> the call's end
    assert rec.out[-2].startswith("ret None")  # halt ends the thread


def test_no_backend_keeps_its_own_region_stack() -> None:
    # issue 13: only the shared walk (lowering.control, on binary.structure) knows the region
    # markers; a backend that matched endif/endloop itself would spell their names
    owned = ["ptx.py", "ptx_alu.py", "ptx_block.py", "ptx_memory.py", "ptx_wave.py", "ptx_mma.py", "cfamily.py",
             "cfamily_ops.py", "opencl.py", "sycl.py", "hip.py", "metal.py", "bounds.py", "spirv.py",
             "spirv_control.py", "spirv_ops.py", "spirv_float.py", "spirv_mma.py", "spirv_status.py"]
    for name in owned:
        text = (BACKENDS / name).read_text()
        code = re.sub(r'"""[\s\S]*?"""|#.*', "", text)
        for marker in ("endif", "endloop"):
            hits = [ln for ln in code.splitlines() if re.search(rf'["\']{marker}["\']', ln)
                    and "None" not in ln]
            assert not hits, f"{name} matches {marker!r} itself: {hits}"


def test_backend_files_stay_small() -> None:
    for p in sorted(BACKENDS.glob("ptx*.py")) + sorted(BACKENDS.glob("cfamily*.py")) + sorted(
            (BACKENDS / "lowering").glob("*.py")):
        n = len(p.read_text().splitlines())
        assert n <= 1200, f"{p.name} has {n} lines (issue 13: split by subject above ~1,200)"


_ESCAPE_SRC = """
.func g
    loop
      loop
        ret p1
      endloop
      nop
    endloop
    ret
.end
.func h
    nop
.end
.kernel k
.arg out buffer u32 readwrite
.registers 4
    call g
    call h
    halt
.end
"""


class _RecordCalls(_Record):
    def thread_call(self, f: Frame) -> None:
        self.out.append(f"call {f.tag} structured={f.structured} flag={f.ret_in_loop}")


def test_goto_free_walk_leaves_a_call_through_its_one_trip_loop() -> None:
    # a structured target without goto (WGSL, Metal): ret in a loop of the callee sets the
    # call's flag and breaks; each loop of the callee it left is followed by "break if set"
    m = assemble(_ESCAPE_SRC)
    rec = _RecordCalls()
    ControlWalk(m, rec, mask_stack=False, goto_free=True).run(m.kernels[0].code)
    g = m.functions[0].code
    assert rec.out == [
        "begin",
        "call call1 structured=True flag=True", "begin",
        "loop loop2", "loop loop3", f"escape call1 {g[2].guard} True", "endloop loop3", "escape_loop call1",
        "nop", "endloop loop2", "escape_loop call1",
        "escape call1 None False",  # the last ret: no loop of g open, a plain break
        "end", "endcall call1",
        "call call4 structured=False flag=False", "begin", "nop", "end", "endcall call4",  # no ret: no loop
        "ret None None",  # halt ends the thread: the language's return
        "end",
    ]
    # the goto form is unchanged: ret jumps to the call's end
    rec = _RecordCalls()
    ControlWalk(m, rec, mask_stack=False).run(m.kernels[0].code)
    assert f"ret call1 {g[2].guard}" in rec.out and not any(s.startswith("escape") for s in rec.out)


def test_metal_text_has_no_goto() -> None:
    # MSL leaves goto out of its C++ base: the Metal dialect takes the goto-free walk
    from anywave.backends import metal
    from anywave.conformance import suite

    for g in suite.group_names():
        text = metal.translate(suite.assemble_group(g)).text
        assert "goto " not in text, g


def test_every_generated_target_takes_the_one_control_walk(monkeypatch) -> None:  # noqa: ANN001
    # issue 30 item 3: PTX, the C family and SPIR-V lower control flow through ControlWalk, one
    # walk per kernel (SPIR-V with the mask-stack strategy for every kernel)
    from anywave.backends import metal, opencl, ptx, spirv
    from anywave.backends.lowering import control

    seen: list[tuple[type, bool]] = []
    real = control.ControlWalk.run

    def run(self, code):  # noqa: ANN001, ANN202
        seen.append((type(self.s), self.mask_stack))
        return real(self, code)

    monkeypatch.setattr(control.ControlWalk, "run", run)
    m = assemble(_ESCAPE_SRC)
    for name, translate in (("ptx", lambda: ptx.translate(m)), ("opencl", lambda: opencl.translate(m, 16)),
                            ("metal", lambda: metal.translate(m)), ("spirv", lambda: spirv.translate(m, 16))):
        seen.clear()
        translate()
        assert len(seen) == len(m.kernels), name
        if name == "spirv":
            assert seen[0][1], "SPIR-V takes the mask-stack strategy for every kernel"
