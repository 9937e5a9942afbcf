"""Test tiers (README, "Tests"): which wave width each runtime target runs at in the default
tier; the other widths carry the ``sweep`` marker (deselected by default, run by ``.ci/run``
and by ``python -m pytest -m sweep``).

The default widths differ from target to target so that the default tier still runs the
runtimes at three widths (the emulator's own tests run at every W in it) and none at the
W = 32 a kernel might wrongly assume."""

from __future__ import annotations

import pytest

WIDTHS = (8, 16, 32, 64)

#: the one W per runtime target in the default tier (Vulkan on lavapipe offers only 8). W = 64
#: is the cpu target's: there it costs what W = 8 costs (six groups, cold caches: 21.4 s vs 20.1 s),
#: while on the Intel OpenCL CPU runtime under SYCL and OpenCL the 64-lane vectoriser makes builds
#: 1.5-4x slower than at W = 16 (SYCL mma 16.4 s vs 4.0 s, wave 16.7 s vs 5.3 s; OpenCL wave 14.0 s
#: vs 3.8 s) — SYCL at W = 64 was the default tier's longest test (175 s). Both run W = 64 in the
#: sweep tier.
DEFAULT_W = {"opencl": 16, "sycl": 16, "vulkan": 8, "cpu": 64}


def widths(target: str, ws: tuple[int, ...] = WIDTHS) -> list:
    """``ws`` as parametrize values: ``DEFAULT_W[target]`` plain, every other W marked ``sweep``."""
    if target not in DEFAULT_W:
        raise ValueError(f"no default-tier wave width for target {target!r}; known: {sorted(DEFAULT_W)}")
    return [w if w == DEFAULT_W[target] else pytest.param(w, marks=pytest.mark.sweep) for w in ws]


def cases(pairs: list[tuple[str, int]]) -> list:
    """(target, W) pairs as parametrize values: each target's default W plain, the rest ``sweep``."""
    return [p if p[1] == DEFAULT_W[p[0]] else pytest.param(*p, marks=pytest.mark.sweep) for p in pairs]


#: conformance groups that a runtime target runs only in the sweep tier at its default W (at the
#: other widths it runs every group there anyway), with why. A group listed here must run in the
#: default tier on another runtime target (tests/test_tiers.py checks it), and the instructions it
#: exercises must be covered on this target by its default-tier groups.
SWEEP_GROUPS: dict[str, dict[str, str]] = {
    "sycl": {
        # 10 kernels of 544-580 straight-line instructions (every pair of special values of each
        # f32 operation as movi literals): 1.4 MB of SYCL source, a third of the suite's, ~100 s of
        # the runtime compiler's time. The group tests literal folding (written for lavapipe);
        # its instructions (movi, add/sub/mul/div/fma.f32, st.device) run on SYCL in the float,
        # move and memory groups, and the group itself runs on OpenCL and Vulkan in the default tier
        "alu_literal": "the SYCL build of 5,800 literal-operand instructions takes ~100 s",
    },
    "opencl": {
        # the same 1.8 MB group: 46 of the 93 s of OpenCL's default-tier conformance run (cold
        # kernel cache, 2-core host) go to the OpenCL CPU compiler building it; its instructions run
        # on OpenCL in the float, move and memory groups; the group runs on Vulkan and the cpu target
        # in the default tier and on OpenCL at every other W in the sweep tier
        "alu_literal": "the OpenCL build of 5,800 literal-operand instructions takes ~46 s",
    },
}


#: conformance batching (``suite.run_suite(batch_bytes=...)``) a target's default-tier conformance
#: test uses at its default W, beyond the runner's own (SYCL batches by itself: SyclRunner.batch_bytes).
#: The cpu target: the C prelude (~100 KB) is compiled once per module, so one module per group
#: costs 71 s at W = 64 and 64 KiB batches 39 s (2-core host, cold cache). A batch's C exceeds
#: LARGE_SOURCE_BYTES and builds at -O1; the sweep tier runs the other widths one group per module,
#: so the groups small enough for -O3 still run at -O3 there.
CONFORMANCE_BATCH_BYTES: dict[str, int] = {"cpu": 64 << 10}


def conformance_batch_bytes(target: str, wave_width: int) -> int | str | None:
    """``batch_bytes`` for ``target``'s conformance test at ``wave_width``: the value above at the
    target's default W, else ``"auto"`` (the runner's own choice)."""
    if target not in DEFAULT_W:
        raise ValueError(f"no default-tier wave width for target {target!r}; known: {sorted(DEFAULT_W)}")
    if wave_width == DEFAULT_W[target] and target in CONFORMANCE_BATCH_BYTES:
        return CONFORMANCE_BATCH_BYTES[target]
    return "auto"


def conformance_groups(target: str, wave_width: int) -> list[str]:
    """The conformance groups ``target``'s default-tier conformance test runs at ``wave_width``:
    every group, less :data:`SWEEP_GROUPS` of the target at its default W."""
    from anywave.conformance import suite

    if target not in DEFAULT_W:
        raise ValueError(f"no default-tier wave width for target {target!r}; known: {sorted(DEFAULT_W)}")
    skip = SWEEP_GROUPS.get(target, {}) if wave_width == DEFAULT_W[target] else {}
    return [g for g in suite.group_names() if g not in skip]


#: runtime targets the default tier's demo test leaves out (they run the quick demo in the slow
#: tier), with why; the default tier still runs the demo on every other available target
DEMO_SLOW_TARGETS: dict[str, str] = {
    "sycl": "the SYCL runtime compiler takes ~6 min over the demo's bitonic sort (1024-thread workgroups, 55 barriers)",
    # measured with cold caches on the 2-core host (anywave demo --quick --wave-width 8 --target T):
    # emulator 7.6 s, vulkan 7.4 s, cpu 17.4 s, opencl 16.8 s; on the cpu target every library
    # kernel (the demo's among them) runs in the default tier against the emulator's bits
    # (test_cpu.py::test_library_kernels_same_bits_as_the_emulator)
    "cpu": "17 s of C compiles of the demo's library kernels (cold cache); test_cpu.py runs every library kernel",
}


def demo_targets() -> list[str]:
    """The available targets less :data:`DEMO_SLOW_TARGETS` (the default tier's demo run)."""
    from anywave.jit.targets import available_targets

    return [t for t in available_targets() if t not in DEMO_SLOW_TARGETS]
