"""Torch tensors as kernel buffers follow torch's in-place rules (issue 31, item 13): a kernel's
write bumps autograd's version counter (a tensor saved for backward and then written makes
``backward()`` raise, as after torch's own in-place ops); a leaf that requires grad, or a view
of one, is refused while grad mode is on; tensors without plain memory (sparse, meta, MKL-DNN,
quantized, lazy conjugate views, consumed DLPack capsules) raise anywave's argument errors,
never raw torch exceptions — on the first call and on the recorded per-layout fast path."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import anywave as aw  # noqa: E402
from anywave.compiler.kernel import LaunchError  # noqa: E402
from anywave.runtime import arrays as A  # noqa: E402


@aw.kernel
def twice(x: aw.In[aw.f32], y: aw.Out[aw.f32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        y[i] = x[i] * 2.0


def _call(x, y, n=None):
    n = y.numel() if n is None else n
    twice(x, y, n, grid=(max(1, -(-n // 8)), 1, 1), workgroup=(8, 1, 1), target="emulator")


@pytest.mark.parametrize("warm", [False, True], ids=["first-call", "recorded-plan"])
def test_write_bumps_the_version_so_backward_raises(warm):
    if warm:  # a plan for this layout exists: the fast path must bump too
        _call(torch.ones(16), torch.zeros(16))
    x = torch.linspace(0.0, 1.0, 16, requires_grad=True)
    y = x.exp()  # ExpBackward saves its output y
    v0 = y._version
    with torch.no_grad():
        _call(torch.full((16,), 3.0), y.detach())  # detach() shares y's memory and version counter
    assert torch.equal(y.detach(), torch.full((16,), 6.0))  # the kernel did write y
    assert y._version > v0
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
    # the same with torch's own in-place op, the behaviour being matched
    y2 = x.exp()
    with torch.no_grad():
        y2.detach().mul_(2.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y2.sum().backward()


def test_read_only_buffers_keep_their_version():
    x, y = torch.ones(16), torch.zeros(16)
    vx, vy = x._version, y._version
    _call(x, y)
    _call(x, y)
    assert x._version == vx and y._version > vy


@pytest.mark.parametrize("warm", [False, True], ids=["first-call", "recorded-plan"])
def test_writing_a_leaf_that_requires_grad_is_refused(warm):
    if warm:
        _call(torch.ones(16), torch.zeros(16))
    x = torch.ones(16)
    cases = {"leaf": torch.zeros(16, requires_grad=True),
             "parameter": torch.nn.Parameter(torch.zeros(16)),
             "view of a leaf": torch.zeros(32, requires_grad=True)[:16]}
    for what, y in cases.items():
        with pytest.raises(LaunchError, match="argument 'y'.*requires grad") as e:
            _call(x, y)
        assert "no_grad" in str(e.value), what
        assert torch.count_nonzero(y.detach()) == 0, what  # nothing was launched
        with pytest.raises(RuntimeError, match="requires grad"):  # torch refuses its own in-place op too
            y.mul_(2.0)
        with torch.no_grad():  # as torch allows it under no_grad, so does anywave
            _call(x, y)
        assert torch.equal(y.detach(), torch.full((16,), 2.0)), what
    # a leaf that requires grad may be read
    w = torch.ones(16, requires_grad=True)
    out = torch.zeros(16)
    _call(w, out)
    assert torch.equal(out, torch.full((16,), 2.0))


def _bad_tensors() -> dict[str, object]:
    x = torch.ones(16)
    cap = torch.ones(16).__dlpack__()
    torch.from_dlpack(cap)  # a capsule is consumed by its first reader
    out = {"sparse coo": x.to_sparse(), "sparse csr": torch.ones(4, 4).to_sparse_csr(),
           "meta": torch.ones(16, device="meta"), "consumed capsule": cap,
           "quantized": torch.quantize_per_tensor(x, 0.5, 0, torch.quint8)}
    if hasattr(x, "to_mkldnn") and torch.backends.mkldnn.is_available():
        out["mkldnn"] = x.to_mkldnn()
    return out


@pytest.mark.parametrize("warm", [False, True], ids=["first-call", "recorded-plan"])
@pytest.mark.parametrize("slot", ["x", "y"])
def test_tensors_without_plain_memory_raise_argument_errors(warm, slot):
    if warm:
        _call(torch.ones(16), torch.zeros(16))
    for what, bad in _bad_tensors().items():
        args = {"x": torch.ones(16), "y": torch.zeros(16)}
        args[slot] = bad
        with pytest.raises(LaunchError, match=f"argument '{slot}'") as e:
            twice(args["x"], args["y"], 16, grid=(2, 1, 1), workgroup=(8, 1, 1), target="emulator")
        assert isinstance(e.value, aw.errors.WaveError) and isinstance(e.value, TypeError), what
        if what != "quantized":  # (a quantized tensor is refused as soon as its dtype is compared)
            assert "cannot" in str(e.value), (what, str(e.value))


def test_from_torch_and_from_dlpack_refuse_with_argument_error():
    for what, bad in _bad_tensors().items():
        fn = A.from_dlpack if what == "consumed capsule" else A.from_torch
        with pytest.raises(A.ArgumentError, match="cannot"):
            fn(bad)
    conj = torch.ones(4, dtype=torch.complex64).conj()
    with pytest.raises(A.ArgumentError, match="conjugate"):
        A.from_torch(conj)
    a = A.from_torch(torch.arange(4, dtype=torch.float32))
    assert np.array_equal(a.numpy(), np.arange(4, dtype=np.float32))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_one_element_tensor_with_stride_zero_is_a_buffer(dtype):
    # found by bench/fuzz_explore_torch.py: a (1,) view of stride 0 is contiguous, and its host
    # view raised torch's "stride(-1) must be 1" RuntimeError
    base = torch.arange(1, 5, dtype=dtype)
    t = base.as_strided((1,), (0,), 2)
    assert t.is_contiguous()
    assert A.from_torch(t).numpy().astype(np.float32).tolist() == [3.0]
    y = torch.zeros(4).as_strided((1,), (0,), 1)
    _call(torch.full((1,), 5.0), y, 1)
    assert y.tolist() == [10.0] and y._base.tolist() == [0.0, 10.0, 0.0, 0.0]
