"""The wave barrier end to end (issue 28 item 2; spec §7.10): a warp-synchronous reduction tail on
local memory -- ``aw.wave_barrier()`` in the Python language, ``__syncwarp()`` with ``volatile``
shared memory in CUDA -- gives the workgroup sums NumPy computes, at every W on the emulator and
on the compiled targets; the same code without the barrier is a data race the checked emulator
reports; CUDA's pre-Volta idiom (volatile without ``__syncwarp``) is refused at compile time."""

from __future__ import annotations

import numpy as np
import pytest

import anywave as aw
from anywave.errors import EmulationError
from tiers import cases

WS = (8, 16, 32, 64)
WG, GRID = 128, 4
#: the emulator at every W; OpenCL, cpu and SYCL at their default-tier W (every W in the sweep
#: tier); Vulkan (lavapipe) at W = 8, the one width it offers
RUNTIMES = [("emulator", w) for w in WS] + cases(
    [(t, w) for t in ("opencl", "cpu", "sycl") for w in WS] + [("vulkan", 8)])


def _param(p):  # noqa: ANN001, ANN202
    vals = p.values if hasattr(p, "values") else p
    return pytest.param(*vals, marks=getattr(p, "marks", ()), id=f"{vals[0]}-W{vals[1]}")


RUNTIMES = [_param(p) for p in RUNTIMES]


@aw.kernel
def tail_sum(x: aw.In[aw.i32], out: aw.Out[aw.i32], *, sync: bool = True):
    """Block reduction of 128 values: halving steps with workgroup barriers down to W partial
    sums, then the warp-synchronous tail in the first wave, ordered by wave barriers."""
    s = aw.local_array(aw.i32, 128)
    t = aw.local_id(0)
    s[t] = x[aw.global_id(0)]
    aw.barrier()
    W = aw.wave_width()
    off = aw.workgroup_size(0) // 2
    while off >= W:
        if t < off:
            s[t] += s[t + off]
        aw.barrier()
        off //= 2
    if t < W:
        v = s[t]
        off = W // 2
        while off > 0:
            v += s[t + off]
            if sync:
                aw.wave_barrier()
            s[t] = v
            if sync:
                aw.wave_barrier()
            off //= 2
    if t == 0:
        out[aw.workgroup_id(0)] = s[0]


CUDA = r"""
__global__ void tail_sum(const int* x, int* out) {
    __shared__ int s[128];
    unsigned t = threadIdx.x;
    s[t] = x[blockIdx.x * blockDim.x + t];
    __syncthreads();
    for (unsigned off = blockDim.x / 2; off >= (unsigned)warpSize; off >>= 1) {
        if (t < off) s[t] += s[t + off];
        __syncthreads();
    }
    if (t < (unsigned)warpSize) {
        VOL int* vs = s;
        int v = vs[t];
        for (int off = warpSize / 2; off > 0; off >>= 1) {
            v += vs[t + off];
            SYNC;
            vs[t] = v;
            SYNC;
        }
    }
    if (t == 0) out[blockIdx.x] = s[0];
}
"""


def _cuda(sync: bool, vol: bool):  # noqa: ANN202
    pytest.importorskip("clang.cindex", reason="libclang is not installed (pip install 'anywave[cuda-frontend]')")
    return aw.cuda_kernel(CUDA, "tail_sum", clang_args=(f"-DSYNC={'__syncwarp()' if sync else ''}",
                                                        f"-DVOL={'volatile' if vol else ''}"))


def _data() -> tuple[np.ndarray, np.ndarray]:
    x = np.random.default_rng(28).integers(-(1 << 28), 1 << 28, WG * GRID).astype(np.int32)
    exp = x.reshape(GRID, WG).astype(np.int64).sum(axis=1)
    return x, ((exp + (1 << 31)) % (1 << 32) - (1 << 31)).astype(np.int32)


def _available(target: str) -> None:
    if target != "emulator" and target not in aw.available_targets():
        pytest.skip(f"target {target} is not available here")


@pytest.mark.parametrize(("target", "W"), RUNTIMES)
def test_python_tail_sums(target, W):
    _available(target)
    x, exp = _data()
    out = np.zeros(GRID, np.int32)
    tail_sum(x, out, grid=GRID, workgroup=WG, target=target, wave_width=W,
             **({"check": True} if target == "emulator" else {}))
    assert np.array_equal(out, exp)


@pytest.mark.parametrize(("target", "W"), RUNTIMES)
def test_cuda_tail_sums(target, W):
    _available(target)
    k = _cuda(sync=True, vol=True)
    x, exp = _data()
    out = np.zeros(GRID, np.int32)
    k(x, out, grid=GRID, workgroup=WG, target=target, wave_width=W,
      **({"check": True} if target == "emulator" else {}))
    assert np.array_equal(out, exp)


@pytest.mark.parametrize("W", WS)
def test_without_the_barrier_the_checked_emulator_reports_a_race(W):
    x, _ = _data()
    with pytest.raises(EmulationError, match="data race on local memory"):
        tail_sum(x, np.zeros(GRID, np.int32), grid=GRID, workgroup=WG, target="emulator", wave_width=W,
                 check=True, sync=False)
    with pytest.raises(EmulationError, match="data race on local memory"):
        _cuda(sync=False, vol=False)(x, np.zeros(GRID, np.int32), grid=GRID, workgroup=WG, target="emulator",
                                     wave_width=W, check=True)


def test_volatile_without_syncwarp_is_refused():
    with pytest.raises(aw.CompileError, match=r"volatile memory access in a kernel without __syncwarp\(\)") as e:
        _cuda(sync=False, vol=True).compile()
    assert "kernel.cu:13:17:" in str(e.value)  # the first volatile access: `vs[t]` in `int v = vs[t];`


def test_kernels_with_the_barrier_are_w_dependent_and_wave_1_1():
    for m in (tail_sum.compile(), _cuda(sync=True, vol=True).compile()):
        assert not m.kernels[0].flags & 2  # no w_invariant flag (spec §7.10)
        assert m.version == (1, 1)
        assert any(ins.mnemonic == "barrier.wave" for ins in m.kernels[0].code)
    assert tail_sum.compile(sync=False).version == (1, 0)


def test_generated_code_spells_the_barrier():
    from anywave.backends import opencl, ptx, sycl

    m = tail_sum.compile()
    assert "bar.warp.sync %exist;" in ptx.translate(m, "sm_80").text
    assert "sub_group_barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);" in opencl.translate(m, 16).text
    assert "sycl::group_barrier(aw_sg);" in sycl.translate(m, 16).text


@aw.kernel
def reload_after_barrier(out: aw.Buffer[aw.i32]):
    s = aw.local_array(aw.i32, 64)
    t = aw.local_id(0)
    s[t] = t
    aw.wave_barrier()
    a = s[t ^ 1]
    aw.wave_barrier()
    s[t] = a * 10
    aw.wave_barrier()
    b = s[t ^ 1]  # the same address as a's load: a load after a barrier is never reused from before it
    out[t] = a + b


def test_no_load_is_reused_across_the_barrier():
    code = reload_after_barrier.compile().kernels[0].code
    assert sum(1 for i in code if i.mnemonic == "ld.local.b32") == 2
    assert sum(1 for i in code if i.mnemonic == "barrier.wave") == 3
    for W in WS:
        out = np.zeros(64, np.int32)
        reload_after_barrier(out, grid=1, workgroup=64, target="emulator", wave_width=W, check=True)
        t = np.arange(64)
        assert np.array_equal(out, (t ^ 1) + 10 * t)  # b = s[t^1] = (t^1^1) * 10
