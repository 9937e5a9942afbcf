"""Types of the kernel language: scalar dtypes, buffer annotations and compile-time constants.

Spelling (docs in :mod:`anywave.compiler`):

* scalars ``aw.i32 aw.u32 aw.i64 aw.u64 aw.f16 aw.bf16 aw.f32 aw.f64 aw.bool_`` (Python's
  ``bool`` is accepted as an annotation too);
* buffers ``aw.Buffer[aw.f32]`` (read-write), ``aw.In[aw.f32]`` (read only),
  ``aw.Out[aw.f32]`` (write only); narrow integer element types ``aw.u8 aw.i8 aw.u16 aw.i16``
  are allowed for buffers (loads widen them to u32/i32, stores keep the low bits), and
  ``aw.bool_`` (or ``bool``): NumPy bool arrays, one byte per element, loaded as bools (a byte
  not 0 is true), stored as 0 or 1;
* compile-time constants ``aw.Const[int]`` / ``aw.Const[float]`` / ``aw.Const[bool]`` — or
  any keyword-only parameter — specialise the kernel; their values are part of the cache key.

Inside a kernel a dtype is also a conversion: ``aw.f32(i)`` emits ``cvt.f32.i32``. Outside a
kernel it builds the NumPy scalar (``aw.f32(1.5)`` is ``np.float32(1.5)``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from anywave.isa.types import Access, ScalarType


@dataclass(frozen=True, eq=True)
class DType:
    """A value type of the kernel language.

    Attributes:
        name: spelling (``f32``).
        scalar: the ISA type (``ScalarType.PRED`` for predicates, ``U32`` for ``bool_``
            values kept in registers as 0/1).
        np_spec: the NumPy dtype of buffers/scalars of this type (``None`` for predicates), or
            ``"module:attribute"`` for one imported on first use (:attr:`np_dtype`).
    """

    name: str
    scalar: ScalarType
    #: the NumPy scalar type, or ``"module:attribute"`` naming it (imported on first use: bf16's
    #: ``ml_dtypes`` takes ~0.8 s to import, most of ``import anywave``)
    np_spec: Any

    @cached_property
    def np_dtype(self) -> Any:
        """The NumPy dtype (scalar type) of buffers/scalars of this type (None for predicates)."""
        if isinstance(self.np_spec, str):
            import importlib

            mod, attr = self.np_spec.split(":")
            return getattr(importlib.import_module(mod), attr)
        return self.np_spec

    @cached_property  # immutable: computed once per type (the compiler asks often)
    def bits(self) -> int:
        return self.scalar.bits if self.name != "bool" else 32

    @cached_property  # immutable: computed once per type (the compiler asks often)
    def is_float(self) -> bool:
        return self.scalar.is_float

    @cached_property  # immutable: computed once per type (the compiler asks often)
    def is_int(self) -> bool:
        return not self.is_float and self.name not in ("bool", "pred")

    @property
    def is_signed(self) -> bool:
        return self.scalar.is_signed

    @property
    def is_bool(self) -> bool:
        return self.name in ("bool", "pred")

    @cached_property  # immutable: computed once per type (the compiler asks often)
    def regs(self) -> int:
        """32-bit registers a value occupies (0 for predicates)."""
        if self.name == "pred":
            return 0
        return self.bits // 32 if self.bits >= 64 else 1

    def __repr__(self) -> str:
        return f"aw.{self.name}"

    def __call__(self, value: Any) -> Any:
        """Outside a kernel: the NumPy scalar of this type. A Python ``int`` or ``float``
        becomes a float type rounded once from its exact value, as a literal in a kernel
        (spec §8.11; NumPy/ml_dtypes would round ``aw.bf16(16842753)`` twice, via binary64
        and binary32); beyond the largest finite value it is ±inf, as in NumPy."""
        if self.np_dtype is None:
            raise TypeError(f"aw.{self.name} has no host representation")
        if self.is_float and type(value) in (int, float) and self.scalar.bits in (16, 32, 64):
            from anywave.asm.floats import FLOAT_FORMATS, exact_to_bits

            bits = exact_to_bits(value, self.scalar)
            if bits is None:  # overflow: the signed infinity
                ebits, mbits = FLOAT_FORMATS[self.scalar]
                bits = (((1 << ebits) - 1) << mbits) | ((1 << (ebits + mbits)) if value < 0 else 0)
            ut = {16: np.uint16, 32: np.uint32, 64: np.uint64}[self.scalar.bits]
            return np.array([bits], ut).view(self.np_dtype)[0]
        return np.dtype(self.np_dtype).type(value)


i8 = DType("i8", ScalarType.I8, np.int8)
u8 = DType("u8", ScalarType.U8, np.uint8)
i16 = DType("i16", ScalarType.I16, np.int16)
u16 = DType("u16", ScalarType.U16, np.uint16)
i32 = DType("i32", ScalarType.I32, np.int32)
u32 = DType("u32", ScalarType.U32, np.uint32)
i64 = DType("i64", ScalarType.I64, np.int64)
u64 = DType("u64", ScalarType.U64, np.uint64)
f16 = DType("f16", ScalarType.F16, np.float16)
bf16 = DType("bf16", ScalarType.BF16, "ml_dtypes:bfloat16")
f32 = DType("f32", ScalarType.F32, np.float32)
f64 = DType("f64", ScalarType.F64, np.float64)
bool_ = DType("bool", ScalarType.U32, np.bool_)
#: the element type of a buffer of bools (``aw.In[aw.bool_]``): one byte per element, NumPy's
#: ``bool`` layout; a load gives a ``bool_`` value (true where the byte is not 0), a store writes
#: 0 or 1. Never a value type.
bool8 = DType("bool8", ScalarType.U8, np.bool_)
#: internal: a comparison result held in a predicate register
pred = DType("pred", ScalarType.PRED, None)
#: internal: 2 and 4 consecutive 32-bit registers, the data of a vector load/store
#: (``aw.load2``/``aw.load4``; never a value of the language)
vec2 = DType("vec2", ScalarType.B64, None)
vec4 = DType("vec4", ScalarType.B128, None)

#: types a value (register) can have in the language
VALUE_TYPES = (i32, u32, i64, u64, f16, bf16, f32, f64, bool_)
#: narrow integer types allowed only as buffer/local-array elements
NARROW_TYPES = (i8, u8, i16, u16)
BY_NAME = {t.name: t for t in (*VALUE_TYPES, *NARROW_TYPES)}
BY_NAME["bool_"] = bool_


_WIDENED = {i8: i32, i16: i32, u8: u32, u16: u32, bool8: bool_}


def value_type_of_element(t: DType) -> DType:
    """The register type a load of element type ``t`` produces (narrow ints widen)."""
    return _WIDENED.get(t, t)


def from_numpy(dt: Any) -> DType | None:
    """The DType of a NumPy dtype, or None."""
    dt = np.dtype(dt)
    for t in (*VALUE_TYPES, *NARROW_TYPES):
        if t.np_dtype is not None and t is not bool_ and np.dtype(t.np_dtype) == dt:
            return t
    return None


@dataclass(frozen=True)
class BufferType:
    """A buffer parameter annotation: element type and access (the element type may be a
    :class:`TypeParam` until the kernel's type parameters are given)."""

    elem: DType
    access: Access
    #: a constant buffer (``aw.Constant[T]``): read only, with the ABI's constant hint (the target
    #: may place it in constant memory; docs/spec.md §12)
    constant: bool = False

    def resolved(self, dtypes: dict[str, DType]) -> BufferType:
        """This annotation with a type parameter replaced by its dtype (``bool_``: one byte per
        element, as ``aw.In[aw.bool_]``)."""
        if isinstance(self.elem, TypeParam):
            t = dtypes[self.elem.name]
            return BufferType(bool8 if t is bool_ else t, self.access, self.constant)
        return self

    def __repr__(self) -> str:
        head = "Constant" if self.constant else {Access.READ: "In", Access.WRITE: "Out",
                                                 Access.READWRITE: "Buffer"}[self.access]
        return f"aw.{head}[{'aw.bool_' if self.elem is bool8 else repr(self.elem)}]"


class _BufferSpelling:
    access = Access.READWRITE

    constant = False

    def __class_getitem__(cls, elem: Any) -> BufferType:
        if elem is bool_ or elem is bool:  # one byte per element (NumPy's bool arrays)
            return BufferType(bool8, cls.access, cls.constant)
        tp = type_param_of(elem)
        if tp is not None:  # a dtype given at compile time (a type parameter)
            return BufferType(tp, cls.access, cls.constant)  # type: ignore[arg-type]
        if not isinstance(elem, DType) or elem in (pred, bool8) or elem.np_dtype is None:
            raise TypeError(f"aw.{cls.__name__}[...] takes an element type such as aw.f32, got {elem!r}; "
                            f"valid: {', '.join(t.name for t in (*VALUE_TYPES, *NARROW_TYPES))}")
        return BufferType(elem, cls.access, cls.constant)


class Buffer(_BufferSpelling):
    """``aw.Buffer[aw.f32]``: a buffer the kernel reads and writes."""

    access = Access.READWRITE


class In(_BufferSpelling):
    """``aw.In[aw.f32]``: a buffer the kernel only reads."""

    access = Access.READ


class Out(_BufferSpelling):
    """``aw.Out[aw.f32]``: a buffer the kernel only writes (reading it is a compile error)."""

    access = Access.WRITE


class Constant(_BufferSpelling):
    """``aw.Constant[aw.f32]``: a small read-only table (CUDA's ``__constant__`` memory): an
    ``aw.In`` buffer with the ABI's constant hint (docs/spec.md §12, WAVE 1.1), which lets a
    target place it in constant/uniform memory; a launch's constant buffers total at most 64 KiB.
    Results are those of ``aw.In``."""

    access = Access.READ
    constant = True


@dataclass(frozen=True)
class ConstType:
    """``aw.Const[int]``: a compile-time constant parameter of Python type ``py``."""

    py: type

    def __repr__(self) -> str:
        return f"aw.Const[{self.py.__name__}]"


class Const:
    """``aw.Const[int]``, ``aw.Const[float]``, ``aw.Const[bool]``: the argument's value is
    known when the kernel is compiled (one compiled module per distinct value)."""

    def __class_getitem__(cls, py: Any) -> ConstType:
        if py not in (int, float, bool):
            raise TypeError(f"aw.Const[...] takes int, float or bool, got {py!r}")
        return ConstType(py)


#: Python scalar constant types the frontend folds at compile time
PY_CONST = (bool, int, float)


class _Dynamic:
    """The shape ``aw.dynamic`` of a local array sized at launch (:data:`dynamic`)."""

    def __repr__(self) -> str:
        return "aw.dynamic"

    def __reduce__(self) -> str:
        return "dynamic"


#: ``aw.local_array(dtype, aw.dynamic)``: a 1-D local array whose size comes from the launch
#: (``kernel(..., local_bytes=N)``, CUDA's ``extern __shared__`` with its third launch argument):
#: ``N // itemsize`` elements at offset 0 of local memory, before the kernel's other local
#: arrays; every such array of a kernel names the same bytes. The kernel compiles once per N.
dynamic = _Dynamic()
#: the launch keyword (a compile-time parameter every kernel that uses ``aw.dynamic`` gets)
DYNAMIC_LOCAL = "local_bytes"


class constexpr:  # noqa: N801 - spelt as Triton spells it
    """``T: aw.constexpr``: a compile-time parameter of any kind (an int, a float, a bool, a str,
    a tuple, a dtype), like a keyword-only parameter. A parameter so annotated whose name appears
    in another parameter's annotation (``x: aw.In[T]``, ``a: T``) is a **type parameter**: its
    value is a dtype, given at the call (``T=aw.f16``) or taken from the buffer argument annotated
    with it, and each dtype compiles its own specialisation (:class:`TypeParam`)."""

    def __init__(self) -> None:
        raise TypeError("aw.constexpr is an annotation (T: aw.constexpr), not a value")


@dataclass(frozen=True)
class TypeParam:
    """A dtype named by a compile-time parameter, standing in an annotation for its value
    (``aw.In[T]``, ``a: T``). ``T`` is the parameter's name; it may also be spelt by a
    ``typing.TypeVar("T")`` defined at module level (when annotations are not strings)."""

    name: str

    def __repr__(self) -> str:
        return self.name


def type_param_of(x: Any) -> TypeParam | None:
    """The :class:`TypeParam` that ``x`` spells (itself, or a ``typing.TypeVar`` by its name), else None."""
    if isinstance(x, TypeParam):
        return x
    import typing

    if isinstance(x, typing.TypeVar):
        return TypeParam(x.__name__)
    return None


def resolve_dtype(v: Any) -> DType | None:
    """The value type ``v`` names: an ``aw`` dtype, a NumPy dtype or scalar type (``np.float32``,
    ``"float16"``), Python's ``bool``; None when it names none."""
    if isinstance(v, DType):
        return v if v in VALUE_TYPES or v in NARROW_TYPES else None
    if v is bool:
        return bool_
    try:
        dt = np.dtype(v)
    except TypeError:
        return None
    if dt == np.dtype(np.bool_):
        return bool_
    return from_numpy(dt)
