"""W-invariance (issue 16): the workgroup collectives give the same bits at W = 8, 16, 32, 64
and on every target, for any workgroup size the target allows; the kernel table records
which kernels may depend on W; one default wave width; every library kernel is W-invariant.

Expectations come from independent NumPy code (:mod:`anywave.kernels.reference`'s tree
functions, written from the spec's definition, and plain NumPy reductions/cumsums)."""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest

import anywave as aw
import tiers
from anywave.binary.module import KERNEL_FLAG_W_INVARIANT, Module, w_dependent_uses, w_invariant
from anywave.binary.wbin import read_wbin, write_wbin
from anywave.emu import emulate
from anywave.kernels import reference as R

WS = (8, 16, 32, 64)


def bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(np.uint32)


@aw.kernel
def collect_f32(x: aw.In[aw.f32], red: aw.Out[aw.f32], inc: aw.Out[aw.f32], exc: aw.Out[aw.f32],
                mn: aw.Out[aw.f32], mx: aw.Out[aw.f32], bc: aw.Out[aw.f32], src: aw.i32):
    i = aw.thread_linear_id()
    g = aw.workgroup_id(0) * (aw.workgroup_size(0) * aw.workgroup_size(1) * aw.workgroup_size(2)) + i
    v = x[g]
    red[g] = aw.workgroup_reduce(v)
    inc[g] = aw.workgroup_scan(v)
    exc[g] = aw.workgroup_scan(v, exclusive=True)
    mn[g] = aw.workgroup_reduce(v, "min")
    mx[g] = aw.workgroup_reduce(v, "max")
    bc[g] = aw.workgroup_broadcast(v, src)


@aw.kernel
def collect_int(x: aw.In[aw.i32], u: aw.In[aw.u32], out: aw.Out[aw.i32], uout: aw.Out[aw.u32]):
    i = aw.thread_linear_id()
    n = aw.workgroup_size(0) * aw.workgroup_size(1) * aw.workgroup_size(2)
    v = x[i]
    w = u[i]
    out[i] = aw.workgroup_reduce(v)
    out[n + i] = aw.workgroup_reduce(v, "min")
    out[2 * n + i] = aw.workgroup_reduce(v, "max")
    out[3 * n + i] = aw.workgroup_scan(v)
    out[4 * n + i] = aw.workgroup_scan(v, exclusive=True)
    uout[i] = aw.workgroup_reduce(w, "and")
    uout[n + i] = aw.workgroup_reduce(w, "or")
    uout[2 * n + i] = aw.workgroup_reduce(w, "xor")
    uout[3 * n + i] = aw.workgroup_reduce(w, "min")
    uout[4 * n + i] = aw.workgroup_reduce(w, "max")
    uout[5 * n + i] = aw.workgroup_scan(w)


def wide_f32(rng: np.random.Generator, n: int) -> np.ndarray:
    """Values over 7 decades and both signs: sums round differently in every order."""
    return (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n)).astype(np.float32)


def f32_expect(x: np.ndarray, src: int) -> dict[str, np.ndarray]:
    n = x.size
    return {"red": np.full(n, R.tree_sum_f32(x)), "inc": R.tree_scan_f32(x), "exc": R.tree_scan_f32(x, True),
            "mn": np.full(n, x.min()), "mx": np.full(n, x.max()), "bc": np.full(n, x[src])}


def run_f32(x: np.ndarray, wg: tuple[int, int, int], W: int, src: int, launch) -> dict[str, np.ndarray]:  # noqa: ANN001
    out = {k: np.zeros(x.size, np.float32) for k in ("red", "inc", "exc", "mn", "mx", "bc")}
    launch(dict(x=x, **out, src=src), wg, W)
    return out


def emu_launch(module: Module, name: str, limit: int = 1024):
    def launch(args, wg, W):  # noqa: ANN001, ANN202
        emulate(module, name, grid=1, workgroup=wg, args=args, wave_width=W, max_workgroup_size=limit, check=True)
    return launch


def assert_f32(got: dict[str, np.ndarray], exp: dict[str, np.ndarray], what: str) -> None:
    for k, e in exp.items():
        bad = np.nonzero(bits(got[k]) != bits(e.astype(np.float32)))[0]
        assert bad.size == 0, f"{what}: {k} differs at threads {bad[:8].tolist()}: {got[k][bad[:4]]} vs {e[bad[:4]]}"


# ----------------------------------------------------------------------------- the emulator

@pytest.mark.parametrize("wg", [(1, 1, 1), (7, 1, 1), (64, 1, 1), (100, 1, 1), (256, 1, 1), (1000, 1, 1),
                                (8, 5, 3), (1024, 1, 1)])
def test_f32_collectives_match_the_numpy_tree_at_every_w(wg: tuple[int, int, int]) -> None:
    n = wg[0] * wg[1] * wg[2]
    rng = np.random.default_rng(n)
    x = wide_f32(rng, n)
    src = int(rng.integers(0, n))
    exp = f32_expect(x, src)
    m = collect_f32.compile()
    for W in WS:
        assert_f32(run_f32(x, wg, W, src, emu_launch(m, "collect_f32")), exp, f"workgroup {wg} W={W}")


def test_f32_sum_really_depends_on_order() -> None:
    # the data must tell orders apart, or the test above could not fail: the sequential sum
    # and the per-wave butterfly at W = 8 differ from the tree on these inputs
    x = wide_f32(np.random.default_rng(1000), 1000)
    tree = R.tree_sum_f32(x)
    seq = np.float32(0)
    for v in x:
        seq = np.float32(seq + v)
    assert bits(np.array([tree])) != bits(np.array([seq]))
    assert bits(np.array([R.tree_sum_f32(x[:256])])) == bits(np.array([R.sum_f32(x[:256])]))


@pytest.mark.parametrize("n", [5, 96, 1000])
def test_integer_collectives_at_every_w(n: int) -> None:
    rng = np.random.default_rng(n)
    x = rng.integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32)
    u = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    with np.errstate(over="ignore"):
        s = np.sum(x, dtype=np.int32)  # mod 2^32
        inc = np.cumsum(x, dtype=np.int32)
        uinc = np.cumsum(u, dtype=np.uint32)
    exp_i = np.concatenate([np.full(n, s), np.full(n, x.min()), np.full(n, x.max()), inc,
                            np.concatenate([[0], inc[:-1]]).astype(np.int32)])
    exp_u = np.concatenate([np.full(n, np.bitwise_and.reduce(u)), np.full(n, np.bitwise_or.reduce(u)),
                            np.full(n, np.bitwise_xor.reduce(u)), np.full(n, u.min()), np.full(n, u.max()), uinc])
    m = collect_int.compile()
    for W in WS:
        out = np.zeros(5 * n, np.int32)
        uout = np.zeros(6 * n, np.uint32)
        emulate(m, "collect_int", grid=1, workgroup=n, args=dict(x=x, u=u, out=out, uout=uout), wave_width=W)
        np.testing.assert_array_equal(out, exp_i, err_msg=f"W={W}")
        np.testing.assert_array_equal(uout, exp_u, err_msg=f"W={W}")


@pytest.mark.parametrize("n", [2000, 4100])
def test_more_waves_than_the_scratch_has_slots(n: int) -> None:
    # 250 and 513 waves at W = 8 (the old 128-entry per-wave array overflowed here): several
    # rounds through the 1024-slot scratch; 4100 takes 5 rounds, so the round tree is uneven
    from anywave.compiler.stdlib import CHUNK

    assert n > CHUNK
    rng = np.random.default_rng(n)
    x = wide_f32(rng, n)
    exp = f32_expect(x, n - 1)
    m = collect_f32.compile()
    for W in WS:
        assert_f32(run_f32(x, (n, 1, 1), W, n - 1, emu_launch(m, "collect_f32", 8192)), exp, f"n={n} W={W}")


# ----------------------------------------------------------------------------- CPU runtimes

@aw.kernel
def sum_and_scan(x: aw.In[aw.f32], red: aw.Out[aw.f32], inc: aw.Out[aw.f32]):
    i = aw.thread_linear_id()
    red[i] = aw.workgroup_reduce(x[i])
    inc[i] = aw.workgroup_scan(x[i])


def _need(target: str) -> int:
    from anywave.runtime.targets import available_targets

    st = next(s for s in available_targets() if s.name == target)
    if not st.available:
        pytest.skip(f"{target} unavailable: {st.reason}")
    return st.infos[0].max_workgroup_size


def _large_workgroup_case(target: str, W: int) -> None:
    from anywave.jit.targets import get_target

    n = _need(target)  # the device's largest workgroup: 1024 waves at W = 8 on the CPU runtimes
    x = wide_f32(np.random.default_rng(7), n)
    red, inc = np.zeros(n, np.float32), np.zeros(n, np.float32)
    m = sum_and_scan.compile()
    res = get_target(target).launch(m, "sum_and_scan", grid=(1, 1, 1), workgroup=(n, 1, 1), args=[x, red, inc],
                                    wave_width=W)
    assert res.wave_width == W
    assert_f32({"red": red, "inc": inc}, {"red": np.full(n, R.tree_sum_f32(x)), "inc": R.tree_scan_f32(x)},
               f"{target} n={n} W={W}")


@pytest.mark.opencl
@pytest.mark.parametrize("W", tiers.widths("opencl"))
def test_opencl_largest_workgroup(W: int) -> None:
    _large_workgroup_case("opencl", W)


# the SYCL runtime compiler takes 10-100 s per W for this kernel: W = 8 (crashed before the
# fix) in the default tier, 32 (returned a wrong sum) and the others in the sweep tier
@pytest.mark.sycl
@pytest.mark.parametrize("W", [8, *(pytest.param(w, marks=pytest.mark.sweep) for w in (16, 32, 64))])
def test_sycl_largest_workgroup(W: int) -> None:
    _large_workgroup_case("sycl", W)


# ----------------------------------------------------------------------------- the W flag

@aw.kernel
def uses_lane(x: aw.In[aw.f32], y: aw.Out[aw.f32]):
    i = aw.global_id(0)
    y[i] = x[i] + aw.f32(aw.lane_id())


@aw.kernel
def uses_wave_sum(x: aw.In[aw.f32], y: aw.Out[aw.f32]):
    i = aw.global_id(0)
    y[i] = aw.wave_sum(x[i])


@aw.kernel
def lane_into_collective(x: aw.In[aw.f32], y: aw.Out[aw.f32]):
    i = aw.global_id(0)
    y[i] = aw.workgroup_reduce(aw.f32(aw.lane_id()) + x[i])  # the argument observes W


@aw.kernel
def only_collectives(x: aw.In[aw.f32], y: aw.Out[aw.f32]):
    i = aw.global_id(0)
    y[i] = aw.workgroup_scan(x[i]) + aw.workgroup_reduce(x[i], "max")


@aw.kernel
def plain(x: aw.In[aw.f32], y: aw.Out[aw.f32]):
    i = aw.global_id(0)
    y[i] = x[i] * 2.0


@pytest.mark.parametrize("kern, invariant", [(uses_lane, False), (uses_wave_sum, False),
                                             (lane_into_collective, False), (only_collectives, True),
                                             (plain, True)])
def test_the_w_flag_is_in_the_binary(kern, invariant: bool) -> None:  # noqa: ANN001
    m = kern.compile()
    k = m.kernels[0]
    assert bool(k.flags & KERNEL_FLAG_W_INVARIANT) == invariant
    back = read_wbin(write_wbin(m))
    assert back.kernels[0].flags == k.flags
    assert w_invariant(back, back.kernels[0]) == invariant
    from anywave.asm import assemble, disassemble

    again = assemble(disassemble(back))
    assert again.kernels[0].flags == k.flags


def test_info_shows_the_w_flag(tmp_path, capsys) -> None:  # noqa: ANN001
    from anywave.cli import main

    m = Module(kernels=[only_collectives.compile().kernels[0], uses_lane.compile().kernels[0]])
    p = tmp_path / "two.wbin"
    p.write_bytes(write_wbin(m))
    assert main(["info", str(p)]) == 0
    out = capsys.readouterr().out
    inv, dep = out.split("kernel uses_lane")
    assert "[w_invariant]" in inv and "wave width (W):     invariant" in inv
    assert "may depend on W" in dep and "mov.sr sr_lane_id" in dep and "test_identity.py" in dep
    assert main(["info", str(p), "--json"]) == 0
    import json

    ks = json.loads(capsys.readouterr().out)["kernels"]
    assert [k["wave_width_dependence"]["invariant"] for k in ks] == [True, False]


def test_assembled_kernels_without_w_observing_code_are_evidently_invariant() -> None:
    from anywave.asm import assemble

    src = """
.kernel k
.arg x buffer f32 readwrite
.registers 3
    mov.sr r0, sr_global_id_x
    movi.b32 r1, 2
    shl.b32 r0, r0, r1
    ld.device.b32 r2, x[r0]
    st.device.b32 x[r0], r2
.end
.kernel d
.arg x buffer f32 readwrite
.registers 3
    mov.sr r0, sr_wave_width
.end
"""
    m = assemble(src)
    k, d = m.kernels
    assert k.flags == 0 == d.flags  # the assembler does not claim; the code shows it
    assert w_invariant(m, k) and w_dependent_uses(m, k) == []
    uses = w_dependent_uses(m, d)
    assert not w_invariant(m, d) and len(uses) == 1 and uses[0].startswith("mov.sr sr_wave_width (")


# ----------------------------------------------------------------------------- default W

def test_one_default_wave_width() -> None:
    from anywave.runtime import targets as rt

    assert rt.default_wave_width(None) == rt.DEFAULT_WAVE_WIDTH == 32
    assert rt.default_wave_width((8, 16, 32, 64)) == 32
    assert rt.default_wave_width((64,)) == 64
    assert rt.EmulatorTarget().info.wave_width == 32
    for st in rt.available_targets():
        if st.available and st.name in ("opencl", "sycl"):
            assert rt.get_target(st.name).info.wave_width == 32, st.name


def test_launch_result_says_which_w_ran() -> None:
    x = np.ones(64, np.float32)
    y = np.zeros(64, np.float32)
    assert plain(x, y, grid=1, workgroup=64, target="emulator").wave_width == 32
    assert plain(x, y, grid=1, workgroup=64, target="emulator", wave_width=8).wave_width == 8


def test_w_dependent_kernel_on_a_target_without_the_default_w_warns() -> None:
    from anywave.jit import targets as ct
    from anywave.runtime import targets as rt

    info = rt.EmulatorTarget(64).info

    class Fixed64:
        def __init__(self, **_: object) -> None:
            self.inner = rt.EmulatorTarget(64)
            self.info = info

        def launch(self, module, kernel, grid, workgroup, args):  # noqa: ANN001, ANN201
            return self.inner.launch(module, kernel, grid, workgroup, args)

    rt.register_target("fixed64", lambda: (True, "", (info,)), Fixed64)
    try:
        x = np.ones(64, np.float32)
        y = np.zeros(64, np.float32)
        with pytest.warns(ct.WaveWidthWarning, match="W = 64"):
            res = uses_wave_sum(x, y, grid=1, workgroup=64, target="fixed64")
        assert res.wave_width == 64
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            only_collectives(x, y, grid=1, workgroup=64, target="fixed64")
            uses_wave_sum(x, y, grid=1, workgroup=64, target="fixed64", wave_width=64)
    finally:
        del rt._REGISTRY["fixed64"]
        ct._CACHE.pop("fixed64", None)


# ----------------------------------------------------------------------------- library kernels

def _library_kernels():  # noqa: ANN202
    import anywave.kernels as K
    import anywave.torch.kernels as TK
    from anywave.jit.kernel import KernelFunction

    mods = [K.elementwise, K.image, K.linalg, K.scan, K.sort, TK]
    return [(f"{mod.__name__}.{n}", v) for mod in mods for n, v in inspect.getmembers(mod)
            if isinstance(v, KernelFunction)]


def test_every_library_kernel_is_recorded_w_invariant() -> None:
    pytest.importorskip("torch")
    ks = _library_kernels()
    assert len(ks) >= 20
    dep = [name for name, k in ks if not k.compile().kernels[0].flags & KERNEL_FLAG_W_INVARIANT]
    assert dep == []


def test_library_outputs_identical_across_w() -> None:
    import anywave.kernels as K

    rng = np.random.default_rng(3)
    x = wide_f32(rng, 3000)
    img = rng.random((40, 37), dtype=np.float32) * 255
    rows = rng.standard_normal((5, 50)).astype(np.float32)
    u = rng.integers(0, 2**32, 3000, dtype=np.uint64).astype(np.uint32)
    outs = {}
    for W in WS:
        outs[W] = [np.asarray(K.sum_f32(x, wave_width=W)).reshape(1), K.prefix_sum(u, wave_width=W),
                   K.histogram(u, 64, wave_width=W), K.softmax_rows(rows, wave_width=W),
                   K.layer_norm(rows, np.ones(50, np.float32), np.zeros(50, np.float32), 1e-5, wave_width=W),
                   K.gaussian_blur5(img, wave_width=W), K.bitonic_sort(x[:1000], wave_width=W)]
    for W in WS[1:]:
        for a, b in zip(outs[8], outs[W], strict=True):
            assert a.tobytes() == b.tobytes(), W
    assert bits(outs[8][0]) == bits(np.array([R.sum_f32(x)]))


@pytest.mark.opencl
def test_sum_f32_same_bits_on_opencl_and_the_emulator_at_other_w() -> None:
    _need("opencl")
    import anywave.kernels as K

    x = wide_f32(np.random.default_rng(5), 70_000)
    want = bits(np.array([R.sum_f32(x)]))
    got = {(t, W): bits(np.array([K.sum_f32(x, wave_width=W, target=t)]))
           for t, W in [("emulator", 64), ("opencl", 8), ("opencl", 32)]}
    assert all(g == want for g in got.values()), got


# ----------------------------------------------------------------------------- conformance

def test_the_collectives_conformance_kernels_are_current() -> None:
    from anywave.conformance import gen_collectives

    assert gen_collectives.DATA.read_text() == gen_collectives.regenerate(), (
        "regenerate: python -c \"from anywave.conformance import gen_collectives as g; "
        "g.DATA.write_text(g.regenerate())\"")


def test_collective_groups_expect_the_same_bits_at_every_w() -> None:
    from anywave.conformance import load_cases

    cs = load_cases(["collectives", "large_workgroups"])
    assert {c.group for c in cs} == {"collectives", "large_workgroups"}
    assert any(c.workgroup[0] * c.workgroup[1] * c.workgroup[2] == 1024 for c in cs)
    for c in cs:
        assert not callable(c.expected) and c.wave_widths == WS


# ----------------------------------------------------------------------------- CUDA (H200)

@pytest.mark.cuda
def test_cuda_largest_workgroup() -> None:
    _large_workgroup_case("cuda", 32)


@pytest.mark.cuda
def test_cuda_collectives_and_library_equal_the_emulator_at_other_w() -> None:
    _need("cuda")
    import anywave.kernels as K

    m = collect_f32.compile()
    for wg in [(1000, 1, 1), (8, 5, 3), (1024, 1, 1)]:
        n = wg[0] * wg[1] * wg[2]
        x = wide_f32(np.random.default_rng(n), n)
        got = run_f32(x, wg, 32, 3, _target_launch("cuda", m, "collect_f32"))
        assert_f32(got, f32_expect(x, 3), f"cuda workgroup {wg}")
    x = wide_f32(np.random.default_rng(9), 100_000)
    assert bits(np.array([K.sum_f32(x, target="cuda")])) == bits(np.array([K.sum_f32(x, wave_width=8)]))
    rows = np.random.default_rng(4).standard_normal((7, 90)).astype(np.float32)
    assert K.softmax_rows(rows, target="cuda").tobytes() == K.softmax_rows(rows, wave_width=64).tobytes()


def _target_launch(target: str, m: Module, name: str):  # noqa: ANN202
    from anywave.jit.targets import get_target

    def launch(args, wg, W):  # noqa: ANN001, ANN202
        names = [a.name for a in m.kernel(name).args]
        res = get_target(target).launch(m, name, grid=(1, 1, 1), workgroup=wg, args=[args[k] for k in names],
                                        wave_width=W)
        assert res.wave_width == W
    return launch


@aw.kernel
def wave_vs_workgroup(x: aw.In[aw.i32], out: aw.Out[aw.i32]):
    i = aw.thread_linear_id()
    n = aw.workgroup_size(0) * aw.workgroup_size(1) * aw.workgroup_size(2)
    v = x[i]
    out[i] = aw.wave_sum(v)
    out[n + i] = aw.wave_min(v)
    out[2 * n + i] = aw.wave_max(v)
    out[3 * n + i] = aw.workgroup_reduce(v)
    out[4 * n + i] = aw.workgroup_reduce(v, "min")


def test_integer_wave_reductions_depend_on_w_workgroup_ones_do_not() -> None:
    """docs/guide/waves.md, "What changes with W" (issue 31 item 18): an integer wave_sum and
    wave_min/wave_max reduce over one wave, so W = 8 and W = 32 give different results; the
    workgroup_* forms do not. Expectations: NumPy over the lanes each W groups."""
    n = 64
    x = ((np.arange(n) * 37) % 101 - 50).astype(np.int32)
    got = {}
    for w in (8, 32):
        out = np.zeros(5 * n, np.int32)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the W-dependence warning at a non-default W
            wave_vs_workgroup(x, out, grid=1, workgroup=n, target="emulator", wave_width=w)
        waves = x.reshape(-1, w)
        np.testing.assert_array_equal(out[:n], np.repeat(waves.sum(axis=1), w), err_msg=f"wave_sum W={w}")
        np.testing.assert_array_equal(out[n:2 * n], np.repeat(waves.min(axis=1), w), err_msg=f"wave_min W={w}")
        np.testing.assert_array_equal(out[2 * n:3 * n], np.repeat(waves.max(axis=1), w), err_msg=f"wave_max W={w}")
        np.testing.assert_array_equal(out[3 * n:4 * n], np.full(n, x.sum()), err_msg=f"workgroup_reduce W={w}")
        np.testing.assert_array_equal(out[4 * n:], np.full(n, x.min()), err_msg=f"workgroup_reduce min W={w}")
        got[w] = out
    for name, part in (("wave_sum", slice(0, n)), ("wave_min", slice(n, 2 * n)), ("wave_max", slice(2 * n, 3 * n))):
        assert not np.array_equal(got[8][part], got[32][part]), name
    np.testing.assert_array_equal(got[8][3 * n:], got[32][3 * n:])
    assert not w_invariant(wave_vs_workgroup.compile(), wave_vs_workgroup.compile().kernels[0])
