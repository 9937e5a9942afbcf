"""Self-checks of the ``torch.ops.anywave`` ops on any device: ``torch.library.opcheck`` of
every op and a graph-break count under ``torch._dynamo.explain`` (used by
``bench/torch_train_gpu.py`` on CUDA; the tests run their own copies on CPU)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from anywave.torch import ops

A = torch.ops.anywave


def _t(shape: tuple[int, ...], seed: int, device: torch.device, grad: bool = False) -> torch.Tensor:
    g = np.random.default_rng(seed)
    t = torch.tensor(g.standard_normal(shape).astype(np.float32), device=device)
    return t.requires_grad_(grad)


def opcheck_cases(device: str | torch.device = "cpu") -> list[tuple[str, tuple[Any, ...]]]:
    """``(op name, args)`` covering every op (mm with all four transpose flags), tensors on
    ``device``; differentiable inputs require grad."""
    d = torch.device(device)
    lab = torch.tensor([0, 3, 1, 2, 3], dtype=torch.int64, device=d)
    return [
        ("mm", (_t((5, 7), 0, d, True), _t((7, 3), 1, d, True), False, False)),
        ("mm", (_t((7, 5), 0, d, True), _t((7, 3), 1, d, True), True, False)),
        ("mm", (_t((5, 7), 0, d, True), _t((3, 7), 1, d, True), False, True)),
        ("mm", (_t((7, 5), 0, d, True), _t((3, 7), 1, d, True), True, True)),
        ("linear", (_t((5, 7), 0, d, True), _t((3, 7), 1, d, True), _t((3,), 2, d, True))),
        ("sum_dim0", (_t((9, 4), 0, d, True),)),
        ("relu", (_t((3, 11), 0, d, True),)),
        ("relu_backward", (_t((3, 11), 0, d), _t((3, 11), 1, d))),
        ("cross_entropy", (_t((5, 4), 0, d, True), lab)),
        ("cross_entropy_backward", (torch.tensor(1.5, device=d), _t((5, 4), 0, d), lab)),
        ("sgd_", (_t((6, 3), 0, d), _t((6, 3), 1, d), 0.25)),
    ]


def opcheck_all(device: str | torch.device = "cpu") -> dict[str, str]:
    """Run ``torch.library.opcheck`` on every case of :func:`opcheck_cases`; returns
    ``{"name[i]": "ok" | "<error>"}`` (never raises for a failing check)."""
    out: dict[str, str] = {}
    for i, (name, args) in enumerate(opcheck_cases(device)):
        key = f"{name}[{i}]"
        try:
            torch.library.opcheck(getattr(A, name).default, args)
            out[key] = "ok"
        except Exception as e:  # noqa: BLE001 - reported, not raised
            out[key] = f"{type(e).__name__}: {e}"[:500]
    return out


def graph_breaks(model: torch.nn.Module, *inputs: Any) -> dict[str, Any]:
    """``torch._dynamo.explain(model)(*inputs)``: graph count, break count, reasons."""
    torch._dynamo.reset()
    ex = torch._dynamo.explain(model)(*inputs)
    return {"graph_count": ex.graph_count, "graph_break_count": ex.graph_break_count,
            "break_reasons": [str(r) for r in ex.break_reasons]}


__all__ = ["graph_breaks", "opcheck_all", "opcheck_cases", "ops"]
