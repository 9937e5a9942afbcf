"""Small helpers shared by the host wrappers."""

from __future__ import annotations

from typing import Any

import numpy as np

from anywave.errors import WaveError


class KernelInputError(WaveError, ValueError):
    """An input array of the wrong shape, dtype or size for a library kernel."""


def as_f32(x: Any, name: str, ndim: int | None = None) -> np.ndarray:
    """``x`` as a C-contiguous float32 array (a copy when it is not one already)."""
    a = np.ascontiguousarray(np.asarray(x, dtype=np.float32))
    if ndim is not None and a.ndim != ndim:
        raise KernelInputError(f"{name}: expected a {ndim}-D array, got shape {a.shape}")
    return a


def ceil_div(a: int, b: int) -> int:
    return (a + b - 1) // b


def launch_kw(wave_width: int | None, target: str | None) -> dict[str, Any]:
    return {"wave_width": wave_width, "target": target}
