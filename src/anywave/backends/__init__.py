"""Backends: translators from WAVE modules to vendor code.

* :mod:`anywave.backends.ptx` — NVIDIA PTX (``translate(module, arch="sm_90")``).
"""
