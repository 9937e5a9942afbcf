"""Two backend mismatches of the fragment instructions (docs/spec.md §8.14), reduced from the fast
attention backward (tests/test_attention_fast_bwd.py), each on the target that showed it:

* OpenCL (Intel's CPU runtime), W = 16 and 32: ``mma.exp2`` with a B fragment loaded before a
  loop that holds a barrier gave every wave the last wave's B (the C family wrote ``-B``, a float
  negation that compiler mishandles there; now ``0 - B``).
* Vulkan (lavapipe): the driver ends every invocation's loops after 65535 turns in all; the
  SPIR-V lowering's loops of ``mma.group`` took ~2300 turns each (W = 8, four accumulators), so a
  walk of a few dozen was cut short with no report. Now a quarter of that, and the loops of the
  fragment instructions count toward the status record, so a cut is raised, never silent.

Expectations: float64 models (2^x within the spec's 2 ulp; integer-valued products, exact).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import anywave as aw


@pytest.fixture(autouse=True)
def _cache(monkeypatch, tmp_path):
    monkeypatch.setenv("ANYWAVE_CACHE_DIR", str(tmp_path / "cache"))


def _widths(name: str) -> tuple[int, ...]:
    from anywave.runtime.targets import available_targets

    st = {t.name: t for t in available_targets()}.get(name)
    if st is None or not st.available:
        pytest.skip(f"{name} unavailable: {st.reason if st else 'not registered'}")
    return st.infos[0].wave_widths


@aw.kernel
def exp2_in_walk(lrep: aw.In[aw.f32], out: aw.Out[aw.f32], nb: aw.i32, c: aw.f32):
    """4 waves: wave w loads tile w of ``lrep`` (16 x 16, row stride 16) before a loop with a
    barrier; each turn i stores 2^(fma(1, c, -B)) to tile w + 4 i of ``out``."""
    l2 = aw.fragment("acc")
    sf = aw.fragment("acc")
    wv = aw.wave_id()
    aw.mma_load(l2, lrep, 256 * wv, 16)
    for blk in range(nb):
        aw.barrier()
        aw.mma_fill(sf, 1.0)
        aw.mma_exp2(sf, sf, l2, c)
        aw.mma_store(out, sf, 256 * (wv + 4 * blk), 16)


def _ulps(got: np.ndarray, ref: np.ndarray) -> np.ndarray:
    return np.abs(got.astype(np.float64) - ref) / np.spacing(np.abs(ref).astype(np.float32)).astype(np.float64)


@pytest.mark.parametrize("W", [8, 16, 32])
def test_opencl_exp2_of_a_fragment_held_across_a_barrier_loop(W):
    if W not in _widths("opencl"):
        pytest.skip(f"OpenCL runs no W = {W} here")
    rng = np.random.default_rng(W)
    lv = rng.uniform(-3.0, 3.0, (4, 16)).astype(np.float32)  # one value per row of each wave's tile
    lrep = np.repeat(lv[:, :, None], 16, axis=2).reshape(-1)
    nb = 2
    # the spec's value: x = fma_f32(1, 1, -B) = 1 - B rounded once, 2^x within 2 ulp
    x = (np.float64(1.0) - lv.astype(np.float64)).astype(np.float32).astype(np.float64)
    ref = np.tile(np.repeat(np.exp2(x)[:, :, None], 16, axis=2)[None], (nb, 1, 1, 1))
    for tgt in ("emulator", "opencl"):
        out = np.full(4 * 256 * nb, np.nan, np.float32)
        exp2_in_walk(lrep, out, nb, 1.0, grid=(1,), workgroup=(4 * W, 1, 1), target=tgt, wave_width=W)
        err = _ulps(out.reshape(nb, 4, 16, 16), ref)
        assert np.all(err <= 2.0), (tgt, float(np.nanmax(err)))


def _swizzled(k, n, p):  # noqa: ANN001, ANN202 - ints or arrays
    """Byte offset of B element (k, n): docs/spec.md §8.14, the swizzled panel layout."""
    return (n // 64) * p + 128 * k + 16 * (((n % 64) // 8) ^ (k % 8)) + 2 * (n % 8)


@aw.kernel
def many_groups(a: aw.In[aw.u16], bimg: aw.In[aw.u16], c: aw.Out[aw.f32], n: aw.i32):
    """4 waves (one group): C (64 x 64) = n times A[:, :16] B[:16, :], ``mma.group`` in a loop of
    n turns (B copied from ``bimg``, in the swizzled layout, into local memory)."""
    tb = aw.local_array(aw.u16, (4096,), align=1024)
    acc = aw.fragments(4, "acc")
    fa = aw.fragment("a", aw.bf16)
    for e in range(aw.local_id(0), 4096, aw.workgroup_size(0)):
        tb[e] = bimg[e]
    aw.barrier()
    wv = aw.wave_id()
    aw.mma_load(fa, a, 16 * wv * 16, 16)
    for j in aw.static_range(4):
        aw.mma_fill(acc[j], 0.0)
    for _ in range(n):
        aw.mma_group(acc, fa, tb, 0, 4096)
    for j in aw.static_range(4):
        aw.mma_store(c, acc[j], 16 * wv * 64 + 16 * j, 64)


def _group_inputs():
    rng = np.random.default_rng(5)
    A = (rng.integers(-6, 7, (64, 16)) / 2).astype(ml_dtypes.bfloat16)
    B = (rng.integers(-6, 7, (16, 64)) / 2).astype(ml_dtypes.bfloat16)
    image = np.zeros(4096, np.uint16)
    kk, nn = np.meshgrid(np.arange(16), np.arange(64), indexing="ij")
    image[_swizzled(kk, nn, 4096) // 2] = B.view(np.uint16)
    return A, B, image


def test_vulkan_mma_group_walk_past_the_old_loop_budget():
    W = min(_widths("vulkan"))
    A, B, image = _group_inputs()
    n = 40  # W = 8: ~92k driver loop turns before (cut short, silently), ~23k now
    C = np.full((64, 64), np.nan, np.float32)
    many_groups(A.view(np.uint16).reshape(-1), image, C.reshape(-1), n, grid=(1, 1, 1), workgroup=(4 * W, 1, 1),
                target="vulkan", wave_width=W)
    ref = n * (A.astype(np.float64) @ B.astype(np.float64))  # multiples of 1/4 below 2^14: exact in f32
    assert np.array_equal(C.astype(np.float64), ref)


def test_vulkan_mma_loops_past_the_driver_limit_are_reported():
    from anywave.backends.spirv_status import LoopCutError
    from anywave.runtime.targets import TargetUnavailable, get_target

    W = min(_widths("vulkan"))
    try:
        limit = get_target("vulkan", wave_width=W).runner.dev.features.loop_limit
    except TargetUnavailable as e:
        pytest.skip(str(e))
    if not limit:
        pytest.skip("this Vulkan driver has no loop limit")
    A, B, image = _group_inputs()
    turns = (256 // W + 1) + 256 // W * 17  # one mma.group: its word loop, and a k-loop (17 passes) per word
    n = 2 * limit // turns  # twice the limit in the walk's fragment loops
    C = np.zeros((64, 64), np.float32)
    with pytest.raises(LoopCutError):
        many_groups(A.view(np.uint16).reshape(-1), image, C.reshape(-1), n, grid=(1, 1, 1),
                    workgroup=(4 * W, 1, 1), target="vulkan", wave_width=W)
