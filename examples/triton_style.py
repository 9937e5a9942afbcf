"""Triton-style: a user kernel inside a PyTorch model, under ``torch.compile(fullgraph=True)``.

The kernel is a fused ``bias + SiLU`` (``y = (x + b) * sigmoid(x + b)``) written in the kernel
language and turned into a PyTorch operator by ``anywave.torch.custom_op``: schema and fake
implementation from the kernel's ABI and a shape rule, autograd from a Python backward that
calls a second anywave op. The model trains a few SGD steps on CPU tensors (the CPU target) or
CUDA tensors (the GPU, PyTorch's current stream, zero-copy), compiled with no graph breaks, and
is compared with the same model written with ``torch.nn.functional.silu``.

    python examples/triton_style.py                    # CUDA if present, else CPU
    python examples/triton_style.py --device cpu --backend aot_eager
"""

from __future__ import annotations

import argparse

import torch

import anywave as aw
from anywave.torch import custom_op


@aw.kernel
def bias_silu(x: aw.In[aw.f32], b: aw.In[aw.f32], y: aw.Out[aw.f32], rows: aw.i32, cols: aw.i32):
    i = aw.global_id(0)
    if i < rows * cols:
        v = x[i] + b[i % cols]
        y[i] = v / (1.0 + aw.exp(-v))


@aw.kernel
def bias_silu_grad(g: aw.In[aw.f32], x: aw.In[aw.f32], b: aw.In[aw.f32], dx: aw.Out[aw.f32],
                   rows: aw.i32, cols: aw.i32):
    # d/dv [v * s(v)] = s(v) * (1 + v * (1 - s(v)))
    i = aw.global_id(0)
    if i < rows * cols:
        v = x[i] + b[i % cols]
        s = 1.0 / (1.0 + aw.exp(-v))
        dx[i] = g[i] * (s * (1.0 + v * (1.0 - s)))


shape = {"rows": lambda x, **_: x.shape[0], "cols": lambda x, **_: x.shape[1]}
silu_grad = custom_op("examples::bias_silu_grad", bias_silu_grad, out_shape=lambda x, **_: x.shape, scalars=shape)


def _setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0], inputs[1])


def _backward(ctx, grad):
    x, b = ctx.saved_tensors
    dx = silu_grad(grad.contiguous(), x, b)
    return dx, dx.sum(0)


fused = custom_op("examples::bias_silu", bias_silu, out_shape=lambda x, **_: x.shape, scalars=shape,
                  backward=_backward, setup_context=_setup)


class MLP(torch.nn.Module):
    def __init__(self, fused_act: bool) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.l1 = torch.nn.Linear(16, 64, bias=False)
        self.b1 = torch.nn.Parameter(torch.randn(64) * 0.1)
        self.l2 = torch.nn.Linear(64, 4)
        self.fused_act = fused_act

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.l1(x)
        h = fused(h, self.b1) if self.fused_act else torch.nn.functional.silu(h + self.b1)
        return self.l2(h)


def train(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, steps: int) -> list[float]:
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return losses


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--backend", default="inductor", help="torch.compile backend (inductor, aot_eager ...)")
    ap.add_argument("--steps", type=int, default=5)
    ns = ap.parse_args(argv)
    dev = torch.device(ns.device)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(256, 16, generator=g).to(dev)
    y = torch.randint(0, 4, (256,), generator=g).to(dev)
    ours = MLP(True).to(dev)
    explain = torch._dynamo.explain(ours)(x)
    print(f"graphs: {explain.graph_count}, graph breaks: {explain.graph_break_count}")
    compiled = torch.compile(ours, backend=ns.backend, fullgraph=True)
    got = train(compiled, x, y, ns.steps)
    want = train(MLP(False).to(dev), x, y, ns.steps)
    print("anywave op :", " ".join(f"{v:.5f}" for v in got))
    print("torch silu :", " ".join(f"{v:.5f}" for v in want))
    close = all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(got, want, strict=True))
    print(f"device {dev}, backend {ns.backend}: losses agree to 1e-4: {close}")
    return 0 if close and explain.graph_break_count == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
