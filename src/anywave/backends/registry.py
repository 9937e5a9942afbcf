"""The registry of translators (backends): one entry per output language.

The command line (``anywave translate --target``), the kernel explorer and the docs list
the backends from here, never from a hard-coded list. A backend module joins the registry
by defining a module-level ``BACKEND = Backend(...)`` (found by scanning the modules of
:mod:`anywave.backends`), or by calling :func:`register_backend`; the five built-in
translators are registered below.

    >>> from anywave.backends.registry import backend_names
    >>> backend_names()[:5]
    ['ptx', 'opencl', 'sycl', 'hip', 'metal']
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from anywave.errors import WaveError


class BackendError(WaveError, ValueError):
    """An unknown backend name, or an option value the backend does not take."""


@dataclass(frozen=True)
class Backend:
    """One translator.

    Attributes:
        name: registry name (``ptx``, ``opencl`` ...), also the ``--target`` spelling.
        language: the language it writes, for help texts (``"NVIDIA PTX"``).
        suffix: the usual file suffix of its output (``".ptx"``).
        translate: ``translate(module, *, arch, wave_width, kernels, comments) -> str``; ``arch``
            is the GPU architecture for backends with ``arch_default``, else None;
            ``wave_width`` is W for the others.
        wave_widths: the wave widths it can render (empty for an ``arch`` backend).
        default_wave_width: W when none is given.
        arch_default: default architecture for backends that take one (PTX: ``sm_90``), else "".
        binary: for backends whose output file is binary (SPIR-V),
            ``binary(module, *, wave_width, kernels) -> bytes`` is what ``-o FILE`` writes;
            ``translate`` then gives the human-readable text for standard output.
    """

    name: str
    language: str
    suffix: str
    translate: Callable[..., str]
    wave_widths: tuple[int, ...] = ()
    default_wave_width: int = 32
    arch_default: str = ""
    binary: Callable[..., bytes] | None = None


_REGISTRY: dict[str, Backend] = {}
_discovered = False


def register_backend(backend: Backend) -> None:
    """Add (or replace) a backend."""
    _REGISTRY[backend.name] = backend


def _discover() -> None:
    global _discovered
    if _discovered:
        return
    _discovered = True
    import anywave.backends as pkg

    for info in pkgutil.iter_modules(pkg.__path__):
        if info.name in ("registry", "cli_translate") or info.name.startswith("_"):
            continue
        try:
            mod = importlib.import_module(f"anywave.backends.{info.name}")
        except ImportError:
            continue
        b = getattr(mod, "BACKEND", None)
        if isinstance(b, Backend) and b.name not in _REGISTRY:
            register_backend(b)


def backend_names() -> list[str]:
    """Registered backend names, built-in ones first (ptx, opencl, sycl, hip, metal)."""
    _discover()
    return list(_REGISTRY)


def backends() -> list[Backend]:
    """Every registered backend, in :func:`backend_names` order."""
    _discover()
    return list(_REGISTRY.values())


def get_backend(name: str) -> Backend:
    """The backend called ``name``. Raises BackendError naming the registered ones."""
    _discover()
    if name not in _REGISTRY:
        raise BackendError(f"unknown backend {name!r}; registered backends: {', '.join(_REGISTRY)}")
    return _REGISTRY[name]


def translate(name: str, module: Any, *, arch: str | None = None, wave_width: int | None = None,
              kernels: Sequence[str] | None = None, comments: bool = True) -> str:
    """Translate ``module`` with backend ``name`` and return the program text.

    Raises:
        BackendError: unknown backend, ``arch`` given to a wave-width backend, or a wave
            width the backend cannot render.
        PtxError / CFamilyError: the backend's own refusals (unsupported instructions ...).
    """
    b = get_backend(name)
    if b.arch_default:
        if wave_width is not None:
            raise BackendError(f"backend {name!r} takes --arch, not a wave width (its W is fixed by the device)")
        return b.translate(module, arch=arch or b.arch_default, wave_width=None, kernels=kernels, comments=comments)
    if arch is not None:
        raise BackendError(f"backend {name!r} takes a wave width, not --arch {arch!r}")
    w = b.default_wave_width if wave_width is None else wave_width
    if b.wave_widths and w not in b.wave_widths:
        raise BackendError(f"backend {name!r} renders wave widths {list(b.wave_widths)}, not {w}")
    return b.translate(module, arch=None, wave_width=w, kernels=kernels, comments=comments)


# ------------------------------------------------------------------------- built-in backends

def _ptx(module: Any, *, arch: str, wave_width: Any, kernels: Any, comments: bool) -> str:
    from anywave.backends.ptx import translate as t

    return t(module, arch, kernels=kernels, comments=comments).text


def _cfamily(modname: str, dialect: str, features: str = "FULL_FEATURES") -> Callable[..., str]:
    def run(module: Any, *, arch: Any, wave_width: int, kernels: Any, comments: bool) -> str:
        from anywave.backends.cfamily import render

        mod = importlib.import_module(f"anywave.backends.{modname}")
        names = list(kernels) if kernels is not None else None
        if comments:  # the module's own translate() plus source-line comments
            prog = render(module, getattr(mod, dialect), wave_width, getattr(mod, features), names, locations=True)
        else:
            prog = mod.translate(module, wave_width, kernels=names)
        text = prog.text
        if prog.refused:
            text += "".join(f"\n/* kernel {k} not rendered: {why} */" for k, why in prog.refused.items()) + "\n"
        return text

    return run


register_backend(Backend("ptx", "NVIDIA PTX", ".ptx", _ptx, arch_default="sm_90"))
register_backend(Backend("opencl", "OpenCL C", ".cl", _cfamily("opencl", "OPENCL"), (8, 16, 32, 64), 16))
register_backend(Backend("sycl", "SYCL 2020 C++", ".cpp", _cfamily("sycl", "SYCL"), (8, 16, 32, 64), 16))
register_backend(Backend("hip", "AMD HIP C++", ".hip", _cfamily("hip", "HIP"), (32, 64), 64))
register_backend(Backend("metal", "Apple Metal Shading Language", ".metal",
                         _cfamily("metal", "METAL", "METAL_FEATURES"), (32,), 32))


def _spirv(module: Any, *, arch: Any, wave_width: int, kernels: Any, comments: bool) -> str:
    from anywave.backends.spirv import translate as t

    prog = t(module, wave_width, kernels=list(kernels) if kernels is not None else None)
    text = prog.text
    if prog.refused:
        text += "".join(f"\n; kernel {k} not translated: {why}" for k, why in prog.refused.items()) + "\n"
    return text


def _spirv_binary(module: Any, *, wave_width: int, kernels: Any) -> bytes:
    from anywave.backends.spirv import SpirvError
    from anywave.backends.spirv import translate as t

    prog = t(module, wave_width, kernels=list(kernels) if kernels is not None else None)
    if len(prog.kernels) != 1:
        raise SpirvError([f"-o writes one SPIR-V module, but {len(prog.kernels)} kernels were translated "
                          f"({sorted(prog.kernels)}); choose one with --kernel"
                          + (f"; refused: {prog.refused}" if prog.refused else "")])
    (k,) = prog.kernels.values()
    return bytes(k.binary)


# the Vulkan backend, where it is installed (a module of its own, see anywave.backends.spirv)
if importlib.util.find_spec("anywave.backends.spirv") is not None:
    register_backend(Backend("spirv", "Vulkan SPIR-V 1.5 (text: spirv-dis; -o FILE: the binary module)", ".spv",
                             _spirv, (8, 16, 32, 64), 32, binary=_spirv_binary))
