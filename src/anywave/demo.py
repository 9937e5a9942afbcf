"""``anywave demo``: the main job — real data through WAVE kernels on every available target.

Two parts, both checked against independent NumPy computations; exits non-zero on any
mismatch:

1. **Assembly examples**: assembles the bundled ``.wave`` kernels and runs each at every wave
   width on the reference emulator, checking every output **bit for bit**.
2. **Real data** (needs the demo extra: ``pip install 'anywave[demo]'``): scikit-image's bundled
   ``camera`` photograph → Gaussian blur, Sobel edges, intensity histogram, CDF (prefix sum),
   mean brightness (sum reduction), transpose, sorted edge strengths (bitonic sort), unsharp
   mask (vector add + saxpy), ReLU/GELU; scikit-learn's bundled handwritten digits → layer norm
   and a 64-32-10 MLP (trained here in NumPy with a fixed seed) whose forward pass (matmul +
   bias + ReLU, matmul + bias, softmax) runs in WAVE kernels from :mod:`anywave.kernels`. Every
   kernel runs on every available target at every wave width; the demo reports the time per
   target and W and whether the outputs are bit-identical across targets and widths (every
   stage is W-invariant; the float sum uses the W-invariant ``aw.workgroup_reduce`` tree). It writes the
   photograph, blurred and edge images side by side as a PNG (default ``./anywave-demo/``).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources

import numpy as np

from anywave.asm import assemble
from anywave.binary.module import Module
from anywave.emu import emulate

WAVE_WIDTHS = (8, 16, 32, 64)
WG = 256  # the examples' workgroup size


def load_example(name: str) -> Module:
    """Assemble a bundled example (``anywave/examples/NAME.wave``)."""
    text = resources.files("anywave.examples").joinpath(f"{name}.wave").read_text()
    return assemble(text, filename=f"examples/{name}.wave")


def _grid(n: int) -> int:
    return (n + WG - 1) // WG


def _uniform_f32(rng: np.random.Generator, n: int) -> np.ndarray:
    """Floats in [-1, 1) that are multiples of 2^-24: every a*x + y of them is exact in
    float64 (at most 50 significant bits), so rounding that float64 once to float32 is the
    correctly rounded fused multiply-add — an independent reference for ``fma.f32``."""
    return (rng.integers(-(1 << 24), 1 << 24, n) * 2.0**-24).astype(np.float32)


def _butterfly_sum(x: np.ndarray, w: int) -> np.ndarray:
    """Sum of each row of W lanes in the spec's butterfly order (docs/spec.md, wred.add.f32)."""
    s = x.astype(np.float32)
    lanes = np.arange(w)
    k = 1
    while k < w:
        s = (s + s[..., lanes ^ k]).astype(np.float32)
        k *= 2
    return s[..., 0]


@dataclass
class Run:
    example: str
    wave_width: int
    threads: int
    ok: bool
    detail: str
    seconds: float
    thread_instructions: int


def _saxpy(w: int, rng: np.random.Generator) -> tuple[bool, str, object]:
    n = 1_000_003
    a = np.float32(0.75)
    x, y = _uniform_f32(rng, n), _uniform_f32(rng, n)
    expect = (np.float64(a) * x.astype(np.float64) + y.astype(np.float64)).astype(np.float32)
    stats = emulate(load_example("saxpy"), "saxpy", grid=_grid(n), workgroup=WG,
                    args={"a": a, "x": x, "y": y, "n": n}, wave_width=w)
    bad = np.count_nonzero(y.view(np.uint32) != expect.view(np.uint32))
    return bad == 0, f"{n:,} elements, {bad} bit mismatches", stats


def _reduce_sum(w: int, rng: np.random.Generator) -> tuple[bool, str, object]:
    n = 200_000
    g = _grid(n)
    x = _uniform_f32(rng, n)
    partial = np.zeros(g, np.float32)
    stats = emulate(load_example("reduce_sum"), "reduce_sum", grid=g, workgroup=WG,
                    args={"x": x, "partial": partial, "n": n}, wave_width=w)
    padded = np.zeros(g * WG, np.float32)
    padded[:n] = x
    slots = _butterfly_sum(padded.reshape(g, WG // w, w), w)  # one sum per wave
    stride = slots.shape[1] // 2
    while stride:  # the kernel's local-memory tree
        slots[:, :stride] = (slots[:, :stride] + slots[:, stride:2 * stride]).astype(np.float32)
        stride //= 2
    expect = slots[:, 0]
    bad = np.count_nonzero(partial.view(np.uint32) != expect.view(np.uint32))
    err = abs(float(partial.astype(np.float64).sum()) - float(x.astype(np.float64).sum()))
    return bad == 0, f"{g} partial sums, {bad} bit mismatches, |sum - exact| = {err:.2e}", stats


def _prefix_sum(w: int, rng: np.random.Generator) -> tuple[bool, str, object]:
    n = 100_000
    g = _grid(n)
    x = rng.integers(0, 2**32, n, dtype=np.uint32)
    y = np.zeros(n, np.uint32)
    stats = emulate(load_example("prefix_sum"), "prefix_sum", grid=g, workgroup=WG,
                    args={"x": x, "y": y, "n": n}, wave_width=w)
    padded = np.zeros(g * WG, np.uint64)
    padded[:n] = x
    expect = (np.cumsum(padded.reshape(g, WG), axis=1) & 0xFFFFFFFF).astype(np.uint32).ravel()[:n]
    bad = np.count_nonzero(y != expect)
    return bad == 0, f"{n:,} elements, {bad} mismatches", stats


def _histogram(w: int, rng: np.random.Generator) -> tuple[bool, str, object]:
    n, nbins = 300_000, 64
    data = rng.integers(0, 2**32, n, dtype=np.uint32)
    hist = np.zeros(nbins, np.uint32)
    stats = emulate(load_example("histogram"), "histogram_local", grid=(n + 63) // 64, workgroup=64,
                    args={"data": data, "hist": hist, "n": n}, wave_width=w)
    expect = np.bincount(data % nbins, minlength=nbins).astype(np.uint32)
    bad = np.count_nonzero(hist != expect)
    return bad == 0, f"{n:,} values into {nbins} bins, {bad} wrong bins", stats


EXAMPLES: dict[str, Callable[[int, np.random.Generator], tuple[bool, str, object]]] = {
    "saxpy": _saxpy, "reduce_sum": _reduce_sum, "prefix_sum": _prefix_sum, "histogram": _histogram,
}


def run_demo(wave_widths: tuple[int, ...] = WAVE_WIDTHS, seed: int = 0, out=print) -> list[Run]:
    """Run every example at every wave width on the emulator; return one :class:`Run` each."""
    runs: list[Run] = []
    out(f"anywave demo — target: emulator (reference), wave widths {', '.join(map(str, wave_widths))}")
    out(f"{'example':<12} {'W':>3} {'threads':>10} {'result':<8} {'time':>7} {'M thr-instr/s':>14}  detail")
    for name, fn in EXAMPLES.items():
        for w in wave_widths:
            rng = np.random.default_rng(seed)
            t0 = time.perf_counter()
            ok, detail, stats = fn(w, rng)
            dt = time.perf_counter() - t0
            ti = int(stats.thread_instructions)  # type: ignore[attr-defined]
            run = Run(name, w, int(stats.threads), ok, detail, dt, ti)  # type: ignore[attr-defined]
            runs.append(run)
            rate = ti / max(stats.wall_seconds, 1e-9) / 1e6  # type: ignore[attr-defined]
            out(f"{name:<12} {w:>3} {run.threads:>10,} {'ok' if ok else 'MISMATCH':<8} {dt:>6.2f}s "
                f"{rate:>14.1f}  {detail}")
    bad = [r for r in runs if not r.ok]
    out("")
    if bad:
        out(f"{len(bad)} of {len(runs)} runs differ from their NumPy reference")
    else:
        out(f"all {len(runs)} runs are bit-identical to independent NumPy references")
    return runs


# ============================================================================ real data

#: import name → distribution of the demo extra (``pip install 'anywave[demo]'``)
DEMO_EXTRA = {"skimage": "scikit-image", "sklearn": "scikit-learn", "PIL": "pillow", "rich": "rich"}
GAUSS_SIGMA = 1.5
EPS = 1e-5


def missing_extras() -> list[str]:
    """Distributions of the demo extra that are not installed."""
    import importlib.util

    return [pkg for mod, pkg in DEMO_EXTRA.items() if importlib.util.find_spec(mod) is None]


@dataclass
class RealData:
    """The demo's inputs, all shipped inside installed packages (nothing is downloaded).

    image: uint8 (H, W) — scikit-image's ``camera`` (512 x 512; 128 x 128 with ``quick``).
    train_x / test_x: float64 (n, 64) digit images (0..16); train_y / test_y: int labels."""

    image: np.ndarray
    train_x: np.ndarray
    train_y: np.ndarray
    test_x: np.ndarray
    test_y: np.ndarray


def load_real_data(quick: bool = False, seed: int = 0) -> RealData:
    """Load the bundled photograph and digits; split the digits 80/20 with ``seed``."""
    from skimage import data as skdata
    from sklearn.datasets import load_digits

    img = np.ascontiguousarray(skdata.camera())  # a PNG inside the scikit-image wheel
    if quick:
        img = np.ascontiguousarray(img[::4, ::4])
    d = load_digits()  # a CSV inside the scikit-learn wheel: 1797 handwritten 8x8 digits
    perm = np.random.default_rng(seed).permutation(len(d.target))
    n_test = 120 if quick else 360
    te, tr = perm[:n_test], perm[n_test:]
    x = d.data.astype(np.float64)
    return RealData(img, x[tr], d.target[tr], x[te], d.target[te])


def _layer_norm64(x: np.ndarray) -> np.ndarray:
    return (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + EPS)


def train_mlp(x: np.ndarray, y: np.ndarray, seed: int = 0, hidden: int = 32, steps: int = 300) -> dict[str, np.ndarray]:
    """Train a 64-``hidden``-10 ReLU MLP on layer-normed digits in float64 NumPy (full-batch
    Adam, cross-entropy, fixed seed; ~0.3 s). Returns float32 ``w1 (64, hidden)``,
    ``b1 (hidden,)``, ``w2 (hidden, 10)``, ``b2 (10,)``."""
    rng = np.random.default_rng(seed)
    a = _layer_norm64(x)
    params = [rng.standard_normal((a.shape[1], hidden)) * np.sqrt(2 / a.shape[1]), np.zeros(hidden),
              rng.standard_normal((hidden, 10)) * np.sqrt(2 / hidden), np.zeros(10)]
    m1 = [np.zeros_like(p) for p in params]
    m2 = [np.zeros_like(p) for p in params]
    onehot = np.eye(10)[y]
    for t in range(1, steps + 1):
        w1, b1, w2, b2 = params
        h = np.maximum(a @ w1 + b1, 0)
        z = h @ w2 + b2
        z -= z.max(1, keepdims=True)
        pr = np.exp(z)
        pr /= pr.sum(1, keepdims=True)
        g = (pr - onehot) / len(a)
        gh = (g @ w2.T) * (h > 0)
        grads = [a.T @ gh + 1e-4 * w1, gh.sum(0), h.T @ g + 1e-4 * w2, g.sum(0)]
        for i, gr in enumerate(grads):
            m1[i] = 0.9 * m1[i] + 0.1 * gr
            m2[i] = 0.999 * m2[i] + 0.001 * gr * gr
            params[i] -= 0.01 * (m1[i] / (1 - 0.9**t)) / (np.sqrt(m2[i] / (1 - 0.999**t)) + 1e-8)
    return {k: v.astype(np.float32) for k, v in zip(("w1", "b1", "w2", "b2"), params, strict=True)}


def _bits_equal(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a.view(np.uint8), b.view(np.uint8))


def _exact(name: str, ref: np.ndarray) -> Callable[[np.ndarray, int | None], tuple[bool, str]]:
    def check(got: np.ndarray, w: int | None) -> tuple[bool, str]:
        ok = _bits_equal(got, ref)
        if ok:
            return True, f"{name}: bit-identical to NumPy ({ref.size:,} values)"
        bad = np.count_nonzero(np.asarray(got).view(np.uint8) != np.asarray(ref).view(np.uint8)) \
            if np.shape(got) == ref.shape and np.asarray(got).dtype == ref.dtype else ref.size
        return False, f"{name}: {bad} differing bytes vs NumPy"
    return check


@dataclass
class Stage:
    """One step of the real-data pipeline: ``run(state, target, W) -> output`` (``state`` holds
    earlier stages' outputs of the same target/W) and ``check(output, W) -> (ok, detail)``."""

    key: str
    kernels: str
    run: Callable[[dict[str, np.ndarray], str, int | None], np.ndarray]
    check: Callable[[np.ndarray, int | None], tuple[bool, str]]
    w_dependent: bool = False


def build_stages(data: RealData, weights: dict[str, np.ndarray]) -> tuple[list[Stage], dict[str, object]]:
    """The pipeline stages and their independent NumPy references (computed here, once)."""
    import anywave.kernels as K
    from anywave.kernels import reference as R
    from anywave.kernels.linalg import row_block

    img = data.image.astype(np.float32)
    gw = K.gaussian_kernel5(GAUSS_SIGMA)
    ref: dict[str, object] = {}
    ref["blur"] = R.gaussian5_f32(img, gw)
    ref["edges"] = R.sobel_f32(ref["blur"])
    ref["histogram"] = np.bincount(data.image.ravel(), minlength=256).astype(np.uint32)
    ref["cdf"] = R.prefix_sum_u32(ref["histogram"])
    ref["transpose"] = np.ascontiguousarray(img.T)
    ref["sort"] = np.sort(ref["edges"].ravel())
    diff = (img + (-ref["blur"])).astype(np.float32)
    ref["unsharp"] = (np.float32(1.5) * diff + img).astype(np.float32)
    z = ((img - np.float32(128)) / np.float32(64)).astype(np.float32)
    ref["relu"] = np.where(z > 0, z, np.float32(0)).astype(np.float32)
    gelu_ref, gelu_tol = R.gelu_f32(z)
    xt = data.test_x.astype(np.float32)
    ones, zeros = np.ones(64, np.float32), np.zeros(64, np.float32)
    ref["layer_norm"] = R.layer_norm_f32(xt, ones, zeros, EPS, row_block(64))
    ref["dense1"] = R.matmul_f32(ref["layer_norm"], weights["w1"], weights["b1"], relu=True)
    ref["logits"] = R.matmul_f32(ref["dense1"], weights["w2"], weights["b2"])
    ref["softmax"] = R.softmax_f32(ref["logits"], row_block(10))
    n_pix = img.size
    bright = (img / np.float32(255)).astype(np.float32)  # brightness in [0, 1]: a sum that rounds

    def check_cdf(got: np.ndarray, w: int | None) -> tuple[bool, str]:
        ok = np.array_equal(got, ref["cdf"])
        median = int(np.searchsorted(got, (n_pix + 1) // 2))
        return ok, f"median intensity {median} (NumPy {int(np.median(data.image))})" + ("" if ok else ", MISMATCH")

    def check_mean(got: np.ndarray, w: int | None) -> tuple[bool, str]:
        expect = R.sum_f32(bright)
        ok = got[0].view(np.uint32) == expect.view(np.uint32)
        exact_mean = bright.astype(np.float64).mean()
        if not ok:
            return False, f"sum differs from the NumPy pairwise-tree simulation: {got[0]!r} vs {expect!r}"
        return True, (f"mean brightness {float(got[0]) / n_pix:.7f} (exact {exact_mean:.7f}); "
                      "sum bit-identical to the pairwise-tree simulation (W-invariant)")

    def check_sort(got: np.ndarray, w: int | None) -> tuple[bool, str]:
        ok = _bits_equal(got, ref["sort"])
        p90 = float(got[int(0.9 * (got.size - 1))])
        return ok, f"{got.size:,} edge strengths sorted; 90th percentile {p90:.2f}" + ("" if ok else ", MISMATCH")

    def check_gelu(got: np.ndarray, w: int | None) -> tuple[bool, str]:
        tol = gelu_tol
        err = np.abs(got.astype(np.float64) - gelu_ref)
        ok = bool(np.all(err <= tol))
        return ok, f"within 4 ulp of x / (1 + exp(-2u)) in float64 (max |err| {err.max():.2e})"

    def check_softmax(got: np.ndarray, w: int | None) -> tuple[bool, str]:
        r = ref["softmax"]
        ulps = float((np.abs(got - r) / np.spacing(r)).max())
        acc = float((got.argmax(1) == data.test_y).mean())
        same_pred = bool(np.array_equal(got.argmax(1), r.argmax(1)))
        ok = ulps <= 6 and same_pred
        return ok, f"test accuracy {acc:.1%} on {len(data.test_y)} digits; <= {ulps:.0f} ulp from NumPy (bound 6)"

    def check_logits(got: np.ndarray, w: int | None) -> tuple[bool, str]:
        ok, detail = _exact("logits", ref["logits"])(got, w)
        h = np.maximum(_layer_norm64(data.test_x) @ weights["w1"].astype(np.float64) + weights["b1"], 0)
        plain = h @ weights["w2"].astype(np.float64) + weights["b2"]
        return ok, f"{detail}; max |logit - float64 forward pass| {np.abs(got - plain).max():.1e}"

    kw = lambda t, w: {"target": t, "wave_width": w}  # noqa: E731
    stages = [
        Stage("blur", "gaussian_blur5", lambda s, t, w: K.gaussian_blur5(img, gw, **kw(t, w)),
              _exact("5x5 Gaussian blur", ref["blur"])),
        Stage("edges", "sobel_magnitude", lambda s, t, w: K.sobel_magnitude(s["blur"], **kw(t, w)),
              _exact("Sobel magnitude", ref["edges"])),
        Stage("histogram", "histogram", lambda s, t, w: K.histogram(data.image, 256, **kw(t, w)),
              _exact("256-bin intensity histogram", ref["histogram"])),
        Stage("cdf", "prefix_sum", lambda s, t, w: K.prefix_sum(s["histogram"], **kw(t, w)), check_cdf),
        Stage("mean", "sum_f32", lambda s, t, w: np.array([K.sum_f32(bright, **kw(t, w))], np.float32), check_mean),
        Stage("transpose", "transpose", lambda s, t, w: K.transpose(img, **kw(t, w)),
              _exact("transpose", ref["transpose"])),
        Stage("sort", "bitonic_sort", lambda s, t, w: K.bitonic_sort(s["edges"].ravel(), block=1024, **kw(t, w)),
              check_sort),
        Stage("unsharp", "vector_add, saxpy",
              lambda s, t, w: K.saxpy(1.5, K.vector_add(img, -s["blur"], **kw(t, w)), img, **kw(t, w)),
              _exact("unsharp mask", ref["unsharp"])),
        Stage("relu", "relu", lambda s, t, w: K.relu(z, **kw(t, w)), _exact("ReLU", ref["relu"])),
        Stage("gelu", "gelu", lambda s, t, w: K.gelu(z, **kw(t, w)), check_gelu),
        Stage("layer_norm", "layer_norm", lambda s, t, w: K.layer_norm(xt, ones, zeros, EPS, **kw(t, w)),
              _exact("digits layer norm", ref["layer_norm"])),
        Stage("dense1", "matmul (+bias, ReLU)",
              lambda s, t, w: K.matmul(s["layer_norm"], weights["w1"], weights["b1"], relu=True, **kw(t, w)),
              _exact("hidden layer", ref["dense1"])),
        Stage("logits", "matmul (+bias)",
              lambda s, t, w: K.matmul(s["dense1"], weights["w2"], weights["b2"], **kw(t, w)), check_logits),
        Stage("softmax", "softmax_rows", lambda s, t, w: K.softmax_rows(s["logits"], **kw(t, w)), check_softmax),
    ]
    return stages, ref


@dataclass
class StageRun:
    stage: str
    target: str
    wave_width: int | None
    ok: bool
    detail: str
    seconds: float
    digest: str


def _digest(a: np.ndarray) -> str:
    import hashlib

    a = np.ascontiguousarray(a)
    return hashlib.sha256(str(a.dtype).encode() + str(a.shape).encode() + a.tobytes()).hexdigest()[:16]


def _target_widths(target: str, widths: tuple[int, ...]) -> list[int | None]:
    from anywave.jit.targets import get_target

    supported = getattr(get_target(target), "wave_widths", None)
    if supported is None:  # the emulator runs any W
        return list(widths)
    return [w for w in widths if w in supported] or [None]


def write_image(path: str, image: np.ndarray, blurred: np.ndarray, edges: np.ndarray) -> None:
    """Save original | blurred | edges (uint8 grey, 8-pixel white gaps) as a PNG, each panel
    labelled in a white strip above it (PIL's bundled default font)."""
    from PIL import Image, ImageDraw, ImageFont

    def u8(a: np.ndarray) -> np.ndarray:
        return np.clip(np.rint(a), 0, 255).astype(np.uint8)

    scale = 255.0 / max(float(np.percentile(edges, 99.5)), 1e-6)
    gap = np.full((image.shape[0], 8), 255, np.uint8)
    panels = [("original (camera)", image), ("Gaussian blur (WAVE)", u8(blurred)),
              ("Sobel edges (WAVE)", u8(edges * scale))]
    row = np.hstack([p for _, img in panels for p in (img, gap)][:-1])
    strip = 24
    canvas = Image.new("L", (row.shape[1], row.shape[0] + strip), 255)
    canvas.paste(Image.fromarray(row), (0, strip))
    draw = ImageDraw.Draw(canvas)
    font = ImageFont.load_default()
    x = 0
    for label, img in panels:
        draw.text((x + 4, 5), label, fill=0, font=font)
        x += img.shape[1] + gap.shape[1]
    canvas.save(path)  # greyscale ("L")


class _Plain:
    """Progress/printing without rich."""

    def __init__(self) -> None:
        self.print = print

    def start(self, total: int) -> None:
        self.total, self.done = total, 0

    def step(self, what: str) -> None:
        self.done += 1
        print(f"[{self.done}/{self.total}] {what}", flush=True)

    def stop(self) -> None:
        pass


class _Rich:
    def __init__(self) -> None:
        from rich.console import Console

        self.console = Console()

    def print(self, *objs: object) -> None:
        self.console.print(*objs, soft_wrap=True, markup=False, highlight=False)

    def start(self, total: int) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.progress = Progress(TextColumn("{task.description:<44}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), console=self.console, transient=True)
        self.progress.start()
        self.task = self.progress.add_task("real data", total=total)

    def step(self, what: str) -> None:
        self.progress.update(self.task, advance=1, description=what)

    def stop(self) -> None:
        self.progress.stop()


def main(widths: tuple[int, ...] = WAVE_WIDTHS, seed: int = 0, out_dir: str = "anywave-demo", quick: bool = False,
         progress: bool = True, targets: list[str] | None = None) -> int:
    """Run the whole demo (assembly examples, then the real-data pipeline on every target and
    W); print the report; return the exit status (0 all checks pass, 1 otherwise)."""
    import json
    import os

    from anywave.jit.targets import available_targets

    missing = missing_extras()
    ui: _Plain | _Rich = _Rich() if progress and "rich" not in missing else _Plain()
    t_start = time.perf_counter()
    ui.print("[1/2] bundled assembly examples (emulator)")
    asm_runs = run_demo(widths, seed=seed, out=ui.print)
    asm_ok = all(r.ok for r in asm_runs)
    need = [m for m in missing if m != "rich"]
    if need:
        ui.print(f"\nthe real-data part needs the demo extra: pip install 'anywave[demo]' (missing: {', '.join(need)})")
        return 1

    avail = available_targets()
    targets = list(targets) if targets else avail
    unknown = [t for t in targets if t not in avail]
    if unknown:
        ui.print(f"\ntarget(s) not available here: {', '.join(unknown)}; available: {', '.join(avail)}")
        return 1
    ui.print(f"\n[2/2] real data through WAVE kernels — targets: {', '.join(targets)}; "
             f"wave widths: {', '.join(map(str, widths))}")
    t0 = time.perf_counter()
    data = load_real_data(quick, seed)
    weights = train_mlp(data.train_x, data.train_y, seed)
    t_train = time.perf_counter() - t0
    ui.print(f"  camera photograph {data.image.shape[1]}x{data.image.shape[0]} (scikit-image), "
             f"{len(data.train_y) + len(data.test_y)} digits (scikit-learn); MLP 64-32-10 trained in NumPy "
             f"in {t_train:.2f}s")
    stages, _ = build_stages(data, weights)
    plan = [(t, w) for t in targets for w in _target_widths(t, widths)]
    runs: list[StageRun] = []
    first_outputs: dict[str, np.ndarray] = {}
    ui.start(len(plan) * len(stages))
    try:
        for t, w in plan:
            state: dict[str, np.ndarray] = {}
            for st in stages:
                ui.step(f"{t} W={w}: {st.kernels}")
                s0 = time.perf_counter()
                try:
                    outv = st.run(state, t, w)
                except Exception as e:  # a crash in one kernel is a failed check, the demo goes on
                    runs.append(StageRun(st.key, t, w, False, f"{type(e).__name__}: {e}", 0.0, "error"))
                    break
                dt = time.perf_counter() - s0
                state[st.key] = outv
                ok, detail = st.check(outv, w)
                runs.append(StageRun(st.key, t, w, ok, detail, dt, _digest(outv)))
            if not first_outputs:
                first_outputs = state
    finally:
        ui.stop()

    # ---- report: per stage, per target/W times, check, identity across targets and widths
    problems: list[str] = []
    cols = [f"{t} W={w}" for t, w in plan]
    ui.print("")
    header = f"{'kernel':<22}" + "".join(f"{c:>16}" for c in cols) + "  across targets/W"
    ui.print(header)
    identity: dict[str, str] = {}
    for st in stages:
        rs = [r for r in runs if r.stage == st.key]
        cells = []
        for t, w in plan:
            r = next((r for r in rs if r.target == t and r.wave_width == w), None)
            cells.append("—" if r is None else f"{r.seconds:.3f}s {'ok' if r.ok else 'FAIL'}")
        digests = {r.digest for r in rs}
        if st.w_dependent:
            by_w = {w: {r.digest for r in rs if r.wave_width == w} for w in {r.wave_width for r in rs}}
            same_per_w = all(len(v) == 1 for v in by_w.values())
            if len(digests) == 1:
                ident = "identical on these data (the order is W-dependent by design)"
            elif same_per_w:
                ident = "W-dependent by design (expected); identical across targets at each W"
            else:
                ident = "DIFFERS across targets at one W"
                problems.append(f"{st.key}: outputs differ across targets at one wave width")
        else:
            ident = "bit-identical" if len(digests) == 1 else "DIFFERS"
            if len(digests) != 1:
                problems.append(f"{st.key}: outputs differ across targets/wave widths")
        identity[st.key] = ident
        line = f"{st.kernels:<22}" + "".join(f"{c:>16}" for c in cells) + f"  {ident}"
        ui.print(line)
    totals = "".join(f"{sum(r.seconds for r in runs if r.target == t and r.wave_width == w):>15.2f}s"
                     for t, w in plan)
    line = f"{'total':<22}" + totals
    ui.print(line)
    ui.print("")
    for st in stages:  # one detail line per stage (from the first target/W)
        r = next((r for r in runs if r.stage == st.key), None)
        if r is not None:
            ui.print(f"  {st.key:<11} {r.detail}")
    for r in runs:
        if not r.ok:
            problems.append(f"{r.stage} on {r.target} W={r.wave_width}: {r.detail}")
    if not asm_ok:
        problems.append("an assembly example differs from its NumPy reference")

    os.makedirs(out_dir, exist_ok=True)
    png = os.path.join(out_dir, "camera_blur_edges.png")
    if "blur" in first_outputs and "edges" in first_outputs:
        write_image(png, data.image, first_outputs["blur"], first_outputs["edges"])
    summary = {
        "targets": targets, "wave_widths": list(widths), "quick": quick, "seed": seed,
        "image_shape": list(data.image.shape), "digits_test": len(data.test_y),
        "runs": [vars(r) for r in runs], "identity": identity,
        "assembly_examples": [vars(r) for r in asm_runs], "problems": problems,
        "seconds": time.perf_counter() - t_start,
    }
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump(summary, f, indent=1, default=str)
    ui.print("")
    if problems:
        ui.print(f"{len(problems)} problem(s):")
        for p in problems:
            ui.print(f"  - {p}")
    else:
        ui.print(f"all checks passed: {len(runs)} kernel runs on {len(plan)} target/W combinations match NumPy; "
                 "outputs are bit-identical across targets and wave widths")
    ui.print(f"wrote {os.path.abspath(png)} (original | blurred | edges) and results.json "
             f"in {time.perf_counter() - t_start:.1f}s")
    return 1 if problems else 0


_HELP = """\
Run real data through WAVE kernels on every available target and check the results.

1. Assembly examples: the bundled .wave kernels at every wave width on the reference
   emulator, every output checked bit for bit against NumPy.
2. Real data (needs the demo extra: pip install 'anywave[demo]'): scikit-image's camera
   photograph through blur, Sobel edges, histogram, prefix sum, reduction, transpose,
   bitonic sort, unsharp mask, ReLU/GELU; scikit-learn's digits through layer norm and a
   64-32-10 MLP. Every kernel runs on every available target at every wave width; the demo
   reports time per target and W and whether outputs are bit-identical, and writes a
   labelled PNG (original | blurred | edges) and results.json to --out.

Exit status 1 on any mismatch.
"""


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser("demo", help="run the bundled examples and real data through every available target",
                              description=_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--wave-width", type=int, action="append", choices=WAVE_WIDTHS,
                   help="wave width(s) to run (default: all)")
    p.add_argument("--seed", type=int, default=0, help="random seed for the input data and the classifier")
    p.add_argument("--out", default="anywave-demo", metavar="DIR",
                   help="where to write the processed image and results.json (default: ./anywave-demo)")
    p.add_argument("--quick", action="store_true",
                   help="a fast subset: smaller image and test set, wave widths 8 and 64 unless given")
    p.add_argument("--no-progress", action="store_true", help="plain output without a progress bar")
    p.add_argument("--target", action="append", metavar="NAME",
                   help="target(s) to run the real-data part on (default: every available one)")
    return p


def run(args: argparse.Namespace) -> int:
    if args.wave_width:
        widths = tuple(sorted(set(args.wave_width)))
    else:
        widths = (8, 64) if args.quick else WAVE_WIDTHS
    return main(widths=widths, seed=args.seed, out_dir=args.out, quick=args.quick,
                          progress=not args.no_progress, targets=args.target)
