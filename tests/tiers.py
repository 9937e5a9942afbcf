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


#: conformance batching (``suite.run_suite(batch_bytes=...)``) a target's default-tier conformance
#: test uses at its default W, beyond the runner's own (SYCL batches by itself: SyclRunner.batch_bytes).
#: The cpu target: the C prelude (~100 KB) is compiled once per module, so one module per group
#: costs 71 s at W = 64 and 64 KiB batches 39 s (2-core host, cold cache). A batch's C exceeds
#: LARGE_SOURCE_BYTES and builds at -O1 (at -O0 in the default tier, whose builds are unoptimised:
#: tests/conftest.py); the sweep tier runs the other widths one group per module, so the groups
#: small enough for -O3 still run at -O3 there.
CONFORMANCE_BATCH_BYTES: dict[str, int] = {"cpu": 64 << 10}


def conformance_batch_bytes(target: str, wave_width: int) -> int | str | None:
    """``batch_bytes`` for ``target``'s conformance test at ``wave_width``: the value above at the
    target's default W, else ``"auto"`` (the runner's own choice)."""
    if target not in DEFAULT_W:
        raise ValueError(f"no default-tier wave width for target {target!r}; known: {sorted(DEFAULT_W)}")
    if wave_width == DEFAULT_W[target] and target in CONFORMANCE_BATCH_BYTES:
        return CONFORMANCE_BATCH_BYTES[target]
    return "auto"


#: runtime targets the default tier's demo test leaves out (they run the quick demo in the slow
#: tier), with why; the default tier still runs the demo on every other available target. None
#: since the default tier builds without the runtime compilers' optimisers (tests/conftest.py):
#: the quick demo at W = 8 with cold caches then takes 31 s on SYCL (optimised: ~6 min, its bitonic
#: sort's 1024-thread workgroups with 55 barriers) and 11 s on the cpu target (optimised: 17 s).
DEMO_SLOW_TARGETS: dict[str, str] = {}


def demo_targets() -> list[str]:
    """The available targets less :data:`DEMO_SLOW_TARGETS` (the default tier's demo run)."""
    from anywave.jit.targets import available_targets

    return [t for t in available_targets() if t not in DEMO_SLOW_TARGETS]
