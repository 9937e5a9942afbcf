"""The WAVE conformance suite: kernels, inputs and independently computed expected outputs.

Every target (the emulator, PTX, OpenCL, SYCL, HIP, Metal) is judged against this suite. Cases
are grouped; each group is one `.wave` module (:func:`group_source`) so a target compiles it
once per group and wave width. Expected values never come from the emulator: they are computed
by :mod:`anywave.conformance.refsem` (exact rational arithmetic), NumPy or by hand.

    >>> from anywave.conformance import load_cases, run_suite, emulator_runner
    >>> report = run_suite(emulator_runner(), (8, 16, 32, 64))       # doctest: +SKIP
"""

from anywave.conformance.case import EXACT, Case, Compare, CompareResult, Mismatch, compare
from anywave.conformance.suite import (
    CaseResult,
    Runner,
    SuiteReport,
    assemble_group,
    assemble_groups,
    emulator_runner,
    group_names,
    group_requires,
    group_source,
    kernel_name,
    load_cases,
    run_batch,
    run_case,
    run_group,
    run_suite,
)

__all__ = [
    "EXACT",
    "Case",
    "CaseResult",
    "Compare",
    "CompareResult",
    "Mismatch",
    "Runner",
    "SuiteReport",
    "assemble_group",
    "assemble_groups",
    "compare",
    "emulator_runner",
    "group_names",
    "group_requires",
    "group_source",
    "kernel_name",
    "load_cases",
    "run_batch",
    "run_case",
    "run_group",
    "run_suite",
]
