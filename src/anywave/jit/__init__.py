"""The one front door of a launch: kernel call → launch plan → driver.

* :mod:`anywave.jit.kernel` — :class:`~anywave.jit.kernel.KernelFunction` (what ``@aw.kernel``
  makes: a compiler :class:`~anywave.compiler.kernel.KernelDef` that can be called);
* :mod:`anywave.jit.launch` — the full launch path (every check, once) and the launch plans
  recorded per argument layout;
* :mod:`anywave.jit.targets` — the targets a launch runs on (a view of the runtime registry),
  the module-level door (:meth:`~anywave.jit.targets.Target.launch`: a compiled module's kernel
  by name, for the CLI, the conformance report and the torch ops' CPU GEMM) and
  :func:`~anywave.jit.targets.drive`, the one call into a driver that both doors end in;
* :mod:`anywave.jit.capture` — CUDA graphs (``aw.graph``);
* :mod:`anywave.jit.autotune` — ``@aw.autotune``;
* :mod:`anywave.jit.cli_run` — the CLI's ``run`` command.

The layers below know nothing of this one: the compiler (:mod:`anywave.compiler`) compiles,
the runtimes (:mod:`anywave.runtime`) run modules; ``tests/test_import_layers.py`` checks that
no package imports a package above it.
"""

from __future__ import annotations

from .capture import Graph, graph
from .kernel import KernelFunction, LaunchError, LaunchValueError, kernel
from .targets import Target, TargetError, available_targets, get_target, register_target

__all__ = ["Graph", "KernelFunction", "LaunchError", "LaunchValueError", "Target", "TargetError",
           "available_targets", "get_target", "graph", "kernel", "register_target"]
