"""Wave-operation cases: every wave instruction under several activity patterns, with expected
values computed per wave width W by a small independent model of the lane rules in
docs/decisions.md ("Wave operations")."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from anywave.conformance import refsem as R
from anywave.conformance.build import kernel_text, out_buffer, rng_for
from anywave.conformance.case import Case, Compare
from anywave.isa.table import INSTRUCTIONS, Category, InstrDef

F32 = R.F32
M32 = 0xFFFFFFFF


def _waves(n: int, w: int) -> list[list[int]]:
    """Thread linear ids of each wave of an n-thread workgroup (the last may be partial)."""
    return [list(range(s, min(s + w, n))) for s in range(0, n, w)]


def _f32(bits: int) -> np.float32:
    return np.array([bits], np.uint32).view(np.float32)[0]


def _bits(x: np.float32) -> int:
    return int(np.array([x], np.float32).view(np.uint32)[0])


def butterfly_add_f32(vals: list[int | None], w: int) -> int:
    """f32 wred.add: inactive lanes (None) contribute -0.0; s = s + s[lane ^ k], k = 1, 2, ..., W/2."""
    s = [_f32(v) if v is not None else np.float32(-0.0) for v in vals] + [np.float32(-0.0)] * (w - len(vals))
    k = 1
    with np.errstate(all="ignore"):
        while k < w:
            s = [np.float32(s[i] + s[i ^ k]) for i in range(w)]
            k *= 2
    return _bits(s[0])


def kogge_stone(vals: list[int | None], w: int, add: Callable, identity) -> list:
    """Inclusive scan network: s = s[lane-k] + s for lane >= k (lower lanes' partial on the left)."""
    s = [v if v is not None else identity for v in vals] + [identity] * (w - len(vals))
    k = 1
    while k < w:
        s = [add(s[i - k], s[i]) if i >= k else s[i] for i in range(w)]
        k *= 2
    return s


def _f32_add(x: np.float32, y: np.float32) -> np.float32:
    with np.errstate(all="ignore"):
        return np.float32(x + y)


def wave_result(
    d: InstrDef, w: int, a: list[int], b: list[int], q: list[int], act: list[bool], n: int
) -> list[int | None]:
    """Per-thread result (None = not written) of one workgroup of n threads at wave width w."""
    res: list[int | None] = [None] * n
    op, t, variant = d.op, d.type.spelling if d.type else "", d.variant
    for wave in _waves(n, w):
        base = wave[0]
        lanes_active = [act[t_] for t_ in wave] + [False] * (w - len(wave))
        av = [a[t_] for t_ in wave]
        active_ids = [i for i in range(w) if lanes_active[i]]
        if not active_ids:
            continue
        low = active_ids[0]
        for lane in active_ids:
            tid = base + lane
            if op == "shfl":
                bb = b[tid]
                src = {"idx": bb, "up": lane - bb, "down": lane + bb, "xor": lane ^ bb}[variant]
                ok = 0 <= src < w and lanes_active[src]
                res[tid] = av[src] if ok else av[lane]
            elif op == "bcast":
                L = b[base + low]
                res[tid] = av[L] if 0 <= L < w and lanes_active[L] else av[low]
            elif op == "ballot":
                res[tid] = sum(1 << i for i in active_ids if q[base + i])
            elif op == "any":
                res[tid] = int(any(q[base + i] for i in active_ids))
            elif op == "all":
                res[tid] = int(all(q[base + i] for i in active_ids))
            elif op == "wred":
                xs = [av[i] for i in active_ids]
                if t == "f32" and variant == "add":
                    res[tid] = butterfly_add_f32(
                        [av[i] if lanes_active[i] else None for i in range(len(wave))], w
                    )
                elif t == "f32":
                    acc = F32.canonical_nan
                    for x in xs:
                        acc = R.f_min(F32, acc, x, maximum=variant == "max")
                    res[tid] = acc
                else:
                    sv = (lambda x: R.to_signed(x, 32)) if t == "i32" else (lambda x: x)
                    if variant == "add":
                        r = sum(xs)
                    elif variant == "min":
                        r = min(sv(x) for x in xs)
                    elif variant == "max":
                        r = max(sv(x) for x in xs)
                    else:
                        r = 0 if variant != "and" else M32
                        for x in xs:
                            r = r & x if variant == "and" else (r | x if variant == "or" else r ^ x)
                    res[tid] = r & M32
            elif op == "wscan":
                vals = [av[i] if lanes_active[i] else None for i in range(len(wave))]
                if t == "f32":
                    s = kogge_stone(
                        [_f32(v) if v is not None else None for v in vals], w, _f32_add, np.float32(-0.0)
                    )
                    incl = [_bits(x) for x in s]
                    zero = 0
                else:
                    s = kogge_stone(vals, w, lambda x, y: (x + y) & M32, 0)
                    incl, zero = s, 0
                res[tid] = incl[lane] if variant == "incl" else (incl[lane - 1] if lane > 0 else zero)
    return res


# activity patterns: name -> (workgroup size, grid x, activity function of (thread id, rng))
_PATTERNS: dict[str, tuple[int, int, Callable[[int, np.random.Generator], bool]]] = {
    "all": (64, 1, lambda t, r: True),
    "even": (64, 1, lambda t, r: t % 2 == 0),
    "sparse": (64, 2, lambda t, r: bool(r.random() < 0.3)),
    "one": (64, 1, lambda t, r: t % 21 == 5),
    "partial": (100, 2, lambda t, r: t % 7 != 3),
}


def _inputs(d: InstrDef, nt: int, rng: np.random.Generator) -> tuple[list[int], list[int], list[int]]:
    if d.type is not None and d.type.spelling == "f32":
        mags = rng.choice([1.0, 1e-3, 1e3, 1e7, 3.0e-8, 0.1], nt)
        xs = (rng.standard_normal(nt) * mags).astype(np.float32)
        a = [_bits(x) for x in xs]
        a[3 % nt] = 0x80000000  # -0.0
        a[5 % nt] = 0x00000001  # denormal
    else:
        a = [int(x) for x in rng.integers(0, 1 << 32, nt, dtype=np.uint64)]
        a[1 % nt] = 0x80000000
        a[2 % nt] = 0x7FFFFFFF
        a[4 % nt] = M32
    if d.variant == "idx":
        b = [int(x) for x in rng.integers(0, 72, nt)]
        b[7 % nt] = M32
        b[9 % nt] = 0x80000000
    elif d.variant in ("up", "down"):
        b = [int(x) for x in rng.integers(0, 40, nt)]
        b[7 % nt] = M32
        b[9 % nt] = 0x80000000
    elif d.variant == "xor":
        b = [int(x) for x in rng.integers(0, 128, nt)]
    elif d.op == "bcast":
        b = [int(x) for x in rng.integers(0, 70, nt)]
    else:
        b = [0] * nt
    q = [int(x) for x in rng.integers(0, 2, nt)]
    return a, b, q


def _kernel(d: InstrDef) -> str:
    name = "wave_" + d.mnemonic.replace(".", "_")
    body = [
        "mov.sr r0, sr_global_id_x",
        "movi.u32 r1, 2",
        "shl.b32 r3, r0, r1",
        "movi.u32 r1, 3",
        "shl.b32 r4, r0, r1",
        "ld.device.b32 r10, a[r3]",
        "ld.device.b32 r11, b[r3]",
        "ld.device.b32 r12, act[r3]",
        "ld.device.b32 r13, q[r3]",
        "movi.u32 r1, 0",
        "setp.ne.u32 p0, r12, r1",
        "setp.ne.u32 p1, r13, r1",
        "movi.u32 r5, 1",
        "movi.u32 r6, 0",
        "if p0",
    ]
    if d.op == "ballot":
        body += [f"{d.mnemonic} r20:r21, p1", "st.device.b64 out[r4], r20:r21"]
    elif d.op in ("any", "all"):
        body += [f"{d.mnemonic} p2, p1", "selp.b32 r20, r5, r6, p2", "st.device.b32 out[r3], r20"]
    elif d.op in ("wred", "wscan"):
        body += [f"{d.mnemonic} r20, r10", "st.device.b32 out[r3], r20"]
    else:
        body += [f"{d.mnemonic} r20, r10, r11", "st.device.b32 out[r3], r20"]
    body.append("endif")
    decl = [
        ("a", "buffer", "u32", "read"),
        ("b", "buffer", "u32", "read"),
        ("act", "buffer", "u32", "read"),
        ("q", "buffer", "u32", "read"),
        ("out", "buffer", "u64" if d.op == "ballot" else "u32", "write"),
    ]
    return kernel_text(name, decl, body)


def _case(d: InstrDef, pattern: str) -> Case:
    kname = "wave_" + d.mnemonic.replace(".", "_")
    name = f"{kname}__{pattern}"
    rng = rng_for(name)
    n, gx, actf = _PATTERNS[pattern]
    nt = n * gx
    act = [actf(t % n, rng) for t in range(nt)]
    a, b, q = _inputs(d, nt, rng)
    obits = 64 if d.op == "ballot" else 32
    dt = np.uint64 if obits == 64 else np.uint32

    def expected(w: int) -> dict[str, np.ndarray]:
        out = out_buffer(nt, obits)
        for g in range(gx):
            sl = slice(g * n, (g + 1) * n)
            r = wave_result(d, w, a[sl], b[sl], q[sl], act[sl], n)
            for i, v in enumerate(r):
                if v is not None:
                    out[g * n + i] = v
        return {"out": out.astype(dt)}

    args = {
        "a": np.array(a, np.uint32),
        "b": np.array(b, np.uint32),
        "act": np.array(act, np.uint32),
        "q": np.array(q, np.uint32),
        "out": out_buffer(nt, obits),
    }
    is_f32_sum = d.type is not None and d.type.spelling == "f32" and (d.op == "wscan" or d.variant == "add")
    cmp = Compare("exact-nan", "f32") if is_f32_sum else Compare()
    return Case(
        name,
        "wave",
        _kernel(d),
        (gx, 1, 1),
        (n, 1, 1),
        args,
        expected,
        cmp,
        requires=tuple(d.capability.spellings()),
        description=f"{d.mnemonic}, lanes: {pattern}",
    )


def _special_f32_cases() -> list[Case]:
    """wred/wscan f32 with NaN, infinities and signed zeros (only "is NaN" is specified for NaN results)."""
    out = []
    recs = {d.mnemonic: d for d in INSTRUCTIONS}
    for mn in ("wred.add.f32", "wred.min.f32", "wred.max.f32", "wscan.incl.add.f32", "wscan.excl.add.f32"):
        d = recs[mn]
        kname = "wave_" + mn.replace(".", "_")
        name = f"{kname}__specials"
        n = 64
        nan, inf = F32.canonical_nan, F32.inf
        a = [0x80000000] * n
        a[10], a[20], a[40] = inf, 0x3F800000, inf | F32.sign_bit  # +inf + -inf -> NaN in waves holding both
        a[50] = nan | 5
        a[60] = 0  # +0 among -0s
        act = [t % 3 != 1 for t in range(n)]
        act[10] = act[20] = act[40] = act[50] = act[60] = True
        q = [0] * n

        def expected(w: int, d=d, a=a, act=act, q=q, n=n) -> dict[str, np.ndarray]:
            o = out_buffer(n, 32)
            for i, v in enumerate(wave_result(d, w, a, [0] * n, q, act, n)):
                if v is not None:
                    o[i] = v
            return {"out": o}

        args = {
            "a": np.array(a, np.uint32),
            "b": np.zeros(n, np.uint32),
            "act": np.array(act, np.uint32),
            "q": np.zeros(n, np.uint32),
            "out": out_buffer(n, 32),
        }
        out.append(
            Case(
                name,
                "wave",
                _kernel(d),
                (1, 1, 1),
                (n, 1, 1),
                args,
                expected,
                Compare("exact-nan", "f32"),
                requires=tuple(d.capability.spellings()),
                description=f"{mn} with NaN, ±inf, ±0",
            )
        )
    return out


def cases() -> list[Case]:
    out = []
    for d in INSTRUCTIONS:
        if d.category is Category.WAVE:
            for p in _PATTERNS:
                out.append(_case(d, p))
    return out + _special_f32_cases()
