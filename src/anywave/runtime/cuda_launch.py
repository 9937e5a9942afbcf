"""The CUDA driver's launchers (the hook :meth:`anywave.runtime.driver.Driver.plan_launcher` of
:class:`anywave.runtime.cuda.CudaTarget`, and its own bound launchers): everything a repeated
launch does per call, generated once per kernel and geometry.

* :class:`LaunchPlan` -- one loaded kernel's ABI and parameter block;
* :func:`bind_launcher` -- ``CudaTarget.launch``'s bound launcher of a (module, kernel, grid,
  workgroup) launched before with device arrays;
* :func:`native_launcher` / :func:`python_launcher` -- a kernel-language launch plan's
  launcher (:mod:`anywave.jit.launch`): the C one (:mod:`anywave.runtime.cuda_native`) or its
  generated Python fallback, with the same checks and words;
* :func:`stream_handle`, :func:`cai_contiguous`, :func:`cai_pointer`, :func:`param_buffers`.

The driver itself (bindings, devices, modules, errors) is :mod:`anywave.runtime.cuda`, which
hands these functions what they call (the bindings, the context setter, the ``fail`` that raises
its error); this module imports nothing of it.
"""

from __future__ import annotations

import ctypes
import sys
import threading
from collections.abc import Mapping
from typing import Any

import numpy as np

from anywave.abi import SCALAR_INT, Dims3, scalar_word, word_converter
from anywave.isa.types import ScalarType
from anywave.runtime import arrays as A
from anywave.runtime.driver import MISS


class LaunchPlan:
    """Everything about one loaded kernel that does not change between launches: the ABI,
    the driver function, and a parameter buffer (one 8-byte slot per argument, and the array
    of slot pointers that ``cuLaunchKernel`` takes), refilled under ``lock`` at each launch."""

    def __init__(self, lk: Any, k: Any) -> None:
        self.lk = lk
        self.k = k
        self.function = lk.function
        self.dynamic_shared = lk.info.dynamic_shared
        self.args = list(k.args)
        self.names = [a.name for a in self.args]
        #: 0 buffer (u64 pointer), 1 32-bit scalar, 2 64-bit scalar
        self.kinds = [0 if a.is_buffer else (2 if a.type.bits == 64 else 1) for a in self.args]
        #: (index, kind, arg, lo, hi, mask): Python ints in [lo, hi] pass as ``v & mask``
        self.slots = []
        for i, (kind, a) in enumerate(zip(self.kinds, self.args, strict=True)):
            lo, hi = SCALAR_INT.get(a.type, (1, 0)) if kind else (1, 0)
            self.slots.append((i, kind, a, lo, hi, (1 << a.type.bits) - 1 if kind else 0))
        self.u64, self.u32, self.ptrs, self.kp = param_buffers(len(self.args))
        self.lock = threading.Lock()
        self.checked: set[tuple[tuple[int, int, int], tuple[int, int, int]]] = set()
        self._words: dict[tuple[str, type, str], int] = {}
        #: per argument: the word converter of a checked scalar (:func:`anywave.abi.word_converter`)
        self.words = [None if a.is_buffer else word_converter(k, a.name, a.type) for a in self.args]
        #: ABI indices of the constant buffers (WAVE 1.1): their bytes are checked at every launch
        #: (a kernel with any takes the checked path: no bound launcher skips the check)
        self.constant = [i for i, a in enumerate(self.args) if a.is_buffer and a.constant]
        #: (ABI index, the module's ConstBank) of the buffer the kernel reads from the constant
        #: bank (``PtxKernel.const_bank``), set by the target; None: none
        self.bank: tuple[int, Any] | None = None

    def word(self, i: int, v: Any) -> int:
        """The ABI word of scalar argument ``i`` = ``v``, a value the caller has checked (a Python
        int in range, or a float): converted, not checked (:func:`anywave.abi.word_converter`)."""
        return self.words[i](v)

    def shape(self, g: tuple[int, int, int], wg: tuple[int, int, int]) -> str:
        return f"kernel {self.k.name!r} grid={g} workgroup={wg}"

    def scalar(self, a: Any, v: Any) -> int:
        """The ABI word of scalar argument ``a`` = ``v``, exactly as the emulator converts it
        (numbers through a small cache keyed by type and repr, which is exact for the number
        types the emulator accepts; other values and NaNs uncached)."""
        tv = type(v)
        if tv is int or tv is float or isinstance(v, np.generic):
            try:
                key = (a.name, tv, repr(v))
            except Exception:  # noqa: BLE001 - an unprintable value just skips the cache
                key = None
            if key is not None and v == v:  # NaNs keep their payload: never cached
                w = self._words.get(key)
                if w is None:
                    w = scalar_word(self.k, a.name, a.type, v)
                    if len(self._words) < 256:
                        self._words[key] = w
                return w
        return scalar_word(self.k, a.name, a.type, v)


def param_buffers(n: int) -> tuple[Any, Any, Any, int]:
    """A kernelParams block for ``n`` arguments: (u64 slots, the same memory as u32 (slot i's
    32-bit value is u32[2i]), the array of slot pointers, its address for ``cuLaunchKernel``
    (0 when there are no arguments))."""
    m = max(n, 1)
    u64 = (ctypes.c_uint64 * m)()
    u32 = (ctypes.c_uint32 * (2 * m)).from_buffer(u64)
    base = ctypes.addressof(u64)
    ptrs = (ctypes.c_void_p * m)(*[base + 8 * i for i in range(m)])
    return u64, u32, ptrs, (ctypes.addressof(ptrs) if n else 0)


def stream_handle(stream: Any) -> int:
    """A CUDA stream as the driver's handle (an int): None is the legacy default stream (0); an
    object with ``cuda_stream`` (torch), ``ptr`` (CuPy) or ``handle``, or a handle itself."""
    if stream is None:
        return 0
    for attr in ("cuda_stream", "ptr", "handle"):
        if hasattr(stream, attr):
            return int(getattr(stream, attr))
    return int(stream)


# ------------------------------------------------------------------------ the launch fast path
#
# A launch whose (module object, kernel, grid, workgroup) this thread has already launched
# successfully with device arrays only (twice: one-off launches never pay for the binding)
# goes through a *bound launcher*: a function generated for that plan and geometry with the
# kernelParams block, the driver function, the grid, the scalar ranges and masks prebuilt, so
# that a call does one dict lookup, one type check per argument, writes each argument's
# value into the block, sets the context and calls cuLaunchKernel. Anything the launcher does
# not recognise (another argument count or container, a NumPy array that must be copied, a
# non-contiguous or misaligned device array) makes it return False before any driver call,
# and the checked path runs and raises its usual errors. Scalars are converted by the same
# code as the checked path, so the same values pass and the same errors are raised.
#
# Thread safety: bound launchers are keyed by thread id and each owns its kernelParams block,
# so concurrent launches of one kernel from several threads never share a block and need no
# lock (the checked path still fills the plan's shared block under the plan's lock); the
# caches are plain dicts whose get/set are atomic.

class _NoTensor:
    """Stands in for ``torch.Tensor`` in a bound launcher when torch is not imported."""

    is_cuda = False


def cai_contiguous(cai: Mapping[str, Any]) -> bool:
    """A ``__cuda_array_interface__`` dict describes a C-contiguous array (strides None, or
    exactly the C strides, or at most one element)."""
    strides = cai.get("strides")
    if strides is None:
        return True
    acc = np.dtype(cai["typestr"]).itemsize
    expect: list[int] = []
    for n in reversed(cai["shape"]):
        expect.insert(0, acc)
        acc *= n
    return tuple(strides) == tuple(expect) or int(np.prod(cai["shape"])) <= 1


def cai_pointer(v: Any) -> int | None:
    """The device address of ``v`` when it exposes ``__cuda_array_interface__``, is C-contiguous
    and 16-byte aligned; None otherwise (the checked path then decides and explains)."""
    try:
        cai = v.__cuda_array_interface__
        if not cai_contiguous(cai):
            return None
        ptr = int(cai["data"][0])
    except Exception:  # noqa: BLE001 - anything odd: the checked path raises the proper error
        return None
    return None if ptr & 15 else ptr


def bind_launcher(plan: LaunchPlan, g: tuple[int, int, int], wg: tuple[int, int, int], module: Any, *,
                  drv: Any, context_setter: tuple[Any, Any, bool, str], fail: Any, tensor_type: Any,
                  array_type: type, space: Any) -> Any:
    """A bound launcher ``fast(args, stream, sync) -> bool`` for one plan and geometry (see the
    comment above): True when it launched, False when the checked path must run instead.

    ``drv``: the driver bindings (``cuLaunchKernel``, ``cuStreamSynchronize``);
    ``context_setter``: ``(set, argument, returns a tuple, description)`` of ``cuCtxSetCurrent``;
    ``fail(call, status)``: raises the driver's error naming the kernel and launch shape, as the
    checked path; ``tensor_type``: ``torch.Tensor`` or None; ``array_type``/``space``: anywave
    device arrays and the device's memory space (an array of it is passed by its address)."""
    u64, u32, ptrs, kp = param_buffers(len(plan.args))
    set_ctx, ctx_arg, ctx_tuple, _ = context_setter
    shape = plan.shape(g, wg)

    def synchronize(hstream: int) -> None:
        r = drv.cuStreamSynchronize(hstream)
        if r[0]:
            fail("cuStreamSynchronize", r[0])

    ns: dict[str, Any] = {
        "T": tensor_type or _NoTensor, "cai_ptr": cai_pointer, "scalar": plan.scalar,
        "u64": u64, "u32": u32, "ptrs": ptrs, "kp": kp, "fn": plan.function, "launch": drv.cuLaunchKernel,
        "set_ctx": set_ctx, "ctx": ctx_arg, "stream_handle": stream_handle, "fail": fail,
        "synchronize": synchronize, "DA": array_type, "DS": space}
    n = len(plan.args)
    vs = [f"v{i}" for i in range(n)]
    src = ["def fast(args, stream, sync):",
           "    ta = type(args)",
           "    if ta is list or ta is tuple:"]
    if n:
        src += ["        try:", f"            {', '.join(vs)}, = args", "        except ValueError:",
                "            return False"]
    else:
        src += ["        if args:", "            return False"]
    src += ["    elif ta is dict:",
            f"        if len(args) != {n}:",
            "            return False",
            "        try:"]
    src += [f"            {v} = args[{name!r}]" for v, name in zip(vs, plan.names, strict=True)]
    src += ["            pass", "        except KeyError:", "            return False",
            "    else:", "        return False"]
    for (i, kind, a, lo, hi, mask), v in zip(plan.slots, vs, strict=True):
        ns[f"a{i}"] = a
        if kind == 0:
            src += [f"    if type({v}) is DA and {v}.space is DS:",
                    f"        p = {v}.ptr",
                    f"    elif isinstance({v}, T) and {v}.is_cuda and {v}.is_contiguous():",
                    f"        p = {v}.data_ptr()",
                    "        if p & 15:",
                    "            return False",
                    "    else:",
                    f"        p = cai_ptr({v})",
                    "        if p is None:",
                    "            return False",
                    f"    u64[{i}] = p"]
        else:
            dst = f"u32[{2 * i}]" if kind == 1 else f"u64[{i}]"
            word = v if lo == 0 else f"{v} & {mask}"  # v & mask == v on [0, hi]
            src.append(f"    {dst} = {word} if type({v}) is int and {lo} <= {v} <= {hi} else scalar(a{i}, {v})")
    src += ["    hs = 0 if stream is None else stream_handle(stream)",
            "    e = set_ctx(ctx)" + ("[0]" if ctx_tuple else ""),
            "    if e:",
            "        fail('cuCtxSetCurrent', e)",
            f"    r = launch(fn, {g[0]}, {g[1]}, {g[2]}, {wg[0]}, {wg[1]}, {wg[2]}, {plan.dynamic_shared}, hs, kp, 0)",
            "    if r[0]:",
            "        fail('cuLaunchKernel', r[0])",
            "    if sync:",
            "        synchronize(hs)",
            "    return True"]
    text = "\n".join(src) + "\n"
    exec(compile(text, f"<anywave bound launcher: {shape}>", "exec"), ns)  # noqa: S102 - our own text
    fast = ns["fast"]
    fast.source = text  # for reading what a launch does
    fast.module = module  # keeps id(module) in the launcher's key unique
    return fast


def exact_dims(value: Any) -> bool:
    """``value`` is an int, a tuple of ints (exact types) or a checked :class:`~anywave.abi.Dims3`:
    safe as part of a fast-path key."""
    return type(value) is int or type(value) is Dims3 or (type(value) is tuple and all(type(x) is int for x in value))



# ------------------------------------------------------------------------ kernel-language launch plans

def python_launcher(parts: dict[str, Any], specs: list[tuple[Any, ...]], nargs: int, stream: int,
                    torch_dev: int | None) -> Any:
    """The generated Python launcher of a CUDA launch plan (the native one's fallback):
    ``fast(args)`` → None (launched) or :data:`~anywave.runtime.driver.MISS`. ``parts``:
    :meth:`anywave.runtime.cuda.CudaTarget.launch_parts`; ``specs``: the plan's layout
    (:class:`anywave.runtime.driver.PlanLayout`).
    Per buffer it re-checks the layout's type, dtype, device and contiguity and takes the
    address; per scalar the type and range; then the overlap rule on the address ranges,
    then the words go into the block and ``cuLaunchKernel`` runs on the stream."""
    torch = sys.modules.get("torch")
    # cuLaunchKernel through cuda.bindings: a ctypes call of the same entry with the same pre-packed
    # block measured slower on the H200 host (5.2 us against 3.8 us, bench/results/launch24_h200_7213634.json)
    raw = getattr(getattr(torch, "_C", None), "_cuda_getCurrentRawStream", None) if torch is not None else None
    ns: dict[str, Any] = {"MISS": MISS, "DA": A.Array, "T": torch.Tensor if torch is not None else None,
                          "u64": parts["u64"], "u32": parts["u32"], "kp": parts["kp"],
                          "fn": parts["fn"], "launch": parts["launch"],
                          "set_ctx": parts["set_ctx"], "ctx": parts["ctx"],
                          "fail": parts["fail"], "space": parts["space"], "shape": parts["shape"],
                          "scalar": parts["scalar"], "RAW": raw if raw is not None else A._torch_stream,
                          "f32": parts.get("f32"), "f64": parts.get("f64")}
    kinds = parts["kinds"]
    abi = {a.name: a for a in parts["args"]}
    src = ["def fast(args):", f"    if len(args) != {nargs}:", "        return MISS"]
    bufs: list[tuple[int, bool, str]] = []
    bumps: list[str] = []
    for slot, spec in enumerate(specs):
        i, name, what = spec[0], spec[1], spec[2]
        v = f"v{slot}"
        src.append(f"    {v} = args[{i}]")
        if what == "buffer":
            how = spec[5]
            if how[0] == "array":
                ns[f"S{slot}"], ns[f"D{slot}"] = how[1], how[2]
                src += [f"    if type({v}) is not DA or {v}.space is not S{slot} or {v}.dtype is not D{slot}:",
                        "        return MISS",
                        f"    p{slot} = {v}.ptr",
                        f"    n{slot} = {v}.nbytes",
                        f"    b{slot} = {v}.base"]
            elif how[0] == "torch":
                ns[f"D{slot}"] = how[1]
                grad = f" or {v}.requires_grad" if spec[4] else ""
                src += [f"    if type({v}) is not T or {v}.dtype is not D{slot}:",
                        "        return MISS",
                        "    try:",
                        f"        if {v}.get_device() != {how[2]} or not {v}.is_contiguous(){grad}:",
                        "            return MISS",
                        f"        p{slot} = {v}.data_ptr()",
                        "    except Exception:",
                        "        return MISS",
                        f"    if p{slot} & 15:",
                        "        return MISS",
                        f"    n{slot} = {v}.nbytes",
                        f"    b{slot} = 0"]
            else:
                ns[f"Q{slot}"] = spec[3]
                src += [f"    q = Q{slot}({v})", "    if q is None:", "        return MISS",
                        f"    b{slot}, p{slot}, n{slot}, _ = q"]
            bufs.append((slot, bool(spec[4]), name))
            if spec[4] and how[0] != "array":
                bumps.append(v)
            src.append(f"    u64[{slot}] = p{slot}")
        else:
            t = spec[3]
            dst = f"u32[{2 * slot}]" if kinds[slot] == 1 else f"u64[{slot}]"
            conv = spec[6]
            if conv is not None:  # a NumPy scalar / 0-d array: its exact type, then the Python number
                ns[f"K{slot}"], ns[f"C{slot}"] = conv
                src += [f"    if type({v}) is not K{slot}:", "        return MISS",
                        f"    {v} = C{slot}({v})", f"    if {v} is MISS:", "        return MISS"]
            if t.is_int:
                lo, hi = spec[4]
                word = v if lo == 0 else f"{v} & {spec[5]}"
                src += [f"    if type({v}) is not int or not {lo} <= {v} <= {hi}:", "        return MISS",
                        f"    {dst} = {word}"]
            else:
                ns[f"A{slot}"] = abi[name]
                src += [f"    if type({v}) is not float and type({v}) is not int:", "        return MISS"]
                bits = abi[name].type.bits
                fl = abi[name].type in (ScalarType.F32, ScalarType.F64)
                if fl and ns["f32"] is not None:
                    # a C cast of a finite double is IEEE round-to-nearest-even, as abi.scalar_word
                    # (tests/test_launch_plan.py checks the words); ints and NaNs take scalar()
                    # finite values that round to a finite f32 (|v| < FLT_MAX + half an ulp, the
                    # tie rounding up to 2^128); inf, NaN and overflow (refused) take scalar()
                    fdst = f"f32[{2 * slot}]" if bits == 32 else f"f64[{slot}]"
                    lim = "3.4028235677973366e38" if bits == 32 else "1.8e308"
                    src += [f"    if type({v}) is float and -{lim} < {v} < {lim}:", f"        {fdst} = {v}",
                            "    else:", f"        {dst} = scalar(A{slot}, {v})"]
                else:
                    src.append(f"    {dst} = scalar(A{slot}, {v})")
    for x in range(len(bufs)):
        for y in range(x + 1, len(bufs)):
            (i, wi, _), (j, wj, _) = bufs[x], bufs[y]
            if wi or wj:
                src += [f"    if n{i} and n{j} and b{i} == b{j} and p{i} < p{j} + n{j} and p{j} < p{i} + n{i}:",
                        "        return MISS"]
    if bumps:  # autograd sees the kernel's writes (as after torch's in-place ops)
        ns["BUMP"], ns["TT"] = A.bump_versions, ns["T"] if ns["T"] is not None else ()
        src.append(f"    BUMP([t for t in ({', '.join(bumps)},) if isinstance(t, TT)])")
    hs = f"RAW({torch_dev})" if torch_dev is not None else str(int(stream))
    g, wg = parts["grid"], parts["workgroup"]
    call = f"launch(fn, {g[0]}, {g[1]}, {g[2]}, {wg[0]}, {wg[1]}, {wg[2]}, {parts['shared']}, {hs}, kp, 0)[0]"
    # the context is made current only when the launch needs it (a thread's first launch, or
    # after another context was made current): the driver refuses a launch without it
    # (CUDA_ERROR_INVALID_CONTEXT) or with another (CUDA_ERROR_INVALID_HANDLE), and nothing
    # has run then; one retry after cuCtxSetCurrent, whose failure is reported as before
    src += [f"    r = {call}",
            "    if r:",
            "        e = set_ctx(ctx)" + ("[0]" if parts["ctx_tuple"] else ""),
            "        if e:",
            "            fail('cuCtxSetCurrent', e)",
            f"        r = {call}",
            "        if r:",
            "            fail('cuLaunchKernel', r)",
            "    space.pending = shape",
            "    return None"]
    text = "\n".join(src) + "\n"
    exec(compile(text, f"<anywave kernel launcher: {parts['shape']}>", "exec"), ns)  # noqa: S102 - our own text
    fast = ns["fast"]
    fast.source = text  # type: ignore[attr-defined]
    fast.keep = parts  # type: ignore[attr-defined]  # the block and the module stay alive with the plan
    return fast


def native_launcher(parts: dict[str, Any], specs: list[tuple[Any, ...]], nargs: int, stream: int,
                    torch_dev: int | None, guards: tuple[tuple[Any, ...], ...] | None,
                    undefined: Any) -> tuple[Any, str]:
    """The native launcher of a CUDA launch plan (:mod:`anywave.runtime.cuda_native`: the
    checks of :func:`python_launcher`, done in C, and ``cuLaunchKernel`` called directly), or
    (None, why not). ``guards``/``undefined``: the kernel's fingerprint to check per call
    (:class:`anywave.runtime.driver.PlanLayout`)."""
    from anywave.runtime import cuda_native as native

    entries = parts.get("native")
    if not isinstance(entries, dict):
        return None, str(entries or "the target gives no native driver entries")
    ok, why = native.status()
    if not ok:
        return None, why
    import builtins

    torch = sys.modules.get("torch")
    kinds = parts["kinds"]
    abi = {a.name: a for a in parts["args"]}
    slots: list[tuple[Any, ...]] = []
    bufs: list[tuple[int, bool]] = []
    bump: list[int] = []
    for slot, spec in enumerate(specs):
        i, name, what = spec[0], spec[1], spec[2]
        width = 4 if kinds[slot] == 1 else 8
        if what == "buffer":
            how, written = spec[5], bool(spec[4])
            if how[0] == "array":
                slots.append((0, i, written, A.Array, how[1], how[2], None, 0, 0, 0, 0, 8, False, False))
            elif how[0] == "torch":
                slots.append((1, i, written, torch.Tensor, how[1], None, None, int(how[2]), 0, 0, 0, 8, False, False))
            else:
                slots.append((2, i, written, None, spec[3], None, None, 0, 0, 0, 0, 8, False, False))
            bufs.append((slot, written))
            if written and how[0] != "array":
                bump.append(slot)
            continue
        t, conv = spec[3], spec[6]
        ctype, cfn = conv if conv is not None else (None, None)
        if t.is_int:
            lo, hi = spec[4]
            slots.append((3, i, False, ctype, cfn, None, None, 0, int(lo), int(hi), int(spec[5]), width, lo < 0,
                          False))
        else:
            a = abi[name]
            view = a.type in (ScalarType.F32, ScalarType.F64) and a.type.bits == 8 * width
            slots.append((4, i, False, ctype, cfn, parts["scalar"], a, 0, 0, 0, 0, width, False, view))
    pairs = tuple((x, y) for n, (x, wx) in enumerate(bufs) for (y, wy) in bufs[n + 1:] if wx or wy)
    raw = None
    if torch_dev is not None:
        raw = getattr(getattr(torch, "_C", None), "_cuda_getCurrentRawStream", None) or A._torch_stream
    desc = {"nargs": nargs, "slots": tuple(slots), "pairs": pairs, "bump": tuple(bump), "guards": guards or (),
            "launch": entries["launch"], "ctx_set": entries["ctx_set"], "fn": entries["fn"], "ctx": entries["ctx"],
            "grid": tuple(parts["grid"]), "block": tuple(parts["workgroup"]), "shared": int(parts["shared"]),
            "stream": int(stream), "stream_fn": raw, "stream_arg": torch_dev, "fail": parts["fail"],
            "space": parts["space"], "shape": parts["shape"], "miss": MISS, "bump_fn": A.bump_versions,
            "tensor_type": torch.Tensor if torch is not None else None, "builtins": builtins,
            "undefined": undefined, "keep": (parts, entries.get("keep"))}
    try:
        fast = native.make_launcher(desc)
    except Exception as e:  # noqa: BLE001 - the Python launcher is used instead
        return None, f"the native launcher refused the plan: {type(e).__name__}: {e}"
    if fast is None:
        return None, native.status()[1]
    fast.path = "native"
    fast.guarded = guards is not None
    fast.parts = parts  # what it was made from (the driver function, the geometry ...)
    return fast, ""
