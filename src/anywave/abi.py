"""The runtime ABI: how a launch's arguments become the words every target passes (spec §2.3).

One module for what the emulator and every compiled runtime must agree on bit for bit:

* :func:`scalar_word` — a scalar argument's value as its 32/64-bit pattern (range-checked
  integers; floats rounded once to nearest-even by the assembler's own rounding,
  :func:`anywave.asm.floats.round_to_bits`, so a literal and an argument of the same value
  have the same bits);
* :data:`SCALAR_INT` — the range of each integer ABI type (the fast paths of the CUDA runtime
  and the kernel language pass a Python int in range as ``v & mask`` without calling
  :func:`scalar_word`);
* :func:`word_converter` — :func:`scalar_word`'s bits for a value a launch layer has already
  checked (the driver's conversion of a bound launch, without the checks);
* :func:`check_arg_names` — the argument set of a launch against the kernel's ABI;
* :func:`load_program` — a Module from a Module, ``.wbin`` bytes or a path, verified.

These used to live in :mod:`anywave.emu.machine` (as ``_scalar_word``, ``_SCALAR_INT``,
``load_program``), which still re-exports them under those names.
"""

from __future__ import annotations

import math
import os
import struct
from collections.abc import Callable, Iterable, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from anywave.asm.floats import CANONICAL_NAN, FLOAT_FORMATS, round_to_bits
from anywave.binary.module import Kernel, Module
from anywave.errors import LaunchError, LaunchValueError
from anywave.isa.types import ScalarType

#: integer ABI type -> (smallest, largest) value a scalar argument may have
SCALAR_INT: dict[ScalarType, tuple[int, int]] = {
    ScalarType.U32: (0, (1 << 32) - 1), ScalarType.I32: (-(1 << 31), (1 << 31) - 1),
    ScalarType.U64: (0, (1 << 64) - 1), ScalarType.I64: (-(1 << 63), (1 << 63) - 1)}

#: NumPy / ml_dtypes scalar type names whose bits *are* the ABI type's (taken unchanged)
SAME_TYPE: dict[ScalarType, str] = {ScalarType.F64: "float64", ScalarType.F32: "float32",
                                    ScalarType.F16: "float16", ScalarType.BF16: "bfloat16"}


def abi_text(kernel: Kernel) -> str:
    """The kernel's ABI as text for error messages: ``"x: buffer f32 read, n: u32"``."""
    parts = [f"{a.name}: buffer {a.type.spelling} {a.access.spelling}" if a.is_buffer
             else f"{a.name}: {a.type.spelling}" for a in kernel.args]
    return ", ".join(parts) or "(no arguments)"


def check_arg_names(kernel: Kernel, given: Iterable[str], error: type[Exception]) -> None:
    """Raise ``error`` unless ``given`` names exactly the kernel's arguments; the message lists
    the ABI's names, the missing and the unexpected ones."""
    names = [a.name for a in kernel.args]
    given = list(given)
    missing = [n for n in names if n not in given]
    extra = [n for n in given if n not in names]
    if missing or extra:
        raise error(f"kernel {kernel.name!r} takes arguments {names}; missing {missing}, unexpected {extra}")


def check_constant_bytes(kernel: Kernel, nbytes: Iterable[tuple[str, int]], error: type[Exception]) -> None:
    """The launch rule of constant buffers (docs/spec.md §12, WAVE 1.1): their bytes (``nbytes``:
    (argument name, bytes) of each constant buffer argument) total at most
    ``LIMITS.max_constant_bytes``; ``error(message)`` otherwise, naming them."""
    from anywave.isa.types import LIMITS

    sizes = list(nbytes)
    total = sum(n for _, n in sizes)
    if total > LIMITS.max_constant_bytes:
        each = ", ".join(f"{name!r} {n} B" for name, n in sizes)
        raise error(f"kernel {kernel.name!r}: its constant buffers ({each}) hold {total} bytes; a launch's constant "
                    f"buffers total at most {LIMITS.max_constant_bytes} bytes (docs/spec.md §12): pass a larger "
                    "table as an ordinary read-only buffer (aw.In)")


def exact_value(value: Any) -> tuple[Fraction | None, bool, bool]:
    """(exact rational value or None for inf/NaN, sign bit, is NaN) of a real number."""
    if isinstance(value, (int, np.integer)):
        v = int(value)
        return Fraction(v), v < 0, False
    if isinstance(value, np.longdouble) and np.finfo(np.longdouble).nmant > 52:
        if np.isnan(value):
            return None, bool(np.signbit(value)), True
        if np.isinf(value):
            return None, bool(value < 0), False
        return Fraction(*value.as_integer_ratio()), bool(np.signbit(value)), False
    f = float(value)  # exact for every type of at most 64 bits (float16, bfloat16, float8 ...)
    if f != f:
        return None, math.copysign(1.0, f) < 0, True
    if math.isinf(f):
        return None, f < 0, False
    return Fraction(f), math.copysign(1.0, f) < 0, False


def number_kind(value: Any) -> str | None:
    """'int', 'float' or None (not a real number) for Python / NumPy / ml_dtypes scalars."""
    if isinstance(value, (bool, np.bool_)):
        return None
    if isinstance(value, (int, np.integer)):
        return "int"
    if isinstance(value, (float, np.floating)):
        return "float"
    if isinstance(value, np.generic) and type(value).__module__.split(".")[0] == "ml_dtypes":
        import ml_dtypes
        try:
            ml_dtypes.iinfo(value.dtype)
            return "int"
        except (TypeError, ValueError):
            pass
        try:
            ml_dtypes.finfo(value.dtype)
            return "float"
        except (TypeError, ValueError):
            return None
    return None


def scalar_word(kernel: Kernel, name: str, t: ScalarType, value: Any) -> int:
    """A scalar argument's value as its 32/64-bit pattern (int).

    Integer types take Python ints and NumPy / ml_dtypes integer scalars (range-checked).
    Float types take Python ints and floats and NumPy / ml_dtypes real scalars: a scalar of
    exactly the ABI type (e.g. ``np.float16`` for f16, ``ml_dtypes.bfloat16`` for bf16) is
    passed bit for bit (NaN payload and -0 included); any other value is converted exactly,
    rounded once to nearest-even (ValueError if it overflows the type; NaN becomes the
    canonical quiet NaN).

    Raises:
        LaunchError (a TypeError): not a number (or not an integer for an integer type), naming
            the argument.
        LaunchValueError (a ValueError): an integer out of the type's range, or a float
            overflowing it.
    """
    from anywave.errors import LaunchError, LaunchValueError

    where = f"scalar argument {name!r} of kernel {kernel.name!r} ({t.spelling})"
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    kind = number_kind(value)
    if t in SCALAR_INT:
        if kind != "int":
            raise LaunchError(f"{where} takes an integer, got {type(value).__name__} {value!r}")
        lo, hi = SCALAR_INT[t]
        v = int(value)
        if not lo <= v <= hi:
            raise LaunchValueError(f"{where} = {v} is out of range [{lo}, {hi}]")
        return v & ((1 << t.bits) - 1)
    if kind is None:
        raise LaunchError(f"{where} takes a number, got {type(value).__name__} {value!r}")
    if isinstance(value, np.generic) and type(value).__name__ == SAME_TYPE[t]:
        return int(np.array(value).view({2: np.uint16, 4: np.uint32, 8: np.uint64}[value.itemsize]))
    ebits, mbits = FLOAT_FORMATS[t]
    x, negative, nan = exact_value(value)
    if nan:
        return CANONICAL_NAN[t]
    sign = (1 << (ebits + mbits)) if negative else 0
    if x is None:
        return (((1 << ebits) - 1) << mbits) | sign
    bits = round_to_bits(x, negative, t)
    if bits is None:
        emax = (1 << (ebits - 1)) - 1
        largest = (2 - Fraction(2) ** -mbits) * Fraction(2) ** emax
        raise LaunchValueError(f"{where} = {value!r} overflows {t.spelling} (largest finite "
                         f"{float(largest)!r})")
    return bits


_PACK = {ScalarType.F64: (struct.Struct("<d"), struct.Struct("<Q")),
         ScalarType.F32: (struct.Struct("<f"), struct.Struct("<I")),
         ScalarType.F16: (struct.Struct("<e"), struct.Struct("<H"))}
#: the smallest normal f32 (2^-126): a Python float at least this large in magnitude packs to a
#: normal f32 (or overflows), whatever the FPU's flush-to-zero mode
_F32_MIN_NORMAL = 2.0 ** -126


def word_converter(kernel: Kernel, name: str, t: ScalarType) -> Callable[[Any], int]:
    """``convert(value)`` -> the ABI word of scalar argument ``name`` (type ``t``), the bits
    :func:`scalar_word` gives, for a value a launch layer has already checked: a Python int
    within the type's range (:data:`SCALAR_INT`) for an integer type, a Python float for a float
    type. It checks nothing it need not: a bound launch's arguments are checked once, by the
    layer that bound it (issue 24).

    Integers are masked to the type's bits. A finite f64, an f32 of normal magnitude and an f16
    are packed by :mod:`struct` (C's IEEE double-to-float conversion for f32, CPython's
    round-half-even packing for f16: both round once to nearest-even, as
    :func:`anywave.asm.floats.round_to_bits`); NaNs (the canonical NaN), f32 values below the
    smallest normal (kept off the FPU, whose flush-to-zero mode a library may have set), values
    that overflow (:func:`scalar_word` raises its ValueError), bf16 and any value of another
    type go through :func:`scalar_word` itself.

    Raises (from ``convert``):
        ValueError: a float overflowing ``t`` (:func:`scalar_word`'s message); TypeError: as
            :func:`scalar_word`, for a value that is not a number."""
    if t in SCALAR_INT:
        mask = (1 << t.bits) - 1

        def integer(v: Any) -> int:
            return v & mask if type(v) is int else scalar_word(kernel, name, t, v)

        return integer
    packing = _PACK.get(t)
    if packing is None:  # bf16: no struct format
        return lambda v: scalar_word(kernel, name, t, v)
    pack, unpack = packing[0].pack, packing[1].unpack
    if t is ScalarType.F32:
        def f32(v: Any) -> int:
            if type(v) is float and (v == 0.0 or _F32_MIN_NORMAL <= abs(v)):  # (False for a NaN)
                try:
                    return unpack(pack(v))[0]
                except OverflowError:  # rounds past the largest finite f32: scalar_word's error
                    pass
            return scalar_word(kernel, name, t, v)

        return f32

    def other(v: Any) -> int:
        if type(v) is float and v == v:
            try:
                return unpack(pack(v))[0]
            except OverflowError:
                pass
        return scalar_word(kernel, name, t, v)

    return other


def load_program(program: Module | bytes | bytearray | str | os.PathLike[str]) -> Module:
    """A Module from a Module, ``.wbin`` bytes, or a ``.wbin``/``.wave`` path; verified.

    Raises:
        VerifyError: the module breaks a rule of the spec; ValueError: a path of another suffix.
    """
    from anywave.binary.verify import verify, verify_cached

    if isinstance(program, Module):
        verify_cached(program)  # once per unchanged module object, not on every launch
        return program
    if isinstance(program, (bytes, bytearray, memoryview)):
        from anywave.binary.wbin import read_wbin
        return read_wbin(bytes(program))
    p = Path(program)
    if p.suffix.lower() == ".wave":
        from anywave.asm import assemble
        module = assemble(p.read_text(encoding="utf-8"), str(p))
        verify(module)
        return module
    if p.suffix.lower() == ".wbin":
        from anywave.binary.wbin import load
        return load(p)
    raise ValueError(f"program path {str(p)!r}: expected a .wbin or .wave file")


class Dims3(tuple):  # type: ignore[type-arg]
    """Launch geometry as :func:`dims3` returns it: a tuple of 3 ints, already checked, so that a
    layer below the one that parsed it (a driver under the launch layer) takes it unchanged
    instead of checking it again. Equal to (and hashing as) the plain tuple."""

    __slots__ = ()


def dims3(v: Any, what: str, *, empty_ok: bool = False) -> tuple[int, int, int]:
    """``v`` (an int or 1-3 ints, Python or NumPy) as 3 dims: the one parser of launch geometry
    (grid, workgroup) for the kernel language, the drivers and the CLI. A float, bool or other
    non-integer is refused, never truncated. ``empty_ok``: a dimension may be 0 (an empty grid,
    which the runtimes' ``launch`` accepts and runs nothing for).

    Returns a :class:`Dims3`; a :class:`Dims3` given is returned as it is (checked once, where it
    was made), unless it has a 0 and ``empty_ok`` is False.

    Raises:
        LaunchError (a TypeError): not an int or 1-3 ints (``grid=(2.7,)`` names 2.7).
        LaunchValueError (a ValueError): 0 or more than 3 dimensions, or a dimension < 1 (< 0
            with ``empty_ok``)."""
    if type(v) is Dims3 and (empty_ok or 0 not in v):
        return v
    if type(v) is int and v >= 1:
        return Dims3((v, 1, 1))
    if isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)):
        v = (int(v),)
    if not isinstance(v, (Sequence, np.ndarray)) or isinstance(v, (str, bytes, bytearray)):
        # (a dict would give its keys, a set an arbitrary order)
        raise LaunchError(f"{what} must be an int or 1-3 ints, got {type(v).__name__} {v!r}")
    items = list(v)
    for k, x in enumerate(items):
        if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)):
            raise LaunchError(f"{what} must be an int or 1-3 ints, got {type(x).__name__} {x!r} in dimension {k} "
                              f"of {tuple(items)!r}; round it explicitly, e.g. (n + 255) // 256")
    vals = [int(x) for x in items]
    least = 0 if empty_ok else 1
    if not 1 <= len(vals) <= 3 or any(x < least for x in vals):
        raise LaunchValueError(f"{what} must be 1-3 {'non-negative' if empty_ok else 'positive'} ints, got "
                               f"{tuple(vals)}")
    return Dims3(vals + [1] * (3 - len(vals)))
