"""The wave-group MMA ``mma.group.m16n{N}k16.f32.{f16,bf16}`` (docs/spec.md §8.14): the kernel
language's, the verifier's and the emulator's errors; emulator results against a float64
product at W = 8, 16, 32, 64; the CPU targets present bit-identical to the emulator.

Expectations: NumPy float64 products of inputs whose products and sums are exact in f32, and the
swizzled panel layout written here from the spec's text (not from ``anywave.isa.mma``)."""

from __future__ import annotations

import inspect

import ml_dtypes
import numpy as np
import pytest

import anywave as aw
from anywave.asm import assemble
from anywave.binary.verify import verify
from anywave.compiler import CompileError
from anywave.emu import emulate
from anywave.errors import EmulationError, VerifyError

WIDTHS = (8, 16, 32, 64)


@pytest.fixture(autouse=True)
def _cache(monkeypatch, tmp_path):
    monkeypatch.setenv("ANYWAVE_CACHE_DIR", str(tmp_path / "cache"))


def _swizzled(k, n, p):  # noqa: ANN001, ANN202 - ints or arrays
    """Byte offset of B element (k, n): docs/spec.md §8.14, the swizzled panel layout."""
    return (n // 64) * p + 128 * k + 16 * (((n % 64) // 8) ^ (k % 8)) + 2 * (n % 8)


# ----------------------------------------------------------------------------- a kernel that works
@aw.kernel
def grp(a: aw.In[aw.u16], bimg: aw.In[aw.u16], c: aw.Out[aw.f32], *, N: int = 64, BF: int = 1):
    """8 waves (two groups): wave w computes rows 16w.. of C = A B, A (128 x 32) from device
    memory, B (32 x N) copied from ``bimg`` (already in the swizzled layout, panel stride 4096)
    into local memory; two 16-deep steps (offset 0 and 2048: the immediate)."""
    tb = aw.local_array(aw.u16, (16 * 128 * N // 64,), align=1024)
    acc = aw.fragments(N // 16, "acc")
    fa = aw.fragment("a", aw.bf16 if BF else aw.f16)
    for e in range(aw.local_id(0), 16 * 128 * N // 64, aw.workgroup_size(0)):
        tb[e] = bimg[e]
    aw.barrier()
    wv = aw.wave_id()
    for ks in aw.static_range(2):
        aw.mma_load(fa, a, 16 * wv * 32 + 16 * ks, 32)
        aw.mma_group(acc, fa, tb, 2048 * ks, 4096)
    for j in aw.static_range(N // 16):
        aw.mma_store(c, acc[j], 16 * wv * N + 16 * j, N)


def _inputs(n: int, bf: bool, exact: bool, seed: int = 0):
    rng = np.random.default_rng(seed + n)
    dt = ml_dtypes.bfloat16 if bf else np.float16
    if exact:
        A = (rng.integers(-6, 7, (128, 32)) / 2).astype(dt)
        B = (rng.integers(-6, 7, (32, n)) / 2).astype(dt)
    else:
        A = rng.standard_normal((128, 32)).astype(dt)
        B = rng.standard_normal((32, n)).astype(dt)
    image = np.zeros(n // 64 * 4096 // 2, np.uint16)
    kk, nn = np.meshgrid(np.arange(32), np.arange(n), indexing="ij")
    image[_swizzled(kk, nn, 4096) // 2] = B.view(np.uint16)
    return A, B, image


def _run(n: int, bf: bool, W: int, target: str = "emulator", exact: bool = True):
    A, B, image = _inputs(n, bf, exact)
    C = np.full((128, n), np.nan, np.float32)
    grp(A.view(np.uint16).reshape(-1), image, C.reshape(-1), grid=(1, 1, 1), workgroup=(8 * W, 1, 1),
        target=target, wave_width=W, N=n, BF=int(bf))
    return A, B, C


@pytest.mark.parametrize("W", WIDTHS)
@pytest.mark.parametrize("n,bf", [(64, True), (128, False), (256, True)])
def test_emulator_matches_float64(n: int, bf: bool, W: int) -> None:
    A, B, C = _run(n, bf, W)
    ref = A.astype(np.float64) @ B.astype(np.float64)  # exact in f32: halves of small integers
    assert (C == ref).all(), f"{int((C != ref).sum())} of {C.size} differ"


def test_the_layout_matters() -> None:
    """The same B in row-major order gives a different product: the test above sees the layout."""
    A, B, image = _inputs(64, True, True)
    C = np.zeros((128, 64), np.float32)
    grp(A.view(np.uint16).reshape(-1), np.resize(B.view(np.uint16).reshape(-1), image.size), C.reshape(-1),
        grid=(1, 1, 1), workgroup=(64, 1, 1), wave_width=8, N=64, BF=1)
    assert (C != A.astype(np.float64) @ B.astype(np.float64)).any()


def _target_widths(name: str) -> tuple[int, ...]:
    from anywave.runtime.targets import available_targets

    st = {t.name: t for t in available_targets()}.get(name)
    if st is None or not st.available:
        pytest.skip(f"{name} unavailable: {st.reason if st else 'not registered'}")
    return st.infos[0].wave_widths


@pytest.mark.parametrize("n", [64, *(pytest.param(n, marks=pytest.mark.slow) for n in (128, 256))])
@pytest.mark.parametrize("target", ["opencl", "sycl", "vulkan"])
def test_cpu_targets_bit_identical_to_the_emulator(target: str, n: int) -> None:
    widths = _target_widths(target)
    W = 16 if 16 in widths else widths[0]
    bf = n != 128
    _, _, want = _run(n, bf, W, exact=False)  # rounding happens: the fma order shows
    _, _, got = _run(n, bf, W, target=target, exact=False)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), \
        f"{target} W={W}: {int((got.view(np.uint32) != want.view(np.uint32)).sum())} of {got.size} differ"


# ----------------------------------------------------------------------------- kernel-language errors
@aw.kernel
def e_gap(a: aw.In[aw.u16]):
    tb = aw.local_array(aw.u16, (4096,), align=1024)
    acc = aw.fragments(4, "acc")
    fa = aw.fragment("a", aw.bf16)
    aw.mma_group((acc[0], acc[2], acc[1], acc[3]), fa, tb, 0, 2048)


@aw.kernel
def e_n(a: aw.In[aw.u16]):
    tb = aw.local_array(aw.u16, (4096,), align=1024)
    acc = aw.fragments(5, "acc")
    fa = aw.fragment("a", aw.bf16)
    aw.mma_group(acc, fa, tb, 0, 2048)


@aw.kernel
def e_align(a: aw.In[aw.u16]):
    pad = aw.local_array(aw.u16, (8,))
    tb = aw.local_array(aw.u16, (4096,))
    acc = aw.fragments(4, "acc")
    fa = aw.fragment("a", aw.bf16)
    pad[0] = a[0]
    aw.mma_group(acc, fa, tb, 0, 2048)


@aw.kernel
def e_offset(a: aw.In[aw.u16]):
    tb = aw.local_array(aw.u16, (4096,), align=1024)
    acc = aw.fragments(4, "acc")
    fa = aw.fragment("a", aw.bf16)
    aw.mma_group(acc, fa, tb, 512, 2048)


@aw.kernel
def e_device(a: aw.In[aw.u16]):
    acc = aw.fragments(4, "acc")
    fa = aw.fragment("a", aw.bf16)
    aw.mma_group(acc, fa, a, 0, 2048)


def _line_of(kern, needle: str) -> int:  # noqa: ANN001
    lines, first = inspect.getsourcelines(kern.fn)
    return first + next(i for i, t in enumerate(lines) if needle in t)


@pytest.mark.parametrize("kern,words", [
    (e_gap, ("consecutive", "[0, 2, 1, 3]")),
    (e_n, ("N = 80", "64, 128, 256")),
    (e_align, ("local byte 16", "not a multiple of 1024", "align=1024")),
    (e_offset, ("local byte 512", "not a multiple of 1024")),
    (e_device, ("tile must be a local array",)),
], ids=["strip-gap", "wrong-N", "unaligned-array", "unaligned-offset", "device-tile"])
def test_kernel_language_errors_name_the_line(kern, words) -> None:  # noqa: ANN001
    with pytest.raises(CompileError) as ei:
        kern.compile()
    e, line = ei.value, _line_of(kern, "aw.mma_group(")
    assert e.loc is not None and e.loc.line == line, str(e)
    assert f"test_mma_group.py:{line}:" in str(e)
    for w in words:
        assert w in str(e), str(e)


# ----------------------------------------------------------------------------- verifier errors
_K = """.kernel k
.arg x buffer f32 readwrite
.registers 8
.local_memory 16384
    mov.sr r0, sr_wave_id
    movi.u32 r1, 2048
    movi.u32 r2, 0
    movi.u32 r3, 32
    mma.load.a.local.m16n16k16.bf16 f31, [r2], r3
{body}
.end
"""


def test_verifier_rejects_an_unaligned_immediate_and_a_strip_past_f31() -> None:
    verify(assemble(_K.format(body="    mma.group.m16n256k16.f32.bf16 f0, f31, [r2+3072], r1")))  # valid
    with pytest.raises(VerifyError, match=r"immediate offset 512 is not a multiple of 1024"):
        verify(assemble(_K.format(body="    mma.group.m16n64k16.f32.bf16 f0, f31, [r2+512], r1")))
    with pytest.raises(VerifyError, match=r"strip f20\.\.f35; fragments are f0\.\.f31"):
        verify(assemble(_K.format(body="    mma.group.m16n256k16.f32.bf16 f20, f31, [r2], r1")))


# ----------------------------------------------------------------------------- emulator errors
def _emulate(body: str, waves: int, W: int = 8) -> None:
    m = assemble(_K.format(body=body))
    emulate(m, "k", grid=(1, 1, 1), workgroup=(waves * W, 1, 1), args={"x": np.zeros(4, np.float32)},
            wave_width=W)


_GROUP = "    mma.group.m16n64k16.f32.bf16 f0, f31, [{l}], r1"


@pytest.mark.parametrize("W", [8, 64])
def test_emulator_runs_a_valid_group(W: int) -> None:
    _emulate(_GROUP.format(l="r2+1024"), 8, W)


@pytest.mark.parametrize("waves", [1, 2, 6])
def test_emulator_rejects_a_wave_count_not_a_multiple_of_4(waves: int) -> None:
    with pytest.raises(EmulationError, match=rf"multiple of 4 waves.*has {waves} waves of 8 lanes"):
        _emulate(_GROUP.format(l="r2"), waves)


def test_emulator_rejects_a_wave_skipping_its_group() -> None:
    body = "    movi.u32 r4, 5\n    setp.ne.u32 p0, r0, r4\n    if p0\n" + _GROUP.format(l="r2") + "\n    endif"
    with pytest.raises(EmulationError, match=r"4 waves of a group together, but only 3"):
        _emulate(body, 8)


def test_emulator_rejects_different_offsets_in_a_group() -> None:
    body = "    movi.u32 r4, 10\n    shl.b32 r5, r0, r4\n" + _GROUP.format(l="r5")  # wave w at 1024 w
    with pytest.raises(EmulationError, match=r"B tile offset must be the same in the 4 waves of a group"):
        _emulate(body, 4)


def test_emulator_rejects_an_unaligned_run_time_offset() -> None:
    body = "    movi.u32 r4, 512\n" + _GROUP.format(l="r4")
    with pytest.raises(EmulationError, match=r"B tile offset 512 is not a multiple of 1024"):
        _emulate(body, 4)
