"""anywave.torch.custom_op on ``torch.library.Library.define/impl`` (issue 24 item 4): the op is
the dispatcher's own OpOverload (no Python autograd kernel in front of a call without
backward=), a call that needs a gradient the op cannot give is refused, a formula registered
later makes it differentiable, and bad names are refused. Expectations are NumPy/torch
arithmetic on the inputs."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import anywave as aw  # noqa: E402
from anywave.torch import CustomOpError, custom_op  # noqa: E402


@aw.kernel
def twice(x: aw.In[aw.f32], out: aw.Out[aw.f32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        out[i] = x[i] + x[i]


def _n(x, **_):
    return x.numel()


TWICE = custom_op("awlibtest::twice", twice, out_shape=lambda x, **_: x.shape, scalars={"n": _n}, workgroup=32)


def test_the_op_is_the_dispatchers_overload():
    assert TWICE is torch.ops.awlibtest.twice.default
    assert isinstance(TWICE, torch._ops.OpOverload) and TWICE.kernel is twice
    # no Autograd kernel of ours: the dispatcher goes from C++ straight to the CPU kernel
    assert not torch._C._dispatch_has_kernel_for_dispatch_key("awlibtest::twice", "Autograd")
    assert torch._C._dispatch_has_kernel_for_dispatch_key("awlibtest::twice", "CPU")
    x = torch.arange(70, dtype=torch.float32)
    np.testing.assert_array_equal(TWICE(x).numpy(), 2 * np.arange(70, dtype=np.float32))
    torch.library.opcheck(TWICE, (torch.randn(33),))


def test_a_gradient_it_cannot_give_is_refused_then_given():
    op = custom_op("awlibtest::twice_g", twice, out_shape=lambda x, **_: x.shape, scalars={"n": _n}, workgroup=32)
    x = torch.randn(40, requires_grad=True)
    with pytest.raises(CustomOpError, match="input 'x' requires grad, but the op was made without backward="):
        op(x)
    with torch.no_grad():
        np.testing.assert_array_equal(op(x).numpy(), (x.detach() * 2).numpy())
    np.testing.assert_array_equal(op(x.detach()).numpy(), (x.detach() * 2).numpy())
    op.register_autograd(lambda ctx, g: 2 * g)
    op(x).sum().backward()
    assert torch.equal(x.grad, torch.full((40,), 2.0))


def test_bad_names_are_refused():
    for bad in ("noseparator", "two::many::parts", "::op", "ns::"):
        with pytest.raises(CustomOpError, match="write 'namespace::op'"):
            custom_op(bad, twice, out_shape=lambda x, **_: x.shape, scalars={"n": _n})
