"""Array constructors with hostile shapes and dtypes (issue 31, item 2): sizes are computed
exactly (a shape of 2^64 elements was a 16-byte allocation: int64 wrap-around), shapes must be
integers (2.5 was truncated to 2), and only element types a kernel can use are accepted (object
arrays copied to a SYCL array stored raw PyObject pointers). Each refusal is an ArgumentError."""

from __future__ import annotations

import numpy as np
import pytest

import anywave as aw
from anywave.runtime.arrays import MAX_NBYTES, ArgumentError

TARGETS = ["emulator", "opencl", "sycl"]


def _target(name: str) -> str:
    from anywave.runtime.targets import target_status

    st = target_status(name)
    if st is None or not st.available:
        pytest.skip(f"{name} unavailable")
    return name


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("shape", [2**64, (2**32, 2**32), (2**31, 2**31, 4), (2**61,), (3, -1), 2.5, "4", (True,),
                                   [None], (1.0, 2)])
def test_hostile_shapes_refused(target: str, shape: object) -> None:
    with pytest.raises(ArgumentError):
        aw.zeros(shape, np.float32, target=_target(target))
    with pytest.raises(ArgumentError):
        aw.empty(shape, np.float32, target=_target(target))


def test_size_is_exact() -> None:
    assert 2**61 * 4 > MAX_NBYTES  # one byte past the cap: refused, naming the byte count
    with pytest.raises(ArgumentError, match=str(2**61 * 4)):
        aw.zeros(2**61, np.float32, target="emulator")
    a = aw.zeros((3, 0, 2**40), np.float64, target="emulator")  # empty: exactly 0 bytes
    assert a.nbytes == 0 and a.size == 0
    assert aw.zeros((), np.int16, target="emulator").nbytes == 2


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", [object, str, "U4", "S3", np.complex64, np.complex128, [("a", "f4"), ("b", "i4")],
                                   ">f4", "M8[s]", "nonsense"])
def test_hostile_dtypes_refused(target: str, dtype: object) -> None:
    with pytest.raises(ArgumentError):
        aw.zeros(4, dtype, target=_target(target))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("data", [np.array([object(), object()]), ["a", "b"], np.array([1 + 2j]), [[1], [1, 2]],
                                  {"a": 1}, np.zeros(3, ">f4")])
def test_hostile_data_refused(target: str, data: object) -> None:
    with pytest.raises(ArgumentError):
        aw.array(data, target=_target(target))


def test_assign_hostile_values() -> None:
    a = aw.zeros(5, np.float32, target="emulator")
    for bad in ({"a": 1}, np.zeros(7, np.float32), "x"):
        with pytest.raises(ArgumentError):
            a.assign(bad)


def test_object_array_refused_as_buffer_argument() -> None:
    from anywave.runtime.driver import marshal_args

    @aw.kernel
    def inc(a: aw.Buffer[aw.f32], n: aw.i32):
        i = aw.global_id(0)
        if i < n:
            a[i] += 1.0

    k = inc.compile().kernel("inc")
    with pytest.raises(Exception, match="Python objects"):
        marshal_args(k, None, {"a": np.zeros(4, object), "n": 4})
