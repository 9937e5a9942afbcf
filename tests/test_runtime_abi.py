"""The runtime ABI module (anywave.runtime.abi): one scalar encoding for every target, sharing
the assembler's float rounding, and the old emulator import paths kept."""

from __future__ import annotations

import numpy as np
import pytest

from anywave.asm.floats import decimal_to_bits
from anywave.isa.types import ScalarType
from anywave.runtime import abi


class _K:
    name = "k"


def test_old_import_paths_are_the_abi_module() -> None:
    from anywave.emu import machine

    assert machine._scalar_word is abi.scalar_word
    assert machine._SCALAR_INT is abi.SCALAR_INT
    assert machine.load_program is abi.load_program


@pytest.mark.parametrize("t, np_float, np_uint", [(ScalarType.F32, np.float32, np.uint32),
                                                   (ScalarType.F16, np.float16, np.uint16)])
def test_float_words_match_numpy_rounding(t: ScalarType, np_float: type, np_uint: type) -> None:
    # NumPy's float64 -> float32/float16 cast rounds once to nearest-even: an independent oracle
    rng = np.random.default_rng(7)
    vals = rng.standard_normal(2000) * np.exp2(rng.integers(-30, 30, 2000).astype(np.float64))
    lim = float(np.finfo(np_float).max)
    for v in vals:
        if abs(v) >= lim:
            continue
        want = int(np.array(v).astype(np_float).view(np_uint))
        assert abi.scalar_word(_K(), "x", t, float(v)) == want, v


def test_float_word_equals_the_assemblers_literal_bits() -> None:
    for text in ("0.1", "-2.5e-40", "3.4028234e38", "1e-45", "-0.0", "65504"):
        for t in (ScalarType.F32, ScalarType.F64):
            assert abi.scalar_word(_K(), "x", t, float(text)) == decimal_to_bits(repr(float(text)), t)


@pytest.mark.parametrize("t", [ScalarType.U32, ScalarType.I32, ScalarType.U64, ScalarType.I64])
def test_integer_ranges(t: ScalarType) -> None:
    lo, hi = abi.SCALAR_INT[t]
    assert hi - lo == (1 << t.bits) - 1
    assert abi.scalar_word(_K(), "n", t, lo) == lo & ((1 << t.bits) - 1)
    with pytest.raises(ValueError, match="out of range"):
        abi.scalar_word(_K(), "n", t, hi + 1)
    with pytest.raises(TypeError, match="takes an integer"):
        abi.scalar_word(_K(), "n", t, 1.0)


def test_check_arg_names_names_missing_and_unexpected() -> None:
    from anywave.binary.module import Arg, Kernel
    from anywave.isa.types import ArgKind

    k = Kernel("f", [Arg("a", ArgKind.SCALAR, ScalarType.U32), Arg("b", ArgKind.SCALAR, ScalarType.U32)], [])
    abi.check_arg_names(k, ["b", "a"], KeyError)
    with pytest.raises(KeyError, match=r"missing \['b'\], unexpected \['c'\]"):
        abi.check_arg_names(k, ["a", "c"], KeyError)
