"""Test tiers (README, "Tests"): which wave width each runtime target runs at in the default
tier; the other widths carry the ``sweep`` marker (deselected by default, run by ``.ci/run``
and by ``python -m pytest -m sweep``).

The default widths differ from target to target so that the default tier still runs the
runtimes at three widths (the emulator's own tests run at every W in it) and none at the
W = 32 a kernel might wrongly assume."""

from __future__ import annotations

import pytest

WIDTHS = (8, 16, 32, 64)

#: the one W per runtime target in the default tier (Vulkan on lavapipe offers only 8; the cpu
#: target runs every W, 8 in the default tier)
DEFAULT_W = {"opencl": 16, "sycl": 64, "vulkan": 8, "cpu": 8}


def widths(target: str, ws: tuple[int, ...] = WIDTHS) -> list:
    """``ws`` as parametrize values: ``DEFAULT_W[target]`` plain, every other W marked ``sweep``."""
    if target not in DEFAULT_W:
        raise ValueError(f"no default-tier wave width for target {target!r}; known: {sorted(DEFAULT_W)}")
    return [w if w == DEFAULT_W[target] else pytest.param(w, marks=pytest.mark.sweep) for w in ws]


def cases(pairs: list[tuple[str, int]]) -> list:
    """(target, W) pairs as parametrize values: each target's default W plain, the rest ``sweep``."""
    return [p if p[1] == DEFAULT_W[p[0]] else pytest.param(*p, marks=pytest.mark.sweep) for p in pairs]
