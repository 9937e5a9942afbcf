"""min/max with NaN operands (spec §8.2, IEEE 754-2019 §9.6 minimumNumber/maximumNumber): the
emulator's result must not depend on the array length (issue 11, item 12: ``np.fmax``'s scalar
tail returned NaN for a signalling NaN where its SIMD loop returned the other operand).
Expectations come from :mod:`anywave.conformance.refsem`, computed on integers."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from anywave.conformance import emulator_runner, load_cases, run_case
from anywave.conformance import refsem as R
from anywave.emu import floats as fl

_FORMATS = [(np.float32, np.uint32, R.F32), (np.float64, np.uint64, R.F64),
            (np.float16, np.uint16, R.F16), (ml_dtypes.bfloat16, np.uint16, R.BF16)]


def _pairs(fmt: R.FloatFormat) -> list[tuple[int, int]]:
    snan, qnan = fmt.inf | 1, fmt.canonical_nan
    one, m2 = fmt.from_float(1.0), fmt.from_float(-2.0)
    return [(snan, one), (one, snan), (snan | fmt.sign_bit, m2), (qnan, one), (m2, qnan), (snan, qnan),
            (0, fmt.sign_bit), (fmt.sign_bit, 0)]


@pytest.mark.parametrize("maximum", [False, True])
@pytest.mark.parametrize("n", list(range(1, 18)) + [31, 33])
@pytest.mark.parametrize("fdt,udt,fmt", _FORMATS, ids=["f32", "f64", "f16", "bf16"])
def test_min_max_num_any_length(fdt, udt, fmt, n: int, maximum: bool) -> None:
    fn = fl.max_num if maximum else fl.min_num
    for a, b in _pairs(fmt):
        av = np.full(n, a, udt).view(fdt)
        bv = np.full(n, b, udt).view(fdt)
        if fdt in (np.float16, ml_dtypes.bfloat16):  # the emulator computes these in f32
            av, bv = av.astype(np.float32), bv.astype(np.float32)
        got = fn(av, bv)
        want = R.f_max(fmt, a, b) if maximum else R.f_min(fmt, a, b)
        if fdt in (np.float16, ml_dtypes.bfloat16):
            got = got.astype(fdt)
        bits = got.view(udt)
        if fmt.decode(want).kind == "nan":
            assert np.all(np.isnan(got)), (hex(a), hex(b), n)
        else:
            assert np.all(bits == want), (hex(a), hex(b), n, [hex(int(x)) for x in bits[:3]])


def test_small_lane_cases_exist_for_every_float_type() -> None:
    names = {c.name for c in load_cases() if "_nan_lanes" in c.name}
    for t in ("f32", "f64", "f16", "bf16", "f16x2", "bf16x2"):
        for op in ("min", "max"):
            assert f"alu_{op}_{t}_nan_lanes1" in names
            assert f"alu_{op}_{t}_nan_lanes17" in names


@pytest.mark.parametrize("w", [8, 16, 32, 64])
def test_small_lane_cases_on_emulator(w: int) -> None:
    run = emulator_runner(check=False)
    for case in load_cases(names=[c.name for c in load_cases() if "_nan_lanes" in c.name]):
        r = run_case(case, run, w)
        assert r.status == "pass", f"{case.name} W={w}: {r.message}"
