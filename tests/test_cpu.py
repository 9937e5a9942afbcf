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
    assert cpu.cflags(small) == cpu.CFLAGS and "-O3" in cpu.CFLAGS
    flags = cpu.cflags(big)
    assert "-O1" in flags and "-O3" not in flags
    assert [f for f in flags if f != "-O1"] == [f for f in cpu.CFLAGS if f != "-O3"]  # nothing else changes
