"""Standard library written in the kernel language itself (``@aw.func``, inlined).

Workgroup collectives (docs/spec.md §8.15). They must be reached by every thread of the
workgroup (they contain barriers); ``v`` is i32, u32 or f32. Their results are
**W-invariant**: the same bits at W = 8, 16, 32 and 64 and on every conformant target,
for any workgroup size the target allows (no cap on waves per workgroup: the values go
through a fixed local scratch of :data:`CHUNK` slots, a round of CHUNK threads at a time).
They use no wave operation at all: every tree level goes through local memory (measured
faster on the CPU runtimes than shuffles, bench/bench_collectives.py).

* ``workgroup_reduce(v, op="sum")`` — ``op`` in {"sum", "min", "max", "and", "or", "xor"}
  (and/or/xor: integers only); every thread gets the result. Order: the fixed pairwise
  tree over linear thread ids — node ``[s, s + 2d)`` (``s`` a multiple of ``2d``) is
  ``left ⊕ right`` where ``right = [s + d, s + 2d)`` exists iff ``s + d < S`` (else the node
  is its left child). Only f32 ``sum`` is order-sensitive; the other operations are
  associative and commutative (spec §8.8), so any order gives their bits.
* ``workgroup_scan(v, exclusive=False)`` — prefix sum over the workgroup in linear thread
  order. Order (f32): the exclusive prefix of thread ``t`` is the left fold, largest first,
  of the tree nodes of the binary decomposition of ``[0, t)`` (Blelloch's down-sweep order);
  the inclusive prefix is ``exclusive + v`` (``v`` alone for thread 0; exclusive of thread
  0 is ``+0.0``).
* ``workgroup_broadcast(v, src)`` — the value of ``v`` in the thread with linear id ``src``
  (``0 <= src < S``, uniform) to every thread.

Kernels built only from these (and no other wave operation or W-dependent special
register) are recorded as W-invariant in the ``.wbin`` kernel table (spec §14.3).

Precise math on f32 (deterministic class: built only from exact-class instructions —
add/mul/fma/div/rint/cvt/bit operations — so every conformant target returns the same
bits). Error bounds against the correctly rounded result, checked by
tests/test_compiler_math.py:

* ``exp2``, ``exp``: <= 2 ulp (overflow → inf, underflow → 0 or a denormal, NaN → NaN);
* ``log``, ``log2``: <= 2 ulp for x > 0 (x = 0 → -inf, x < 0 → NaN, inf → inf);
* ``sin``, ``cos``: absolute error <= 2^-22 for |x| <= 10^4 (Cody–Waite reduction by π/2
  in three parts; beyond that the error grows with |x|); inf/NaN → NaN;
* ``tanh``: <= 4 ulp; ``erf``: absolute error <= 4e-7 (Taylor series below 0.5,
  Abramowitz & Stegun 7.1.26 above); ``pow``: < 1 ulp (the end of this module, spec §8.18).

The ``fast_*`` intrinsics map to ``*.approx.f32`` instead (faster; results may differ
between targets within the spec's bounds).
"""

from __future__ import annotations

import types as _pytypes

from . import language as _lang
from . import types as _ty
from .kernel import func
from .wdep import w_invariant

aw = _pytypes.SimpleNamespace(**_lang.INTRINSICS,
                              **{k: v for k, v in vars(_ty).items() if isinstance(v, _ty.DType)})

__all__ = ["workgroup_reduce", "workgroup_scan", "workgroup_broadcast",
           "exp", "exp2", "log", "log2", "pow", "sin", "cos", "tanh", "erf"]

#: values handled per round of a collective (a power of two): one round for every
#: workgroup of up to 1024 threads; larger ones take ceil(S / CHUNK) rounds through the
#: same slots (4 KiB of local memory per call for 32-bit values)
CHUNK = 1024
#: pending round-level tree nodes (a binary counter over rounds): enough for 2^32 rounds
STACK = 32
#: kept for callers of the old name: the scratch no longer limits the waves per workgroup
MAX_WAVES = CHUNK


# ----------------------------------------------------------------------------- block level

@func
def _combine(a, b, op):
    if op == "sum":
        r = a + b
    elif op == "min":
        r = min(a, b)
    elif op == "max":
        r = max(a, b)
    elif op == "and":
        r = a & b
    elif op == "or":
        r = a | b
    else:
        r = a ^ b
    return r


@func
def _push(scratch, node, c, op):
    # binary counter: round c's node merges with the completed siblings below it
    top = aw.popc(c)
    k = c
    while (k & 1) == 1:
        top = top - 1
        node = _combine(scratch[CHUNK + top], node, op)
        k = k >> 1
    scratch[CHUNK + top] = node


@w_invariant
@func
def workgroup_reduce(v, op="sum"):
    assert op == "sum" or op == "min" or op == "max" or op == "and" or op == "or" or op == "xor", \
        "workgroup_reduce: op must be 'sum', 'min', 'max', 'and', 'or' or 'xor'"
    i = aw.thread_linear_id()
    n = aw.workgroup_size(0) * aw.workgroup_size(1) * aw.workgroup_size(2)
    scratch = aw.local_array(aw.dtype_of(v), CHUNK + STACK)
    rounds = (n + (CHUNK - 1)) // CHUNK
    total = v
    for c in range(rounds):
        base = c * CHUNK
        m = min(CHUNK, n - base)
        if i >= base and i < base + m:
            scratch[i - base] = v
        aw.barrier()
        # the pairwise tree over slots [0, m): slot j (a multiple of 2d) takes j + d
        d = 1
        while d < m:
            j = i * (d + d)
            if j + d < m:
                scratch[j] = _combine(scratch[j], scratch[j + d], op)
            aw.barrier()
            d = d + d
        if rounds == 1:
            total = scratch[0]
        else:
            if i == 0:
                _push(scratch, scratch[0], c, op)
        aw.barrier()
    if rounds > 1:
        # the pending nodes, right to left: the root of the tree over all rounds
        if i == 0:
            k = aw.popc(rounds) - 1
            r = scratch[CHUNK + k]
            while k > 0:
                k = k - 1
                r = _combine(scratch[CHUNK + k], r, op)
            scratch[0] = r
        aw.barrier()
        total = scratch[0]
        aw.barrier()
    return total


@w_invariant
@func
def workgroup_scan(v, exclusive=False):
    i = aw.thread_linear_id()
    n = aw.workgroup_size(0) * aw.workgroup_size(1) * aw.workgroup_size(2)
    t = aw.dtype_of(v)
    scratch = aw.local_array(t, CHUNK + STACK)
    rounds = (n + (CHUNK - 1)) // CHUNK
    e = aw.cast(0, t)
    has_e = False
    for c in range(rounds):
        base = c * CHUNK
        m = min(CHUNK, n - base)
        mine = i >= base and i < base + m
        if mine:
            scratch[i - base] = v
        aw.barrier()
        # up-sweep (Blelloch layout): slot r (r + 1 a multiple of 2d) takes r - d; only
        # complete nodes are built, the only ones a prefix reads
        d = 1
        while d + d <= m:
            r = (d + d) * i + (d + d - 1)
            if r < m:
                scratch[r] = scratch[r - d] + scratch[r]
            aw.barrier()
            d = d + d
        if mine:
            # earlier rounds' pending nodes (largest first), then this round's left siblings
            for k in range(aw.popc(c)):
                x = scratch[CHUNK + k]
                e = aw.where(has_e, e + x, x)
                has_e = True
            cw = i - base
            d = CHUNK // 2
            while d >= 1:
                if (cw & d) != 0:
                    x = scratch[(cw & ~(d + d - 1)) + (d - 1)]
                    e = aw.where(has_e, e + x, x)
                    has_e = True
                d = d >> 1
        if c + 1 < rounds:
            aw.barrier()
            if i == 0:
                _push(scratch, scratch[CHUNK - 1], c, "sum")
        aw.barrier()
    if exclusive:
        out = aw.where(has_e, e, aw.cast(0, t))
    else:
        out = aw.where(has_e, e + v, v)
    return out


@w_invariant
@func
def workgroup_broadcast(v, src):
    slot = aw.local_array(aw.dtype_of(v), 1)
    if aw.thread_linear_id() == src:
        slot[0] = v
    aw.barrier()
    r = slot[0]
    aw.barrier()
    return r


# ----------------------------------------------------------------------------- precise math

@func
def _scale2(p: aw.f32, n: aw.i32):
    # p * 2^n for n in [-160, 130], in two exact-range steps so only the last multiply rounds
    n1 = n >> 1
    n2 = n - n1
    s1 = aw.bitcast((n1 + 127) << 23, aw.f32)
    s2 = aw.bitcast((n2 + 127) << 23, aw.f32)
    return (p * s1) * s2


@func
def exp2(x: aw.f32):
    xc = min(max(x, -160.0), 130.0)
    n = aw.rint(xc)
    f = xc - n
    # 2^f = sum (f ln2)^k / k!, |f| <= 1/2
    p = aw.fma(f, 1.5252733804059841e-05, 1.5403530393381606e-04)
    p = aw.fma(f, p, 1.3333558146428443e-03)
    p = aw.fma(f, p, 9.6181291076284772e-03)
    p = aw.fma(f, p, 5.5504108664821580e-02)
    p = aw.fma(f, p, 2.4022650695910071e-01)
    p = aw.fma(f, p, 6.9314718055994531e-01)
    p = aw.fma(f, p, 1.0)
    r = _scale2(p, aw.i32(n))
    return r if x == x else x


@func
def exp(x: aw.f32):
    xc = min(max(x, -110.0), 90.0)
    n = aw.rint(xc * 1.4426950408889634)
    r = aw.fma(-n, 0.693145751953125, xc)
    r = aw.fma(-n, 1.4286067653301870e-06, r)
    p = aw.fma(r, 1.0 / 40320.0, 1.0 / 5040.0)
    p = aw.fma(r, p, 1.0 / 720.0)
    p = aw.fma(r, p, 1.0 / 120.0)
    p = aw.fma(r, p, 1.0 / 24.0)
    p = aw.fma(r, p, 1.0 / 6.0)
    p = aw.fma(r, p, 0.5)
    p = aw.fma(r, p, 1.0)
    p = aw.fma(r, p, 1.0)
    out = _scale2(p, aw.i32(n))
    return out if x == x else x


@func
def _log_parts(x: aw.f32):
    # x > 0 finite: returns (e, log(m)) with x = m * 2^e, m in [sqrt(1/2), sqrt(2))
    xs = x
    eadj = 0
    if x < 1.1754943508222875e-38:
        xs = x * 8388608.0
        eadj = -23
    bits = aw.bitcast(xs, aw.i32)
    e = ((bits >> 23) & 255) - 127 + eadj
    m = aw.bitcast((bits & 8388607) | 1065353216, aw.f32)
    if m > 1.4142135623730951:
        m = m * 0.5
        e = e + 1
    s = (m - 1.0) / (m + 1.0)
    s2 = s * s
    t = aw.fma(s2, 1.0 / 11.0, 1.0 / 9.0)
    t = aw.fma(s2, t, 1.0 / 7.0)
    t = aw.fma(s2, t, 1.0 / 5.0)
    t = aw.fma(s2, t, 1.0 / 3.0)
    t = t * s2
    s_2 = s + s
    logm = aw.fma(s_2, t, s_2)
    return aw.f32(e), logm


@func
def _log_special(x: aw.f32, r: aw.f32):
    out = r
    if x == 0.0:
        out = -aw.bitcast(aw.u32(0x7F800000), aw.f32)
    if x < 0.0 or x != x:
        out = aw.bitcast(aw.u32(0x7FC00000), aw.f32)
    if x == aw.bitcast(aw.u32(0x7F800000), aw.f32):
        out = x
    return out


@func
def log(x: aw.f32):
    ef, logm = _log_parts(x)
    r = aw.fma(ef, 0.693145751953125, aw.fma(ef, 1.4286067653301870e-06, logm))
    return _log_special(x, r)


@func
def log2(x: aw.f32):
    ef, logm = _log_parts(x)
    # log2(m) = logm * log2(e), log2(e) split in a head with 12 bits and a tail
    hi = 1.4423828125
    lo = 3.1226567e-04
    r = ef + aw.fma(logm, hi, logm * lo)
    return _log_special(x, r)


@func
def _sin_poly(r: aw.f32):
    r2 = r * r
    p = aw.fma(r2, 1.0 / 362880.0, -1.0 / 5040.0)
    p = aw.fma(r2, p, 1.0 / 120.0)
    p = aw.fma(r2, p, -1.0 / 6.0)
    return aw.fma(r * r2, p, r)


@func
def _cos_poly(r: aw.f32):
    r2 = r * r
    p = aw.fma(r2, -1.0 / 3628800.0, 1.0 / 40320.0)
    p = aw.fma(r2, p, -1.0 / 720.0)
    p = aw.fma(r2, p, 1.0 / 24.0)
    p = aw.fma(r2, p, -0.5)
    return aw.fma(r2, p, 1.0)


@func
def _sincos(x: aw.f32, shift):
    k = aw.rint(x * 0.6366197723675814)
    r = aw.fma(-k, 1.5707963705062866, x)
    r = aw.fma(-k, -4.3711388286737929e-08, r)
    r = aw.fma(-k, -1.7151245100059659e-15, r)
    q = (aw.i32(k) + shift) & 3
    s = _sin_poly(r)
    c = _cos_poly(r)
    out = s
    if q == 1:
        out = c
    elif q == 2:
        out = -s
    elif q == 3:
        out = -c
    return out if x - x == 0.0 else aw.bitcast(aw.u32(0x7FC00000), aw.f32)


@func
def sin(x: aw.f32):
    return _sincos(x, 0)


@func
def cos(x: aw.f32):
    return _sincos(x, 1)


@func
def tanh(x: aw.f32):
    a = abs(x)
    out = x
    if a < 0.55:
        x2 = x * x
        p = aw.fma(x2, 6404582.0 / 10854718875.0, -929569.0 / 638512875.0)
        p = aw.fma(x2, p, 21844.0 / 6081075.0)
        p = aw.fma(x2, p, -1382.0 / 155925.0)
        p = aw.fma(x2, p, 62.0 / 2835.0)
        p = aw.fma(x2, p, -17.0 / 315.0)
        p = aw.fma(x2, p, 2.0 / 15.0)
        p = aw.fma(x2, p, -1.0 / 3.0)
        out = aw.fma(x * x2, p, x)
    else:
        e = exp(a + a)
        t = 1.0 - 2.0 / (e + 1.0)
        out = t if x > 0.0 else -t
    return out if x == x else x


@func
def erf(x: aw.f32):
    a = abs(x)
    out = x
    if a < 0.5:
        x2 = x * x
        p = aw.fma(x2, 1.0 / 9360.0, -1.0 / 1320.0)
        p = aw.fma(x2, p, 1.0 / 216.0)
        p = aw.fma(x2, p, -1.0 / 42.0)
        p = aw.fma(x2, p, 1.0 / 10.0)
        p = aw.fma(x2, p, -1.0 / 3.0)
        out = aw.fma(x * x2, p, x) * 1.1283791670955126
    else:
        t = 1.0 / aw.fma(0.3275911, a, 1.0)
        p = aw.fma(t, 1.061405429, -1.453152027)
        p = aw.fma(t, p, 1.421413741)
        p = aw.fma(t, p, -0.284496736)
        p = aw.fma(t, p, 0.254829592)
        y = 1.0 - p * t * exp(-(a * a))
        out = y if x > 0.0 else -y
    return out if x == x else x


# ----------------------------------------------------------------------------- pow (docs/spec.md §8.18)
# pow(x, y): below 1 ulp for finite results (faithfully rounded: 2^(y log2|x|) with the logarithm
# and the product carried as pairs of f32, then exp2's polynomial), C99 Annex F's special cases;
# its sequence is docs/spec.md §8.18.

#: f32 head and tail of the constants pow carries as double-f32 pairs (head: the constant rounded
#: to f32; tail: the rest rounded to f32)
_LOG2E_HI, _LOG2E_LO = 1.4426950216293335, 1.925963033500011e-08
_TWO3_HI, _TWO3_LO = 0.6666666865348816, -1.9868215517249155e-08
_INF_BITS, _NAN_BITS = 0x7F800000, 0x7FC00000


@func
def _two_sum(a: aw.f32, b: aw.f32):
    # s + e = a + b exactly (Knuth's TwoSum)
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


@func
def _log2_ext(ax: aw.f32):
    # log2(ax) for a finite ax > 0 as a pair (h, l), h + l within about 2^-40 of it relative:
    # ax = m 2^e, m in [sqrt(1/2), sqrt(2)); log m = 2 atanh(s), s = (m - 1)/(m + 1), the series
    # 2s + 2s^3/3 + ... + 2s^17/17 with s, s^2, the 2/3 term and the products in double-f32
    xs = ax
    eadj = 0
    if ax < 1.1754943508222875e-38:
        xs = ax * 8388608.0
        eadj = -23
    bits = aw.bitcast(xs, aw.i32)
    e = ((bits >> 23) & 255) - 127 + eadj
    m = aw.bitcast((bits & 8388607) | 1065353216, aw.f32)
    if m > 1.4142135623730951:
        m = m * 0.5
        e = e + 1
    u = m - 1.0
    vh, vl = _two_sum(m, 1.0)
    sh = u / vh
    sl = aw.fma(-sh, vl, aw.fma(-sh, vh, u)) / vh
    zh = sh * sh
    zl = aw.fma(sh, sh, -zh) + (sh + sh) * sl
    w = aw.fma(zh, 2.0 / 17.0, 2.0 / 15.0)
    w = aw.fma(zh, w, 2.0 / 13.0)
    w = aw.fma(zh, w, 2.0 / 11.0)
    w = aw.fma(zh, w, 2.0 / 9.0)
    w = aw.fma(zh, w, 2.0 / 7.0)
    w = aw.fma(zh, w, 2.0 / 5.0)
    w = w * zh
    ah = _TWO3_HI + w
    al = ((_TWO3_HI - ah) + w) + _TWO3_LO
    bh = zh * ah
    bl = aw.fma(zh, ah, -bh) + (zh * al + zl * ah)
    ch = sh * bh
    cl = aw.fma(sh, bh, -ch) + (sh * bl + sl * bh)
    s2 = sh + sh
    dh = s2 + ch
    dl = ((s2 - dh) + ch) + ((sl + sl) + cl)
    eh = dh * _LOG2E_HI
    el = aw.fma(dh, _LOG2E_HI, -eh) + (dh * _LOG2E_LO + dl * _LOG2E_HI)
    lh, t = _two_sum(aw.f32(e), eh)
    ll = t + el
    h = lh + ll
    return h, ll - (h - lh)


@func
def _pow_core(ax: aw.f32, y: aw.f32):
    # 2^(y log2 ax) for a finite ax > 0 and a finite y: the product in double-f32, its integer
    # part n and rest f (|f| <= 1/2 + tiny), 2^f by the Horner polynomial of exp2, times 2^n
    h, l = _log2_ext(ax)
    ph = y * h
    pl = aw.fma(y, h, -ph) + y * l
    pc = min(max(ph, -160.0), 130.0)
    n = aw.rint(pc)
    f = (pc - n) + (pl if pc == ph else 0.0)  # beyond the clamp the result is inf or 0 anyway
    p = aw.fma(f, 1.5252733804059841e-05, 1.5403530393381606e-04)
    p = aw.fma(f, p, 1.3333558146428443e-03)
    p = aw.fma(f, p, 9.6181291076284772e-03)
    p = aw.fma(f, p, 5.5504108664821580e-02)
    p = aw.fma(f, p, 2.4022650695910071e-01)
    p = aw.fma(f, p, 6.9314718055994531e-01)
    p = aw.fma(f, p, 1.0)
    return _scale2(p, aw.i32(n))


@func
def pow(x: aw.f32, y: aw.f32):  # noqa: A001 - aw.pow, as C's pow and NumPy's power
    inf = aw.bitcast(aw.u32(_INF_BITS), aw.f32)
    ax = abs(x)
    ay = abs(y)
    yint = aw.trunc(y) == y
    yodd = yint and ay < 16777216.0 and (aw.i32(y) & 1) == 1
    big = 3.4028234663852886e+38
    r = _pow_core(min(max(ax, 1.401298464324817e-45), big), min(max(y, -big), big))
    if x < 0.0:
        if not yint:
            r = aw.bitcast(aw.u32(_NAN_BITS), aw.f32)
        elif yodd:
            r = -r
    if ax == 0.0:  # pow(+-0, y): +-inf / +-0 (odd y keeps x's sign), C99 F.10.4.4
        r = inf if y < 0.0 else 0.0
        if yodd:
            r = aw.bitcast(aw.bitcast(r, aw.u32) | (aw.bitcast(x, aw.u32) & aw.u32(0x80000000)), aw.f32)
    if ax == inf:  # pow(+-inf, y)
        r = 0.0 if y < 0.0 else inf
        if yodd and x < 0.0:
            r = -r
    if ay == inf:  # pow(x, +-inf)
        r = 1.0
        if ax < 1.0:
            r = 0.0 if y > 0.0 else inf
        if ax > 1.0:
            r = inf if y > 0.0 else 0.0
    if x != x or y != y:
        r = aw.bitcast(aw.u32(_NAN_BITS), aw.f32)
    if y == 0.0 or x == 1.0:
        r = 1.0
    return r
