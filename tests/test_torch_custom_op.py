"""anywave.torch.custom_op (issue 12): a user's @aw.kernel as a torch.library op on CPU tensors
(schema from the ABI, fake implementation, autograd, opcheck, torch.compile, errors). CUDA:
tests/test_arrays_cuda.py. Expectations are NumPy arithmetic on the inputs."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import anywave as aw  # noqa: E402
from anywave.torch import CustomOpError, custom_op  # noqa: E402


@aw.kernel
def axpy(x: aw.In[aw.f32], y: aw.In[aw.f32], out: aw.Out[aw.f32], a: aw.f32, n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        out[i] = a * x[i] + y[i]


@aw.kernel
def split(x: aw.In[aw.i32], lo: aw.Out[aw.i32], hi: aw.Out[aw.i32], acc: aw.Buffer[aw.i32], n: aw.i32, *,
          shift: int = 16):
    i = aw.global_id(0)
    if i < n:
        lo[i] = x[i] & ((1 << shift) - 1)
        hi[i] = x[i] >> shift
        acc[i] += 1


def _n(x, **_):
    return x.numel()


AXPY = custom_op("awtest::axpy", axpy, out_shape=lambda x, **_: x.shape, scalars={"n": _n},
                 backward=lambda ctx, g: (g * ctx.a, g, None),
                 setup_context=lambda ctx, inputs, output: setattr(ctx, "a", inputs[2]))
SPLIT = custom_op("awtest::split", split, out_shape={"lo": lambda x, **_: x.shape, "hi": lambda x, **_: x.shape},
                  scalars={"n": _n}, workgroup=32)


def test_schema_from_the_abi():
    assert AXPY.schema == "(Tensor x, Tensor y, float a) -> Tensor"
    assert SPLIT.schema == "(Tensor x, Tensor(a0!) acc, int shift=16) -> (Tensor, Tensor)"
    assert torch.ops.awtest.axpy.default is not None


def test_values_outputs_and_mutation():
    g = np.random.default_rng(0)
    x = (g.integers(-1024, 1024, 300) / 1024).astype(np.float32)
    y = (g.integers(-1024, 1024, 300) / 1024).astype(np.float32)
    z = AXPY(torch.from_numpy(x), torch.from_numpy(y), 0.5)
    np.testing.assert_array_equal(z.numpy(), (0.5 * x.astype(np.float64) + y).astype(np.float32))
    v = g.integers(0, 2**31 - 1, 77, dtype=np.int32)
    acc = torch.zeros(77, dtype=torch.int32)
    lo, hi = SPLIT(torch.from_numpy(v), acc, 8)
    np.testing.assert_array_equal(lo.numpy(), v & 0xFF)
    np.testing.assert_array_equal(hi.numpy(), v >> 8)
    lo, hi = torch.ops.awtest.split(torch.from_numpy(v), acc)  # the default constant
    np.testing.assert_array_equal(hi.numpy(), v >> 16)
    np.testing.assert_array_equal(acc.numpy(), np.full(77, 2))  # updated in place, twice


def test_opcheck_autograd_and_compile():
    x = torch.randn(45, requires_grad=True)
    y = torch.randn(45, requires_grad=True)
    torch.library.opcheck(AXPY, (x, y, 1.5))
    torch.library.opcheck(SPLIT, (torch.arange(40, dtype=torch.int32), torch.zeros(40, dtype=torch.int32), 4))
    AXPY(x, y, 1.5).sum().backward()
    assert torch.equal(x.grad, torch.full((45,), 1.5)) and torch.equal(y.grad, torch.ones(45))

    def f(a, b):
        return torch.relu(AXPY(a, b, 2.0)) + 1

    ex = torch._dynamo.explain(f)(torch.randn(9), torch.randn(9))
    assert ex.graph_break_count == 0 and ex.graph_count == 1
    a, b = torch.randn(33), torch.randn(33)
    torch.testing.assert_close(torch.compile(f, backend="aot_eager", fullgraph=True)(a, b), f(a, b), rtol=0, atol=0)


def test_non_contiguous_inputs_and_empty():
    x = torch.randn(8, 8)[:, ::2]
    y = torch.randn(8, 4)
    want = (0.5 * x.contiguous().numpy().astype(np.float64) + y.numpy()).astype(np.float32)
    np.testing.assert_array_equal(AXPY(x, y, 0.5).numpy(), want)
    assert AXPY(torch.empty(0), torch.empty(0), 1.0).shape == (0,)


def test_errors():
    with pytest.raises(CustomOpError, match=r"scalars= names \['m'\]"):
        custom_op("awtest::bad1", axpy, out_shape=lambda x, **_: x.shape, scalars={"m": _n})
    with pytest.raises(CustomOpError, match=r"no out_shape rule for the outputs \['out'\]"):
        custom_op("awtest::bad2", axpy)
    with pytest.raises(CustomOpError, match="has 2 outputs"):
        custom_op("awtest::bad3", split, out_shape=lambda x, **_: x.shape)
    with pytest.raises(CustomOpError, match="one device; got x on cpu, y on meta"):
        AXPY(torch.zeros(4), torch.zeros(4, device="meta"), 1.0)
    with pytest.raises(CustomOpError, match="acc is updated in place and must be contiguous"):
        SPLIT(torch.zeros(8, dtype=torch.int32), torch.zeros(8, 2, dtype=torch.int32)[:, 0], 4)
    with pytest.raises(aw.LaunchError, match="expected dtype float32, got float64"):
        AXPY(torch.zeros(4, dtype=torch.float64), torch.zeros(4, dtype=torch.float64), 1.0)


def test_library_validate_hooks_read_metadata_only():
    # on CUDA, opcheck's dynamic-shape test gave fake tensors to the validate hooks, and a
    # data_ptr() there failed ("Cannot call numel() on tensor with symbolic sizes")
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

    from anywave.torch import ops

    mode = FakeTensorMode()

    def fk(*shape):
        return FakeTensor(mode, torch.empty(*shape, device="meta"), torch.device("cuda", 0))

    a = fk(5, 7)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*data pointer of FakeTensor.*")
        ops._check_mm(a, fk(7, 3), False, False)
        ops._check_linear(a, fk(3, 7), fk(3))
        ops._check_sum_dim0(a)
        ops._check_relu(a)
        ops._check_relu_backward(a, a)
        ops._check_sgd(a, a, 0.1)
