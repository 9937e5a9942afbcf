"""Flash attention backward, the ``fast`` variant (anywave.kernels.attention_fast_bwd), on the
emulator: dQ, dK, dV within the bound of docs/spec.md §8.17 ("``fast`` backward") of a float64
reference at W = 8..64 (causal or not, GQA, sequence lengths that are not multiples of the block,
both 16-bit types), identical run to run, across the tiling (GR) and across the batch; and the PTX
backend's handling of wgmma in loops (the keep-alive of loop-invariant A operands, partial waits)."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

import tiers
from anywave.emu import floats as fl
from anywave.kernels._launch import KernelInputError
from anywave.kernels.attention_fast import attention_numpy
from anywave.kernels.attention_fast_bwd import backward_numpy


def _round16(x: np.ndarray, f16: bool) -> np.ndarray:
    bits = fl.f32_to_f16_bits(np.asarray(x, np.float32)) if f16 else fl.f32_to_bf16_bits(np.asarray(x, np.float32))
    return (fl.f16_bits_to_f32(bits) if f16 else fl.bf16_bits_to_f32(bits)).astype(np.float64)


def _reference_and_bound(q, k, v, do, o, lse, causal, scale, f16, dlse=None):
    """float64 (dq, dk, dv) from the 16-bit inputs, and the bound of §8.17 for the given O and LSE."""
    uT = 2.0**-11 if f16 else 2.0**-8
    B, Hq, S, D = q.shape
    rep = Hq // k.shape[1]
    K, V = np.repeat(k, rep, axis=1), np.repeat(v, rep, axis=1)
    qk = q @ K.transpose(0, 1, 3, 2)
    s = qk * scale
    vis = np.tril(np.ones((S, S), bool)) if causal else np.ones((S, S), bool)
    s = np.where(vis, s, -np.inf)
    mx = s.max(-1, keepdims=True)
    e = np.exp(s - mx)
    lsum = e.sum(-1, keepdims=True)
    p = e / lsum
    lse_ref = (mx + np.log(lsum))[..., 0]
    o_ref = p @ V
    dp = do @ V.transpose(0, 1, 3, 2)
    delta = (do * o_ref).sum(-1, keepdims=True)
    if dlse is not None:  # L = <dO, O> + <dLSE, LSE>: dLSE enters as Delta - dLSE (§8.17)
        delta = delta - dlse.astype(np.float64)[..., None]
    ds = p * (dp - delta)
    dq = ds @ K * scale
    dk_h = ds.transpose(0, 1, 3, 2) @ q * scale
    dv_h = p.transpose(0, 1, 3, 2) @ do
    nd = math.ceil(D / 16)
    absqk = np.abs(q) @ np.abs(K).transpose(0, 1, 3, 2)
    S_i = np.abs(scale) * np.where(vis, absqk, 0).max(-1, keepdims=True)
    delta_p = np.abs(lse.astype(np.float64) - lse_ref)[..., None] + 2.0**-16 * nd * S_i \
        + 2.0**-22 * (np.abs(lse_ref)[..., None] + 4)
    err_delta = (np.abs(do) * np.abs(o.astype(np.float64) - o_ref)).sum(-1, keepdims=True) \
        + 2.0**-16 * nd * (np.abs(do) * np.abs(o_ref)).sum(-1, keepdims=True)
    absdpv = np.abs(do) @ np.abs(V).transpose(0, 1, 3, 2)
    E = p * (delta_p * np.abs(dp - delta) + 2.0**-16 * nd * absdpv + err_delta)
    nq = rep * S  # terms of a dK/dV sum
    acc_k = 2.0**-18 * math.ceil(nq / 16)
    acc_q = 2.0**-18 * math.ceil(S / 16)
    bq = np.abs(scale) * (((uT + acc_q) * np.abs(ds) + 2 * E) @ np.abs(K))
    bk_h = np.abs(scale) * (((uT + acc_k) * np.abs(ds) + 2 * E).transpose(0, 1, 3, 2) @ np.abs(q))
    bv_h = ((uT + 2 * delta_p + acc_k) * p).transpose(0, 1, 3, 2) @ np.abs(do)

    def group(x):
        return x.reshape(B, Hq // rep, rep, S, D).sum(2)

    return (dq, group(dk_h), group(dv_h)), (bq, group(bk_h), group(bv_h))


def _inputs(rng, B, Hq, Hkv, S, D):
    return (rng.standard_normal((B, Hq, S, D)).astype(np.float32),
            rng.standard_normal((B, Hkv, S, D)).astype(np.float32),
            rng.standard_normal((B, Hkv, S, D)).astype(np.float32),
            rng.standard_normal((B, Hq, S, D)).astype(np.float32))


def _forward(q, k, v, causal, W, GR, f16=False, scale=None):
    o, lse = attention_numpy(q, k, v, causal=causal, wave_width=W, GR=GR, f16=f16, scale=scale)
    return _round16(o, f16).astype(np.float32), lse  # O as the torch op stores it (16-bit)


CASES = [  # (W, B, Hq, Hkv, S, D, causal, GR)
    (8, 1, 2, 1, 100, 64, True, 1),
    (16, 1, 2, 2, 130, 128, False, 1),
    (32, 1, 4, 2, 200, 64, True, 2),
    (64, 1, 1, 1, 192, 128, True, 2),
    (32, 2, 1, 1, 64, 64, False, 1),
    (16, 1, 2, 1, 70, 32, True, 1),  # run at D = 64 on zero-padded columns (kernel_head_dim)
]


@pytest.mark.parametrize("W,B,Hq,Hkv,S,D,causal,GR", CASES)
def test_within_the_bound_of_float64(W, B, Hq, Hkv, S, D, causal, GR):
    rng = np.random.default_rng(S + D + W + 1)
    q, k, v, do = _inputs(rng, B, Hq, Hkv, S, D)
    o, lse = _forward(q, k, v, causal, W, GR)
    got = backward_numpy(q, k, v, o, lse, do, None, causal, wave_width=W, GR=GR)
    qd, kd, vd, gd = (_round16(x, False) for x in (q, k, v, do))
    refs, bounds = _reference_and_bound(qd, kd, vd, gd, o, lse, causal, 1 / math.sqrt(D), False)
    for name, g, r, bnd in zip(("dq", "dk", "dv"), got, refs, bounds, strict=True):
        err = np.abs(g - r)
        assert np.all(err <= bnd), f"{name}: {np.sum(err > bnd)} elements past the bound, worst {np.max(err / bnd)}"
        # and not trivially: the gradient is far larger than its error
        assert np.abs(r).max() > 50 * err.max(), name


def test_f16_a_given_scale_and_dlse():
    rng = np.random.default_rng(5)
    q, k, v, do = _inputs(rng, 1, 2, 1, 90, 64)
    f = [x.astype(np.float16) for x in (q, k, v, do)]
    o, lse = _forward(*f[:3], False, 16, 1, f16=True, scale=0.3)
    dlse = rng.standard_normal(lse.shape).astype(np.float32)
    got = backward_numpy(*f[:3], o, lse, f[3], dlse, False, 0.3, f16=True, wave_width=16)
    qd, kd, vd, gd = (_round16(x, True) for x in f)
    refs, bounds = _reference_and_bound(qd, kd, vd, gd, o, lse, False, float(np.float32(0.3)), True, dlse)
    for g, r, bnd in zip(got, refs, bounds, strict=True):
        assert np.all(np.abs(g - r) <= bnd)
        assert np.abs(r).max() > 50 * np.abs(g - r).max()


def test_batch_invariant_run_to_run_and_across_the_tiling():
    rng = np.random.default_rng(3)
    q, k, v, do = _inputs(rng, 3, 2, 1, 130, 64)
    o, lse = _forward(q, k, v, True, 32, 1)
    g3 = backward_numpy(q, k, v, o, lse, do, None, True, wave_width=32)
    g1 = backward_numpy(q[1:2], k[1:2], v[1:2], o[1:2], lse[1:2], do[1:2], None, True, wave_width=32)
    assert all(a.tobytes() == b[1:2].tobytes() for a, b in zip(g1, g3, strict=True))
    again = backward_numpy(q, k, v, o, lse, do, None, True, wave_width=32)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(again, g3, strict=True))
    g2 = backward_numpy(q, k, v, o, lse, do, None, True, wave_width=32, GR=2)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(g2, g3, strict=True))


def test_bad_input_is_named():
    z = np.zeros((1, 2, 64, 64), np.float32)
    with pytest.raises(KernelInputError, match="scale must be positive"):
        backward_numpy(z, z, z, z, np.zeros((1, 2, 64), np.float32), z, scale=-0.5)
    with pytest.raises(KernelInputError, match="head dim 256 is not supported"):
        y = np.zeros((1, 2, 64, 256), np.float32)
        backward_numpy(y, y, y, y, np.zeros((1, 2, 64), np.float32), y)
    with pytest.raises(KernelInputError, match="do"):
        backward_numpy(z, z, z, z, np.zeros((1, 2, 64), np.float32), z[:, :1])


# ------------------------------------------------------------------ the PTX backend and wgmma loops

def _ptx(kern, **consts):
    from anywave.backends import ptx

    return ptx.translate(kern.compile(**consts), "sm_90").text


def _keep_alive_slots(text: str) -> set[int]:
    return {int(m) for m in re.findall(r"@%ka_p st\.volatile\.global\.v4\.b32 \[%ka_t\], \{%fr(\d+)_0", text)}


def test_ptx_keeps_loop_invariant_wgmma_a_operands_live():
    import anywave as aw

    @aw.kernel
    def loop_a(a: aw.In[aw.u16], out: aw.Out[aw.f32], n: aw.i32):
        ring = aw.local_array(aw.f32, (128, 16), align=1024)
        acc = aw.fragments(4, "acc")
        inv = aw.fragment("a")  # loaded once, read by the wgmma of every iteration
        var = aw.fragment("a")  # reloaded inside the loop
        aw.mma_load(inv, a, 0, 16)
        for _ in range(n):
            aw.mma_group_bt(acc, inv, ring, 0)
            aw.mma_load(var, a, 256, 16)
            aw.mma_group_bt(acc, var, ring, 32)
        aw.mma_store(out, acc[0], 16 * aw.wave_id() * 16, 16)

    text = _ptx(loop_a)
    slots = _keep_alive_slots(text)
    inv_slot = 4  # the fragments in order of creation: acc f0..f3, inv f4, var f5
    assert slots == {inv_slot}
    # the use comes after the loop (its exit label) and reads all four A registers
    assert text.index("%ka_p st.volatile") > text.rindex("loop_exit")
    assert all(f"%fr{inv_slot}_{i}" in text.split("@%ka_p", 1)[1] for i in range(4))
    # sm_80 (no wgmma): no keep-alive
    from anywave.backends import ptx

    assert not _keep_alive_slots(ptx.translate(loop_a.compile(), "sm_80").text)


def test_ptx_overlaps_independent_wgmma_and_waits_partially_for_a_loads():
    import anywave as aw

    @aw.kernel
    def two_chains(a: aw.In[aw.u16], out: aw.Out[aw.f32]):
        ring = aw.local_array(aw.f32, (128, 16), align=1024)
        s1 = aw.fragments(4, "acc")
        s2 = aw.fragments(4, "acc")
        fa = aw.fragments(2, "a")
        aw.mma_load(fa[0], a, 0, 16)
        aw.mma_group_bt(s1, fa[0], ring, 0)
        aw.mma_group_bt(s2, fa[0], ring, 32)  # other accumulators: no wait before it
        aw.mma_load(fa[1], a, 256, 16)  # a slot no group in flight reads: no wait
        aw.mma_group_bt(s1, fa[1], ring, 64)
        aw.mma_load(fa[0], a, 512, 16)  # read by the first two groups: wait until one is left
        aw.mma_group_bt(s2, fa[0], ring, 96)
        aw.mma_store(out, s1[0], 16 * aw.wave_id() * 16, 16)

    body = _ptx(two_chains).split("wgmma.mma_async", 1)[1]
    waits = re.findall(r"wgmma\.wait_group\.sync\.aligned (\d+);|(wgmma\.mma_async)", body)
    seq = ["W" + w if w else "G" for w, _ in waits]
    # group 1 issued above; then group 2, group 3, wait 1 (groups 1, 2 done), group 4, wait 0
    assert seq[:5] == ["G", "G", "W1", "G", "W0"], seq


def _target_widths(name: str) -> tuple[int, ...]:
    from anywave.runtime.targets import available_targets

    st = {t.name: t for t in available_targets()}.get(name)
    if st is None or not st.available:
        pytest.skip(f"{name} unavailable: {st.reason if st else 'not registered'}")
    return st.infos[0].wave_widths


# OpenCL in the default tier; Vulkan (its bits are the emulator's in the default tier:
# test_vulkan_matches_the_emulator) in the sweep tier, SYCL in the slow tier
@pytest.mark.parametrize("target", ["opencl", pytest.param("vulkan", marks=pytest.mark.sweep),
                                    pytest.param("sycl", marks=pytest.mark.slow)])
def test_cpu_targets_within_the_bound_and_batch_invariant(target):
    widths = _target_widths(target)
    W = tiers.DEFAULT_W[target] if tiers.DEFAULT_W[target] in widths else min(widths)
    rng = np.random.default_rng(13)
    q, k, v, do = _inputs(rng, 2, 2, 1, 100, 64)
    o, lse = _forward(q, k, v, True, 32, 1)
    got = backward_numpy(q, k, v, o, lse, do, None, True, wave_width=W, target=target)
    qd, kd, vd, gd = (_round16(x, False) for x in (q, k, v, do))
    refs, bounds = _reference_and_bound(qd, kd, vd, gd, o, lse, True, 1 / 8, False)
    for g, r, bnd in zip(got, refs, bounds, strict=True):
        assert np.all(np.abs(g - r) <= bnd)
    one = backward_numpy(q[1:], k[1:], v[1:], o[1:], lse[1:], do[1:], None, True, wave_width=W, target=target)
    assert all(a.tobytes() == b[1:].tobytes() for a, b in zip(one, got, strict=True))
    # and the emulator's bits at the same W (the default tier's bit check of the backward on this target)
    ge = backward_numpy(q, k, v, o, lse, do, None, True, wave_width=W)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(got, ge, strict=True))


def test_torch_op_backward_mode():
    torch = pytest.importorskip("torch")
    import anywave.torch.ops  # noqa: F401
    from anywave.torch.ops import OpInputError

    g = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(1, 2, 40, 16, generator=g, dtype=torch.bfloat16) for _ in range(3))
    o, lse = torch.ops.anywave.attention_forward(q, k, v, True, None, "exact")
    go = torch.randn(o.shape, generator=g).to(torch.bfloat16)
    gl = torch.zeros_like(lse)
    # on CPU tensors "fast" has no kernel: the exact backward, bit for bit
    fast = torch.ops.anywave.attention_backward(go, gl, q, k, v, o, lse, True, None, "fast")
    exact = torch.ops.anywave.attention_backward(go, gl, q, k, v, o, lse, True, None, "exact")
    assert all(torch.equal(a, b) for a, b in zip(fast, exact, strict=True))
    with pytest.raises(OpInputError, match="mode 'fastest'"):
        torch.ops.anywave.attention_backward(go, gl, q, k, v, o, lse, True, None, "fastest")


# both widths in the sweep tier: the default tier checks the backward's bits on OpenCL at its
# default W in test_cpu_targets_within_the_bound_and_batch_invariant (causal, GQA, two batches)
@pytest.mark.sweep
@pytest.mark.parametrize("W", (16, 32))
def test_opencl_at_w16_and_w32_matches_the_emulator(W):
    widths = _target_widths("opencl")
    if W not in widths:
        pytest.skip(f"OpenCL runs no W = {W} here")
    rng = np.random.default_rng(13)
    q, k, v, do = _inputs(rng, 1, 1, 1, 64, 64)
    o, lse = _forward(q, k, v, False, 32, 1)
    ge = backward_numpy(q, k, v, o, lse, do, None, False, wave_width=W)
    got = backward_numpy(q, k, v, o, lse, do, None, False, wave_width=W, target="opencl")
    assert all(a.tobytes() == b.tobytes() for a, b in zip(got, ge, strict=True))


@pytest.mark.parametrize("S,Hq", [(64, 1), (128, 1), (64, 2)])
def test_vulkan_matches_the_emulator(S, Hq):
    _target_widths("vulkan")
    rng = np.random.default_rng(13)
    q, k, v, do = _inputs(rng, 1, Hq, 1, S, 64)
    o, lse = _forward(q, k, v, False, 32, 1)
    ge = backward_numpy(q, k, v, o, lse, do, None, False, wave_width=8)
    got = backward_numpy(q, k, v, o, lse, do, None, False, wave_width=8, target="vulkan")
    assert all(a.tobytes() == b.tobytes() for a, b in zip(got, ge, strict=True))


@pytest.mark.cuda
def test_cuda_head_dim_32_runs_fast_within_the_bound():
    # D = 32 runs the D = 64 kernels on zero-padded columns (attention_fast.kernel_head_dim)
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    from anywave.kernels import attention_fast, attention_fast_bwd

    rng = np.random.default_rng(32)
    q, k, v, do = _inputs(rng, 1, 2, 1, 100, 32)
    qc, kc, vc, gc = (torch.from_numpy(x).to("cuda", torch.bfloat16) for x in (q, k, v, do))
    o, lse = attention_fast.forward(qc, kc, vc, True)
    got = attention_fast_bwd.backward(qc, kc, vc, o, lse, gc, None, True)
    assert [g.shape for g in got] == [qc.shape, kc.shape, vc.shape]
    qd, kd, vd, gd = (_round16(x, False) for x in (q, k, v, do))
    refs, bounds = _reference_and_bound(qd, kd, vd, gd, o.float().cpu().numpy(), lse.cpu().numpy(), True,
                                        1 / math.sqrt(32), False)
    for name, g, r, bnd in zip(("dq", "dk", "dv"), got, refs, bounds, strict=True):
        gf = g.float().cpu().numpy().astype(np.float64)
        # the bound of the f32 result plus its rounding to bf16 (half an ulp: 2^-9 |g|)
        assert np.all(np.abs(gf - r) <= bnd + 2.0**-9 * np.abs(gf)), name
    again = attention_fast_bwd.backward(qc, kc, vc, o, lse, gc, None, True)
    assert all(torch.equal(a, b) for a, b in zip(again, got, strict=True))
