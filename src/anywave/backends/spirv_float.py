"""Float helpers of the SPIR-V lowering (:mod:`anywave.backends.spirv`): a mixin of the
per-kernel lowering whose methods emit SPIR-V for one float operation and return its result id.

Why these exist (bit-exactness with the emulator, docs/spec.md §8.2, §8.11):

* Vulkan promises correct rounding only for add, sub, mul and conversions (Vulkan 1.3
  §"Precision and Operation of SPIR-V Instructions": ``OpFDiv`` 2.5 ulp, ``sqrt`` inherits
  ``inversesqrt``'s error, ``fma`` may round twice -- lavapipe's f64 Fma does), so f32
  ``div``/``sqrt`` are computed in f64 and then checked and fixed against the exact midpoints
  (a 25-bit by 24-bit product is exact in f64), f32/f16/bf16 ``fma`` is the exact f64 product
  plus the addend rounded to odd (Boldo & Melquiond 2008), and f64 ``fma`` is Dekker's exact
  product with a correctly rounded three-term sum.
* Neither lavapipe nor NVIDIA's driver offers ``DenormPreserve`` for f32, and NVIDIA flushes
  subnormal f32 operands of compares and of ``OpFConvert`` (its add/sub/mul keep them, as the H200
  run showed): compares, min/max and f32 <-> f64 conversions work on the bits.
* lavapipe's f64 ``Trunc``/``RoundEven`` drop the sign of zero and misround: f64 floor/ceil/trunc/
  rint are done on the bits.
* f16 and bf16 live on their bits, as in the C renderer (:data:`anywave.backends.cfamily.PRELUDE`).
"""

from __future__ import annotations

from anywave.isa.types import ScalarType

T = ScalarType


class FloatOps:
    """Mixin: expects the lowering's ``op``, ``fop``, ``c``, ``sel``, ``and_`` ... helpers."""

    def h2f(self, h: int) -> int:
        """f16 bits (low half) -> float, exact."""
        s = self.shl(self.iand(h, self.c(0x8000)), 16)
        e = self.iand(self.shr(h, 10), self.c(0x1F))
        m = self.iand(h, self.c(0x3FF))
        sub = self.fop("FMul", self.f32, self.op("ConvertUToF", self.f32, m), self.b.const_f32(0x33800000))
        sub = self.ior(self.f32_bits(sub), s)
        m13 = self.shl(m, 13)
        inf = self.ior(self.ior(s, self.c(0x7F800000)), m13)
        norm = self.ior(self.ior(s, self.shl(self.add(e, self.c(112)), 23)), m13)
        r = self.sel(self.u32, self.ieq(e, self.c(0)), sub, self.sel(self.u32, self.ieq(e, self.c(31)), inf, norm))
        return self.bits_f32(r)

    def bf2f(self, h: int) -> int:
        return self.bits_f32(self.shl(self.iand(h, self.c(0xFFFF)), 16))

    def f2h(self, f: int) -> int:
        """float -> f16 bits: one round-to-nearest-even (integer arithmetic), overflow to inf,
        NaN canonical (0x7E00)."""
        x = self.f32_bits(f)
        s = self.iand(self.shr(x, 16), self.c(0x8000))
        ax = self.iand(x, self.c(0x7FFFFFFF))
        # subnormal / zero result: RNE(mant >> sh), value = mant * 2^(es - 150), sh = 126 - es
        e = self.shr(ax, 23)
        isz = self.ieq(e, self.c(0))
        mant = self.sel(self.u32, isz, ax, self.ior(self.iand(ax, self.c(0x7FFFFF)), self.c(0x800000)))
        es = self.sel(self.u32, isz, self.c(1), e)
        sh = self.op("ISub", self.u32, self.c(126), es)
        sh = self.sel(self.u32, self.op("UGreaterThan", self.bool_, sh, self.c(31)), self.c(31), sh)
        q = self.op("ShiftRightLogical", self.u32, mant, sh)
        one_sh = self.op("ShiftLeftLogical", self.u32, self.c(1), sh)
        rem = self.iand(mant, self.op("ISub", self.u32, one_sh, self.c(1)))
        half = self.op("ShiftRightLogical", self.u32, one_sh, self.c(1))
        up = self.or_(self.op("UGreaterThan", self.bool_, rem, half),
                      self.and_(self.ieq(rem, half), self.ieq(self.iand(q, self.c(1)), self.c(1))))
        sub = self.add(q, self.sel(self.u32, up, self.c(1), self.c(0)))
        r = self.op("ISub", self.u32, ax, self.c(0x38000000))
        norm = self.shr(self.add(self.add(r, self.c(0xFFF)), self.iand(self.shr(r, 13), self.c(1))), 13)
        ult = lambda a, v: self.op("ULessThan", self.bool_, a, self.c(v))  # noqa: E731
        res = self.sel(self.u32, ult(ax, 0x38800000), sub, norm)
        res = self.sel(self.u32, ult(ax, 0x47800000), res, self.c(0x7C00))
        res = self.ior(s, res)
        return self.sel(self.u32, self.op("UGreaterThan", self.bool_, ax, self.c(0x7F800000)), self.c(0x7E00), res)

    def f2bf(self, f: int) -> int:
        x = self.f32_bits(f)
        r = self.shr(self.add(self.add(x, self.c(0x7FFF)), self.iand(self.shr(x, 16), self.c(1))), 16)
        r = self.iand(r, self.c(0xFFFF))
        nan = self.op("UGreaterThan", self.bool_, self.iand(x, self.c(0x7FFFFFFF)), self.c(0x7F800000))
        return self.sel(self.u32, nan, self.c(0x7FC0), r)

    def fval(self, r: int, t: T) -> int:
        """A float register's value in its compute type (float; double for f64)."""
        if t is T.F32:
            return self.bits_f32(self.r(r))
        if t is T.F64:
            return self.f64_of(self.r64(r))
        if t is T.F16:
            return self.h2f(self.r(r))
        return self.bf2f(self.r(r))

    def fbits(self, v: int, t: T) -> int:
        """compute-type value -> register bits (u32; u64 for f64)."""
        if t is T.F32:
            return self.f32_bits(v)
        if t is T.F64:
            return self.u64_of(v)
        return self.f2h(v) if t is T.F16 else self.f2bf(v)

    def isnan(self, v: int) -> int:
        return self.op("IsNan", self.bool_, v)

    # Float compares, min/max and f32 <-> f64 conversions are done on the bits: NVIDIA's Vulkan
    # driver offers no DenormPreserve for f32 and flushes subnormal f32 operands of compares and
    # of OpFConvert (its add/sub/mul keep them), so nothing that must see a subnormal f32 goes
    # through those instructions.
    def _ord_key(self, x: int, wide: bool) -> int:
        """Unsigned key whose order is the float order of bits x (-0 < +0; NaN excluded)."""
        ut = self.u64 if wide else self.u32
        k = self.b.const_u64 if wide else self.c
        top = 1 << (63 if wide else 31)
        neg = self.op("INotEqual", self.bool_, self.op("BitwiseAnd", ut, x, k(top)), k(0))
        return self.sel(ut, neg, self.op("Not", ut, x), self.op("BitwiseOr", ut, x, k(top)))

    def _bits_nan(self, x: int, wide: bool) -> int:
        ut = self.u64 if wide else self.u32
        k = self.b.const_u64 if wide else self.c
        mag = self.op("BitwiseAnd", ut, x, k((1 << (63 if wide else 31)) - 1))
        return self.op("UGreaterThan", self.bool_, mag, k(0x7FF0000000000000 if wide else 0x7F800000))

    def _bits_zero(self, x: int, wide: bool) -> int:
        ut = self.u64 if wide else self.u32
        k = self.b.const_u64 if wide else self.c
        return self.op("IEqual", self.bool_, self.op("BitwiseAnd", ut, x, k((1 << (63 if wide else 31)) - 1)), k(0))

    def fcmp(self, var: str, a: int, b: int, wide: bool) -> int:
        """setp.CMP on float bits a, b (u32 f32 bits, or u64 f64 bits): IEEE 754 §5.11, -0 == +0,
        every comparison with a NaN false except ``ne``; ``unord`` is true iff one is NaN."""
        ut = self.u64 if wide else self.u32
        k = self.b.const_u64 if wide else self.c
        nan = self.or_(self._bits_nan(a, wide), self._bits_nan(b, wide))
        if var == "unord":
            return nan
        az = self.sel(ut, self._bits_zero(a, wide), k(0), a)
        bz = self.sel(ut, self._bits_zero(b, wide), k(0), b)
        ka, kb = self._ord_key(az, wide), self._ord_key(bz, wide)
        if var in ("eq", "ne"):
            eq = self.and_(self.not_(nan), self.op("IEqual", self.bool_, ka, kb))
            return eq if var == "eq" else self.not_(eq)
        name = {"lt": "ULessThan", "le": "ULessThanEqual", "gt": "UGreaterThan", "ge": "UGreaterThanEqual"}[var]
        return self.and_(self.not_(nan), self.op(name, self.bool_, ka, kb))

    def minmax(self, op: str, t: T, a: int, b: int) -> int:
        """IEEE 754-2019 minimumNumber / maximumNumber on compute-type values; both NaN gives
        the canonical NaN (returned as bits of ``t``'s compute type: u32 or u64)."""
        wide = t is T.F64
        ut = self.u64 if wide else self.u32
        ab = self.op("Bitcast", ut, a)
        bb = self.op("Bitcast", ut, b)
        ka, kb = self._ord_key(ab, wide), self._ord_key(bb, wide)  # raw keys: -0 < +0 built in
        first = self.op("ULessThanEqual" if op == "min" else "UGreaterThanEqual", self.bool_, ka, kb)
        r = self.sel(ut, first, ab, bb)
        na, nb = self._bits_nan(ab, wide), self._bits_nan(bb, wide)
        r = self.sel(ut, nb, ab, r)
        r = self.sel(ut, na, bb, r)
        canon = self.b.const_u64(0x7FF8000000000000) if wide else self.c(0x7FC00000)
        return self.sel(ut, self.and_(na, nb), canon, r)

    def f2d(self, v: int) -> int:
        """float -> double, exact, subnormal inputs included (scaled from their integer
        significand instead of OpFConvert, which flushes them on NVIDIA)."""
        d = self.f64
        x = self.f32_bits(v)
        sub = self.ieq(self.iand(x, self.c(0x7F800000)), self.c(0))
        m = self.op("ConvertUToF", d, self.iand(x, self.c(0x7FFFFF)))
        sv = self.fop("FMul", d, m, self.b.const_f64(0x36A0000000000000))  # * 2^-149
        sv = self.sel(d, self.ieq(self.shr(x, 31), self.c(1)), self.op("FNegate", d, sv), sv)
        return self.sel(d, sub, sv, self.op("FConvert", d, v))

    def d2f(self, v: int) -> int:
        """double -> float rounded to nearest even, subnormal results included (|v| < 2^-126 is
        scaled by 2^149 and rounded to an integer significand in f64, exactly)."""
        d = self.f64
        av = self.ext(d, "FAbs", v)
        tiny = self.op("FOrdLessThan", self.bool_, av, self.b.const_f64(0x3810000000000000))  # 2^-126
        q = self.integral64("rint", self.fop("FMul", d, av, self.b.const_f64(0x4940000000000000)))  # * 2^149
        bits = self.op("UConvert", self.u32, self.op("ConvertFToU", self.u64, q))
        sign = self.op("UConvert", self.u32, self.op("ShiftRightLogical", self.u64, self.u64_of(v),
                                                     self.b.const_u64(32)))
        sub = self.ior(self.iand(sign, self.c(0x80000000)), bits)
        return self.sel(self.f32, tiny, self.bits_f32(sub), self.op("FConvert", self.f32, v))

    def sum_odd(self, p: int, c: int) -> int:
        """p + c (doubles) rounded to odd (Knuth's TwoSum error term decides the sticky bit)."""
        d = self.f64
        s = self.fop("FAdd", d, p, c)
        bb = self.fop("FSub", d, s, p)
        err = self.fop("FAdd", d, self.fop("FSub", d, p, self.fop("FSub", d, s, bb)), self.fop("FSub", d, c, bb))
        sb = self.u64_of(s)
        finite = self.not_(self.or_(self.isnan(s), self.op("IsInf", self.bool_, s)))
        even = self.ieq(self.op("BitwiseAnd", self.u64, sb, self.b.const_u64(1)), self.b.const_u64(0))
        inexact = self.op("FOrdNotEqual", self.bool_, err, self.b.const_f64(0))
        pos_err = self.op("FOrdGreaterThan", self.bool_, err, self.b.const_f64(0))
        nonneg = self.ieq(self.op("ShiftRightLogical", self.u64, sb, self.b.const_u64(63)), self.b.const_u64(0))
        away = self.op("LogicalEqual", self.bool_, pos_err, nonneg)
        stepped = self.sel(self.u64, away, self.op("IAdd", self.u64, sb, self.b.const_u64(1)),
                           self.op("ISub", self.u64, sb, self.b.const_u64(1)))
        fix = self.and_(inexact, finite, even)
        return self.f64_of(self.sel(self.u64, fix, stepped, sb))

    def d2f_odd(self, x: int) -> int:
        """double -> float rounded to odd (exact when rounded again to <= 22 significand bits)."""
        r = self.d2f(x)
        back = self.f2d(r)
        rb = self.f32_bits(r)
        inexact = self.op("FOrdNotEqual", self.bool_, back, x)
        finite = self.not_(self.or_(self.isnan(r), self.op("IsInf", self.bool_, r)))
        even = self.ieq(self.iand(rb, self.c(1)), self.c(0))
        gt = self.op("FOrdGreaterThan", self.bool_, x, back)
        nonneg = self.ieq(self.shr(rb, 31), self.c(0))
        away = self.op("LogicalEqual", self.bool_, gt, nonneg)
        stepped = self.sel(self.u32, away, self.add(rb, self.c(1)), self.op("ISub", self.u32, rb, self.c(1)))
        return self.bits_f32(self.sel(self.u32, self.and_(inexact, finite, even), stepped, rb))

    def fma_exact(self, a: int, b: int, c: int, t: T) -> int:
        """fma of f32 values a*b + c, rounded once to t (f32/f16/bf16) -> u32 bits."""
        p = self.fop("FMul", self.f64, self.f2d(a), self.f2d(b))  # exact: 48-bit product
        s = self.sum_odd(p, self.f2d(c))
        if t is T.F32:
            return self.f32_bits(self.d2f(s))
        f = self.d2f_odd(s)
        return self.f2h(f) if t is T.F16 else self.f2bf(f)

    def _neighbours(self, qb: int) -> tuple[int, int, int]:
        """For f32 magnitude bits qb: (q, midpoint to the next larger, midpoint to the next smaller)
        as doubles (exact)."""
        d = self.f64
        q = self.f2d(self.bits_f32(qb))
        up = self.f2d(self.bits_f32(self.add(qb, self.c(1))))
        dn = self.f2d(self.bits_f32(self.op("ISub", self.u32, qb, self.c(1))))
        half = self.b.const_f64(0x3FE0000000000000)
        return (q, self.fop("FMul", d, self.fop("FAdd", d, q, up), half),
                self.fop("FMul", d, self.fop("FAdd", d, q, dn), half))

    def _round_fix(self, qb: int, c_hi: int, c_lo: int, ok: int, ties: bool) -> int:
        """Step qb to the neighbour the exact value lies nearer to: c_hi = sign of (exact - upper
        midpoint), c_lo of (exact - lower midpoint), both as doubles; ties go to even."""
        zero = self.b.const_f64(0)
        even = self.ieq(self.iand(qb, self.c(1)), self.c(0))
        up_ = self.op("FOrdGreaterThan", self.bool_, c_hi, zero)
        dn_ = self.and_(self.op("FOrdLessThan", self.bool_, c_lo, zero),
                        self.op("UGreaterThan", self.bool_, qb, self.c(0)))
        if ties:
            up_ = self.or_(up_, self.and_(self.op("FOrdEqual", self.bool_, c_hi, zero), self.not_(even)))
            dn_ = self.or_(dn_, self.and_(self.op("FOrdEqual", self.bool_, c_lo, zero), self.not_(even),
                                          self.op("UGreaterThan", self.bool_, qb, self.c(0))))
        r = self.sel(self.u32, self.and_(ok, up_), self.add(qb, self.c(1)), qb)
        return self.sel(self.u32, self.and_(ok, dn_), self.op("ISub", self.u32, qb, self.c(1)), r)

    def div_exact(self, a: int, b: int) -> int:
        """Correctly rounded f32 a / b (floats) -> u32 bits."""
        d = self.f64
        ad, bd = self.f2d(a), self.f2d(b)
        q = self.d2f(self.fop("FDiv", d, ad, bd))
        qbits = self.f32_bits(q)
        sign = self.iand(qbits, self.c(0x80000000))
        qb = self.iand(qbits, self.c(0x7FFFFFFF))
        A = self.ext(d, "FAbs", ad)
        B = self.ext(d, "FAbs", bd)
        _, m_hi, m_lo = self._neighbours(qb)
        c_hi = self.fop("FSub", d, A, self.fop("FMul", d, m_hi, B))
        c_lo = self.fop("FSub", d, A, self.fop("FMul", d, m_lo, B))
        fin = lambda v: self.not_(self.or_(self.isnan(v), self.op("IsInf", self.bool_, v)))  # noqa: E731
        nz = lambda v: self.not_(self._bits_zero(self.f32_bits(v), False))  # noqa: E731
        ok = self.and_(fin(a), fin(b), nz(a), nz(b), self.op("ULessThan", self.bool_, qb, self.c(0x7F800000)))
        return self.ior(sign, self._round_fix(qb, c_hi, c_lo, ok, ties=True))

    def sqrt_exact(self, a: int) -> int:
        """Correctly rounded f32 sqrt(a) -> u32 bits; sqrt(-0) = -0, negative -> NaN."""
        d = self.f64
        ad = self.f2d(a)
        q = self.d2f(self.ext(d, "Sqrt", ad))
        qb = self.iand(self.f32_bits(q), self.c(0x7FFFFFFF))
        _, m_hi, m_lo = self._neighbours(qb)
        c_hi = self.fop("FSub", d, ad, self.fop("FMul", d, m_hi, m_hi))
        c_lo = self.fop("FSub", d, ad, self.fop("FMul", d, m_lo, m_lo))
        ab = self.f32_bits(a)
        zero = self._bits_zero(ab, False)
        negative = self.and_(self.ieq(self.shr(ab, 31), self.c(1)), self.not_(zero))
        pos = self.and_(self.not_(zero), self.not_(negative), self.not_(self.isnan(a)))
        ok = self.and_(pos, self.not_(self.op("IsInf", self.bool_, a)),
                       self.op("ULessThan", self.bool_, qb, self.c(0x7F800000)))
        r = self._round_fix(qb, c_hi, c_lo, ok, ties=False)
        r = self.sel(self.u32, negative, self.c(0x7FC00000), r)
        r = self.sel(self.u32, zero, ab, r)
        return self.sel(self.u32, self.isnan(a), self.c(0x7FC00000), r)

    def ext(self, rtype: int, inst: str, *args: int) -> int:
        return self.b.ext(rtype, inst, *args)

    def integral64(self, op: str, x: int) -> int:
        """floor/ceil/trunc/rint of a double on its bits (exact, sign of zero kept): lavapipe's
        f64 Trunc/RoundEven drop the sign of zero and misround."""
        d, u64 = self.f64, self.u64
        k = self.b.const_u64
        xb = self.u64_of(x)
        sign = self.op("BitwiseAnd", u64, xb, k(1 << 63))
        ax = self.op("BitwiseAnd", u64, xb, k((1 << 63) - 1))
        big = self.op("UGreaterThanEqual", self.bool_, ax, k(0x4330000000000000))  # |x| >= 2^52, inf, NaN
        if op == "rint":
            two52 = self.b.const_f64(0x4330000000000000)
            r = self.fop("FSub", d, self.fop("FAdd", d, self.f64_of(ax), two52), two52)
            rb = self.op("BitwiseOr", u64, self.u64_of(r), sign)
            return self.f64_of(self.sel(u64, big, xb, rb))
        e = self.op("UConvert", self.u32, self.op("ShiftRightLogical", u64, ax, k(52)))
        frac_bits = self.op("ISub", self.u32, self.c(1075), e)  # fraction bits below the unit, when e >= 1023
        small = self.op("ULessThan", self.bool_, e, self.c(1023))  # |x| < 1
        sh = self.sel(self.u32, small, self.c(0), frac_bits)
        mask = self.op("ISub", u64, self.op("ShiftLeftLogical", u64, k(1), self.op("UConvert", u64, sh)), k(1))
        t = self.op("BitwiseAnd", u64, xb, self.op("Not", u64, mask))
        t = self.sel(u64, small, sign, t)
        t = self.sel(u64, big, xb, t)
        tv = self.f64_of(t)
        if op == "trunc":
            return tv
        one = self.b.const_f64(0x3FF0000000000000)
        if op == "floor":
            adj = self.op("FOrdLessThan", self.bool_, x, tv)
            return self.sel(d, adj, self.fop("FSub", d, tv, one), tv)
        adj = self.op("FOrdGreaterThan", self.bool_, x, tv)
        return self.sel(d, adj, self.fop("FAdd", d, tv, one), tv)

    def two_sum(self, a: int, b: int) -> tuple[int, int]:
        d = self.f64
        s = self.fop("FAdd", d, a, b)
        bb = self.fop("FSub", d, s, a)
        return s, self.fop("FAdd", d, self.fop("FSub", d, a, self.fop("FSub", d, s, bb)), self.fop("FSub", d, b, bb))

    def fma64(self, a: int, b: int, c: int) -> int:
        """Correctly rounded double a*b + c without a fused multiply-add: Dekker's exact product
        (Veltkamp splitting) and Boldo & Melquiond's correctly rounded three-term sum
        (RN(th + RO(tl + ul)), 2008). Operands are first scaled by powers of two (exact) so that
        the split cannot overflow and the product's error term cannot underflow: a huge product or
        addend is computed 2^8 lower and scaled back up (exact, or the right overflow); a tiny
        product 2^200 higher, rounded to odd, then scaled down (one rounding into the subnormal
        range). Zero, infinite or NaN operands use the driver's Fma, exact there because the
        product is then exact; a finite product plus an infinite addend is the addend."""
        d = self.f64
        k = self.b.const_f64
        fabs = lambda v: self.ext(d, "FAbs", v)  # noqa: E731
        lt = lambda u, v: self.op("FOrdLessThan", self.bool_, u, v)  # noqa: E731
        fin = lambda v: self.not_(self.or_(self.isnan(v), self.op("IsInf", self.bool_, v)))  # noqa: E731
        two900, two_900, two800 = k(0x7830000000000000), k(0x07B0000000000000), k(0x71F0000000000000)
        ph0 = self.fop("FMul", d, a, b)
        P, C = fabs(ph0), fabs(c)
        nz = lambda v: self.op("FOrdNotEqual", self.bool_, v, k(0))  # noqa: E731
        ok = self.and_(fin(a), fin(b), fin(c), nz(a), nz(b))
        hi = self.and_(ok, self.not_(self.and_(lt(P, two900), lt(C, two900))))
        lo = self.and_(ok, self.not_(hi), lt(P, two_900))
        a_big = lt(fabs(b), fabs(a))
        # hi: the larger of a, b down by 2^8 and c down by 2^8; lo: the smaller up by 2^200, c too
        s_big = self.sel(d, hi, k(0x3F70000000000000), k(0x3FF0000000000000))  # 2^-8 or 1
        s_small = self.sel(d, lo, k(0x4C70000000000000), k(0x3FF0000000000000))  # 2^200 or 1
        sa = self.sel(d, a_big, s_big, s_small)
        sb = self.sel(d, a_big, s_small, s_big)
        sc = self.sel(d, hi, s_big, s_small)
        a1, b1, c1 = self.fop("FMul", d, a, sa), self.fop("FMul", d, b, sb), self.fop("FMul", d, c, sc)
        # keep the split from overflowing: move 2^100 from a huge operand to the other (exact)
        down, up = k(0x39B0000000000000), k(0x4630000000000000)  # 2^-100, 2^100
        ab = lt(two900, fabs(a1))
        bb = lt(two900, fabs(b1))
        a2 = self.sel(d, ab, self.fop("FMul", d, a1, down), self.sel(d, bb, self.fop("FMul", d, a1, up), a1))
        b2 = self.sel(d, ab, self.fop("FMul", d, b1, up), self.sel(d, bb, self.fop("FMul", d, b1, down), b1))
        split_c = k(0x41A0000002000000)  # 2^27 + 1

        def split(v: int) -> tuple[int, int]:
            t = self.fop("FMul", d, split_c, v)
            h = self.fop("FSub", d, t, self.fop("FSub", d, t, v))
            return h, self.fop("FSub", d, v, h)

        ph = self.fop("FMul", d, a2, b2)
        ah, al = split(a2)
        bh, bl = split(b2)
        pl = self.fop("FAdd", d, self.fop("FAdd", d, self.fop("FAdd", d, self.fop("FSub", d, self.fop(
            "FMul", d, ah, bh), ph), self.fop("FMul", d, ah, bl)), self.fop("FMul", d, al, bh)),
            self.fop("FMul", d, al, bl))
        uh, ul = self.two_sum(c1, pl)
        th, tl = self.two_sum(ph, uh)
        v = self.sum_odd(tl, ul)
        res = self.fop("FAdd", d, th, v)
        res = self.sel(d, hi, self.fop("FMul", d, res, k(0x4070000000000000)), res)  # * 2^8
        # a result below 2^-1022 once scaled back: round to odd here, round once when scaling down
        sub = self.and_(lo, lt(fabs(res), k(0x0C90000000000000)))  # 2^-822
        scaled = self.sel(d, sub, self.sum_odd(th, v), res)
        # [2^-823, 2^-822) scales to subnormals of 52 bits, one too many for round-to-odd at 53:
        # round th + v to the 2^-874 grid directly (RNE of |th| by adding 2^-822, then v decides)
        band = self.and_(sub, self.not_(lt(fabs(res), k(0x0C80000000000000))))
        sgn = self.op("FOrdLessThan", self.bool_, th, k(0))
        ath = fabs(th)
        cst = k(0x0C90000000000000)
        r = self.fop("FSub", d, self.fop("FAdd", d, ath, cst), cst)
        e = self.fop("FSub", d, ath, r)
        vs = self.sel(d, sgn, self.op("FNegate", d, v), v)
        h = k(0x0940000000000000)  # half the grid: 2^-875
        grid = k(0x0950000000000000)  # 2^-874
        q = self.op("ConvertFToU", self.u64, self.fop("FMul", d, r, k(0x7690000000000000)))  # r / 2^-874
        rodd = self.ieq(self.op("BitwiseAnd", self.u64, q, self.b.const_u64(1)), self.b.const_u64(1))
        du = self.fop("FAdd", d, self.fop("FSub", d, e, h), vs)
        dd = self.fop("FAdd", d, self.fop("FAdd", d, e, h), vs)
        zero = k(0)
        go_up = self.or_(lt(zero, du), self.and_(self.op("FOrdEqual", self.bool_, du, zero), rodd))
        go_dn = self.or_(lt(dd, zero), self.and_(self.op("FOrdEqual", self.bool_, dd, zero), rodd))
        rb = self.sel(d, go_up, self.fop("FAdd", d, r, grid), self.sel(d, go_dn, self.fop("FSub", d, r, grid), r))
        rb = self.sel(d, sgn, self.op("FNegate", d, rb), rb)
        scaled = self.sel(d, band, rb, scaled)
        res = self.sel(d, lo, self.fop("FMul", d, scaled, k(0x3370000000000000)), res)  # * 2^-200
        P2 = fabs(ph)
        two1020 = k(0x7FB0000000000000)
        exact_ok = self.and_(ok, lt(two_900, P2), lt(P2, two1020), lt(fabs(c1), two1020))
        out = self.sel(d, exact_ok, res, self.ext(d, "Fma", a, b, c))
        out = self.sel(d, self.and_(lo, self.not_(lt(C, two800))), c, out)  # a tiny product leaves a huge c
        return self.sel(d, self.and_(fin(a), fin(b), self.not_(fin(c))), c, out)
