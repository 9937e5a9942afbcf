"""``torch.ops.anywave.attention`` (src/anywave/torch/attention.py): the exact kernels' bits through
the op, autograd, bf16/f16 rounding, fake tensors and opcheck, torch.compile(fullgraph=True), the
CPU-target choice, the fast mode's fallback and the errors. Tiny shapes: the default CPU target is
the emulator."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import anywave.torch.ops as ops  # noqa: E402  (registers the ops)
from anywave.kernels import attention as A  # noqa: E402


@pytest.fixture(autouse=True)
def _no_wall_clock_budget(monkeypatch):
    # the emulator's loop budget is wall-clock time; a test must not depend on the machine's load
    monkeypatch.setenv("ANYWAVE_EMU_BUDGET", "none")


def qkv(b=1, hq=2, hkv=1, sq=5, sk=70, d=8, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(s, generator=g).to(dtype) for s in ((b, hq, sq, d), (b, hkv, sk, d), (b, hkv, sk, d)))


def sdpa64(q, k, v, causal):
    sq, sk = q.shape[2], k.shape[2]
    mask = torch.ones(sq, sk, dtype=torch.bool).tril(sk - sq) if causal else None
    return torch.nn.functional.scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=mask,
                                                            enable_gqa=True)


def test_f32_forward_is_the_kernel_bits_and_near_sdpa():
    q, k, v = qkv()
    o = torch.ops.anywave.attention(q, k, v, True)
    ko, _ = A.attention(q.numpy(), k.numpy(), v.numpy(), True)
    assert o.dtype == torch.float32 and o.shape == q.shape
    assert o.numpy().tobytes() == ko.tobytes()
    assert torch.allclose(o.double(), sdpa64(q, k, v, True), rtol=0, atol=1e-5)


def test_backward_is_the_kernel_bits_and_near_sdpa():
    q, k, v = (t.requires_grad_() for t in qkv(sq=6, sk=67))
    g = torch.randn(q.shape, generator=torch.Generator().manual_seed(1))
    o, lse = torch.ops.anywave.attention_forward(q, k, v, True, None, "exact")
    o.backward(g)
    want = A.attention_backward(q.detach().numpy(), k.detach().numpy(), v.detach().numpy(), o.detach().numpy(),
                                lse.detach().numpy(), g.numpy(), None, True)
    for t, w in zip((q, k, v), want, strict=True):
        assert t.grad.numpy().tobytes() == w.tobytes()
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    sdpa64(q64, k64, v64, True).backward(g.double())
    for t, r in ((q, q64), (k, k64), (v, v64)):
        assert torch.allclose(t.grad.double(), r.grad, rtol=0, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_inputs_round_the_f32_result_once(dtype):
    q, k, v = qkv(dtype=dtype, seed=2)
    o = torch.ops.anywave.attention(q, k, v, False, 0.4, "exact")
    of, _ = torch.ops.anywave.attention_forward(q.float(), k.float(), v.float(), False, 0.4, "exact")
    assert o.dtype == dtype and torch.equal(o, of.to(dtype))
    q.requires_grad_()
    torch.ops.anywave.attention(q, k, v, False, 0.4, "exact").sum().backward()
    assert q.grad.dtype == dtype and torch.isfinite(q.grad.float()).all()


def test_fast_mode_on_cpu_is_the_exact_bits():
    q, k, v = qkv(seed=3)
    assert torch.equal(torch.ops.anywave.attention(q, k, v, True, None, "fast"),
                       torch.ops.anywave.attention(q, k, v, True, None, "exact"))


def test_opcheck_passes():
    q, k, v = (t.requires_grad_() for t in qkv(sq=3, sk=9, seed=4))
    for op in (torch.ops.anywave.attention_forward.default, torch.ops.anywave.attention.default):
        torch.library.opcheck(op, (q, k, v, True, None, "exact"))
    o, lse = torch.ops.anywave.attention_forward(q, k, v, True)
    torch.library.opcheck(torch.ops.anywave.attention_backward.default,
                          (torch.ones_like(o), torch.zeros_like(lse), q.detach(), k.detach(), v.detach(), o.detach(),
                           lse.detach(), True, None))


def test_compile_fullgraph_gives_the_eager_bits():
    q, k, v = qkv(sq=4, sk=66, seed=5)
    qe, qc = q.clone().requires_grad_(), q.clone().requires_grad_()

    def f(q, k, v):
        return torch.ops.anywave.attention(q, k, v, True, 0.3, "exact").square().sum()

    f(qe, k, v).backward()
    torch.compile(f, fullgraph=True)(qc, k, v).backward()
    assert torch.equal(qe.grad, qc.grad)


def test_the_cpu_target_choice_gives_the_same_bits():
    from anywave.runtime.targets import available_targets

    st = next(s for s in available_targets() if s.name == "opencl")
    if not st.available:
        pytest.skip(f"opencl unavailable: {st.reason}")
    q, k, v = qkv(seed=6)
    want = torch.ops.anywave.attention(q, k, v, True)
    with ops.cpu_target("opencl"):
        got = torch.ops.anywave.attention(q, k, v, True)
    assert got.numpy().tobytes() == want.numpy().tobytes()


@pytest.mark.parametrize("args,err,match", [
    (lambda q, k, v: (q.double(), k.double(), v.double()), ops.OpDtypeError, "float64"),
    (lambda q, k, v: (q, k.half(), v), ops.OpDtypeError, "one dtype"),
    (lambda q, k, v: (q[:, :, :, :6], k[:, :, :, :6], v[:, :, :, :6]), ops.OpInputError, "head dim 6"),
    (lambda q, k, v: (q, k[:, :, :5], v), ops.OpInputError, "v has shape"),
    (lambda q, k, v: (q[:, :1].expand(1, 3, 5, 8), k.expand(1, 2, 70, 8), v.expand(1, 2, 70, 8)),
     ops.OpInputError, "multiple of the key/value heads"),
])
def test_bad_inputs_are_refused_with_the_reason(args, err, match):
    q, k, v = args(*qkv())
    with pytest.raises(err, match=match):
        torch.ops.anywave.attention(q, k, v)


def test_bad_mode_and_scale_are_refused():
    q, k, v = qkv()
    with pytest.raises(ops.OpInputError, match="mode"):
        torch.ops.anywave.attention(q, k, v, False, None, "fastest")
    with pytest.raises(ops.OpInputError, match="scale"):
        torch.ops.anywave.attention(q, k, v, False, float("inf"))


def test_a_row_is_batch_invariant_through_the_op():
    q, k, v = qkv(b=4, sq=3, sk=40, seed=7)
    o4 = torch.ops.anywave.attention(q, k, v, True)
    o1 = torch.ops.anywave.attention(q[2:3], k[2:3], v[2:3], True)
    assert np.array_equal(o1.numpy().view(np.uint32), o4[2:3].numpy().view(np.uint32))


@pytest.mark.cuda
def test_cuda_tensors_give_the_cpu_bits_forward_and_backward():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    q, k, v = qkv(b=2, sq=20, sk=70, d=32, seed=8)
    g = torch.randn(q.shape, generator=torch.Generator().manual_seed(9))
    outs = []
    for dev in ("cpu", "cuda"):
        qd, kd, vd = (t.detach().clone().to(dev).requires_grad_() for t in (q, k, v))  # leaves on dev
        o = torch.ops.anywave.attention(qd, kd, vd, True, None, "exact")
        o.backward(g.to(dev))
        outs.append([t.detach().cpu().numpy().tobytes() for t in (o, qd.grad, kd.grad, vd.grad)])
    assert outs[0] == outs[1]
    qc, kc, vc = (t.cuda() for t in (q, k, v))
    o2 = torch.ops.anywave.attention(qc, kc, vc, True, None, "exact")
    o1 = torch.ops.anywave.attention(qc[1:], kc[1:], vc[1:], True, None, "exact")
    assert torch.equal(o1, o2[1:])


def test_non_contiguous_inputs_give_the_contiguous_bits():
    # (B, S, H, D) storage viewed as SDPA's (B, H, S, D), as a projection's output usually is
    g = torch.Generator().manual_seed(10)
    q, k, v = (torch.randn(1, s, 2, 8, generator=g).transpose(1, 2) for s in (6, 70, 70))
    assert not q.is_contiguous()
    got = torch.ops.anywave.attention(q, k, v, True)
    want = torch.ops.anywave.attention(q.contiguous(), k.contiguous(), v.contiguous(), True)
    assert torch.equal(got, want)


def test_meta_tensors_give_meta_results():
    q, k, v = (t.to("meta") for t in qkv())
    o, lse = torch.ops.anywave.attention_forward(q, k, v, True)
    assert o.device.type == "meta" and o.shape == q.shape and lse.shape == q.shape[:3]
    assert torch.ops.anywave.attention(q, k, v).shape == q.shape
    with pytest.raises(ops.OpInputError, match="head dim 6"):
        torch.ops.anywave.attention(q[..., :6], k[..., :6], v[..., :6])


def test_a_scale_overflowing_f32_and_an_empty_batch():
    q, k, v = qkv()
    with pytest.raises(ops.OpInputError, match="scale"):
        torch.ops.anywave.attention(q, k, v, False, 1e39)
    q0, k0, v0 = (t[:0].clone().requires_grad_() for t in (q, k, v))
    o = torch.ops.anywave.attention(q0, k0, v0, True)
    assert o.shape == q0.shape
    o.sum().backward()
    assert q0.grad.shape == q0.shape and k0.grad.shape == k0.shape


def test_compile_with_dynamic_shapes_gives_the_eager_bits():
    f = torch.compile(lambda q, k, v: torch.ops.anywave.attention(q, k, v, True, None, "exact"), dynamic=True,
                      fullgraph=True)
    for sq, sk in ((3, 7), (5, 9)):
        q, k, v = qkv(sq=sq, sk=sk, seed=sq)
        assert torch.equal(f(q, k, v), torch.ops.anywave.attention(q, k, v, True, None, "exact"))
