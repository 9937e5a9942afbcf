"""The README's speed table and a bar chart of the ratios, from a ``bench_speed.py`` JSON.

    python bench/speed_report.py bench/results/speed_2026-12-01.json [--png OUT.png] [--readme README.md]

``--readme`` rewrites the block between ``<!-- speed-table:begin -->`` and
``<!-- speed-table:end -->`` in place; without it the table is printed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

BEGIN, END = "<!-- speed-table:begin -->", "<!-- speed-table:end -->"


def rows(r: dict[str, Any]) -> list[tuple[str, str, str, float, str]]:
    """(what, anywave, peer, ratio, bits) per benchmark."""
    out = []
    g = r.get("gemm", {})
    for size in ("4096", "8192"):
        e = g.get(size)
        if not isinstance(e, dict) or "times" not in e:
            continue
        t, best = e["times"], e["best"]
        cfg = G_CONFIGS(g)[int(best.removeprefix("anywave_cfg"))]
        bits = "bit-exact vs sequential fma" if e.get("bit_exact_vs_sequential_fma_64_rows") else ""
        if size == "8192":
            bits = "configs: same bits" if all(v for k, v in g.get("4096", {}).items() if "same_bits" in k) else ""
        out.append((f"fp32 GEMM {size}³ (`kernels.gemm`, {cfg['bm']}x{cfg['bn']}x{cfg['bk']})",
                    f"{t[best]['tflop_per_s']:.1f} TFLOP/s", f"cuBLAS (TF32 off) {t['cublas']['tflop_per_s']:.1f}",
                    e["ratio_best_over_cublas"], bits))
    el = r.get("elementwise", {})
    specs = [("add", "add 2^28 f32 (`vec.add4`)", "torch", "torch.add", "add4_per2_bit_exact_vs_torch"),
             ("saxpy", "saxpy 2^28 f32 (`vec.saxpy4`)", "torch_add_alpha", "torch add_(alpha)",
              "saxpy4_bit_exact_vs_torch_y_plus_a_times_x"),
             ("gelu", "GELU 2^28 f32 (`vec.gelu4`, sigmoid form, exact-class exp)", "torch", "torch gelu(tanh)",
              "gelu4_bit_exact_vs_emulator_first_2^16"),
             ("sum", "sum 2^28 f32 (`vec.sum4`)", "torch", "torch.sum", None)]
    for key, what, peer, pname, check in specs:
        d = el.get(key)
        if not isinstance(d, dict) or "times" not in d:
            continue
        t = d["times"]
        best = d.get("best", "anywave")
        out.append((what, f"{t[best]['tb_per_s']:.2f} TB/s", f"{pname} {t[peer]['tb_per_s']:.2f}",
                    t[best]["tb_per_s"] / t[peer]["tb_per_s"], "bit-exact" if check and el.get(check) else ""))
    rw = r.get("rows", {})
    for key, what, pname in (("softmax", "row softmax 32768x4096 (`vec.softmax4`)", "torch.softmax"),
                             ("layer_norm", "layer norm 32768x4096 (`vec.layer_norm4`)", "torch layer_norm")):
        d = rw.get(key)
        if not isinstance(d, dict) or "times" not in d:
            continue
        t = d["times"]
        out.append((what, f"{t[d['best']]['tb_per_s']:.2f} TB/s", f"{pname} {t['torch']['tb_per_s']:.2f}",
                    d["over_torch"], "bit-exact vs emulator"))
    return out


def G_CONFIGS(g: dict[str, Any]) -> list[dict[str, int]]:  # noqa: N802 - the configs recorded in the run
    return g.get("configs", [])


def table(r: dict[str, Any]) -> str:
    env = r.get("environment", {})
    dev = env.get("device", {}).get("name", "?")
    head = (f"{dev}, driver CUDA {env.get('driver_cuda_version', '?')}, torch {env.get('torch', '?')}, "
            f"triton {env.get('triton', '?')}, anywave {env.get('anywave_commit', '?')}, {env.get('date', '?')[:10]} "
            "(medians of interleaved rounds, CUDA events, L2 scrubbed; `bench/bench_speed.py`)")
    lines = [head, "", "| kernel (written in anywave's Python language) | anywave | peer | ratio | bits |",
             "|---|---|---|---|---|"]
    for what, ours, peer, ratio, bits in rows(r):
        lines.append(f"| {what} | {ours} | {peer} | {ratio:.2f} | {bits} |")
    return "\n".join(lines)


def chart(r: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = rows(r)
    fig, ax = plt.subplots(figsize=(9, 0.45 * len(data) + 1.2))
    names = [d[0].split(" (")[0] for d in data]
    ratios = [d[3] for d in data]
    ax.barh(names[::-1], ratios[::-1], color=["#3a7" if x >= 0.95 else "#d84" for x in ratios[::-1]])
    ax.axvline(1.0, color="k", lw=0.8)
    for y, x in enumerate(ratios[::-1]):
        ax.text(x + 0.01, y, f"{x:.2f}", va="center")
    ax.set_xlabel("anywave / peer (same run)")
    env = r.get("environment", {})
    ax.set_title(f"{env.get('device', {}).get('name', '?')}, {env.get('date', '?')[:10]}, "
                 f"anywave {env.get('anywave_commit', '?')}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json")
    ap.add_argument("--png")
    ap.add_argument("--readme")
    ns = ap.parse_args(argv)
    r = json.loads(Path(ns.json).read_text())
    t = table(r)
    if ns.png:
        chart(r, Path(ns.png))
    if ns.readme:
        p = Path(ns.readme)
        text = p.read_text()
        if BEGIN not in text or END not in text:
            print(f"{p}: no {BEGIN} ... {END} block", file=sys.stderr)
            return 1
        pre, rest = text.split(BEGIN, 1)
        _, post = rest.split(END, 1)
        p.write_text(f"{pre}{BEGIN}\n{t}\n{END}{post}")
    else:
        print(t)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
