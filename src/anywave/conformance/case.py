"""Conformance cases as data, and the comparison of actual against expected outputs."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from anywave.conformance import refsem

#: expected outputs: name -> array, or a function of the wave width W returning that dict
Expected = Mapping[str, np.ndarray] | Callable[[int], Mapping[str, np.ndarray]]

WAVE_WIDTHS = (8, 16, 32, 64)


@dataclass(frozen=True)
class Compare:
    """How one output is compared.

    Attributes:
        mode: ``"exact"`` (bits equal), ``"exact-nan"`` (bits equal unless both are NaNs of
            ``ftype``), ``"ulp"`` (within ``tol`` units in the last place of ``ftype``;
            infinities and NaN must match exactly as kind), ``"abs"`` (|actual - expected|
            <= ``tol``), ``"rel"`` (relative error <= ``tol``) or ``"multiset"`` (the same
            values in any order: results of class ``schedule``).
        ftype: element float type for NaN/ULP interpretation: f16, bf16, f32, f64, or
            the packed f16x2/bf16x2 (each half compared on its own).
        tol: the bound for ``ulp``/``abs``/``rel``.
    """

    mode: str = "exact"
    ftype: str | None = None
    tol: float = 0.0

    def __post_init__(self) -> None:
        if self.mode not in ("exact", "exact-nan", "ulp", "abs", "rel", "multiset"):
            raise ValueError(
                f"unknown compare mode {self.mode!r}; expected exact, exact-nan, ulp, abs, rel or multiset"
            )
        if self.mode in ("exact-nan", "ulp", "abs", "rel") and self.ftype is None:
            raise ValueError(f"compare mode {self.mode!r} needs ftype")


EXACT = Compare()


@dataclass
class Case:
    """One conformance case: a kernel, its launch, inputs and independently computed outputs.

    Attributes:
        name: unique case name; also the kernel's name inside its group module.
        group: the group (one ``.wave`` module per group) the case belongs to.
        source: the ``.wave`` text of the kernel (and of any ``.func`` it calls).
        grid: workgroups (x, y, z).
        workgroup: threads per workgroup (x, y, z).
        args: kernel arguments: NumPy arrays for buffers (copied before each run) and
            NumPy scalars for scalar arguments.
        expected: output name -> expected array, or ``callable(W) -> dict`` when the
            answer depends on the wave width.
        compare: how outputs are compared: one :class:`Compare` for all, per-name overrides
            in ``compare_by_name``.
        wave_widths: the wave widths the case applies to.
        requires: capability spellings the target must offer (``f64``, ``wave_ops`` ...).
        serial_expected: stricter expectations valid only for a runner that serialises
            atomics in the documented order (the emulator): name -> array or callable(W).
        race_free: whether the emulator's checked mode may be used (no data races, no reads
            of unwritten local memory).
        expect_refusal: when set, a regular expression: the launch must be refused with a
            WaveError whose ``"ClassName: message"`` matches it (and ``expected`` then holds
            the untouched inputs); a launch that runs fails the case.
    """

    name: str
    group: str
    source: str
    grid: tuple[int, int, int]
    workgroup: tuple[int, int, int]
    args: dict[str, Any]
    expected: Expected
    compare: Compare = EXACT
    compare_by_name: dict[str, Compare] = field(default_factory=dict)
    wave_widths: tuple[int, ...] = WAVE_WIDTHS
    requires: tuple[str, ...] = ()
    serial_expected: Expected | None = None
    race_free: bool = True
    description: str = ""
    expect_refusal: str = ""

    @property
    def kernel(self) -> str:
        """The kernel the case launches: the first ``.kernel`` of its source (several cases may
        share one kernel with different inputs)."""
        for line in self.source.splitlines():
            if line.startswith(".kernel"):
                return line.split()[1]
        raise ValueError(f"case {self.name!r} has no .kernel in its source")

    def expected_for(self, wave_width: int) -> dict[str, np.ndarray]:
        """The expected outputs at wave width ``wave_width``."""
        exp = self.expected(wave_width) if callable(self.expected) else self.expected
        return dict(exp)

    def serial_expected_for(self, wave_width: int) -> dict[str, np.ndarray]:
        if self.serial_expected is None:
            return {}
        exp = self.serial_expected(wave_width) if callable(self.serial_expected) else self.serial_expected
        return dict(exp)

    def compare_for(self, name: str) -> Compare:
        return self.compare_by_name.get(name, self.compare)


@dataclass
class Mismatch:
    """One mismatching element: flat index, both bit patterns (hex) and as floats (if typed)."""

    index: int
    expected: str
    actual: str

    def __str__(self) -> str:
        return f"[{self.index}] expected {self.expected}, got {self.actual}"


@dataclass
class CompareResult:
    ok: bool
    message: str = ""
    mismatches: list[Mismatch] = field(default_factory=list)


def _bits_view(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    if a.dtype.itemsize not in (1, 2, 4, 8):
        raise ValueError(f"cannot compare arrays of dtype {a.dtype}")
    return a.reshape(-1).view(f"u{a.dtype.itemsize}").astype(np.uint64)


def _elem_view(bits: np.ndarray, itemsize: int, ftype: str | None) -> tuple[np.ndarray, int]:
    """Split raw bits into elements of ftype's width (packed types: halves)."""
    if ftype in ("f16x2", "bf16x2") and itemsize == 4:
        lo, hi = bits & 0xFFFF, bits >> 16
        return np.stack([lo, hi], axis=1).reshape(-1), 2
    return bits, itemsize


def _fmt_of(ftype: str | None) -> refsem.FloatFormat | None:
    if ftype is None:
        return None
    return refsem.FORMATS[ftype.removesuffix("x2")]


def _show(v: int, nbytes: int, fmt: refsem.FloatFormat | None) -> str:
    text = f"0x{v:0{2 * nbytes}x}"
    if fmt is not None and fmt.bits == 8 * nbytes:
        text += f" ({fmt.to_float(v)!r})"
    return text


def _ulp_index(fmt: refsem.FloatFormat, v: int) -> int:
    """Monotonic integer position of a float's bits (±0 both map to 0)."""
    mag = v & ~fmt.sign_bit & fmt.mask
    return -mag if v & fmt.sign_bit else mag


def compare(
    expected: np.ndarray, actual: np.ndarray, how: Compare = EXACT, *, limit: int = 8, name: str = ""
) -> CompareResult:
    """Compare an output array against its expectation.

    Args:
        expected, actual: arrays of the same shape and element size (compared as raw bits).
        how: the comparison rule (:class:`Compare`).
        limit: how many mismatching elements to report.
        name: output name used in the message.

    Returns:
        :class:`CompareResult`; its message lists the first mismatches with both values in
        hex and, for float types, as floats.
    """
    expected = np.asarray(expected)
    actual = np.asarray(actual)
    label = f"output {name!r}: " if name else ""
    if expected.shape != actual.shape or expected.dtype.itemsize != actual.dtype.itemsize:
        return CompareResult(
            False,
            f"{label}shape/dtype mismatch: expected {expected.shape} "
            f"{expected.dtype}, got {actual.shape} {actual.dtype}",
        )
    nbytes = expected.dtype.itemsize
    eb, ab = _bits_view(expected), _bits_view(actual)
    if how.mode == "multiset":
        es, as_ = np.sort(eb), np.sort(ab)
        if np.array_equal(es, as_):
            return CompareResult(True)
        missing = sorted(set(es.tolist()) - set(as_.tolist()))[:limit]
        extra = sorted(set(as_.tolist()) - set(es.tolist()))[:limit]
        return CompareResult(
            False,
            f"{label}values differ as a multiset: missing "
            f"{[hex(v) for v in missing]}, unexpected {[hex(v) for v in extra]}",
        )
    eb, size = _elem_view(eb, nbytes, how.ftype)
    ab, _ = _elem_view(ab, nbytes, how.ftype)
    fmt = _fmt_of(how.ftype)
    bad = eb != ab
    if how.mode != "exact" and fmt is not None and bad.any():
        for i in np.flatnonzero(bad):
            e, a = int(eb[i]), int(ab[i])
            ev, av = fmt.decode(e), fmt.decode(a)
            if ev.is_nan or av.is_nan:
                bad[i] = not (ev.is_nan and av.is_nan)
            elif how.mode == "exact-nan":
                continue
            elif ev.is_inf or av.is_inf:
                continue  # infinities must match bit-exactly (already unequal)
            elif how.mode == "ulp":
                bad[i] = abs(_ulp_index(fmt, e) - _ulp_index(fmt, a)) > how.tol
            elif how.mode == "abs":
                bad[i] = abs(float(ev.value) - float(av.value)) > how.tol
            elif how.mode == "rel":
                ref = abs(float(ev.value))
                err = abs(float(ev.value) - float(av.value))
                bad[i] = err > how.tol * ref if ref else err > 0
    if not bad.any():
        return CompareResult(True)
    idx = np.flatnonzero(bad)
    mism = [Mismatch(int(i), _show(int(eb[i]), size, fmt), _show(int(ab[i]), size, fmt)) for i in idx[:limit]]
    msg = (
        f"{label}{len(idx)} of {eb.size} elements differ ({how.mode}"
        f"{'/' + how.ftype if how.ftype else ''}{', tol ' + str(how.tol) if how.tol else ''}); first: "
        + "; ".join(str(m) for m in mism)
    )
    return CompareResult(False, msg, mism)
