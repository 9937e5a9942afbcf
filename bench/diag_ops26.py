"""Diagnostic: where rotary / SwiGLU differ between CUDA and the emulator (W=32)."""
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
import numpy as np
import torch
from anywave.torch import gpt as G, ops

g = torch.Generator().manual_seed(3)
SPECIALS = [float("inf"), float("-inf"), float("nan"), -0.0, 1e-40, -3e38]

def run(dev, xs, gy, fn):
    ins = [x.detach().clone().to(dev).requires_grad_() for x in xs]
    y = fn(*ins)
    y.backward(gy.to(dev))
    return [t.detach().cpu().numpy().view(np.uint32).ravel() for t in [y] + [i.grad for i in ins]]

cases = {"rotary_offset7": ((3, 5, 37, 32), 1, lambda x: G.rotary(x, 7)),
         "rotary_d2": ((1, 1, 129, 2), 1, lambda x: G.rotary(x, 0)),
         "swiglu": ((100003,), 2, lambda a, b: G.swiglu(a, b))}
for special in (False, True):
    for name, (shape, n, fn) in cases.items():
        xs = [torch.randn(shape, generator=g) * 4 for _ in range(n)]
        if special:
            for x in xs:
                x.reshape(-1)[:6] = torch.tensor(SPECIALS)
        gy = torch.randn(shape, generator=g)
        c = run("cuda", xs, gy, fn)
        with ops.cpu_target("emulator", wave_width=32):
            e = run("cpu", xs, gy, fn)
        for lab, a, b in zip(["y"] + [f"d{i}" for i in range(n)], c, e):
            bad = np.nonzero(a != b)[0]
            print(name, "special" if special else "plain", lab, "mismatch", len(bad), "of", a.size,
                  [(int(i), [float(x.reshape(-1)[i]) for x in xs], hex(a[i]), hex(b[i])) for i in bad[:5]])
