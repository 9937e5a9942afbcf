"""The GPT ops of issue 26 (:mod:`anywave.torch.gpt`): each against an independent float64
PyTorch computation, batch invariance (a row's bits alone and inside a batch), opcheck (schema,
fake tensors, autograd registration), clear errors, and the same bits on another CPU target."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import anywave.torch.ops as ops  # noqa: E402
from anywave.torch import gpt as T  # noqa: E402

F = torch.nn.functional


def _g(seed=0):
    return torch.Generator().manual_seed(seed)


def _close(a, b, tol):
    assert (a.double() - b.double()).abs().max().item() <= tol * (1 + b.abs().max().item())


@pytest.mark.parametrize("gelu,bias", [(True, True), (False, False)])
def test_linear_forward_backward_against_float64(gelu, bias):
    g = _g()
    x = torch.randn(9, 20, generator=g, dtype=torch.float64, requires_grad=True)
    w = torch.randn(12, 20, generator=g, dtype=torch.float64, requires_grad=True)
    b = torch.randn(12, generator=g, dtype=torch.float64, requires_grad=True) if bias else None
    y = F.linear(x, w, b)
    y = F.gelu(y, approximate="tanh") if gelu else y
    gy = torch.randn(y.shape, generator=g, dtype=torch.float64)
    y.backward(gy)
    xf, wf = (t.detach().float().requires_grad_() for t in (x, w))
    bf = b.detach().float().requires_grad_() if bias else None
    yf = T.linear(xf, wf, bf, gelu=gelu)
    yf.backward(gy.float())
    _close(yf, y, 1e-5)
    _close(xf.grad, x.grad, 1e-5)
    _close(wf.grad, w.grad, 1e-5)
    if bias:
        _close(bf.grad, b.grad, 1e-5)


@pytest.mark.parametrize("rms", [False, True])
def test_norm_forward_backward_against_float64(rms):
    g = _g(1)
    x = torch.randn(7, 24, generator=g, dtype=torch.float64, requires_grad=True) * 3 + 1
    x.retain_grad()
    gam = torch.randn(24, generator=g, dtype=torch.float64, requires_grad=True)
    bet = torch.randn(24, generator=g, dtype=torch.float64, requires_grad=True)
    if rms:
        y = x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-5) * gam
    else:
        y = F.layer_norm(x, (24,), gam, bet, 1e-5)
    gy = torch.randn(y.shape, generator=g, dtype=torch.float64)
    y.backward(gy)
    xf, gf, bf = (t.detach().float().requires_grad_() for t in (x, gam, bet))
    yf = T.norm(xf, gf, None if rms else bf, rms=rms)
    yf.backward(gy.float())
    _close(yf, y, 1e-5)
    _close(xf.grad, x.grad, 1e-4)
    _close(gf.grad, gam.grad, 1e-5)
    if not rms:
        _close(bf.grad, bet.grad, 1e-5)


def test_embedding_and_its_backward_gather_in_token_order():
    g = _g(2)
    tab = torch.randn(10, 4, generator=g, requires_grad=True)
    idx = torch.tensor([[1, 2, 1], [3, 1, 9]])
    out = T.embedding(tab, idx)
    assert torch.equal(out, tab.detach()[idx])
    gy = torch.randn(out.shape, generator=g)
    out.backward(gy)
    # row 1 gathers tokens 0, 2, 4 in that order, from +0: ((0 + g0) + g2) + g4 in float32
    flat = gy.reshape(-1, 4)
    want = torch.zeros(10, 4)
    for i, v in enumerate(idx.reshape(-1).tolist()):
        want[v] = want[v] + flat[i]
    assert torch.equal(tab.grad, want)
    with pytest.raises(ops.OpInputError, match=r"\[0, 10\)"):
        T.embedding(tab, torch.tensor([0, 10]))
    with pytest.raises(ops.OpDtypeError):
        T.embedding(tab, torch.tensor([0.0]))


def test_token_ids_changed_in_place_are_checked_again():
    """The ids' range is read once per tensor version (the backward reuses the forward's reading):
    ids written in place after a check are read again, and an id outside the table is refused."""
    tab = torch.randn(10, 4, generator=_g(4))
    idx = torch.tensor([0, 3, 9])
    T.embedding(tab, idx)
    idx[1] = 10
    with pytest.raises(ops.OpInputError, match=r"\[0, 10\).*\[0, 10\]"):
        T.embedding(tab, idx)
    view = idx[1:]
    idx[1] = 3
    T.embedding(tab, view)
    idx[2] = -1  # through the base: the view's version counter is the base's
    with pytest.raises(ops.OpInputError, match=r"\[-1, 3\]"):
        T.embedding(tab, view)
    with pytest.raises(ops.OpInputError, match="token ids"):
        torch.ops.anywave.gpt_embedding_backward(torch.ones(2, 4), view, 10)


def test_cross_entropy_against_float64():
    g = _g(3)
    x = torch.randn(6, 30, generator=g, dtype=torch.float64, requires_grad=True) * 4
    x.retain_grad()
    lab = torch.tensor([1, 2, 3, 0, 29, 5])
    loss = F.cross_entropy(x, lab)
    loss.backward()
    xf = x.detach().float().requires_grad_()
    lf = T.cross_entropy(xf, lab)
    lf.backward()
    assert abs(lf.item() - loss.item()) < 1e-5
    _close(xf.grad, x.grad, 1e-6)
    bad = T.cross_entropy(xf.detach(), torch.tensor([1, 2, 3, 0, 30, 5]))
    assert torch.isnan(bad)


def test_adamw_against_torch_optim():
    g = _g(4)
    p = torch.randn(300, generator=g)
    q = torch.nn.Parameter(p.clone())
    m, v = torch.zeros(300), torch.zeros(300)
    opt = torch.optim.AdamW([q], lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    for step in range(1, 4):
        grad = torch.randn(300, generator=g)
        q.grad = grad.clone()
        opt.step()
        T.adamw_(p, grad, m, v, lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1, step=step)
    _close(p, q.detach(), 1e-6)
    with pytest.raises(ops.OpInputError, match="step"):
        T.adamw_(p, grad, m, v, lr=1e-2, step=0)


def test_clip_grad_norm_against_float64():
    g = _g(5)
    grads = [torch.randn(2500, generator=g), torch.randn(3, 7, generator=g)]
    ref = [t.clone().double() for t in grads]
    total = torch.sqrt(sum((r * r).sum() for r in ref))
    n = T.clip_grad_norm_(grads, 1.0)
    assert abs(n.item() - total.item()) < 1e-4 * total.item()
    for a, r in zip(grads, ref, strict=True):
        _close(a, r / (total + 1e-6), 1e-6)
    small = [torch.full((5,), 1e-3)]
    T.clip_grad_norm_(small, 1.0)
    assert torch.equal(small[0], torch.full((5,), 1e-3))  # below the bound: scale 1, unchanged


def test_rows_are_batch_invariant():
    """A row's result has the same bits alone and inside a larger batch (no batch-dependent order)."""
    g = _g(6)
    x = torch.randn(33, 40, generator=g)
    w = torch.randn(24, 40, generator=g)
    b = torch.randn(24, generator=g)
    full = T.linear(x, w, b, gelu=True)
    assert torch.equal(T.linear(x[5:6], w, b, gelu=True), full[5:6])
    gam, bet = torch.randn(40, generator=g), torch.randn(40, generator=g)
    assert torch.equal(T.norm(x[7:9], gam, bet), T.norm(x, gam, bet)[7:9])
    lse_all = torch.ops.anywave.gpt_xent(x, torch.zeros(33, dtype=torch.int64))[1]
    assert torch.equal(torch.ops.anywave.gpt_xent(x[3:4], torch.zeros(1, dtype=torch.int64))[1], lse_all[3:4])


def test_opcheck():
    g = _g(7)
    x = torch.randn(4, 8, generator=g, requires_grad=True)
    w = torch.randn(8, 8, generator=g, requires_grad=True)
    b = torch.randn(8, generator=g, requires_grad=True)
    oc = torch.library.opcheck
    oc(torch.ops.anywave.gpt_linear.default, (x, w, b, True, "exact"))
    oc(torch.ops.anywave.gpt_linear.default, (x, w, None, False, "exact"))
    oc(torch.ops.anywave.gpt_norm.default, (x, b, b.detach().clone().requires_grad_(), 1e-5, False))
    oc(torch.ops.anywave.gpt_embedding.default, (w, torch.tensor([0, 3, 3, 7])))
    oc(torch.ops.anywave.gpt_xent.default, (x, torch.tensor([0, 1, 2, 7])))
    oc(torch.ops.anywave.gpt_grad_norm.default, (torch.randn(3000, generator=g), 1.0))
    p = torch.randn(8, generator=g)
    oc(torch.ops.anywave.gpt_adamw_.default, (p, torch.randn(8, generator=g), torch.zeros(8), torch.zeros(8),
                                               1e-3, 0.9, 0.95, 1e-8, 0.1, 1))


def test_bad_input_errors():
    x = torch.randn(4, 8)
    with pytest.raises(ops.OpDtypeError, match="float32"):
        T.linear(x.double(), torch.randn(3, 8))
    with pytest.raises(ops.OpInputError, match="input features"):
        T.linear(x, torch.randn(3, 7))
    with pytest.raises(ops.OpInputError, match="mode"):
        T.linear(x, torch.randn(3, 8), mode="quick")
    with pytest.raises(ops.OpInputError, match="gamma"):
        T.norm(x, torch.ones(7), torch.zeros(7))
    with pytest.raises(ops.OpInputError, match="labels"):
        T.cross_entropy(x, torch.tensor([0, 1]))
    with pytest.raises(ops.OpInputError, match="max_norm"):
        T.clip_grad_norm_([x.clone()], 0.0)


def test_decode_attention_matches_the_attention_op():
    g = _g(8)
    q = torch.randn(1, 2, 1, 16, generator=g)
    k = torch.randn(1, 2, 37, 16, generator=g)
    v = torch.randn(1, 2, 37, 16, generator=g)
    o = T.decode_attention(q, k, v)
    # one chunk (37 <= KV_CHUNK keys): the same sequence as the attention op (§8.17 "Decode")
    assert torch.equal(o, torch.ops.anywave.attention(q, k, v, False, None, "exact"))
    ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double())
    _close(o, ref, 1e-5)


def test_ragged_decode_rows_are_each_sequence_alone():
    """decode_attention with ``lengths``: row b the bits of its own sequence's truncated cache
    decoded alone (the walk per sequence, chunks past its end skipped), whatever the rows past
    its length hold (NaN here: never read); more keys than one chunk, grouped heads, Sq = 2,
    a length of 0 (zeros), lengths as ints and as a tensor; bad lengths are refused."""
    from anywave.kernels.attention import KV_CHUNK

    g = _g(12)
    cap = KV_CHUNK + 70
    lens = [KV_CHUNK + 70, 1, 0, 200, KV_CHUNK]
    b = len(lens)
    q = torch.randn(b, 4, 2, 8, generator=g)
    k = torch.randn(b, 2, cap, 8, generator=g)
    v = torch.randn(b, 2, cap, 8, generator=g)
    for s, n in enumerate(lens):
        k[s, :, n:] = float("nan")
        v[s, :, n:] = float("nan")
    o = T.decode_attention(q, k, v, lengths=lens)
    assert torch.equal(T.decode_attention(q, k, v, lengths=torch.tensor(lens)), o)
    with ops.cpu_target("emulator", wave_width=8):  # and at another W
        assert torch.equal(T.decode_attention(q, k, v, lengths=lens), o)
    for s, n in enumerate(lens):
        if n == 0:
            assert torch.equal(o[s], torch.zeros_like(o[s]))
            continue
        alone = T.decode_attention(q[s:s + 1], k[s:s + 1, :, :n], v[s:s + 1, :, :n])
        assert torch.equal(o[s:s + 1], alone), s
        kk, vv = (t[s:s + 1, :, :n].double().repeat_interleave(2, dim=1) for t in (k, v))
        _close(o[s:s + 1], F.scaled_dot_product_attention(q[s:s + 1].double(), kk, vv), 1e-5)
    with pytest.raises(ops.OpInputError, match="lengths"):
        T.decode_attention(q, k, v, lengths=[1, 2])
    with pytest.raises(ops.OpInputError, match="lengths"):
        T.decode_attention(q, k, v, lengths=[cap + 1] * b)
    with pytest.raises(ops.OpInputError, match="lengths"):
        T.decode_attention(q, k, v, lengths=torch.ones(b))


def _rope_ref(x, offset, base=10000.0):
    """Rotary embedding in float64 PyTorch, written from RoFormer's definition in the "rotate half"
    layout: pair (i, i + D/2) at position p rotated by p * base^(-2i/D)."""
    d = x.shape[-1]
    h = d // 2
    pos = torch.arange(offset, offset + x.shape[-2], dtype=torch.float64)
    ang = pos[:, None] * base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)[None, :]
    c, s = ang.cos(), ang.sin()
    x1, x2 = x[..., :h], x[..., h:]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)


@pytest.mark.parametrize("offset", [0, 5])
def test_rotary_forward_backward_against_float64(offset):
    g = _g(9)
    x = torch.randn(2, 3, 7, 12, generator=g, dtype=torch.float64, requires_grad=True)
    y = _rope_ref(x, offset)
    gy = torch.randn(y.shape, generator=g, dtype=torch.float64)
    y.backward(gy)
    xf = x.detach().float().requires_grad_()
    yf = T.rotary(xf, offset)
    yf.backward(gy.float())
    _close(yf, y, 1e-6)
    _close(xf.grad, x.grad, 1e-6)
    # the rotation keeps each pair's length (orthogonal), up to f32 rounding
    _close(yf.norm(dim=-1), x.detach().norm(dim=-1), 1e-6)


def test_rotary_tables_and_decode_offsets():
    c, s = T.rotary_tables(40, 16)
    assert c.dtype == s.dtype == np.float32 and c.shape == (40, 8)
    ang = np.arange(40, dtype=np.float64)[:, None] * np.power(10000.0, -np.arange(0, 16, 2) / 16.0)[None]
    assert np.abs(c - np.cos(ang)).max() <= 2**-24 and np.abs(s - np.sin(ang)).max() <= 2**-24
    c2, s2 = T.rotary_tables(10, 16, offset=30)
    assert np.array_equal(c2.view(np.uint32), c[30:].view(np.uint32))
    assert np.array_equal(s2.view(np.uint32), s[30:].view(np.uint32))
    # decoding row by row with the cache length as offset gives the bits of the whole sequence
    x = torch.randn(2, 2, 9, 8, generator=_g(10))
    full = T.rotary(x)
    for t in range(9):
        assert torch.equal(T.rotary(x[:, :, t:t + 1].contiguous(), t), full[:, :, t:t + 1])
    assert torch.equal(T.rotary(x[1:2]), full[1:2])  # batch-invariant
    with ops.cpu_target("emulator", wave_width=8):
        assert torch.equal(T.rotary(x), full)


def test_rotary_bad_input_errors():
    with pytest.raises(ops.OpInputError, match="D even"):
        T.rotary(torch.randn(1, 1, 2, 7))
    with pytest.raises(ops.OpInputError, match="4-D"):
        T.rotary(torch.randn(2, 8))
    with pytest.raises(ops.OpDtypeError, match="float32"):
        T.rotary(torch.randn(1, 1, 2, 8, dtype=torch.float64))
    with pytest.raises(ops.OpInputError, match="offset"):
        T.rotary(torch.randn(1, 1, 2, 8), -1)
    with pytest.raises(ops.OpDtypeError, match="offset"):
        T.rotary(torch.randn(1, 1, 2, 8), 1.5)
    with pytest.raises(ValueError, match="even"):
        T.rotary_tables(4, 5)


def test_swiglu_forward_backward_against_float64():
    g = _g(11)
    a = torch.randn(5, 33, generator=g, dtype=torch.float64) * 4
    a[0, :4] = torch.tensor([-120.0, -30.0, 30.0, 120.0], dtype=torch.float64)  # exp saturating both ways
    a.requires_grad_()
    b = torch.randn(5, 33, generator=g, dtype=torch.float64, requires_grad=True)
    y = F.silu(a) * b
    gy = torch.randn(y.shape, generator=g, dtype=torch.float64)
    y.backward(gy)
    af, bf = (t.detach().float().requires_grad_() for t in (a, b))
    yf = T.swiglu(af, bf)
    yf.backward(gy.float())
    _close(yf, y, 1e-6)
    _close(af.grad, a.grad, 1e-6)
    _close(bf.grad, b.grad, 1e-6)
    with ops.cpu_target("emulator", wave_width=8):
        assert torch.equal(T.swiglu(af.detach(), bf.detach()), yf.detach())
    with pytest.raises(ops.OpInputError, match="one shape"):
        T.swiglu(af.detach(), bf.detach()[:, :3])
    with pytest.raises(ops.OpDtypeError, match="float32"):
        T.swiglu(a.detach(), b.detach())


def test_opcheck_rotary_swiglu():
    g = _g(12)
    oc = torch.library.opcheck
    x = torch.randn(2, 2, 3, 8, generator=g, requires_grad=True)
    oc(torch.ops.anywave.gpt_rotary.default, (x, 0, 10000.0, False))
    oc(torch.ops.anywave.gpt_rotary.default, (x, 4, 500.0, True))
    a = torch.randn(4, 6, generator=g, requires_grad=True)
    b = torch.randn(4, 6, generator=g, requires_grad=True)
    oc(torch.ops.anywave.gpt_swiglu.default, (a, b))
    oc(torch.ops.anywave.gpt_swiglu_backward.default, (torch.randn(4, 6, generator=g), a.detach(), b.detach()))
