"""Asynchronous copies device -> local memory (docs/spec.md §4.5, ISA category ASYNC_COPY):
the table records, verifier rules, the emulator's semantics and its checked-mode errors at
W = 8..64, the language intrinsics (``aw.async_copy/async_commit/async_wait``), and what the
backends emit (PTX ``cp.async`` on sm_80+, plain accesses elsewhere; the conformance group
``async_copy`` runs on every target)."""

from __future__ import annotations

import inspect
import os
import shutil
import subprocess

import numpy as np
import pytest

import anywave as aw
from anywave.asm import assemble
from anywave.binary.verify import check
from anywave.compiler import CompileError
from anywave.emu import emulate
from anywave.errors import EmulationError, OutOfBoundsError
from anywave.isa.table import BY_MNEMONIC, INSTRUCTIONS, MAX_ASYNC_WAIT, Category

WS = (8, 16, 32, 64)


@pytest.fixture(autouse=True)
def _cache(monkeypatch, tmp_path):
    monkeypatch.setenv("ANYWAVE_CACHE_DIR", str(tmp_path / "cache"))


def _kernel(body: str, *, local: int = 1024, a: str = "read", regs: int = 32) -> str:
    return (f".kernel k\n.arg a buffer u32 {a}\n.arg out buffer u32 write\n.registers {regs}\n"
            + (f".local_memory {local}\n" if local else "") + "\n".join("    " + ln.strip()
                                                                         for ln in body.strip().splitlines())
            + "\n.end\n")


_PRO = """
mov.sr r0, sr_thread_linear_id
movi.u32 r1, 2
shl.b32 r2, r0, r1
"""


def _run(src: str, W: int, check_mode: bool, n: int = 64, a: np.ndarray | None = None) -> np.ndarray:
    m = assemble(src)
    a = np.arange(1, 4 * n + 1, dtype=np.uint32) * np.uint32(2654435761) if a is None else a
    out = np.zeros(n, np.uint32)
    emulate(m, "k", grid=1, workgroup=n, args={"a": a, "out": out}, wave_width=W, check=check_mode)
    return out


# ----------------------------------------------------------------------------- the table

def test_records_are_appended_in_category_14() -> None:
    recs = [d for d in INSTRUCTIONS if d.category is Category.ASYNC_COPY]
    assert int(Category.ASYNC_COPY) == 14
    assert [d.mnemonic for d in recs] == ["cp.async.b32", "cp.async.b64", "cp.async.b128", "cp.async.commit",
                                          "cp.async.wait"]
    assert [d.opcode for d in recs] == [0x0E00 + i for i in range(5)]
    assert [BY_MNEMONIC[f"cp.async.b{b}"].type.nbytes for b in (32, 64, 128)] == [4, 8, 16]


# ----------------------------------------------------------------------------- verifier

@pytest.mark.parametrize("body, words", [
    ("cp.async.wait 8", ["cp.async.wait 8", f"0..{MAX_ASYNC_WAIT}"]),
    ("cp.async.b64 [r2+4], a[r2]", ["immediate offset 4", "multiple of the access width 8"]),
    ("cp.async.b128 [r2], a[r2+8]", ["immediate offset 8", "16"]),
    ("cp.async.b32 [r2+1024], a[r2]", ["always beyond", "1024 bytes of local memory"]),
])
def test_verifier_rejects(body: str, words: list[str]) -> None:
    probs = check(assemble(_kernel(_PRO + body)))
    assert probs and all(any(w in p for p in probs) for w in words), probs


def test_verifier_buffer_access_and_local_memory_rules() -> None:
    body = _PRO + "cp.async.b32 [r2], out[r2]"
    probs = check(assemble(_kernel(body)))
    assert any("load from buffer 'out' declared write" in p for p in probs), probs
    assert check(assemble(_kernel(_PRO + "cp.async.b32 [r2], a[r2]", a="readwrite"))) == []
    assert check(assemble(_kernel(_PRO + "cp.async.b32 [r2], a[r2]", a="read"))) == []
    probs = check(assemble(_kernel(_PRO + "cp.async.b32 [r2], a[r2]", local=0)))
    assert any("declares 0 bytes" in p for p in probs), probs
    assert check(assemble(_kernel(_PRO + "cp.async.wait 7\ncp.async.commit"))) == []


# ----------------------------------------------------------------------------- emulator semantics

_MIRROR = _PRO + """
cp.async.b32 [r2], a[r2]
cp.async.commit
cp.async.wait 0
barrier
movi.u32 r5, 252
sub.i32 r6, r5, r2
ld.local.b32 r3, [r6]
st.device.b32 out[r2], r3
"""


@pytest.mark.parametrize("W", WS)
@pytest.mark.parametrize("check_mode", [False, True])
def test_copy_then_wait_then_barrier(W: int, check_mode: bool) -> None:
    a = np.random.default_rng(W).integers(0, 1 << 32, 256, dtype=np.uint64).astype(np.uint32)
    out = _run(_kernel(_MIRROR), W, check_mode, a=a)
    assert np.array_equal(out, a[:64][::-1])


# read of the destination before the wait (the copy is in flight)
_EARLY = _PRO + """
cp.async.b32 [r2], a[r2]
cp.async.commit
ld.local.b32 r3, [r2]
cp.async.wait 0
st.device.b32 out[r2], r3
"""


@pytest.mark.parametrize("W", WS)
def test_unchecked_read_before_the_wait_sees_the_old_bytes(W: int) -> None:
    # the emulator's schedule writes at the wait (spec §4.5); the old bytes are the st.local ones
    src = _kernel(_PRO + "movi.u32 r9, 77\nst.local.b32 [r2], r9\n" + _EARLY.replace(_PRO, ""))
    assert (_run(src, W, False) == 77).all()


@pytest.mark.parametrize("W", WS)
def test_checked_read_before_the_wait_is_an_error(W: int) -> None:
    with pytest.raises(EmulationError, match=r"read in instruction 5 \(ld.local.b32\).*in flight"):
        _run(_kernel(_EARLY), W, True)


@pytest.mark.parametrize("W", WS)
def test_wait_n_leaves_the_newest_groups_in_flight(W: int) -> None:
    # two groups; wait 1 completes only the first: reading the second copy's bytes is an error
    body = _PRO + """
    cp.async.b32 [r2], a[r2]
    cp.async.commit
    cp.async.b32 [r2+256], a[r2+256]
    cp.async.commit
    cp.async.wait 1
    ld.local.b32 r3, [r2]
    ld.local.b32 r4, [r2+256]
    cp.async.wait 0
    st.device.b32 out[r2], r3
    """
    with pytest.raises(EmulationError, match=r"instruction 9 \(ld.local.b32\).*byte offset 256"):
        _run(_kernel(body), W, True)
    ok = body.replace("ld.local.b32 r4, [r2+256]\n    cp.async.wait 0",
                      "cp.async.wait 0\n    ld.local.b32 r4, [r2+256]")
    a = np.arange(256, dtype=np.uint32) * np.uint32(3)
    assert np.array_equal(_run(_kernel(ok), W, True, a=a), a[:64])


@pytest.mark.parametrize("W", WS)
def test_uncommitted_copies_are_not_completed_by_a_wait(W: int) -> None:
    body = _PRO + """
    cp.async.b32 [r2], a[r2]
    cp.async.wait 0
    ld.local.b32 r3, [r2]
    cp.async.commit
    cp.async.wait 0
    st.device.b32 out[r2], r3
    """
    with pytest.raises(EmulationError, match="in flight"):
        _run(_kernel(body), W, True)


@pytest.mark.parametrize("W", WS)
def test_other_threads_need_a_barrier_after_the_wait(W: int) -> None:
    body = _MIRROR.replace("barrier\n", "")
    with pytest.raises(EmulationError, match="data race on local memory"):
        _run(_kernel(body), W, True)


@pytest.mark.parametrize("W", WS)
def test_a_write_racing_with_a_copy_in_flight_is_reported(W: int) -> None:
    # another thread's store to bytes in flight (after a barrier, but before the issuer's wait)
    body = _PRO + """
    cp.async.b32 [r2], a[r2]
    cp.async.commit
    barrier
    movi.u32 r5, 252
    sub.i32 r6, r5, r2
    st.local.b32 [r6], r0
    cp.async.wait 0
    """
    with pytest.raises(EmulationError, match=r"write in .*st.local.b32.*in flight"):
        _run(_kernel(body), W, True)


@pytest.mark.parametrize("W", WS)
def test_copies_never_completed_and_overlapping_copies_are_errors(W: int) -> None:
    with pytest.raises(EmulationError, match="ended with an asynchronous copy in flight"):
        _run(_kernel(_PRO + "cp.async.b32 [r2], a[r2]\ncp.async.commit"), W, True)
    _run(_kernel(_PRO + "cp.async.b32 [r2], a[r2]\ncp.async.commit"), W, False)  # unchecked: dropped
    with pytest.raises(EmulationError, match="already the destination of a copy in flight"):
        _run(_kernel(_PRO + "cp.async.b32 [r2], a[r2]\ncp.async.b32 [r2], a[r2+256]\ncp.async.commit\n"
                     "cp.async.wait 0"), W, True)


@pytest.mark.parametrize("W", WS)
def test_misaligned_and_out_of_bounds_copies_are_errors(W: int) -> None:
    # r3 = 16 t, r8 = 16 t + 4
    body = _PRO + "movi.u32 r7, 4\nshl.b32 r3, r0, r7\nadd.i32 r8, r3, r7\n{}\ncp.async.commit\ncp.async.wait 0"
    a = np.zeros(1024, np.uint32)
    with pytest.raises(EmulationError, match="misaligned device memory access.*byte offset 4 is not a multiple of 8"):
        _run(_kernel(body.format("cp.async.b64 [r3], a[r8]"), local=2048), W, False, a=a)
    with pytest.raises(EmulationError, match="misaligned local memory access.*byte offset 4 is not a multiple of 16"):
        _run(_kernel(body.format("cp.async.b128 [r8], a[r3]"), local=2048), W, False, a=a)
    with pytest.raises(OutOfBoundsError, match="argument 'a'"):
        _run(_kernel(body.format("cp.async.b32 [r2], a[r2+1024]")), W, False)
    with pytest.raises(OutOfBoundsError, match="local memory"):
        _run(_kernel(body.format("cp.async.b32 [r8], a[r2]"), local=256), W, False)


# ----------------------------------------------------------------------------- the language

@aw.kernel
def _pipelined_sum(x: aw.In[aw.f32], out: aw.Out[aw.f32], tiles: aw.i32):
    # double buffering as docs/guide/intrinsics.md shows it: tile k + 1 in flight while tile k is read
    t = aw.local_id(0)
    g = aw.workgroup_id(0)
    base = g * tiles * 256
    buf = aw.local_array(aw.f32, (2, 256))
    aw.async_copy(buf, (0, 4 * t), x, base + 4 * t, 4)
    aw.async_commit()
    acc = aw.f32(0.0)
    for k in range(tiles):
        if k + 1 < tiles:
            aw.async_copy(buf, ((k + 1) % 2, 4 * t), x, base + (k + 1) * 256 + 4 * t, 4)
        aw.async_commit()
        aw.async_wait(1)
        aw.barrier()
        acc += buf[k % 2, (5 * t + k) % 256]
        aw.barrier()
    aw.async_wait()
    out[g * 64 + t] = acc


@aw.kernel
def _scalar_copies(x: aw.In[aw.i32], out: aw.Out[aw.i32]):
    t = aw.local_id(0)
    tile = aw.local_array(aw.i32, 192)
    aw.async_copy(tile, 2 * t, x, 2 * t, n=2)
    aw.async_copy(tile, 128 + t, x, t)
    aw.async_commit()
    aw.async_wait(pending=0)
    aw.barrier()
    out[t] = tile[127 - 2 * t] + tile[191 - t]


def _pipelined_reference(x: np.ndarray, groups: int, tiles: int) -> np.ndarray:
    tl = x.reshape(groups, tiles, 256)
    out = np.zeros((groups, 64), np.float32)
    for g in range(groups):
        for t in range(64):
            acc = np.float32(0)
            for k in range(tiles):
                acc = np.float32(acc + tl[g, k, (5 * t + k) % 256])
            out[g, t] = acc
    return out.reshape(-1)


def _emulate(kern, args: dict, groups: int, W: int) -> None:
    # the compiled module straight on the emulator (a launch through the kernel object probes
    # every runtime first)
    m = kern.compile()
    emulate(m, m.kernels[0].name, grid=groups, workgroup=64, args=args, wave_width=W, check=True)


@pytest.mark.parametrize("W", WS)
def test_language_pipeline_matches_the_sequential_sum(W: int) -> None:
    groups, tiles = 2, 4
    x = np.random.default_rng(W).standard_normal(groups * tiles * 256).astype(np.float32)
    out = np.full(groups * 64, np.nan, np.float32)
    _emulate(_pipelined_sum, {"x": x, "out": out, "tiles": tiles}, groups, W)
    assert np.array_equal(out, _pipelined_reference(x, groups, tiles))
    xi = np.arange(128, dtype=np.int32) * 7 - 300
    oi = np.zeros(64, np.int32)
    _emulate(_scalar_copies, {"x": xi, "out": oi}, 1, W)
    t = np.arange(64)
    assert np.array_equal(oi, xi[127 - 2 * t] + xi[63 - t])


def test_language_emits_the_instructions() -> None:
    from anywave.asm import disassemble

    text = disassemble(_pipelined_sum.compile())
    assert "cp.async.b128" in text and "cp.async.commit" in text and "cp.async.wait  1" in text, text


def _line_of(fn, needle: str) -> int:
    lines, first = inspect.getsourcelines(fn.fn if hasattr(fn, "fn") else fn)
    return first + next(k for k, s in enumerate(lines) if needle in s)


@aw.kernel
def _bad_n(x: aw.In[aw.f32], out: aw.Out[aw.f32]):
    tile = aw.local_array(aw.f32, 64)
    aw.async_copy(tile, 0, x, 0, 3)  # bad n


@aw.kernel
def _bad_dst(x: aw.In[aw.f32], out: aw.Out[aw.f32]):
    aw.async_copy(out, 0, x, 0)  # bad dst


@aw.kernel
def _bad_types(x: aw.In[aw.f32], out: aw.Out[aw.f32]):
    tile = aw.local_array(aw.i32, 64)
    aw.async_copy(tile, 0, x, 0)  # bad types


@aw.kernel
def _bad_align(x: aw.In[aw.f32], out: aw.Out[aw.f32]):
    tile = aw.local_array(aw.f32, 64)
    aw.async_copy(tile, 0, x, 2, 4)  # bad align


@aw.kernel
def _bad_wait(x: aw.In[aw.f32], out: aw.Out[aw.f32]):
    aw.async_wait(8)  # bad wait


@aw.kernel
def _bad_src(x: aw.In[aw.f32], out: aw.Out[aw.f32]):
    tile = aw.local_array(aw.f32, 64)
    aw.async_copy(tile, 0, out, 0)  # bad src


@pytest.mark.parametrize("kern, needle, words", [
    (_bad_n, "# bad n", ["n = 3", "[1, 2, 4]"]),
    (_bad_dst, "# bad dst", ["destination must be a local array"]),
    (_bad_types, "# bad types", ["holds i32", "f32"]),
    (_bad_align, "# bad align", ["element index 2 is not a multiple of n = 4"]),
    (_bad_wait, "# bad wait", ["0..7", "got 8"]),
    (_bad_src, "# bad src", ["'out'", "write only"]),
])
def test_language_errors_point_at_the_line(kern, needle: str, words: list[str]) -> None:
    with pytest.raises(CompileError) as ei:
        kern.compile()
    e = ei.value
    assert e.loc is not None and e.loc.line == _line_of(kern, needle), str(e)
    for w in words:
        assert w in str(e), str(e)


# ----------------------------------------------------------------------------- backends

def _group_module():
    from anywave.conformance import suite

    return suite.assemble_group("async_copy")


def _ptx_text(module, arch: str) -> str:
    from anywave.backends import ptx

    return ptx.translate(module, arch).text


def test_ptx_uses_cp_async_on_sm80_and_plain_accesses_before() -> None:
    m = assemble(_kernel(_PRO + """
        cp.async.b32 [r2], a[r2]
        cp.async.b64 [r2+256], a[r2+256]
        movi.u32 r1, 4
        shl.b32 r3, r0, r1
        cp.async.b128 [r3], a[r3]
        cp.async.commit
        cp.async.wait 3
        cp.async.wait 0
        """))
    t90 = _ptx_text(m, "sm_90")
    for line in ("cp.async.ca.shared.global", ", 4;", ", 8;", "cp.async.cg.shared.global", ", 16;",
                 "cp.async.commit_group;", "cp.async.wait_group 3;", "cp.async.wait_group 0;"):
        assert line in t90, line
    t75 = _ptx_text(m, "sm_75")
    assert "cp.async" not in "\n".join(ln for ln in t75.splitlines() if not ln.strip().startswith("//"))
    assert "ld.global.v4.b32" in t75 and "st.shared.v4.b32" in t75


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not installed")
@pytest.mark.parametrize("arch", ["sm_75", "sm_80", "sm_90"])
@pytest.mark.parametrize("checked", [False, True])
def test_ptx_of_the_conformance_group_assembles(arch: str, checked: bool, tmp_path) -> None:
    from anywave.backends import ptx

    p = tmp_path / "g.ptx"
    p.write_text(ptx.translate(_group_module(), arch, checked=checked).text)
    r = subprocess.run(["ptxas", f"-arch={arch}", str(p), "-o", str(tmp_path / "g.cubin")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    cuobjdump = shutil.which("cuobjdump")
    if cuobjdump and arch == "sm_90" and not checked and (shutil.which("nvdisasm") or os.environ.get("NVDISASM_PATH")):
        sass = subprocess.run([cuobjdump, "--dump-sass", str(tmp_path / "g.cubin")], capture_output=True,
                              text=True).stdout
        assert "LDGSTS" in sass and "LDGDEPBAR" in sass and "DEPBAR" in sass


def test_checked_builds_guard_both_addresses() -> None:
    from anywave.backends import opencl as ocl
    from anywave.backends import ptx

    m = assemble(_kernel(_PRO + "cp.async.b32 [r2], a[r2]\ncp.async.commit\ncp.async.wait 0"))
    for prog in (ptx.translate(m, "sm_90", checked=True), ocl.translate(m, 16, checked=True)):
        sites = prog.kernels["k"].sites
        assert [s.ins.mnemonic for s in sites] == ["cp.async.b32", "cp.async.b32"]  # local, then device


@pytest.mark.opencl
@pytest.mark.parametrize("W", [8, 32])
def test_checked_opencl_launch_reports_either_address(W: int) -> None:
    from anywave.runtime.targets import TargetUnavailable, get_target

    try:
        t = get_target("opencl", wave_width=W)
    except (TargetUnavailable, ValueError) as e:
        pytest.skip(str(e))
    body = _PRO + "{}\ncp.async.commit\ncp.async.wait 0\nbarrier\nld.local.b32 r3, [r2]\nst.device.b32 out[r2], r3"
    m = assemble(_kernel(body.format("cp.async.b32 [r2], a[r2+1024]"), local=256))
    a = np.arange(256, dtype=np.uint32)
    with pytest.raises(OutOfBoundsError, match=r"argument 'a' byte offset 1024 \(4-byte load"):
        t.launch(m, "k", (1,), (64,), {"a": a, "out": np.zeros(64, np.uint32)}, check=True)
    m = assemble(_kernel(body.format("cp.async.b32 [r2+4], a[r2]"), local=256))
    with pytest.raises(OutOfBoundsError, match=r"local memory byte offset 256 \(4-byte store"):
        t.launch(m, "k", (1,), (64,), {"a": a, "out": np.zeros(64, np.uint32)}, check=True)
    out = np.zeros(64, np.uint32)
    t.launch(assemble(_kernel(body.format("cp.async.b32 [r2], a[r2+512]"), local=256)), "k", (1,), (64,),
             {"a": a, "out": out}, check=True)
    assert np.array_equal(out, a[128:192])
