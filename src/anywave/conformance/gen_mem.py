"""Cases for data movement (movi, mov, ldarg), predicate logic, loads/stores and atomics."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from anywave.conformance import refsem as R
from anywave.conformance.build import int_edges, kernel_text, out_buffer, rng_for
from anywave.conformance.case import Case, Compare
from anywave.isa.table import INSTRUCTIONS, Category

WG64 = ((1, 1, 1), (64, 1, 1))


# ----------------------------------------------------------------------------- moves


def _movi_cases() -> list[Case]:
    out = []
    f32 = [
        ("nan", None),
        ("inf", R.F32.inf),
        ("-inf", R.F32.inf | R.F32.sign_bit),
        ("-0.0", R.F32.sign_bit),
        ("1.5", 0x3FC00000),
        ("1e-3", R.F32.round(0, Fraction("1e-3"))),
        ("0x3fc00001", 0x3FC00001),
        ("-2.5e-40", R.F32.round(1, Fraction("2.5e-40"))),
        ("3.4028235e38", 0x7F7FFFFF),
    ]
    f16 = [
        ("nan", None),
        ("inf", R.F16.inf),
        ("-inf", R.F16.inf | R.F16.sign_bit),
        ("-0.0", 0x8000),
        ("1.5", 0x3E00),
        ("1e-3", R.F16.round(0, Fraction("1e-3"))),
        ("65504", 0x7BFF),
        ("0x3c01", 0x3C01),
        ("6e-8", R.F16.round(0, Fraction("6e-8"))),
    ]
    bf16 = [
        ("nan", None),
        ("inf", R.BF16.inf),
        ("-inf", R.BF16.inf | 0x8000),
        ("-0.0", 0x8000),
        ("1.5", 0x3FC0),
        ("1e-3", R.BF16.round(0, Fraction("1e-3"))),
        ("0x3f81", 0x3F81),
    ]
    f64 = [
        ("nan", None),
        ("inf", R.F64.inf),
        ("-inf", R.F64.inf | R.F64.sign_bit),
        ("-0.0", R.F64.sign_bit),
        ("1.5", R.F64.from_float(1.5)),
        ("1e-3", R.F64.from_float(1e-3)),
        ("0x400921fb54442d18", 0x400921FB54442D18),
        ("5e-324", 1),
    ]
    ints32 = [
        ("0", 0),
        ("-1", 0xFFFFFFFF),
        ("0xffffffff", 0xFFFFFFFF),
        ("-2147483648", 0x80000000),
        ("2147483647", 0x7FFFFFFF),
        ("12345", 12345),
    ]
    ints64 = [
        ("0", 0),
        ("-1", (1 << 64) - 1),
        ("0x123456789abcdef0", 0x123456789ABCDEF0),
        ("-9223372036854775808", 1 << 63),
        ("9223372036854775807", (1 << 63) - 1),
        ("4294967296", 1 << 32),
    ]
    specs = [
        ("f32", f32, 32, "f32"),
        ("f16", f16, 16, "f16"),
        ("bf16", bf16, 16, "bf16"),
        ("f64", f64, 64, "f64"),
        ("b32", ints32, 32, None),
        ("u32", ints32, 32, None),
        ("i32", ints32, 32, None),
        ("b64", ints64, 64, None),
        ("u64", ints64, 64, None),
        ("i64", ints64, 64, None),
    ]
    for t, vals, bits, ftype in specs:
        name = f"move_movi_{t}"
        body = ["movi.u32 r0, 0"]
        exp_out, exp_full = [], []
        for k, (lit, b) in enumerate(vals):
            if bits == 64:
                body += [f"movi.{t} r10:r11, {lit}", f"st.device.b64 out[r0+{8 * k}], r10:r11"]
            else:
                body += [f"movi.{t} r10, {lit}", f"st.device.b32 full[r0+{4 * k}], r10"]
                if bits == 16:
                    body.append(f"st.device.b16 out[r0+{2 * k}], r10")
                else:
                    body.append(f"st.device.b32 out[r0+{4 * k}], r10")
            nanbits = R.FORMATS[ftype].canonical_nan if ftype else 0
            exp_out.append(nanbits if b is None else b)
            exp_full.append(nanbits if b is None else b)
        n = len(vals)
        obits = {16: 16, 32: 32, 64: 64}[bits]
        args = {"out": out_buffer(n, obits)}
        decl = [("out", "buffer", {16: "u16", 32: "u32", 64: "u64"}[bits], "write")]
        expected = {"out": np.array(exp_out, dtype=args["out"].dtype)}
        cmp: dict[str, Compare] = {}
        if bits != 64:
            args["full"] = out_buffer(n, 32)
            decl.append(("full", "buffer", "u32", "write"))
            expected["full"] = np.array(exp_full, np.uint32)
            if ftype:
                # the NaN literal's payload is the assembler's choice; the high half must be 0
                cmp["full"] = (
                    Compare("exact-nan", "f32") if bits == 32 else Compare("exact-nan", ftype + "x2")
                )
        if ftype:
            cmp["out"] = Compare("exact-nan", ftype)
        caps = {"f16": ("f16",), "bf16": ("bf16",), "f64": ("f64",)}.get(t, ("int64",) if bits == 64 else ())
        out.append(
            Case(
                name,
                "move",
                kernel_text(name, decl, body),
                (1, 1, 1),
                (1, 1, 1),
                args,
                expected,
                compare_by_name=cmp,
                requires=caps,
                description=f"movi.{t} literals incl. specials",
            )
        )
    return out


def _mov_ldarg_cases() -> list[Case]:
    out = []
    rng = rng_for("move_mov")
    n = 64
    a = rng.integers(0, 1 << 32, 2 * n, dtype=np.uint64).astype(np.uint32)
    body = [
        "mov.sr r0, sr_global_id_x",
        "movi.u32 r1, 3",
        "shl.b32 r4, r0, r1",
        "movi.u32 r1, 2",
        "shl.b32 r3, r0, r1",
        "ld.device.b64 r10:r11, a[r4]",
        "mov.b64 r12:r13, r10:r11",
        "mov.b32 r14, r11",
        "mov.b32 r11, r10",
        "st.device.b64 o64[r4], r12:r13",
        "st.device.b32 o32[r3], r14",
        "st.device.b32 o32b[r3], r11",
    ]
    out.append(
        Case(
            "move_mov",
            "move",
            kernel_text(
                "move_mov",
                [
                    ("a", "buffer", "u32", "read"),
                    ("o64", "buffer", "u32", "write"),
                    ("o32", "buffer", "u32", "write"),
                    ("o32b", "buffer", "u32", "write"),
                ],
                body,
            ),
            *WG64,
            {"a": a, "o64": out_buffer(2 * n, 32), "o32": out_buffer(n, 32), "o32b": out_buffer(n, 32)},
            {"o64": a.copy(), "o32": a[1::2].copy(), "o32b": a[0::2].copy()},
            description="mov.b32 / mov.b64",
        )
    )

    scal = [
        ("su32", "u32", np.uint32(0xDEADBEEF), [0xDEADBEEF]),
        ("si32", "i32", np.int32(-5), [0xFFFFFFFB]),
        ("sf32", "f32", np.float32(-1.5), [0xBFC00000]),
        ("sf16", "f16", np.float16(-2.0), [0xC000]),
        ("sbf16", "bf16", 3.0, [0x4040]),  # runtimes take a Python float for bf16
        ("su64", "u64", np.uint64(0x0123456789ABCDEF), [0x89ABCDEF, 0x01234567]),
        ("si64", "i64", np.int64(-2), [0xFFFFFFFE, 0xFFFFFFFF]),
        (
            "sf64",
            "f64",
            np.float64(-0.1),
            [R.F64.from_float(-0.1) & 0xFFFFFFFF, R.F64.from_float(-0.1) >> 32],
        ),
    ]
    body = ["movi.u32 r0, 0"]
    exp: list[int] = []
    for name, _t, _v, words in scal:
        if len(words) == 2:
            body += [f"ldarg.b64 r10:r11, {name}", f"st.device.b64 out[r0+{4 * len(exp)}], r10:r11"]
        else:
            body += [f"ldarg.b32 r10, {name}", f"st.device.b32 out[r0+{4 * len(exp)}], r10"]
        exp += words
    if len(exp) % 2:
        exp.append(0xCDCDCDCD)
    # 64-bit stores need 8-byte alignment: pad so each b64 lands aligned
    body2 = ["movi.u32 r0, 0"]
    exp2: list[int] = []
    for name, _t, _v, words in scal:
        if len(words) == 2:
            if len(exp2) % 2:
                exp2.append(0xCDCDCDCD)
            body2 += [f"ldarg.b64 r10:r11, {name}", f"st.device.b64 out[r0+{4 * len(exp2)}], r10:r11"]
        else:
            body2 += [f"ldarg.b32 r10, {name}", f"st.device.b32 out[r0+{4 * len(exp2)}], r10"]
        exp2 += words
    decl = [(nm, "scalar", t, "read") for nm, t, _v, _w in scal] + [("out", "buffer", "u32", "write")]
    args = {nm: v for nm, _t, v, _w in scal}
    args["out"] = out_buffer(len(exp2), 32)
    out.append(
        Case(
            "move_ldarg_all",
            "move",
            kernel_text("move_ldarg_all", decl, body2),
            (1, 1, 1),
            (1, 1, 1),
            args,
            {"out": np.array(exp2, np.uint32)},
            requires=("f16", "bf16", "f64", "int64"),
            description="ldarg of every scalar type (16-bit floats in the low half)",
        )
    )
    # registers and predicates are zero/false at thread start
    body = [
        "mov.sr r0, sr_global_id_x",
        "movi.u32 r1, 2",
        "shl.b32 r3, r0, r1",
        "movi.u32 r5, 7",
        "movi.u32 r6, 9",
        "selp.b32 r7, r5, r6, p3",
        "add.i32 r8, r7, r30",
        "nop",
        "st.device.b32 out[r3], r8",
    ]
    out.append(
        Case(
            "move_zero_init",
            "move",
            kernel_text("move_zero_init", [("out", "buffer", "u32", "write")], body),
            *WG64,
            {"out": out_buffer(64, 32)},
            {"out": np.full(64, 9, np.uint32)},
            description="r* = 0 and p* = false at thread start",
        )
    )
    return out


def _pred_cases() -> list[Case]:
    out = []
    n = 64
    a = np.array([i & 1 for i in range(n)], np.uint32)
    b = np.array([(i >> 1) & 1 for i in range(n)], np.uint32)
    pre = [
        "mov.sr r0, sr_global_id_x",
        "movi.u32 r1, 2",
        "shl.b32 r3, r0, r1",
        "ld.device.b32 r10, a[r3]",
        "ld.device.b32 r11, b[r3]",
        "movi.u32 r1, 0",
        "setp.ne.u32 p1, r10, r1",
        "setp.ne.u32 p2, r11, r1",
        "movi.u32 r5, 1",
        "movi.u32 r6, 0",
    ]
    tests = {
        "and_pred": (["and.pred p0, p1, p2"], lambda x, y: x & y),
        "and_pred_neg": (["and.pred p0, !p1, p2"], lambda x, y: (1 - x) & y),
        "or_pred": (["or.pred p0, p1, !p2"], lambda x, y: x | (1 - y)),
        "xor_pred": (["xor.pred p0, p1, p2"], lambda x, y: x ^ y),
        "mov_pred": (["mov.pred p0, !p1"], lambda x, y: 1 - x),
        "mov_pred_plain": (["mov.pred p0, p2"], lambda x, y: y),
        "setp_true": (["setp.true p0"], lambda x, y: 1),
        "setp_false": (["setp.false p0"], lambda x, y: 0),
        "guard_neg": (["setp.false p0", "@!p1 setp.true p0"], lambda x, y: 1 - x),
    }
    for tname, (ins, f) in tests.items():
        name = "pred_" + tname
        body = pre + ins + ["selp.b32 r20, r5, r6, p0", "st.device.b32 out[r3], r20"]
        exp = np.array([f(int(x), int(y)) for x, y in zip(a, b, strict=False)], np.uint32)
        out.append(
            Case(
                name,
                "compare",
                kernel_text(
                    name,
                    [
                        ("a", "buffer", "u32", "read"),
                        ("b", "buffer", "u32", "read"),
                        ("out", "buffer", "u32", "write"),
                    ],
                    body,
                ),
                *WG64,
                {"a": a, "b": b, "out": out_buffer(n, 32)},
                {"out": exp},
            )
        )
    rng = rng_for("pred_selp")
    x = rng.integers(0, 1 << 32, 2 * n, dtype=np.uint64).astype(np.uint32)
    y = rng.integers(0, 1 << 32, 2 * n, dtype=np.uint64).astype(np.uint32)
    body = pre + [
        "movi.u32 r1, 3",
        "shl.b32 r4, r0, r1",
        "ld.device.b64 r12:r13, x[r4]",
        "ld.device.b64 r14:r15, y[r4]",
        "selp.b64 r20:r21, r12:r13, r14:r15, p1",
        "selp.b32 r22, r12, r14, !p2",
        "st.device.b64 o64[r4], r20:r21",
        "st.device.b32 o32[r3], r22",
    ]
    e64 = np.where(np.repeat(a, 2) != 0, x, y).astype(np.uint32)
    e32 = np.where(b == 0, x[0::2], y[0::2]).astype(np.uint32)
    out.append(
        Case(
            "pred_selp",
            "compare",
            kernel_text(
                "pred_selp",
                [
                    ("a", "buffer", "u32", "read"),
                    ("b", "buffer", "u32", "read"),
                    ("x", "buffer", "u32", "read"),
                    ("y", "buffer", "u32", "read"),
                    ("o64", "buffer", "u32", "write"),
                    ("o32", "buffer", "u32", "write"),
                ],
                body,
            ),
            *WG64,
            {"a": a, "b": b, "x": x, "y": y, "o64": out_buffer(2 * n, 32), "o32": out_buffer(n, 32)},
            {"o64": e64, "o32": e32},
            description="selp.b32/b64 incl. a negated predicate",
        )
    )
    return out


# ----------------------------------------------------------------------------- loads / stores

_LOADS = ("u8", "i8", "u16", "i16", "b32", "b64", "b128")
_STORES = ("b8", "b16", "b32", "b64", "b128")
_NBYTES = {"u8": 1, "i8": 1, "u16": 2, "i16": 2, "b8": 1, "b16": 2, "b32": 4, "b64": 8, "b128": 16}


def _dreg(t: str) -> str:
    return {"b64": "r10:r11", "b128": "r10:r13"}.get(t, "r10")


def _extend(word_bytes: bytes, t: str) -> list[int]:
    """32-bit words a load of type t leaves in its destination registers."""
    nb = _NBYTES[t]
    v = int.from_bytes(word_bytes[:nb], "little")
    if t in ("i8", "i16"):
        v = R.to_signed(v, 8 * nb) & 0xFFFFFFFF
    if nb <= 4:
        return [v]
    return [(v >> (32 * k)) & 0xFFFFFFFF for k in range(nb // 4)]


def _memory_cases() -> list[Case]:
    out = []
    n = 64
    for space in ("device", "device.o64", "local"):
        for t, is_load in [(t, True) for t in _LOADS] + [(t, False) for t in _STORES]:
            nb = _NBYTES[t]
            kind = "ld" if is_load else "st"
            suffix = ".o64" if space == "device.o64" else ""
            sp = space.split(".")[0]
            name = f"mem_{kind}_{sp}_{t}" + ("_o64" if suffix else "")
            rng = rng_for(name)
            raw = rng.integers(0, 256, n * 16, dtype=np.uint64).astype(np.uint8)
            raw[0:16] = [
                0x7F,
                0x80,
                0xFF,
                0x01,
                0x00,
                0x80,
                0xFF,
                0x7F,
                0xFE,
                0xFF,
                0xFF,
                0xFF,
                0,
                0,
                0,
                0x80,
            ]
            shift = {1: 0, 2: 1, 4: 2, 8: 3, 16: 4}[nb]
            rev = "r9"
            body = [
                "mov.sr r0, sr_thread_linear_id",
                "movi.u32 r1, 4",
                "shl.b32 r5, r0, r1",  # r5 = 16 t
                f"movi.u32 r1, {shift}",
                "shl.b32 r6, r0, r1",
                "movi.u32 r7, 0",  # r6 = t * nb
                f"movi.u32 r1, {n - 1}",
                f"sub.i32 {rev}, r1, r0",
                f"shl.b32 r8, {rev}, r1".replace("r1", "r2"),
            ]
            body[-1] = f"movi.u32 r2, {shift}"
            body.append(f"shl.b32 r8, {rev}, r2")  # r8 = (n-1-t) * nb
            decl = [("a", "buffer", "u8", "read"), ("out", "buffer", "u8", "write")]
            local = 0
            if is_load:
                width = 16 if nb == 16 else (8 if nb == 8 else 4)
                dst = "r10:r13" if nb == 16 else ("r10:r11" if nb == 8 else "r10")
                if sp == "local":
                    local = n * 16
                    body += [
                        "ld.device.b128 r20:r23, a[r5]",
                        "st.local.b128 [r5], r20:r23",
                        "barrier",
                        f"ld.local.{t} {dst}, [r8]",
                    ]
                    src_index = lambda i: n - 1 - i  # noqa: E731
                else:
                    addr = "a[r6:r7]" if suffix else "a[r6]"
                    body.append(f"ld.device.{t}{suffix} {dst}, {addr}")
                    src_index = lambda i: i  # noqa: E731
                obytes = 16 if nb == 16 else (8 if nb == 8 else 4)
                body += [
                    f"movi.u32 r2, {obytes.bit_length() - 1}",
                    "shl.b32 r14, r0, r2",
                    f"st.device.b{8 * width if nb >= 8 else 32} out[r14], {dst}",
                ]
                exp = np.full(n * obytes, 0xCD, np.uint8)
                for i in range(n):
                    j = src_index(i)
                    words = _extend(raw[j * nb : (j + 1) * nb].tobytes(), t)
                    exp[i * obytes : (i + 1) * obytes] = np.frombuffer(
                        b"".join(w.to_bytes(4, "little") for w in words), np.uint8
                    )
                outlen = n * obytes
            else:
                src = _dreg(t)
                body.append("ld.device.b128 r10:r13, a[r5]")
                if sp == "local":
                    local = n * 16
                    body += [f"st.local.{t} [r6], {src}", "barrier", "movi.u32 r2, 0"]
                    # read back the slot written by thread n-1-t, byte by byte
                    for k in range(nb):
                        body += [f"ld.local.u8 r20, [r8+{k}]", f"st.device.b8 out[r6+{k}], r20"]
                    src_index = lambda i: n - 1 - i  # noqa: E731
                else:
                    addr = "out[r6:r7]" if suffix else "out[r6]"
                    body.append(f"st.device.{t}{suffix} {addr}, {src}")
                    src_index = lambda i: i  # noqa: E731
                exp = np.full(n * nb, 0xCD, np.uint8)
                for i in range(n):
                    j = src_index(i)
                    exp[i * nb : (i + 1) * nb] = raw[j * 16 : j * 16 + nb]  # low bytes of the registers
                outlen = n * nb
            caps = ("offset64",) if suffix else ()
            out.append(
                Case(
                    name,
                    "memory",
                    kernel_text(name, decl, body, local_memory=local),
                    *WG64,
                    {"a": raw, "out": np.full(outlen, 0xCD, np.uint8)},
                    {"out": exp},
                    requires=caps,
                    description=f"{kind}.{space}.{t}",
                )
            )
    # immediate offsets (positive and negative) on device and local addresses
    n = 64
    rng = rng_for("mem_offsets")
    a = rng.integers(0, 1 << 32, n + 4, dtype=np.uint64).astype(np.uint32)
    body = [
        "mov.sr r0, sr_thread_linear_id",
        "movi.u32 r1, 2",
        "shl.b32 r3, r0, r1",
        "add.i32 r4, r3, r1",
        "add.i32 r4, r4, r1",  # r4 = 4t + 4
        "ld.device.b32 r10, a[r4+12]",  # a[t + 4]
        "ld.device.b32 r11, a[r4-4]",  # a[t]
        "st.local.b32 [r4+8], r10",  # local word t + 3
        "barrier",
        "ld.local.b32 r12, [r3+12]",
        "xor.b32 r13, r12, r11",
        "st.device.b32 out[r3+0], r13",
    ]
    out.append(
        Case(
            "mem_offsets",
            "memory",
            kernel_text(
                "mem_offsets",
                [("a", "buffer", "u32", "read"), ("out", "buffer", "u32", "write")],
                body,
                local_memory=(n + 4) * 4,
            ),
            *WG64,
            {"a": a, "out": out_buffer(n, 32)},
            {"out": (a[4:] ^ a[:n]).astype(np.uint32)},
            description="immediate offsets +/- on device and local addresses",
        )
    )
    return out


# ----------------------------------------------------------------------------- atomics

_ATOM_REF = {
    "add.u32": lambda o, v: (o + v) & 0xFFFFFFFF,
    "sub.u32": lambda o, v: (o - v) & 0xFFFFFFFF,
    "min.i32": lambda o, v: min(R.to_signed(o, 32), R.to_signed(v, 32)) & 0xFFFFFFFF,
    "max.i32": lambda o, v: max(R.to_signed(o, 32), R.to_signed(v, 32)) & 0xFFFFFFFF,
    "min.u32": min,
    "max.u32": max,
    "and.b32": lambda o, v: o & v,
    "or.b32": lambda o, v: o | v,
    "xor.b32": lambda o, v: o ^ v,
    "exch.b32": lambda o, v: v,
    "add.f32": lambda o, v: R.f_add(R.F32, o, v),
}
_SCOPES = (
    ".device, .relaxed",
    ".workgroup, .acq_rel",
    ".device, .seq_cst",
    ".system, .release",
    ".wave, .acquire",
)
# a non-returning atomic may only be .relaxed or .release (spec §6.1)
_RED_SCOPES = tuple(x for x in _SCOPES if x.endswith((".relaxed", ".release")))


def _atomic_addr(space: str, reg: str) -> str:
    return f"mem[{reg}]" if space == "device" else f"[{reg}]"


def _atomic_cases() -> list[Case]:
    out = []
    n = 64
    recs = [d for d in INSTRUCTIONS if d.category is Category.ATOMIC]
    for idx, d in enumerate(recs):
        space, op = d.variant.split(".")
        key = f"{op}.{d.type.spelling}"  # type: ignore[union-attr]
        name = "atomic_" + d.mnemonic.replace(".", "_")
        rng = rng_for(name)
        is_f = key == "add.f32"
        if is_f:
            from anywave.conformance.build import float_edges

            e = float_edges(R.F32)
            init = np.array([e[i % len(e)] for i in range(n)], np.uint32)
            vals = np.array([e[(i * 7 + 3) % len(e)] for i in range(n)], np.uint32)
        else:
            e = int_edges(32)
            init = np.array([e[i % len(e)] for i in range(n)], np.uint32)
            vals = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
            vals[: len(e)] = e[::-1]
        cmpv = np.where(np.arange(n) % 2 == 0, init, init ^ 1).astype(np.uint32)
        scopes = _RED_SCOPES if d.op == "red" else _SCOPES
        tail = "" if space == "local" else ", " + scopes[idx % len(scopes)]
        addr = _atomic_addr(space, "r3")
        body = [
            "mov.sr r0, sr_thread_linear_id",
            "movi.u32 r1, 2",
            "shl.b32 r3, r0, r1",
            "ld.device.b32 r10, v[r3]",
            "ld.device.b32 r11, c[r3]",
        ]
        if space == "local":
            body += ["ld.device.b32 r12, mem[r3]", "st.local.b32 [r3], r12", "barrier"]
        if d.op == "red":
            body.append(f"{d.mnemonic} {addr}, r10{tail}")
        elif op == "cas":
            body.append(f"{d.mnemonic} r20, {addr}, r11, r10{tail}")
        else:
            body.append(f"{d.mnemonic} r20, {addr}, r10{tail}")
        if d.op != "red":
            body.append("st.device.b32 old[r3], r20")
        if space == "local":
            body += ["barrier", "ld.local.b32 r12, [r3]", "st.device.b32 mem[r3], r12"]
        else:
            body.append("fence .device, .acq_rel")
        decl = [
            ("v", "buffer", "u32", "read"),
            ("c", "buffer", "u32", "read"),
            ("mem", "buffer", "u32", "readwrite"),
        ]
        args = {"v": vals, "c": cmpv, "mem": init.copy()}
        if op == "cas":
            final = [
                int(v) if int(o) == int(c) else int(o) for o, v, c in zip(init, vals, cmpv, strict=False)
            ]
        else:
            final = [_ATOM_REF[key](int(o), int(v)) for o, v in zip(init, vals, strict=False)]
        expected = {"mem": np.array(final, np.uint32)}
        if d.op != "red":
            decl.append(("old", "buffer", "u32", "write"))
            args["old"] = out_buffer(n, 32)
            expected["old"] = init.copy()
        cmp = {"mem": Compare("exact-nan", "f32")} if is_f else {}
        out.append(
            Case(
                name,
                "atomic",
                kernel_text(name, decl, body, local_memory=n * 4 if space == "local" else 0),
                *WG64,
                args,
                expected,
                compare_by_name=cmp,
                requires=tuple(d.capability.spellings()),
                description=d.summary + " (one address per lane)",
            )
        )
    out += _contention_cases()
    return out


def _contention_cases() -> list[Case]:
    """All threads of the launch hit one address: final values exact, returned values checked as a
    multiset where order cannot matter, and in the documented serial order for the emulator."""
    out = []
    specs = [
        ("add.u32", lambda i: 1, 1000),
        ("add.u32", lambda i: i * i + 1, 0xFFFFFF00),
        ("sub.u32", lambda i: 3, 5),
        ("min.i32", lambda i: (i * 2654435761) & 0xFFFFFFFF, 0x7FFFFFFF),
        ("max.u32", lambda i: (i * 40503 + 7) & 0xFFFFFFFF, 0),
        ("or.b32", lambda i: 1 << (i % 32), 0),
        ("xor.b32", lambda i: (i * 0x9E3779B9) & 0xFFFFFFFF, 0x55),
        ("exch.b32", lambda i: i + 100, 7),
        ("add.f32", lambda i: R.F32.from_float(float(i % 5 - 2)), R.F32.from_float(0.5)),
    ]
    for space in ("device", "local"):
        for si, (key, vf, init) in enumerate(specs):
            op, t = key.split(".")
            mnem = f"atom.{space}.{key}"
            name = f"atomic_contend_{space}_{op}_{t}_{si}"
            grid, wg = ((3, 1, 1), (64, 1, 1)) if space == "device" else ((1, 1, 1), (100, 1, 1))
            nthreads = grid[0] * wg[0]
            vals = np.array([vf(i) for i in range(nthreads)], np.uint32)
            body = [
                "mov.sr r0, sr_global_id_x",
                "mov.sr r9, sr_thread_linear_id",
                "movi.u32 r1, 2",
                "shl.b32 r3, r0, r1",
                "ld.device.b32 r10, v[r3]",
                "movi.u32 r4, 0",
            ]
            if space == "local":
                body += [
                    "movi.u32 r1, 0",
                    "setp.eq.u32 p0, r9, r1",
                    "@p0 ld.device.b32 r12, mem[r4]",
                    "@p0 st.local.b32 [r4], r12",
                    "barrier",
                ]
                tail = ""
            else:
                tail = ", .device, .relaxed"
            body += [f"{mnem} r20, {_atomic_addr(space, 'r4')}, r10{tail}", "st.device.b32 old[r3], r20"]
            if space == "local":
                body += ["barrier", "@p0 ld.local.b32 r12, [r4]", "@p0 st.device.b32 mem[r4], r12"]
            ref = _ATOM_REF[key]
            cur = init
            serial_old = []
            for v in vals:
                serial_old.append(cur)
                cur = ref(cur, int(v))
            final = np.array([cur], np.uint32)
            expected: dict[str, np.ndarray] = {"mem": final}
            cmp: dict[str, Compare] = {}
            if key == "add.u32" and all(int(v) == 1 for v in vals) or key == "sub.u32":
                expected["old"] = np.array(serial_old, np.uint32)
                cmp["old"] = Compare("multiset")
            serial = {"old": np.array(serial_old, np.uint32)}
            requires = ("atomic_f32",) if t == "f32" else ()
            if key == "exch.b32":
                # the returned values plus the final value are the initial value plus every v, in
                # some order (a permutation check valid under any schedule)
                expected = {"old+mem": np.array([init] + [int(v) for v in vals], np.uint32)}
                cmp = {"old+mem": Compare("multiset")}
            args = {"v": vals, "mem": np.array([init], np.uint32), "old": out_buffer(nthreads, 32)}
            decl = [
                ("v", "buffer", "u32", "read"),
                ("mem", "buffer", "u32", "readwrite"),
                ("old", "buffer", "u32", "write"),
            ]
            out.append(
                Case(
                    name,
                    "atomic",
                    kernel_text(name, decl, body, local_memory=4 if space == "local" else 0),
                    grid,
                    wg,
                    args,
                    expected,
                    compare_by_name=cmp,
                    requires=requires,
                    serial_expected=serial,
                    description=f"{mnem}: {nthreads} threads on one address",
                )
            )
    # spin-CAS increment: every thread loops until its CAS succeeds
    for space in ("device", "local"):
        name = f"atomic_cas_loop_{space}"
        grid, wg = ((2, 1, 1), (64, 1, 1)) if space == "device" else ((1, 1, 1), (96, 1, 1))
        nthreads = grid[0] * wg[0]
        tail = ", .device, .relaxed" if space == "device" else ""
        ld = "ld.device.b32 r11, mem[r4]" if space == "device" else "ld.local.b32 r11, [r4]"
        body = [
            "mov.sr r0, sr_global_id_x",
            "mov.sr r9, sr_thread_linear_id",
            "movi.u32 r1, 2",
            "shl.b32 r3, r0, r1",
            "movi.u32 r4, 0",
            "movi.u32 r5, 1",
        ]
        if space == "local":
            body += [
                "movi.u32 r1, 0",
                "setp.eq.u32 p0, r9, r1",
                "@p0 ld.device.b32 r12, mem[r4]",
                "@p0 st.local.b32 [r4], r12",
                "barrier",
            ]
        body += [
            "loop",
            f"atom.{space}.or.b32 r11, {_atomic_addr(space, 'r4')}, r4{tail}" if space == "device" else ld,
            "add.i32 r12, r11, r5",
            f"atom.{space}.cas.b32 r13, {_atomic_addr(space, 'r4')}, r11, r12{tail}",
            "setp.eq.u32 p1, r13, r11",
            "break p1",
            "endloop",
            "st.device.b32 old[r3], r11",
        ]
        if space == "local":
            body += ["barrier", "@p0 ld.local.b32 r12, [r4]", "@p0 st.device.b32 mem[r4], r12"]
        init = 40
        args = {"mem": np.array([init], np.uint32), "old": out_buffer(nthreads, 32)}
        decl = [("mem", "buffer", "u32", "readwrite"), ("old", "buffer", "u32", "write")]
        out.append(
            Case(
                name,
                "atomic",
                kernel_text(name, decl, body, local_memory=4 if space == "local" else 0),
                grid,
                wg,
                args,
                {
                    "mem": np.array([init + nthreads], np.uint32),
                    "old": np.arange(init, init + nthreads, dtype=np.uint32),
                },
                compare_by_name={"old": Compare("multiset")},
                race_free=space == "device",
                description="spin-CAS increment of one counter by every thread",
            )
        )
    # red (no result) under contention: integer results are exact
    for space in ("device", "local"):
        name = f"atomic_red_contend_{space}"
        grid, wg = ((4, 1, 1), (64, 1, 1)) if space == "device" else ((1, 1, 1), (128, 1, 1))
        nthreads = grid[0] * wg[0]
        tail = ", .workgroup, .relaxed" if space == "device" else ""
        tail = ", .device, .relaxed" if space == "device" else ""
        body = [
            "mov.sr r0, sr_global_id_x",
            "mov.sr r9, sr_thread_linear_id",
            "movi.u32 r4, 0",
            "movi.u32 r5, 4",
            "movi.u32 r1, 0",
            "setp.eq.u32 p0, r9, r1",
        ]
        if space == "local":
            body += ["@p0 st.local.b32 [r4], r1", "@p0 st.local.b32 [r4+4], r1", "barrier"]
        a = _atomic_addr(space, "r4")
        a2 = "mem[r4+4]" if space == "device" else "[r4+4]"
        body += [f"red.{space}.add.u32 {a}, r0{tail}", f"red.{space}.max.i32 {a2}, r0{tail}"]
        if space == "local":
            body += [
                "barrier",
                "@p0 ld.local.b32 r12, [r4]",
                "@p0 st.device.b32 mem[r4], r12",
                "@p0 ld.local.b32 r12, [r4+4]",
                "@p0 st.device.b32 mem[r4+4], r12",
            ]
        args = {"mem": np.zeros(2, np.uint32)}
        exp = np.array([sum(range(nthreads)) & 0xFFFFFFFF, nthreads - 1], np.uint32)
        out.append(
            Case(
                name,
                "atomic",
                kernel_text(
                    name,
                    [("mem", "buffer", "u32", "readwrite")],
                    body,
                    local_memory=8 if space == "local" else 0,
                ),
                grid,
                wg,
                args,
                {"mem": exp},
                description="red.add/red.max from every thread",
            )
        )
    return out


def cases() -> list[Case]:
    return _movi_cases() + _mov_ldarg_cases() + _pred_cases() + _memory_cases() + _atomic_cases()
