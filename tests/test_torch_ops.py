"""torch.ops.anywave: opcheck for every op, values against independent NumPy references
(bit for bit where the kernel's order is reproducible: fma chains, sums, selects; within a
few ulp where the kernel uses the precise stdlib exp/log), autograd against PyTorch's own
gradients, torch.compile without graph breaks, input errors, and CUDA (marker ``cuda``)."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from anywave.kernels.reference import fma_f32  # noqa: E402
from anywave.runtime.targets import TargetUnavailable  # noqa: E402
from anywave.torch import ops  # noqa: E402

A = torch.ops.anywave


@pytest.fixture(scope="module", autouse=True)
def _cache_dir(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("ANYWAVE_CACHE_DIR", str(tmp_path_factory.mktemp("awcache")))
    yield
    mp.undo()


def rnd(*shape, seed=0, requires_grad=False):
    g = np.random.default_rng(seed)
    return torch.tensor(g.standard_normal(shape).astype(np.float32), requires_grad=requires_grad)


def bits(t) -> np.ndarray:
    a = t.detach().cpu().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)
    return np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)


def mm_ref(a: np.ndarray, b: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    """acc = fma(a[:, k], b[k, :], acc) in order from +0.0 (correctly rounded fma), + bias."""
    m, k = a.shape
    acc = np.zeros((m, b.shape[1]), np.float32)
    for kk in range(k):
        acc = fma_f32(a[:, kk:kk + 1], b[kk:kk + 1, :], acc)
    if bias is not None:
        acc = (acc + bias[None, :]).astype(np.float32)
    return acc


# ----------------------------------------------------------------------------- opcheck

def _opcheck_cases():
    lab = torch.tensor([0, 3, 1, 2, 3], dtype=torch.int64)
    return [
        ("mm", (rnd(5, 7, requires_grad=True), rnd(7, 3, seed=1, requires_grad=True), False, False)),
        ("mm", (rnd(7, 5, requires_grad=True), rnd(3, 7, seed=1, requires_grad=True), True, True)),
        ("mm", (rnd(7, 5, requires_grad=True), rnd(7, 3, seed=1, requires_grad=True), True, False)),
        ("mm", (rnd(5, 7, requires_grad=True), rnd(3, 7, seed=1, requires_grad=True), False, True)),
        ("linear", (rnd(5, 7, requires_grad=True), rnd(3, 7, seed=1, requires_grad=True),
                    rnd(3, seed=2, requires_grad=True))),
        ("sum_dim0", (rnd(9, 4, requires_grad=True),)),
        ("relu", (rnd(3, 11, requires_grad=True),)),
        ("relu_backward", (rnd(3, 11), rnd(3, 11, seed=1))),
        ("cross_entropy", (rnd(5, 4, requires_grad=True), lab)),
        ("cross_entropy", (rnd(5, 4, requires_grad=True), lab.to(torch.int32))),
        ("cross_entropy_backward", (torch.tensor(1.5), rnd(5, 4), lab)),
        ("sgd_", (rnd(6, 3), rnd(6, 3, seed=1), 0.25)),
    ]


@pytest.mark.parametrize("name,args", _opcheck_cases(), ids=lambda v: v if isinstance(v, str) else "")
def test_opcheck(name, args):
    torch.library.opcheck(getattr(A, name).default, args)


# ----------------------------------------------------------------------------- values

@pytest.mark.parametrize("trans_a,trans_b", [(False, False), (True, False), (False, True), (True, True)])
def test_mm_bits_match_fma_chain(trans_a, trans_b):
    a, b = rnd(6, 13).numpy(), rnd(13, 5, seed=1).numpy()
    ta = torch.from_numpy(np.ascontiguousarray(a.T)) if trans_a else torch.from_numpy(a)
    tb = torch.from_numpy(np.ascontiguousarray(b.T)) if trans_b else torch.from_numpy(b)
    np.testing.assert_array_equal(bits(A.mm(ta, tb, trans_a, trans_b)), bits(mm_ref(a, b)))


def test_linear_bits_and_empty_k():
    x, w, b = rnd(9, 10), rnd(4, 10, seed=1), rnd(4, seed=2)
    want = mm_ref(x.numpy(), np.ascontiguousarray(w.numpy().T), b.numpy())
    np.testing.assert_array_equal(bits(ops.linear(x, w, b)), bits(want))
    # K = 0: the empty fma chain is +0.0, then + bias
    out = ops.linear(torch.zeros(3, 0), torch.zeros(4, 0), b)
    np.testing.assert_array_equal(bits(out), bits(np.broadcast_to(b.numpy(), (3, 4))))


def test_sum_dim0_relu_sgd_bits():
    x = rnd(37, 6)
    want = np.zeros(6, np.float32)
    for r in x.numpy():
        want = (want + r).astype(np.float32)
    np.testing.assert_array_equal(bits(ops.sum_dim0(x)), bits(want))

    v = torch.tensor([-1.5, -0.0, 0.0, 2.0, float("nan"), float("inf"), -float("inf"), 1e-40])
    np.testing.assert_array_equal(bits(ops.relu(v)), bits(np.array([0, 0, 0, 2, 0, np.inf, 0, 1e-40], np.float32)))
    g = torch.arange(8, dtype=torch.float32) + 1
    np.testing.assert_array_equal(bits(ops.relu_backward(g, ops.relu(v))),
                                  bits(np.array([0, 0, 0, 4, 0, 6, 0, 8], np.float32)))

    p, gr = rnd(40), rnd(40, seed=1)
    want = p.numpy() - np.float32(0.3) * gr.numpy()  # float32: product rounded, then difference
    ops.sgd_(p, gr, 0.3)
    np.testing.assert_array_equal(bits(p), bits(want))


def _ce_ref(x: np.ndarray, lab: np.ndarray) -> tuple[float, np.ndarray]:
    x64 = x.astype(np.float64)
    m = x64.max(1, keepdims=True)
    e = np.exp(x64 - m)
    s = e.sum(1, keepdims=True)
    loss = (np.log(s[:, 0]) + m[:, 0] - x64[np.arange(len(lab)), lab]).mean()
    p = e / s
    p[np.arange(len(lab)), lab] -= 1.0
    return float(loss), p / len(lab)


def test_cross_entropy_close_to_float64():
    x = rnd(20, 10) * 4
    lab = torch.from_numpy(np.random.default_rng(3).integers(0, 10, 20))
    want_loss, want_grad = _ce_ref(x.numpy(), lab.numpy())
    got = ops.cross_entropy(x, lab)
    assert got.shape == () and got.dtype == torch.float32
    # exp/log within 2 ulp, each row term a few float32 roundings: a few 1e-7 relative
    assert abs(float(got) - want_loss) <= 2e-6 * max(1.0, abs(want_loss))
    g = ops.cross_entropy_backward(torch.tensor(1.0), x, lab)
    np.testing.assert_allclose(g.numpy(), want_grad, rtol=0, atol=1e-7)
    g2 = ops.cross_entropy_backward(torch.tensor(-2.0), x, lab)
    np.testing.assert_allclose(g2.numpy(), -2 * want_grad, rtol=0, atol=2e-7)


def test_cross_entropy_bad_label_is_nan():
    x = rnd(3, 4)
    loss = ops.cross_entropy(x, torch.tensor([0, 4, 1]))
    assert math.isnan(float(loss))
    g = ops.cross_entropy_backward(torch.tensor(1.0), x, torch.tensor([0, -1, 1]))
    assert torch.isnan(g[1]).all() and not torch.isnan(g[0]).any()
    # an int64 label past int32 is out of range too, not wrapped onto class 1 (2^32 + 1 mod 2^32)
    for bad in ((1 << 32) + 1, -(1 << 32) + 1, (1 << 31)):
        assert math.isnan(float(ops.cross_entropy(x, torch.tensor([0, bad, 1]))))
        g = ops.cross_entropy_backward(torch.tensor(1.0), x, torch.tensor([0, bad, 1]))
        assert torch.isnan(g[1]).all() and not torch.isnan(g[0]).any()


def test_autograd_matches_pytorch():
    x = rnd(8, 12, seed=5)
    w1, b1 = rnd(6, 12, seed=6, requires_grad=True), rnd(6, seed=7, requires_grad=True)
    w2, b2 = rnd(4, 6, seed=8, requires_grad=True), rnd(4, seed=9, requires_grad=True)
    lab = torch.tensor([0, 1, 2, 3, 3, 2, 1, 0])
    ops.cross_entropy(ops.linear(ops.relu(ops.linear(x, w1, b1)), w2, b2), lab).backward()
    got = [t.grad.clone() for t in (w1, b1, w2, b2)]
    for t in (w1, b1, w2, b2):
        t.grad = None
    f = torch.nn.functional
    f.cross_entropy(f.linear(f.relu(f.linear(x, w1, b1)), w2, b2), lab).backward()
    for g, t in zip(got, (w1, b1, w2, b2), strict=True):
        torch.testing.assert_close(g, t.grad, rtol=1e-5, atol=1e-6)
    # mm with transposed operands: gradients of both inputs
    a, b = rnd(5, 7, requires_grad=True), rnd(3, 5, seed=1, requires_grad=True)
    gout = rnd(7, 3, seed=2)
    A.mm(a, b, True, True).backward(gout)
    ga, gb = a.grad.clone(), b.grad.clone()
    a.grad = b.grad = None
    (a.T @ b.T).backward(gout)
    torch.testing.assert_close(ga, a.grad, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(gb, b.grad, rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------- targets and W

@pytest.mark.parametrize("w", [8, 16, 64])
def test_same_bits_at_every_wave_width(w):
    x, wt, b = rnd(10, 9), rnd(7, 9, seed=1), rnd(7, seed=2)
    lab = torch.tensor([0, 1, 2, 3, 4, 5, 6, 0, 1, 2])
    def run():
        y = ops.linear(x, wt, b)
        return [y, ops.cross_entropy(y, lab), ops.cross_entropy_backward(torch.tensor(1.0), y, lab)]
    base = run()
    with ops.cpu_target("emulator", wave_width=w) as tgt:
        assert tgt.info.wave_width == w
        other = run()
    assert ops.current_cpu_target().info.wave_width == 32  # restored
    for p, q in zip(base, other, strict=True):
        np.testing.assert_array_equal(bits(p), bits(q))


def test_cpu_target_selection_errors():
    before = ops.current_cpu_target().info.name
    with pytest.raises(ValueError, match="unknown target 'nope'"):
        ops.set_cpu_target("nope")
    with pytest.raises(ops.OpInputError, match="not a CPU target"):
        ops.set_cpu_target("cuda")
    with pytest.raises(ValueError, match="wave_width"):
        ops.set_cpu_target("emulator", wave_width=12)
    assert "emulator" in ops.cpu_target_names()
    assert ops.current_cpu_target().info.name == before  # the refused choices changed nothing


def test_the_default_cpu_target_is_the_best_on_the_host():
    # "host": for each kernel, the best available target on the host CPU (cpu where a C compiler
    # is present); the emulator's results are the reference
    from anywave.runtime import targets as rt

    name, opts = ops.set_cpu_target()
    try:
        assert ops.current_cpu_target().info.name == rt.host_names()[0]
        x = rnd(37, 19)
        got = ops.relu(x)
        with ops.cpu_target("emulator"):
            want = ops.relu(x)
        assert torch.equal(got.view(torch.int32), want.view(torch.int32))
    finally:
        ops.set_cpu_target(name, **opts)


# ----------------------------------------------------------------------------- input errors

def test_input_errors():
    x = rnd(4, 5)
    with pytest.raises(ops.OpDtypeError, match="float64.*supported: torch.float32"):
        ops.relu(x.double())
    with pytest.raises(TypeError):
        ops.mm(x.half(), x)
    with pytest.raises(ops.OpInputError, match="inner sizes must match"):
        ops.mm(x, x)
    with pytest.raises(ops.OpInputError, match="bias has shape"):
        ops.linear(x, rnd(3, 5), rnd(4))
    with pytest.raises(ops.OpInputError, match="must be 2-D"):
        ops.linear(x.reshape(-1), rnd(3, 5), rnd(3))
    with pytest.raises(ops.OpDtypeError, match="labels has dtype torch.float32"):
        ops.cross_entropy(x, torch.zeros(4))
    with pytest.raises(ops.OpInputError, match="labels has shape"):
        ops.cross_entropy(x, torch.zeros(3, dtype=torch.int64))
    with pytest.raises(ops.OpInputError, match="grad must have one element"):
        ops.cross_entropy_backward(torch.ones(2), x, torch.zeros(4, dtype=torch.int64))
    with pytest.raises(ops.OpInputError, match="must be contiguous"):
        ops.sgd_(rnd(5, 4).T, rnd(4, 5), 0.1)
    with pytest.raises(ops.OpInputError, match="one device; got a on cpu, b on meta"):
        ops._same_device("mm", a=x, b=torch.empty(2, device="meta"))
    with pytest.raises(ops.OpInputError, match="supported devices"):
        ops._same_device("mm", a=torch.empty(2, device="meta"))


def test_non_contiguous_inputs_are_made_contiguous():
    a, b = rnd(9, 6), rnd(5, 9, seed=1)
    np.testing.assert_array_equal(bits(ops.mm(a.T, b.T)), bits(ops.mm(a.T.contiguous(), b.T.contiguous())))
    v = rnd(8, 8)[:, ::2]
    np.testing.assert_array_equal(bits(ops.relu(v)), bits(ops.relu(v.contiguous())))


# ----------------------------------------------------------------------------- torch.compile

class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w1 = torch.nn.Parameter(rnd(8, 6, seed=11))
        self.b1 = torch.nn.Parameter(rnd(8, seed=12))
        self.w2 = torch.nn.Parameter(rnd(3, 8, seed=13))
        self.b2 = torch.nn.Parameter(rnd(3, seed=14))

    def forward(self, x, y):
        h = ops.relu(ops.linear(x, self.w1, self.b1))
        z = A.mm(h, self.w2, False, True) + 0  # a plain aten op in the graph too
        return ops.cross_entropy(z + self.b2, y) + ops.sum_dim0(h).sum() * 0


def test_torch_compile_no_graph_breaks_and_same_bits():
    net = _Net()
    x, y = rnd(5, 6, seed=15), torch.tensor([0, 1, 2, 1, 0])
    ex = torch._dynamo.explain(net)(x, y)
    assert ex.graph_break_count == 0 and ex.graph_count == 1, ex.break_reasons
    loss = net(x, y)
    loss.backward()
    eager = [loss.detach()] + [p.grad.clone() for p in net.parameters()]
    for p in net.parameters():
        p.grad = None
    cnet = torch.compile(net, backend="aot_eager", fullgraph=True)
    loss2 = cnet(x, y)
    loss2.backward()
    comp = [loss2.detach()] + [p.grad.clone() for p in net.parameters()]
    for p, q in zip(eager, comp, strict=True):
        np.testing.assert_array_equal(bits(p), bits(q))


# ----------------------------------------------------------------------------- CUDA

def _cuda_ready() -> tuple[bool, str]:
    if not torch.cuda.is_available():
        return False, "torch has no CUDA device here"
    from anywave.runtime.targets import available_targets

    st = {s.name: s for s in available_targets()}["cuda"]
    return st.available, st.reason or "cuda target available"


@pytest.fixture
def cuda_dev():
    ok, why = _cuda_ready()
    if not ok:
        pytest.skip(f"no CUDA target: {why}")
    return torch.device("cuda")


@pytest.mark.cuda
@pytest.mark.parametrize("name,args", _opcheck_cases(), ids=lambda v: v if isinstance(v, str) else "")
def test_cuda_opcheck(cuda_dev, name, args):
    moved = tuple(a.detach().to(cuda_dev).requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor) else a
                  for a in args)
    torch.library.opcheck(getattr(A, name).default, moved)


@pytest.mark.cuda
def test_cuda_bits_match_emulator(cuda_dev):
    x, w, b = rnd(33, 20), rnd(17, 20, seed=1), rnd(17, seed=2)
    lab = torch.from_numpy(np.random.default_rng(0).integers(0, 17, 33))
    outs = []
    for dev in ("cpu", cuda_dev):
        y = ops.linear(x.to(dev), w.to(dev), b.to(dev))
        r = ops.relu(y)
        outs.append([y, r, ops.cross_entropy(r, lab.to(dev)),
                     ops.cross_entropy_backward(torch.tensor(1.0, device=dev), r, lab.to(dev)),
                     A.mm(r, x.to(dev), True, False), ops.sum_dim0(r)])
    for p, q in zip(*outs, strict=True):
        np.testing.assert_array_equal(bits(p), bits(q))


@pytest.mark.cuda
def test_cuda_device_mismatch(cuda_dev):
    with pytest.raises(ops.OpInputError, match="one device"):
        ops.linear(rnd(3, 4).to(cuda_dev), rnd(2, 4), rnd(2).to(cuda_dev))


def test_unavailable_target_is_reported():
    from anywave.runtime import targets

    targets.register_target("_never", lambda: (False, "never here (test)", ()), lambda **_: None)
    try:
        with pytest.raises(TargetUnavailable, match="never here"):
            ops.set_cpu_target("_never")
    finally:
        targets._REGISTRY.pop("_never", None)
