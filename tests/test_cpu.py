"""The cpu target (issue 29): WAVE compiled to native code by the machine's C compiler.

Every conformance case it can render (all but the matrix-fragment groups, which it refuses
with a reason) gives the suite's expected bits at W = 8, 16, 32, 64 (one W in the default tier,
the rest ``sweep``); the library kernels give the emulator's bits; out-of-bounds accesses,
divergent barriers and Ctrl-C give clear errors and never touch the process's other memory."""

from __future__ import annotations

import shutil
import signal
import threading

import numpy as np
import pytest

import tiers
from anywave.asm import assemble
from anywave.conformance import suite
from anywave.emu import emulate
from anywave.errors import OutOfBoundsError

if shutil.which("cc") is None and shutil.which("gcc") is None and shutil.which("clang") is None:
    pytest.skip("no C compiler on PATH: the cpu target cannot run here", allow_module_level=True)


@pytest.fixture(scope="module")
def runner():  # noqa: ANN201
    from anywave.runtime import cpu

    ok, why = cpu.status()
    if not ok:
        pytest.skip(f"cpu target unavailable: {why}")
    return cpu.CpuRunner()


@pytest.mark.parametrize("W", tiers.widths("cpu"))
def test_conformance(runner, W: int) -> None:  # noqa: ANN001
    caps = runner.dev.capabilities().spellings()
    rep = suite.run_suite(runner, (W,), progress=False, capabilities=caps,
                          batch_bytes=tiers.conformance_batch_bytes("cpu", W))
    bad = rep.failures()
    assert not bad, "\n".join(f"{r.case} W={r.wave_width}: {r.status}: {r.message[:400]}" for r in bad[:10])
    runnable = [c for g in suite.group_names() if set(suite.group_requires(g)) <= set(caps)
                for c in suite.load_cases([g])]
    assert rep.counts().get("pass", 0) == len(runnable)
    # what is skipped is only the matrix fragments
    skipped = {g for g in suite.group_names() if not set(suite.group_requires(g)) <= set(caps)}
    assert all(g.startswith("mma") for g in skipped), skipped


@pytest.mark.sweep
def test_conformance_optimised_at_the_default_w(runner, monkeypatch) -> None:  # noqa: ANN001
    """The default tier builds without the runtime compiler's optimiser (tests/conftest.py): the
    sweep tier runs the default W's conformance with it too (the other widths run both ways)."""
    monkeypatch.setenv("ANYWAVE_TARGET_OPT", "1")
    test_conformance(runner, tiers.DEFAULT_W["cpu"])


def test_mma_is_refused_with_a_reason(runner) -> None:  # noqa: ANN001
    from anywave.runtime.cpu import CpuError

    mod = suite.assemble_group("mma")
    k = mod.kernels[0].name
    with pytest.raises(CpuError, match="matrix fragment"):
        runner(mod, k, (1, 1, 1), (32, 1, 1), {a.name: np.zeros(4096, np.uint32) for a in mod.kernel(k).args
                                                if a.kind.name == "BUFFER"}, 32)


_LIB_W = tiers.widths("cpu")


@pytest.mark.parametrize("W", _LIB_W)
def test_library_kernels_same_bits_as_the_emulator(W: int) -> None:
    from anywave.conformance.report import library_kernels

    for name, fn in library_kernels():
        want = np.atleast_1d(fn("emulator", W))
        got = np.atleast_1d(fn("cpu", W))
        assert want.dtype == got.dtype and want.shape == got.shape, name
        assert np.array_equal(want.view(np.uint8), got.view(np.uint8)), (name, W)


_OOB = """.version 1.0
.kernel oob
.arg x buffer u32 readwrite
.arg n scalar u32
.registers 8
    mov.sr r0, sr_global_id_x
    movi.b32 r1, 2
    shl.b32 r2, r0, r1
    ld.device.b32 r3, x[r2]
    movi.b32 r4, 1
    add.i32 r3, r3, r4
    st.device.b32 x[r2], r3
    halt
.end
"""


def test_out_of_bounds_is_an_error_and_never_writes_outside(runner) -> None:  # noqa: ANN001
    mod = assemble(_OOB)
    big = np.zeros(64, np.uint32)
    x = big[:40]  # a view: the 24 words after it belong to the process, not to the kernel
    with pytest.raises(OutOfBoundsError, match=r"argument 'x' byte offset 160 .*4-byte load"):
        runner(mod, "oob", (1, 1, 1), (64, 1, 1), {"x": x, "n": 40}, 8)
    assert np.all(big[:40] == 1) and np.all(big[40:] == 0)
    runner(mod, "oob", (1, 1, 1), (40, 1, 1), {"x": x, "n": 40}, 16)  # in bounds: fine
    assert np.all(big[:40] == 2) and np.all(big[40:] == 0)


_BARRIER = """.version 1.0
.kernel divergent
.arg x buffer u32 readwrite
.registers 8
    mov.sr r0, sr_thread_linear_id
    movi.b32 r1, 3
    setp.lt.u32 p0, r0, r1
    if p0
    barrier
    endif
    halt
.end
"""


def test_divergent_barrier_is_an_error(runner) -> None:  # noqa: ANN001
    from anywave.runtime.cpu import CpuError

    mod = assemble(_BARRIER)
    x = np.zeros(4, np.uint32)
    with pytest.raises(Exception) as emu_err:  # the oracle says the same
        emulate(mod, "divergent", grid=(1,), workgroup=(8,), args={"x": x}, wave_width=8)
    assert "divergent barrier" in str(emu_err.value)
    with pytest.raises(CpuError, match="divergent barrier.*3 of 8 threads"):
        runner(mod, "divergent", (1, 1, 1), (8, 1, 1), {"x": x}, 8)


_SPIN = """.version 1.0
.kernel spin
.arg x buffer u32 readwrite
.registers 4
    loop
    endloop
    halt
.end
"""


def test_ctrl_c_stops_an_endless_kernel(runner) -> None:  # noqa: ANN001
    import _thread

    mod = assemble(_SPIN)
    x = np.zeros(4, np.uint32)
    # interrupt_main does nothing while SIGINT is ignored, as it is in a process started in the
    # background by a non-interactive shell: then the kernel would spin for ever
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        t = threading.Timer(0.5, _thread.interrupt_main)
        t.start()
        with pytest.raises(KeyboardInterrupt):
            runner(mod, "spin", (4, 1, 1), (8, 1, 1), {"x": x}, 8)
        t.join()
    finally:
        signal.signal(signal.SIGINT, old)
    ok = assemble(_OOB)  # the target still works after the interrupt
    y = np.zeros(8, np.uint32)
    runner(ok, "oob", (1, 1, 1), (8, 1, 1), {"x": y, "n": 8}, 8)
    assert np.all(y == 1)


def test_no_compiler_is_a_clear_error(monkeypatch) -> None:  # noqa: ANN001
    from anywave.runtime import cpu

    monkeypatch.setenv("CC", "/nonexistent/anywave-cc")
    with pytest.raises(cpu.CpuError, match="C compiler"):
        cpu.CpuDevice()


def test_registered_and_used_by_kernel_calls(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    import anywave as aw
    from anywave.runtime.targets import available_targets

    st = {s.name: s for s in available_targets()}
    assert st["cpu"].available, st["cpu"].reason
    assert st["cpu"].infos[0].host_memory and set(st["cpu"].infos[0].wave_widths) == {8, 16, 32, 64}

    @aw.kernel
    def saxpy(a: aw.f32, x: aw.In[aw.f32], y: aw.Buffer[aw.f32], n: aw.i32):  # noqa: ANN202
        i = aw.global_id(0)
        if i < n:
            y[i] = aw.fma(a, x[i], y[i])

    x = np.arange(1000, dtype=np.float32)
    y = np.ones(1000, np.float32)
    want = y.copy()
    saxpy(2.0, x, want, 1000, grid=4, workgroup=256, target="emulator")
    saxpy(2.0, x, y, 1000, grid=4, workgroup=256, target="cpu")
    assert np.array_equal(y.view(np.uint32), want.view(np.uint32))


def test_libraries_are_cached_on_disk(runner, tmp_path, monkeypatch) -> None:  # noqa: ANN001
    from anywave.runtime import cpu

    monkeypatch.setenv("ANYWAVE_CACHE_DIR", str(tmp_path / "c"))
    dev = cpu.CpuDevice()
    mod = assemble(_OOB)
    r = cpu.CpuRunner(dev)
    x = np.zeros(8, np.uint32)
    r(mod, "oob", (1, 1, 1), (8, 1, 1), {"x": x, "n": 8}, 8)
    # the kernel's library and the worker pool's (runtime.cpu.POOL_C)
    libs = sorted((tmp_path / "c").rglob("*.so"))
    assert len(libs) == 2
    dev2 = cpu.CpuDevice()  # a new process's view: the libraries are read back, not rebuilt
    before = [p.stat().st_mtime_ns for p in libs]
    cpu.CpuRunner(dev2)(mod, "oob", (1, 1, 1), (8, 1, 1), {"x": x, "n": 8}, 8)
    assert [p.stat().st_mtime_ns for p in libs] == before and np.all(x == 2)
    assert sorted((tmp_path / "c").rglob("*.so")) == libs


def test_large_sources_compile_at_o1_and_small_ones_at_o3() -> None:
    from anywave.runtime import cpu

    small = "int f(void) { return 1; }\n"
    big = small + "/*" + "x" * cpu.LARGE_SOURCE_BYTES + "*/\n"
    assert cpu.cflags(small, optimize=True) == cpu.CFLAGS and "-O3" in cpu.CFLAGS
    flags = cpu.cflags(big, optimize=True)
    assert "-O1" in flags and "-O3" not in flags
    assert [f for f in flags if f != "-O1"] == [f for f in cpu.CFLAGS if f != "-O3"]  # nothing else changes
    for text in (small, big):  # ANYWAVE_TARGET_OPT=0: -O0 whatever the size, nothing else changes
        flags = cpu.cflags(text, optimize=False)
        assert [f for f in flags if f.startswith("-O")] == ["-O0"]
        assert [f for f in flags if f != "-O0"] == [f for f in cpu.CFLAGS if f != "-O3"]


def test_target_opt_setting_reaches_each_runtime_compiler(monkeypatch) -> None:  # noqa: ANN001
    from anywave.backends import opencl, sycl
    from anywave.errors import LaunchConfigError
    from anywave.runtime import cpu
    from anywave.runtime.targets import optimize_target_code

    text = "int f(void) { return 1; }\n"
    monkeypatch.setenv("ANYWAVE_TARGET_OPT", "1")
    assert optimize_target_code() and cpu.cflags(text) == cpu.CFLAGS
    assert "-cl-opt-disable" not in opencl.build_options(True).split() and "-O0" not in sycl.build_options(True)
    monkeypatch.delenv("ANYWAVE_TARGET_OPT")
    assert optimize_target_code()  # the default optimises
    monkeypatch.setenv("ANYWAVE_TARGET_OPT", "0")
    assert not optimize_target_code() and "-O0" in cpu.cflags(text)
    assert opencl.build_options(False).split() == [*opencl.BUILD_OPTIONS.split(), "-cl-opt-disable"]
    assert sycl.build_options(False) == ("-O0", *sycl.BUILD_OPTIONS)
    for off in ("false", " no", "OFF"):  # the spellings ANYWAVE_CHECK takes
        monkeypatch.setenv("ANYWAVE_TARGET_OPT", off)
        assert not optimize_target_code()
    for on in ("", "true", "Yes ", "on"):  # empty is unset: the default
        monkeypatch.setenv("ANYWAVE_TARGET_OPT", on)
        assert optimize_target_code()
    for bad in ("2", "0 1", "é", "\u0661", "nopt"):
        monkeypatch.setenv("ANYWAVE_TARGET_OPT", bad)
        with pytest.raises(LaunchConfigError, match="ANYWAVE_TARGET_OPT") as e:
            optimize_target_code()
        assert repr(bad) in str(e.value)  # the value as the user wrote it
        with pytest.raises(LaunchConfigError, match="ANYWAVE_TARGET_OPT"):
            cpu.cflags(text)  # a build refuses it


_VEC_TEST_C = r"""
#define AW_TEST_OP(name, body) \
  void name(const u32 *a, const u32 *b, u32 *out, long n) { \
    for (long i = 0; i < n; i += AW_V) { aw_vu x, y, r; memcpy(&x, a + i, sizeof x); memcpy(&y, b + i, sizeof y); \
      body; memcpy(out + i, &r, sizeof r); } }
AW_TEST_OP(t_udiv, r = aw_vudiv(x, y))
AW_TEST_OP(t_urem, r = aw_vurem(x, y))
AW_TEST_OP(t_sdiv, r = aw_vsdiv(x, y))
AW_TEST_OP(t_srem, r = aw_vsrem(x, y))
AW_TEST_OP(t_min, r = aw_vc32(aw_vminnum((aw_vf)x, (aw_vf)y)))
AW_TEST_OP(t_max, r = aw_vc32(aw_vmaxnum((aw_vf)x, (aw_vf)y)))
AW_TEST_OP(t_ex2, r = aw_vc32(aw_vex2((aw_vf)x)))
AW_TEST_OP(t_f2i, r = aw_vf2i32((aw_vf)x))
AW_TEST_OP(t_f2u, r = aw_vf2u32((aw_vf)x))
"""


def _min_num(a: float, b: float, is_min: bool) -> float:
    """IEEE 754-2008 minNum/maxNum with -0 < +0 (spec §8.2), from the definition."""
    import math

    if math.isnan(a):
        return b
    if math.isnan(b):
        return a
    if a == b:  # equal values: the one whose sign suits (-0 for min, +0 for max)
        neg_a = math.copysign(1.0, a) < 0
        return (a if neg_a else b) if is_min else (b if neg_a else a)
    return min(a, b) if is_min else max(a, b)


def test_vector_spellings_match_their_definitions(runner, tmp_path) -> None:  # noqa: ANN001
    """The cpu target's vector helpers (backends/cpu_vector.py) against independent references:
    32-bit division and remainder (Python integers, C's truncation), minNum/maxNum (the IEEE
    definition above), ex2 (the emulator's formula: NumPy's float64 2^x rounded to float32),
    f32 -> i32/u32 (truncate, saturate, NaN -> 0), on random and special operands."""
    import ctypes
    import subprocess

    from anywave.backends.cfamily_prelude import PRELUDE
    from anywave.backends.cpu import _HEADER
    from anywave.backends.cpu_vector import VEC_HEADER
    from anywave.runtime import cpu

    src = tmp_path / "v.c"
    src.write_text(_HEADER + PRELUDE + VEC_HEADER + _VEC_TEST_C)
    so = tmp_path / "v.so"
    subprocess.run([*runner.dev.cc.split(), *cpu.CFLAGS, str(src), "-o", str(so), "-lm"], check=True)
    lib = ctypes.CDLL(str(so))
    rng = np.random.default_rng(29)
    n = 1 << 14
    special = np.array([0, 1, 2, 3, 7, 0x7FFFFFFF, 0x80000000, 0x80000001, 0xFFFFFFFF, 0xFFFFFFFE, 0x10000,
                        0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001, 0x3F800000, 0xBF800000,
                        0x4B000000, 0x4F000000, 0x4F800000, 0xCF000000, 0x43000000, 0xC3160000], np.uint32)
    a = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    b = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    a[: len(special) ** 2] = np.repeat(special, len(special))
    b[: len(special) ** 2] = np.tile(special, len(special))
    b[n // 2: n // 2 + 4096] = rng.integers(1, 100, 4096).astype(np.uint32)  # small divisors
    a[n // 2 + 4096: n // 2 + 8192] = rng.integers(0, 256, 4096).astype(np.uint32) * 0x01010101

    def run(name: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        out = np.empty_like(x)
        fn = getattr(lib, name)
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long]
        fn(x.ctypes.data, y.ctypes.data, out.ctypes.data, x.size)
        return out

    # division: no zero divisor, no MIN / -1 (the bodies keep those out)
    bd = np.where(b == 0, 1, b).astype(np.uint32)
    sb = bd.view(np.int32).astype(np.int64)
    sa = a.view(np.int32).astype(np.int64)
    bad = (sa == -(2**31)) & (sb == -1)
    bs = np.where(bad, 1, bd.view(np.int32)).astype(np.int32).view(np.uint32)
    qu = [int(x) // int(y) for x, y in zip(a, bd, strict=True)]
    assert run("t_udiv", a, bd).tolist() == qu
    assert run("t_urem", a, bd).tolist() == [int(x) % int(y) for x, y in zip(a, bd, strict=True)]

    def trunc_div(x: int, y: int) -> int:
        q = abs(x) // abs(y)
        return q if (x < 0) == (y < 0) else -q

    sbs = bs.view(np.int32).astype(np.int64)
    qs = [trunc_div(int(x), int(y)) for x, y in zip(sa, sbs, strict=True)]
    assert run("t_sdiv", a, bs).view(np.int32).tolist() == qs
    assert run("t_srem", a, bs).view(np.int32).tolist() == [int(x) - q * int(y) for x, y, q in
                                                           zip(sa, sbs, qs, strict=True)]
    # a divisor the same in all 8 lanes of a chunk (a kernel's scalar: the common case) and
    # random ones (small, near 2^31 and 2^32), each against special and random dividends,
    # exact multiples of it among them (where a * (1/b) can fall just short of the quotient)
    nd = n // 8
    dv = np.concatenate([special, rng.integers(1, 100, nd // 4), rng.integers(2**31 - 4096, 2**31 + 4096, nd // 4),
                         rng.integers(2**32 - 4096, 2**32, nd // 4), rng.integers(1, 2**32, nd)])[:nd]
    ub = np.repeat(np.where(dv == 0, 1, dv).astype(np.uint32), 8)
    u64 = ub.astype(np.uint64)
    mult = u64 * rng.integers(0, (2**32 - 1) // u64 + 1, dtype=np.uint64)  # exact multiples of b, < 2^32
    ua = np.where(np.arange(n) % 3 == 0, a, np.where(np.arange(n) % 3 == 1, mult, mult - 1)).astype(np.uint32)
    assert run("t_udiv", ua, ub).tolist() == [int(x) // int(y) for x, y in zip(ua, ub, strict=True)]
    assert run("t_urem", ua, ub).tolist() == [int(x) % int(y) for x, y in zip(ua, ub, strict=True)]
    # signed, with exact multiples of positive divisors and their neighbours
    sb2 = ub.view(np.int32).astype(np.int64)
    m2 = np.where(sb2 > 0, sb2, 1) * rng.integers(0, 2**31 // np.abs(np.where(sb2 == 0, 1, sb2)) + 1)
    m2 = np.clip(m2, 0, 2**31 - 1)
    sel = np.arange(n) % 4
    sa2 = np.where(sel == 0, a.view(np.int32), np.where(sel == 1, m2, np.where(sel == 2, -m2, -m2 - 1)))
    sa2 = sa2.astype(np.int64).clip(-(2**31), 2**31 - 1)
    sa2 = np.where((sa2 == -(2**31)) & (sb2 == -1), 0, sa2)  # MIN / -1 stays out, as the bodies keep it
    xa, xb = sa2.astype(np.int32).view(np.uint32), sb2.astype(np.int32).view(np.uint32)
    qs2 = [trunc_div(int(x), int(y)) for x, y in zip(sa2, sb2, strict=True)]
    assert run("t_sdiv", xa, xb).view(np.int32).tolist() == qs2
    assert run("t_srem", xa, xb).view(np.int32).tolist() == [int(x) - q * int(y) for x, y, q in
                                                            zip(sa2, sb2, qs2, strict=True)]
    # minNum / maxNum (canonical NaN out)
    fa, fb = a.view(np.float32), b.view(np.float32)
    fb2 = np.where(rng.integers(0, 3, n) == 0, fa, fb).astype(np.float32)  # equal and signed-zero pairs
    fb2[::7] = -fa[::7]
    for name, is_min in (("t_min", True), ("t_max", False)):
        want = np.array([_min_num(float(x), float(y), is_min) for x, y in zip(fa, fb2, strict=True)], np.float32)
        wb = want.view(np.uint32).copy()
        wb[np.isnan(want)] = 0x7FC00000
        assert np.array_equal(run(name, a, fb2.view(np.uint32)), wb), name
    # ex2 on every 2^-? exponent region: random floats in [-160, 140] plus the specials
    x = np.concatenate([rng.uniform(-160, 140, n - len(special)).astype(np.float32), special.view(np.float32)])
    with np.errstate(over="ignore", invalid="ignore"):
        want = np.exp2(x.astype(np.float64)).astype(np.float32)
    wb = want.view(np.uint32).copy()
    wb[np.isnan(want)] = 0x7FC00000
    assert np.array_equal(run("t_ex2", x.view(np.uint32), x.view(np.uint32)), wb)
    # f32 -> i32 / u32
    f = np.concatenate([fa[: n // 2], (rng.standard_normal(n // 2) * 3e9).astype(np.float32)])

    def to_int(v: float, lo: int, hi: int) -> int:
        import math

        if math.isnan(v):
            return 0
        return max(lo, min(hi, int(v))) if math.isfinite(v) else (hi if v > 0 else lo)

    assert run("t_f2i", f.view(np.uint32), f.view(np.uint32)).view(np.int32).tolist() == \
        [to_int(float(v), -(2**31), 2**31 - 1) for v in f]
    assert run("t_f2u", f.view(np.uint32), f.view(np.uint32)).tolist() == [to_int(float(v), 0, 2**32 - 1) for v in f]


@pytest.mark.parametrize("solo_us", [0.0, 1e9])
def test_a_kernel_without_loops_runs_alone_or_with_the_pool(runner, monkeypatch, solo_us: float) -> None:  # noqa: ANN001
    # the launching thread runs a loop-free kernel and wakes the pool after SOLO_US with
    # workgroups left (aw_pool_solo): at 0 the pool joins after the first workgroup, at 1e9 never;
    # both give every workgroup's result, and an out-of-bounds access in the last one is reported
    from anywave.runtime import cpu

    monkeypatch.setattr(cpu, "SOLO_US", solo_us)
    src = """
.kernel k
.arg x buffer u32 readwrite
.arg n scalar u32
.registers 6
    mov.sr r0, sr_global_id_x
    movi.b32 r1, 2
    shl.b32 r2, r0, r1
    ld.device.b32 r3, x[r2]
    ldarg.b32 r4, n
    mul.i32 r3, r3, r4
    add.i32 r3, r3, r0
    st.device.b32 x[r2], r3
.end
"""
    mod = assemble(src)
    g = 37
    x = np.arange(g * 64, dtype=np.uint32)
    runner(mod, "k", (g, 1, 1), (64, 1, 1), {"x": x, "n": 3}, 32)
    t = np.arange(g * 64, dtype=np.uint64)
    assert np.array_equal(x, ((t * 3 + t) % 2**32).astype(np.uint32))
    with pytest.raises(OutOfBoundsError, match="argument 'x'"):
        runner(mod, "k", (g, 1, 1), (64, 1, 1), {"x": np.zeros(g * 64 - 1, np.uint32), "n": 3}, 32)


_COUNT_C = r"""
#include <stdint.h>
static uint64_t total, calls;
int count(uint8_t **b, const uint64_t *s, const uint64_t *c, const uint32_t *d, uint32_t lo, uint32_t hi,
          uint32_t *e, volatile int *st) {
  __atomic_add_fetch(&total, (uint64_t)(hi - lo), __ATOMIC_RELAXED);
  __atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED);
  return 0;
}
uint64_t get_total(void) { return total; }
uint64_t get_calls(void) { return calls; }
"""

_COUNT_PY = r"""
import ctypes, sys
from anywave.runtime import cpu
solo, so = sys.argv[1] == "1", sys.argv[2]
lib = ctypes.CDLL(so)
lib.get_total.restype = lib.get_calls.restype = ctypes.c_uint64
dev = cpu.get_device()
pool = dev.pool()
G = 2**32 - 1
grain = G // (dev.cores * 32)
err, stop, dims = (ctypes.c_uint32 * 8)(), ctypes.c_int(0), (ctypes.c_uint32 * 7)()
job = cpu._Job(ctypes.cast(lib.count, ctypes.c_void_p).value, 0, 0, 0, ctypes.addressof(dims),
               ctypes.addressof(err), ctypes.addressof(stop), G, grain, 0, 0, 0, 0)
jp = ctypes.addressof(job)
if solo:
    assert pool.aw_pool_solo(jp, 0, 1e9, 1e12) == 1
else:
    pool.aw_pool_start(jp, dev.cores)
    while not pool.aw_pool_wait(jp, 50):
        pass
print(lib.get_total(), job.done, lib.get_calls(), -(-G // grain))
"""


@pytest.mark.parametrize("solo", [False, True])
def test_the_pool_claims_every_workgroup_once_up_to_2_32(runner, tmp_path, solo: bool) -> None:  # noqa: ANN001
    # a launch may have up to 2^32 - 1 workgroups; the pool's claim counter passes 2^32 after the
    # last claim, which must not wrap to the first workgroups again (a hostile test's grid of
    # 65535 x 65537 workgroups never ended). A counting function stands in for a kernel; the pool
    # runs in a child process, so a wrapping counter fails the test instead of hanging it.
    import subprocess
    import sys

    from anywave.runtime import cpu

    src = tmp_path / "count.c"
    src.write_text(_COUNT_C)
    so = tmp_path / "count.so"
    subprocess.run([*runner.dev.cc.split(), *cpu.CFLAGS, str(src), "-o", str(so)], check=True)
    try:
        r = subprocess.run([sys.executable, "-c", _COUNT_PY, "1" if solo else "0", str(so)], capture_output=True,
                           text=True, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail("the pool did not finish 2^32 - 1 workgroups in 120 s (its claim counter wrapped)")
    assert r.returncode == 0, r.stderr[-2000:]
    total, done, calls, want_calls = map(int, r.stdout.split())
    assert total == 2**32 - 1 and done == 2**32 - 1 and calls == want_calls


_RELAUNCH_PY = r"""
import random, signal, threading, time, _thread
import numpy as np
import anywave as aw

# a process started with SIGINT ignored (a shell's background job) keeps it ignored, and then
# interrupt_main does nothing: Python's own handler, whatever the parent left
signal.signal(signal.SIGINT, signal.default_int_handler)

@aw.kernel
def mark(out: aw.Buffer[aw.u32], nx: aw.i32):
    w = aw.workgroup_id(1) * nx + aw.workgroup_id(0)
    out[w] = out[w] + aw.u32(1)

NX = NY = 2048  # 4M workgroups of one thread: tens of milliseconds, loop-free
G = NX * NY
a = np.zeros(G, np.uint32)
mark(a, NX, grid=(NX, NY, 1), workgroup=1, target="cpu")
assert (a == 1).all()
rng = random.Random(5)
interrupted = bad = 0
for trial in range(12):
    a = np.zeros(G, np.uint32)
    tm = threading.Timer(rng.uniform(0.001, 0.03), _thread.interrupt_main)
    try:  # the interrupt lands inside this block whatever the machine's load: in start(), in the
        tm.start()  # launch, or after it (join returns once the timer has fired; the pending
        mark(a, NX, grid=(NX, NY, 1), workgroup=1, target="cpu")  # KeyboardInterrupt is raised
        tm.join()  # at the next statement)
        time.sleep(0.05)
    except KeyboardInterrupt:
        interrupted += 1
        tm.join()  # it fired: no second interrupt can come
        b = np.zeros(G, np.uint32)
        mark(b, NX, grid=(NX, NY, 1), workgroup=1, target="cpu")  # the same plan, at once
        bad += int(not (b == 1).all())
print(interrupted, bad)
"""


def test_a_relaunch_after_ctrl_c_runs_every_workgroup_once(tmp_path) -> None:  # noqa: ANN001
    # a KeyboardInterrupt may land anywhere in a launch (before, in or after the pool's calls);
    # the launch takes its job back from the pool before the exception leaves, so the same plan
    # launched again at once runs every workgroup exactly once (a hostile test's relaunch hung:
    # the job was zeroed under a pool thread still inside it). In a child process with a timeout.
    import subprocess
    import sys

    script = tmp_path / "relaunch.py"  # (kernels are read from their source file)
    script.write_text(_RELAUNCH_PY)
    try:
        r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        pytest.fail("a launch after an interrupted one did not end in 300 s")
    assert r.returncode == 0, r.stderr[-3000:]
    interrupted, bad = map(int, r.stdout.split())
    assert bad == 0 and interrupted >= 1, r.stdout


def test_more_than_2_32_workgroups_is_a_clear_error(runner) -> None:  # noqa: ANN001
    # each dimension is legal, the product is not: refused before anything runs (a hostile test's
    # 65537 x 65536 grid ran one workgroup and returned, the count wrapped to 32 bits)
    from anywave.runtime.cpu import CpuError

    mod = assemble(".kernel k\n.arg x buffer u32 readwrite\n.registers 2\n    movi.b32 r0, 1\n"
                   "    movi.b32 r1, 0\n    st.device.b32 x[r1], r0\n.end\n")
    x = np.zeros(2, np.uint32)
    with pytest.raises(CpuError, match=r"4295032832 workgroups; the cpu target runs at most 4294967295"):
        runner(mod, "k", (65537, 65536, 1), (1, 1, 1), {"x": x}, 32)
    assert x[0] == 0


def test_libraries_build_through_a_precompiled_prefix_and_rebuild_a_damaged_one(tmp_path, monkeypatch) -> None:
    # the prefix every program begins with (anywave.backends.cpu.PREFIX) is compiled once into a
    # precompiled header beside its text, both with recorded hashes; a damaged one is rebuilt, a
    # removed one too, and ANYWAVE_CPU_PCH=0 compiles the whole text (module docs)
    from anywave.backends import cpu as backend
    from anywave.cache import verified_read
    from anywave.runtime import cpu

    try:
        dev = cpu.CpuDevice()
    except cpu.CpuError as e:
        pytest.skip(str(e))
    if not dev._is_gcc():
        pytest.skip("precompiled headers are made for GCC only")
    monkeypatch.setenv("ANYWAVE_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("ANYWAVE_CPU_PCH", raising=False)
    mod = assemble(".kernel k\n.arg x buffer u32 readwrite\n.registers 2\n    movi.b32 r0, 7\n"
                   "    movi.b32 r1, 0\n    st.device.b32 x[r1], r0\n.end\n")
    text = backend.translate(mod, 8).text
    assert text.startswith(backend.PREFIX + "\n")
    dev.library(text)  # the first library a cache gets compiles its whole text
    assert not list((tmp_path / "cpu").glob("prefix_*"))
    dev.library(text + "\n/* the second */\n")
    (h,) = (tmp_path / "cpu").glob("prefix_*.h")
    gch = h.with_name(h.name + ".gch")
    assert verified_read(h) == backend.PREFIX.encode() and verified_read(gch) is not None
    good = gch.read_bytes()
    gch.write_bytes(good[: len(good) // 2])  # damaged: its recorded hash no longer matches
    dev2 = cpu.CpuDevice()
    dev2.library(text + "\n/* another library */\n")
    dev2.library(text + "\n/* and another */\n")
    assert verified_read(gch) is not None  # rebuilt (GCC's bytes differ from build to build)
    h.unlink()
    gch.unlink()  # removed under a device that had found it
    dev.library(text + "\n/* a third */\n")
    assert verified_read(h) == backend.PREFIX.encode() and verified_read(gch) is not None
    off = tmp_path / "off"
    monkeypatch.setenv("ANYWAVE_CACHE_DIR", str(off))
    monkeypatch.setenv("ANYWAVE_CPU_PCH", "0")
    dev3 = cpu.CpuDevice()
    dev3.library(text)
    dev3.library(text + "\n/* the second */\n")
    assert not list((off / "cpu").glob("prefix_*"))


def test_a_precompiled_prefix_that_cannot_be_written_leaves_the_whole_text(tmp_path, monkeypatch) -> None:
    # a full disk while writing the precompiled header: the library still builds (whole text)
    import errno

    import anywave.cache as cache
    from anywave.backends import cpu as backend
    from anywave.runtime import cpu

    try:
        dev = cpu.CpuDevice()
    except cpu.CpuError as e:
        pytest.skip(str(e))
    monkeypatch.setenv("ANYWAVE_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("ANYWAVE_CPU_PCH", raising=False)
    real = cache.atomic_write

    def full(path, data, **kw):  # noqa: ANN001, ANN003, ANN202
        if path.name.startswith("prefix_"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(path, data, **kw)

    monkeypatch.setattr(cache, "atomic_write", full)
    mod = assemble(".kernel k\n.arg x buffer u32 readwrite\n.registers 2\n    movi.b32 r0, 7\n"
                   "    movi.b32 r1, 0\n    st.device.b32 x[r1], r0\n.end\n")
    text = backend.translate(mod, 8).text
    for i in range(3):
        assert dev.library(text + f"\n/* library {i} */\n") is not None
    assert not list((tmp_path / "cpu").glob("prefix_*")) and len(list((tmp_path / "cpu").glob("k_*.so"))) == 3


def test_each_level_gets_its_own_library_and_the_same_bits(runner, tmp_path, monkeypatch) -> None:  # noqa: ANN001
    # a launch made at ANYWAVE_TARGET_OPT=0 and one at 1 build two libraries (-O0, -O3) from the
    # same program, and both compute x * 3 + 1 with wrap-around
    monkeypatch.setenv("ANYWAVE_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("ANYWAVE_CPU_PCH", "0")
    mod = assemble(".kernel k\n.arg x buffer u32 readwrite\n.registers 4\n    mov.sr r0, sr_global_id_x\n"
                   "    movi.b32 r2, 2\n    shl.b32 r0, r0, r2\n    ld.device.b32 r1, x[r0]\n"
                   "    movi.b32 r2, 3\n    mul.i32 r1, r1, r2\n    movi.b32 r3, 1\n"
                   "    add.i32 r1, r1, r3\n    st.device.b32 x[r0], r1\n.end\n")
    x0 = np.array([0, 1, 7, 0xFFFFFFFF, 0x80000000, 12345] * 11, np.uint32)[:64]
    want = (x0.astype(np.uint64) * 3 + 1).astype(np.uint32)
    built = []
    for level in ("0", "1", "0"):
        monkeypatch.setenv("ANYWAVE_TARGET_OPT", level)
        x = x0.copy()
        runner(mod, "k", (1, 1, 1), (64, 1, 1), {"x": x}, 64)
        assert np.array_equal(x, want)
        built.append(set((tmp_path / "cpu").glob("k_*.so")))  # (the worker pool's library may be among them)
    assert len(built[1] - built[0]) == 1 and built[2] == built[1]  # a new library at 1; 0's again at 0
