"""Differential fuzzer: random kernels with control flow, compiled and run on the emulator,
compared bit for bit with a plain-Python reference (see ``fuzz_kernels.py`` next to this file).

Scale with ``ANYWAVE_FUZZ_EXAMPLES`` (default 40); the ``slow`` variants also cover W = 16, 64.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import sys
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))
import fuzz_kernels as fk  # noqa: E402

import anywave as aw  # noqa: E402

EXAMPLES = int(os.environ.get("ANYWAVE_FUZZ_EXAMPLES", "40"))
_counter = itertools.count()
_tmp = tempfile.mkdtemp(prefix="aw_fuzz_")
os.environ.setdefault("ANYWAVE_CACHE_DIR", os.path.join(_tmp, "cache"))
GRID, WG = 2, 20  # 40 threads: partial waves at every W


def load_kernel(source: str):
    """Write ``source`` to a file and import it with ``aw`` bound to the real package."""
    name = f"aw_fuzz_{os.getpid()}_{next(_counter)}"
    path = os.path.join(_tmp, name + ".py")
    with open(path, "w") as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    mod.__dict__["aw"] = aw
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod.k


def check_program(prog: fk.Program, seed: int, widths: tuple[int, ...]) -> None:
    """Compile ``prog``, run it at every W and compare with the reference (AssertionError
    with the source and the first differing element)."""
    threads = GRID * WG
    inputs = fk.make_inputs(seed, threads)
    ref = fk.reference(prog, inputs, threads)
    k = load_kernel(prog.source)
    for w in widths:
        bufs = {n: v.copy() for n, v in inputs.items()}
        bufs["oi"] = np.zeros(threads * prog.out_i, np.int32)
        bufs["ou"] = np.zeros(threads * prog.n_uint, np.uint32)
        bufs["of"] = np.zeros(threads * prog.n_flt, np.float32)
        k(bufs["ib"], bufs["ub"], bufs["fb"], bufs["oi"], bufs["ou"], bufs["of"], grid=GRID, workgroup=WG,
          wave_width=w)
        for n in ("ib", "ub", "fb", "oi", "ou", "of"):
            ok = fk.same_bits(bufs[n], ref[n])
            if not ok.all():
                j = int(np.flatnonzero(~ok)[0])
                raise AssertionError(f"W={w} buffer {n}[{j}]: kernel {bufs[n][j]!r}, reference {ref[n][j]!r} "
                                     f"(thread {j // (len(ok) // threads)})\n--- program (seed {seed}) ---\n"
                                     + prog.source)


def _chooser(data: st.DataObject) -> fk.Chooser:
    return fk.Chooser(lambda lo, hi: data.draw(st.integers(lo, hi)))


_SETTINGS = dict(deadline=None, suppress_health_check=list(HealthCheck), derandomize=False)


@settings(max_examples=EXAMPLES, **_SETTINGS)
@given(data=st.data(), seed=st.integers(0, 2**31))
def test_random_kernels(data, seed):
    prog = fk.Gen(_chooser(data), n_stmts=data.draw(st.integers(2, 10))).program()
    check_program(prog, seed, (8, 32))


@settings(max_examples=max(4, EXAMPLES // 10), **_SETTINGS)
@given(data=st.data(), seed=st.integers(0, 2**31))
def test_register_pressure_kernels(data, seed):
    prog = fk.pressure_program(_chooser(data), n_live=data.draw(st.integers(100, 140)))
    check_program(prog, seed, (8, 32))


@pytest.mark.slow
@settings(max_examples=EXAMPLES * 5, **_SETTINGS)
@given(data=st.data(), seed=st.integers(0, 2**31))
def test_random_kernels_all_widths(data, seed):
    prog = fk.Gen(_chooser(data), n_stmts=data.draw(st.integers(2, 14))).program()
    check_program(prog, seed, (8, 16, 32, 64))
