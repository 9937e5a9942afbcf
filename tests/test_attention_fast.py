"""Flash attention forward, the ``fast`` variant (anywave.kernels.attention_fast), on the emulator:
within its stated bound of a float64 reference at W = 8..64 (causal or not, GQA, sequence lengths
that are not multiples of the block), identical run to run, across the tiling (GR) and across the
batch (a row's bits for B = 1 and B = 4); bad input gets a clear error."""

from __future__ import annotations

import math

import numpy as np
import pytest

from anywave.emu import floats as fl
from anywave.kernels._launch import KernelInputError
from anywave.kernels.attention_fast import attention_numpy, check_shapes, forward


def _round16(x: np.ndarray, f16: bool) -> np.ndarray:
    bits = fl.f32_to_f16_bits(x) if f16 else fl.f32_to_bf16_bits(x)
    return (fl.f16_bits_to_f32(bits) if f16 else fl.bf16_bits_to_f32(bits)).astype(np.float64)


def _reference(q, k, v, causal, scale):
    """float64 softmax(q kᵀ scale + mask) v and the log-sum-exp, and softmax·|v| (for the bound)."""
    rep = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, rep, axis=1), np.repeat(v, rep, axis=1)
    s = q @ k.transpose(0, 1, 3, 2) * scale
    if causal:
        n = s.shape[-1]
        s = np.where(np.tril(np.ones((n, n), bool)), s, -np.inf)
    mx = s.max(-1, keepdims=True)
    p = np.exp(s - mx)
    l_ = p.sum(-1, keepdims=True)
    w = p / l_
    return w @ v, (mx + np.log(l_))[..., 0], w @ np.abs(v)


def _inputs(rng, B, Hq, Hkv, S, D, f16=False):
    q = rng.standard_normal((B, Hq, S, D)).astype(np.float32)
    k = rng.standard_normal((B, Hkv, S, D)).astype(np.float32)
    v = rng.standard_normal((B, Hkv, S, D)).astype(np.float32)
    return q, k, v


CASES = [  # (W, B, Hq, Hkv, S, D, causal, GR)
    (8, 1, 2, 1, 100, 64, True, 1),
    (16, 1, 2, 2, 130, 128, False, 1),
    (32, 1, 4, 2, 200, 64, True, 2),
    (64, 1, 1, 1, 192, 128, True, 2),
    (32, 2, 1, 1, 64, 64, False, 1),
    # head dims between the kernel's: run at 64 / 128 on zero-padded columns (kernel_head_dim)
    (16, 1, 2, 1, 70, 32, True, 1),
    (8, 1, 1, 1, 64, 80, False, 1),
]


@pytest.mark.parametrize("W,B,Hq,Hkv,S,D,causal,GR", CASES)
def test_within_the_bound_of_float64(W, B, Hq, Hkv, S, D, causal, GR):
    rng = np.random.default_rng(S + D + W)
    q, k, v = _inputs(rng, B, Hq, Hkv, S, D)
    o, lse = attention_numpy(q, k, v, causal=causal, wave_width=W, GR=GR)
    qd, kd, vd = (_round16(x, False) for x in (q, k, v))
    ro, rl, wv = _reference(qd, kd, vd, causal, 1 / math.sqrt(D))
    # the bound (module docstring): P rounded to bf16 (unit roundoff 2^-8) before P·V, the rest f32
    assert np.all(np.abs(o - ro) <= 2.0**-8 * wv + 2.0**-12 * np.abs(vd).max())
    assert np.all(np.abs(lse - rl) <= 2.0**-16 * (1 + np.abs(rl)))
    # and not trivially: the output is not the mean of v, the error is far below the output's size
    assert np.abs(ro).max() > 10 * np.abs(o - ro).max()


def test_f16_and_a_given_scale():
    rng = np.random.default_rng(7)
    q, k, v = _inputs(rng, 1, 2, 1, 90, 64)
    o, lse = attention_numpy(q.astype(np.float16), k.astype(np.float16), v.astype(np.float16), causal=False,
                             scale=0.3, f16=True, wave_width=16)
    qd, kd, vd = (_round16(x, True) for x in (q, k, v))
    ro, rl, wv = _reference(qd, kd, vd, False, 0.3)
    assert np.all(np.abs(o - ro) <= 2.0**-11 * wv + 2.0**-12 * np.abs(vd).max())
    assert np.all(np.abs(lse - rl) <= 2.0**-16 * (1 + np.abs(rl)))


def test_batch_invariant_run_to_run_and_across_the_tiling():
    rng = np.random.default_rng(3)
    q, k, v = _inputs(rng, 4, 2, 1, 130, 64)
    o4, l4 = attention_numpy(q, k, v, causal=True, wave_width=32, GR=1)
    o1, l1 = attention_numpy(q[2:3], k[2:3], v[2:3], causal=True, wave_width=32, GR=1)
    assert o1.tobytes() == o4[2:3].tobytes() and l1.tobytes() == l4[2:3].tobytes()
    again, lagain = attention_numpy(q, k, v, causal=True, wave_width=32, GR=1)
    assert again.tobytes() == o4.tobytes() and lagain.tobytes() == l4.tobytes()
    o2, l2 = attention_numpy(q, k, v, causal=True, wave_width=32, GR=2)
    assert o2.tobytes() == o4.tobytes() and l2.tobytes() == l4.tobytes()
    # a different row of another batch changes nothing of batch 2
    q[0, :, 5] += 1.0
    o5, _ = attention_numpy(q, k, v, causal=True, wave_width=32, GR=1)
    assert o5[2].tobytes() == o4[2].tobytes() and o5[0].tobytes() != o4[0].tobytes()


@pytest.mark.parametrize("D", [17, 64])
def test_outputs_have_the_real_head_dim_and_are_contiguous(D):
    # o (B, Hq, S, D) and lse (B, Hq, S) float32, C-contiguous (not views of the padded buffers)
    q, k, v = _inputs(np.random.default_rng(D), 1, 2, 1, 70, D)
    o, lse = attention_numpy(q, k, v, causal=True, wave_width=16)
    assert o.shape == (1, 2, 70, D) and lse.shape == (1, 2, 70)
    assert o.dtype == np.float32 and lse.dtype == np.float32
    assert o.flags.c_contiguous and lse.flags.c_contiguous


@pytest.mark.parametrize("qs,ks,vs,match", [
    ((1, 2, 64, 256), (1, 2, 64, 256), (1, 2, 64, 256), "head dim 256 is not supported"),
    ((1, 2, 64, 0), (1, 2, 64, 0), (1, 2, 64, 0), "head dim 0 is not supported"),
    ((1, 3, 64, 64), (1, 2, 64, 64), (1, 2, 64, 64), r"KV heads \(2\) must divide the query heads \(3\)"),
    ((1, 2, 64, 64), (1, 2, 65, 64), (1, 2, 65, 64), "must match q"),
    ((1, 2, 64, 64), (1, 2, 64, 64), (1, 1, 64, 64), "k and v must have one shape"),
    ((2, 64, 64), (2, 64, 64), (2, 64, 64), "must be 4-D"),
])
def test_bad_shapes_are_named(qs, ks, vs, match):
    with pytest.raises(KernelInputError, match=match):
        check_shapes(qs, ks, vs)
    with pytest.raises(KernelInputError, match=match):
        attention_numpy(np.zeros(qs, np.float32), np.zeros(ks, np.float32), np.zeros(vs, np.float32))


def test_forward_refuses_what_it_cannot_run():
    torch = pytest.importorskip("torch")
    x = torch.zeros(1, 2, 64, 64, dtype=torch.bfloat16)
    with pytest.raises(KernelInputError, match="runs on CUDA devices"):
        forward(x, x, x)
    with pytest.raises(KernelInputError, match="must be a torch tensor"):
        forward(np.zeros((1, 2, 64, 64)), x, x)
    if torch.cuda.is_available():
        y = torch.zeros(1, 2, 64, 64, dtype=torch.float32, device="cuda")
        with pytest.raises(KernelInputError, match="bfloat16 or all float16"):
            forward(y, y, y)


def _target_widths(name: str) -> tuple[int, ...]:
    from anywave.runtime.targets import available_targets

    st = {t.name: t for t in available_targets()}.get(name)
    if st is None or not st.available:
        pytest.skip(f"{name} unavailable: {st.reason if st else 'not registered'}")
    return st.infos[0].wave_widths


@pytest.mark.parametrize("target", ["opencl", "vulkan", pytest.param("sycl", marks=pytest.mark.slow)])
def test_cpu_targets_within_the_bound_and_batch_invariant(target):
    widths = _target_widths(target)
    W = 16 if 16 in widths else widths[0]
    rng = np.random.default_rng(11)
    q, k, v = _inputs(rng, 2, 2, 1, 100, 64)
    o, lse = attention_numpy(q, k, v, causal=True, wave_width=W, target=target)
    qd, kd, vd = (_round16(x, False) for x in (q, k, v))
    ro, rl, wv = _reference(qd, kd, vd, True, 1 / 8)
    assert np.all(np.abs(o - ro) <= 2.0**-8 * wv + 2.0**-12 * np.abs(vd).max())
    assert np.all(np.abs(lse - rl) <= 2.0**-16 * (1 + np.abs(rl)))
    o1, l1 = attention_numpy(q[1:], k[1:], v[1:], causal=True, wave_width=W, target=target)
    assert o1.tobytes() == o[1:].tobytes() and l1.tobytes() == lse[1:].tobytes()


@pytest.mark.cuda
@pytest.mark.parametrize("D", [32, 96])
def test_cuda_head_dims_between_the_kernels_run_fast_within_the_bound(D):
    # D = 32 runs the D = 64 kernel, D = 96 the D = 128 one, on zero-padded columns (kernel_head_dim)
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    import anywave.torch.ops  # noqa: F401  (registers torch.ops.anywave; the package alone does not)

    rng = np.random.default_rng(D)
    q, k, v = _inputs(rng, 1, 2, 1, 100, D)
    qc, kc, vc = (torch.from_numpy(x).to("cuda", torch.bfloat16) for x in (q, k, v))
    o, lse = forward(qc, kc, vc, True)
    assert o.shape == qc.shape and lse.shape == qc.shape[:3]
    assert o.is_contiguous() and lse.is_contiguous()  # as the op's fake implementation declares them
    qd, kd, vd = (_round16(x, False) for x in (q, k, v))
    ro, rl, wv = _reference(qd, kd, vd, True, 1 / math.sqrt(D))
    of = o.float().cpu().numpy().astype(np.float64)
    # the bound of the f32 result, plus o's rounding to bf16 (half an ulp of |o|: 2^-9 |o|)
    assert np.all(np.abs(of - ro) <= 2.0**-8 * wv + 2.0**-12 * np.abs(vd).max() + 2.0**-9 * np.abs(of))
    assert np.all(np.abs(lse.cpu().numpy() - rl) <= 2.0**-16 * (1 + np.abs(rl)))
    # the op's "fast" mode takes this kernel (not the exact fallback): the same bits
    assert torch.equal(torch.ops.anywave.attention(qc, kc, vc, True, None, "fast"), o)
    again, _ = forward(qc, kc, vc, True)
    assert torch.equal(again, o)
