"""Runs the conformance suite on the emulator at every wave width, one test per group x W.

Expected values come from anywave.conformance.refsem / NumPy / hand computation, never from the
emulator. Cases in KNOWN_EMULATOR_BUGS are emulator defects found by the suite (expectation
verified by hand, see the reasons); they are tracked by strict xfail tests so a fix is noticed.
"""

from __future__ import annotations

import itertools
import json

import ml_dtypes
import numpy as np
import pytest

from anywave.conformance import (
    Compare,
    compare,
    emulator_runner,
    group_names,
    group_source,
    load_cases,
    run_batch,
    run_case,
    run_group,
    run_suite,
)
from anywave.conformance import refsem as R
from anywave.conformance.build import float_edges, random_float_bits

WIDTHS = (8, 16, 32, 64)

#: case -> (wave widths affected, reason). Only cases whose expectation was checked by hand.
KNOWN_EMULATOR_BUGS: dict[str, str] = {
    # alu_fma_f64, mma_f16, mma_bf16: fixed (issue 3); their groups now pass in checked mode
}


@pytest.fixture(scope="module")
def runner():
    return emulator_runner(check=True)


@pytest.mark.parametrize("w", WIDTHS)
@pytest.mark.parametrize("group", group_names())
def test_group(group: str, w: int, runner) -> None:
    results = run_group(group, runner, w)
    assert results, f"group {group} has no cases"
    bad = [r for r in results if not r.ok and r.case not in KNOWN_EMULATOR_BUGS]
    assert not bad, "\n".join(f"{r.case} (W={w}) {r.status}: {r.message}" for r in bad)


@pytest.mark.parametrize("name", sorted(KNOWN_EMULATOR_BUGS))
@pytest.mark.xfail(strict=True, reason="known emulator bug; see KNOWN_EMULATOR_BUGS")
def test_known_emulator_bug(name: str, runner) -> None:
    case = load_cases(names=[name])[0]
    results = [run_case(case, runner, w) for w in WIDTHS]
    assert all(r.status == "pass" for r in results), "; ".join(r.message[:200] for r in results)


@pytest.mark.parametrize("w", WIDTHS)
def test_mma_values_unchecked(w: int) -> None:
    run = emulator_runner(check=False)
    for case in load_cases(["mma"]):
        r = run_case(case, run, w)
        assert r.status == "pass", r.message


# ----------------------------------------------------------------------------- the suite itself


def test_suite_size_and_names() -> None:
    cases = load_cases()
    assert len(cases) >= 300
    assert len({c.name for c in cases}) == len(cases)
    for c in cases:
        assert c.wave_widths and set(c.wave_widths) <= set(WIDTHS)
        for w in c.wave_widths:
            exp = c.expected_for(w)
            assert exp, c.name
            for name, arr in exp.items():
                for part in name.split("+"):
                    assert part in c.args, f"{c.name}: expected output {part!r} is not an argument"
                assert isinstance(arr, np.ndarray)


def test_groups_are_modules() -> None:
    for g in group_names():
        src = group_source(g)
        kernels = [ln.split()[1] for ln in src.splitlines() if ln.startswith(".kernel")]
        assert len(kernels) == len(set(kernels))
    with pytest.raises(ValueError, match="valid groups"):
        load_cases(["no_such_group"])


def test_run_suite_report_json() -> None:
    report = run_suite(emulator_runner(), (8, 64), progress=False, groups=["bitwise", "control"])
    data = json.loads(report.to_json())
    assert data["counts"].get("pass", 0) == len(report.results) > 0
    skipped = run_suite(emulator_runner(), (32,), progress=False, groups=["float.f64"], capabilities=[])
    assert {r.status for r in skipped.results} == {"skip"}


def test_a_wrong_expectation_fails() -> None:
    """The harness really compares: corrupt one expected element and the case fails, naming it."""
    case = load_cases(names=["alu_add_i32"])[0]
    bad = dict(case.expected_for(32))
    bad["out"] = bad["out"].copy()
    bad["out"][5] ^= 1
    import dataclasses

    broken = dataclasses.replace(case, expected=bad)
    r = run_case(broken, emulator_runner(), 32)
    assert r.status == "fail" and "[5]" in r.message


def test_runner_errors_are_reported() -> None:
    def boom(*a, **k):
        raise RuntimeError("device lost")

    r = run_case(load_cases(names=["alu_add_i32"])[0], boom, 32)
    assert r.status == "error" and "device lost" in r.message


class _CountingRunner:
    """The emulator, counting the distinct modules it is handed; ``fail_kernel``: any module that
    holds that kernel fails to build (every launch from it raises, as a runtime compiler's
    error does for every kernel of the module)."""

    def __init__(self, fail_kernel: str | None = None) -> None:
        self.emu = emulator_runner(check=False)
        self.modules: set[int] = set()
        self.fail_kernel = fail_kernel

    def __call__(self, module, kernel, grid, workgroup, args, wave_width):
        self.modules.add(id(module))
        if self.fail_kernel is not None and any(k.name == self.fail_kernel for k in module.kernels):
            from anywave.errors import WaveError

            raise WaveError(f"build failed: {self.fail_kernel}")
        return self.emu(module, kernel, grid, workgroup, args, wave_width)


_BATCHED = ["bitwise", "compare", "control", "integer", "move"]


def _outcomes(report_results):
    return [(r.case, r.group, r.wave_width, r.status) for r in report_results]


@pytest.mark.parametrize("w", [8, 64])
def test_batched_suite_gives_the_per_group_results_from_fewer_modules(w: int) -> None:
    per_group, batched = _CountingRunner(), _CountingRunner()
    a = run_suite(per_group, (w,), progress=False, groups=_BATCHED)
    b = run_suite(batched, (w,), progress=False, groups=_BATCHED, batch_bytes=1 << 20)
    assert _outcomes(a.results) == _outcomes(b.results)
    assert {r.status for r in b.results} == {"pass"}
    assert len(per_group.modules) == len(_BATCHED) and len(batched.modules) == 1
    # a byte limit below two groups' size packs them in several modules, still in order
    sizes = [len(group_source(g)) for g in _BATCHED]
    some = _CountingRunner()
    c = run_suite(some, (w,), progress=False, groups=_BATCHED, batch_bytes=max(sizes) + 1)
    assert _outcomes(c.results) == _outcomes(a.results)
    assert 1 < len(some.modules) < len(_BATCHED)


def test_a_build_error_in_a_batch_is_reported_against_its_own_group() -> None:
    from anywave.conformance.suite import kernel_name

    victim = kernel_name(load_cases(["control"])[0])
    r = _CountingRunner(fail_kernel=victim)
    rs = run_batch(_BATCHED, r, 16)
    bad = {x.group for x in rs if x.status == "error"}
    assert bad == {"control"}, bad
    assert all(x.status == "pass" for x in rs if x.group != "control")
    assert [x.case for x in rs] == [c.name for g in _BATCHED for c in load_cases([g])]
    assert any("build failed" in x.message for x in rs if x.group == "control")


def test_batch_bytes_must_be_positive() -> None:
    with pytest.raises(ValueError, match="batch_bytes"):
        run_suite(emulator_runner(), (8,), progress=False, groups=["bitwise"], batch_bytes=0)
    with pytest.raises(ValueError, match="valid groups"):
        run_suite(emulator_runner(), (8,), progress=False, groups=["no_such_group"], batch_bytes=1000)


# ----------------------------------------------------------------------------- compare()


def test_compare_modes() -> None:
    e = np.array([0x7FC00000, 0x3F800000, 0x80000000], np.uint32)
    a = np.array([0xFFC00001, 0x3F800000, 0x80000000], np.uint32)
    assert compare(e, a, Compare("exact-nan", "f32")).ok
    r = compare(e, a)
    assert not r.ok and "0x7fc00000" in r.message and "0xffc00001" in r.message
    z = np.array([0x00000000], np.uint32)
    r = compare(z, np.array([0x80000000], np.uint32), Compare("exact-nan", "f32"))
    assert not r.ok and "-0.0" in r.message  # -0 is not +0
    assert compare(
        np.array([0x3F800000], np.uint32), np.array([0x3F800002], np.uint32), Compare("ulp", "f32", 2)
    ).ok
    assert not compare(
        np.array([0x3F800000], np.uint32), np.array([0x3F800003], np.uint32), Compare("ulp", "f32", 2)
    ).ok
    assert compare(np.array([1, 2, 3], np.uint32), np.array([3, 1, 2], np.uint32), Compare("multiset")).ok
    assert not compare(np.array([1, 2, 2], np.uint32), np.array([1, 1, 2], np.uint32), Compare("multiset")).ok
    # packed halves: each half is its own NaN
    assert compare(
        np.array([0x7E003C00], np.uint32), np.array([0x7E013C00], np.uint32), Compare("exact-nan", "f16x2")
    ).ok
    assert not compare(
        np.array([0x7E003C00], np.uint32), np.array([0x7E003C01], np.uint32), Compare("exact-nan", "f16x2")
    ).ok


# ----------------------------------------------------------------------------- refsem vs NumPy

_NP = {
    "f32": (np.float32, np.uint32),
    "f64": (np.float64, np.uint64),
    "f16": (np.float16, np.uint16),
    "bf16": (ml_dtypes.bfloat16, np.uint16),
}


@pytest.mark.parametrize("fmt_name", ["f32", "f64", "f16", "bf16"])
def test_refsem_agrees_with_numpy(fmt_name: str) -> None:
    """The reference semantics (exact rationals) against NumPy's IEEE arithmetic: two independent
    implementations agreeing gives confidence in the expectations."""
    fmt = R.FORMATS[fmt_name]
    dt, ut = _NP[fmt_name]
    vals = float_edges(fmt) + random_float_bits(np.random.default_rng(7), fmt, 30)
    pairs = list(itertools.product(vals, vals))
    a = np.array([p[0] for p in pairs], ut).view(dt)
    b = np.array([p[1] for p in pairs], ut).view(dt)
    with np.errstate(all="ignore"):
        for npf, rf in (
            (np.add, R.f_add),
            (np.subtract, R.f_sub),
            (np.multiply, R.f_mul),
            (np.divide, R.f_div),
        ):
            got = npf(a, b).view(ut)
            for (x, y), g in zip(pairs, got.tolist(), strict=False):
                e = rf(fmt, x, y)
                assert e == g or (fmt.is_nan(e) and fmt.is_nan(g)), (
                    rf.__name__,
                    hex(x),
                    hex(y),
                    hex(e),
                    hex(g),
                )
        if fmt_name != "bf16":
            va = np.array(vals, ut).view(dt)
            for npf, rf in (
                (np.sqrt, R.f_sqrt),
                (np.floor, R.f_floor),
                (np.ceil, R.f_ceil),
                (np.trunc, R.f_trunc),
                (np.rint, R.f_rint),
            ):
                for x, g in zip(vals, npf(va).view(ut).tolist(), strict=False):
                    e = rf(fmt, x)
                    assert e == g or (fmt.is_nan(e) and fmt.is_nan(g)), (rf.__name__, hex(x))


def test_refsem_conversions_and_fma_by_hand() -> None:
    f32 = np.array(random_float_bits(np.random.default_rng(3), R.F32, 500) + float_edges(R.F32), np.uint32)
    with np.errstate(all="ignore"):
        for dst, dt, ut in (
            ("f16", np.float16, np.uint16),
            ("bf16", ml_dtypes.bfloat16, np.uint16),
            ("f64", np.float64, np.uint64),
        ):
            got = f32.view(np.float32).astype(dt).view(ut)
            for x, g in zip(f32.tolist(), got.tolist(), strict=False):
                e = R.cvt(dst, "f32", x)
                assert e == g or R.FORMATS[dst].is_nan(g), (dst, hex(x))
    # by hand: fma single rounding vs rounding the product first
    a = 0x3F800800  # 1 + 2^-12
    assert R.f_fma(R.F32, a, a, 0xBF800000) == R.F32.from_float(2.0**-11 + 2.0**-24)
    assert R.f_mul(R.F32, a, a) == R.F32.from_float(1 + 2.0**-11)  # the product alone loses 2^-24
    assert R.f_fma(R.F64, 1, R.F64.from_float(-0.5), 0) == 1 << 63  # underflow keeps the exact sign
    # integer rules (docs/decisions.md)
    assert R.i_div(0x80000000, 0xFFFFFFFF, 32, True) == 0x80000000
    assert R.i_rem(0x80000000, 0xFFFFFFFF, 32, True) == 0
    assert R.i_div(7, 0, 32, False) == 0xFFFFFFFF and R.i_rem(7, 0, 32, True) == 7
    assert R.i_shr(0x80000000, 40, 32, True) == 0xFFFFFFFF and R.i_shr(0x80000000, 40, 32, False) == 0
    assert R.cvt("i32", "f32", R.F32.canonical_nan) == 0 and R.cvt("u32", "f32", 0xBF800000) == 0
    assert R.cvt("i32", "f32", R.F32.inf) == 0x7FFFFFFF and R.cvt("f16", "i32", 65520) == 0x7C00
    assert R.cvt("f32", "i32", 16777217) == R.F32.from_float(16777216.0)
    assert R.f_min(R.F32, 0, 0x80000000) == 0x80000000 and R.f_max(R.F32, 0x80000000, 0) == 0
