"""Generated C names never collide with the prelude's (issue 31, item 11).

The mask stack of a wave kernel names its condition copies by number; with the old scheme the 32nd
(``aw_c32``) and 64th (``aw_c64``) shadowed the prelude's NaN-canonicalising helpers of the same
names and the program failed to build. Every generated numbered name now carries the reserved
prefix :data:`anywave.backends.cfamily_prelude.GEN_PREFIX`, which no helper uses."""

from __future__ import annotations

import re

import numpy as np
import pytest

from anywave.asm import assemble
from anywave.backends import hip, metal, opencl, sycl
from anywave.backends.cfamily_prelude import GEN_PREFIX, PRELUDE, gen_name
from anywave.emu import emulate

N_IFS = 70  # > 64: the 32nd and 64th condition copies are among them


def _many_ifs(n: int) -> str:
    """n sequential divergent ifs (lane-dependent predicate), each around a wave reduction that
    accumulates into r1 (u32) and r7 (f32, whose adds call the prelude's ``aw_c32``); r0 = global
    id; y[t] = r1, z[t] = r7's bits."""
    body = []
    for i in range(n):
        body += [f"    movi.b32 r2, {i % 5 + 1}", "    rem.u32 r3, r0, r2", "    movi.b32 r2, 0",
                 "    setp.eq.u32 p0, r3, r2", "    if p0", "    wred.add.u32 r4, r0", "    add.i32 r1, r1, r4",
                 "    cvt.f32.u32 r6, r4", "    add.f32 r7, r7, r6", "    endif"]
    return "\n".join([".kernel k", ".arg y buffer u32 write", ".arg z buffer u32 write", ".registers 8",
                      "    mov.sr r0, sr_global_id_x",
                      "    movi.b32 r1, 0", "    movi.b32 r7, 0", *body, "    movi.b32 r2, 4", "    mul.i32 r5, r0, r2",
                      "    st.device.b32 y[r5+0], r1", "    st.device.b32 z[r5+0], r7", ".end", ""])


def _helper_names() -> set[str]:
    """Every identifier a prelude or dialect header defines (functions and macros)."""
    texts = [PRELUDE]
    for mod in (opencl, sycl, hip, metal):
        prog = mod.translate(assemble(_many_ifs(1))) if mod in (hip, metal) else mod.translate(
            assemble(_many_ifs(1)), 16)
        texts.append(prog.text.split("/* WAVE kernel")[0])
    names: set[str] = set()
    for t in texts:
        names |= set(re.findall(r"\b([A-Za-z_]\w*)\s*\(", t))
        names |= set(re.findall(r"#define\s+(\w+)", t))
    return names


def test_no_helper_uses_the_generated_prefix() -> None:
    helpers = _helper_names()
    assert "aw_c32" in helpers and "aw_c64" in helpers  # the ones the old scheme shadowed
    clash = sorted(n for n in helpers if n.startswith(GEN_PREFIX))
    assert not clash, f"helpers with the reserved generated-name prefix {GEN_PREFIX!r}: {clash}"


def test_generated_numbered_names_carry_the_prefix() -> None:
    prog = opencl.translate(assemble(_many_ifs(N_IFS)), 16)
    body = prog.text.split("/* WAVE kernel")[1].replace(prog.kernels["k"].c_name, "")
    assert gen_name("c", 64) in body
    # every aw_-style identifier ending in digits in the kernel body is either generated (prefix)
    # or a helper of the prelude/header (called, never declared as a local)
    helpers = _helper_names()
    numbered = set(re.findall(r"\b(aw\w*?\d+)\b", body))
    stray = sorted(n for n in numbered if not n.startswith(GEN_PREFIX) and n not in helpers)
    assert not stray, stray
    declared = set(re.findall(r"\b(?:bool|u32|u64|float|double)\s+(aw\w*)\s*[=;\[,]", body))
    assert not declared & helpers, declared & helpers


@pytest.mark.opencl
@pytest.mark.parametrize("W", [8])  # the clash is W-independent; one OpenCL build (~30 s)
def test_seventy_divergent_ifs_with_wave_ops_run_on_opencl(W: int) -> None:
    from anywave.runtime import opencl as rt

    ok, why = rt.status()
    if not ok:
        pytest.skip(f"OpenCL unavailable: {why}")
    mod = assemble(_many_ifs(N_IFS))
    n = 2 * W
    want, wantz = np.zeros(n, np.uint32), np.zeros(n, np.uint32)
    emulate(mod, "k", grid=(1, 1, 1), workgroup=(n, 1, 1), args={"y": want, "z": wantz}, wave_width=W)
    # independent reference: lanes t with t % m == 0 add the sum of such lanes of their wave
    ref = np.zeros(n, np.uint64)
    fref = np.zeros(n, np.float32)
    t = np.arange(n)
    for i in range(N_IFS):
        m = i % 5 + 1
        on = t % m == 0
        for w0 in range(0, n, W):
            sl = slice(w0, w0 + W)
            s = t[sl][on[sl]].sum()
            ref[sl] += np.where(on[sl], np.uint64(s), np.uint64(0))
            fref[sl] = np.where(on[sl], fref[sl] + np.float32(s), fref[sl])
    np.testing.assert_array_equal(want, (ref & 0xFFFFFFFF).astype(np.uint32))
    np.testing.assert_array_equal(wantz, fref.view(np.uint32))
    got, gotz = np.zeros(n, np.uint32), np.zeros(n, np.uint32)
    rt.OpenCLRunner(rt.get_device())(mod, "k", (1, 1, 1), (n, 1, 1), {"y": got, "z": gotz}, W)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(gotz, wantz)
