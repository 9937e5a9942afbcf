"""``anywave demo``: the real-data pipeline (quick subset) runs in process, passes its own
checks, writes the PNG, and fails (exit 1) when a kernel's output is wrong. Skipped when the
demo extra (scikit-image, scikit-learn, pillow, rich) is not installed."""

from __future__ import annotations

import json

import numpy as np
import pytest

import tiers
from anywave import demo

_missing = [m for m in demo.missing_extras() if m != "rich"]
pytestmark = pytest.mark.skipif(bool(_missing), reason=f"demo extra not installed (missing: {_missing}); "
                                "pip install '.[demo]'")


@pytest.fixture(autouse=True)
def _cache(monkeypatch, tmp_path_factory):
    monkeypatch.setenv("ANYWAVE_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "aw-cache"))


# the default tier: the quick demo at one W on every available target but tiers.DEMO_SLOW_TARGETS;
# the slow tier: the quick demo as a user runs it (every available target, W = 8 and 64)
@pytest.mark.parametrize("how", [
    "default",
    pytest.param("every-target", marks=pytest.mark.slow),
])
def test_quick_demo_passes_and_writes_png(tmp_path, capsys, how):
    from PIL import Image

    from anywave.cli import main
    from anywave.jit.targets import available_targets

    if how == "default":
        targets, widths = tiers.demo_targets(), [8]
        extra = ["--wave-width", "8", *(a for t in targets for a in ("--target", t))]
    else:
        targets, widths, extra = available_targets(), [8, 64], []
    assert main(["demo", "--quick", "--out", str(tmp_path), "--no-progress", *extra]) == 0
    out = capsys.readouterr().out
    assert "all checks passed" in out and "camera_blur_edges.png" in out
    png = Image.open(tmp_path / "camera_blur_edges.png")
    assert png.mode == "L" and png.size == (3 * 128 + 16, 128 + 24)
    res = json.loads((tmp_path / "results.json").read_text())
    assert res["problems"] == [] and res["wave_widths"] == widths and res["targets"] == targets
    keys = {r["stage"] for r in res["runs"]}
    assert {"blur", "edges", "histogram", "sort", "logits", "softmax"} <= keys
    assert all(r["ok"] for r in res["runs"])
    # the panels are the original and the kernels' blurred image (independent check here)
    full = np.asarray(png)
    strip, a = full[:24], full[24:]
    for x0 in (0, 136, 272):  # every panel has a label: dark text pixels in the strip above it
        assert (strip[:, x0:x0 + 128] < 128).sum() > 20
    data = demo.load_real_data(quick=True)
    assert np.array_equal(a[:, :128], data.image)
    blur = np.clip(np.rint(demo.build_stages(data, demo.train_mlp(data.train_x, data.train_y))[1]["blur"]),
                   0, 255).astype(np.uint8)
    assert np.array_equal(a[:, 136:264], blur)


def test_classifier_is_accurate():
    data = demo.load_real_data(quick=True)
    w = demo.train_mlp(data.train_x, data.train_y, seed=0)
    h = np.maximum(demo._layer_norm64(data.test_x) @ w["w1"] + w["b1"], 0)
    acc = ((h @ w["w2"] + w["b2"]).argmax(1) == data.test_y).mean()
    assert acc > 0.9


def test_a_wrong_kernel_output_fails_the_demo(tmp_path, monkeypatch, capsys):
    import anywave.kernels as K

    real = K.relu

    def off_by_one_ulp(x, **kw):
        y = real(x, **kw)
        y[5] = np.nextafter(y[5], np.float32(np.inf))
        return y

    monkeypatch.setattr(K, "relu", off_by_one_ulp)
    # the emulator alone: the check under test is the demo's own (a run on more targets only adds builds)
    rc = demo.main(widths=(16,), quick=True, out_dir=str(tmp_path), progress=False, targets=["emulator"])
    assert rc == 1
    assert "relu on emulator W=16" in capsys.readouterr().out


def test_a_target_not_available_is_refused(tmp_path, capsys):
    from anywave.cli import main

    assert main(["demo", "--quick", "--out", str(tmp_path), "--no-progress", "--target", "nosuch"]) == 1
    assert "target(s) not available here: nosuch; available: " in capsys.readouterr().out
