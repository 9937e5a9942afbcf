"""The wave-group MMA GEMM (anywave.kernels.gemm_group, issue 15) and the PTX lowering of
``mma.group`` (docs/spec.md §8.14): results within the spec's bound of a float64 product on the
emulator at W = 8, 16, 32, 64; exact on small-integer inputs; the PTX for sm_90 uses wgmma on the
sm_90a target (and assembles), other architectures ldmatrix + mma.sync; on a CUDA device
(skipped without one) both lowerings give the exact products and the torch op routes to it."""

from __future__ import annotations

import re
import shutil
import subprocess

import ml_dtypes
import numpy as np
import pytest

from anywave.emu import emulate
from anywave.kernels.gemm_group import gemm_group_kernel


def _bound(a: np.ndarray, b: np.ndarray, k: int) -> np.ndarray:
    """spec §8.13's bound composed over k/16 accumulating steps (relative 2^-18 per step)."""
    return 2.0 ** -18 * (k / 16) * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))) * 1.001


def _run(W: int, M: int, N: int, K: int, *, ints: bool, f16: bool = False, bias: bool = False,
         bias_out: list | None = None, **consts):
    rng = np.random.default_rng(W + M + K)
    dt = np.float16 if f16 else ml_dtypes.bfloat16
    if ints:
        a = rng.integers(-4, 5, (M, K)).astype(dt)
        b = rng.integers(-4, 5, (K, N)).astype(dt)
    else:
        a = rng.standard_normal((M, K)).astype(dt)
        b = rng.standard_normal((K, N)).astype(dt)
    bv = rng.standard_normal(N).astype(np.float32)
    if bias_out is not None:
        bias_out.append(bv)
    c = np.full(M * N, np.nan, np.float32)
    mod = gemm_group_kernel.compile(W=W, use_bias=bias, f16=f16, **consts)
    emulate(mod, gemm_group_kernel.name, grid=(N // consts.get("BN", 256), M // 128, 1), workgroup=(8 * W, 1, 1),
            wave_width=W,
            args=[a.view(np.uint32).reshape(-1), b.view(np.uint32).reshape(-1), bv, c, M, N, K],
            max_local_memory=1 << 18)
    ref = a.astype(np.float64) @ b.astype(np.float64) + (bv if bias else 0.0)
    return a, b, c.reshape(M, N), ref


@pytest.mark.parametrize("W", [8, 16, 32, 64])
def test_group_gemm_exact_on_integers(W: int) -> None:
    # every partial sum is an integer below 2^24: each step is exact, so the result is too
    _, _, c, ref = _run(W, 128, 256, 128, ints=True, STAGES=2, BK=32, GM=0)
    assert np.array_equal(c, ref)


@pytest.mark.parametrize("W,BN", [(32, 128), (8, 64), (64, 128), (16, 64)])
def test_group_gemm_narrow_blocks(W: int, BN: int) -> None:
    # BN = 128 / 64: 16 x BN strips per wave, BN / 64 panels per B slice; 2 x 2 blocks (GM = 2)
    # with a bias, exact on integers
    got: list = []
    a, b, c, _ = _run(W, 256, 2 * BN, 128, ints=True, bias=True, bias_out=got, STAGES=2, BK=64, GM=2, BN=BN)
    prod = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)  # exact: integers below 2^24
    assert np.array_equal(c, prod + got[0])  # then one f32 add (spec: mma.bias)


@pytest.mark.parametrize("W,consts", [(8, {"STAGES": 2, "BK": 64, "GM": 2}), (32, {"STAGES": 4, "BK": 32, "GM": 8}),
                                      (16, {"STAGES": 2, "BK": 32, "GM": 0})])
def test_group_gemm_within_bound(W: int, consts: dict) -> None:
    # 3 x 2 blocks (with GM = 2: groups of two block rows, the last one short), bias epilogue
    K = 2 * consts["STAGES"] * consts["BK"]
    a, b, c, ref = _run(W, 384, 512, K, ints=False, bias=True, **consts)
    assert np.isfinite(c).all()
    assert (np.abs(c - ref) <= _bound(a, b, K) + 2.0 ** -22 * np.abs(ref)).all()


def test_group_gemm_f16() -> None:
    _, _, c, ref = _run(16, 128, 256, 128, ints=True, f16=True, STAGES=2, BK=32, GM=0)
    assert np.array_equal(c, ref)


def test_group_gemm_gelu_epilogue() -> None:
    a, b, c, ref = _run(32, 128, 256, 64, ints=False, STAGES=2, BK=32, GM=0, gelu=True)
    x = ref
    want = 0.5 * x * (1.0 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))
    # the accumulation bound carried through GELU (|GELU'| <= 1.13), plus tanh.approx's error
    # (docs/spec.md: relative 2^-10.9 of |tanh| <= 1, times 0.5 |x|) and the f32 roundings of the
    # epilogue (a few ulps of |x| + 1)
    tol = 1.13 * (_bound(a, b, 64) + 2.0 ** -22 * np.abs(ref)) + 2.0 ** -11.9 * np.abs(x) + 2.0 ** -20 * (np.abs(x) + 1)
    assert (np.abs(c - want) <= tol).all()


def _ptx(arch: str, **consts) -> str:
    from anywave.backends import ptx

    return ptx.translate(gemm_group_kernel.compile(W=32, **consts), arch).text


def test_ptx_group_lowering_per_architecture() -> None:
    t90 = _ptx("sm_90", BK=64, STAGES=4)
    assert ".target sm_90a" in t90 and ".version 8.0" in t90
    assert t90.count("wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16") == 16  # 4 stages x 4 steps
    assert "mma.sync" not in t90 and ".align 1024" in t90
    # every committed group is waited for before the next barrier
    body = t90[t90.index(".entry"):]
    for m in re.finditer(r"wgmma\.commit_group\.sync\.aligned;", body):
        rest = body[m.end():]
        nxt_bar = rest.find("bar.sync")
        nxt_wait = rest.find("wgmma.wait_group")
        assert nxt_wait != -1 and (nxt_bar == -1 or nxt_wait < nxt_bar)
    t80 = _ptx("sm_80", BK=32, STAGES=2)
    assert ".target sm_80" in t80 and "wgmma" not in t80
    assert "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16" in t80 and "mma.sync.aligned.m16n8k16" in t80


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not installed")
@pytest.mark.parametrize("arch,ptxas_arch", [("sm_90", "sm_90a"), ("sm_80", "sm_80")])
def test_ptx_group_lowering_assembles(arch: str, ptxas_arch: str) -> None:
    text = _ptx(arch, BK=64, STAGES=2)
    r = subprocess.run(["ptxas", f"-arch={ptxas_arch}", "-v", "-o", "/dev/null", "-"], input=text,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "spill" in r.stderr and "0 bytes spill stores" in r.stderr


# ------------------------------------------------------------------------------------ on a GPU
def _cuda_ok() -> tuple[bool, str]:
    from anywave.runtime import cuda

    return cuda.driver_status()


@pytest.mark.cuda
def test_group_gemm_cuda_both_lowerings_exact(monkeypatch) -> None:
    ok, why = _cuda_ok()
    if not ok:
        pytest.skip(f"no CUDA: {why}")
    from anywave.backends import ptx_mma
    from anywave.runtime import cuda

    rng = np.random.default_rng(9)
    M, N, K = 256, 512, 512
    a = rng.integers(-4, 5, (M, K)).astype(ml_dtypes.bfloat16)
    b = rng.integers(-4, 5, (K, N)).astype(ml_dtypes.bfloat16)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    for arch in (ptx_mma.WGMMA_ARCH, 0):  # wgmma on sm_90 (elsewhere both are the fallback), then the fallback
        monkeypatch.setattr(ptx_mma, "WGMMA_ARCH", arch)
        tgt = cuda.CudaTarget(use_cache=False)
        c = np.full(M * N, np.nan, np.float32)
        mod = gemm_group_kernel.compile(W=cuda.WAVE_WIDTH, BK=64, STAGES=4, GM=8)
        tgt.launch(mod, gemm_group_kernel.name, (N // 256, M // 128, 1), (8 * cuda.WAVE_WIDTH, 1, 1),
                   [a.view(np.uint32).reshape(-1), b.view(np.uint32).reshape(-1), np.zeros(N, np.float32), c, M, N, K])
        assert np.array_equal(c.reshape(M, N), ref), f"WGMMA_ARCH={arch}"


@pytest.mark.cuda
def test_torch_gemm_mma_on_cuda_within_bound() -> None:
    ok, why = _cuda_ok()
    if not ok:
        pytest.skip(f"no CUDA: {why}")
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA")
    import anywave.torch.ops  # noqa: F401  (registers the ops, gemm_mma included)

    g = torch.Generator(device="cuda").manual_seed(3)
    a = torch.randn(300, 520, device="cuda", generator=g).to(torch.bfloat16)  # padded to the tile
    b = torch.randn(520, 270, device="cuda", generator=g).to(torch.bfloat16)
    bias = torch.randn(270, device="cuda", generator=g)
    c = torch.ops.anywave.gemm_mma(a, b, bias)
    ref = a.double() @ b.double() + bias.double()
    kp = -(-520 // 256) * 256
    bound = 2.0 ** -18 * (kp / 16) * (a.double().abs() @ b.double().abs()) * 1.001 + 2.0 ** -22 * ref.abs()
    assert c.shape == (300, 270) and bool(((c.double() - ref).abs() <= bound).all())


# ------------------------------------------------------------------ hostile inputs (fresh-eyes report)
def _two_shapes_kernel():
    import anywave as aw

    @aw.kernel
    def two_shapes(a: aw.In[aw.u16], c: aw.Out[aw.f32]):
        tb = aw.local_array(aw.u16, (4096,), align=1024)
        acc = aw.fragments(16, "acc")
        fa = aw.fragment("a", aw.bf16)
        for e in range(aw.local_id(0), 4096, aw.workgroup_size(0)):
            tb[e] = 0
        aw.barrier()
        aw.mma_load(fa, a, 16 * aw.wave_id() * 16, 16)
        aw.mma_group(acc, fa, tb, 0, 2048)                           # m64n256 into f0..f15
        aw.mma_group((acc[0], acc[1], acc[2], acc[3]), fa, tb, 0, 2048)  # m64n64 into f0..f3
        aw.mma_store(c, acc[0], 0, 16)

    return two_shapes


def test_ptx_waits_between_wgmma_of_different_shapes() -> None:
    # PTX orders only same-shape accumulator chains: a wait must separate the two
    from anywave.backends import ptx

    text = ptx.translate(_two_shapes_kernel().compile(), "sm_90").text
    body = text[text.index("m64n256k16"):]
    assert "m64n64k16" in body
    assert "wgmma.wait_group.sync.aligned 0;" in body[:body.index("m64n64k16")]


@pytest.mark.parametrize("offset", ["1 << 40", "8192", "4096 + 1024", "0 - 1024"])
def test_mma_group_offset_past_the_tile_is_a_compile_error(offset: str, tmp_path) -> None:
    import importlib.util

    from anywave.compiler.errors import CompileError

    src = f'''
import anywave as aw

@aw.kernel
def k(a: aw.In[aw.u16], c: aw.Out[aw.f32]):
    tb = aw.local_array(aw.u16, (4096,), align=1024)   # 8192 bytes
    acc = aw.fragments(16, "acc")
    fa = aw.fragment("a", aw.bf16)
    aw.mma_load(fa, a, 0, 16)
    aw.mma_group(acc, fa, tb, {offset}, 2048)
    aw.mma_store(c, acc[0], 0, 16)
'''
    path = tmp_path / "offset_kernel.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("offset_kernel", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with pytest.raises(CompileError) as e:
        mod.k.compile()
    assert "B tile" in str(e.value) and "offset_kernel.py:10" in str(e.value)  # names the call's line


@pytest.mark.parametrize("shape", [(0, 16, 16), (16, 0, 16), (16, 16, 0)])
def test_torch_gemm_mma_empty_dims_like_matmul(shape) -> None:
    torch = pytest.importorskip("torch")
    import anywave.torch.ops  # noqa: F401

    m, n, k = shape
    a = torch.ones(m, k, dtype=torch.bfloat16)
    b = torch.ones(k, n, dtype=torch.bfloat16)
    bias = torch.arange(n, dtype=torch.float32)
    c = torch.ops.anywave.gemm_mma(a, b, bias)
    assert c.shape == (m, n) and c.dtype == torch.float32
    assert torch.equal(c, (a.float() @ b.float()) + bias)


@pytest.mark.cuda
def test_cuda_refuses_a_group_kernel_without_whole_wave_groups() -> None:
    ok, why = _cuda_ok()
    if not ok:
        pytest.skip(f"no CUDA: {why}")
    from anywave.runtime import cuda

    tgt = cuda.CudaTarget(use_cache=False)
    mod = _two_shapes_kernel().compile()
    a = np.zeros(16 * 16 * 16, np.uint16)
    c = np.zeros(256, np.float32)
    with pytest.raises(cuda.CudaError, match="multiple of 128 threads"):
        tgt.launch(mod, "two_shapes", (1, 1, 1), (6 * 32, 1, 1), [a, c])


@pytest.mark.parametrize("shape,W", [((50, 300, 70), 8), ((16, 256, 64), 32), ((1, 1, 1), 16)])
def test_gemm_group_wrapper_pads_to_the_contract(shape, W) -> None:
    # the kernel trusts its launch contract; the wrapper keeps it for any shape (integers: exact)
    from anywave.kernels.gemm_group import gemm_group

    m, n, k = shape
    rng = np.random.default_rng(m + n + k)
    a = rng.integers(-4, 5, (m, k)).astype(ml_dtypes.bfloat16)
    b = rng.integers(-4, 5, (k, n)).astype(ml_dtypes.bfloat16)
    bias = rng.integers(-4, 5, n).astype(np.float32)
    c = gemm_group(a, b, bias, target="emulator", wave_width=W)
    assert c.shape == (m, n)
    assert np.array_equal(c, a.astype(np.float64) @ b.astype(np.float64) + bias)


def test_gemm_group_wrapper_rejects_mismatched_shapes() -> None:
    from anywave.kernels._launch import KernelInputError
    from anywave.kernels.gemm_group import gemm_group

    with pytest.raises(KernelInputError, match="inner dimensions"):
        gemm_group(np.zeros((4, 5), np.float32), np.zeros((6, 7), np.float32), target="emulator")


# ------------------------------------------------------------------ mma.group.async (in flight until mma.wait)
_ASYNC_SRC = '''
import anywave as aw

@aw.kernel
def k(a: aw.In[aw.u16], c: aw.Out[aw.f32], *, MODE: int = 0):
    tb = aw.local_array(aw.u16, (2 * 16 * 64,), align=1024)   # two 16x64 B tiles (P = 2048)
    acc = aw.fragments(4, "acc")
    fa = aw.fragments(2, "a", aw.bf16)
    for e in range(aw.local_id(0), 2 * 1024, aw.workgroup_size(0)):
        tb[e] = a[e % 256]
    aw.barrier()
    aw.mma_load(fa[0], a, 16 * aw.wave_id() * 16, 16)
    aw.mma_group_async(acc, fa[0], tb, 0, 2048)
    if MODE == 1:
        aw.mma_store(c, acc[0], 0, 16)            # reads an accumulator in flight
    if MODE == 2:
        aw.mma_load(fa[0], a, 0, 16)               # rewrites the A slot in flight
    if MODE == 3:
        tb[aw.local_id(0)] = 7                     # rewrites B bytes in flight (tile 0)
    if MODE == 4:
        tb[1024 + aw.local_id(0)] = 7              # writes the other tile: allowed
    aw.mma_group_async(acc, fa[1], tb, 0, 2048)    # the same strip and shape: ordered after the first
    aw.mma_group_wait(0)
    for j in aw.static_range(4):
        aw.mma_store(c, acc[j], (16 * aw.wave_id()) * 64 + 16 * j, 64)
'''


def _async_kernel(tmp_path):
    import importlib.util

    path = tmp_path / "async_kernel.py"
    path.write_text(_ASYNC_SRC)
    spec = importlib.util.spec_from_file_location("async_kernel", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.k


@pytest.mark.parametrize("W", [8, 32])
def test_async_group_results_and_hazards(tmp_path, W: int) -> None:
    from anywave.errors import EmulationError

    k = _async_kernel(tmp_path)
    rng = np.random.default_rng(W)
    a = rng.integers(-4, 5, 4096).astype(ml_dtypes.bfloat16).view(np.uint16)
    c = np.full(64 * 64, np.nan, np.float32)
    for mode, want in ((0, None), (4, None), (1, "uses fragment f0"), (2, "uses fragment f4"),
                       (3, "was written while that product was in flight")):
        c[:] = np.nan
        def run(mode=mode) -> None:
            k(a, c, grid=1, workgroup=4 * W, target="emulator", wave_width=W, MODE=mode)

        if want is None:
            run()
            # expectation: each wave's strip = A_w @ B (twice: fa[1] is +0.0, so the second adds 0)
            A = a.view(ml_dtypes.bfloat16).astype(np.float64)
            tile = np.zeros((16, 64))
            tbv = np.resize(a.view(ml_dtypes.bfloat16).astype(np.float64)[:256], 1024)  # the bytes written
            for kk in range(16):  # invert the swizzled layout (spec §8.14) of tile 0
                for n in range(64):
                    off = 128 * kk + 16 * (((n % 64) // 8) ^ (kk % 8)) + 2 * (n % 8)
                    tile[kk, n] = tbv[off // 2]
            for w in range(4):
                Aw = A[16 * w * 16:16 * w * 16 + 256].reshape(16, 16)
                assert np.array_equal(c.reshape(64, 64)[16 * w:16 * w + 16], Aw @ tile), (mode, w)
        else:
            with pytest.raises(EmulationError, match=want):
                run()


def test_ptx_async_group_waits_only_where_the_program_says() -> None:
    from anywave.backends import ptx

    text = ptx.translate(gemm_group_kernel.compile(W=32, GR=2, BK=64, STAGES=4, ASYNC=True), "sm_90").text
    body = text[text.index(".entry"):]
    assert body.count("wgmma.mma_async") == 16
    # one wait_group 4 per slice before its barrier, then 0 at the end (and before exit)
    assert re.findall(r"wgmma\.wait_group\.sync\.aligned (\d)", body) == ["4"] * 4 + ["0", "0"]
    t80 = ptx.translate(gemm_group_kernel.compile(W=32, GR=2, BK=32, STAGES=4, ASYNC=True), "sm_80").text
    assert "wgmma" not in t80 and "mma.sync.aligned.m16n8k16" in t80
