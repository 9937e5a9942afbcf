"""HIP backend: rendering, AMD compile checks with Debian's hipcc (ROCm 5.2), wave64/wave32 code
objects, HIP-for-NVIDIA through NVRTC + ptxas, and the hip-python runtime's absence path.

The AMD checks need ``hipcc libamdhip64-dev rocm-device-libs`` (and ``llvm-15`` for the
disassembly test); the NVIDIA checks need ``cuda-python`` + ``nvidia-cuda-nvrtc`` and ``ptxas``.
Each skips with the reason when its tool is absent. Execution on a GPU is
bench/hip_on_cuda_conformance.py (results in bench/results/hip_on_cuda_conformance.json)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path

import pytest

from anywave.asm import assemble
from anywave.backends import cfamily
from anywave.backends.cfamily import CFamilyError, Features
from anywave.backends.hip import HIP, translate
from anywave.conformance import assemble_group, assemble_groups, group_names, group_source
from anywave.isa.table import INSTRUCTIONS

HIPCC = shutil.which("hipcc")
BUNDLER = shutil.which("clang-offload-bundler-15")
READELF = shutil.which("llvm-readelf-15")
OBJDUMP = shutil.which("llvm-objdump-15")
PTXAS = shutil.which("ptxas")
needs_hipcc = pytest.mark.skipif(HIPCC is None, reason="hipcc not installed (apt-get install hipcc "
                                 "libamdhip64-dev rocm-device-libs)")

#: the AMD targets checked, with their default wavefront size (CDNA 64, RDNA 32)
ARCHS = {"gfx90a": 64, "gfx940": 64, "gfx1030": 32}


def _examples() -> dict[str, object]:
    files = resources.files("anywave.examples")
    return {p.name[:-5]: assemble(p.read_text(), p.name) for p in files.iterdir() if p.name.endswith(".wave")}


def test_every_mnemonic_is_rendered_or_refused_with_a_reason() -> None:
    feats = Features(fp64=True, wave_widths=(32, 64))
    for d in INSTRUCTIONS:
        why = cfamily.unsupported_reason(d, feats)
        assert why is None, d.mnemonic  # HIP devices have fp64 and waves: nothing is refused
        assert cfamily.C_DISPATCH.handles(d), d.mnemonic


@pytest.mark.parametrize("W", [32, 64])
def test_every_conformance_group_and_example_renders(W: int) -> None:
    mods = {g: assemble_group(g) for g in group_names()} | _examples()
    for name, mod in mods.items():
        prog = translate(mod, W)
        assert not prog.refused, (name, prog.refused)
        assert set(prog.kernels) == {k.name for k in mod.kernels}


def test_wave_width_drives_lanes_ballots_and_butterflies() -> None:
    src = """
.kernel kw
.arg x buffer u32 readwrite
.registers 4
    mov.sr r0, sr_lane_id
    wred.add.f32 r2, r0
    st.device.b32 x[r0], r2
.end
"""
    mod = assemble(src)
    for W, steps in ((32, 5), (64, 6)):  # log2(W) butterfly steps, counted by hand
        text = translate(mod, W).text.split("WAVE kernel kw")[-1]
        assert text.count("__shfl(") == steps
        assert f"aw_lane = aw_tl % {W}u" in text
        assert f"AW_DEVICE_WAVE_SIZE != {W}" in text  # the compile-time wavefront guard
    with pytest.raises(CFamilyError, match="wave width 16"):
        translate(mod, 16)


def test_atomics_carry_exact_orders_and_scopes() -> None:
    text = translate(assemble_group("atomic"), 64).text
    assert "__hip_atomic_fetch_add(" in text and "__HIP_MEMORY_SCOPE_SYSTEM" in text
    assert "__ATOMIC_RELEASE, __HIP_MEMORY_SCOPE_SYSTEM" in text
    assert "__ATOMIC_SEQ_CST, __HIP_MEMORY_SCOPE_AGENT" in text
    assert "__hip_atomic_fetch_sub" not in text  # clang 15 lacks it: add of the negation instead
    assert all(HIP.refuse(_i) is None for k in assemble_group("atomic").kernels for _i in k.code)


def _hipcc(src: Path, arch: str, out: Path) -> subprocess.CompletedProcess[str]:
    from anywave.backends.hip import BUILD_OPTIONS

    env = dict(os.environ, HIP_PLATFORM="amd")
    return subprocess.run([HIPCC, "--genco", f"--offload-arch={arch}", *BUILD_OPTIONS, str(src), "-o", str(out)],
                          capture_output=True, text=True, env=env, timeout=600)


def _compile_all(tmp_path: Path, jobs: list[tuple[str, object, str]]) -> list[str]:
    """Compile (name, module, arch) jobs in 2 parallel processes; return the failures."""
    def one(job: tuple[str, object, str]) -> str | None:
        name, mod, arch = job
        src = tmp_path / f"{name}.{arch}.hip"
        src.write_text(translate(mod, ARCHS[arch]).text)  # type: ignore[arg-type]
        r = _hipcc(src, arch, tmp_path / f"{name}.{arch}.co")
        return None if r.returncode == 0 else f"{name} {arch}: {r.stderr[-1500:]}"

    with ThreadPoolExecutor(max_workers=2) as ex:
        return [f for f in ex.map(one, jobs) if f]


@needs_hipcc
# gfx90a (wave64) in the default tier; gfx940 (wave64) and gfx1030 (wave32) in the sweep tier
@pytest.mark.parametrize("arch", [a if a == "gfx90a" else pytest.param(a, marks=pytest.mark.sweep) for a in ARCHS])
def test_hipcc_compiles_every_group_and_example(tmp_path: Path, arch: str) -> None:
    # the groups as two modules of about equal size, not one each: hipcc's start-up is ~0.75 s
    # a call, whatever the module (29 s for the 44 groups one by one, 3.2 s for half of them at
    # once); hipcc's errors name the kernel, so nothing is lost in the report
    bins: list[list[str]] = [[], []]
    size = [0, 0]
    for g in sorted(group_names(), key=lambda g: -len(group_source(g))):
        i = size.index(min(size))
        bins[i].append(g)
        size[i] += len(group_source(g))
    mods = {f"groups{i}": assemble_groups(sorted(b)) for i, b in enumerate(bins)} | _examples()
    jobs = [(n, m, arch) for n, m in mods.items()]
    fails = _compile_all(tmp_path, jobs)
    assert not fails, "\n".join(fails[:5])


@needs_hipcc
def test_wavefront_guard_stops_a_mismatched_compile(tmp_path: Path) -> None:
    mod = assemble_group("wave")
    src = tmp_path / "w32.hip"
    src.write_text(translate(mod, 32).text)
    r = _hipcc(src, "gfx90a", tmp_path / "x.co")  # gfx90a is wave64: a W = 32 program must not build
    assert r.returncode != 0 and "rendered for wave width 32" in r.stderr


@needs_hipcc
@pytest.mark.skipif(not (BUNDLER and READELF and OBJDUMP),
                    reason="llvm-15 tools not installed (apt-get install llvm-15)")
@pytest.mark.parametrize(("arch", "W"), [("gfx90a", 64), ("gfx1030", 32)])
def test_code_object_wavefront_size(tmp_path: Path, arch: str, W: int) -> None:
    src = tmp_path / "wave.hip"
    src.write_text(translate(assemble_group("wave"), W).text)
    r = _hipcc(src, arch, tmp_path / "b.co")
    assert r.returncode == 0, r.stderr[-2000:]
    co = tmp_path / "k.co"
    subprocess.run([BUNDLER, "--unbundle", "--type=o", f"--input={tmp_path / 'b.co'}",
                    f"--targets=hipv4-amdgcn-amd-amdhsa--{arch}", f"--output={co}"], check=True)
    notes = subprocess.run([READELF, "--notes", str(co)], capture_output=True, text=True, check=True).stdout
    sizes = set(re.findall(r"\.wavefront_size:\s+(\d+)", notes))
    assert sizes == {str(W)}, sizes
    assert notes.count(".wavefront_size") == len(assemble_group("wave").kernels)
    dis = subprocess.run([OBJDUMP, "-d", str(co)], capture_output=True, text=True, check=True).stdout
    # wave64 exec masks are SGPR pairs (64-bit scalar ops on exec); wave32 uses exec_lo
    if W == 64:
        assert re.search(r"s_\w+_b64\s+(exec|s\[\d+:\d+\]), ", dis) and "exec_lo" not in dis
    else:
        assert "exec_lo" in dis
    assert "ds_bpermute_b32" in dis  # __shfl lowers to a cross-lane permute


# ------------------------------------------------------------------------ HIP on NVIDIA (NVRTC)

def _nvrtc_or_skip() -> None:
    from anywave.runtime import hip_nvidia

    try:
        hip_nvidia.nvrtc_version()
    except hip_nvidia.HipNvidiaError as e:
        pytest.skip(str(e))


def test_mapping_header_is_small_and_covers_the_hip_names_used() -> None:
    from anywave.runtime.hip_nvidia import HEADER

    assert 20 <= len(HEADER.splitlines()) <= 40
    text = "\n".join(translate(assemble_group(g), 32).text for g in group_names())
    used = set(re.findall(r"\b(__hip_atomic_\w+|__HIP_MEMORY_SCOPE_\w+|__ATOMIC_\w+|__builtin_amdgcn_\w+|"
                          r"__shfl|__ballot|__any)\b", text))
    for name in used:
        assert re.search(rf"#define {name}\b", HEADER), name


def test_nvrtc_compiles_every_group_and_ptxas_assembles_it(tmp_path: Path) -> None:
    _nvrtc_or_skip()
    from anywave.runtime.hip_nvidia import nvrtc_compile

    for g in group_names():
        ptx = nvrtc_compile(translate(assemble_group(g), 32).text, "sm_90").decode()
        assert ".target sm_90" in ptx and ".entry aw_k_" in ptx
        if g == "atomic":  # orders and scopes survive: release at system scope -> PTX .release.sys
            assert "atom.add.release.sys.u32" in ptx and "atom.add.relaxed.cta.u32" in ptx
        if g == "float":
            assert ptx.count("fma.rn.f32") == 1  # only the written fma: no contraction
        if PTXAS:
            (tmp_path / f"{g}.ptx").write_text(ptx)
            r = subprocess.run([PTXAS, "-arch=sm_90", str(tmp_path / f"{g}.ptx"), "-o", str(tmp_path / "o.cubin")],
                               capture_output=True, text=True)
            assert r.returncode == 0, (g, r.stderr[-2000:])


def test_nvrtc_errors_carry_the_log() -> None:
    _nvrtc_or_skip()
    from anywave.runtime.hip_nvidia import HipNvidiaError, nvrtc_compile

    with pytest.raises(HipNvidiaError, match="aw_undeclared_thing"):
        nvrtc_compile('extern "C" __global__ void k() { aw_undeclared_thing(); }')
    with pytest.raises(HipNvidiaError, match="sm_XY"):
        nvrtc_compile("", "gfx90a")


# ------------------------------------------------------------------------ hip-python runtime

def test_hip_runtime_absent_is_reported_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    from anywave.runtime import hip as hiprt
    from anywave.runtime import targets

    monkeypatch.setitem(sys.modules, "hip", None)  # import hip -> ImportError, as on a machine without it
    ok, why = hiprt.status()
    assert not ok and "hip-python is not usable" in why
    with pytest.raises(hiprt.HipError, match="pip install hip-python"):
        hiprt.HipTarget()
    targets.target_names()  # load the optional runtimes first, so restoring the registry keeps them
    saved = dict(targets._REGISTRY)
    try:
        hiprt.register()
        st = {s.name: s for s in targets.available_targets()}["hip"]
        assert not st.available and "hip-python" in st.reason
        with pytest.raises(targets.TargetUnavailable, match="hip"):
            targets.get_target("hip")
    finally:
        targets._REGISTRY.clear()
        targets._REGISTRY.update(saved)


def test_nvrtc_leaves_the_callers_bytes_alone() -> None:
    """NVRTC writes its log and PTX into the buffers it is given. A one-byte ``b" " * 1`` is
    CPython's shared b" ", so an empty log written there turned every b" " of the process into
    b"\\0" (torch then failed to import). Run in a child: the bug would corrupt this process."""
    _nvrtc_or_skip()
    code = ("from anywave.runtime.hip_nvidia import nvrtc_compile\n"
            "ptx = nvrtc_compile('extern \"C\" __global__ void k(float* x) { x[0] = 1.0f; }')\n"
            "cubin = nvrtc_compile('extern \"C\" __global__ void k(float* x) { x[0] = 1.0f; }', cubin=True)\n"
            "assert isinstance(ptx, bytes) and b'.entry' in ptx and not ptx.endswith(b'\\0'), ptx[-40:]\n"
            "assert isinstance(cubin, bytes) and cubin[:4] == b'\\x7fELF', cubin[:4]\n"
            "print(repr(b' '.decode()), repr(' '.encode().decode()))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout == "' ' ' '\n", r.stdout
