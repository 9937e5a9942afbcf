"""MMA (issue 15): the tile ``mma`` regression on every target, fragment instructions (assembler,
verifier, emulator, PTX text, C family), the fragment GEMM, and the reference toolchain's MMA
kernels (written here from their described semantics: tests/ref_kernels/)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from anywave.asm import assemble
from anywave.binary.verify import verify
from anywave.emu import emulate
from anywave.emu.machine import emulate_flat
from anywave.errors import AsmError, EmulationError, VerifyError

HERE = Path(__file__).parent
REF = HERE / "ref_kernels"


def _opencl():
    from anywave.runtime import opencl

    ok, why = opencl.status()
    if not ok:
        pytest.skip(f"OpenCL unavailable: {why}")
    return opencl.OpenCLRunner()


def _bound(a: np.ndarray, b: np.ndarray, k: int) -> np.ndarray:
    """spec §8.13's bound composed over k/16 accumulating mma steps (relative 2^-18 per step)."""
    return 2.0 ** -18 * (k / 16) * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))) * 1.001


# ----------------------------------------------------------------------------- issue kernel
def _issue_inputs(n: int):
    rng = np.random.default_rng(n)
    a = rng.standard_normal(n * n).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal(n * n).astype(ml_dtypes.bfloat16)
    return a, b


@pytest.mark.parametrize("n", [16, 32, 64])
def test_issue_kernel_emulator(n: int) -> None:
    """The issue's kernel (one wave per 16x16 tile: a 32-thread workgroup at W = 32)."""
    from mma_issue_kernel import mma_gemm

    a, b = _issue_inputs(n)
    ref = a.astype(np.float64).reshape(n, n) @ b.astype(np.float64).reshape(n, n)
    c = np.full(n * n, np.nan, np.float32)
    emulate(mma_gemm.compile(), "mma_gemm", grid=(n // 16, n // 16, 1), workgroup=(32, 1, 1),
            args={"a": a, "b": b, "c": c, "n": n}, wave_width=32, check=True)
    err = np.abs(c.reshape(n, n) - ref)
    assert (err <= _bound(a.reshape(n, n), b.reshape(n, n), n)).all(), err.max()


@pytest.mark.parametrize("W", [8, 16])
def test_issue_kernel_is_a_race_with_several_waves(W: int) -> None:
    """At W < 32 the 32-thread workgroup has several waves, and each runs the mma on the same
    tiles: a data race (spec §8.13; it gave twice the product on OpenCL at W = 16). Checked mode
    reports it instead of an answer."""
    from mma_issue_kernel import mma_gemm

    a, b = _issue_inputs(16)
    with pytest.raises(EmulationError, match="data race on local memory"):
        emulate(mma_gemm.compile(), "mma_gemm", grid=(1, 1, 1), workgroup=(32, 1, 1),
                args={"a": a, "b": b, "c": np.zeros(256, np.float32), "n": 16}, wave_width=W, check=True)


def _issue_on(r, name: str) -> None:  # noqa: ANN001 - a conformance Runner
    from mma_issue_kernel import mma_gemm

    if 32 not in r.dev.features.wave_widths:
        pytest.skip(f"{name}: no sub-groups of 32")
    for n in (16, 64):
        a, b = _issue_inputs(n)
        ref = a.astype(np.float64).reshape(n, n) @ b.astype(np.float64).reshape(n, n)
        args = {"a": a, "b": b, "c": np.full(n * n, np.nan, np.float32), "n": np.int32(n)}
        r(mma_gemm.compile(), "mma_gemm", (n // 16, n // 16, 1), (32, 1, 1), args, 32)
        e = np.full(n * n, np.nan, np.float32)
        emulate(mma_gemm.compile(), "mma_gemm", grid=(n // 16, n // 16, 1), workgroup=(32, 1, 1),
                args={"a": a, "b": b, "c": e, "n": n}, wave_width=32)
        assert np.array_equal(args["c"].view(np.uint32), e.view(np.uint32))
        assert (np.abs(e.reshape(n, n) - ref) <= _bound(a.reshape(n, n), b.reshape(n, n), n)).all()


@pytest.mark.opencl
def test_issue_kernel_opencl() -> None:
    _issue_on(_opencl(), "OpenCL")


@pytest.mark.sycl
def test_issue_kernel_sycl() -> None:
    from anywave.runtime import sycl

    ok, why = sycl.status()
    if not ok:
        pytest.skip(f"SYCL unavailable: {why}")
    _issue_on(sycl.SyclRunner(), "SYCL")


def test_ptx_mma_skipped_without_active_lanes() -> None:
    """The PTX walk passes an mma after a loop's final break with no lane active: the lowering
    must test the executing set first (issue 15: it accumulated once more there)."""
    from anywave.backends import ptx
    from mma_issue_kernel import mma_gemm

    text = str(ptx.translate(mma_gemm.compile()))
    body = text[text.index("// mma.m16n16k16"):]
    vote = re.search(r"vote\.sync\.any\.pred (%q\d+), %A, %exist;\s*@!\1 bra (\$L\w+);", body)
    assert vote is not None and body.index(vote.group(0)) < body.index("fma.rn.f32")
    assert f"{vote.group(2)}:" in body


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not installed")
def test_ptx_fragment_lowering_assembles() -> None:
    from anywave.backends import ptx
    from anywave.conformance.suite import assemble_group
    from anywave.kernels.gemm_mma import gemm_frag_kernel, gemm_tiled_kernel

    for m in (assemble_group("mma_frag"), gemm_frag_kernel.compile(), gemm_tiled_kernel.compile()):
        text = str(ptx.translate(m))
        assert "mma.sync.aligned.m16n8k16.row.col.f32" in text
        r = subprocess.run(["ptxas", "-arch=sm_90", "-o", "/dev/null", "-"], input=text, capture_output=True,
                           text=True)
        assert r.returncode == 0, r.stderr[-2000:]
    tiled = ptx.translate(gemm_tiled_kernel.compile())
    assert "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16" in str(tiled)
    # every branch of the tiled GEMM is uniform: plain branches, 128-bit copies
    assert not tiled.kernels["gemm_tiled_kernel"].uniform
    assert "ld.global.nc.v4.b32" in str(tiled) and "st.shared.v4.b32" in str(tiled)


def test_ptx_refuses_fragments_before_sm80() -> None:
    from anywave.backends import ptx

    m = assemble_group_frag()
    problems = ptx.check_supported(m, "sm_75")
    assert problems and "sm_80" in problems[0]


def assemble_group_frag():
    from anywave.conformance.suite import assemble_group

    return assemble_group("mma_frag")


# ----------------------------------------------------------------------------- assembler, verifier
_FR = """.kernel k
.arg x buffer f32 readwrite
.registers 4
.local_memory 1024
{body}
.end
"""


def test_fragments_are_not_registers() -> None:
    with pytest.raises(AsmError, match="expected a register"):
        assemble(_FR.format(body="    add.i32 r0, f0, r1"))
    with pytest.raises(AsmError, match="fragment f32 does not exist"):
        assemble(_FR.format(body="    mma.fill.m16n16k16.f32 f32, r0"))
    with pytest.raises(AsmError, match="expected a fragment"):
        assemble(_FR.format(body="    mma.fill.m16n16k16.f32 r1, r0"))


def test_verifier_one_kind_per_slot() -> None:
    body = ("    movi.u32 r1, 64\n    mma.fill.m16n16k16.f32 f0, r0\n"
            "    mma.load.a.local.m16n16k16.bf16 f0, [r0], r1")
    with pytest.raises(VerifyError, match=r"f0 as a m16n16k16 A of bf16 fragment, but .* accumulator"):
        verify(assemble(_FR.format(body=body)))
    body = "    mma.fill.m4n4k4.f32 f3, r0\n    mma.scale.m16n16k16.f32 f3, f3, r0"
    with pytest.raises(VerifyError, match="one kind per kernel"):
        verify(assemble(_FR.format(body=body)))


def test_emulator_rejects_bad_wave_fragment_use() -> None:
    ok = ("    mov.sr r0, sr_lane_id\n    movi.u32 r1, 64\n    movi.u32 r2, 0\n    setp.lt.u32 p0, r0, r1\n")
    m = assemble(_FR.format(body=ok + "    @p0 mma.store.local.m16n16k16.f32 [r2], f1, r1"))
    x = np.zeros(4, np.float32)
    emulate(m, "k", grid=(1, 1, 1), workgroup=(8, 1, 1), args={"x": x}, wave_width=8)  # every lane
    m = assemble(_FR.format(body=ok.replace("r1, 64\n    movi.u32 r2, 0\n    setp.lt.u32 p0, r0, r1",
                                            "r1, 64\n    movi.u32 r2, 0\n    movi.u32 r3, 3\n"
                                            "    setp.lt.u32 p0, r0, r3")
                            + "    @p0 mma.store.local.m16n16k16.f32 [r2], f1, r1"))
    with pytest.raises(EmulationError, match="all 8 lanes of a complete wave"):
        emulate(m, "k", grid=(1, 1, 1), workgroup=(8, 1, 1), args={"x": x}, wave_width=8)
    m = assemble(_FR.format(body="    movi.u32 r1, 40\n    movi.u32 r2, 0\n"
                                 "    mma.store.local.m16n16k16.f32 [r2], f1, r1"))
    with pytest.raises(EmulationError, match="row stride 40 is not a multiple of 16"):
        emulate(m, "k", grid=(1, 1, 1), workgroup=(8, 1, 1), args={"x": x}, wave_width=8)
    m = assemble(_FR.format(body="    movi.u32 r1, 64\n    movi.u32 r2, 64\n"
                                 "    mma.store.local.m16n16k16.f32 [r2], f1, r1"))
    with pytest.raises(EmulationError, match="out-of-bounds local memory"):
        emulate(m, "k", grid=(1, 1, 1), workgroup=(8, 1, 1), args={"x": x}, wave_width=8)


# ----------------------------------------------------------------------------- the GEMM kernels
@pytest.mark.parametrize("W", [8, 16, 32, 64])
def test_fragment_gemm_emulator(W: int) -> None:
    from anywave.kernels.gemm_mma import gemm

    rng = np.random.default_rng(W)
    M, N, K = 64, 128, 48
    a = rng.standard_normal((M, K)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((K, N)).astype(ml_dtypes.bfloat16)
    bias = rng.standard_normal(N).astype(np.float32)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    out = gemm(a, b, target="emulator", wave_width=W)
    assert (np.abs(out - ref) <= _bound(a, b, K)).all()
    out = gemm(a, b, bias, target="emulator", wave_width=W)
    assert (np.abs(out - (ref + bias)) <= _bound(a, b, K) + 2.0 ** -23 * np.abs(ref + bias) * 2).all()


def test_fragment_gemm_f16_and_gelu() -> None:
    from anywave.kernels.gemm_mma import gemm

    rng = np.random.default_rng(3)
    a = (rng.standard_normal((64, 32)) / 4).astype(np.float16)
    b = (rng.standard_normal((32, 128)) / 4).astype(np.float16)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    out = gemm(a, b, target="emulator", wave_width=16)
    assert (np.abs(out - ref) <= _bound(a, b, 32)).all()
    g = gemm(a, b, gelu=True, target="emulator", wave_width=32)
    want = 0.5 * ref * (1 + np.tanh(np.sqrt(2 / np.pi) * (ref + 0.044715 * ref ** 3)))
    assert np.abs(g - want).max() < 2e-3  # fast_tanh is class approx


@pytest.mark.parametrize("W,tile", [(16, {"TM": 4, "TN": 2, "WM": 2, "WN": 4, "GM": 0}),
                                    (32, {"TM": 2, "TN": 2, "WM": 2, "WN": 2, "GM": 2}),
                                    (32, {"TM": 2, "TN": 2, "WM": 2, "WN": 2, "GM": 0, "BK": 64}),
                                    (64, {"TM": 2, "TN": 4, "WM": 2, "WN": 2, "GM": 0}),
                                    (32, {"TM": 2, "TN": 2, "WM": 2, "WN": 2, "GM": 2, "STAGES": 4}),
                                    (16, {"TM": 2, "TN": 2, "WM": 2, "WN": 2, "GM": 0, "STAGES": 3})])
def test_tiled_gemm_emulator(W: int, tile: dict) -> None:
    from anywave.kernels.gemm_mma import gemm_tiled_kernel

    rng = np.random.default_rng(W)
    bm, bn = 16 * tile["TM"] * tile["WM"], 16 * tile["TN"] * tile["WN"]
    # with GM: 3 x 2 blocks in groups of 2 block rows (a short last group)
    kk = 2 * tile.get("STAGES", 1) * 32 if tile.get("STAGES") else 128  # two trips of the K loop
    M, N, K = (3 * bm, 2 * bn, kk) if tile["GM"] else (bm, bn, kk)
    a = rng.standard_normal((M, K)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((K, N)).astype(ml_dtypes.bfloat16)
    bias = rng.standard_normal(N).astype(np.float32)
    ref = a.astype(np.float64) @ b.astype(np.float64) + bias
    c = np.full(M * N, np.nan, np.float32)
    gemm_tiled_kernel(a.view(np.uint32).reshape(-1), b.view(np.uint32).reshape(-1), bias, c, M, N, K,
                      grid=(N // bn, M // bm), workgroup=(tile["WM"] * tile["WN"] * W, 1, 1), target="emulator",
                      wave_width=W, W=W, use_bias=True, **tile)
    assert (np.abs(c.reshape(M, N) - ref) <= _bound(a, b, K) + 2.0 ** -22 * np.abs(ref)).all()


@pytest.mark.opencl
def test_fragment_gemm_opencl_matches_emulator() -> None:
    from anywave.kernels.gemm_mma import DEFAULT_TILE, gemm_frag_kernel

    r = _opencl()
    W = 16 if 16 in r.dev.features.wave_widths else r.dev.features.wave_widths[0]
    rng = np.random.default_rng(11)
    M, N, K = 128, 128, 32
    a = rng.standard_normal((M, K)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((K, N)).astype(ml_dtypes.bfloat16)
    mod = gemm_frag_kernel.compile(**DEFAULT_TILE)
    outs = []
    for run in ("opencl", "emu"):
        c = np.full(M * N, np.nan, np.float32)
        args = {"a": a.reshape(-1).view(np.uint16), "b": b.reshape(-1).view(np.uint16),
                "bias": np.zeros(N, np.float32), "c": c, "m": np.int32(M), "n": np.int32(N), "k": np.int32(K)}
        launch = ((N // 128, M // 128, 1), (8 * W, 1, 1))  # DEFAULT_TILE: 128 x 128 per workgroup
        if run == "opencl":
            r(mod, "gemm_frag_kernel", *launch, args, W)
        else:
            emulate(mod, "gemm_frag_kernel", grid=launch[0], workgroup=launch[1], args=args, wave_width=W)
        outs.append(args["c"])
    assert np.array_equal(outs[0].view(np.uint32), outs[1].view(np.uint32))


# ----------------------------------------------------------------------------- reference kernels
def _flat(name: str) -> object:
    return assemble((REF / f"{name}.wave").read_text(), f"tests/ref_kernels/{name}.wave")


def test_reference_mma_query() -> None:
    mem = np.zeros(64, np.uint8)
    emulate_flat(_flat("mma_query"), "mma_query", mem, grid=(1, 1, 1), workgroup=(1, 1, 1))
    assert mem[:16].view(np.uint32).tolist() == [1, 4, 4, 4]


@pytest.mark.parametrize("kind", ["identity", "ones"])
def test_reference_mma_simple(kind: str) -> None:
    a = np.eye(4, dtype=np.float32) if kind == "identity" else np.ones((4, 4), np.float32)
    mem = np.zeros(256, np.uint8)
    mem[:64] = a.view(np.uint8).reshape(-1)
    mem[64:128] = a.view(np.uint8).reshape(-1)
    emulate_flat(_flat("mma_simple"), "mma_simple", mem, grid=(1, 1, 1), workgroup=(1, 1, 1))
    want = np.eye(4) if kind == "identity" else np.full((4, 4), 4.0)
    assert np.array_equal(mem[128:192].view(np.float32).reshape(4, 4), want)


def _gemm_mma_expected(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """C[i][j]: fma in k order, k = 0..31 (the thread's 4x4 blocks are accumulated in order)."""
    from anywave.conformance import refsem

    F = refsem.F32
    ab, bb = A.view(np.uint32), B.view(np.uint32)
    out = np.zeros((32, 32), np.uint32)
    for i in range(32):
        for j in range(32):
            s = 0
            for k in range(32):
                s = refsem.f_fma(F, int(ab[i, k]), int(bb[k, j]), s)
            out[i, j] = s
    return out


@pytest.mark.parametrize("W", [8, 32, 64])
def test_reference_gemm_mma(W: int) -> None:
    rng = np.random.default_rng(5)
    A = rng.standard_normal((32, 32)).astype(np.float32)
    B = rng.standard_normal((32, 32)).astype(np.float32)
    mem = np.zeros(3 * 4096, np.uint8)
    mem[:4096] = A.view(np.uint8).reshape(-1)
    mem[4096:8192] = B.view(np.uint8).reshape(-1)
    emulate_flat(_flat("gemm_mma"), "gemm_mma", mem, grid=(1, 1, 1), workgroup=(8, 8, 1), wave_width=W,
                 check=True)
    assert np.array_equal(mem[8192:].view(np.uint32).reshape(32, 32), _gemm_mma_expected(A, B))


@pytest.mark.opencl
def test_reference_kernels_opencl() -> None:
    r = _opencl()
    W = r.dev.features.wave_widths[0]
    rng = np.random.default_rng(6)
    A = rng.standard_normal((32, 32)).astype(np.float32)
    B = rng.standard_normal((32, 32)).astype(np.float32)
    mem = np.zeros(3 * 4096, np.uint8)
    mem[:4096] = A.view(np.uint8).reshape(-1)
    mem[4096:8192] = B.view(np.uint8).reshape(-1)
    m = _flat("gemm_mma")
    args = {"memory": mem, **{f"init_r{i}": np.uint32(0) for i in range(m.kernel("gemm_mma").registers)}}
    r(m, "gemm_mma", (1, 1, 1), (8, 8, 1), args, W)
    assert np.array_equal(args["memory"][8192:].view(np.uint32).reshape(32, 32), _gemm_mma_expected(A, B))
    q = _flat("mma_query")
    args = {"memory": np.zeros(64, np.uint8), **{f"init_r{i}": np.uint32(0) for i in range(6)}}
    r(q, "mma_query", (1, 1, 1), (1, 1, 1), args, W)
    assert args["memory"][:16].view(np.uint32).tolist() == [1, 4, 4, 4]


# ----------------------------------------------------------------------------- torch op
def test_torch_gemm_mma_cpu() -> None:
    torch = pytest.importorskip("torch")
    from anywave.torch import mma_ops  # noqa: F401 - registers torch.ops.anywave.gemm_mma
    from anywave.torch.ops import OpDtypeError, cpu_target

    g = torch.Generator().manual_seed(0)
    a = torch.randn(40, 48, generator=g).to(torch.bfloat16)  # padded to 128 x 64 inside
    b = torch.randn(48, 24, generator=g).to(torch.bfloat16)
    bias = torch.randn(24, generator=g)
    with cpu_target("emulator", wave_width=16):
        out = torch.ops.anywave.gemm_mma(a, b, bias)
    ref = a.double() @ b.double() + bias.double()
    bound = torch.from_numpy(_bound(a.float().numpy(), b.float().numpy(), 64)) + 2.0 ** -22 * ref.abs()
    assert out.shape == (40, 24) and out.dtype == torch.float32
    assert bool(((out.double() - ref).abs() <= bound).all())
    with pytest.raises(OpDtypeError, match="bfloat16"):
        torch.ops.anywave.gemm_mma(a.float(), b.float())


@pytest.mark.cuda
def test_torch_gemm_mma_cuda() -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    from anywave.torch import mma_ops  # noqa: F401

    g = torch.Generator(device="cuda").manual_seed(1)
    a = torch.randn(256, 512, device="cuda", generator=g).to(torch.bfloat16)
    b = torch.randn(512, 384, device="cuda", generator=g).to(torch.bfloat16)
    out = torch.ops.anywave.gemm_mma(a, b)
    ref = a.double() @ b.double()
    bound = 2.0 ** -18 * (512 / 16) * (a.double().abs() @ b.double().abs()) * 1.001
    assert bool(((out.double() - ref).abs() <= bound).all())


def test_hip_wave64_uses_mfma() -> None:
    """HIP at W = 64: the fragment mma is the CDNA matrix-core builtin on gfx90a/gfx94x (the loop
    elsewhere); the CI's hipcc compile of every conformance group builds it for gfx90a/gfx940."""
    from anywave.backends import hip

    text = hip.translate(assemble_group_frag(), wave_width=64).text
    assert "__builtin_amdgcn_mfma_f32_16x16x16bf16_1k" in text and "__builtin_amdgcn_mfma_f32_16x16x16f16" in text
    assert "mfma" not in hip.translate(assemble_group_frag(), wave_width=32).text


def test_local_fragment_addresses_fold_constants() -> None:
    """aw.mma_load/mma_store on a local array: the compile-time part of (row, col) becomes the
    address immediate, so fragments at fixed distances share one offset register (ldmatrix
    [R+imm] on PTX); the result is the same as with run-time indices."""
    import anywave as aw

    @aw.kernel
    def k(a: aw.In[aw.u32], c: aw.Out[aw.f32], r0: aw.i32):
        t = aw.local_array(aw.u32, (96, 12))  # 16-bit elements in pairs: rows of 24 (+ 16 bytes)
        for e0 in range(0, 96 * 12, aw.workgroup_size(0)):
            t[(e0 + aw.local_id(0)) // 12, (e0 + aw.local_id(0)) % 12] = a[e0 + aw.local_id(0)]
        aw.barrier()
        acc = aw.fragment("acc")
        fa = aw.fragments(2, "a", aw.bf16)
        fb = aw.fragments(2, "b", aw.bf16)
        for i in aw.static_range(2):
            aw.mma_load(fa[i], t, r0 + 16 * i, 0)  # run-time row, constant step
            aw.mma_load(fb[i], t, 32 + r0 + 16 * i, 0 + 0)
        for i in aw.static_range(2):
            aw.mma_sync(acc, fa[i], fb[i], acc)
        aw.mma_store(c, acc, 0, 16)

    m = k.compile()
    loads = [ins for ins in m.kernels[0].code if ins.defn.op == "fload"]
    assert len(loads) == 4
    assert len({ins.operands[1].reg for ins in loads}) == 1  # one offset register
    assert sorted(ins.operands[1].offset for ins in loads) == [0, 16 * 48, 32 * 48, 48 * 48]
    rng = np.random.default_rng(5)
    vals = rng.standard_normal(96 * 24).astype(ml_dtypes.bfloat16)
    a = vals.view(np.uint32)
    c = np.full(256, np.nan, np.float32)
    k(a, c, 8, grid=(1, 1), workgroup=(32, 1, 1), target="emulator", wave_width=32)
    tile = vals.astype(np.float64).reshape(96, 24)[:, :16]
    ref = sum(tile[8 + 16 * i:24 + 16 * i] @ tile[40 + 16 * i:56 + 16 * i] for i in range(2))
    absb = sum(np.abs(tile[8 + 16 * i:24 + 16 * i]) @ np.abs(tile[40 + 16 * i:56 + 16 * i]) for i in range(2))
    assert (np.abs(c.reshape(16, 16) - ref) <= 2.0 ** -18 * 2 * absb * 1.001).all()
