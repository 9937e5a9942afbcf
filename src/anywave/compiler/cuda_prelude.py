"""The declarations the CUDA front end gives clang in place of the CUDA SDK's headers (our own
text; no SDK is needed): keyword macros (``__global__`` ...), the built-in variables, the
numeric limits (``FLT_MAX``, ``INT_MAX`` ...), the math library and the intrinsics by their
CUDA names, the warp built-ins, the atomics, ``printf``, the vector types (``float4`` ...,
``make_float4``) and ``half``/``__nv_bfloat16`` with their operators.

Everything declared here is lowered by name in :mod:`anywave.compiler.cuda_frontend` (a call
of a declared function the front end does not lower is refused by name). The headers a CUDA
source commonly includes (``cuda_runtime.h``, ``cuda_fp16.h``, ``float.h``, ``cmath`` ...)
exist as files in a virtual system include folder (:data:`HEADERS`), so the source compiles
unchanged; everything they would declare is in :data:`PRELUDE`, except ``assert``, which
``assert.h``/``cassert`` define (:data:`HEADER_TEXT`: C reads ``NDEBUG`` at the include). CUDA
features the front end does not take are named when clang stumbles on them
(:func:`unsupported`).
"""

from __future__ import annotations

from . import cuda_warp as _warp

#: virtual folder of the empty system headers (not on disk: clang's in-memory files)
INCLUDE_DIR = "/__anywave_cuda__/include"
#: system headers a CUDA source may include; each is empty (the prelude declares their names)
HEADERS = (
    "cuda.h", "cuda_runtime.h", "cuda_runtime_api.h", "device_launch_parameters.h", "device_functions.h",
    "cuda_fp16.h", "cuda_bf16.h", "math_constants.h", "sm_20_atomic_functions.h", "sm_32_intrinsics.h",
    "float.h", "cfloat", "limits.h", "climits", "stdint.h", "cstdint", "stddef.h", "cstddef", "math.h", "cmath",
    "stdio.h", "cstdio", "stdlib.h", "cstdlib", "assert.h", "cassert",
)

#: assert(e): ``<assert.h>``/``<cassert>`` define it each time they are included (C's rule: NDEBUG
#: read at the include), lowered by name in cuda_builtins.assert_
_ASSERT_H = """#undef assert
#ifdef NDEBUG
#define assert(e) ((void)0)
#else
#define assert(e) __anywave_assert((e), #e)
#endif
"""
#: the text of the virtual system headers that are not empty
HEADER_TEXT = {"assert.h": _ASSERT_H, "cassert": _ASSERT_H}

_DP = "dynamic parallelism (a kernel launch inside a kernel) is not supported"
_HALF2 = "half2 (packed half pairs) is not supported; use half"
_BF162 = "__nv_bfloat162 (packed bfloat16 pairs) is not supported; use __nv_bfloat16"
_CG = "cooperative groups are not supported; use __syncthreads/__syncwarp and the __shfl*_sync built-ins"
_TEX = ("textures and surfaces are not supported; read the data through a pointer parameter (a buffer), "
        "with __ldg for read-only data")
_WMMA = "WMMA (nvcuda::wmma, <mma.h>) is not supported; the Python language has MMA fragments (aw.mma)"
_LIBS = "{} is not supported by the CUDA front end (a library of the CUDA toolkit); write the kernel in plain CUDA"

#: CUDA names the front end does not take, each with the construct its message names: (regular
#: expression matching the whole identifier, message). A clang error about one of them (an
#: undeclared identifier, an unknown type, no such template or namespace) is reported with the
#: message instead of clang's (:func:`unsupported`); ``{}`` in a message is the name
UNSUPPORTED_NAMES: tuple[tuple[str, str], ...] = (
    (r"__cudaPushCallConfiguration|cudaLaunchKernel|cudaDeviceSynchronize|cudaGetLastError", _DP),
    (r"(__)?half2|__halves2half2|__floats2half2_rn|__float2half2_rn|__half22float2|__(low|high)s?2\w+"
     r"|__h\w+2|h2\w+", _HALF2),
    (r"(__)?nv_bfloat162|__floats2bfloat162_rn|__bfloat1622float2", _BF162),
    (r"cooperative_groups|this_thread_block|this_grid|tiled_partition|thread_block(_tile)?|grid_group"
     r"|coalesced_threads|thread_group", _CG),
    (r"tex[123]D\w*|texCubemap\w*|tex1Dfetch|tex2Dgather|texture|surface|surf[123]D\w*|surfCubemap\w*"
     r"|cudaTextureObject_t|cudaSurfaceObject_t|cudaReadModeElementType|cudaReadModeNormalizedFloat", _TEX),
    (r"nvcuda|wmma", _WMMA),
    (r"__shfl|__shfl_up|__shfl_down|__shfl_xor|__any|__all|__ballot",
     "{} (the warp built-in without _sync, removed in CUDA 9) is not supported; use {}_sync with a mask"),
    (r"atomic[A-Z]\w*_(block|system)", "{} (a scoped atomic) is not supported; use the atomic without the suffix "
     "(device scope)"),
    (r"clock|clock64|__nanosleep|__globaltimer", "{} (a timer) is not supported: WAVE has no clock"),
    (r"malloc|free|__trap|__brkpt",
     "{} is not supported in a kernel (no device heap, no trap; assert(e) prints and ends the thread)"),
    (r"__managed__", "__managed__ (managed memory) is not supported; pass the array as a pointer parameter"),
    (r"__cvta_generic_to_shared|__isShared|__isGlobal|__pipeline_\w+|__memcpy_async|memcpy_async",
     "{} (asynchronous copies and address-space queries) is not supported"),
)
#: headers of CUDA features or libraries the front end does not take: (regular expression matching
#: the include's name, message)
UNSUPPORTED_HEADERS: tuple[tuple[str, str], ...] = (
    (r"cooperative_groups(\.h|/.*)", _CG),
    (r"(texture|surface)_\w+\.h", _TEX),
    (r"mma\.h", _WMMA),
    (r"cub/.*|cub\.cuh", _LIBS.format("CUB")),
    (r"thrust/.*", _LIBS.format("Thrust")),
    (r"cuda/.*", _LIBS.format("libcu++ (<cuda/...>)")),
    (r"curand\w*\.h", _LIBS.format("cuRAND")),
    (r"cuda_pipeline\w*\.h|cuda_awbarrier\w*\.h", _LIBS.format("the pipeline and arrive-wait barrier API")),
)


def unsupported(message: str, token: str | None = None) -> str | None:
    """The message naming the unsupported CUDA construct behind clang error ``message`` (its text,
    ``token`` the identifier at its location when there is one), from :data:`UNSUPPORTED_HEADERS`
    (a header not found) and :data:`UNSUPPORTED_NAMES` (a name clang does not know); None when
    the error is about none of them."""
    import re

    m = re.match(r"'([^']+)' file not found", message)
    if m:
        for pat, msg in UNSUPPORTED_HEADERS:
            if re.fullmatch(pat, m.group(1)):
                return f"#include <{m.group(1)}>: {msg}"
        return None
    head = message.split(";")[0]
    names = re.findall(r"'([A-Za-z_][A-Za-z0-9_]*)'", head) + re.findall(r"identifier ([A-Za-z_][A-Za-z0-9_]*)", head)
    if token and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", token):
        names.append(token)
    for name in names:
        for pat, msg in UNSUPPORTED_NAMES:
            if re.fullmatch(pat, name):
                return msg.format(name, name)
    return None


_F1 = ("sqrt", "fabs", "floor", "ceil", "trunc", "rint", "round", "nearbyint", "exp", "exp2", "exp10", "expm1",
       "log", "log2", "log10", "log1p", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh",
       "asinh", "acosh", "atanh", "erf", "erfc", "cbrt", "rsqrt", "lgamma", "tgamma", "logb")
_F2 = ("fmin", "fmax", "fmod", "pow", "atan2", "hypot", "copysign", "fdim", "remainder")


def _math() -> str:
    out = []
    for f in _F1:
        out.append(f"__device__ float {f}f(float); __device__ double {f}(double); __device__ float {f}(float);")
    for f in _F2:
        out.append(f"__device__ float {f}f(float, float); __device__ double {f}(double, double); "
                   f"__device__ float {f}(float, float);")
    out.append("__device__ float fmaf(float, float, float); __device__ double fma(double, double, double); "
               "__device__ float fma(float, float, float);")
    out.append("__device__ float ldexpf(float, int); __device__ double ldexp(double, int); "
               "__device__ float ldexp(float, int);")
    out.append("__device__ void sincosf(float, float*, float*); __device__ void sincos(double, double*, double*);")
    out.append("__device__ float pow(float, int); __device__ double pow(double, int);")
    for f in ("isnan", "isinf", "isfinite", "signbit"):
        out.append(f"__device__ bool {f}(float); __device__ bool {f}(double);")
    for t in ("int", "long", "long long", "float", "double"):
        out.append(f"__device__ {t} abs({t});")
    out.append("__device__ long labs(long); __device__ long long llabs(long long);")
    for t in ("int", "unsigned", "long", "unsigned long", "long long", "unsigned long long", "float", "double"):
        out.append(f"__device__ {t} min({t}, {t}); __device__ {t} max({t}, {t});")
    out.append("__device__ unsigned min(int, unsigned); __device__ unsigned min(unsigned, int); "
               "__device__ unsigned max(int, unsigned); __device__ unsigned max(unsigned, int);")
    return "\n".join(out) + "\n"


#: the CUDA intrinsics declared (lowered in cuda_frontend)
_INTRINSICS = r"""
__device__ float __expf(float); __device__ float __exp10f(float); __device__ float __logf(float);
__device__ float __log2f(float); __device__ float __log10f(float); __device__ float __sinf(float);
__device__ float __cosf(float); __device__ float __tanf(float); __device__ float __powf(float, float);
__device__ float __fdividef(float, float); __device__ void __sincosf(float, float*, float*);
__device__ float __fadd_rn(float, float); __device__ float __fsub_rn(float, float);
__device__ float __fmul_rn(float, float); __device__ float __fdiv_rn(float, float);
__device__ float __fmaf_rn(float, float, float); __device__ float __fsqrt_rn(float);
__device__ float __frcp_rn(float); __device__ float __frsqrt_rn(float); __device__ float __saturatef(float);
__device__ double __dadd_rn(double, double); __device__ double __dsub_rn(double, double);
__device__ double __dmul_rn(double, double); __device__ double __ddiv_rn(double, double);
__device__ double __fma_rn(double, double, double); __device__ double __dsqrt_rn(double);
__device__ int __float2int_rn(float); __device__ int __float2int_rz(float); __device__ int __float2int_rd(float);
__device__ int __float2int_ru(float); __device__ unsigned __float2uint_rn(float);
__device__ unsigned __float2uint_rz(float); __device__ long long __float2ll_rz(float);
__device__ int __double2int_rn(double); __device__ int __double2int_rz(double);
__device__ float __int2float_rn(int); __device__ float __uint2float_rn(unsigned);
__device__ float __double2float_rn(double);
__device__ int __float_as_int(float); __device__ float __int_as_float(int);
__device__ unsigned __float_as_uint(float); __device__ float __uint_as_float(unsigned);
__device__ long long __double_as_longlong(double); __device__ double __longlong_as_double(long long);
__device__ int __mul24(int, int); __device__ unsigned __umul24(unsigned, unsigned);
__device__ int __mulhi(int, int); __device__ unsigned __umulhi(unsigned, unsigned);
__device__ int __popc(unsigned); __device__ int __popcll(unsigned long long);
__device__ int __clz(int); __device__ int __clzll(long long);
__device__ int __ffs(int); __device__ int __ffsll(long long);
__device__ unsigned __brev(unsigned); __device__ unsigned long long __brevll(unsigned long long);
"""

_LIMITS = r"""
#define CHAR_BIT 8
#define SCHAR_MIN (-128)
#define SCHAR_MAX 127
#define UCHAR_MAX 255
#define CHAR_MIN SCHAR_MIN
#define CHAR_MAX SCHAR_MAX
#define SHRT_MIN (-32768)
#define SHRT_MAX 32767
#define USHRT_MAX 65535
#define INT_MIN (-2147483647 - 1)
#define INT_MAX 2147483647
#define UINT_MAX 4294967295U
#define LONG_MIN (-9223372036854775807L - 1)
#define LONG_MAX 9223372036854775807L
#define ULONG_MAX 18446744073709551615UL
#define LLONG_MIN (-9223372036854775807LL - 1)
#define LLONG_MAX 9223372036854775807LL
#define ULLONG_MAX 18446744073709551615ULL
#define FLT_MAX 0x1.fffffep+127F
#define FLT_MIN 0x1p-126F
#define FLT_EPSILON 0x1p-23F
#define FLT_TRUE_MIN 0x1p-149F
#define FLT_MANT_DIG 24
#define FLT_DIG 6
#define DBL_MAX 0x1.fffffffffffffp+1023
#define DBL_MIN 0x1p-1022
#define DBL_EPSILON 0x1p-52
#define DBL_MANT_DIG 53
#define DBL_DIG 15
#define INFINITY __builtin_inff()
#define HUGE_VALF __builtin_huge_valf()
#define HUGE_VAL __builtin_huge_val()
#define NAN __builtin_nanf("")
#define M_E 2.7182818284590452354
#define M_LOG2E 1.4426950408889634074
#define M_LOG10E 0.43429448190325182765
#define M_LN2 0.69314718055994530942
#define M_LN10 2.30258509299404568402
#define M_PI 3.14159265358979323846
#define M_PI_2 1.57079632679489661923
#define M_PI_4 0.78539816339744830962
#define M_1_PI 0.31830988618379067154
#define M_2_PI 0.63661977236758134308
#define M_SQRT2 1.41421356237309504880
#define M_SQRT1_2 0.70710678118654752440
#define CUDART_PI_F 3.141592654f
#define CUDART_INF_F __builtin_inff()
typedef signed char int8_t; typedef short int16_t; typedef int int32_t; typedef long long int64_t;
typedef unsigned char uint8_t; typedef unsigned short uint16_t; typedef unsigned int uint32_t;
typedef unsigned long long uint64_t; typedef unsigned long size_t; typedef long ptrdiff_t;
typedef unsigned int uint; typedef unsigned short ushort; typedef unsigned char uchar;
"""


def _vectors() -> str:
    out = []
    for base, short in (("float", "float"), ("int", "int"), ("unsigned int", "uint"), ("double", "double"),
                        ("long long", "longlong"), ("unsigned long long", "ulonglong"), ("char", "char"),
                        ("unsigned char", "uchar"), ("short", "short"), ("unsigned short", "ushort")):
        size = {"float": 4, "int": 4, "uint": 4, "double": 8, "longlong": 8, "ulonglong": 8, "char": 1, "uchar": 1,
                "short": 2, "ushort": 2}[short]
        for n in (1, 2, 3, 4):
            names = "xyzw"[:n]
            align = size * (n if n != 3 else 1)
            align = min(align, 16)
            out.append(f"struct __attribute__((aligned({align}))) {short}{n} {{ {base} {', '.join(names)}; }};")
            args = ", ".join(f"{base} {c}" for c in names)
            body = " ".join(f"r.{c} = {c};" for c in names)
            out.append(f"__device__ inline {short}{n} make_{short}{n}({args}) {{ {short}{n} r; {body} return r; }}")
    out.append("typedef struct uint3 dim3;")
    return "\n".join(out) + "\n"


_HALF = "".join(
    f"""
struct {h} {{ unsigned short __x;
  __device__ {h}(); __device__ {h}(float); __device__ {h}(double); __device__ {h}(int);
  __device__ {h}(unsigned); __device__ operator float() const; }};
__device__ {h} operator+({h}, {h}); __device__ {h} operator-({h}, {h});
__device__ {h} operator*({h}, {h}); __device__ {h} operator/({h}, {h});
__device__ {h} operator-({h});
__device__ {h}& operator+=({h}&, {h}); __device__ {h}& operator-=({h}&, {h});
__device__ {h}& operator*=({h}&, {h}); __device__ {h}& operator/=({h}&, {h});
__device__ bool operator==({h}, {h}); __device__ bool operator!=({h}, {h});
__device__ bool operator<({h}, {h}); __device__ bool operator>({h}, {h});
__device__ bool operator<=({h}, {h}); __device__ bool operator>=({h}, {h});
__device__ float {to}({h}); __device__ {h} {fr}(float); __device__ {h} {fr}_rn(float);
__device__ {h} {p}add({h}, {h}); __device__ {h} {p}sub({h}, {h}); __device__ {h} {p}mul({h}, {h});
__device__ {h} {p}div({h}, {h}); __device__ {h} {p}fma({h}, {h}, {h}); __device__ {h} {p}neg({h});
__device__ {h} {p}max({h}, {h}); __device__ {h} {p}min({h}, {h}); __device__ {h} {p}abs({h});
__device__ bool {p}eq({h}, {h}); __device__ bool {p}lt({h}, {h}); __device__ bool {p}gt({h}, {h});
__device__ bool {p}le({h}, {h}); __device__ bool {p}ge({h}, {h}); __device__ bool {p}ne({h}, {h});
__device__ {h} hsqrt({h}); __device__ bool __hisnan({h});
"""
    for h, to, fr, p in (("__half", "__half2float", "__float2half", "__h"),
                         ("__nv_bfloat16", "__bfloat162float", "__float2bfloat16", "__h")))
_HALF += "typedef __half half;\ntypedef __nv_bfloat16 nv_bfloat16;\n"

_ATOMICS = "".join(f"__device__ {t} {f}({t}*, {t});\n" for f, ts in (
    ("atomicAdd", ("int", "unsigned", "float")), ("atomicSub", ("int", "unsigned")),
    ("atomicMin", ("int", "unsigned")), ("atomicMax", ("int", "unsigned")), ("atomicAnd", ("int", "unsigned")),
    ("atomicOr", ("int", "unsigned")), ("atomicXor", ("int", "unsigned")),
    ("atomicExch", ("int", "unsigned", "float")), ("atomicInc", ("unsigned",)), ("atomicDec", ("unsigned",)))
    for t in ts) + r"""
__device__ int atomicCAS(int*, int, int); __device__ unsigned atomicCAS(unsigned*, unsigned, unsigned);
__device__ unsigned long long atomicAdd(unsigned long long*, unsigned long long);
__device__ double atomicAdd(double*, double);
"""

#: the whole prelude, put before the user's source (its lines are subtracted from locations)
PRELUDE = r"""#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __host__ __attribute__((host))
#define __shared__ __attribute__((shared))
#define __constant__ __attribute__((constant))
#define __forceinline__ __attribute__((always_inline)) inline
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...) __attribute__((launch_bounds(__VA_ARGS__)))
#define __restrict__ __restrict
#define __align__(n) __attribute__((aligned(n)))
#define __ANYWAVE__ 1
struct __aw_dim3 { unsigned int x, y, z; };
extern const __device__ __aw_dim3 threadIdx, blockIdx, blockDim, gridDim;
__device__ void __syncthreads(void);
__device__ int __syncthreads_count(int); __device__ int __syncthreads_and(int); __device__ int __syncthreads_or(int);
__device__ void __threadfence(void); __device__ void __threadfence_block(void);
__device__ void __anywave_assert(bool, const char*);
""" + _LIMITS + _math() + _INTRINSICS + _warp.PRELUDE + _ATOMICS + r"""
__device__ float __ldg(const float*); __device__ double __ldg(const double*);
__device__ int __ldg(const int*); __device__ unsigned __ldg(const unsigned*);
__device__ long long __ldg(const long long*); __device__ unsigned long long __ldg(const unsigned long long*);
extern "C" __device__ int printf(const char*, ...);
""" + _vectors() + _HALF

#: the prelude is put before the user's source in one buffer: its lines come first
PRELUDE_LINES = PRELUDE.count("\n") + 1
