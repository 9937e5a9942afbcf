"""The GPT of issue 26 (:mod:`anywave.models.gpt`): its loss and gradients against the same model
in plain float64 PyTorch, bit-identical training on every CPU target and wave width (one pair in
the default tier, the rest ``sweep``/``slow``), KV-cache generation against recomputation without
a cache, batch-invariant decoding, checkpoints, and ``anywave train --model gpt``; the same for the
configuration options (rotary positions, SwiGLU, RMSNorm) against TorchGPT's float64 math."""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from anywave.models import gpt as M  # noqa: E402
from anywave.torch import ops  # noqa: E402
from tiers import DEFAULT_W  # noqa: E402

TINY = M.CONFIGS["tiny"]
#: the default tier's identity run: the tiny model (2 layers, width 64) on 16-token windows
QUICK = M.TrainSettings(steps=2, batch=1, context=16)
#: the issue's identity run: the tiny model at its full context
FULL = M.TrainSettings(steps=3, batch=2)
MICRO = M.GPTConfig(1, 16, 2, 24)


def _run(st: M.TrainSettings, target: str, w: int) -> tuple[list[float], dict[str, np.ndarray]]:
    with ops.cpu_target(target, wave_width=w):
        r = M.train(TINY, st)
    return r.losses, r.model.numpy_params()


def _same(a, b) -> None:
    la, pa = a
    lb, pb = b
    assert [v.hex() for v in la] == [v.hex() for v in lb]
    for n in pa:
        assert np.array_equal(pa[n].view(np.uint32), pb[n].view(np.uint32)), n


@pytest.fixture(scope="module")
def quick_ref():
    return _run(QUICK, "emulator", 32)


def test_loss_and_gradients_against_float64_torch():
    _against_float64_torch(MICRO, M.init_params(MICRO, 3))


def test_identity_default_pair(quick_ref):
    """The default tier's one pair: emulator W=8 against the emulator at W=32."""
    _same(_run(QUICK, "emulator", 8), quick_ref)


@pytest.mark.sweep
@pytest.mark.parametrize("target,w", [("emulator", 16), ("emulator", 64), ("opencl", DEFAULT_W["opencl"]),
                                      ("sycl", DEFAULT_W["sycl"]), ("vulkan", DEFAULT_W["vulkan"])])
def test_identity_sweep(quick_ref, target, w):
    if target not in ops.cpu_target_names():
        pytest.skip(f"{target} is not available here")
    _same(_run(QUICK, target, w), quick_ref)


@pytest.mark.slow
def test_identity_full_tiny_every_cpu_target():
    """Item 4: the tiny configuration (2 layers, width 64, context 64), 3 steps of batch 2: the same
    losses and final weights on the emulator at W = 8, 16, 32, 64 and on OpenCL, SYCL, Vulkan."""
    ref = _run(FULL, "emulator", 32)
    for w in (8, 16, 64):
        _same(_run(FULL, "emulator", w), ref)
    for name in ("opencl", "sycl", "vulkan"):
        if name in ops.cpu_target_names():
            _same(_run(FULL, name, DEFAULT_W[name]), ref)


@pytest.mark.slow
def test_loss_falls_on_the_small_configuration():
    r = M.train("small", M.TrainSettings(steps=30, batch=2, context=64, lr=3e-3))
    assert np.mean(r.losses[-5:]) < r.losses[0] - 1.0


def _greedy_without_cache(model: M.GPT, prompt: list[int], n: int) -> list[int]:
    seq = list(prompt)
    with torch.no_grad():
        for _ in range(n):
            logits = model(torch.tensor([seq]))
            seq.append(int(torch.argmax(logits[0, -1])))
    return seq[len(prompt):]


def test_generate_kv_cache_and_batch_invariance():
    model = M.GPT(MICRO, M.init_params(MICRO, 1))
    text = M.stdlib_text(1 << 14)
    target = list(text[40:49])
    others = [list(text[100:101]), list(text[200:214]), list(text[300:305])]
    alone = M.generate(model, [target], 5)[0]
    # the decode form over one chunk is the attention op's sequence, the other ops are per row:
    # greedy decoding with the cache picks what recomputing the whole sequence picks
    assert alone == _greedy_without_cache(model, target, 5)
    batch = M.generate(model, others[:2] + [target] + others[2:], 5)
    assert batch[2] == alone
    s_alone = M.generate(model, [target], 5, temperature=0.8, top_k=20, seed=[11])[0]
    s_batch = M.generate(model, [others[0], target], 5, temperature=0.8, top_k=20, seed=[5, 11])[1]
    assert s_alone == s_batch
    with pytest.raises(ValueError, match="prompt"):
        M.generate(model, [[]], 2)
    with pytest.raises(ValueError, match="prompt"):
        M.generate(model, [target], MICRO.context)


def test_checkpoint_resume_is_bit_exact(tmp_path):
    st1 = M.TrainSettings(steps=1, batch=1, context=8)
    text = M.stdlib_text(1 << 14)
    two = M.train(MICRO, M.TrainSettings(steps=2, batch=1, context=8), text=text)
    one = M.train(MICRO, st1, text=text)
    path = M.save_checkpoint(tmp_path / "c.npz", one.model, one.optimizer)
    model, opt = M.load_checkpoint(path)
    more = M.train(MICRO, st1, text=text, model=model, opt=opt)
    assert one.losses + more.losses == two.losses
    for n in model.names:
        assert torch.equal(model.param(n), two.model.param(n)), n
    (tmp_path / "bad.npz").write_bytes(b"not a checkpoint")
    with pytest.raises(Exception, match="not a GPT checkpoint"):
        M.load_checkpoint(tmp_path / "bad.npz")


def test_adamw_scalars_from_a_tensor_take_the_same_steps():
    """train_step with ``hyper`` (AdamW's scalars read from a tensor, as a captured CUDA graph
    needs) gives the losses and weights of the scalar path, bit for bit, over warm-up steps."""
    from anywave.torch.gpt import adamw_hyper

    st = M.TrainSettings(steps=3, batch=2, context=8, warmup=2, weight_decay=0.1)
    data = np.frombuffer(M.stdlib_text(1 << 14), np.uint8)
    xs, ys = M.batches(data, 3, 2, 8, 0)
    runs = []
    for use_hyper in (False, True):
        model = M.GPT(MICRO, M.init_params(MICRO, 0), "exact")
        opt = M._opt_state(model)
        losses = []
        for i in range(3):
            hyper = None
            if use_hyper:
                t = opt["step"] + 1
                hyper = torch.from_numpy(adamw_hyper(M.step_lr(st, t), st.betas, st.weight_decay, t))
            loss, _ = M.train_step(model, torch.from_numpy(xs[i]), torch.from_numpy(ys[i]), st, opt, hyper=hyper)
            losses.append(float(loss))
        runs.append((losses, model.numpy_params()))
    assert runs[0][0] == runs[1][0]
    assert all(np.array_equal(runs[0][1][n].view(np.uint32), runs[1][1][n].view(np.uint32)) for n in runs[0][1])
    assert runs[0][0][-1] != runs[0][0][0]  # the weights moved
    with pytest.raises(ops.OpInputError, match="step >= 1"):
        adamw_hyper(1e-3, (0.9, 0.95), 0.0, 0)
    p = torch.zeros(4)
    with pytest.raises(ops.OpInputError, match="hyper must hold"):
        torch.ops.anywave.gpt_adamw_hyper_(p, p.clone(), p.clone(), p.clone(), torch.zeros(3), 0.9, 0.95, 1e-8, True)
    with pytest.raises(ValueError, match="on CUDA"):
        M.CapturedStep(M.GPT(MICRO, M.init_params(MICRO, 0), "exact"), st, {"step": 0})
    with pytest.raises(ValueError, match="cuda_graph=True needs device='cuda'"):
        M.train(MICRO, st, cuda_graph=True)


def test_cli_cuda_graph_needs_cuda(capsys):
    from anywave.cli import main

    assert main(["train", "--model", "gpt", "--steps", "1", "--cuda-graph"]) != 0
    assert "--cuda-graph needs --target cuda" in capsys.readouterr().err


def test_cli_train_gpt(tmp_path, capsys):
    from anywave.cli import main

    out = tmp_path / "run"
    rc = main(["train", "--model", "gpt", "--config", "tiny", "--steps", "1", "--gpt-batch", "1",
               "--target", "emulator", "--wave-width", "16", "--out", str(out)])
    assert rc == 0
    info = json.loads((out / "losses.json").read_text())
    assert info["wave_width"] == 16 and len(info["losses"]) == 1
    first = float.fromhex(info["losses"][0])
    assert 4.5 < first < 6.5  # about ln 256 = 5.55 at the start: bytes nearly uniform
    assert (out / "checkpoint.npz").stat().st_size > 0
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return
    assert (out / "loss.png").read_bytes()[:4] == b"\x89PNG"


#: the options of GPTConfig at the micro size: rotary positions, a SwiGLU MLP, RMSNorm
VARIANT = M.GPTConfig(1, 16, 2, 24, pos="rotary", mlp="swiglu", norm="rms")
#: the variant's training run: 4 steps of 1 window of 16 bytes, a rate at which 4 steps show the fall
VARIANT_RUN = M.TrainSettings(steps=4, batch=1, context=16, lr=3e-2)


def test_config_options_validate_and_default_shapes():
    assert M.GPTConfig() == M.GPTConfig(pos="learned", mlp="gelu", norm="layer", hidden=None)
    names = [n for n, _ in M.param_shapes(TINY)]
    assert names[:2] == ["wte", "wpe"] and "h0.ln1_b" in names and "h0.fc_b" in names and "h0.fc3_w" not in names
    assert dict(M.param_shapes(TINY))["h0.fc_w"] == (4 * TINY.width, TINY.width)
    shapes = dict(M.param_shapes(VARIANT))
    assert "wpe" not in shapes and "h0.ln1_b" not in shapes and "lnf_b" not in shapes and "h0.fc_b" not in shapes
    hid = -(-8 * VARIANT.width // 3)
    assert shapes["h0.fc_w"] == shapes["h0.fc3_w"] == (hid, 16) and shapes["h0.fc2_w"] == (16, hid)
    assert dict(M.param_shapes(M.GPTConfig(1, 16, 2, 24, mlp="swiglu", hidden=40)))["h0.fc3_w"] == (40, 16)
    for bad in ({"pos": "alibi"}, {"mlp": "relu"}, {"norm": "batch"}, {"hidden": 0}, {"hidden": 2.5}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            M.GPTConfig(1, 16, 2, 24, **bad)


@pytest.mark.parametrize("cfg", [VARIANT, M.GPTConfig(1, 16, 2, 24, pos="rotary"),
                                 M.GPTConfig(1, 16, 2, 24, mlp="swiglu", hidden=20),
                                 M.GPTConfig(1, 16, 2, 24, norm="rms")],
                         ids=["rotary-swiglu-rms", "rotary", "swiglu", "rms"])
def test_options_loss_and_gradients_against_float64_torch(cfg):
    """The options against TorchGPT's plain-PyTorch float64 math, the tolerance of the default model's test."""
    _against_float64_torch(cfg, M.init_params(cfg, 3))


def _against_float64_torch(cfg: M.GPTConfig, params: dict[str, np.ndarray]) -> None:
    ours = M.GPT(cfg, params)
    ref = M.TorchGPT(cfg, params).double()
    data = np.frombuffer(M.stdlib_text(1 << 14), np.uint8)
    x, y = (torch.from_numpy(a[0]) for a in M.batches(data, 1, 2, cfg.context, 0))
    lo = ours.loss(x, y)
    lo.backward()
    lr = ref.loss(x, y)
    lr.backward()
    assert abs(lo.item() - lr.item()) < 1e-5
    for n in ours.names:
        g, gr = ours.param(n).grad.double(), ref.param(n).grad
        assert (g - gr).abs().max().item() <= 1e-4 * (1 + gr.abs().max().item()), n


def test_options_train_with_falling_loss():
    """rotary + SwiGLU + RMSNorm on the default CPU path: the loss falls in 4 steps, and the trained
    weights give TorchGPT's float64 loss and gradients (the default model's tolerance)."""
    r = M.train(VARIANT, VARIANT_RUN, text=M.stdlib_text(1 << 16))
    assert np.mean(r.losses[-2:]) < r.losses[0] - 0.3
    _against_float64_torch(VARIANT, r.model.numpy_params())


def test_options_identity_default_pair():
    """rotary + SwiGLU + RMSNorm, 2 steps: the emulator at W=8 gives the losses and weights of the
    default CPU path bit for bit."""
    text = M.stdlib_text(1 << 16)
    st = M.TrainSettings(steps=2, batch=1, context=16, lr=3e-2)
    ref = M.train(VARIANT, st, text=text)
    with ops.cpu_target("emulator", wave_width=8):
        w8 = M.train(VARIANT, st, text=text)
    _same((w8.losses, w8.model.numpy_params()), (ref.losses, ref.model.numpy_params()))


@pytest.mark.slow
def test_options_identity_every_cpu_target():
    """rotary + SwiGLU + RMSNorm: the same losses and weights on the emulator at W = 8, 16, 32, 64 and
    on OpenCL, SYCL, Vulkan."""
    text = M.stdlib_text(1 << 16)

    def run(target, w):
        with ops.cpu_target(target, wave_width=w):
            r = M.train(VARIANT, VARIANT_RUN, text=text)
        return r.losses, r.model.numpy_params()

    ref = run("emulator", 32)
    for w in (8, 16, 64):
        _same(run("emulator", w), ref)
    for name in ("opencl", "sycl", "vulkan"):
        if name in ops.cpu_target_names():
            _same(run(name, DEFAULT_W[name]), ref)


def test_checkpoint_round_trips_the_options(tmp_path):
    cfg = M.GPTConfig(1, 16, 2, 24, pos="rotary", mlp="swiglu", norm="rms", hidden=20)
    r = M.train(cfg, M.TrainSettings(steps=1, batch=1, context=8), text=M.stdlib_text(1 << 14))
    path = M.save_checkpoint(tmp_path / "v.npz", r.model, r.optimizer)
    model, opt = M.load_checkpoint(path)
    assert model.cfg == cfg and opt["step"] == 1
    for n in model.names:
        assert torch.equal(model.param(n), r.model.param(n)), n
    # a checkpoint written before the options existed (no such keys in its config) loads as the defaults
    old = M.save_checkpoint(tmp_path / "old.npz", M.GPT(MICRO, M.init_params(MICRO, 2)))
    with np.load(old) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(bytes(arrays["meta"]).decode())
    for k in ("pos", "mlp", "norm", "hidden"):
        del meta["config"][k]
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
    with open(old, "wb") as f:
        np.savez(f, **arrays)
    assert M.load_checkpoint(old)[0].cfg == MICRO


@pytest.mark.parametrize("cfg", [MICRO, VARIANT], ids=["default", "rotary-swiglu-rms"])
def test_generate_batch_invariant_logits_bits(cfg):
    """A prompt's greedy completion and the logits behind each token have the same bits decoded alone
    and in a batch with prompts of other lengths (each sequence its own cache and positions), and
    equal a recomputation without a cache."""
    model = M.GPT(cfg, M.init_params(cfg, 4))
    text = M.stdlib_text(1 << 14)
    target = list(text[60:67])
    others = [list(text[10:11]), list(text[500:515]), list(text[900:903])]
    alone, la = M.generate(model, [target], 5, return_logits=True)
    batch, lb = M.generate(model, [others[0], target] + others[1:], 5, return_logits=True)
    assert batch[1] == alone[0]
    assert la[0].shape == (5, cfg.vocab) and la[0].dtype == np.float32
    assert np.array_equal(lb[1].view(np.int32), la[0].view(np.int32))
    assert alone[0] == _greedy_without_cache(model, target, 5)
    for s, p in enumerate([others[0], target] + others[1:]):
        assert batch[s] == M.generate(model, [p], 5)[0]
