"""Every construct the CUDA front end refuses, with its message (issue 28: "a kernel that uses
something else is refused with the construct named at its line and column", "every refused
construct has a test with its message"). Compile only, no launch: each row is a source, the
fragment of the message that names the construct, and the line and column it must be reported
at (the user's lines: the prelude the front end puts before the source is not counted).

Refusals tested in other files (their REFUSED lists): tests/test_cuda_frontend.py (struct
parameters, switch, goto, lambdas, pointer comparison and difference ...), tests/test_cuda_features.py
(64-bit and double atomics, atomicInc, __syncthreads_count, printf arity),
tests/test_cuda_warp.py (volatile without __syncwarp), tests/test_cuda_hostile.py (packed structs,
includes of devices, template instance names, nesting depth).

Sites found unreachable (clang rejects the source first, or the front end's own earlier checks
take it): break/continue outside a loop (clang: "not in loop statement"), an initialised or
unsized ``__shared__`` variable (clang errors), a ``__constant__`` array with too many
initialisers (clang: "excess elements"), ``%`` on floats and compound assignment to a pointer
with ``*=`` (clang type errors), a narrow-typed operation (C promotes first)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import numpy as np
import pytest

import anywave as aw

pytest.importorskip("clang.cindex", reason="libclang is not installed (pip install 'anywave[cuda-frontend]')")

G = "__global__ void k("
S = "struct P { float a; };\n"

#: (id, source, fragment naming the construct, line, column)
REFUSED = [
    # documented refusals (docs/guide/cuda.md, "Errors")
    ("user constructor", "struct P { float a; __device__ P(float x) : a(x * 2) {} };\n__global__ void k(float* o) {\n"
     "  P q(o[1]);\n  o[0] = q.a;\n}", "constructor 'P(float)'", 3, 5),
    ("recursion", "__device__ int f(int n) { return n > 0 ? f(n - 1) + 1 : 0; }\n__global__ void k(int* o) {\n"
     "  o[0] = f(o[1]);\n}", "recursion: 'f' calls itself", 1, 42),
    ("pointer in a struct parameter", "struct P { float* p; };\n__global__ void k(P* s, float* o) {\n  o[0] = 1;\n}",
     "a parameter of type 'P *'", 2, 22),
    ("pointer in a struct local", "struct P { float* p; };\n__global__ void k(float* o) {\n  P s;\n  s.p = o;\n}",
     "a variable of type 'P'", 3, 5),
    ("atomicDec", G + "unsigned* o) {\n  atomicDec(o, 7u);\n}", "call of 'atomicDec'", 2, 3),
    ("__syncthreads_and", G + "int* o) {\n  o[0] = __syncthreads_and(o[1]);\n}", "call of '__syncthreads_and'", 2, 10),
    ("__syncthreads_or", G + "int* o) {\n  o[0] = __syncthreads_or(o[1]);\n}", "call of '__syncthreads_or'", 2, 10),
    ("double transcendental", G + "double* o) {\n  o[0] = sin(o[1]);\n}", "call of 'sin'", 2, 10),
    ("dynamic parallelism", "__global__ void k2(int* o) { o[0] = 1; }\n__global__ void k(int* o) {\n"
     "  k2<<<1, 1>>>(o);\n}",
     "dynamic parallelism (a kernel launch inside a kernel) is not supported", 3, 5),
    ("half2", "#include <cuda_fp16.h>\n__global__ void k(float* o) {\n  half2 h;\n  o[0] = 1;\n}",
     "half2 (packed half pairs) is not supported; use half", 3, 3),
    ("__half2 and its intrinsics", G + "float* o) {\n  __half2 h = __floats2half2_rn(1.f, 2.f);\n  o[0] = 1;\n}",
     "half2 (packed half pairs) is not supported; use half", 2, 3),
    ("__hadd2", G + "float* o) {\n  o[0] = __low2float(__hadd2(o, o));\n}", "half2 (packed half pairs)", 2, 22),
    ("__nv_bfloat162", G + "float* o) {\n  __nv_bfloat162 h;\n  o[0] = 1;\n}",
     "__nv_bfloat162 (packed bfloat16 pairs) is not supported", 2, 3),
    ("cooperative groups header", "#include <cooperative_groups.h>\n__global__ void k(float* o) { o[0] = 1; }",
     "#include <cooperative_groups.h>: cooperative groups are not supported; use __syncthreads/__syncwarp and the "
     "__shfl*_sync built-ins", 1, 10),
    ("cooperative groups namespace", G + "float* o) {\n  auto b = cooperative_groups::this_thread_block();\n"
     "  o[0] = 1;\n}", "cooperative groups are not supported", 2, 12),
    ("texture object", "__global__ void k(float* o, cudaTextureObject_t t) {\n  o[0] = 1;\n}",
     "textures and surfaces are not supported", 1, 29),
    ("tex1Dfetch", G + "float* o, unsigned long long t) {\n  o[0] = tex1Dfetch<float>(t, 0);\n}",
     "textures and surfaces are not supported", 2, 10),
    ("texture reference", "texture<float, 1> tr;\n__global__ void k(float* o) {\n  o[0] = 1;\n}",
     "textures and surfaces are not supported", 1, 1),
    ("surface write", G + "float* o, unsigned long long s) {\n  surf2Dwrite(1.f, s, 0, 0);\n}",
     "textures and surfaces are not supported", 2, 3),
    ("warp built-in without _sync", G + "int* o) {\n  o[0] = __shfl(o[0], 0);\n}",
     "__shfl (the warp built-in without _sync, removed in CUDA 9) is not supported; use __shfl_sync", 2, 10),
    ("clock64", G + "long long* o) {\n  o[0] = clock64();\n}", "clock64 (a timer) is not supported", 2, 10),
    ("scoped atomic", G + "int* o) {\n  atomicAdd_block(o, 1);\n}", "atomicAdd_block (a scoped atomic)", 2, 3),
    ("device malloc", G + "int* o) {\n  int* p = (int*)malloc(4);\n  o[0] = 1;\n}",
     "malloc is not supported in a kernel", 2, 18),
    ("__trap", G + "int* o) {\n  __trap();\n}", "__trap is not supported in a kernel", 2, 3),
    ("__managed__", "__managed__ int m;\n__global__ void k(int* o) {\n  o[0] = m;\n}",
     "__managed__ (managed memory) is not supported", 1, 1),
    ("<mma.h>", "#include <mma.h>\n__global__ void k(float* o) { o[0] = 1; }", "#include <mma.h>: WMMA", 1, 10),
    ("nvcuda::wmma", G + "float* o) {\n  nvcuda::wmma::fragment<int> f;\n  o[0] = 1;\n}", "WMMA (nvcuda::wmma", 2, 3),
    ("CUB", "#include <cub/cub.cuh>\n__global__ void k(float* o) { o[0] = 1; }", "#include <cub/cub.cuh>: CUB", 1, 10),
    ("Thrust", "#include <thrust/sort.h>\n__global__ void k(float* o) { o[0] = 1; }", "Thrust is not supported", 1, 10),
    # statements and declarations
    ("declaration in an if", G + "int* o) {\n  if (int x = o[0]) o[1] = x;\n}", "a declaration in an if condition",
     2, 3),
    ("asm", G + "int* o) {\n  asm volatile(\"membar.gl;\");\n  o[0] = 1;\n}", "asm stmt", 2, 3),
    ("for header with a lambda", G + "int* o) {\n  for (int i = [] { return 0; }(); i < 4; i++) o[i] = i;\n}",
     "this form of for loop", 2, 3),
    ("range for", G + "int* o, int n) {\n  int a[2] = {1, 2};\n  for (int x : a) o[0] += x;\n}",
     "a local (per-thread) array", 2, 7),
    ("pointer local without initialiser", G + "float* o) {\n  float* p;\n  p = o;\n  p[0] = 1;\n}",
     "a pointer local without an initialiser", 2, 10),
    ("struct local with an array member", "struct P { float v[2]; };\n__global__ void k(float* o) {\n  P q;\n"
     "  o[0] = 1;\n}", "a struct local with an array member (P.v)", 3, 5),
    ("early return of a struct", S + "__device__ P f(int i) {\n  if (i) return P{1.f};\n  return P{2.f};\n}\n"
     "__global__ void k(float* o) {\n  o[0] = f((int)o[1]).a;\n}", "__device__ function 'f': an early return of a "
     "pointer or struct", 7, 10),
    ("no return at the end", "__device__ int f(int x) { x++; }\n__global__ void k(int* o) {\n  o[0] = f(o[1]);\n}",
     "__device__ function 'f' does not end in a return", 3, 10),
    ("template kernel without a body", "template <int N> __global__ void k(float* o);\n"
     "template <> __global__ void k<1>(float* o);", "kernel 'k' has no body", 2, 29),
    ("union value", "union U { float f; double d; };\n__global__ void k(U* p, float* o) {\n  U u = p[0];\n"
     "  o[0] = u.f;\n}", "a value or local of union 'U'", 3, 9),
    ("static data member", "struct T { static const int v = 3; };\n__global__ void k(int* o) {\n  o[0] = T::v;\n}",
     "reference to 'v'", 3, 13),
    # __constant__
    ("__constant__ of an unsupported type", "__constant__ long double c;\n__global__ void k(float* o) {\n"
     "  o[0] = (float)c;\n}", "a __constant__ variable of type 'long double'", 1, 26),
    ("__constant__ named like a parameter", "__constant__ float n[2];\n__global__ void k(float* o, int n) {\n"
     "  o[0] = ::n[0];\n}", "__constant__ variable 'n' named like a kernel parameter", 1, 20),
    ("store to __constant__", "__constant__ float c[4];\n__global__ void k(float* o) {\n  c[0] = 1.f;\n"
     "  o[0] = c[1];\n}", "store through a pointer to const (parameter 'c')", 3, 3),
    ("atomic on __constant__", "__constant__ int c[4];\n__global__ void k(int* o) {\n  o[0] = atomicAdd(&c[0], 1);\n}",
     "atomic on read-only buffer 'c'", 3, 10),
    # types, casts, conversions
    ("long double cast", G + "float* o) {\n  o[0] = (float)((long double)o[1]);\n}",
     "an expression of type 'long double'", 2, 18),
    ("long double promotion", G + "float* o) {\n  o[0] = o[1] + 1.0L;\n}", "a value of type 'long double'", 2, 10),
    ("device function parameter type", "__device__ float f(long double x) { return (float)x; }\n"
     "__global__ void k(float* o) {\n  o[0] = f(1.0L);\n}", "a parameter of type 'long double'", 1, 32),
    ("number cast to a pointer", G + "float* o) {\n  float* p = (float*)16;\n  p[0] = 1;\n}",
     "a number cast to a pointer", 2, 14),
    ("pointer cast to a number", G + "float* o) {\n  o[0] = (float)(long long)o;\n}", "a pointer cast to a number",
     2, 17),
    ("null pointer", G + "float* o) {\n  float* p = 0;\n  o[0] = 1;\n}", "a null pointer or a number converted to a "
     "pointer", 2, 14),
    ("nullptr", G + "float* o) {\n  float* p = nullptr;\n  o[0] = 1;\n}", "a null pointer (nullptr)", 2, 14),
    ("null pointer argument", "__device__ void f(float* p) { }\n__global__ void k(float* o) {\n  f(0);\n  o[0] = 1;\n}",
     "a null pointer or a number converted to a pointer", 3, 5),
    # (a pointer as a condition is taken: "not null", true; tests/test_cuda_hostile10.py)
    ("?: on pointers", G + "float* o, int i) {\n  float* p = i ? o : o + 1;\n  p[0] = 1;\n}",
     "?: on pointers or structs", 2, 14),
    ("brace elision", S + "struct Q { P p; float b; };\n__global__ void k(float* o) {\n  Q q = {1.f, 2.f};\n"
     "  o[0] = q.b;\n}", "this initialiser of member 'p' (a struct member's needs its own braces)", 4, 10),
    # pointers and memory
    ("subscript of a non-pointer", G + "float* o) {\n  3[o] = 1;\n}", "subscript of a non-pointer", 2, 3),
    ("bool index", G + "float* o) {\n  o[o[0] > 1] = 1;\n}", "a non-integer index", 2, 3),
    ("++ on a pointer to a local", G + "float* o) {\n  float v = 1;\n  float* p = &v;\n  p++;\n  o[0] = *p;\n}",
     "arithmetic or assignment on a pointer to a local variable", 4, 3),
    ("address of a built-in", G + "unsigned* o) {\n  const unsigned* p = &threadIdx.x;\n  o[0] = *p;\n}",
     "& of this expression", 2, 23),
    ("unary + on a pointer", G + "float* o) {\n  float* q = +o;\n  q[0] = 1;\n}", "unary + on a pointer", 2, 14),
    ("__extension__", G + "int* o) {\n  o[0] = __extension__ 1;\n}", "unary operator ?", 2, 10),
    ("pointer into another buffer", G + "float* a, float* b) {\n  float* p = a;\n  p = b;\n  p[0] = 1;\n}",
     "a pointer local assigned a pointer into another buffer", 3, 3),
    ("integer + pointer", G + "float* o) {\n  float* q = 1 + o;\n  q[0] = 1;\n}", "integer + pointer", 2, 14),
    ("atomic at a 64-bit offset", G + "int* o, long long i) {\n  atomicAdd(&o[i], 1);\n}",
     "an atomic at a 64-bit offset", 2, 3),
    # calls
    ("__builtin_ call", G + "int* o) {\n  o[0] = __builtin_popcount(o[1]);\n}", "call of '__builtin_popcount'", 2, 10),
    ("undefined __device__ function", "__device__ int g(int);\n__global__ void k(int* o) {\n  o[0] = g(o[1]);\n}",
     "call of 'g' (only __device__ functions defined in the source", 3, 10),
    ("printf format not a literal", G + "int* o) {\n  printf(o[0] ? \"a\" : \"b\");\n}",
     "printf with a format that is not a string literal", 2, 10),
    ("printf %f of an int", G + "int* o) {\n  printf(\"%f\", o[0]);\n}", "printf: %f needs a floating-point value", 2,
     16),
    ("printf %d of a float", G + "float* o) {\n  printf(\"%d\", o[0]);\n}", "printf: %d needs an integer value", 2, 16),
    ("printf of a pointer", G + "int* o) {\n  printf(\"%d\", o);\n}", "printf of a pointer or struct", 2, 16),
]


@pytest.mark.parametrize(("what", "src", "msg", "line", "col"), REFUSED, ids=[r[0] for r in REFUSED])
def test_refused(what, src, msg, line, col):
    with pytest.raises(aw.CompileError) as e:
        aw.cuda_kernel(src, "k<1>" if what == "template kernel without a body" else "k").compile()
    text = str(e.value)
    assert msg in text, text
    assert f"kernel.cu:{line}:{col}:" in text, text


def test_clang_locations_in_messages_are_the_users_lines():
    """clang's own text inside a message (a type spelled with its location) counts the user's
    lines, not the prelude's: the lambda at line 2, column 12."""
    src = "__global__ void k(int* o) {\n  auto f = [](int x) { return x; };\n  o[0] = f(1);\n}"
    with pytest.raises(aw.CompileError) as e:
        aw.cuda_kernel(src, "k").compile()
    assert "'(lambda at kernel.cu:2:12)'" in str(e.value), str(e.value)
    assert "kernel.cu:2:8:" in str(e.value)
    # and a clang error's own location, and __LINE__ as the source sees it (a printf's argument)
    with pytest.raises(aw.CompileError, match=r"kernel\.cu:3:10: use of undeclared identifier 'zz'"):
        aw.cuda_kernel("\n__global__ void k(float* o) {\n  o[0] = zz;\n}", "k").compile()
    o = np.zeros(1, np.int32)
    aw.cuda_kernel("__global__ void k(int* o) {\n\n  o[0] = __LINE__;\n}", "k")(o, grid=1, workgroup=1,
                                                                                  target="emulator")
    assert o[0] == 3


def test_unknown_pragmas_and_hint_attributes_are_ignored():
    """A pragma clang does not know is dropped by clang (a warning), and the statement attributes
    that are only hints ([[likely]], [[clang::noinline]]) change nothing: the kernel compiles and
    computes what it would without them."""
    src = G + "int* o) {\n  int s = 0;\n#pragma omp parallel for\n  for (int i = 0; i < 4; i++) s += i;\n" \
              "#pragma GCC ivdep\n  for (int i = 0; i < 3; i++) s += i;\n" \
              "  [[likely]] s += 100;\n  [[clang::noinline]] s += 1000;\n  o[0] = s;\n}"
    o = np.zeros(1, np.int32)
    aw.cuda_kernel(src, "k")(o, grid=1, workgroup=1, target="emulator")
    assert o[0] == sum(range(4)) + sum(range(3)) + 1100


def test_launch_time_errors_name_the_argument():
    k = aw.cuda_kernel("__global__ void k(float* o) {\n  extern __shared__ float s[];\n  s[0] = 1;\n  o[0] = s[0];\n}",
                       "k")
    with pytest.raises(aw.LaunchError, match="takes no compile-time constants other than shared_bytes="):
        k.compile(n=3)
    with pytest.raises(aw.LaunchError, match="shared_bytes= must be a non-negative int"):
        k.compile(shared_bytes=-4)
    with pytest.raises(aw.LaunchError, match="uses extern __shared__ memory: give its size"):
        k.compile()


# ----------------------------------------------------------------------------- every message has a location

SRC = Path(aw.__file__).resolve().parent / "compiler"
#: CompileErrors about the whole source or call, not a construct in it (no line to name): the
#: fragment of the message that identifies each
_NOT_A_CONSTRUCT = ("needs libclang", "internal:", "could not parse the source with the arguments",
                    "cannot instantiate the kernel", "the CUDA source does not compile", "is not a template kernel's",
                    "is not a __global__ function", "no __global__ template instance", "no __global__ function",
                    "shared_bytes must be", "takes no compile-time constants", "{msg}{why}", "#include names",
                    "give its size in bytes", "not a source file's name")


def _compile_errors(path: Path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "CompileError":
            yield node, ast.get_source_segment(path.read_text(), node)


@pytest.mark.parametrize("name", ["cuda_frontend.py", "cuda_builtins.py", "cuda_warp.py", "cuda_prelude.py"])
def test_every_refusal_names_a_location(name):
    """Every CompileError the front end raises about a construct starts with the construct's
    ``file:line:column`` (``_where``/``_decl_where``, or :meth:`CudaLowering.err`, through which
    ``refuse`` and every ``low.err`` go); the others are errors about the whole source or call,
    listed in _NOT_A_CONSTRUCT. A new ``raise CompileError(...)`` without a location fails here."""
    bad = []
    for node, text in _compile_errors(SRC / name):
        if not node.args:
            bad.append(text)
            continue
        msg = node.args[0]
        first = msg.values[0] if isinstance(msg, ast.JoinedStr) and msg.values else msg
        located = isinstance(first, ast.FormattedValue) and isinstance(first.value, ast.Call) and \
            getattr(first.value.func, "id", None) in ("_where", "_decl_where")
        if not located and not any(f in text for f in _NOT_A_CONSTRUCT):
            bad.append(text)
    assert not bad, bad
    # the lowering's own err() (which refuse() and every low.err/low.refuse use) puts _where first
    if name == "cuda_frontend.py":
        src = (SRC / name).read_text()
        m = re.search(r"    def err\(self, c: Any, msg: str\) -> CompileError:\n"
                      r"        return CompileError\(f\"\{_where\(", src)
        assert m, "CudaLowering.err no longer starts its message with _where(...)"
