"""``torch.ops.anywave.gemm_mma``: the bf16/f16 fragment GEMM (:mod:`anywave.kernels.gemm_mma`)
as a PyTorch operator.

``gemm_mma(a, b, bias=None, gelu=False) -> Tensor``: ``a`` (M, K) and ``b`` (K, N) both bf16 or
both f16, ``bias`` (N,) f32 or None; returns ``a @ b (+ bias) (GELU, tanh form)`` as float32
(M, N). Accuracy: class ``bounded`` (docs/spec.md §8.13, per 16-deep step). CUDA tensors run on
the ``cuda`` target on PyTorch's current stream (tensor cores: ``wgmma`` through
:mod:`anywave.kernels.gemm_group` on sm_90, ``mma.sync`` through ``gemm_tiled_kernel`` elsewhere); CPU tensors
on the CPU target of :func:`anywave.torch.ops.set_cpu_target`. Shapes that are not multiples of
the tile are padded with zeros (a copy); an empty M, N or K gives zeros (plus the bias), as
``torch.matmul`` does. ``import anywave.torch.ops`` registers it. Raises :class:`~anywave.torch.ops.OpDtypeError` /
:class:`~anywave.torch.ops.OpInputError`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from anywave.backends import ptx_mma
from anywave.jit.targets import get_target
from anywave.kernels.gemm_group import BN as GROUP_BN
from anywave.kernels.gemm_group import gemm_group_kernel
from anywave.kernels.gemm_mma import gemm_frag_kernel, gemm_tiled_kernel
from anywave.runtime import targets as rt
from anywave.runtime.cuda import WAVE_WIDTH as CUDA_WAVE_WIDTH
from anywave.torch import placement as O
from anywave.torch.custom_ops import _cpu_choice

#: tiling of the CUDA launches (gemm_tiled_kernel): 8 waves of 32 lanes, 128 x 256 per workgroup,
#: each wave 64 x 64, K slices of 32 copied with aw.async_copy (cp.async) into a ring of 4 local
#: buffers, blocks visited in groups of 8 rows (the fastest measured on the H200,
#: bench/results/gpu_mma.json: variant async_128x256_g8_k32_s4)
TILE = {"TM": 4, "TN": 4, "WM": 2, "WN": 4, "GM": 8, "BK": 32, "STAGES": 4}
#: the sm_90 launches (gemm_group_kernel: mma.group is wgmma there): 128 x 256 per workgroup of 8
#: waves, each a 16 x 256 strip, K slices of 64 in a ring of 4, the products asynchronous (a
#: slice's wgmma run on into the next slice's barrier and copies). The fastest measured on the
#: H200: bench/results/gpu_group_gemm_9c75f6c.json, variant group_async_k64_s4: 654.5 TFLOP/s,
#: 0.882 of cuBLAS bf16 at 8192³ in the same run
GROUP_TILE = {"GR": 2, "GM": 8, "BK": 64, "STAGES": 4, "ASYNC": True}
#: tiling on CPU targets (fewer registers; W = 8 uses the direct-load kernel, its copies need too many)
CPU_TILE = {"TM": 4, "TN": 2, "WM": 2, "WN": 4}


def _check(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None) -> tuple[int, int, int]:
    for name, t in (("a", a), ("b", b)):
        if not isinstance(t, torch.Tensor) or t.dtype not in (torch.bfloat16, torch.float16):
            got = t.dtype if isinstance(t, torch.Tensor) else type(t).__name__
            raise O.OpDtypeError(f"anywave.gemm_mma: {name} has dtype {got}; supported: torch.bfloat16, torch.float16")
        if t.dim() != 2:
            raise O.OpInputError(f"anywave.gemm_mma: {name} must be 2-D, got shape {tuple(t.shape)}")
    if a.dtype != b.dtype:
        raise O.OpDtypeError(f"anywave.gemm_mma: a is {a.dtype} but b is {b.dtype}; they must match")
    if a.shape[1] != b.shape[0]:
        raise O.OpInputError(f"anywave.gemm_mma: a is {tuple(a.shape)} but b is {tuple(b.shape)}; the inner sizes "
                             "must match")
    n = int(b.shape[1])
    if bias is not None:
        if bias.dtype != torch.float32 or tuple(bias.shape) != (n,):
            raise O.OpInputError(f"anywave.gemm_mma: bias must be float32 of shape ({n},), got {bias.dtype} "
                                 f"{tuple(bias.shape)}")
    return int(a.shape[0]), n, int(a.shape[1])


@torch.library.custom_op("anywave::gemm_mma", mutates_args=())
def gemm_mma(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None = None, gelu: bool = False) -> torch.Tensor:
    """``a @ b (+ bias) (GELU)`` on MMA fragments; float32 (M, N). See the module docstring."""
    m, n, k = _check(a, b, bias)
    dev = O._same_device("gemm_mma", a=a, b=b) if bias is None else O._same_device("gemm_mma", a=a, b=b, bias=bias)
    if m == 0 or n == 0 or k == 0:  # as torch.matmul: an empty sum is 0 (then the bias and GELU)
        out = torch.zeros((m, n), dtype=torch.float32, device=dev)
        if bias is not None:
            out = out + bias
        if gelu:
            out = 0.5 * out * (1.0 + torch.tanh(0.7978845608 * (out + 0.044715 * out * out * out)))
        return out
    cuda = dev.type == "cuda"
    w = CUDA_WAVE_WIDTH if cuda else int(O.current_cpu_target().info.wave_width)
    index = (dev.index if dev.index is not None else torch.cuda.current_device()) if cuda else 0
    group = cuda and O._cuda_target(index).device.props.arch == f"sm_{ptx_mma.WGMMA_ARCH}"
    p = GROUP_TILE if group else TILE if cuda else CPU_TILE
    bm, bn = (64 * p["GR"], GROUP_BN) if group else (16 * p["TM"] * p["WM"], 16 * p["TN"] * p["WN"])
    bk = max(2, p.get("STAGES", 0)) * p.get("BK", 32)  # K slices per loop trip: 2, or the ring's STAGES
    mp, np_, kp = -(-m // bm) * bm, -(-n // bn) * bn, -(-k // bk) * bk
    ap = F.pad(a, (0, kp - k, 0, mp - m)) if (mp, kp) != (m, k) else a.contiguous()
    bp = F.pad(b, (0, np_ - n, 0, kp - k)) if (kp, np_) != (k, n) else b.contiguous()
    bv = torch.zeros(np_, dtype=torch.float32, device=dev)
    if bias is not None:
        bv[:n] = bias
    out = torch.empty((mp, np_), dtype=torch.float32, device=dev)
    waves = 4 * p["GR"] if group else p["WM"] * p["WN"]
    flags = {"use_bias": bias is not None, "gelu": bool(gelu), "f16": a.dtype == torch.float16}
    grid = (np_ // bn, mp // bm, 1)
    tiled = w >= 16  # the tiled kernels unroll their copies for the wave width W
    kern = gemm_group_kernel if group else gemm_tiled_kernel if tiled else gemm_frag_kernel
    consts = {**p, **({"W": w} if tiled else {}), **flags}
    if cuda:  # tensor cores: wgmma (sm_90), else mma.sync + ldmatrix; a repeated call launches from the
        # kernel's launch plan (anywave.jit.launch) on the tensors' current stream
        # (the kernel call checks dtypes: the packed operands are its u32 / u16 buffers)
        packed = torch.uint32 if tiled else torch.uint16
        with torch.cuda.device(index):
            kern(ap.view(packed), bp.view(packed), bv, out, mp, np_, kp, grid=grid, workgroup=(waves * w, 1, 1),
                 target="cuda", **consts)
    else:
        view = torch.int32 if tiled else torch.int16
        host = {"a": ap.view(view).numpy(), "b": bp.view(view).numpy(), "bias": bv.numpy(), "c": out.numpy(),
                "m": mp, "n": np_, "k": kp}
        # the packed operands are int views of the u32/u16 words: the module-level front door
        # (anywave.jit.targets.Target.launch), where the driver checks the ABI, not the kernel call's dtypes
        module = kern.compile(**consts)
        name = _cpu_choice(None, None)[0]
        if name == rt.HOST:  # the best target on the host CPU that runs fragments
            name = rt.serving_name(module, module.kernel(kern.name), host=True, workgroup=(waves * w, 1, 1))
        get_target(name).launch(module, kern.name, grid=grid, workgroup=(waves * w, 1, 1), args=host, wave_width=w)
    return out[:m, :n].contiguous() if (mp, np_) != (m, n) else out


@gemm_mma.register_fake
def _(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None = None, gelu: bool = False) -> torch.Tensor:
    m, n, _k = _check(a, b, bias)
    return a.new_empty((m, n), dtype=torch.float32)
