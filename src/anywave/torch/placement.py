"""Where the torch ops run and what they refuse: the CPU-tensor target choice
(:func:`set_cpu_target`, :func:`cpu_target`, :func:`current_cpu_target`), the CUDA target of
a device, the one-device rule and the ops' error types. Below :mod:`anywave.torch.ops` and
:mod:`anywave.torch.mma_ops`, which both use it (``anywave.torch.ops`` re-exports every name)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import torch

from anywave.errors import WaveError
from anywave.torch import custom_ops as _co

__all__ = ["OpDtypeError", "OpInputError", "cpu_target", "cpu_target_names", "current_cpu_target",
           "set_cpu_target"]


class OpInputError(WaveError, ValueError):
    """A tensor of the wrong shape, or tensors on different devices / an unsupported device."""


class OpDtypeError(WaveError, TypeError):
    """A tensor of a dtype the op does not support (the message names the supported ones)."""


# ----------------------------------------------------------------------------- targets

_LOCK = threading.Lock()
_TARGET_CACHE: dict[tuple[str, tuple[tuple[str, Any], ...]], Any] = {}
def cpu_target_names() -> list[str]:
    """Names of the registered targets that run on host memory and are available here, best
    first (``cpu`` with a C compiler, ``opencl`` / ``sycl`` / ``vulkan`` when their runtimes are
    usable, ``emulator`` always): :func:`anywave.runtime.targets.host_names`."""
    from anywave.runtime import targets

    return targets.host_names()


def _get_target(name: str, options: tuple[tuple[str, Any], ...]) -> Any:
    from anywave.runtime import targets

    if name == targets.HOST:  # the best target on the host CPU (a kernel's launch may pass it by: ops._launch)
        name = targets.host_names()[0]
    key = (name, options)
    with _LOCK:
        t = _TARGET_CACHE.get(key)
    if t is None:
        from anywave.runtime import targets  # registers the optional runtimes (OpenCL, SYCL) on import

        t = targets.get_target(name, **dict(options))
        with _LOCK:
            _TARGET_CACHE[key] = t
    return t


def set_cpu_target(name: str = "host", **options: Any) -> tuple[str, dict[str, Any]]:
    """Choose the target that runs ops on CPU tensors: a registry name (``cpu``, ``emulator``,
    ``opencl``, ``sycl``, ``vulkan``) and its factory options (e.g. ``wave_width=16``), or
    ``"host"`` (the default): for each kernel the best target on the host CPU that runs it
    (:func:`anywave.runtime.targets.serving_name`: the cpu target where a C compiler is
    present; matrix-fragment kernels, which it refuses, on the next one). The target is created
    now, so an unknown or unavailable one fails here.

    Returns the previous choice ``(name, options)``.

    Raises:
        ValueError: unknown target name; TargetUnavailable: not usable on this machine.
    """
    if name == "cuda":
        raise OpInputError("set_cpu_target: 'cuda' is not a CPU target; CUDA tensors always run on the cuda "
                           f"target. CPU targets here: {cpu_target_names()}")
    opts = tuple(sorted(options.items()))
    _get_target(name, opts)
    prev = _co.CPU_CHOICE[0]
    _co.CPU_CHOICE[0] = (name, opts)
    return prev[0], dict(prev[1])


@contextlib.contextmanager
def cpu_target(name: str = "host", **options: Any) -> Iterator[Any]:
    """Context manager: run CPU-tensor ops on target ``name`` inside the block (see
    :func:`set_cpu_target`); yields the target object."""
    prev_name, prev_opts = set_cpu_target(name, **options)
    try:
        yield current_cpu_target()
    finally:
        set_cpu_target(prev_name, **prev_opts)


def current_cpu_target() -> Any:
    """The target object that runs ops on CPU tensors now (has ``.info`` and ``.launch``)."""
    return _get_target(*_co.CPU_CHOICE[0])


def _cuda_target(index: int) -> Any:
    return _get_target("cuda", (("device", index),))


def _same_device(op: str, **tensors: torch.Tensor) -> torch.device:
    first = None
    for t in tensors.values():
        d = t.device
        if first is None:
            first = d
        elif d != first:
            where = ", ".join(f"{n} on {t.device}" for n, t in tensors.items())
            raise OpInputError(f"anywave.{op}: all tensors must be on one device; got {where}")
    if first.type not in ("cpu", "cuda"):
        raise OpInputError(f"anywave.{op}: supported devices are cpu and cuda, got {first}")
    return first


def _dense(t: torch.Tensor) -> torch.Tensor:
    # the kernels index row-major memory; the CUDA target also wants 16-byte aligned buffers
    if not t.is_contiguous() or (t.is_cuda and t.data_ptr() % 16):
        t = t.contiguous() if not t.is_contiguous() else t.clone()
    return t
