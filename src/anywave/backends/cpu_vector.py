"""The cpu target's vector spellings (issue 29): WAVE instructions on :data:`V` lanes at once.

:mod:`anywave.backends.cpu` runs a lane block (the code between two points that need every lane
of the workgroup) as a loop over *chunks* of ``V = 8`` lanes; each register of the block is a
GCC/Clang vector of the chunk's lanes (``aw_vu``: ``u32 __attribute__((vector_size(32)))``, one
AVX register; predicates and masks hold 0/1 per lane, like the ``[P]`` arrays between blocks).
An instruction spelt here is a handful of vector operations; any other runs the C family's
scalar statement (:mod:`anywave.backends.cfamily_ops`) once per lane of the chunk, so what is
spelt here is an optimisation and every result stays the scalar spelling's:

* integer and predicate bodies (:mod:`anywave.isa.bodies`) of 32-bit operands: the same
  expression tree, spelt with vector operators (:data:`VEC_SPELLING`); shift counts are masked
  to 0..31 in both arms of the body's select, so no lane shifts by 32 or more;
* f32 ``add``/``sub``/``mul``/``div``/``fma``/``sqrt``/``floor``/``ceil``/``trunc``/``rint``
  (IEEE operations: the vector instructions round as the scalar ones do), ``min``/``max``
  (minNum/maxNum by selects, as ``aw_minnum``), ``neg``/``abs`` (sign bit), compares, the
  i32/u32 <-> f32 conversions (truncation toward zero, saturation and NaN -> 0 of
  ``aw_f2i32``/``aw_f2u32`` written as selects); every float result NaN-canonical
  (``aw_vc32``);
* moves, immediates, kernel arguments and special registers;
* loads and stores of 4, 8 and 16 bytes: when every lane of the chunk executes the access and
  the lanes' offsets are consecutive (lane j at lane 0's + j * size, without wrapping), one
  vector access (and a transpose for 8- and 16-byte accesses); when every lane reads the same
  address, one load broadcast; otherwise one access per executing lane, in lane order.

Chunks run one after another, each through the whole block (lane-major order, as before): a
lane sees its own earlier stores; other lanes' stores without a fence between are unordered
(spec §5.3).
"""

from __future__ import annotations

from typing import Any

from anywave.backends.lowering.bodies import BodySpelling, render_record
from anywave.binary.module import DeviceAddr, Instruction, LocalAddr, Pred
from anywave.isa.bodies import operand_types, result_type
from anywave.isa.expr import Expr
from anywave.isa.table import Operand
from anywave.isa.types import ScalarType, SpecialRegister

T = ScalarType
S = SpecialRegister

#: lanes per chunk (one 256-bit vector of u32)
V = 8

#: C helpers of the vector spellings (after the cpu header and the C-family prelude)
VEC_HEADER = r"""
#define AW_V 8
typedef u32 aw_vu __attribute__((vector_size(32)));
typedef i32 aw_vi __attribute__((vector_size(32)));
typedef float aw_vf __attribute__((vector_size(32)));
#if defined(__AVX__)
#include <immintrin.h>
#endif
#if defined(__clang__) || __GNUC__ >= 12
#define AW_SHUF(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
#define AW_SHUF(a, b, ...) __builtin_shuffle(a, b, (aw_vu){__VA_ARGS__})
#endif
static const aw_vu AW_IOTA = {0u, 1u, 2u, 3u, 4u, 5u, 6u, 7u};
/* a scalar broadcast to every lane (a vector stays itself) */
#define AW_VB(x) ((aw_vu){0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u} + (x))
/* a vector compare's lanes (0 or all ones) as 0 / 1 */
#define AW_B(m) ((aw_vu)(m) & 1u)
/* c ? a : b per lane (c: 0 / 1) */
AW_FN aw_vu aw_vsel(aw_vu c, aw_vu a, aw_vu b) {
#if defined(__AVX__)
  return (aw_vu)_mm256_blendv_ps((__m256)b, (__m256)a, (__m256)(c << 31));
#else
  const aw_vu m = -c; return (a & m) | (b & ~m);
#endif
}
AW_FN aw_vu aw_vld(const u32 *p) { aw_vu v; memcpy(&v, p, sizeof v); return v; }
AW_FN void aw_vst(u32 *p, aw_vu v) { memcpy(p, &v, sizeof v); }
/* every lane of c non-zero / some lane non-zero */
AW_FN u32 aw_vall(aw_vu c) {
#if defined(__AVX__)
  const __m256i z = (__m256i)(c == 0u); return (u32)_mm256_testz_si256(z, z);
#else
  u32 r = 1u; for (int j = 0; j < AW_V; ++j) r &= c[j] != 0u; return r;
#endif
}
AW_FN u32 aw_vany(aw_vu c) {
#if defined(__AVX__)
  return (u32)!_mm256_testz_si256((__m256i)c, (__m256i)c);
#else
  u32 r = 0u; for (int j = 0; j < AW_V; ++j) r |= c[j]; return r != 0u;
#endif
}
/* lane state: chunk c's vector of a slot is s[c * ns + slot]; lane l of it as u32 */
#define AWL(slot, l) (((u32 *)awg_S)[((l) / AW_V) * (AW_NS * AW_V) + (slot) * AW_V + ((l) % AW_V)])
/* lanes set (0 / 1 each) in a slot over nc chunks; whether any is */
AW_FN u32 aw_vcount_s(const aw_vu *s, u32 ns, u32 slot, u32 nc) {
  aw_vu t = AW_VB(0u);
  for (u32 i = 0; i < nc; ++i) t += s[i * ns + slot];
  u32 r = 0u; for (int j = 0; j < AW_V; ++j) r += t[j];
  return r;
}
AW_FN u32 aw_any_s(const aw_vu *s, u32 ns, u32 slot, u32 nc) {
  aw_vu t = AW_VB(0u);
  for (u32 i = 0; i < nc; ++i) t |= s[i * ns + slot];
  return aw_vany(t);
}
#define AW_VF(u) ((aw_vf)(u))
AW_FN aw_vu aw_vc32(aw_vf x) {
#if defined(__AVX__)
  const __m256 nan = _mm256_cmp_ps((__m256)x, (__m256)x, _CMP_UNORD_Q);
  return (aw_vu)_mm256_blendv_ps((__m256)x, (__m256)AW_VB(0x7FC00000u), nan);
#else
  const aw_vu m = (aw_vu)(x != x); return ((aw_vu)x & ~m) | (m & 0x7FC00000u);
#endif
}
AW_FN aw_vf aw_vfma(aw_vf a, aw_vf b, aw_vf c) {
#if defined(__FMA__)
  return (aw_vf)_mm256_fmadd_ps((__m256)a, (__m256)b, (__m256)c);
#else
  aw_vf r; for (int j = 0; j < AW_V; ++j) r[j] = fmaf(a[j], b[j], c[j]); return r;
#endif
}
#if defined(__AVX__)
#define aw_vsqrt(a) ((aw_vf)_mm256_sqrt_ps((__m256)(a)))
#define AW_VROUND(a, m, f) ((aw_vf)_mm256_round_ps((__m256)(a), (m) | _MM_FROUND_NO_EXC))
#else
AW_FN aw_vf aw_vsqrt(aw_vf a) { aw_vf r; for (int j = 0; j < AW_V; ++j) r[j] = sqrtf(a[j]); return r; }
AW_FN aw_vf aw_vround_(aw_vf a, float (*f)(float)) { aw_vf r; for (int j = 0; j < AW_V; ++j) r[j] = f(a[j]); return r; }
#define AW_VROUND(a, m, f) aw_vround_(a, f)
#define _MM_FROUND_TO_NEG_INF 0
#define _MM_FROUND_TO_POS_INF 0
#define _MM_FROUND_TO_ZERO 0
#define _MM_FROUND_TO_NEAREST_INT 0
#endif
#define aw_vfloor(a) AW_VROUND(a, _MM_FROUND_TO_NEG_INF, floorf)
#define aw_vceil(a) AW_VROUND(a, _MM_FROUND_TO_POS_INF, ceilf)
#define aw_vtrunc(a) AW_VROUND(a, _MM_FROUND_TO_ZERO, truncf)
#define aw_vrint(a) AW_VROUND(a, _MM_FROUND_TO_NEAREST_INT, rintf)
/* minNum / maxNum as aw_minnum / aw_maxnum (a NaN operand gives the other; -0 < +0): the x86
   min/max give their second operand for a NaN or for equal values; equal values take a | b (min)
   or a & b (max) -- the same value, or -0 / +0 for a signed-zero pair; a NaN b gives a */
#if defined(__AVX__)
AW_FN aw_vf aw_vminnum(aw_vf a, aw_vf b) {
  const __m256 A = (__m256)a, B = (__m256)b;
  __m256 r = _mm256_min_ps(A, B);
  r = _mm256_blendv_ps(r, _mm256_or_ps(A, B), _mm256_cmp_ps(A, B, _CMP_EQ_OQ));
  return (aw_vf)_mm256_blendv_ps(r, A, _mm256_cmp_ps(B, B, _CMP_UNORD_Q));
}
AW_FN aw_vf aw_vmaxnum(aw_vf a, aw_vf b) {
  const __m256 A = (__m256)a, B = (__m256)b;
  __m256 r = _mm256_max_ps(A, B);
  r = _mm256_blendv_ps(r, _mm256_and_ps(A, B), _mm256_cmp_ps(A, B, _CMP_EQ_OQ));
  return (aw_vf)_mm256_blendv_ps(r, A, _mm256_cmp_ps(B, B, _CMP_UNORD_Q));
}
#else
AW_FN aw_vf aw_vminnum(aw_vf a, aw_vf b) {
  const aw_vu na = (aw_vu)(a != a), nb = (aw_vu)(b != b), lt = (aw_vu)(a < b), gt = (aw_vu)(b < a);
  const aw_vu ua = (aw_vu)a, ub = (aw_vu)b, sa = -(ua >> 31);
  aw_vu r = (sa & ua) | (~sa & ub);
  r = (gt & ub) | (~gt & r); r = (lt & ua) | (~lt & r);
  r = (nb & ua) | (~nb & r); r = (na & ub) | (~na & r);
  return (aw_vf)r;
}
AW_FN aw_vf aw_vmaxnum(aw_vf a, aw_vf b) {
  const aw_vu na = (aw_vu)(a != a), nb = (aw_vu)(b != b), gt = (aw_vu)(a > b), lt = (aw_vu)(b > a);
  const aw_vu ua = (aw_vu)a, ub = (aw_vu)b, sa = -(ua >> 31);
  aw_vu r = (sa & ub) | (~sa & ua);
  r = (lt & ub) | (~lt & r); r = (gt & ua) | (~gt & r);
  r = (nb & ua) | (~nb & r); r = (na & ub) | (~na & r);
  return (aw_vf)r;
}
#endif
/* f32 -> i32 / u32: truncate toward zero, saturate, NaN -> 0 (aw_f2i32 / aw_f2u32); the value
   converted is first put in range, so every conversion is defined */
AW_FN aw_vu aw_vf2i32(aw_vf x) {
#if defined(__AVX__)
  /* cvttps2dq gives 0x80000000 for NaN and out of range: right for x <= -2^31 */
  const __m256 X = (__m256)x;
  __m256i t = _mm256_cvttps_epi32(X);
  const __m256 big = _mm256_cmp_ps(X, (__m256)AW_VB(0x4F000000u), _CMP_GE_OQ); /* x >= 2^31 */
  t = (__m256i)_mm256_blendv_ps((__m256)t, (__m256)AW_VB(0x7FFFFFFFu), big);
  return (aw_vu)_mm256_andnot_ps(_mm256_cmp_ps(X, X, _CMP_UNORD_Q), (__m256)t);
#else
  const aw_vu nan = (aw_vu)(x != x), hi = (aw_vu)(x >= 2147483648.0f), lo = (aw_vu)(x <= -2147483648.0f);
  const aw_vf safe = (aw_vf)((aw_vu)x & ~(nan | hi | lo));
  const aw_vu t = (aw_vu)__builtin_convertvector(safe, aw_vi);
  return (t & ~(nan | hi | lo)) | (hi & 0x7FFFFFFFu) | (lo & 0x80000000u);
#endif
}
AW_FN aw_vu aw_vf2u32(aw_vf x) {
  const aw_vu zero = ~(aw_vu)(x > 0.0f), hi = (aw_vu)(x >= 4294967296.0f);
  const aw_vf safe = (aw_vf)((aw_vu)x & ~(zero | hi));
  const aw_vu big = (aw_vu)(safe >= 2147483648.0f);
  const aw_vf low = (aw_vf)(((aw_vu)(safe - 2147483648.0f) & big) | ((aw_vu)safe & ~big));
  const aw_vu t = (aw_vu)__builtin_convertvector(low, aw_vi) ^ (big & 0x80000000u);
  return (t & ~(zero | hi)) | hi;
}
/* 32-bit division (the body keeps a zero divisor and MIN / -1 out): through double, exact -- the
   double quotient of integers below 2^53 never rounds across an integer, so its truncation is
   the integer quotient */
typedef double aw_vd __attribute__((vector_size(64)));
AW_FN aw_vu aw_vsdiv(aw_vu a, aw_vu b) {
  const aw_vd q = __builtin_convertvector((aw_vi)a, aw_vd) / __builtin_convertvector((aw_vi)b, aw_vd);
  return (aw_vu)__builtin_convertvector(q, aw_vi);
}
typedef long long aw_vl __attribute__((vector_size(64)));
AW_FN aw_vu aw_vudiv(aw_vu a, aw_vu b) {
  const aw_vd q = __builtin_convertvector(a, aw_vd) / __builtin_convertvector(b, aw_vd);
  /* q in [0, 2^32): its part from 2^31 up (exact) goes in the top bit, the rest converts as i32 */
  const aw_vd two31 = (aw_vd){0, 0, 0, 0, 0, 0, 0, 0} + 2147483648.0;
  const aw_vl hi = q >= two31;
  const aw_vd low = q - (aw_vd)((aw_vl)two31 & hi);
  return (aw_vu)__builtin_convertvector(low, aw_vi) ^ ((aw_vu)__builtin_convertvector(hi, aw_vi) & 0x80000000u);
}
#define aw_vsrem(a, b) ((a) - aw_vsdiv(a, b) * (b))
#define aw_vurem(a, b) ((a) - aw_vudiv(a, b) * (b))
/* ex2.approx.f32 as the emulator computes it: 2^x in double, rounded once to float. 2^x = 2^k *
   2^f, k = rint(x), f = x - k in [-1/2, 1/2] (exact); 2^f by its Taylor series in f to degree 13
   (truncation below 5e-18); the scaling by 2^k is exact; then one rounding to float (overflow
   to inf, underflow through the subnormals to 0 as IEEE rounds). x is clamped to [-160, 130]
   first (the same float results); NaN stays NaN (canonical after aw_vc32). */
AW_FN aw_vf aw_vex2(aw_vf x) {
  const aw_vd z = (aw_vd){0, 0, 0, 0, 0, 0, 0, 0};
  aw_vd d = __builtin_convertvector(x, aw_vd);
  const aw_vl nan = d != d, lo = d < -160.0, hi = d > 130.0;
  d = (aw_vd)(((aw_vl)d & ~(nan | lo | hi)) | ((aw_vl)(z - 160.0) & lo) | ((aw_vl)(z + 130.0) & hi));
  const aw_vd magic = z + 6755399441055744.0; /* 1.5 * 2^52: adding it rounds to an integer (to even) */
  const aw_vd km = d + magic;
  const aw_vd f = d - (km - magic);
  /* ln(2)^n / n!, n = 13 .. 0 */
  aw_vd p = z + 1.3691488853904128e-12;
  p = p * f + 2.5678435993488206e-11; p = p * f + 4.4455382718708116e-10; p = p * f + 7.054911620801123e-09;
  p = p * f + 1.01780860092397e-07; p = p * f + 1.321548679014431e-06; p = p * f + 1.5252733804059841e-05;
  p = p * f + 0.0001540353039338161; p = p * f + 0.0013333558146428443; p = p * f + 0.009618129107628477;
  p = p * f + 0.05550410866482158; p = p * f + 0.24022650695910072; p = p * f + 0.6931471805599453;
  p = p * f + 1.0;
  /* 2^k from k's bits in km (low bits: k + 1.5 * 2^52's integer part) */
  const aw_vl k = (aw_vl)km - (aw_vl)magic;
  const aw_vd r = p * (aw_vd)((k + 1023) << 52);
  const aw_vf out = __builtin_convertvector(r, aw_vf);
  const aw_vu nan32 = (aw_vu)__builtin_convertvector(nan, aw_vi);
  return (aw_vf)(((aw_vu)out & ~nan32) | ((aw_vu)x & nan32));
}
#define aw_vi2f(v) ((aw_vu)__builtin_convertvector((aw_vi)(v), aw_vf))
#define aw_vu2f(v) ((aw_vu)__builtin_convertvector((aw_vu)(v), aw_vf))
/* memory: a lane's byte address is base + (u64)o + (u64)c (o: the lane's u32 register, c the
   instruction's constant; for local memory o already holds the wrapped u32 offset and c is 0).
   Contiguous: every lane executes and lane j's offset is lane 0's + j * size, without wrapping */
#define AW_AT(b, o, c) ((b) + (u64)(o) + (u64)(i64)(c))
AW_FN u32 aw_vcontig(aw_vu go, aw_vu o, u32 size) {
  return aw_vall(go) & (u32)(o[0] <= 0xFFFFFFFFu - size * (AW_V - 1u)) & aw_vall(AW_B(o == o[0] + size * AW_IOTA));
}
AW_FN u32 aw_vsame(aw_vu go, aw_vu o) { return aw_vall(go) & aw_vall(AW_B(o == o[0])); }
/* the per-lane paths (lanes that do not all execute, or scattered offsets): out of line, so the
   inline fast paths keep the block's values in registers */
#define AW_COLD static __attribute__((noinline, cold))
/* each word copied with a 4-byte memcpy (a constant size: one move; a run-time size 4 * words
   became a `rep movsb` per lane, 12% of the fp32 GEMM's time on the cpu target) */
AW_COLD void aw_vld_lanes(const u8 *b, aw_vu go, aw_vu o, i64 c, u32 words, aw_vu *d) {
  for (int j = 0; j < AW_V; ++j) {
    if (!go[j]) {  /* an inactive lane's address is not formed: it may be anything */
      for (u32 w = 0; w < words; ++w) d[w][j] = 0u;
      continue;
    }
    const u8 *p = AW_AT(b, o[j], c);
    for (u32 w = 0; w < words; ++w) { u32 s; memcpy(&s, p + 4u * w, 4u); d[w][j] = s; }
  }
}
AW_COLD void aw_vst_lanes(u8 *b, aw_vu go, aw_vu o, i64 c, u32 words, const aw_vu *v) {
  for (int j = 0; j < AW_V; ++j) {
    if (!go[j]) continue;
    u8 *p = AW_AT(b, o[j], c);
    for (u32 w = 0; w < words; ++w) { const u32 s = v[w][j]; memcpy(p + 4u * w, &s, 4u); }
  }
}
AW_FN aw_vu aw_vld4(const u8 *b, aw_vu go, aw_vu o, i64 c) {
  aw_vu v;
  if (__builtin_expect(aw_vcontig(go, o, 4u), 1)) { memcpy(&v, AW_AT(b, o[0], c), sizeof v); return v; }
  if (!aw_vany(go)) return AW_VB(0u);
  if (aw_vsame(go, o)) { u32 s; memcpy(&s, AW_AT(b, o[0], c), 4); return AW_VB(s); }
  aw_vld_lanes(b, go, o, c, 1u, &v);
  return v;
}
AW_FN void aw_vld8(const u8 *b, aw_vu go, aw_vu o, i64 c, aw_vu *d0, aw_vu *d1) {
  if (__builtin_expect(aw_vcontig(go, o, 8u), 1)) {
    aw_vu x0, x1; memcpy(&x0, AW_AT(b, o[0], c), 32); memcpy(&x1, AW_AT(b, o[0], c) + 32, 32);
    *d0 = AW_SHUF(x0, x1, 0, 2, 4, 6, 8, 10, 12, 14); *d1 = AW_SHUF(x0, x1, 1, 3, 5, 7, 9, 11, 13, 15);
    return;
  }
  if (!aw_vany(go)) { *d0 = AW_VB(0u); *d1 = AW_VB(0u); return; }
  if (aw_vsame(go, o)) { u32 s[2]; memcpy(s, AW_AT(b, o[0], c), 8); *d0 = AW_VB(s[0]); *d1 = AW_VB(s[1]); return; }
  aw_vu v[2]; aw_vld_lanes(b, go, o, c, 2u, v); *d0 = v[0]; *d1 = v[1];
}
AW_FN void aw_vld16(const u8 *b, aw_vu go, aw_vu o, i64 c, aw_vu *d0, aw_vu *d1, aw_vu *d2, aw_vu *d3) {
  if (__builtin_expect(aw_vcontig(go, o, 16u), 1)) {
    const u8 *p = AW_AT(b, o[0], c);
    aw_vu x0, x1, x2, x3; memcpy(&x0, p, 32); memcpy(&x1, p + 32, 32); memcpy(&x2, p + 64, 32); memcpy(&x3, p + 96, 32);
    const aw_vu t0 = AW_SHUF(x0, x1, 0, 4, 8, 12, 1, 5, 9, 13), t1 = AW_SHUF(x0, x1, 2, 6, 10, 14, 3, 7, 11, 15);
    const aw_vu t2 = AW_SHUF(x2, x3, 0, 4, 8, 12, 1, 5, 9, 13), t3 = AW_SHUF(x2, x3, 2, 6, 10, 14, 3, 7, 11, 15);
    *d0 = AW_SHUF(t0, t2, 0, 1, 2, 3, 8, 9, 10, 11); *d1 = AW_SHUF(t0, t2, 4, 5, 6, 7, 12, 13, 14, 15);
    *d2 = AW_SHUF(t1, t3, 0, 1, 2, 3, 8, 9, 10, 11); *d3 = AW_SHUF(t1, t3, 4, 5, 6, 7, 12, 13, 14, 15);
    return;
  }
  if (!aw_vany(go)) { *d0 = AW_VB(0u); *d1 = AW_VB(0u); *d2 = AW_VB(0u); *d3 = AW_VB(0u); return; }
  if (aw_vsame(go, o)) {
    u32 s[4]; memcpy(s, AW_AT(b, o[0], c), 16);
    *d0 = AW_VB(s[0]); *d1 = AW_VB(s[1]); *d2 = AW_VB(s[2]); *d3 = AW_VB(s[3]); return;
  }
  aw_vu v[4]; aw_vld_lanes(b, go, o, c, 4u, v); *d0 = v[0]; *d1 = v[1]; *d2 = v[2]; *d3 = v[3];
}
AW_FN void aw_vst4(u8 *b, aw_vu go, aw_vu o, i64 c, aw_vu v) {
  if (__builtin_expect(aw_vcontig(go, o, 4u), 1)) { memcpy(AW_AT(b, o[0], c), &v, sizeof v); return; }
  if (!aw_vany(go)) return;
  aw_vst_lanes(b, go, o, c, 1u, &v);
}
AW_FN void aw_vst8(u8 *b, aw_vu go, aw_vu o, i64 c, aw_vu v0, aw_vu v1) {
  if (__builtin_expect(aw_vcontig(go, o, 8u), 1)) {
    const aw_vu x0 = AW_SHUF(v0, v1, 0, 8, 1, 9, 2, 10, 3, 11), x1 = AW_SHUF(v0, v1, 4, 12, 5, 13, 6, 14, 7, 15);
    memcpy(AW_AT(b, o[0], c), &x0, 32); memcpy(AW_AT(b, o[0], c) + 32, &x1, 32); return;
  }
  if (!aw_vany(go)) return;
  const aw_vu v[2] = {v0, v1}; aw_vst_lanes(b, go, o, c, 2u, v);
}
AW_FN void aw_vst16(u8 *b, aw_vu go, aw_vu o, i64 c, aw_vu v0, aw_vu v1, aw_vu v2, aw_vu v3) {
  if (__builtin_expect(aw_vcontig(go, o, 16u), 1)) {
    const aw_vu t0 = AW_SHUF(v0, v1, 0, 8, 1, 9, 2, 10, 3, 11), t1 = AW_SHUF(v0, v1, 4, 12, 5, 13, 6, 14, 7, 15);
    const aw_vu t2 = AW_SHUF(v2, v3, 0, 8, 1, 9, 2, 10, 3, 11), t3 = AW_SHUF(v2, v3, 4, 12, 5, 13, 6, 14, 7, 15);
    const aw_vu x0 = AW_SHUF(t0, t2, 0, 1, 8, 9, 2, 3, 10, 11), x1 = AW_SHUF(t0, t2, 4, 5, 12, 13, 6, 7, 14, 15);
    const aw_vu x2 = AW_SHUF(t1, t3, 0, 1, 8, 9, 2, 3, 10, 11), x3 = AW_SHUF(t1, t3, 4, 5, 12, 13, 6, 7, 14, 15);
    u8 *p = AW_AT(b, o[0], c);
    memcpy(p, &x0, 32); memcpy(p + 32, &x1, 32); memcpy(p + 64, &x2, 32); memcpy(p + 96, &x3, 32); return;
  }
  if (!aw_vany(go)) return;
  const aw_vu v[4] = {v0, v1, v2, v3}; aw_vst_lanes(b, go, o, c, 4u, v);
}
"""


class NoVector(Exception):
    """The instruction has no vector spelling here: the scalar statement runs per lane."""


def _v(e: str) -> str:
    """``e`` as a vector (a scalar constant is broadcast)."""
    return f"AW_VB({e})"


def _vbin(sym: str, signed: bool = False):  # noqa: ANN202
    def f(x: Any, n: Expr, v: list[str]) -> str:
        ty = n.args[0].ty
        if ty not in ("b32", "pred") or n.ty not in ("b32", "pred"):
            raise NoVector(n.op)
        if sym in ("==", "!=", "<", "<="):
            a, b = (f"(aw_vi){_v(v[0])}", f"(aw_vi){_v(v[1])}") if signed else (_v(v[0]), v[1])
            return f"AW_B({a} {sym} {b})"
        return f"({_v(v[0])} {sym} {v[1]})"
    return f


def _vshift(kind: str):  # noqa: ANN202
    def f(x: Any, n: Expr, v: list[str]) -> str:
        if n.ty != "b32":
            raise NoVector(n.op)
        cnt = f"({_v(v[1])} & 31u)"  # both arms of the body's select run: no lane shifts by >= 32
        if kind == "ashr":
            return f"((aw_vu)((aw_vi){_v(v[0])} >> (aw_vi){cnt}))"
        return f"({_v(v[0])} {'<<' if kind == 'shl' else '>>'} {cnt})"
    return f


def _vnot(x: Any, n: Expr, v: list[str]) -> str:
    if n.ty == "pred":
        return f"({_v(v[0])} ^ 1u)"
    if n.ty != "b32":
        raise NoVector(n.op)
    return f"(~{_v(v[0])})"


def _vdiv(name: str):  # noqa: ANN202
    def f(x: Any, n: Expr, v: list[str]) -> str:
        if n.ty != "b32":
            raise NoVector(n.op)
        return f"aw_v{name}({_v(v[0])}, {_v(v[1])})"
    return f


def _vconst(x: Any, v: int, ty: str) -> str:
    if ty == "pred":
        return "1u" if v else "0u"
    if ty != "b32":
        raise NoVector(ty)
    return f"0x{v:X}u"


def _vselect(x: Any, n: Expr, v: list[str]) -> str:
    if n.ty not in ("b32", "pred"):
        raise NoVector(n.op)
    return f"aw_vsel({_v(v[0])}, {_v(v[1])}, {_v(v[2])})"


_VPRIMS = {"add": _vbin("+"), "sub": _vbin("-"), "mul": _vbin("*"), "and": _vbin("&"), "or": _vbin("|"),
           "xor": _vbin("^"), "not": _vnot, "shl": _vshift("shl"), "lshr": _vshift("lshr"), "ashr": _vshift("ashr"),
           "eq": _vbin("=="), "ne": _vbin("!="), "ult": _vbin("<"), "ule": _vbin("<="),
           "slt": _vbin("<", True), "sle": _vbin("<=", True), "select": _vselect,
           "udiv": _vdiv("udiv"), "sdiv": _vdiv("sdiv"), "urem": _vdiv("urem"), "srem": _vdiv("srem")}

#: integer and predicate bodies on 32-bit lanes, spelt with vector operators
VEC_SPELLING = BodySpelling(
    "cpu-vector", _VPRIMS, _vconst,
    has=lambda n: n.op in _VPRIMS and n.ty in ("b32", "pred") and all(a.ty in ("b32", "pred") for a in n.args))


def pred(p: Pred) -> str:
    """A WAVE predicate on the chunk's lanes (0/1 each)."""
    return f"(p{p.index} ^ 1u)" if p.negated else f"p{p.index}"


def vector_access(ins: Instruction) -> bool:
    """Whether :func:`access` spells this load or store (4, 8 or 16 bytes, a 32-bit offset)."""
    t = ins.defn.type
    return Operand.DADDR64 not in ins.defn.operands and t is not None and t.bits in (32, 64, 128)


def _f(r: int) -> str:
    return f"AW_VF(r{r})"


_FLOAT_BIN = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
_ROUND = {"sqrt": "aw_vsqrt", "floor": "aw_vfloor", "ceil": "aw_vceil", "trunc": "aw_vtrunc", "rint": "aw_vrint"}
_SETP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


def spell(x: Any, ins: Instruction) -> dict[str, str]:
    """The vector expression of each destination of ``ins`` (``{"r5": "...", "p2": "..."}``),
    computed from the source lanes as the scalar spelling does; the caller keeps the old value in
    the lanes that do not execute. Raises :class:`NoVector` when there is none."""
    from anywave.backends import cfamily_ops as ops

    d = ins.defn
    sem = d.sem
    h = ops.handler(d)
    if h is ops._body:
        leaves = []
        for ty, v in zip(operand_types(d), (ins.operands[j] for j in d.srcs), strict=True):
            if ty == "pred":
                leaves.append(pred(v))
            elif ty == "b32":
                leaves.append(f"r{v}")
            else:
                raise NoVector(ty)
        rt = result_type(d)
        if rt not in ("b32", "pred"):
            raise NoVector(rt)
        try:
            res = render_record(d, leaves, VEC_SPELLING, x)
        except ValueError as e:  # a primitive without a vector spelling or expansion
            raise NoVector(str(e)) from None
        dst = ins.operands[d.dests[0]]
        return {f"{'p' if rt == 'pred' else 'r'}{dst}": _v(res)}
    t = d.type
    if h is ops._float_op and t is T.F32:
        op = d.op
        dreg, *src = ins.operands
        if op in _FLOAT_BIN:
            e = f"({_f(src[0])} {_FLOAT_BIN[op]} {_f(src[1])})"
        elif op == "fma":
            e = f"aw_vfma({_f(src[0])}, {_f(src[1])}, {_f(src[2])})"
        elif op in ("min", "max"):
            e = f"aw_v{op}num({_f(src[0])}, {_f(src[1])})"
        elif op in _ROUND:
            e = f"{_ROUND[op]}({_f(src[0])})"
        else:
            raise NoVector(op)
        return {f"r{dreg}": f"aw_vc32({e})"}
    if h is ops._approx and d.op == "ex2":
        dreg, a = ins.operands
        return {f"r{dreg}": f"aw_vc32(aw_vex2({_f(a)}))"}
    if h is ops._sign_op and t is T.F32:
        dreg, a = ins.operands
        return {f"r{dreg}": f"(r{a} ^ 0x80000000u)" if d.op == "neg" else f"(r{a} & 0x7FFFFFFFu)"}
    if h is ops._setp_float and t is T.F32:
        dreg, a, b = ins.operands
        var = d.variant
        if var == "unord":
            return {f"p{dreg}": f"AW_B(({_f(a)} != {_f(a)}) | ({_f(b)} != {_f(b)}))"}
        return {f"p{dreg}": f"AW_B({_f(a)} {_SETP[var]} {_f(b)})"}
    if h is ops._cvt:
        dst, src = d.type, d.src_type
        dreg, a = ins.operands
        if src is T.F32 and dst in (T.I32, T.U32):
            return {f"r{dreg}": f"aw_vf2{'i' if dst is T.I32 else 'u'}32({_f(a)})"}
        if dst is T.F32 and src in (T.I32, T.U32):
            return {f"r{dreg}": f"aw_v{'i' if src is T.I32 else 'u'}2f(r{a})"}
        if dst is T.F32 and src is T.F32:
            return {f"r{dreg}": f"aw_vc32({_f(a)})"}
        raise NoVector("cvt")
    if h is ops._mov and t.bits <= 32:
        dreg, a = ins.operands
        return {f"r{dreg}": f"r{a}"}
    if h is ops._movi and t.bits <= 32:
        dreg, imm = ins.operands
        mask = 0xFFFF if t.bits == 16 else 0xFFFFFFFF
        return {f"r{dreg}": _v(f"0x{int(imm) & mask:X}u")}
    if h is ops._ldarg and t.bits <= 32:
        dreg, idx = ins.operands
        return {f"r{dreg}": _v(f"(u32){x.scal[int(idx)]}")}
    if sem == "move.mov_sr":
        dreg, sr = ins.operands
        e = _special(x, SpecialRegister(sr))
        if e is None:
            raise NoVector("special register")
        return {f"r{dreg}": e}
    raise NoVector(sem)


def _special(x: Any, sr: SpecialRegister) -> str | None:
    W = x.W
    shift = W.bit_length() - 1
    tid = "(aw_1d ? aw_lv : aw_vld(&awg_TX[aw_c]))"
    lane = {S.THREAD_ID_X: tid, S.THREAD_ID_Y: "aw_vld(&awg_TY[aw_c])", S.THREAD_ID_Z: "aw_vld(&awg_TZ[aw_c])",
            S.GLOBAL_ID_X: f"(aw_gid0 * aw_wgx + {tid})", S.GLOBAL_ID_Y: "(aw_gid1 * aw_wgy + aw_vld(&awg_TY[aw_c]))",
            S.GLOBAL_ID_Z: "(aw_gid2 * aw_wgz + aw_vld(&awg_TZ[aw_c]))", S.THREAD_LINEAR_ID: "aw_lv",
            S.WAVE_ID: f"(aw_lv >> {shift}u)", S.LANE_ID: f"(aw_lv & {W - 1}u)"}
    if sr in lane:
        return lane[sr]
    uniform = {S.WORKGROUP_ID_X: "aw_gid0", S.WORKGROUP_ID_Y: "aw_gid1", S.WORKGROUP_ID_Z: "aw_gid2",
               S.WORKGROUP_SIZE_X: "aw_wgx", S.WORKGROUP_SIZE_Y: "aw_wgy", S.WORKGROUP_SIZE_Z: "aw_wgz",
               S.GRID_SIZE_X: "aw_ng0", S.GRID_SIZE_Y: "aw_ng1", S.GRID_SIZE_Z: "aw_ng2", S.WAVE_WIDTH: f"{W}u",
               S.NUM_WAVES: f"((aw_n + {W - 1}u) / {W}u)"}
    return _v(f"(u32)({uniform[sr]})") if sr in uniform else None


def access(x: Any, ins: Instruction, go: str) -> list[str]:
    """Vector statements of a load or store whose lanes execute where ``go`` (0/1 per lane:
    executing and in bounds); a load's destinations are written as ``d = @SEL@(aw_e, value, d);``
    (the renderer's select: the old value where the lane does not execute). Raises
    :class:`NoVector` for 64-bit offsets."""
    load = ins.defn.sem == "mem.ld"
    addr = ins.operands[1] if load else ins.operands[0]
    if Operand.DADDR64 in ins.defn.operands:
        raise NoVector("64-bit offset")
    t = ins.defn.type
    size = max(1, t.bits // 8)
    if size not in (4, 8, 16):
        raise NoVector("narrow access")
    if isinstance(addr, DeviceAddr):
        base, o, c = x.bufname[addr.buffer], f"r{addr.reg}", f"{int(addr.offset)}"
    else:
        assert isinstance(addr, LocalAddr)
        base, o, c = "aw_lm", f"(r{addr.reg} + {int(addr.offset) & 0xFFFFFFFF}u)", "0"
    words = size // 4
    if load:
        dreg = int(ins.operands[0])
        if words == 1:
            return [f"r{dreg} = @SEL@(aw_e, aw_vld4({base}, {go}, {o}, {c}), r{dreg});"]
        ts = [f"aw_t{i}" for i in range(words)]
        return [f"aw_vu {', '.join(ts)};",
                f"aw_vld{size}({base}, {go}, {o}, {c}, {', '.join('&' + t_ for t_ in ts)});",
                *[f"r{dreg + i} = @SEL@(aw_e, {ts[i]}, r{dreg + i});" for i in range(words)]]
    sreg = int(ins.operands[1])
    return [f"aw_vst{size}({base}, {go}, {o}, {c}, {', '.join(f'r{sreg + i}' for i in range(words))});"]
