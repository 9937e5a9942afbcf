"""Runtime: execution targets and their drivers.

* :mod:`anywave.runtime.targets` — the target registry (``emulator``, ``cuda``).
* :mod:`anywave.runtime.cuda` — the CUDA driver on cuda-python (optional extra ``cuda``).
"""
