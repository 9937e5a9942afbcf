"""The end-to-end scripts of examples/ (issue 12) on the CPU targets: the Warp-style simulation
on device arrays (bit-identical to NumPy) and the Triton-style model with a user kernel as a
torch op under torch.compile(fullgraph=True) (no graph breaks; losses as torch's own SiLU)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from anywave.jit.targets import available_targets

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("target", [t for t in ("emulator", "opencl", "sycl") if t in available_targets()])
def test_warp_style(target, capsys):
    n = 2000 if target == "emulator" else 20_000
    assert load("warp_style").main(["--target", target, "--n", str(n), "--steps", "12"]) == 0
    assert "bit-identical to NumPy: True" in capsys.readouterr().out


def test_triton_style_cpu(capsys):
    pytest.importorskip("torch")
    assert load("triton_style").main(["--device", "cpu", "--backend", "aot_eager", "--steps", "2"]) == 0
    out = capsys.readouterr().out
    assert "graph breaks: 0" in out and "agree to 1e-4: True" in out
