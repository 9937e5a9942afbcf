"""The CUDA suite (tests/cuda_suite, issue 28): twelve CUDA kernel files of our own writing,
compiled unchanged by the CUDA front end and run by the host sequence of launches each case
describes (tests/cuda_suite/cases.py), bit for bit against an independent NumPy reference on
the emulator at every W and on the compiled CPU targets (OpenCL, SYCL, Vulkan, cpu).

Default tier: each case on the emulator at one W (the cases rotate through 8, 16, 32, 64) and
on OpenCL and the cpu target at their default-tier W; every other (target, W) in the sweep tier."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import anywave as aw
from tiers import DEFAULT_W

pytest.importorskip("clang.cindex", reason="libclang is not installed (pip install 'anywave[cuda-frontend]')")

sys.path.insert(0, str(Path(__file__).resolve().parent / "cuda_suite"))
from cases import CASES, HostArrays  # noqa: E402

WS = (8, 16, 32, 64)
_AVAILABLE = aw.available_targets()


class AnywaveRunner(HostArrays):
    """The suite's runner on an anywave target: NumPy arrays in place (host memory)."""

    def __init__(self, target: str, w: int) -> None:
        self.target, self.w = target, w
        self.kernels: dict[tuple[str, str], Any] = {}

    def kernel(self, file: str, name: str) -> Any:
        key = (file, name)
        if key not in self.kernels:
            self.kernels[key] = aw.cuda_kernel(Path(__file__).resolve().parent / "cuda_suite" / file, name)
        return self.kernels[key]

    def launch(self, k: Any, grid: Any, block: Any, *args: Any, shared: int = 0, **constants: Any) -> None:
        k(*args, grid=grid, workgroup=block, target=self.target, wave_width=self.w, shared_bytes=shared, **constants)


def _params() -> list[Any]:
    out = []
    for i, case in enumerate(CASES):
        home = WS[i % len(WS)]
        for w in WS:
            out.append(pytest.param(case, "emulator", w, id=f"{case.name}-emulator-W{w}",
                                    marks=() if w == home else pytest.mark.sweep))
        for t in ("opencl", "cpu", "sycl", "vulkan"):
            for w in (WS if t != "vulkan" else (8,)):
                default = t in ("opencl", "cpu") and w == DEFAULT_W[t]
                marks = [getattr(pytest.mark, t)] if t in ("opencl", "sycl", "vulkan") else []
                if not default:
                    marks.append(pytest.mark.sweep)
                if t not in _AVAILABLE:
                    marks.append(pytest.mark.skip(reason=f"target {t!r} is not available"))
                out.append(pytest.param(case, t, w, id=f"{case.name}-{t}-W{w}", marks=marks))
    return out


def _bits(a: np.ndarray) -> np.ndarray:
    if a.dtype.fields is not None:
        return a.view(np.uint8)
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


@pytest.mark.parametrize(("case", "target", "w"), _params())
def test_suite_kernel(case, target, w):
    rng = np.random.default_rng(sum(map(ord, case.name)))
    inputs = case.make(rng, "test")
    r = AnywaveRunner(target, w)
    got = case.execute(r, inputs)
    exp = case.reference(inputs, w)
    assert set(got) == set(exp)
    for name, e in exp.items():
        g = r.numpy(got[name])
        assert g.dtype == e.dtype and g.shape == e.shape, name
        same = _bits(np.ascontiguousarray(g)) == _bits(np.ascontiguousarray(e))
        assert same.all(), f"{case.name}: output {name!r} differs in {int((~same).sum())} of {same.size} words"


def test_suite_covers_the_issue_classes():
    """At least twelve kernels, the classes issue 28 names among them."""
    names = {c.name for c in CASES}
    assert len(CASES) >= 12
    for need in ("stencil2d", "nw_wavefront", "bfs", "reduce_f32", "scan", "transpose", "matvec", "kmeans", "lu",
                 "histogram", "bitonic"):
        assert need in names
    assert any("<" in line for c in CASES for line in c.path.read_text().splitlines() if "template" in line)
