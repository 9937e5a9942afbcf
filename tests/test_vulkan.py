"""Vulkan target: the conformance suite as SPIR-V on a real Vulkan device (Mesa's lavapipe in CI)
at every subgroup size the device offers -- every deterministic case bit-identical to the
suite's expectations -- plus the library kernels and the training example with the same bits as
the emulator. Skips with the reason when the binding, loader or driver is missing."""

from __future__ import annotations

import numpy as np
import pytest

import anywave as aw
import tiers
from anywave.asm import assemble
from anywave.conformance import suite

pytestmark = pytest.mark.vulkan


@pytest.fixture(scope="module")
def runner():  # noqa: ANN201
    from anywave.runtime import vulkan

    ok, why = vulkan.status()
    if not ok:
        pytest.skip(f"Vulkan unavailable: {why}")
    return vulkan.VulkanRunner()


def _widths(runner) -> tuple[int, ...]:  # noqa: ANN001
    return runner.dev.features.wave_widths


@pytest.mark.parametrize("W", tiers.widths("vulkan"))
def test_conformance(runner, W: int) -> None:  # noqa: ANN001
    if W not in _widths(runner):
        pytest.skip(f"{runner.dev.name} cannot run subgroups of {W} (it offers {list(_widths(runner))}"
                    f"{'; ' + runner.dev.subgroup_note if runner.dev.subgroup_note else ''})")
    rep = suite.run_suite(runner, (W,), progress=False)
    bad = rep.failures()
    assert not bad, "\n".join(f"{r.case} W={r.wave_width}: {r.status}: {r.message[:400]}" for r in bad[:10])
    skipped = sum(1 for c in suite.load_cases() if W not in c.wave_widths)
    assert rep.counts().get("pass", 0) == len(suite.load_cases()) - skipped


_PARTIAL = """
.kernel lanes
.arg out buffer u32 readwrite
.registers 8
    mov.sr r0, sr_thread_linear_id
    mov.sr r1, sr_lane_id
    movi.b32 r2, 1
    setp.ne.u32 p0, r1, r1
    ballot.b64 r4:r5, !p0
    wred.add.u32 r3, r2
    movi.b32 r7, 4
    shl.b32 r6, r0, r7
    st.device.b32 out[r6], r1
    st.device.b32 out[r6+4], r3
    st.device.b64 out[r6+8], r4:r5
.end
"""


def test_partial_last_wave_follows_the_linear_lane_order(runner) -> None:  # noqa: ANN001
    # a 5x3 workgroup: 15 threads, not a multiple of W; lanes are linear ids (x fastest), the
    # last wave has 15 % W lanes, its ballot has exactly those bits set
    mod = assemble(_PARTIAL)
    for W in _widths(runner):
        out = np.zeros(15 * 4, np.uint32)
        runner(mod, "lanes", (2, 1, 1), (5, 3, 1), {"out": out}, W)
        out = out.reshape(15, 4)
        t = np.arange(15)
        sizes = np.minimum(W, 15 - (t // W) * W)
        assert np.array_equal(out[:, 0], t % W)
        assert np.array_equal(out[:, 1], sizes)
        got = out[:, 2].astype(object) | (out[:, 3].astype(object) << 32)
        assert list(got) == list((1 << sizes.astype(object)) - 1)


def test_errors_name_the_problem(runner) -> None:  # noqa: ANN001
    from anywave.runtime.vulkan import VulkanError

    mod = assemble(_PARTIAL)
    W = (_widths(runner) or (8,))[0]
    buf = {"out": np.zeros(4, np.uint32)}
    with pytest.raises(VulkanError, match="missing \\['out'\\]"):
        runner(mod, "lanes", (1, 1, 1), (4, 1, 1), {}, W)
    with pytest.raises(VulkanError, match="no kernel 'nope'"):
        runner(mod, "nope", (1, 1, 1), (4, 1, 1), buf, W)
    with pytest.raises(VulkanError, match="exceeds the device's maximum"):
        runner(mod, "lanes", (1, 1, 1), (1 << 20, 1, 1), buf, W)
    with pytest.raises(VulkanError, match="must be a NumPy array"):
        runner(mod, "lanes", (1, 1, 1), (4, 1, 1), {"out": [0, 0]}, W)
    with pytest.raises(VulkanError, match="maxComputeWorkGroupCount"):
        runner(mod, "lanes", (1, 1 << 20, 1), (4, 1, 1), buf, W)
    from anywave.errors import LaunchConfigError

    fixed = assemble(_PARTIAL.replace(".registers 8", ".registers 8\n.workgroup_size 8, 2"))
    with pytest.raises(LaunchConfigError, match=r"requires workgroup size \(8, 2, 1\)"):
        runner(fixed, "lanes", (1, 1, 1), (4, 1, 1), buf, W)


def test_registered_target_and_devices_listing(runner, capsys) -> None:  # noqa: ANN001
    from anywave.cli import main
    from anywave.runtime.targets import available_targets, get_target

    st = {s.name: s for s in available_targets()}["vulkan"]
    assert st.available, st.reason
    (info,) = st.infos
    assert info.wave_width in _widths(runner) and "missing_float_controls" in info.details
    t = get_target("vulkan")
    out = np.zeros(15 * 4, np.uint32)
    t.launch(assemble(_PARTIAL), "lanes", (1, 1, 1), (15, 1, 1), {"out": out})
    assert list(out.reshape(15, 4)[:, 0]) == [i % t.info.wave_width for i in range(15)]
    assert main(["devices"]) == 0
    assert "vulkan" in capsys.readouterr().out


def test_fma_f64_exact_on_hard_inputs(runner) -> None:  # noqa: ANN001
    # the f64 fma emulation (Dekker product + round-to-odd sum, scaled near the range ends)
    # against the emulator on random operands spread over the whole exponent range
    from anywave.emu import emulate

    src = """
.kernel f
.arg a buffer f64 read
.arg b buffer f64 read
.arg c buffer f64 read
.arg out buffer f64 write
.registers 10
    mov.sr r0, sr_global_id_x
    movi.b32 r1, 3
    shl.b32 r0, r0, r1
    ld.device.b64 r2:r3, a[r0]
    ld.device.b64 r4:r5, b[r0]
    ld.device.b64 r6:r7, c[r0]
    fma.f64 r8:r9, r2:r3, r4:r5, r6:r7
    st.device.b64 out[r0], r8:r9
.end
"""
    g = np.random.default_rng(7)
    n = 4096
    bits = [(g.integers(0, 1 << 52, n, dtype=np.uint64) | (g.integers(0, 2047, n, dtype=np.uint64) << 52)
             | (g.integers(0, 2, n, dtype=np.uint64) << 63)) for _ in range(3)]
    # pair exponents so products land near overflow, underflow and in the subnormal range
    ea = g.integers(-1074, 1024, n)
    bits[1] = (bits[1] & np.uint64((1 << 63) | ((1 << 52) - 1))) | (np.clip(
        1023 + g.integers(-1022, 1024, n) - (ea // 2), 1, 2046).astype(np.uint64) << 52)
    a, b, c = (x.view(np.float64) for x in bits)
    mod = assemble(src)
    exp, got = np.zeros(n), np.zeros(n)
    emulate(mod, "f", grid=(n // 64,), workgroup=(64,), args={"a": a, "b": b, "c": c, "out": exp}, wave_width=8)
    runner(mod, "f", (n // 64, 1, 1), (64, 1, 1), {"a": a, "b": b, "c": c, "out": got}, 8)
    same = (exp.view(np.uint64) == got.view(np.uint64)) | (np.isnan(exp) & np.isnan(got))
    assert same.all(), [(a[i], b[i], c[i], exp[i], got[i]) for i in np.flatnonzero(~same)[:5]]


_NAN_SRC = """
.kernel k
.arg a buffer u32 read
.arg b buffer u32 read
.arg y buffer u32 write
.registers 12
    mov.sr r0, sr_global_id_x
    movi.b32 r1, 2
    shl.b32 r1, r0, r1
    movi.b32 r2, 5
    shl.b32 r3, r0, r2
    ld.device.b32 r4, a[r1]
    ld.device.b32 r5, b[r1]
    add.f32 r6, r4, r5
    st.device.b32 y[r3+0], r6
    sub.f32 r6, r4, r5
    st.device.b32 y[r3+4], r6
    mul.f32 r6, r4, r5
    st.device.b32 y[r3+8], r6
    div.f32 r6, r4, r5
    st.device.b32 y[r3+12], r6
    fma.f32 r6, r4, r5, r5
    st.device.b32 y[r3+16], r6
    sqrt.f32 r6, r4
    st.device.b32 y[r3+20], r6
    add.f32 r6, r4, r5
    movi.b32 r7, 0x3c00
    add.f16x2 r8, r7, r6
    st.device.b32 y[r3+24], r8
.end
"""


def test_nan_results_are_canonical(runner) -> None:  # noqa: ANN001
    # lavapipe's OpFAdd/OpFSub/OpFMul pass an input NaN's payload through; the SPIR-V backend
    # returns the canonical quiet NaN 0x7FC00000 as the emulator and the C family do, so a later
    # f16x2 reading of the bits (the fuzz's reduced case, bench/fuzz_robust_sc.py) agrees too.
    # Expected values: NumPy binary32 / binary16, NaN results replaced by the canonical NaNs.
    vals = np.array([0x7FFFFFFF, 0xFFC00001, 0x7F800001, 0xFFBFFFFF, 0x7FC0FFFF, 0x7FC00000, 0x3F800000,
                     0x80000000, 0x7F800000, 0xFF800000], np.uint32)
    a = np.repeat(vals, vals.size)
    b = np.tile(vals, vals.size)
    n = a.size
    with np.errstate(all="ignore"):
        fa, fb = a.view(np.float32), b.view(np.float32)
        res = [fa + fb, fa - fb, fa * fb, fa / fb,
               (fa.astype(np.float64) * fb.astype(np.float64) + fb.astype(np.float64)).astype(np.float32),
               np.sqrt(fa)]
    want = np.zeros((n, 8), np.uint32)
    for k, r in enumerate(res):
        want[:, k] = np.where(np.isnan(r), np.uint32(0x7FC00000), r.view(np.uint32))
    # f16x2 add of (1.0, +0) and the canonical add result's halves: low half 0x0000 (+0) of
    # 0x7FC00000, or of the finite/inf result
    s = want[:, 0]
    with np.errstate(all="ignore"):
        h = [np.float16(1.0) + (s & 0xFFFF).astype(np.uint16).view(np.float16),
             np.float16(0.0) + (s >> 16).astype(np.uint16).view(np.float16)]
    hb = [np.where(np.isnan(v), np.uint16(0x7E00), v.view(np.uint16)).astype(np.uint32) for v in h]
    want[:, 6] = hb[0] | (hb[1] << 16)
    assert want[0, 0] == 0x7FC00000 and want[0, 6] == 0x7E003C00  # NaN + NaN: canonical, low half +0
    from anywave.emu import emulate

    emu = np.zeros(n * 8, np.uint32)
    emulate(assemble(_NAN_SRC), "k", grid=(1,), workgroup=(n,), args={"a": a, "b": b, "y": emu}, wave_width=8)
    np.testing.assert_array_equal(emu.reshape(n, 8), want)
    got = np.zeros(n * 8, np.uint32)
    runner(assemble(_NAN_SRC), "k", (1, 1, 1), (n, 1, 1), {"a": a, "b": b, "y": got}, _widths(runner)[0])
    np.testing.assert_array_equal(got.reshape(n, 8), want)


_CVT_NAN_SRC = """
.kernel k
.arg a buffer u32 read
.arg y buffer u32 write
.registers 12
    mov.sr r0, sr_global_id_x
    movi.b32 r1, 2
    shl.b32 r1, r0, r1
    movi.b32 r2, 5
    shl.b32 r3, r0, r2
    ld.device.b32 r4, a[r1]
    mov.b32 r5, r4
    cvt.f32.bf16 r6, r4
    st.device.b32 y[r3+0], r6
    clz.b32 r7, r6
    st.device.b32 y[r3+4], r7
    cvt.f32.f16 r6, r4
    st.device.b32 y[r3+8], r6
    cvt.f64.f32 r6:r7, r4
    st.device.b64 y[r3+16], r6:r7
    cvt.f32.f64 r6, r4:r5
    st.device.b32 y[r3+12], r6
.end
"""


def test_nan_conversions_are_canonical(runner) -> None:  # noqa: ANN001
    # float -> wider float widenings (exact bit manipulations in the SPIR-V backend) kept a NaN's
    # payload: cvt.f32.bf16 of 0xffff gave 0xffff0000, so clz of the bits differed from the
    # emulator's (fuzz seed 10). Expected: NumPy conversions, NaN results canonical (0x7FC00000,
    # 0x7FF8000000000000), clz from Python's int.bit_length.
    a = np.array([0x7FFFFFFF, 0xFFFFFFFF, 0x0000FFFF, 0x00007C01, 0x00007FC1, 0xFF80FE01, 0x7F800001,
                  0x3F803C00, 0x00008000, 0x7F7FFFFF], np.uint32)
    n = a.size
    lo = (a & 0xFFFF).astype(np.uint16)
    with np.errstate(all="ignore"):
        bf = (lo.astype(np.uint32) << 16).view(np.float32)
        h = lo.view(np.float16).astype(np.float32)
        d = a.view(np.float32).astype(np.float64)
        f = ((a.astype(np.uint64) << 32) | a.astype(np.uint64)).view(np.float64).astype(np.float32)
    c32 = lambda v: np.where(np.isnan(v), np.uint32(0x7FC00000), v.view(np.uint32))  # noqa: E731
    d64 = np.where(np.isnan(d), np.uint64(0x7FF8000000000000), d.view(np.uint64))
    want = np.zeros((n, 8), np.uint32)
    want[:, 0] = c32(bf)
    want[:, 1] = [32 - int(v).bit_length() for v in want[:, 0]]
    want[:, 2] = c32(h)
    want[:, 3] = c32(f)
    want[:, 4] = (d64 & 0xFFFFFFFF).astype(np.uint32)
    want[:, 5] = (d64 >> 32).astype(np.uint32)
    assert want[0, 0] == 0x7FC00000 and want[0, 1] == 1
    from anywave.emu import emulate

    mod = assemble(_CVT_NAN_SRC)
    emu = np.zeros(n * 8, np.uint32)
    emulate(mod, "k", grid=(1,), workgroup=(n,), args={"a": a, "y": emu}, wave_width=8)
    np.testing.assert_array_equal(emu.reshape(n, 8), want)
    got = np.zeros(n * 8, np.uint32)
    runner(mod, "k", (1, 1, 1), (n, 1, 1), {"a": a, "y": got}, _widths(runner)[0])
    np.testing.assert_array_equal(got.reshape(n, 8), want)


def test_library_kernels_same_bits_as_the_emulator(runner) -> None:  # noqa: ANN001
    import anywave.kernels as K

    g = np.random.default_rng(3)
    x = g.standard_normal(1000).astype(np.float32)
    y = g.standard_normal(1000).astype(np.float32)
    m = (g.standard_normal((37, 29)) * 3).astype(np.float32)
    m2 = g.standard_normal((29, 19)).astype(np.float32)
    img = g.random((23, 31)).astype(np.float32)
    keys = g.standard_normal(300).astype(np.float32)
    data = g.integers(0, 256, 5000).astype(np.uint32)
    calls = {
        "vector_add": lambda **kw: K.vector_add(x, y, **kw), "saxpy": lambda **kw: K.saxpy(1.5, x, y, **kw),
        "relu": lambda **kw: K.relu(x, **kw), "gelu": lambda **kw: K.gelu(x, **kw),
        "sum_f32": lambda **kw: K.sum_f32(x, **kw), "prefix_sum": lambda **kw: K.prefix_sum(data, **kw),
        "histogram": lambda **kw: K.histogram(data, **kw), "transpose": lambda **kw: K.transpose(m, **kw),
        "matmul": lambda **kw: K.matmul(m, m2, m2[0], relu=True, **kw),
        "softmax_rows": lambda **kw: K.softmax_rows(m, **kw),
        "layer_norm": lambda **kw: K.layer_norm(m, m[0], m[1], **kw),
        "gaussian_blur5": lambda **kw: K.gaussian_blur5(img, **kw),
        "sobel_magnitude": lambda **kw: K.sobel_magnitude(img, **kw),
        "bitonic_sort": lambda **kw: K.bitonic_sort(keys, **kw),
    }
    for W in _widths(runner):
        for name, f in calls.items():
            want = np.atleast_1d(f(wave_width=W, target="emulator"))
            got = np.atleast_1d(f(wave_width=W, target="vulkan"))
            assert want.dtype == got.dtype and np.array_equal(want.view(np.uint8), got.view(np.uint8)), (name, W)


def test_fragment_gemm_same_bits_as_the_emulator(runner) -> None:  # noqa: ANN001
    """The library's fragment GEMM (spec §8.14: fragment loads from device memory, mma with the
    accumulator in place over the K loop, bias) gives the emulator's bits; with the GELU
    epilogue (``tanh.approx``, class approx) it stays within tanh's bound (spec §8.2: relative
    2^-10.9 on each side) of the emulator's."""
    import ml_dtypes

    from anywave.kernels.gemm_mma import gemm

    g = np.random.default_rng(11)
    tile = {"TM": 1, "TN": 2, "WM": 2, "WN": 1}  # two waves of 16x32 blocks
    for W in _widths(runner):
        for dt in (ml_dtypes.bfloat16, np.float16):
            a = (g.standard_normal((40, 40)) / 2).astype(dt)
            b = (g.standard_normal((40, 50)) / 2).astype(dt)
            bias = g.standard_normal(50).astype(np.float32)
            want = gemm(a, b, bias, target="emulator", wave_width=W, tile=tile)
            got = gemm(a, b, bias, target="vulkan", wave_width=W, tile=tile)
            assert np.array_equal(want.view(np.uint32), got.view(np.uint32)), (W, dt)
        x = want.astype(np.float64)
        ge = gemm(a, b, bias, gelu=True, target="emulator", wave_width=W, tile=tile)
        gv = gemm(a, b, bias, gelu=True, target="vulkan", wave_width=W, tile=tile)
        assert (np.abs(ge.astype(np.float64) - gv) <= 2 * 2.0 ** -10.9 * np.abs(x) + 2.0 ** -20 * np.abs(ge)).all()


def test_training_example_same_bits(runner) -> None:  # noqa: ANN001
    from anywave.torch import train as T

    cfg = T.TrainConfig(steps=5, batch=64, lr=0.5, seed=0)
    data = T.load_data(cfg.seed)
    W = _widths(runner)[0] if _widths(runner) else 8
    base = T.train_on_cpu_target(data, cfg, "emulator", wave_width=W)
    r = T.train_on_cpu_target(data, cfg, "vulkan", wave_width=W)
    assert r.info["wave_width"] == W
    T.assert_identical([base, r])


def test_declared_capabilities_the_device_lacks_are_refused(runner, monkeypatch) -> None:  # noqa: ANN001
    from anywave.isa.types import Capability
    from anywave.runtime.vulkan import VulkanError

    mod = assemble(_PARTIAL)  # declares wave_ops (inferred from ballot / wred)
    monkeypatch.setattr(runner.dev, "capabilities", lambda: Capability.F16)
    with pytest.raises(VulkanError, match=r"declares capabilities \['wave_ops'\]"):
        runner(mod, "lanes", (1, 1, 1), (4, 1, 1), {"out": np.zeros(64, np.uint32)}, (_widths(runner) or (8,))[0])


def test_compiled_kernels_with_host_arrays_and_tensors(runner) -> None:  # noqa: ANN001
    # the launch API: @aw.kernel on target="vulkan" with NumPy arrays, anywave arrays and CPU tensors
    @aw.kernel
    def axpy(x: aw.In[aw.f32], y: aw.In[aw.f32], out: aw.Out[aw.f32], a: aw.f32, n: aw.i32):
        i = aw.global_id(0)
        if i < n:
            out[i] = a * x[i] + y[i]

    g = np.random.default_rng(5)
    x, y = g.standard_normal(300).astype(np.float32), g.standard_normal(300).astype(np.float32)
    want = np.float32(0.5) * x + y
    out = np.zeros(300, np.float32)
    axpy(x, y, out, 0.5, 300, grid=10, workgroup=32, target="vulkan")
    assert np.array_equal(out, want)
    dx, dy, dout = aw.array(x, target="vulkan"), aw.array(y, target="vulkan"), aw.zeros(300, aw.f32, target="vulkan")
    axpy(dx, dy, dout, 0.5, 300, grid=10, workgroup=32, target="vulkan")
    aw.synchronize()
    assert np.array_equal(dout.numpy(), want)
    torch = pytest.importorskip("torch")
    tout = torch.zeros(300)
    axpy(torch.from_numpy(x), torch.from_numpy(y), tout, 0.5, 300, grid=10, workgroup=32, target="vulkan")
    assert np.array_equal(tout.numpy(), want)


_TIMEOUT_SCRIPT = r'''
import numpy as np
import anywave as aw
from anywave.runtime import vulkan
from anywave.errors import WaveError

vulkan.FENCE_TIMEOUT_NS = 1_000  # 1 us: the dispatch below takes far longer

@aw.kernel
def slow(out: aw.Out[aw.f32], n: aw.i32):
    acc = 1.0
    for i in range(n):
        acc = aw.fma(acc, 0.999999, 1e-7)
    out[aw.global_id(0)] = acc

out = np.zeros(64, np.float32)
try:
    slow(out, 20_000_000, grid=1, workgroup=64, target="vulkan")
except WaveError as e:
    assert "did not finish" in str(e), e
    print("first:", type(e).__name__)
else:
    raise SystemExit("no timeout reported")
try:
    slow(out, 1, grid=1, workgroup=64, target="vulkan")
except WaveError as e:
    assert "refuses the launch" in str(e), e
    print("second: refused")
else:
    raise SystemExit("a wedged device accepted a launch")
print("alive")
'''


def _run_child(tmp_path, source: str, name: str):  # noqa: ANN001, ANN202
    """Run ``source`` as a script in a new Python process (kernels must live in a file: their
    source is read); returns the CompletedProcess."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, ANYWAVE_CACHE_DIR=str(tmp_path / "cache"))
    script = tmp_path / name
    script.write_text(source)
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env,
                          timeout=600)  # hang guard


def test_a_dispatch_that_times_out_is_an_error_not_a_crash(runner, tmp_path) -> None:  # noqa: ANN001
    # A fence timeout used to free the buffers while the dispatch was still running, and the
    # process died (SIGSEGV in the driver). In a child process (the device stays wedged there).
    # The dispatch ends soon after the timeout (lavapipe cuts the loop): the exit waits for it
    # (saying so) instead of running the driver's exit-time destructors under it, which killed the
    # process after its last line now and then (SIGSEGV or abort, rc -11 / -6).
    r = _run_child(tmp_path, _TIMEOUT_SCRIPT, "timeout_child.py")
    assert r.returncode == 0, (r.returncode, r.stdout[-2000:], r.stderr[-2000:])
    assert "first: VulkanError" in r.stdout and "second: refused" in r.stdout and "alive" in r.stdout, r.stdout
    assert "ran past its time limit, before exiting" in r.stderr, r.stderr


_OVERDUE_SCRIPT = r"""
import numpy as np
import anywave as aw
from anywave.runtime import interrupt, vulkan
from anywave.errors import WaveError

vulkan.FENCE_TIMEOUT_NS = 1_000  # 1 us
interrupt.OVERDUE_EXIT_WAIT_S = 0.0  # do not wait at exit: the dispatch below runs for minutes

@aw.kernel
def long(out: aw.Out[aw.f32], x: aw.In[aw.f32], n: aw.i32):
    acc = x[aw.global_id(0)]
    for i in range(n):
        acc = aw.sqrt(aw.fma(acc, acc, 1.0))
        acc = aw.sqrt(aw.fma(acc, acc, 2.0))
    out[aw.global_id(0)] = acc

out = np.zeros(64 * 4096, np.float32)
try:
    long(out, np.ones_like(out), 60_000, grid=4096, workgroup=64, target="vulkan")
except WaveError as e:
    print("timeout:", type(e).__name__)
print("alive", flush=True)
"""


def test_a_dispatch_still_running_at_exit_ends_the_process_cleanly(runner, tmp_path) -> None:  # noqa: ANN001
    # Still running when the exit's wait for it ends: the process ends at once with status 1 and
    # a message, without the driver's exit-time destructors (which crashed about a third of such
    # exits here: SIGSEGV or "double free or corruption").
    r = _run_child(tmp_path, _OVERDUE_SCRIPT, "overdue_child.py")
    assert r.returncode == 1, (r.returncode, r.stdout[-2000:], r.stderr[-2000:])
    assert "timeout: VulkanError" in r.stdout and "alive" in r.stdout, r.stdout
    assert "is still running 0 s after the program ended; exiting without waiting for it" in r.stderr, r.stderr


_PENDING_SCRIPT = r"""
import numpy as np
import anywave as aw

@aw.kernel
def work(out: aw.Out[aw.f32], n: aw.i32):
    acc = 1.0
    for i in range(n):
        acc = aw.sqrt(aw.fma(acc, acc, 1.0))
    out[aw.global_id(0)] = acc

out = aw.zeros(64 * 64, aw.f32, target="vulkan")
work(out, 1, grid=64, workgroup=64, target="vulkan")
aw.synchronize()
work(out, 30_000, grid=64, workgroup=64, target="vulkan")  # enqueued only: still running at the end
print("enqueued", flush=True)
"""


def test_dispatches_still_running_at_the_end_are_waited_for(runner, tmp_path) -> None:  # noqa: ANN001
    # A program that ends right after asynchronous launches on device arrays: the exit waits for
    # them (saying so on stderr) before the driver's destructors run.
    r = _run_child(tmp_path, _PENDING_SCRIPT, "pending_child.py")
    assert r.returncode == 0, (r.returncode, r.stdout[-2000:], r.stderr[-2000:])
    assert "enqueued" in r.stdout, r.stdout
    assert "waiting for the work enqueued on Vulkan" in r.stderr, r.stderr


def test_the_fence_timeout_comes_from_the_environment() -> None:
    # parsed without a device: seconds as a positive number, 60 s when unset, anything else named
    from anywave.runtime.vulkan import _fence_timeout_ns

    assert _fence_timeout_ns(None) == _fence_timeout_ns("") == 60 * 10**9
    assert _fence_timeout_ns("600") == 600 * 10**9 and _fence_timeout_ns("0.5") == 5 * 10**8
    for bad in ("0", "-3", "nan", "inf", "ten", "1e12"):
        with pytest.raises(ValueError, match=f"ANYWAVE_VULKAN_TIMEOUT .*{bad!r}"):
            _fence_timeout_ns(bad)


_THREADS_AT_EXIT = r"""
import sys, threading, time
import anywave as aw
from anywave.runtime import interrupt

@aw.kernel
def spin(y: aw.Buffer[aw.u32], iters: aw.u32):
    i = aw.global_id(0)
    acc = y[i]
    k = aw.u32(0)
    while k < iters:
        acc = acc * aw.u32(1664525) + aw.u32(1013904223)
        k += aw.u32(1)
    y[i] = acc

y = aw.zeros(256, aw.u32, target="vulkan")
spin(y, 10, grid=1, workgroup=256)
aw.synchronize()

def launcher(n):
    for _ in range(n):
        spin(y, 200, grid=1, workgroup=256)
    aw.synchronize()

if sys.argv[1] == "poll":  # the exit hook's queue test while threads submit and retire
    threads = [threading.Thread(target=launcher, args=(300,)) for _ in range(3)]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        interrupt.busy_queues()
    print("done", flush=True)
else:  # daemon threads still launching when the program ends
    for _ in range(2):
        threading.Thread(target=launcher, args=(10**9,), daemon=True).start()
    time.sleep(0.3)
    print("main ends", flush=True)
"""


@pytest.mark.parametrize("mode", ["poll", "daemon"])
def test_threads_launching_at_exit_do_not_crash_the_process(runner, tmp_path, mode) -> None:  # noqa: ANN001
    # The exit hook's queue test read the fences while other threads reset them (SIGSEGV inside
    # lavapipe in 5 of 6 runs), and daemon threads launching for ever kept the queue from draining
    # (then a SIGSEGV): the test now takes the device only when no thread holds it, and the hook
    # makes the device refuse new work before it waits. A race: one clean run proves little, so
    # a few runs each.
    for _ in range(3):
        r = _run_child(tmp_path, _THREADS_AT_EXIT.replace("sys.argv[1]", repr(mode)), "threads_child.py")
        assert r.returncode == 0, (r.returncode, r.stdout[-1000:], r.stderr[-2000:])
        assert ("done" if mode == "poll" else "main ends") in r.stdout
        if mode == "daemon":
            assert "refuses the launch of kernel 'spin'" in r.stderr and "the process is exiting" in r.stderr


def test_a_bad_timeout_variable_makes_only_vulkan_unavailable(tmp_path) -> None:
    # read when the device is created: `import anywave` and the other targets are not affected
    src = r"""
import numpy as np
import anywave as aw
from anywave.runtime import vulkan

@aw.kernel
def fill(y: aw.Out[aw.f32]):
    y[aw.global_id(0)] = 2.0

y = np.zeros(8, np.float32)
fill(y, grid=1, workgroup=8, target="emulator", wave_width=8)
print(y.sum())
print(vulkan.status())
"""
    import os
    import subprocess
    import sys

    script = tmp_path / "badtimeout.py"
    script.write_text(src)
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, ANYWAVE_VULKAN_TIMEOUT="5s"))
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.splitlines()
    assert lines[0] == "16.0"
    assert "(False" in lines[1] and "ANYWAVE_VULKAN_TIMEOUT must be a positive number of seconds, not '5s'" in lines[1]


_TARGET_OPT_PY = r"""
import os, sys
import numpy as np
import anywave as aw
from anywave.errors import LaunchConfigError
from anywave.runtime import vulkan

@aw.kernel
def twice(x: aw.In[aw.f32], y: aw.Out[aw.f32]):
    i = aw.global_id(0)
    y[i] = x[i] * 2.0 + 1.0

print(vulkan.status()[0])  # the device starts with the environment's value
print(os.environ.get("GALLIVM_PERF"))  # Mesa read it while the device started; not handed on
x = np.arange(8, dtype=np.float32)
y = np.zeros(8, np.float32)
try:
    twice(x, y, grid=1, workgroup=8, target="vulkan", wave_width=8)
    print("ran")
except LaunchConfigError as e:
    print("refused", "ANYWAVE_TARGET_OPT" in str(e))
os.environ["ANYWAVE_TARGET_OPT"] = "1"  # mended: the same device builds and runs
twice(x, y, grid=1, workgroup=8, target="vulkan", wave_width=8)
print(bool((y == x * 2 + 1).all()))
"""


@pytest.mark.parametrize("value", ["0", "bogus"])
def test_target_opt_at_the_device_start(tmp_path, value) -> None:  # noqa: ANN001
    # 0: lavapipe starts with GALLIVM_PERF=nopt, which is taken out of the environment again; a bad
    # value does not make the device unavailable: the first build refuses it, and once mended the
    # same device runs the kernel
    import os
    import subprocess
    import sys

    from anywave.runtime import vulkan

    ok, why = vulkan.status()
    if not ok:
        pytest.skip(f"Vulkan unavailable: {why}")
    script = tmp_path / "targetopt.py"
    script.write_text(_TARGET_OPT_PY)
    env = {k: v for k, v in os.environ.items() if k != "GALLIVM_PERF"}
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600,
                       env=dict(env, ANYWAVE_TARGET_OPT=value))
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["True", "None", "ran" if value == "0" else "refused", *(["True"] * (value != "0")),
                                "True"]


_OPTIMISED_CONFORMANCE_PY = r"""
import os
from anywave.conformance import suite
from anywave.runtime import vulkan

rep = suite.run_suite(vulkan.VulkanRunner(), (int(os.environ["W"]),), progress=False)  # every group
bad = rep.failures()
print("\n".join(f"{r.case}: {r.status}: {r.message[:300]}" for r in bad[:10]))
W = int(os.environ["W"])
print(rep.counts().get("pass", 0), sum(1 for c in suite.load_cases() if W in c.wave_widths))
"""


@pytest.mark.sweep
def test_conformance_optimised_at_the_default_w(runner, tmp_path) -> None:  # noqa: ANN001
    # the default tier runs lavapipe without LLVM's optimisation passes (tests/conftest.py), which
    # Mesa reads once per process: the default W's conformance with them, in a process of its own
    import os
    import subprocess
    import sys

    script = tmp_path / "optimised.py"
    script.write_text(_OPTIMISED_CONFORMANCE_PY)
    env = {k: v for k, v in os.environ.items() if k != "GALLIVM_PERF"}
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=1800,
                       env=dict(env, ANYWAVE_TARGET_OPT="1", W=str(tiers.DEFAULT_W["vulkan"])))
    assert r.returncode == 0, r.stderr[-2000:]
    *bad, counts = r.stdout.strip().splitlines()
    passed, total = map(int, counts.split())
    assert passed == total, "\n".join(bad)
