"""A GPT-2-style decoder whose every arithmetic op is a WAVE kernel, trained byte-level on the
standard library's own source files, and served with a KV cache.

Model (A. Radford et al., "Language Models are Unsupervised Multitask Learners", 2019: GPT-2's
pre-norm decoder): token + position embeddings; per layer ``x = x + proj(attn(LN1(x)))`` with
causal multi-head attention (``torch.ops.anywave.attention``) and ``x = x + fc2(GELU(fc1(LN2(x))))``
(the hidden width 4C); a final LayerNorm; logits through the token embedding (tied weights).
Initial weights: normal(0, 0.02) from NumPy's PCG64 with the seed, the residual projections
scaled by ``1/sqrt(2 * layers)`` (GPT-2's rule), biases 0, LayerNorm gains 1.

Options of :class:`GPTConfig` (the defaults are the GPT-2 model above, bit for bit):
``pos="rotary"`` drops the position embedding ``wpe`` and rotates every block's queries and keys
instead (RoPE: J. Su et al., "RoFormer", 2021, the GPT-NeoX/LLaMA "rotate half" layout,
:func:`anywave.torch.gpt.rotary`); ``mlp="swiglu"`` replaces the GELU MLP by
``fc2(silu(fc(x)) * fc3(x))`` without biases (N. Shazeer, "GLU Variants Improve Transformer",
2020); ``norm="rms"`` uses RMSNorm (B. Zhang, R. Sennrich, 2019; gain only, no bias) for every norm.

The ops (:mod:`anywave.torch.gpt`): linear (bias and GELU epilogues), LayerNorm (RMSNorm),
embeddings, the rotary embedding, the SwiGLU gate, softmax cross-entropy, AdamW, global-norm
clipping; in ``exact`` mode every one is a fixed f32
sequence, so a training run gives the same per-step losses and final weights, bit for bit, on
every target and wave width, and a prompt's completion does not depend on the batch it is decoded
in. ``fast`` mode (CUDA) runs the linear layers on the bf16 fragment GEMM and the attention's fast
kernel where one covers the shape.

Text: the ``*.py`` files directly in the standard library's directory (``sysconfig``'s
``stdlib`` path), sorted by name, read as bytes and laid end to end (the first
:data:`TEXT_BYTES`): real text that ships with Python, no download. Vocabulary: the 256 byte values.
"""

from __future__ import annotations

import json
import math
import sysconfig
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

import anywave.torch.ops  # noqa: F401  (registers torch.ops.anywave.*)
from anywave.errors import WaveError
from anywave.torch import gpt as ops

__all__ = ["CONFIGS", "GPT", "CapturedStep", "GPTConfig", "TorchGPT", "TrainSettings", "generate", "load_checkpoint",
           "save_checkpoint", "stdlib_text", "train"]

TEXT_BYTES = 1 << 21


@dataclass(frozen=True)
class GPTConfig:
    """Shape of the model: ``vocab`` tokens, ``layers`` blocks of width ``width`` with ``heads``
    heads (``width % heads == 0``, head dim a multiple of 4 up to 256), context ``context`` tokens.

    Options (the defaults give GPT-2's block, the parameters and bits of earlier versions):

    * ``pos``: ``"learned"`` (a position embedding ``wpe`` (context, width) added to the tokens'),
      or ``"rotary"`` (no ``wpe``; each block rotates its queries and keys by their positions,
      base 10000, "rotate half" layout: :func:`anywave.torch.gpt.rotary`);
    * ``mlp``: ``"gelu"`` (``fc2(GELU(fc(x)))`` with biases) or ``"swiglu"``
      (``fc2(silu(fc(x)) * fc3(x))``, no biases; Shazeer 2020);
    * ``norm``: ``"layer"`` (LayerNorm, gain and bias) or ``"rms"`` (RMSNorm, gain only), eps 1e-5;
    * ``hidden``: the MLP's hidden width; ``None`` gives :attr:`hidden_width`'s default (4 width
      for GELU; ``ceil(8 width / 3)`` for SwiGLU, whose three matrices then hold about as many
      weights as GELU's two, as in Shazeer 2020, section 2).

    Raises:
        ValueError: a size < 1, a head dim that is not a multiple of 4 up to 256, an option value
            not listed above.
    """

    layers: int = 2
    width: int = 64
    heads: int = 2
    context: int = 64
    vocab: int = 256
    pos: str = "learned"
    mlp: str = "gelu"
    norm: str = "layer"
    hidden: int | None = None

    def __post_init__(self) -> None:
        if min(self.layers, self.width, self.heads, self.context, self.vocab) < 1:
            raise ValueError(f"GPTConfig: every size must be >= 1, got {self}")
        d, r = divmod(self.width, self.heads)
        if r or d % 4 or d > 256:
            raise ValueError(f"GPTConfig: width {self.width} / heads {self.heads} must give a head dim that is a "
                             "multiple of 4 up to 256")
        for name, allowed in (("pos", POS_OPTIONS), ("mlp", MLP_OPTIONS), ("norm", NORM_OPTIONS)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"GPTConfig: {name}={getattr(self, name)!r} is not one of {allowed}")
        if self.hidden is not None and (isinstance(self.hidden, bool) or not isinstance(self.hidden, int)
                                        or self.hidden < 1):
            raise ValueError(f"GPTConfig: hidden must be None or an int >= 1, got {self.hidden!r}")

    @property
    def hidden_width(self) -> int:
        """The MLP's hidden width: ``hidden``, else 4 width (GELU) or ``ceil(8 width / 3)`` (SwiGLU)."""
        if self.hidden is not None:
            return self.hidden
        return 4 * self.width if self.mlp == "gelu" else -(-8 * self.width // 3)


POS_OPTIONS = ("learned", "rotary")
MLP_OPTIONS = ("gelu", "swiglu")
NORM_OPTIONS = ("layer", "rms")


#: the named configurations (tiny: the identity test's; gpt2: GPT-2 small's shape, 124M
#: parameters with GPT-2's 50257-token vocabulary, 85M with bytes)
CONFIGS = {
    "tiny": GPTConfig(2, 64, 2, 64),
    "small": GPTConfig(4, 128, 4, 128),
    "gpt2": GPTConfig(12, 768, 12, 1024),
}


def param_shapes(cfg: GPTConfig) -> list[tuple[str, tuple[int, ...]]]:
    """(name, shape) of every parameter in a fixed order (the optimizer's and the clip's)."""
    c, hid = cfg.width, cfg.hidden_width

    def norm(name: str) -> list[tuple[str, tuple[int, ...]]]:
        return [(f"{name}_w", (c,))] + ([] if cfg.norm == "rms" else [(f"{name}_b", (c,))])

    out: list[tuple[str, tuple[int, ...]]] = [("wte", (cfg.vocab, c))]
    if cfg.pos == "learned":
        out.append(("wpe", (cfg.context, c)))
    for i in range(cfg.layers):
        out += norm(f"h{i}.ln1") + [(f"h{i}.attn_w", (3 * c, c)), (f"h{i}.attn_b", (3 * c,)),
                                    (f"h{i}.proj_w", (c, c)), (f"h{i}.proj_b", (c,))] + norm(f"h{i}.ln2")
        if cfg.mlp == "gelu":
            out += [(f"h{i}.fc_w", (hid, c)), (f"h{i}.fc_b", (hid,)), (f"h{i}.fc2_w", (c, hid)),
                    (f"h{i}.fc2_b", (c,))]
        else:
            out += [(f"h{i}.fc_w", (hid, c)), (f"h{i}.fc3_w", (hid, c)), (f"h{i}.fc2_w", (c, hid))]
    return out + norm("lnf")


def init_params(cfg: GPTConfig, seed: int = 0) -> dict[str, np.ndarray]:
    """Initial float32 parameters (see the module docstring), the same bits on every machine."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, shape in param_shapes(cfg):
        leaf = name.rpartition(".")[2]
        if leaf.endswith("_b"):
            a = np.zeros(shape, np.float32)
        elif leaf.startswith("ln"):
            a = np.ones(shape, np.float32)
        else:
            std = 0.02 / math.sqrt(2 * cfg.layers) if leaf in ("proj_w", "fc2_w") else 0.02
            a = (rng.standard_normal(shape) * std).astype(np.float32)
        out[name] = a
    return out


class GPT(torch.nn.Module):
    """The decoder on ``torch.ops.anywave`` ops. ``forward(idx)`` takes int64 tokens (B, T),
    T <= context, and returns float32 logits (B, T, vocab); ``mode`` is ``"exact"`` or ``"fast"``."""

    def __init__(self, cfg: GPTConfig, params: dict[str, np.ndarray] | None = None, mode: str = "exact") -> None:
        super().__init__()
        if mode not in ops.MODES:
            raise ValueError(f"GPT: mode {mode!r} is not one of {ops.MODES}")
        self.cfg, self.mode = cfg, mode
        params = init_params(cfg) if params is None else params
        self.names = [n for n, _ in param_shapes(cfg)]
        self.p = torch.nn.ParameterDict({n.replace(".", "_"): torch.nn.Parameter(torch.from_numpy(
            np.array(params[n], np.float32))) for n in self.names})

    def param(self, name: str) -> torch.Tensor:
        return self.p[name.replace(".", "_")]

    def ordered(self) -> list[torch.nn.Parameter]:
        """The parameters in :func:`param_shapes` order."""
        return [self.param(n) for n in self.names]

    def numpy_params(self) -> dict[str, np.ndarray]:
        return {n: self.param(n).detach().cpu().numpy().copy() for n in self.names}

    # ---- the pieces (each a WAVE op)
    def _lin(self, x, w, b, gelu=False):
        return ops.linear(x, self.param(w), None if b is None else self.param(b), gelu, self.mode)

    def _ln(self, x, name):
        if self.cfg.norm == "rms":
            return ops.norm(x, self.param(name + "_w"), None, rms=True)
        return ops.norm(x, self.param(name + "_w"), self.param(name + "_b"))

    def _rope(self, t, pos):
        # t (B, H, T, D); pos: the position of row 0 (int) or one such position per batch row
        if isinstance(pos, int):
            return ops.rotary(t, pos)
        return torch.cat([ops.rotary(t[s:s + 1], p) for s, p in enumerate(pos)])

    def _swiglu(self, a, b):
        return ops.swiglu(a, b)

    def _attn(self, q, k, v, causal=True):
        fast = self.mode == "fast" and q.is_cuda
        if fast:
            q, k, v = q.to(torch.bfloat16), k.to(torch.bfloat16), v.to(torch.bfloat16)
        o = torch.ops.anywave.attention(q, k, v, causal, None, self.mode)
        return o.float() if fast else o

    def _decode(self, q, k, v, lengths):
        # each sequence's new query row against rows 0..lengths[b]-1 of its cache (all visible)
        return ops.decode_attention(q, k, v, lengths=lengths)

    def _heads(self, t, b, s):
        h = self.cfg.heads
        return t.reshape(b, s, h, -1).transpose(1, 2).contiguous()

    def embed(self, idx: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        if self.cfg.pos == "rotary":
            return ops.embedding(self.param("wte"), idx)
        return ops.embedding(self.param("wte"), idx) + ops.embedding(self.param("wpe"), pos)

    def mlp(self, i: int, x: torch.Tensor) -> torch.Tensor:
        """Block i's MLP of ``x`` (its input norm applied here): GELU or SwiGLU (``cfg.mlp``)."""
        n = self._ln(x, f"h{i}.ln2")
        if self.cfg.mlp == "swiglu":
            h = self._swiglu(self._lin(n, f"h{i}.fc_w", None), self._lin(n, f"h{i}.fc3_w", None))
            return self._lin(h, f"h{i}.fc2_w", None)
        h = self._lin(n, f"h{i}.fc_w", f"h{i}.fc_b", gelu=True)
        return self._lin(h, f"h{i}.fc2_w", f"h{i}.fc2_b")

    def block(self, i: int, x: torch.Tensor, kv: Callable | None = None, pos: int | Sequence[int] = 0
              ) -> torch.Tensor:
        """Block i of ``x`` (B, T, width); ``kv(i, q, k, v)`` replaces the causal attention (a KV
        cache); ``pos`` the position of x's first row (an int, or one per batch row), used by the
        rotary embedding only."""
        b, s, c = x.shape
        qkv = self._lin(self._ln(x, f"h{i}.ln1"), f"h{i}.attn_w", f"h{i}.attn_b")
        q, k, v = (self._heads(t, b, s) for t in qkv.split(c, dim=-1))
        if self.cfg.pos == "rotary":
            q, k = self._rope(q, pos), self._rope(k, pos)
        o = self._attn(q, k, v) if kv is None else kv(i, q, k, v)
        a = o.transpose(1, 2).reshape(b, s, c)
        x = x + self._lin(a, f"h{i}.proj_w", f"h{i}.proj_b")
        return x + self.mlp(i, x)

    def head(self, x: torch.Tensor) -> torch.Tensor:
        return self._lin(self._ln(x, "lnf"), "wte", None)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        b, s = idx.shape
        if s > self.cfg.context:
            raise ValueError(f"GPT: {s} tokens exceed the context of {self.cfg.context}")
        pos = torch.arange(s, device=idx.device).expand(b, s)
        x = self.embed(idx, pos)
        for i in range(self.cfg.layers):
            x = self.block(i, x)
        return self.head(x)

    def loss(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        logits = self.forward(idx)
        return ops.cross_entropy(logits.reshape(-1, self.cfg.vocab), targets.reshape(-1))


class TorchGPT(GPT):
    """The same model in plain PyTorch (``torch.nn.functional``, SDPA): the reference of the
    tests and the peer of the benchmark. Any dtype (``.double()``, bf16 autocast ...)."""

    def _lin(self, x, w, b, gelu=False):
        y = torch.nn.functional.linear(x, self.param(w), None if b is None else self.param(b))
        return torch.nn.functional.gelu(y, approximate="tanh") if gelu else y

    def _ln(self, x, name):
        if self.cfg.norm == "rms":
            return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-5) * self.param(name + "_w")
        return torch.nn.functional.layer_norm(x, (x.shape[-1],), self.param(name + "_w"), self.param(name + "_b"))

    def _rope(self, t, pos):
        # rotate half (RoFormer's rotation, GPT-NeoX/LLaMA layout), angles and cos/sin in float64
        b, _, s, d = t.shape
        first = torch.tensor([pos] * b if isinstance(pos, int) else list(pos), dtype=torch.float64)
        p = first[:, None] + torch.arange(s, dtype=torch.float64)[None, :]
        inv = ops.ROPE_BASE ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
        ang = (p[:, None, :, None] * inv).to(t.device)
        c, sn = ang.cos().to(t.dtype), ang.sin().to(t.dtype)
        x1, x2 = t[..., :d // 2], t[..., d // 2:]
        return torch.cat([x1 * c - x2 * sn, x2 * c + x1 * sn], dim=-1)

    def _swiglu(self, a, b):
        return torch.nn.functional.silu(a) * b

    def _attn(self, q, k, v, causal=True):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)

    def _decode(self, q, k, v, lengths):
        mask = torch.arange(k.shape[2], device=k.device) < lengths[:, None].to(k.device)
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask[:, None, None, :])

    def embed(self, idx, pos):
        if self.cfg.pos == "rotary":
            return torch.nn.functional.embedding(idx, self.param("wte"))
        return torch.nn.functional.embedding(idx, self.param("wte")) + torch.nn.functional.embedding(
            pos, self.param("wpe"))

    def loss(self, idx, targets):
        logits = self.forward(idx)
        return torch.nn.functional.cross_entropy(logits.reshape(-1, self.cfg.vocab).float(), targets.reshape(-1))


# ----------------------------------------------------------------------------- data

def stdlib_text(n_bytes: int = TEXT_BYTES) -> bytes:
    """The first ``n_bytes`` of the standard library's top-level ``*.py`` files (sorted by name)
    laid end to end."""
    root = Path(sysconfig.get_paths()["stdlib"])
    out = bytearray()
    for f in sorted(root.glob("*.py")):
        out += f.read_bytes()
        if len(out) >= n_bytes:
            break
    if len(out) < 1024:
        raise WaveError(f"stdlib_text: found only {len(out)} bytes of Python source under {root}")
    return bytes(out[:n_bytes])


def batches(data: np.ndarray, steps: int, batch: int, context: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(steps, batch, context) int64 inputs and targets (the next bytes) at seeded offsets."""
    if len(data) <= context + 1:
        raise ValueError(f"batches: {len(data)} bytes of text are too few for a context of {context}")
    off = np.random.default_rng(seed + 1).integers(0, len(data) - context - 1, size=(steps, batch))
    ar = np.arange(context)
    x = data[off[..., None] + ar].astype(np.int64)
    y = data[off[..., None] + ar + 1].astype(np.int64)
    return x, y


# ----------------------------------------------------------------------------- training

@dataclass(frozen=True)
class TrainSettings:
    """Hyper-parameters: AdamW (betas, eps, decoupled weight decay on the 2-D weights only),
    global-norm clipping at ``clip``, a linear warm-up over ``warmup`` steps then constant ``lr``."""

    steps: int = 20
    batch: int = 4
    lr: float = 3e-3
    betas: tuple[float, float] = (0.9, 0.95)
    eps: float = 1e-8
    weight_decay: float = 0.1
    clip: float = 1.0
    warmup: int = 0
    seed: int = 0
    context: int | None = None  # default: the model's


@dataclass
class TrainResult:
    """Per-step losses (float32), the trained model, wall seconds, the last gradient norm."""

    losses: list[float]
    model: GPT
    seconds: float
    grad_norms: list[float] = field(default_factory=list)
    optimizer: dict[str, Any] = field(default_factory=dict)


def _opt_state(model: GPT) -> dict[str, Any]:
    return {"step": 0, "m": [torch.zeros_like(p) for p in model.ordered()],
            "v": [torch.zeros_like(p) for p in model.ordered()]}


def step_lr(st: TrainSettings, t: int) -> float:
    """The learning rate of step ``t`` (1-based): linear warm-up over ``st.warmup`` steps."""
    return st.lr * min(1.0, t / st.warmup) if st.warmup else st.lr


def train_step(model: GPT, x: torch.Tensor, y: torch.Tensor, st: TrainSettings, opt: dict[str, Any],
               hyper: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """One step: loss, backward, clip, AdamW (all WAVE ops). Returns (loss, grad norm) tensors.

    ``hyper``: a float32 (4,) tensor on the model's device holding this step's
    :func:`anywave.torch.gpt.adamw_hyper` values (the caller writes them): AdamW then reads its
    scalars from it (:class:`CapturedStep`); the same bits as without it."""
    params = model.ordered()
    for p in params:
        p.grad = None
    loss = model.loss(x, y)
    loss.backward()
    grads = [p.grad for p in params]
    gn = ops.clip_grad_norm_(grads, st.clip)
    opt["step"] += 1
    t = opt["step"]
    lr = step_lr(st, t)
    with torch.no_grad():
        for p, g, m, v in zip(params, grads, opt["m"], opt["v"], strict=True):
            if hyper is not None:
                torch.ops.anywave.gpt_adamw_hyper_(p, g, m, v, hyper, st.betas[0], st.betas[1], st.eps, p.dim() == 2)
            else:
                ops.adamw_(p, g, m, v, lr=lr, betas=st.betas, eps=st.eps,
                           weight_decay=st.weight_decay if p.dim() == 2 else 0.0, step=t)
    return loss.detach(), gn.detach()


class CapturedStep:
    """:func:`train_step` on CUDA captured once in a CUDA graph (``torch.cuda.graph``) and
    replayed for every later step: no Python and no launch cost per kernel after the capture.

    The first ``warmup`` calls run eagerly (real steps; they also build every kernel), the next
    call captures and replays. Each call copies the batch into the graph's static inputs and this
    step's AdamW scalars (:func:`anywave.torch.gpt.adamw_hyper`) into a device tensor the graph
    reads, so every step is the step :func:`train_step` would take: the same losses and weights,
    bit for bit. Batches must keep one shape. Token ids are not range-checked inside the graph
    (an id outside the vocabulary gives a NaN loss), so they are checked on the host here.

    Raises:
        ValueError: a model not on CUDA, a batch of another shape than the first, or token ids
        outside the vocabulary (OpInputError, a ValueError)."""

    def __init__(self, model: GPT, st: TrainSettings, opt: dict[str, Any], warmup: int = 2) -> None:
        dev = model.param(model.names[0]).device
        if dev.type != "cuda":
            raise ValueError(f"CapturedStep needs a model on CUDA, not on {dev}")
        self.model, self.st, self.opt, self.warmup = model, st, opt, warmup
        self.hyper = torch.zeros(4, dtype=torch.float32, device=dev)
        self.host = torch.zeros(4, dtype=torch.float32).pin_memory()
        self.copied = torch.cuda.Event()  # the last copy out of ``host`` has run
        self.graph: Any = None
        self.calls = 0
        self.x = self.y = self.out = None

    def _write_hyper(self, t: int) -> None:
        self.copied.synchronize()  # the previous step's copy has read the pinned buffer
        self.host.numpy()[:] = ops.adamw_hyper(step_lr(self.st, t), self.st.betas, self.st.weight_decay, t)
        self.hyper.copy_(self.host, non_blocking=True)
        self.copied.record()

    def __call__(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One step on batch ``(x, y)`` (int token ids (B, T), on CUDA). Returns (loss, grad norm)
        tensors (the graph's outputs: copy them to keep them past the next call)."""
        ops._check_values(x, self.model.cfg.vocab, "CapturedStep")  # the graph reads no ids on the host
        if self.x is None:
            self.x, self.y = x.clone(), y.clone()
        elif x.shape != self.x.shape or y.shape != self.y.shape:
            raise ValueError(f"CapturedStep replays batches of shape {tuple(self.x.shape)}, got {tuple(x.shape)}")
        self.x.copy_(x)
        self.y.copy_(y)
        t = self.opt["step"] + 1
        self._write_hyper(t)
        self.calls += 1
        if self.graph is None and self.calls <= self.warmup:
            return train_step(self.model, self.x, self.y, self.st, self.opt, hyper=self.hyper)
        if self.graph is None:
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                self.out = train_step(self.model, self.x, self.y, self.st, self.opt, hyper=self.hyper)
            self.opt["step"] -= 1  # the capture ran no step
            self.graph = g
        self.graph.replay()
        self.opt["step"] += 1
        return self.out


def train(cfg: GPTConfig | str = "tiny", settings: TrainSettings | None = None, *, mode: str = "exact",
          device: str | torch.device = "cpu", text: bytes | None = None, model: GPT | None = None,
          opt: dict[str, Any] | None = None, progress: Callable[[int, float], None] | None = None,
          cuda_graph: bool = False) -> TrainResult:
    """Train a :class:`GPT` byte-level on :func:`stdlib_text` (or ``text``).

    CPU tensors run on the CPU target of :func:`anywave.torch.ops.cpu_target` (wrap the call in
    it); ``device="cuda"`` on the cuda target. ``model``/``opt`` continue a run (a loaded checkpoint).
    ``cuda_graph`` (CUDA only): the steps after two eager ones replay one captured graph
    (:class:`CapturedStep`): the same losses and weights, without the per-launch host cost.

    Raises:
        ValueError: ``cuda_graph`` on a device other than CUDA.

    Returns:
        :class:`TrainResult`; ``losses[i]`` is step i's batch loss before its update.
    """
    cfg = CONFIGS[cfg] if isinstance(cfg, str) else cfg
    st = settings or TrainSettings()
    dev = torch.device(device)
    model = (model or GPT(cfg, init_params(cfg, st.seed), mode)).to(dev)
    model.mode = mode
    opt = opt or _opt_state(model)
    ctx = st.context or cfg.context
    data = np.frombuffer(text if text is not None else stdlib_text(), np.uint8)
    xs, ys = batches(data, st.steps + opt["step"], st.batch, ctx, st.seed)
    if cuda_graph and dev.type != "cuda":
        raise ValueError(f"cuda_graph=True needs device='cuda', not {str(dev)!r}")
    captured = CapturedStep(model, st, opt) if cuda_graph else None
    losses, norms = [], []
    t0 = time.perf_counter()
    first = opt["step"]
    for i in range(first, first + st.steps):
        x, y = torch.from_numpy(xs[i]).to(dev), torch.from_numpy(ys[i]).to(dev)
        if captured is not None:
            loss, gn = (t.clone() for t in captured(x, y))  # the graph's outputs change at each replay
        else:
            loss, gn = train_step(model, x, y, st, opt)
        losses.append(loss)
        norms.append(gn)
        if progress is not None:
            progress(i, float(loss))
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    secs = time.perf_counter() - t0
    return TrainResult([float(v) for v in losses], model, secs, [float(v) for v in norms], opt)


# ----------------------------------------------------------------------------- checkpoints

def save_checkpoint(path: str | Path, model: GPT, opt: dict[str, Any] | None = None) -> Path:
    """Write the config, the parameters and the optimizer state (AdamW moments, step) to one
    ``.npz`` (no pickles)."""
    path = Path(path)
    arrays = {f"p/{n}": a for n, a in model.numpy_params().items()}
    meta = {"config": asdict(model.cfg), "mode": model.mode, "step": 0 if opt is None else opt["step"]}
    if opt is not None:
        for n, m, v in zip(model.names, opt["m"], opt["v"], strict=True):
            arrays[f"m/{n}"] = m.detach().cpu().numpy()
            arrays[f"v/{n}"] = v.detach().cpu().numpy()
    with open(path, "wb") as f:
        np.savez(f, meta=np.frombuffer(json.dumps(meta).encode(), np.uint8), **arrays)
    return path


def load_checkpoint(path: str | Path, device: str | torch.device = "cpu") -> tuple[GPT, dict[str, Any]]:
    """(model, optimizer state) from :func:`save_checkpoint`'s file; raises WaveError for a file
    that is not one (missing or misshapen arrays)."""
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(bytes(z["meta"]).decode())
            cfg = GPTConfig(**meta["config"])
            params = {n: z[f"p/{n}"] for n, _ in param_shapes(cfg)}
            has_opt = f"m/{param_shapes(cfg)[0][0]}" in z
            mv = ({n: (z[f"m/{n}"], z[f"v/{n}"]) for n, _ in param_shapes(cfg)} if has_opt else None)
    except (KeyError, ValueError, OSError, TypeError) as e:
        raise WaveError(f"load_checkpoint: {path} is not a GPT checkpoint ({e})") from None
    for n, shape in param_shapes(cfg):
        if params[n].shape != shape:
            raise WaveError(f"load_checkpoint: {n} has shape {params[n].shape}, expected {shape}")
    dev = torch.device(device)
    model = GPT(cfg, params, meta.get("mode", "exact")).to(dev)
    opt = _opt_state(model)
    opt["step"] = int(meta.get("step", 0))
    if mv is not None:
        opt["m"] = [torch.from_numpy(np.array(mv[n][0])).to(dev) for n in model.names]
        opt["v"] = [torch.from_numpy(np.array(mv[n][1])).to(dev) for n in model.names]
    return model, opt


# ----------------------------------------------------------------------------- inference

class _Cache:
    """Every sequence's keys and values per layer: float32 (B, H, capacity, D), zeros past each
    sequence's length; sequence s fills rows 0..length[s]-1 of its own row of the batch."""

    def __init__(self, layers: int, lengths: Sequence[int], capacity: int) -> None:
        self.k: list[torch.Tensor | None] = [None] * layers
        self.v: list[torch.Tensor | None] = [None] * layers
        self.lengths = list(lengths)
        self.capacity = capacity

    def _alloc(self, i: int, k: torch.Tensor) -> None:
        if self.k[i] is None:
            shape = (len(self.lengths), k.shape[1], self.capacity, k.shape[3])
            self.k[i], self.v[i] = k.new_zeros(shape), k.new_zeros(shape)

    def prefill(self, i: int, s: int, k: torch.Tensor, v: torch.Tensor) -> None:
        """Sequence s's keys and values (1, H, length[s], D) of layer i."""
        self._alloc(i, k)
        self.k[i][s, :, :k.shape[2]] = k[0]
        self.v[i][s, :, :v.shape[2]] = v[0]

    def append(self, i: int, k: torch.Tensor, v: torch.Tensor, at: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Every sequence's newest key and value (B, H, 1, D) of layer i at rows ``at`` (B,)."""
        rows = torch.arange(len(self.lengths), device=k.device)
        self.k[i][rows, :, at] = k[:, :, 0]
        self.v[i][rows, :, at] = v[:, :, 0]
        return self.k[i], self.v[i]


def _sample(logits: np.ndarray, temperature: float, top_k: int | None, rng: np.random.Generator | None) -> int:
    # greedy: the first index of the largest logit; sampling: float64 softmax of logits / T on the
    # host (top-k first), one uniform draw from the sequence's own generator, inverse CDF
    if temperature == 0 or rng is None:
        return int(np.argmax(logits))
    z = logits.astype(np.float64) / temperature
    if top_k is not None and top_k < len(z):
        z[z < np.sort(z)[-top_k]] = -np.inf
    p = np.exp(z - z.max())
    c = np.cumsum(p / p.sum())
    return int(min(np.searchsorted(c, rng.random(), side="right"), len(z) - 1))


@torch.no_grad()
def generate(model: GPT, prompts: Sequence[Sequence[int] | bytes], max_new_tokens: int, *,
             temperature: float = 0.0, top_k: int | None = None, seed: int | Sequence[int] | None = None,
             return_logits: bool = False) -> list[list[int]] | tuple[list[list[int]], list[np.ndarray]]:
    """Continue each prompt by ``max_new_tokens`` tokens with a KV cache.

    Each prompt is prefilled alone (causal attention over its tokens, keys and values kept per
    layer); then every decode step runs the batch's newest tokens through the linear layers
    together (one row each) and every sequence's attention in one launch of the decode form
    (:func:`anywave.torch.gpt.decode_attention` with ``lengths``: a row reads only its own
    sequence's cache rows). Every op computes a row without reference to the other rows, so a
    prompt's completion is the same bits alone or in any batch (exact mode). Prompts of different
    lengths share one cache tensor per layer, (B, heads, longest prompt + new tokens, head dim);
    each sequence has its own length and position (the learned position embedding's row, or the
    rotary embedding's offset), and the rows past its length are never read.

    Args:
        prompts: token lists (or ``bytes``), each 1..context tokens; prompt + new tokens must fit
            the context; the lengths may differ.
        temperature: 0 (greedy: argmax, ties to the lowest id) or > 0 (sampling).
        top_k: with sampling, keep the k largest logits.
        seed: sampling seed: one int (prompt i uses ``seed + i``) or one per prompt.
        return_logits: also return, per prompt, the float32 logits (max_new_tokens, vocab) from
            which each new token was chosen.

    Returns:
        The new tokens of each prompt (lists of ints); with ``return_logits``, ``(tokens, logits)``.

    Raises:
        ValueError: an empty prompt, a prompt that with the new tokens exceeds the context, a
            negative temperature.
    """
    cfg = model.cfg
    if temperature < 0 or max_new_tokens < 0:
        raise ValueError(f"generate: temperature and max_new_tokens must be >= 0, got {temperature}, "
                         f"{max_new_tokens}")
    toks = [list(p) for p in prompts]
    for t in toks:
        if not t or len(t) + max_new_tokens > cfg.context:
            raise ValueError(f"generate: a prompt of {len(t)} tokens + {max_new_tokens} new must be 1..{cfg.context}")
    if temperature > 0:
        seeds = [(0 if seed is None else seed) + i for i in range(len(toks))] if not isinstance(seed, Sequence) \
            else list(seed)
        rngs = [np.random.default_rng(s) for s in seeds]
    else:
        rngs = [None] * len(toks)
    dev = model.param("wte").device
    cache = _Cache(cfg.layers, [len(t) for t in toks], max(len(t) for t in toks) + max_new_tokens - 1)
    out: list[list[int]] = [[] for _ in toks]
    seen: list[list[np.ndarray]] = [[] for _ in toks]

    def done():
        if not return_logits:
            return out
        return out, [np.stack(r) if r else np.zeros((0, cfg.vocab), np.float32) for r in seen]

    if max_new_tokens == 0:
        return done()
    last = []
    for s, t in enumerate(toks):
        idx = torch.tensor([t], dtype=torch.int64, device=dev)
        x = model.embed(idx, torch.arange(len(t), device=dev)[None])

        def prefill(i, q, k, v, s=s):
            cache.prefill(i, s, k, v)
            return model._attn(q, k, v, True)

        for i in range(cfg.layers):
            x = model.block(i, x, prefill)
        logits = model.head(x[:, -1:])[0, -1].float().cpu().numpy()
        seen[s].append(logits)
        last.append(_sample(logits, temperature, top_k, rngs[s]))
    for s in range(len(toks)):
        out[s].append(last[s])
    for _ in range(max_new_tokens - 1):
        idx = torch.tensor([[t] for t in last], dtype=torch.int64, device=dev)
        first = list(cache.lengths)
        at = torch.tensor(first, dtype=torch.int64, device=dev)
        lengths = (at + 1).to(torch.int32)
        x = model.embed(idx, at[:, None])

        def step(i, q, k, v, at=at, lengths=lengths):
            kc, vc = cache.append(i, k, v, at)
            return model._decode(q.contiguous(), kc, vc, lengths)

        for i in range(cfg.layers):
            x = model.block(i, x, step, first)
        cache.lengths = [n + 1 for n in first]
        logits = model.head(x).float().cpu().numpy()
        last = [_sample(logits[s, -1], temperature, top_k, rngs[s]) for s in range(len(toks))]
        for s in range(len(toks)):
            out[s].append(last[s])
            seen[s].append(logits[s, -1].copy())
    return done()
