"""The cooperative-matrix lowering of wave-scope fragments (anywave.backends.spirv_coop): which
kernels take it, what the modules contain, and the device probe that turns it on. The lowering's
results are checked on a device that offers VK_KHR_cooperative_matrix (the NVIDIA driver: the
conformance suite on Vulkan, bench/gpu_coop.sh); lavapipe offers none, so CI checks the modules."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from types import SimpleNamespace

import pytest

from anywave.backends import spirv, spirv_coop
from anywave.backends.spirv_asm import CAP, OP
from anywave.conformance import suite

COOP = dataclasses.replace(spirv.FULL_FEATURES, cooperative_matrix=("bf16", "f16"), coop_wave_width=32)
GROUPS = ("mma_frag", "mma_group", "mma_acc")


def _instructions(words: tuple[int, ...]) -> list[tuple[int, tuple[int, ...]]]:
    """(opcode, operands) of every instruction after the 5-word header (SPIR-V §2.3)."""
    out, i = [], 5
    while i < len(words):
        n, op = words[i] >> 16, words[i] & 0xFFFF
        assert n >= 1, f"a zero word count at word {i}"
        out.append((op, tuple(words[i + 1:i + n])))
        i += n
    assert i == len(words)
    return out


def _ops(words: tuple[int, ...]) -> set[int]:
    return {op for op, _ in _instructions(words)}


def _caps(words: tuple[int, ...]) -> set[int]:
    return {ops[0] for op, ops in _instructions(words) if op == OP["Capability"]}


@pytest.fixture(scope="module")
def modules() -> dict[str, object]:
    return {g: suite.assemble_group(g) for g in GROUPS}


def test_wave_scope_kernels_take_cooperative_matrices(modules) -> None:  # noqa: ANN001
    for m in modules.values():
        plain = spirv.translate(m, 32)
        coop = spirv.translate(m, 32, COOP)
        assert not coop.refused, coop.refused
        for name, k in coop.kernels.items():
            wave = "m4n4k4" not in name  # the thread-scope kernel has no wave-scope slot
            assert k.cooperative_matrix is wave, name
            assert not plain.kernels[name].cooperative_matrix
            ops, caps = _ops(k.words), _caps(k.words)
            if not wave:
                assert k.words == plain.kernels[name].words, f"{name}: a thread-scope kernel changed"
                continue
            assert OP["CooperativeMatrixMulAddKHR"] in ops, name
            assert OP["TypeCooperativeMatrixKHR"] in ops
            assert {CAP["CooperativeMatrixKHR"], CAP["VulkanMemoryModel"]} <= caps
            assert (CAP["BFloat16TypeKHR"] in caps) == ("bf16" in name), name
            # the per-lane lowering's exact fma goes through f64; the matrix unit needs none of it
            # unless an accumulator operation (exp2, div) does
            mem_model = [ops_ for op, ops_ in _instructions(k.words) if op == OP["MemoryModel"]]
            assert mem_model == [(0, 3)], mem_model  # Logical, Vulkan
            staged = name.startswith(("group_mma", "acc_ops", "frag_gemm"))  # mma.group, acc ops, bias
            assert (k.scratch_per_wave == spirv_coop.SCRATCH_BYTES) is staged, (name, k.scratch_per_wave)
            assert k.local_memory_for(256, 32) == k.local_memory + 8 * k.scratch_per_wave


def test_other_widths_checked_builds_and_unguarded_devices_keep_the_per_lane_lowering(modules) -> None:  # noqa: ANN001
    m = modules["mma_frag"]
    guarded = dataclasses.replace(COOP, guard_local=True)
    for W, feats, checked in ((16, COOP, False), (64, COOP, False), (32, COOP, True), (32, guarded, False)):
        ref = spirv.translate(m, W, dataclasses.replace(feats, cooperative_matrix=(), coop_wave_width=0),
                              checked=checked)
        got = spirv.translate(m, W, feats, checked=checked)
        for name, k in got.kernels.items():
            assert not k.cooperative_matrix, (W, checked, name)
            assert k.words == ref.kernels[name].words, (W, checked, name)


def test_a_type_the_device_lacks_keeps_the_per_lane_lowering(modules) -> None:  # noqa: ANN001
    got = spirv.translate(modules["mma_frag"], 32, dataclasses.replace(COOP, cooperative_matrix=("f16",)))
    assert got.kernels["frag_gemm_f16"].cooperative_matrix
    assert not got.kernels["frag_gemm_bf16"].cooperative_matrix


def _validator_knows_cooperative_matrices() -> bool:
    tool = shutil.which("spirv-val")
    if not tool:
        return False
    r = subprocess.run([tool, "--version"], capture_output=True, text=True, check=False)
    return "v2023.1" not in r.stdout and "v2022" not in r.stdout


@pytest.mark.skipif(not _validator_knows_cooperative_matrices(),
                    reason="spirv-val missing or older than SPV_KHR_cooperative_matrix / SPV_KHR_bfloat16 "
                           "(Debian 12 ships v2023.1)")
def test_cooperative_matrix_modules_validate(modules) -> None:  # noqa: ANN001
    for m in modules.values():
        for name, k in spirv.translate(m, 32, COOP).kernels.items():
            assert spirv.validate(k.binary, "vulkan1.3") is None, name


# --------------------------------------------------------------------------- the device probe

def _device(props: list[dict], subgroup: int = 32) -> object:
    from anywave.runtime.vulkan import VulkanDevice

    d = object.__new__(VulkanDevice)
    d.cooperative_matrix = props
    d.subgroup_size = subgroup
    d.vk = None
    return d


def _prop(a: object, c: str = "float32", m: int = 16, scope: str = "subgroup") -> dict:
    return {"M": m, "N": 16, "K": 16, "A": a, "B": a, "C": c, "result": c, "saturating": False, "scope": scope}


F12 = SimpleNamespace(shaderFloat16=True, vulkanMemoryModel=True, vulkanMemoryModelDeviceScope=True)
COOP_ON = SimpleNamespace(cooperativeMatrix=True)
BF16_ON = SimpleNamespace(multiview=True, multiviewTessellationShader=True)  # see vulkan._bfloat16_features


def test_the_probe_offers_the_types_the_device_reports(monkeypatch) -> None:  # noqa: ANN001
    from anywave.runtime.vulkan import BFLOAT16_COMPONENT

    monkeypatch.setenv("ANYWAVE_VULKAN_COOPMAT", "1")
    props = [_prop("float16", "float16"), _prop("float16"), _prop(BFLOAT16_COMPONENT), _prop("uint8", "uint32")]
    d = _device(props)
    assert d._coop_types(COOP_ON, BF16_ON, F12, (32,)) == (("bf16", "f16"), "")
    # each requirement missing in turn
    assert d._coop_types(COOP_ON, None, F12, (32,)) == (("f16",), "")
    assert d._coop_types(COOP_ON, SimpleNamespace(multiview=True, multiviewTessellationShader=False), F12,
                         (32,)) == (("f16",), "")
    assert d._coop_types(COOP_ON, BF16_ON, SimpleNamespace(**{**vars(F12), "shaderFloat16": False}),
                         (32,)) == (("bf16",), "")
    assert d._coop_types(SimpleNamespace(cooperativeMatrix=False), BF16_ON, F12, (32,)) == ((), "")
    assert d._coop_types(None, BF16_ON, F12, (32,)) == ((), "")
    assert d._coop_types(COOP_ON, BF16_ON, SimpleNamespace(**{**vars(F12), "vulkanMemoryModelDeviceScope": False}),
                         (32,)) == ((), "")
    assert d._coop_types(COOP_ON, BF16_ON, F12, (8, 16)) == ((), "")  # its subgroup size cannot be required
    # shapes, accumulator types and scopes the lowering cannot use
    for p in (_prop("float16", "float16"), _prop("float16", m=8), _prop("float16", scope="workgroup")):
        assert _device([p])._coop_types(COOP_ON, BF16_ON, F12, (32,)) == ((), "")


@pytest.mark.parametrize("value", ["0", "off", "No", "false", "", None])
def test_the_setting_turns_cooperative_matrices_off(monkeypatch, value: str | None) -> None:  # noqa: ANN001
    if value is None:  # unset: off until the lowering has run on a device (docs/internals.md)
        monkeypatch.delenv("ANYWAVE_VULKAN_COOPMAT", raising=False)
    else:
        monkeypatch.setenv("ANYWAVE_VULKAN_COOPMAT", value)
    assert _device([_prop("float16")])._coop_types(COOP_ON, BF16_ON, F12, (32,)) == ((), "")


def test_a_bad_setting_is_named(monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("ANYWAVE_VULKAN_COOPMAT", "maybe")
    types, err = _device([_prop("float16")])._coop_types(COOP_ON, BF16_ON, F12, (32,))
    assert types == () and "ANYWAVE_VULKAN_COOPMAT='maybe'" in err


def test_a_launch_whose_staging_does_not_fit_runs_the_per_lane_lowering(modules) -> None:  # noqa: ANN001
    """The staging areas (1 KiB a wave) are local memory: a launch where they do not fit beside
    the kernel's own gets the per-lane translation (no staging), and one where even that does not
    fit is refused with the sizes named."""
    from anywave.errors import WaveError
    from anywave.runtime.driver import Launch
    from anywave.runtime.vulkan import VulkanRunner

    m = modules["mma_frag"]
    runner = object.__new__(VulkanRunner)
    super(VulkanRunner, runner).__init__()
    prog = spirv.translate(m, 32, COOP)
    info = prog.kernels["frag_gemm_bf16"]
    assert info.cooperative_matrix and info.scratch_per_wave
    threads = 64
    fits = info.local_memory + (threads // 32) * info.scratch_per_wave
    for limit, coop in ((fits, True), (fits - 1, False), (info.local_memory, False)):
        runner.dev = SimpleNamespace(local_memory=limit, max_grid=(1 << 16,) * 3, name="fake", features=COOP)
        launch = Launch(prog, info, m.kernel("frag_gemm_bf16"), [], (1, 1, 1), (threads, 1, 1), None, threads,
                        False, 32, m)
        runner.check_launch(launch)
        assert launch.info.cooperative_matrix is coop, limit
        assert launch.info.local_memory_for(threads, 32) <= limit
    runner.dev = SimpleNamespace(local_memory=info.local_memory - 1, max_grid=(1 << 16,) * 3, name="fake",
                                 features=COOP)
    launch = Launch(prog, info, m.kernel("frag_gemm_bf16"), [], (1, 1, 1), (threads, 1, 1), None, threads, False, 32, m)
    with pytest.raises(WaveError, match="bytes of local memory"):
        runner.check_launch(launch)


def test_the_vulkan_memory_model_orders_the_accesses(modules) -> None:  # noqa: ANN001
    """Under the Vulkan memory model a barrier orders other invocations' plain accesses only with
    MakeAvailable/MakeVisible semantics and NonPrivatePointer accesses: every barrier of a
    cooperative-matrix kernel carries both, every load/store of workgroup or storage-buffer memory
    is NonPrivatePointer, and device scope is declared."""
    from anywave.backends.spirv import NON_PRIVATE
    from anywave.backends.spirv_asm import SEM, STORAGE

    k = spirv.translate(modules["mma_acc"], 32, COOP).kernels["acc_ops_bf16"]
    ins = _instructions(k.words)
    consts = {ops[1]: ops[2] for op, ops in ins if op == OP["Constant"] and len(ops) == 3}
    assert CAP["VulkanMemoryModelDeviceScope"] in _caps(k.words)
    barriers = [ops for op, ops in ins if op == OP["ControlBarrier"]]
    assert barriers
    for ops in barriers:
        bits = consts[ops[2]]
        assert bits & SEM["AcquireRelease"] and bits & SEM["MakeAvailable"] and bits & SEM["MakeVisible"], hex(bits)
    # pointer types of the shared storage classes, then the access chains of those types
    shared_ptr_types = {ops[0] for op, ops in ins if op == OP["TypePointer"]
                        and ops[1] in (STORAGE["Workgroup"], STORAGE["StorageBuffer"])}
    shared = {ops[1] for op, ops in ins if op == OP["AccessChain"] and ops[0] in shared_ptr_types}
    loads = [ops for op, ops in ins if op == OP["Load"] and ops[2] in shared]
    stores = [ops for op, ops in ins if op == OP["Store"] and ops[0] in shared]
    assert loads and stores
    assert all(len(o) == 4 and o[3] & NON_PRIVATE for o in loads)
    assert all(len(o) == 3 and o[2] & NON_PRIVATE for o in stores)


def test_relaxed_atomics_carry_no_storage_class_bits() -> None:
    """VUID-StandaloneSpirv-MemorySemantics-10871: a relaxed atomic's semantics are 0."""
    from anywave.asm import assemble

    m = assemble("""
.kernel k
.arg out buffer u32 readwrite
.registers 4
.local_memory 64
    movi.u32 r0, 0
    movi.u32 r1, 1
    atom.local.add.u32 r2, [r0], r1
    atom.device.add.u32 r3, out[r0], r1, .device, .relaxed
    ret
.end
""")
    k = spirv.translate(m, 32).kernels["k"]
    ins = _instructions(k.words)
    consts = {ops[1]: ops[2] for op, ops in ins if op == OP["Constant"] and len(ops) == 3}
    adds = [ops for op, ops in ins if op == OP["AtomicIAdd"]]
    assert len(adds) == 2 and all(consts[o[4]] == 0 for o in adds)
