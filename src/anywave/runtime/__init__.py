"""Runtime: execution targets and their drivers.

* :mod:`anywave.runtime.targets` — the target registry (knows no target by name; each
  runtime module registers its own), :class:`~anywave.runtime.targets.TargetInfo` (wave
  widths, host memory, limits) and the launch rules every target enforces.
* :mod:`anywave.abi` (also reachable as ``anywave.runtime.abi``) — argument encoding shared by
  the emulator and every driver (scalar words, integer ranges, launch geometry, module loading).
* :mod:`anywave.runtime.driver` — the base of the compiled drivers: program cache, refusal
  checks, padding, marshalling.
* :mod:`anywave.runtime.emulator` — the reference emulator as the ``emulator`` target.
* :mod:`anywave.runtime.cuda` — the CUDA driver on cuda-python (optional extra ``cuda``);
  :mod:`~anywave.runtime.opencl`, :mod:`~anywave.runtime.sycl`, :mod:`~anywave.runtime.vulkan`,
  :mod:`~anywave.runtime.hip`, :mod:`~anywave.runtime.metal`, :mod:`~anywave.runtime.hip_nvidia`
  — the other drivers.
"""
