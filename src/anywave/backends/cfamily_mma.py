"""C-family (OpenCL, SYCL, HIP, Metal) lowering of the MMA fragment instructions (docs/spec.md
§8.14): a loop with the fragment semantics; HIP uses the matrix units where the device has
them: MFMA at W = 64 on gfx90a/gfx94x, WMMA at W = 32 on gfx11 (RDNA 3).

Layout of this backend (not observable, spec §8.14): a wave-scope A or B fragment is held
*whole* by every lane (``float aw_fN[256]``, each lane loads the same tile); a wave-scope
accumulator is distributed over the lanes, ``256/W`` floats each: lane l holds column
``l % 16``; at W = 64 of row ``4*(l/16) + j`` (j < 4: the AMD MFMA 16x16 accumulator layout),
at W = 32 of row ``2j + l/16`` (j < 8: the RDNA 3 WMMA wave32 layout, AMD's "RDNA 3 WMMA"
GPUOpen article), at W = 16 of row j; at W = 8, element ``l + 8j``. ``mma`` computes each lane's
accumulator elements from the whole A and B, summing ``k = 0..15`` in order with ``fma``
(the emulator's order: bit-identical; MFMA: class ``bounded``). Thread-scope
``m4n4k4`` fragments are 16 floats per lane. Every slot starts at +0.0.

``mma.group`` (the wave-group MMA): each wave computes its own 16 x N strip; no target here has
a unit that shares B between the four waves of a group, so every lane reads the B elements it
needs from local memory at the swizzled panel layout's offsets (``anywave.isa.mma.group_b_offset``)
between two wave barriers (as a local ``mma.load``) and sums ``k = 0..15`` in order with ``fma``,
accumulator slot D+j from column block j: the emulator's order, bit-identical. HIP uses this loop
on every device (no MFMA/WMMA path for it). ``mma.group.async`` is the same loop (complete at
its issue), so ``mma.wait`` has nothing to wait for.
"""

from __future__ import annotations

import re
from typing import Any

from anywave.backends.lowering.fragments import fragment_slots
from anywave.binary.module import DeviceAddr, Instruction, Module
from anywave.isa.mma import FragKind, fragment_kinds, group_bt, group_n, row_n
from anywave.isa.types import ScalarType as T


def _per_lane(k: FragKind, W: int) -> int:
    if k.shape.scope == "thread" or k.role != "c":
        return k.elems
    return k.elems // W


def declarations(module: Module, code: Any, W: int, rolled: bool = False) -> list[str]:
    """Declarations of every fragment slot the kernel uses, zero-initialised (``rolled``: the
    zeroing loops kept loops, :func:`rolled`)."""
    out = [f"float awg_f{s}[{_per_lane(k, W)}]; for (u32 aw_i = 0; aw_i < {_per_lane(k, W)}u; ++aw_i) "
           f"awg_f{s}[aw_i] = 0.0f;" for s, k in sorted(fragment_slots(module, code).items())]
    return rolled_lines(out) if rolled else out


#: a ``for`` of the fragment spellings not already marked with the no-unroll pragma
_LOOP = re.compile(r'(?<!_Pragma\("unroll 1"\) )\bfor \(')


def rolled_lines(lines: list[str]) -> list[str]:
    """``lines`` with every ``for`` marked ``_Pragma("unroll 1")`` (for CPU devices:
    :attr:`~anywave.backends.cfamily.Features.cpu_device`)."""
    return [_LOOP.sub('_Pragma("unroll 1") for (', ln) for ln in lines]


def _rolled(h: Any) -> Any:
    """Fragment handler ``h`` with its loops kept rolled on a CPU device."""
    def handler(x: Any, ins: Instruction) -> list[str]:
        lines = h(x, ins)
        return rolled_lines(lines) if x.f.cpu_device else lines
    handler.__name__ = getattr(h, "__name__", "handler")
    return handler


def _acc_e(W: int, j: str) -> str:
    """C expression: the tile element (16*row + col) of accumulator slot ``j`` of this lane."""
    if W < 16:
        return f"(aw_lane + ({j}) * {W}u)"
    if W == 32:
        return f"(16u * (2u * ({j}) + aw_lane / 16u) + aw_lane % 16u)"
    return f"(16u * ({256 // W}u * (aw_lane / 16u) + ({j})) + aw_lane % 16u)"


def _ptr(x: Any, addr: Any, ctype: str) -> str:
    if isinstance(addr, DeviceAddr):
        return f"(({x.d.global_ptr(ctype)}){x.daddr(addr, False)})"
    return f"(({x.d.local_ptr(ctype)}){x.laddr(addr)})"


def _cond(ins: Instruction, wave: bool) -> str:
    return "ex" if wave else "1"


def _conv(t: T, v: str) -> str:
    return {T.F16: f"aw_h2f({v})", T.BF16: f"aw_bf2f({v})", T.F32: f"AW_F32({v})"}[t]


def _fload(x: Any, ins: Instruction) -> list[str]:
    f, addr, rs = ins.operands
    k = fragment_kinds(ins.defn)[0]
    wave = k.shape.scope == "wave"
    ctype = "u16" if ins.defn.type.nbytes == 2 else "u32"
    base = _ptr(x, addr, "u8")
    pre = [x.d.wave_barrier] if wave and not isinstance(addr, DeviceAddr) else []
    if wave and k.role == "c":
        loop = (f"for (u32 j = 0; j < {k.elems // x.W}u; ++j) {{ const u32 e = {_acc_e(x.W, 'j')}; "
                f"awg_f{f}[j] = AW_F32(*(({_deref_ptr(x, addr, ctype)})({base} + (e / {k.cols}u) * r{rs} + "
                f"(e % {k.cols}u) * 4u))); }}")
    else:
        esz = ins.defn.type.nbytes
        loop = (f"for (u32 e = 0; e < {k.elems}u; ++e) awg_f{f}[e] = "
                + _conv(ins.defn.type, f"(u32)*(({_deref_ptr(x, addr, ctype)})({base} + (e / {k.cols}u) * r{rs} + "
                                       f"(e % {k.cols}u) * {esz}u))") + ";")
    post = [x.d.wave_barrier] if wave and not isinstance(addr, DeviceAddr) else []
    return pre + [f"if ({_cond(ins, wave)}) {{", "  " + loop, "}"] + post


def _deref_ptr(x: Any, addr: Any, ctype: str) -> str:
    return x.d.global_ptr(ctype) if isinstance(addr, DeviceAddr) else x.d.local_ptr(ctype)


def _fstore(x: Any, ins: Instruction) -> list[str]:
    addr, f, rs = ins.operands
    k = fragment_kinds(ins.defn)[1]
    wave = k.shape.scope == "wave"
    base = _ptr(x, addr, "u8")
    n = k.elems // x.W if wave else k.elems
    e = _acc_e(x.W, "j") if wave else "j"
    body = (f"for (u32 j = 0; j < {n}u; ++j) {{ const u32 e = {e}; "
            f"*(({_deref_ptr(x, addr, 'u32')})({base} + (e / {k.cols}u) * r{rs} + (e % {k.cols}u) * 4u)) = "
            f"aw_c32(awg_f{f}[j]); }}")
    out = [f"if ({_cond(ins, wave)}) {{", "  " + body, "}"]
    if wave and not isinstance(addr, DeviceAddr):
        out.insert(0, x.d.wave_barrier)
        out.append(x.d.wave_barrier)
    return out


def _fmma(x: Any, ins: Instruction) -> list[str]:
    d, a, b, c = ins.operands
    k = fragment_kinds(ins.defn)[0]
    wave = k.shape.scope == "wave"
    sh = k.shape
    n = k.elems // x.W if wave else k.elems
    e = _acc_e(x.W, "j") if wave else "j"
    fma = x.d.math["fma"]
    loop = [f"  float aw_acc[{n}];",
            f"  for (u32 j = 0; j < {n}u; ++j) {{ const u32 e = {e}, i = e / {sh.n}u, "
            f"c = e % {sh.n}u; float s = awg_f{c}[j];",
            f"    for (u32 kk = 0; kk < {sh.k}u; ++kk) s = {fma}(awg_f{a}[i * {sh.k}u + kk], "
            f"awg_f{b}[kk * {sh.n}u + c], s);",
            "    aw_acc[j] = s; }",
            f"  for (u32 j = 0; j < {n}u; ++j) awg_f{d}[j] = AW_F32(aw_c32(aw_acc[j]));"]
    if wave and x.W == 64 and x.d.name == "hip":
        # AMD CDNA matrix cores (gfx90a, gfx94x): v_mfma_f32_16x16x16 on the same layout; lane l
        # gives A[l%16][4(l/16)+i] and B[4(l/16)+i][l%16] (both copies are whole in every lane)
        et = ins.defn.src_type
        vec, conv, fn = (("short", "(short)aw_f2bf", "__builtin_amdgcn_mfma_f32_16x16x16bf16_1k") if et is T.BF16
                         else ("_Float16", "(_Float16)", "__builtin_amdgcn_mfma_f32_16x16x16f16"))
        mfma = ["#if defined(__gfx90a__) || defined(__gfx940__) || defined(__gfx941__) || defined(__gfx942__)",
                f"  typedef {vec} aw_v4h __attribute__((ext_vector_type(4)));",
                "  typedef float aw_v4f __attribute__((ext_vector_type(4)));",
                "  aw_v4h va, vb; aw_v4f vc;",
                "  for (u32 i = 0; i < 4u; ++i) {",
                f"    va[i] = {conv}(awg_f{a}[(aw_lane % 16u) * 16u + 4u * (aw_lane / 16u) + i]);",
                f"    vb[i] = {conv}(awg_f{b}[(4u * (aw_lane / 16u) + i) * 16u + aw_lane % 16u]);",
                f"    vc[i] = awg_f{c}[i]; }}",
                f"  vc = {fn}(va, vb, vc, 0, 0, 0);",
                f"  for (u32 i = 0; i < 4u; ++i) awg_f{d}[i] = AW_F32(aw_c32(vc[i]));",
                "#else"]
        loop = mfma + loop + ["#endif"]
    if wave and x.W == 32 and x.d.name == "hip":
        loop = _wmma(ins) + loop + ["#endif"]
    return [f"if ({_cond(ins, wave)}) {{", *loop, "}"]


def _wmma(ins: Instruction) -> list[str]:
    """RDNA 3 (gfx11) matrix cores, wave32: v_wmma_f32_16x16x16_{f16,bf16} on the W = 32 layout.
    Lane l gives row l%16 of A and column l%16 of B (16 values each; lanes 16..31 repeat them, as
    the instruction reads them) and its 8 accumulator values, D[2i + l/16][l%16] in slot i."""
    d, a, b, c = ins.operands
    bf = ins.defn.src_type is T.BF16
    vec, conv = ("short", "(short)aw_f2bf") if bf else ("_Float16", "(_Float16)")
    fn = "__builtin_amdgcn_wmma_f32_16x16x16_bf16_w32" if bf else "__builtin_amdgcn_wmma_f32_16x16x16_f16_w32"
    return ["#if defined(__gfx1100__) || defined(__gfx1101__) || defined(__gfx1102__) || defined(__gfx1103__)",
            f"  typedef {vec} aw_v16h __attribute__((ext_vector_type(16)));",
            "  typedef float aw_v8f __attribute__((ext_vector_type(8)));",
            "  aw_v16h va, vb; aw_v8f vc;",
            "  for (u32 i = 0; i < 16u; ++i) {",
            f"    va[i] = {conv}(awg_f{a}[(aw_lane % 16u) * 16u + i]);",
            f"    vb[i] = {conv}(awg_f{b}[i * 16u + aw_lane % 16u]); }}",
            f"  for (u32 i = 0; i < 8u; ++i) vc[i] = awg_f{c}[i];",
            f"  vc = {fn}(va, vb, vc);",
            f"  for (u32 i = 0; i < 8u; ++i) awg_f{d}[i] = AW_F32(aw_c32(vc[i]));",
            "#else"]


#: loop pragma (clang's, which every C-family compiler here is built on): unrolled, the fma chains
#: of ``mma.group`` took Intel's OpenCL CPU compiler ~4x longer to build (7.6 s against 2 s for
#: two m16n64k16 at W = 16)
_NO_UNROLL = '_Pragma("unroll 1")'


def _fgmma(x: Any, ins: Instruction) -> list[str]:
    """``mma.group`` (spec §8.14): slot D+jj += A x B[:, 16jj:16jj+16] per wave, B element (k, n)
    at local byte ``L + (n/64)*P + 128k + 16*(((n%64)/8) ^ (k%8)) + 2*(n%8)`` (group_b_offset)."""
    d, a, addr, rp = ins.operands
    k = fragment_kinds(ins.defn)[0]
    n = k.elems // x.W
    fma = x.d.math["fma"]
    conv = "aw_bf2f" if ins.defn.src_type is T.BF16 else "aw_h2f"
    lp = x.d.local_ptr("u16")
    nf = group_n(ins.defn) // 16
    # one loop nest for the whole strip (jj at run time; the slot chosen by a select / switch):
    # N/16 unrolled nests took Intel's OpenCL CPU compiler ~1.3x as long to build
    get = " : ".join(f"jj == {jj}u ? awg_f{d + jj}[j]" for jj in range(nf - 1)) + f" : awg_f{d + nf - 1}[j]"
    put = " ".join(f"case {jj}u: awg_f{d + jj}[j] = v; break;" for jj in range(nf - 1))
    if group_bt(ins.defn):  # B transposed: the swizzled row layout (group_bt_offset), k from (L mod 1024) / 2
        boff = ("128u * n + 16u * (((aw_gu / 2u + kk) / 8u) ^ (n % 8u)) + 2u * ((aw_gu / 2u + kk) % 8u)")
        pre = [f"  const u32 aw_gu = (r{addr.reg} + {addr.offset}u) % 1024u;",
               f"  {x.d.local_ptr('u8')} aw_gb = {_ptr(x, addr, 'u8')} - aw_gu;"]
    else:
        boff = "(n / 64u) * aw_gp + 128u * kk + 16u * (((n % 64u) / 8u) ^ (kk % 8u)) + 2u * (n % 8u)"
        pre = [f"  const u32 aw_gp = r{rp};", f"  {x.d.local_ptr('u8')} aw_gb = {_ptr(x, addr, 'u8')};"]
    out = [*pre,
           f"  {_NO_UNROLL} for (u32 jj = 0; jj < {nf}u; ++jj) {{",
           f"    {_NO_UNROLL} for (u32 j = 0; j < {n}u; ++j) {{ const u32 e = {_acc_e(x.W, 'j')}, "
           f"i = e / 16u, n = 16u * jj + e % 16u; float s = {get};",
           f"      {_NO_UNROLL} for (u32 kk = 0; kk < 16u; ++kk) s = {fma}(awg_f{a}[i * 16u + kk], "
           f"{conv}((u32)*(({lp})(aw_gb + {boff}))), s);",
           f"      const float v = AW_F32(aw_c32(s)); switch (jj) {{ {put} default: awg_f{d + nf - 1}[j] = v; }} }}",
           "  }"]
    return [x.d.wave_barrier, "if (ex) {", *out, "}", x.d.wave_barrier]


def _felementwise(x: Any, ins: Instruction) -> list[str]:
    op = ins.defn.op
    k = fragment_kinds(ins.defn)[0]
    wave = k.shape.scope == "wave"
    d = ins.operands[0]
    n = k.elems // x.W if wave else k.elems
    e = _acc_e(x.W, "j") if wave else "j"
    if op == "ffill":
        body = f"for (u32 j = 0; j < {n}u; ++j) awg_f{d}[j] = AW_F32(r{ins.operands[1]});"
    elif op == "fscale":
        body = (f"for (u32 j = 0; j < {n}u; ++j) awg_f{d}[j] = AW_F32(aw_c32(awg_f{ins.operands[1]}[j] * "
                f"AW_F32(r{ins.operands[2]})));")
    else:
        s, addr = ins.operands[1], ins.operands[2]
        body = (f"for (u32 j = 0; j < {n}u; ++j) {{ const u32 e = {e}; awg_f{d}[j] = "
                f"AW_F32(aw_c32(awg_f{s}[j] + AW_F32(*(({x.d.global_ptr('u32')})({_ptr(x, addr, 'u8')} + "
                f"(e % {k.cols}u) * 4u))))); }}")
    return [f"if ({_cond(ins, wave)}) {{", "  " + body, "}"]


def _lane_of(W: int) -> tuple[str, str]:
    """C expressions (lane, slot) holding tile element ``e`` of an accumulator (the inverse of
    :func:`_acc_e`)."""
    if W < 16:
        return f"(e % {W}u)", f"(e / {W}u)"
    if W == 16:
        return "(e % 16u)", "(e / 16u)"
    if W == 32:
        return "(16u * ((e / 16u) % 2u) + e % 16u)", "(e / 32u)"
    return "(16u * ((e / 16u) / 4u) + e % 16u)", "((e / 16u) % 4u)"


def _facc(x: Any, ins: Instruction) -> list[str]:
    """The accumulator operations (spec §8.14) on this backend's layout: element-wise per slot; a
    row reduction combines a lane's slots of one row (W = 8: slots 2r and 2r + 1), then the lanes
    holding the row by butterfly shuffles (16 lanes, W = 8: 8); ``cvt.a`` gathers all 256 elements
    into every lane (A fragments are whole in each lane) by shuffles."""
    op = ins.defn.op
    ops = ins.operands
    W = x.W
    k = fragment_kinds(ins.defn)[1]
    n = k.elems // W
    e = _acc_e(W, "j")
    d = ops[0]
    sh = x.d.shuffle
    if op in ("frowmax", "frowsum"):
        nf = row_n(ins.defn) // 16
        fn = "aw_maxnum({a}, {b})" if op == "frowmax" else "(({a}) + ({b}))"
        part = " ".join(f"p = {fn.format(a='p', b=f'awg_f{ops[1] + f}[j]')};" for f in range(1, nf))
        lines = [f"float aw_red[{n}];",
                 f"for (u32 j = 0; j < {n}u; ++j) {{ float p = awg_f{ops[1]}[j]; {part} aw_red[j] = p; }}"]
        if W < 16:  # slots 2r, 2r + 1 hold row r
            pair = fn.format(a="aw_red[j]", b="aw_red[j + 1u]")
            lines.append(f"for (u32 j = 0; j < {n}u; j += 2u) {{ const float p = {pair}; "
                         "aw_red[j] = p; aw_red[j + 1u] = p; }")
        for m in ((1, 2, 4) if W < 16 else (1, 2, 4, 8)):
            other = sh("aw_c32(aw_red[j])", f"aw_lane ^ {m}u")
            lines.append(f"for (u32 j = 0; j < {n}u; ++j) {{ const float o = AW_F32({other}); "
                         f"aw_red[j] = {fn.format(a='aw_red[j]', b='o')}; }}")
        res = fn.format(a=f"awg_f{ops[2]}[j]", b="aw_red[j]")
        # the shuffles run in every lane (a wave-scope instruction has all or none executing); the
        # results are written only where it executes (the walk also passes it with no lane active)
        lines.append(f"if (ex) for (u32 j = 0; j < {n}u; ++j) awg_f{d}[j] = AW_F32(aw_c32({res}));")
        return [x.d.wave_barrier, "{", *("  " + ln for ln in lines), "}"]
    if op == "fexp2":
        # -B is written 0 - B, never as a float negation: Intel's CPU OpenCL compiler gives every
        # wave the last wave's values of a negated fragment that a loop holding a barrier only
        # reads (the fast backward's lse2 at W = 16 and 32; "-B", "B * -1" and a sign-bit xor are
        # all turned into that negation). 0 - B differs from -B only for B = +0 (+0, not -0),
        # which changes x only in the sign of a zero: 2^x is the same (tests/test_mma_backend_regress.py)
        neg = f"(0.0f - awg_f{ops[2]}[j])"
        body = (f"for (u32 j = 0; j < {n}u; ++j) awg_f{d}[j] = AW_F32(aw_c32({x.d.math['ex2']}({x.d.math['fma']}("
                f"awg_f{ops[1]}[j], AW_F32(r{ops[3]}), {neg}))));")
    elif op in ("fmul", "fdiv"):
        sym = "*" if op == "fmul" else "/"
        body = (f"for (u32 j = 0; j < {n}u; ++j) awg_f{d}[j] = "
                f"AW_F32(aw_c32(awg_f{ops[1]}[j] {sym} awg_f{ops[2]}[j]));")
    elif op == "fmask":
        body = (f"for (u32 j = 0; j < {n}u; ++j) {{ const u32 e = {e}; "
                "const i32 aw_dj = (i32)(e % 16u) - (i32)(e / 16u); "
                f"if (!(aw_dj <= (i32)r{ops[2]} && (i32)(e % 16u) < (i32)r{ops[3]})) "
                f"awg_f{d}[j] = AW_F32(0xFF800000u); "
                f"else awg_f{d}[j] = awg_f{ops[1]}[j]; }}")
    else:  # fcvt: every lane gathers the whole tile, rounded to the A fragment's type
        lane, slot = _lane_of(W)
        rnd = "aw_bf2f(aw_f2bf({v}))" if ins.defn.type is T.BF16 else "aw_h2f(aw_f2h({v}))"
        got = sh(f"aw_c32(awg_f{ops[1]}[{slot}])", lane)
        body = (f"for (u32 e = 0; e < 256u; ++e) {{ const float v = AW_F32({got}); "
                f"if (ex) awg_f{d}[e] = {rnd.format(v='v')}; }}")
        return [x.d.wave_barrier, "{", "  " + body, "}"]
    return ["if (ex) {", "  " + body, "}"]


HANDLERS = {"fload": _fload, "fstore": _fstore, "fmma": _fmma, "ffill": _felementwise,
            "fscale": _felementwise, "fbias": _felementwise, "fgmma": _fgmma,
            **{op: _facc for op in ("frowmax", "frowsum", "fexp2", "fmul", "fdiv", "fmask", "fcvt")}}


def _fwait(x: Any, ins: Instruction) -> list[str]:
    """``mma.wait N`` (spec §8.14): this backend completes an ``mma.group.async`` when it is
    issued, so there is nothing left to wait for."""
    return []


HANDLERS["fwait"] = _fwait
HANDLERS = {op: _rolled(h) for op, h in HANDLERS.items()}
