"""Training an MLP on digits with WAVE kernels: per-step losses and final weights are
bit-identical on every CPU target (the emulator at W = 8, 16, 32, 64; OpenCL and SYCL when
their runtimes are present) and close to plain PyTorch; the demo entry point and plot work.
A short run (few steps) keeps CI fast; the demo runs the full 200 steps."""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("sklearn")

from anywave.runtime.targets import available_targets  # noqa: E402
from anywave.torch import ops  # noqa: E402
from anywave.torch import train as T  # noqa: E402

CFG = T.TrainConfig(steps=20, batch=64, lr=0.5, seed=0)


@pytest.fixture(scope="module", autouse=True)
def _cache_dir(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("ANYWAVE_CACHE_DIR", str(tmp_path_factory.mktemp("awcache")))
    yield
    mp.undo()


@pytest.fixture(scope="module")
def data():
    return T.load_data(CFG.seed)


@pytest.fixture(scope="module")
def baseline(data):
    return T.train_on_cpu_target(data, CFG, "emulator", wave_width=32)


@pytest.fixture(scope="module")
def reference(data):
    return T.train(data, CFG, label="pytorch", reference=True)


def test_data_and_init_are_deterministic(data):
    assert data.train_x.shape == (1438, 64) and data.test_x.shape == (359, 64)
    assert data.train_x.dtype == np.float32 and 0.0 <= data.train_x.min() and data.train_x.max() <= 1.0
    assert sorted(set(data.train_y.tolist())) == list(range(10))
    p, q = T.init_params(0), T.init_params(0)
    assert {k: v.shape for k, v in p.items()} == {"w1": (32, 64), "b1": (32,), "w2": (10, 32), "b2": (10,)}
    assert all(np.array_equal(p[k], q[k]) for k in p)
    assert np.abs(p["w1"]).max() <= 1 / 8 and np.abs(p["w2"]).max() <= 1 / np.sqrt(32)
    idx = T.batch_indices(len(data.train_y), T.TrainConfig(steps=30, batch=64))
    assert idx.shape == (30, 64)
    # each epoch is a permutation: the first 22 batches (1408 samples) hold no repeats
    assert len(set(idx[:22].ravel().tolist())) == 22 * 64


def test_loss_starts_near_log10_and_falls(baseline):
    assert baseline.losses.dtype == np.float32 and baseline.losses.shape == (CFG.steps,)
    assert abs(float(baseline.losses[0]) - np.log(10)) < 0.1
    assert baseline.losses[-1] < baseline.losses[0]


@pytest.mark.parametrize("w", [8, 16, 64])
def test_emulator_bit_identical_at_every_wave_width(data, baseline, w):
    r = T.train_on_cpu_target(data, CFG, "emulator", wave_width=w)
    assert r.info["wave_width"] == w
    T.assert_identical([baseline, r])


def _target_or_skip(name: str):
    st = {s.name: s for s in available_targets()}.get(name)
    if st is None:
        pytest.skip(f"{name}: no such target registered (runtime module absent)")
    if not st.available:
        pytest.skip(f"{name}: {st.reason}")


# SYCL in the sweep tier (its ~15 kernel builds take ~20 s here): the training's kernels are
# the emulator's bits on SYCL there, and on OpenCL in the default tier
@pytest.mark.parametrize("name", [pytest.param("opencl", marks=pytest.mark.opencl),
                                  pytest.param("sycl", marks=[pytest.mark.sycl, pytest.mark.sweep])])
def test_other_cpu_targets_bit_identical(data, baseline, name):
    _target_or_skip(name)
    r = T.train_on_cpu_target(data, CFG, name)
    T.assert_identical([baseline, r])


def test_close_to_plain_pytorch(baseline, reference):
    # PyTorch sums the matmuls in other (blocked, vectorised) orders and uses other exp/log
    # approximations: a few float32 ulp per op, growing slowly with the steps
    d = T.max_abs_diff(baseline, reference)
    assert d["losses"] <= 1e-5, d
    assert max(d[n] for n in T.PARAM_NAMES) <= 1e-5, d


def test_mismatch_is_reported(baseline):
    other = T.RunResult("tampered", baseline.losses.copy(), {k: v.copy() for k, v in baseline.params.items()},
                        0.0, 0.0)
    other.losses[3] = np.nextafter(other.losses[3], np.float32(10))
    with pytest.raises(T.TrainingMismatch, match="first at step 3"):
        T.assert_identical([baseline, other])
    other.losses[3] = baseline.losses[3]
    other.params["b2"][7] = np.nextafter(other.params["b2"][7], np.float32(10))
    with pytest.raises(T.TrainingMismatch, match="final b2 .* flat index 7"):
        T.assert_identical([baseline, other])


def test_compiled_training_same_bits(data, baseline):
    with ops.cpu_target("emulator", wave_width=16):
        r = T.train(data, CFG, label="compiled", compile_backend="aot_eager")
    T.assert_identical([baseline, r])


def test_cli_entry_writes_plot_and_json(tmp_path, capsys):
    png, js = tmp_path / "curves.png", tmp_path / "s.json"
    rc = T.main(["--steps", "3", "--widths", "8,64", "--targets", "none", "--plot", str(png), "--json", str(js)])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "bit-identical" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    s = json.loads(js.read_text())
    assert set(s["targets"]) == {"emulator W=8", "emulator W=64"}
    assert s["targets"]["emulator W=8"]["losses"] == s["targets"]["emulator W=64"]["losses"]
    assert len(s["pytorch"]["losses"]) == 3 and s["commit"] and s["date"]


def test_cli_bad_arguments(capsys):
    assert T.main(["--widths", "x"]) == 1
    assert "--widths" in capsys.readouterr().err
    assert T.main(["--steps", "1", "--widths", "32", "--targets", "nosuch"]) == 1
    assert "not available" in capsys.readouterr().err


def test_cli_provider(tmp_path, capsys):
    import argparse

    from anywave.torch import cli_train

    parser = argparse.ArgumentParser(prog="anywave")
    sub = parser.add_subparsers(dest="command")
    cli_train.add_parser(sub)
    args = parser.parse_args(["train", "--steps", "2", "--widths", "16", "--targets", "none",
                              "--plot", str(tmp_path / "p.png")])
    assert cli_train.run(args) == 0
    assert "bit-identical: per-step losses and final weights of 1 runs" in capsys.readouterr().out
    assert (tmp_path / "p.png").stat().st_size > 1000


@pytest.mark.cuda
def test_cuda_training_bit_identical(data, baseline):
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device here")
    st = {s.name: s for s in available_targets()}["cuda"]
    if not st.available:
        pytest.skip(f"cuda target: {st.reason}")
    r = T.train(data, CFG, label="cuda", device="cuda")
    T.assert_identical([baseline, r])
