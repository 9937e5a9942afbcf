"""The C helpers every C-family dialect shares (:data:`PRELUDE`), written in the C subset
OpenCL C and C++ have in common: f16/bf16 on their bits (exact widening, one
round-to-nearest-even back), minimumNumber/maximumNumber with -0 < +0, saturating
float->integer with NaN -> 0, and the round-to-odd steps of
:func:`anywave.backends.lowering.arith.narrowing_steps` (``aw_d2f_odd``, ``aw_i64_odd``,
``aw_u64_odd``; Boldo & Melquiond 2008). A dialect's header defines the integer types and
the bit casts ``AW_F32``/``AW_U32``/``AW_F64``/``AW_U64`` they use.
"""

#: the prefix reserved for the numbered locals, labels and parameters the renderer generates
#: (``awg_<kind><n>``: ``awg_c3`` a condition, ``awg_t7`` a temporary, ``awg_fo0`` a mask frame,
#: ``awg_f2`` a fragment slot, ``awg_b0``/``awg_s1``/``awg_n0`` parameters ...). Helpers of the
#: prelude and the dialect headers are ``aw_<name>`` / ``AW_<NAME>`` and never start with it, so a
#: generated name can never shadow one (issue 31, item 11: ``aw_c32``, the 32nd condition, hid the
#: NaN-canonicalising helper ``aw_c32``); tests/test_cfamily_names.py checks both sides.
GEN_PREFIX = "awg_"


def gen_name(kind: str, n: int | str) -> str:
    """The generated C name of kind ``kind`` (lower-case letters) and number ``n``: ``awg_<kind><n>``."""
    return f"{GEN_PREFIX}{kind}{n}"


#: helpers shared by every dialect, in the C subset OpenCL C and C++ have in common.
PRELUDE = r"""
#ifndef AW_FN
#define AW_FN static inline
#endif
AW_FN bool aw_isnan32(float x) { return x != x; }
AW_FN u32 aw_c32(float x) { return x != x ? 0x7FC00000u : AW_U32(x); }
/* bit reversal by bytes (Anderson's 64-bit multiply/modulus trick): written so that LLVM does
   not turn it into llvm.bitreverse, which one SYCL JIT path cannot read back */
AW_FN u32 aw_rev8(u32 b) { return (u32)((((u64)b * 0x0202020202ul) & 0x010884422010ul) % 1023ul); }
AW_FN u32 aw_brev(u32 x) {
  return (aw_rev8(x & 0xFFu) << 24) | (aw_rev8((x >> 8) & 0xFFu) << 16) | (aw_rev8((x >> 16) & 0xFFu) << 8)
         | aw_rev8(x >> 24);
}
/* f16 / bf16 bits (low half of a register) <-> float, exact in this direction */
AW_FN float aw_h2f(u32 h) {
  u32 s = (h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
  if (e == 0u) return AW_F32(AW_U32((float)m * 0x1p-24f) | s);
  if (e == 31u) return AW_F32(s | 0x7F800000u | (m << 13));
  return AW_F32(s | ((e + 112u) << 23) | (m << 13));
}
AW_FN float aw_bf2f(u32 h) { return AW_F32((h & 0xFFFFu) << 16); }
/* float -> f16 bits, one round-to-nearest-even, overflow to inf, NaN canonical (0x7E00) */
AW_FN u32 aw_f2h(float f) {
  u32 x = AW_U32(f), s = (x >> 16) & 0x8000u, ax = x & 0x7FFFFFFFu;
  if (ax > 0x7F800000u) return 0x7E00u;
  if (ax >= 0x47800000u) return s | 0x7C00u;
  if (ax < 0x38800000u) return s | (u32)AW_RINT(AW_F32(ax) * 0x1p24f);
  u32 r = ax - 0x38000000u;
  return s | ((r + 0xFFFu + ((r >> 13) & 1u)) >> 13);
}
/* float -> bf16 bits, RNE, NaN canonical (0x7FC0) */
AW_FN u32 aw_f2bf(float f) {
  u32 b = AW_U32(f);
  if ((b & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FC0u;
  return ((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16) & 0xFFFFu;
}
AW_FN float aw_minnum(float a, float b) {
  if (a != a) return b; if (b != b) return a;
  if (a < b) return a; if (b < a) return b;
  return (AW_U32(a) & 0x80000000u) ? a : b;
}
AW_FN float aw_maxnum(float a, float b) {
  if (a != a) return b; if (b != b) return a;
  if (a > b) return a; if (b > a) return b;
  return (AW_U32(a) & 0x80000000u) ? b : a;
}
/* float -> integer: truncate toward zero, saturate, NaN -> 0 (spec "Conversions"). |x| < 1 gives
   0 explicitly in the signed ones: Intel's OpenCL CPU compiler folds int->float(float->int x) to
   trunc(x), which is -0.0 for x in (-1, 0) where WAVE (and C) give +0.0 */
AW_FN u32 aw_f2i32(float x) {
  if (x != x || (x > -1.0f && x < 1.0f)) return 0u; if (x >= 2147483648.0f) return 0x7FFFFFFFu;
  if (x <= -2147483648.0f) return 0x80000000u; return (u32)(i32)x;
}
AW_FN u32 aw_f2u32(float x) {
  if (x != x || x <= 0.0f) return 0u; if (x >= 4294967296.0f) return 0xFFFFFFFFu; return (u32)x;
}
AW_FN u64 aw_f2i64(float x) {
  if (x != x || (x > -1.0f && x < 1.0f)) return 0ul; if (x >= 9223372036854775808.0f) return 0x7FFFFFFFFFFFFFFFul;
  if (x <= -9223372036854775808.0f) return 0x8000000000000000ul; return (u64)(i64)x;
}
AW_FN u64 aw_f2u64(float x) {
  if (x != x || x <= 0.0f) return 0ul; if (x >= 18446744073709551616.0f) return 0xFFFFFFFFFFFFFFFFul;
  return (u64)x;
}
#if AW_HAS_F64
AW_FN u64 aw_c64(double x) { return x != x ? 0x7FF8000000000000ul : AW_U64(x); }
AW_FN double aw_minnum64(double a, double b) {
  if (a != a) return b; if (b != b) return a;
  if (a < b) return a; if (b < a) return b;
  return (AW_U64(a) >> 63) ? a : b;
}
AW_FN double aw_maxnum64(double a, double b) {
  if (a != a) return b; if (b != b) return a;
  if (a > b) return a; if (b > a) return b;
  return (AW_U64(a) >> 63) ? b : a;
}
/* double -> float rounded to odd: truncate, then set the last bit if inexact */
AW_FN float aw_d2f_odd(double x) {
  float r = (float)x;
  double back = (double)r;
  if (back != x && x == x && back - back == 0.0 && (AW_U32(r) & 1u) == 0u) {
    u32 b = AW_U32(r);
    /* the exact value lies between r and its neighbour towards x: step that way */
    bool away = (x > back) == ((b >> 31) == 0u);
    r = AW_F32(away ? b + 1u : b - 1u);
  }
  return r;
}
AW_FN u32 aw_d2h(double x) { return aw_f2h(aw_d2f_odd(x)); }
AW_FN u32 aw_d2bf(double x) { return aw_f2bf(aw_d2f_odd(x)); }
/* p + c rounded to odd (Knuth TwoSum), p and c exact doubles */
AW_FN double aw_sum_odd(double p, double c) {
  double s = p + c, bb = s - p, err = (p - (s - bb)) + (c - bb);
  if (err != 0.0 && s - s == 0.0 && (AW_U64(s) & 1ul) == 0ul) {
    u64 b = AW_U64(s);
    bool away = (err > 0.0) == ((b >> 63) == 0ul);
    s = AW_F64(away ? b + 1ul : b - 1ul);
  }
  return s;
}
AW_FN double aw_i64_odd(i64 v) { return aw_sum_odd((double)(v >> 32) * 4294967296.0, (double)(v & 0xFFFFFFFFl)); }
AW_FN double aw_u64_odd(u64 v) { return aw_sum_odd((double)(v >> 32) * 4294967296.0, (double)(v & 0xFFFFFFFFul)); }
AW_FN u32 aw_fma16(float a, float b, float c, bool bf) {
  double s = aw_sum_odd((double)a * (double)b, (double)c);
  return bf ? aw_d2bf(s) : aw_d2h(s);
}
AW_FN u32 aw_d2i32(double x) {
  if (x != x || (x > -1.0 && x < 1.0)) return 0u; if (x >= 2147483647.0) return 0x7FFFFFFFu;
  if (x <= -2147483648.0) return 0x80000000u; return (u32)(i32)x;
}
AW_FN u32 aw_d2u32(double x) {
  if (x != x || x <= 0.0) return 0u; if (x >= 4294967295.0) return 0xFFFFFFFFu; return (u32)x;
}
AW_FN u64 aw_d2i64(double x) {
  if (x != x || (x > -1.0 && x < 1.0)) return 0ul; if (x >= 9223372036854775808.0) return 0x7FFFFFFFFFFFFFFFul;
  if (x <= -9223372036854775808.0) return 0x8000000000000000ul; return (u64)(i64)x;
}
AW_FN u64 aw_d2u64(double x) {
  if (x != x || x <= 0.0) return 0ul; if (x >= 18446744073709551616.0) return 0xFFFFFFFFFFFFFFFFul;
  return (u64)x;
}
#endif
"""
