"""The PTX backend's mask-stack lowering made lighter (issue 28, item 3): constructs without wave
operations run as per-thread islands, conditions of W and constants are folded (the CUDA front
end's W = 32 body is the only one emitted), register-only instructions run unpredicated where
no inactive lane can read them (lowering.need), and a run of shuffles votes once. These tests
read the PTX text (no GPU here); the C family takes the same walk and analysis, and its
execution is checked against the emulator in tests/test_cfamily_diff.py (mask-stack variant),
tests/test_opencl.py and tests/test_cuda_suite.py; on an H100 it passed conformance (655/655,
bench/results/cuda_conformance_h100_9461882_islands.json) and is the PTX default
(``ANYWAVE_PTX_ISLANDS=0`` gives the plain machine); the fixture below keeps it on whatever the
environment says."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import anywave as aw
from anywave.asm import assemble
from anywave.backends.lowering.control import ControlWalk
from anywave.backends.lowering.need import Need
from anywave.backends.ptx import translate

PTXAS = shutil.which("ptxas")


@pytest.fixture(autouse=True)
def _lighter_lowering(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests read what the lighter lowering emits (ptx.PTX_ISLANDS, on unless
    ANYWAVE_PTX_ISLANDS=0 in the environment)."""
    from anywave.backends import ptx

    monkeypatch.setattr(ptx, "PTX_ISLANDS", True)

FOLD = """
.kernel k
.arg out buffer u32 readwrite
.registers 8
    mov.sr r0, sr_wave_width
    movi.u32 r1, 32
    setp.eq.u32 p0, r0, r1
    mov.sr r5, sr_lane_id
    ballot.b64 r6:r7, p0
    if p0
      movi.b32 r2, 0x1234567
    else
      movi.b32 r2, 0x7654321
    endif
    movi.b32 r3, 2
    shl.b32 r4, r5, r3
    st.device.b32 out[r4], r2
.end
"""


def _body(text: str) -> str:
    return "\n".join(ln for ln in text.splitlines() if not ln.strip().startswith("//"))


def test_a_condition_of_the_wave_width_is_folded() -> None:
    text = _body(translate(assemble(FOLD), "sm_90").text)
    assert "0x01234567" in text and "0x07654321" not in text  # only the W = 32 arm
    # the folded if opens no mask-stack region: one vote (the ballot's), no branch on it
    assert "bra $L" not in text


def test_a_lane_dependent_condition_is_not_folded() -> None:
    src = FOLD.replace("mov.sr r0, sr_wave_width", "mov.sr r0, sr_lane_id")
    text = _body(translate(assemble(src), "sm_90").text)
    assert "0x01234567" in text and "0x07654321" in text


def test_a_definition_written_again_in_a_construct_is_not_trusted() -> None:
    # r0 is W at the setp, but a loop before the `if` may write p0 again: unknown, both arms stay
    src = FOLD.replace("    mov.sr r5, sr_lane_id\n", "    mov.sr r5, sr_lane_id\n    loop\n"
                       "      setp.ne.u32 p0, r5, r1\n      break\n    endloop\n")
    text = _body(translate(assemble(src), "sm_90").text)
    assert "0x01234567" in text and "0x07654321" in text


ISLAND = """
.kernel k
.arg x buffer u32 read
.arg out buffer u32 readwrite
.registers 8
    mov.sr r0, sr_lane_id
    movi.b32 r1, 2
    shl.b32 r2, r0, r1
    ld.device.b32 r3, x[r2]
    movi.b32 r4, 5
    setp.lt.u32 p0, r0, r4
    if p0
      add.i32 r3, r3, r4
      mul.i32 r3, r3, r4
    endif
    wred.add.u32 r5, r3
    st.device.b32 out[r2], r5
.end
"""


def test_a_construct_without_wave_operations_is_a_per_thread_island() -> None:
    text = _body(translate(assemble(ISLAND), "sm_90").text)
    assert re.search(r"@!%A bra \$L\d+_island_end;", text)
    inside = text[text.index("_island_end;"):text.index("_island_end:")]
    assert "@%A" not in inside and "vote.sync" not in inside  # the lane's own branch, no mask updates
    # with a wave operation inside, the if keeps the mask stack (a vote decides the region)
    src = ISLAND.replace("      mul.i32 r3, r3, r4\n", "      mul.i32 r3, r3, r4\n      wred.add.u32 r3, r3\n")
    text = _body(translate(assemble(src), "sm_90").text)
    assert "_island" not in text and "vote.sync.any.pred %pany, %A, %exist;" in text


LIVE = """
.kernel k
.arg out buffer u32 readwrite
.registers 8
    mov.sr r0, sr_lane_id
    movi.b32 r2, 100
    movi.b32 r6, 3
    setp.lt.u32 p0, r0, r6
    if p0
      add.i32 r2, r0, r6
      add.i32 r3, r0, r6
      shl.b32 r4, r3, r6
      wred.add.u32 r5, r4
    endif
    wred.add.u32 r5, r2
    movi.b32 r1, 2
    shl.b32 r7, r0, r1
    st.device.b32 out[r7], r2
.end
"""


def test_only_results_an_inactive_lane_can_read_stay_predicated() -> None:
    m = assemble(LIVE)
    k = m.kernels[0]
    need = Need(m, k.code, islands=True, wave_width=32)
    leaves = [i.mnemonic for i in k.code if i.defn.op not in ("if", "else", "endif", "loop", "endloop")]
    at = leaves.index("add.i32")  # `add.i32 r2` inside the if: r2 is read after it by the lanes >= 3
    regs = need.need(at)[0]
    assert 2 in regs and 3 not in regs and 4 not in regs
    text = _body(translate(m, "sm_90").text)
    assert re.search(r"@%A add\.s32 %t\d+, %r0, %r6;\s*\n\s*@%A mov\.b32 %r2,", text)  # r2: predicated
    assert re.search(r"\n\s*add\.s32 %t\d+, %r0, %r6;\s*\n\s*mov\.b32 %r3,", text)  # r3: not


GUARDED = """
.kernel k
.arg x buffer u32 read
.arg out buffer u32 readwrite
.registers 8
    mov.sr r0, sr_lane_id
    movi.b32 r1, 2
    shl.b32 r2, r0, r1
    ld.device.b32 r3, x[r2]
    movi.b32 r5, 7
    movi.b32 r6, 0
    loop
      setp.eq.u32 p0, r3, r6
      break p0
      any.pred p1, p0
      add.i32 r5, r3, r3
      movi.b32 r7, 1
      sub.i32 r3, r3, r7
    endloop
    setp.gt.u32 p2, r0, r1
    @p2 movi.b32 r5, 9
    st.device.b32 out[r2], r5
.end
"""


def test_a_guarded_write_does_not_hide_a_later_read() -> None:
    # r5 is read by the store after the loop; the guarded write before it leaves r5 alone in the
    # lanes whose p2 is false, so the loop's `add.i32 r5` must stay predicated: a lane that left
    # the loop early would otherwise take the later iterations' sums (the CI failure of stop 38)
    m = assemble(GUARDED)
    k = m.kernels[0]
    need = Need(m, k.code, islands=True, wave_width=32)
    leaves = [i.mnemonic for i in k.code if i.defn.op not in ("if", "else", "endif", "loop", "endloop")]
    assert 5 in need.need(leaves.index("add.i32"))[0]
    assert 7 not in need.need(leaves.index("sub.i32"))[0]  # r7: written before each read, in the block
    # without the guard the write is a kill: r5 is no longer needed after the loop
    m2 = assemble(GUARDED.replace("@p2 movi.b32 r5, 9", "movi.b32 r5, 9"))
    need2 = Need(m2, m2.kernels[0].code, islands=True, wave_width=32)
    assert 5 not in need2.need(leaves.index("add.i32"))[0]
    text = _body(translate(m, "sm_90").text)
    assert re.search(r"@%A add\.s32 %t\d+, %r3, %r3;\s*\n\s*@%A mov\.b32 %r5,", text), text

def test_a_run_of_shuffles_votes_once() -> None:
    src = """
.kernel k
.arg out buffer u32 readwrite
.registers 8
    mov.sr r0, sr_lane_id
    movi.b32 r1, 1
    shfl.xor.b32 r2, r0, r1
    shfl.down.b32 r3, r2, r1
    shfl.up.b32 r4, r3, r1
    movi.b32 r1, 2
    shl.b32 r5, r0, r1
    st.device.b32 out[r5], r4
.end
"""
    text = _body(translate(assemble(src), "sm_90").text)
    assert text.count("vote.sync.ballot.b32 %emA, %A, %exist;") == 1
    assert text.count("shfl.sync.idx.b32") == 3


WARP_SRC = r"""
__device__ float warp_sum(float v) {
    for (int off = warpSize / 2; off > 0; off /= 2) v += __shfl_down_sync(0xffffffffu, v, off);
    return v;
}
__global__ void sums(float* out, const float* in, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = warp_sum(i < n ? in[i] : 0.0f);
    if (threadIdx.x % warpSize == 0) out[i / warpSize] = v;
}
"""


def test_cuda_warp_code_has_a_w32_body_that_the_ptx_keeps_alone() -> None:
    k = aw.cuda_kernel(WARP_SRC, "sums")
    code = k.compile().kernels[0].code
    shfl = [i for i in code if i.mnemonic.startswith("shfl.")]
    # the W = 32 body: five WAVE shfl.down (the loop unrolled, warpSize = 32); the generic body: a
    # loop of one shfl.idx with the warp's source lane computed at run time
    assert sum(i.mnemonic == "shfl.down.b32" for i in shfl) == 5
    assert sum(i.mnemonic == "shfl.idx.b32" for i in shfl) == 1
    text = _body(translate(k.compile(), "sm_90").text)
    assert text.count("shfl.sync.idx.b32") == 5  # only the W = 32 body, straight-line
    body = text[text.index("mov.pred %A, 1;"):]
    assert "min.u32" not in body  # no min(W, 32): the generic warp geometry is gone


@pytest.mark.parametrize("w", [8, 16, 32, 64])
def test_both_bodies_give_the_warp_sums(w: int) -> None:
    x = np.random.default_rng(w).standard_normal(256).astype(np.float32)
    wc = min(w, 32)
    out = np.zeros(256 // wc, np.float32)
    aw.cuda_kernel(WARP_SRC, "sums")(out, x, 250, grid=2, workgroup=128, target="emulator", wave_width=w)
    g = np.where(np.arange(256) < 250, x, np.float32(0)).reshape(-1, wc).copy()
    off = wc // 2
    while off:  # lane l adds lane l + off; lanes past the warp keep their value
        g[:, :wc - off] = g[:, :wc - off] + g[:, off:]
        off //= 2
    assert np.array_equal(out, g[:, 0])


@pytest.mark.skipif(PTXAS is None, reason="ptxas not installed")
def test_the_suite_ptx_assembles(tmp_path: Path) -> None:
    here = Path(__file__).resolve().parent / "cuda_suite"
    for f, name, sb in (("reduce.cu", "reduce<float, 256>", 0), ("spmv.cu", "spmv_csr_vector", 0),
                        ("scan.cu", "scan_blocks", 2048), ("matvec.cu", "gemv", 0)):
        text = translate(aw.cuda_kernel(here / f, name).compile(shared_bytes=sb), "sm_90").text
        p = tmp_path / "k.ptx"
        p.write_text(text)
        r = subprocess.run([PTXAS, "-arch=sm_90", str(p), "-o", str(tmp_path / "k.cubin")], capture_output=True,
                           text=True)
        assert r.returncode == 0, (f, r.stderr[:2000])


def test_the_dry_run_sees_the_emitters_positions() -> None:
    # Need's positions are the emitter's: one per leaf instruction the walk visits, in order
    m = assemble(LIVE)
    k = m.kernels[0]
    seen: list[str] = []

    class Count(Need):
        def instruction(self, ins):  # noqa: ANN001, ANN202
            seen.append(ins.mnemonic)
            super().instruction(ins)

    Count(m, k.code, islands=True, wave_width=32)
    n = sum(1 for i in k.code if i.defn.op not in ("if", "else", "endif", "loop", "endloop"))
    assert len(seen) == n and ControlWalk is not None


@pytest.mark.parametrize("value, expected", [(None, True), ("1", True), ("0", False)])
def test_islands_are_the_default_and_zero_turns_them_off(value: str | None, expected: bool) -> None:
    """ANYWAVE_PTX_ISLANDS unset or 1: the lighter lowering; 0: every instruction predicated."""
    import os
    import sys

    env = {k: v for k, v in os.environ.items() if k != "ANYWAVE_PTX_ISLANDS"}
    if value is not None:
        env["ANYWAVE_PTX_ISLANDS"] = value
    r = subprocess.run([sys.executable, "-c", "from anywave.backends import ptx; print(ptx.PTX_ISLANDS)"],
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(expected)
