"""``aw.finfo`` and ``aw.iinfo``: the limits of the kernel language's number types, as NumPy's
``np.finfo``/``np.iinfo`` give them, usable on the host and inside kernels, where every
attribute is a compile-time constant of the type itself (``aw.finfo(aw.f32).max`` is the f32
3.4028235e38, so ``best = aw.finfo(aw.f32).max`` makes an f32 variable, and
``aw.iinfo(aw.u32).max`` a u32 one; in an expression with another operand the usual rules
apply).

The float values are computed from the formats' parameters (IEEE 754-2019 §3.3, Table 3.2:
binary16, binary32, binary64; bfloat16: 8 exponent and 7 fraction bits), with the definitions
of NumPy's ``finfo``: ``eps = 2^-p`` for ``p`` fraction bits (the gap from 1 to the next
float), ``epsneg = 2^-(p+1)`` (from 1 to the float below), ``max = (2 - 2^-p) * 2^emax``,
``min = -max``, ``tiny = smallest_normal = 2^emin``, ``smallest_subnormal = 2^(emin - p)``,
``precision = floor(p * log10(2))`` decimal digits, ``resolution = 10^-precision``; integers:
``min = -2^(n-1)``, ``max = 2^(n-1) - 1`` (signed), ``0`` and ``2^n - 1`` (unsigned).
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import types as ty
from .bindings import Intrinsic
from .errors import CompileError

#: fraction (mantissa) and exponent bits of each float type
_FORMATS = {"f16": (10, 5), "bf16": (7, 8), "f32": (23, 8), "f64": (52, 11)}


def _dtype_of(x: Any, what: str) -> ty.DType:
    t = ty.resolve_dtype(x)
    if t is None:
        raise CompileError(f"aw.{what}() takes a dtype (aw.f32, aw.i32, np.float16 ...), got {x!r}")
    return t


@dataclass(frozen=True)
class FInfo:
    """Machine limits of a float type (``aw.finfo(aw.f16)``); values are NumPy scalars of the type.

    Attributes:
        dtype, bits; eps, epsneg, max, min, tiny (= smallest_normal), smallest_normal,
        smallest_subnormal, resolution; precision, nmant (fraction bits), nexp (exponent bits),
        maxexp (the exponent past the largest: 2^maxexp overflows), minexp (of the smallest normal).
    """

    dtype: ty.DType
    bits: int
    eps: Any
    epsneg: Any
    max: Any
    min: Any
    tiny: Any
    smallest_normal: Any
    smallest_subnormal: Any
    resolution: Any
    precision: int
    nmant: int
    nexp: int
    maxexp: int
    minexp: int


@dataclass(frozen=True)
class IInfo:
    """Machine limits of an integer type (``aw.iinfo(aw.u32)``): ``dtype``, ``bits``, ``min``,
    ``max`` (NumPy scalars of the type)."""

    dtype: ty.DType
    bits: int
    min: Any
    max: Any


def finfo_of(t: ty.DType) -> FInfo:
    if t.name not in _FORMATS:
        raise CompileError(f"aw.finfo() takes a float type (f16, bf16, f32, f64), got {t!r}; integers: aw.iinfo()")
    p, e = _FORMATS[t.name]
    emax = (1 << (e - 1)) - 1
    emin = 1 - emax
    precision = int(math.floor(p * math.log10(2)))
    v = t  # the NumPy scalar of each value: exact (every value below is representable in t)
    return FInfo(t, 1 + e + p, v(2.0 ** -p), v(2.0 ** -(p + 1)), v((2 - 2.0 ** -p) * 2.0 ** emax),
                 v(-(2 - 2.0 ** -p) * 2.0 ** emax), v(2.0 ** emin), v(2.0 ** emin), v(2.0 ** (emin - p)),
                 v(float(f"1e-{precision}")), precision, p, e, emax + 1, emin)


def iinfo_of(t: ty.DType) -> IInfo:
    if not t.is_int:
        raise CompileError(f"aw.iinfo() takes an integer type (i8 ... u64), got {t!r}; floats: aw.finfo()")
    n = t.scalar.bits
    lo, hi = (-(1 << (n - 1)), (1 << (n - 1)) - 1) if t.is_signed else (0, (1 << n) - 1)
    npt = np.dtype(t.np_dtype).type
    return IInfo(t, n, npt(lo), npt(hi))


class _Info(Intrinsic):
    """An intrinsic that is also a host function: ``aw.finfo(aw.f32)`` works in both places."""

    def __init__(self, name: str, doc: str, make: Any) -> None:
        super().__init__(name, doc, lower=self._lower)
        self._make = make

    def __call__(self, dtype: Any) -> Any:  # type: ignore[override]
        return self._make(_dtype_of(dtype, self.name))

    def _lower(self, bld: Any, node: ast.Call, discard: bool) -> Any:
        args = bld.call_args(node, 1, 1, f"aw.{self.name}(dtype)")
        try:
            return self._make(_dtype_of(args[0], self.name))
        except CompileError as e:
            raise bld.err(node, str(e)) from None


finfo = _Info("finfo", "finfo(dtype) -> limits of a float type (max, min, eps, tiny, smallest_subnormal ...), "
              "compile-time constants of that type (NumPy's finfo)", finfo_of)
iinfo = _Info("iinfo", "iinfo(dtype) -> limits of an integer type (min, max), compile-time constants of that type "
              "(NumPy's iinfo)", iinfo_of)
