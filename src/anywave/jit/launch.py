"""The kernel language's launch path: ``kernel(*args, grid=, workgroup=, target=, ...)``.

One place does, for every target, what a launch must check (issue 11 items 5, 13, 15;
issue 12): the buffer arguments' memory (:func:`anywave.runtime.arrays.describe`: NumPy,
torch, CuPy, ``__cuda_array_interface__``, DLPack, anywave arrays), their dtype, contiguity,
writability, device, alignment and overlap (spec §4.2), the kernel's workgroup rules
(``.workgroup_size`` and ``max_workgroup_size``, spec §2.1), and that global ids fit the
language's i32 ids (spec §3.3). Then it launches on the target, asynchronously when every
buffer is device memory.

The first launch of a given *argument layout* (the argument types, compile-time constants,
grid, workgroup, target, wave width, stream and check flag) does all of that and records a
:class:`CallPlan`; later launches with the same layout re-check only what can change per
call (each buffer's dtype, device and contiguity, its address range for the overlap rule,
scalar ranges) and write the argument words straight into the target's launcher. Anything a
plan does not recognise falls back to the full path, which raises the detailed error.

Each argument is checked once, here: the driver below gets them checked. The full path binds
the launch on the target (:func:`anywave.jit.targets.bind`: the driver checks the kernel, the
geometry and its device's limits, once per plan) and hands the checked values to that bound
launch, which only converts the scalars to their words; a plan calls the same bound launch after
its per-call checks, or the driver's own plan launcher (CUDA's), which does those checks itself.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from anywave.abi import dims3 as _dims3
from anywave.compiler import debugprint
from anywave.errors import LaunchError, LaunchValueError
from anywave.runtime import arrays as A
from anywave.runtime import targets as rt
from anywave.runtime.driver import MISS, PlanLayout  # MISS: a plan did not recognise its arguments
from anywave.runtime.targets import ID_LIMIT_I32, check_launch_rules

from . import capture as _capture
from .targets import bind, check_default_wave_width, default_name, drive, get_target, launch_options

_INT_RANGES: dict[str, tuple[int, int]] = {}


def env_check() -> bool | None:
    """The default of ``check=`` (:func:`anywave.runtime.driver.env_check`): True for
    ``ANYWAVE_CHECK=1``, False for ``ANYWAVE_CHECK=0`` (the opt-out), None when unset (the
    target decides: bounds-checked on the host-memory targets OpenCL and SYCL)."""
    from anywave.runtime.driver import env_check as _env_check

    return _env_check()


def _int_range(t: Any) -> tuple[int, int]:
    r = _INT_RANGES.get(t.name)
    if r is None:
        info = np.iinfo(t.np_dtype)
        r = _INT_RANGES[t.name] = (int(info.min), int(info.max))
    return r


def resolve_target(kname: str, target: str | None, mems: Sequence[tuple[str, A.Memory]],
                   module: Any = None, kernel: Any = None, workgroup: Sequence[int] | None = None) -> tuple[str, int]:
    """(target name, device ordinal) of a launch: ``target`` as given (``"cuda:1"`` style for
    a device), else the device all device-resident buffers live on, else the default target
    for ``kernel`` of ``module`` (:func:`anywave.jit.targets.default_name`; without them, the
    best available target).

    Raises:
        ArgumentError: buffers on different devices, or on a device the named target is not."""
    name, dev = (None, None)
    if target == rt.HOST:  # the best target on the host CPU that runs this kernel
        if module is None or kernel is None:
            return rt.host_names()[0], 0
        return rt.serving_name(module, kernel, host=True, workgroup=workgroup), 0
    if target is not None:
        name, _, d = str(target).partition(":")
        if d:
            try:
                dev = int(d)
            except ValueError:
                raise LaunchError(f"kernel {kname!r}: target {target!r}: write 'cuda' or 'cuda:N'") from None
    resident = [(n, m) for n, m in mems if m.kind != "host"]
    places = {(m.kind, m.device) for _, m in resident}
    if len(places) > 1:
        where = ", ".join(f"{n!r} on {_place(m)}" for n, m in resident)
        raise A.ArgumentError(f"kernel {kname!r}: buffer arguments live on different devices ({where}); a launch "
                              "runs on one device (move them with .to(...) / aw.array(..., target=...))")
    if name is None:
        if places:
            kind, d = next(iter(places))
            return kind, d
        if module is not None and kernel is not None:
            return default_name(module, kernel, workgroup), 0
        return get_target(None).name, 0
    if dev is None:
        dev = next((m.device for _, m in resident if m.kind == name), 0)
    takes = A.TARGET_MEMORY.get(name, ("host", name))
    for n, m in resident:
        if m.kind not in takes:
            raise A.ArgumentError(
                f"kernel {kname!r}: argument {n!r} lives on {_place(m)} but the launch runs on target {name!r}, "
                f"which takes {' or '.join(_kind_text(k) for k in takes)}; launch with target={m.kind!r} or move the "
                "data (tensor.cpu(), arr.numpy())")
        if m.device != dev:
            raise A.ArgumentError(f"kernel {kname!r}: argument {n!r} lives on {_place(m)} but the launch runs on "
                                  f"{name}:{dev}; use target='{m.kind}:{m.device}' or move the data to {name}:{dev}")
    return name, dev


def _place(m: A.Memory) -> str:
    return "host memory" if m.kind == "host" else f"{m.kind}:{m.device}"


def _kind_text(k: str) -> str:
    return "host memory" if k == "host" else f"{k} memory"


class CallPlan:
    """A recorded launch of one argument layout (see the module docstring). ``run(args)``
    checks each argument's type and shape against the layout (and each scalar's range, the
    overlap rule), launches through the target's bound launch (``bound``, see
    :func:`anywave.jit.targets.bind`: the driver does not check the arguments again) and returns
    the target's result, or :data:`MISS` when ``args`` do not match the layout (nothing launched).
    A target without a bound launch gets the values through its ``launch`` (which checks them
    again). Where the target's driver has its own launcher for a plan
    (:meth:`anywave.runtime.driver.Driver.plan_launcher`: CUDA's native or generated Python
    launcher, for plans whose buffers are all device memory), that launcher is the plan instead:
    it does the same per-call checks and writes the argument words straight into its own
    kernelParams block (plans are per thread, so the block is never shared)."""

    def __init__(self, kf: Any, module: Any, tgt: Any, tname: str, grid: tuple[int, int, int],
                 wg: tuple[int, int, int], specs: list[tuple[Any, ...]], options: dict[str, Any],
                 bound: Any = None) -> None:
        self.kf, self.module, self.tgt, self.tname = kf, module, tgt, tname
        self.grid, self.wg = grid, wg
        self.specs = specs
        self.options = options
        self.bound = bound
        self.names = [s[1] for s in specs]
        bufs = [s for s in specs if s[2] == "buffer"]
        self.alias = len(bufs) >= 2 and any(s[4] for s in bufs)
        self.written = [bool(s[4]) if s[2] == "buffer" else False for s in specs]
        # written buffers that may be torch tensors: their version counters are bumped per launch
        # (none while torch is not loaded: a tensor argument, once it is, has a type no plan made
        # before saw, so it finds a plan of its own)
        torch = sys.modules.get("torch")
        self.tensor = torch.Tensor if torch is not None else None
        self.bump = [s[0] for s in specs if s[2] == "buffer" and s[4] and s[5][0] in ("torch", "torch_cpu", "generic")
                     ] if torch is not None else []

    def run(self, args: Sequence[Any]) -> Any:
        vals: list[Any] = []
        ranges: list[tuple[int, int, int, int]] = []
        for spec in self.specs:
            v = args[spec[0]]
            if spec[2] == "buffer":
                q = spec[3](v)
                if q is None:
                    return MISS
                base, start, nbytes, val = q
                if self.alias and nbytes:
                    ranges.append((base, start, start + nbytes, len(vals)))
                vals.append(val)
            else:
                t = spec[3]
                tv = type(v)
                conv = spec[6]
                if conv is not None:  # a NumPy scalar or 0-d array of the layout's exact type
                    if tv is not conv[0]:
                        return MISS
                    v = conv[1](v)
                    if v is MISS:
                        return MISS
                    tv = type(v)
                if t.is_int:
                    lo, hi = spec[4]
                    if tv is not int or not lo <= v <= hi:
                        return MISS
                    vals.append(v)
                else:
                    if tv is float:
                        vals.append(v)
                    elif tv is int and -_EXACT_INT <= v <= _EXACT_INT:
                        vals.append(float(v))  # exact: one rounding to the parameter's type, later
                    else:
                        return MISS  # larger ints: the full path rounds them once (or names the overflow)
        if ranges:
            written = self.written
            for a in range(len(ranges)):
                ba, sa, ea, ia = ranges[a]
                for b in range(a + 1, len(ranges)):
                    bb, sb, eb, ib = ranges[b]
                    if ba == bb and sa < eb and sb < ea and (written[ia] or written[ib]):
                        return MISS  # the full path raises the overlap error
        if self.bump:
            ts = [args[i] for i in self.bump if isinstance(args[i], self.tensor)]
            if ts:
                A.bump_versions(ts)
        if self.bound is not None:
            return self.bound(vals)
        return self.tgt.launch(self.module, self.kf.name, self.grid, self.wg, dict(zip(self.names, vals, strict=True)),
                               **self.options)


#: the largest magnitude up to which every int is a float exactly (2^53)
_EXACT_INT = 1 << 53


def _zero_d(dt: np.dtype, to: Any) -> Any:
    def conv(v: Any) -> Any:
        if v.shape or v.dtype is not dt:
            return MISS
        return to(v[()])

    return conv


def scalar_conversion(v: Any, t: Any) -> tuple[type, Any] | None:
    """How a launch plan turns scalar argument value ``v`` (laid out as this call's value)
    into the Python number the ABI word is made from, for a scalar parameter of type ``t``:
    None for a Python ``int``/``float`` (taken as they are), else ``(exact type, converter)``
    for a NumPy scalar of any dtype or a 0-d NumPy array, so that every scalar kind takes the
    plan's path (issue 24 item 2: before, a ``np.float32`` missed the plan on every call and
    paid the full launch path, ~1.4 ms on the H200). The converter returns :data:`MISS` for a
    value whose layout differs (a 0-d array of another dtype, an array that is not 0-d) and
    the value otherwise; a value the full path would refuse (a NumPy bool, a non-integer float
    for an integer parameter) gets no converter, so it keeps the full path and its error."""
    tv = type(v)
    if tv is int or tv is float:
        return None
    if isinstance(v, np.ndarray):
        if v.ndim != 0:
            return None
        x = v[()]
        if isinstance(x, np.bool_) or not isinstance(x, (np.integer, np.floating)):
            return None
        to = int if isinstance(x, np.integer) else (_finite_float if not t.is_int and v.dtype.itemsize <= 8 else None)
        return (np.ndarray, _zero_d(v.dtype, to)) if to is not None else None
    if isinstance(v, np.integer):  # as an int also for a float parameter: converted once, exactly
        return (tv, int)  # the builtins themselves: one C call per launch, exact for NumPy numbers
    if isinstance(v, np.floating) and not t.is_int and v.dtype.itemsize <= 8:
        # exact for float16/32/64; a NaN takes the full path, which keeps a NaN of the
        # parameter's own type bit for bit (abi.scalar_word). np.longdouble: no converter (the full
        # path converts it exactly, rounded once)
        return (tv, _finite_float)
    return None


def _finite_float(v: Any) -> Any:
    f = float(v)
    return f if f == f else MISS


def _guards_of(kf: Any, module: Any) -> tuple[tuple[Any, ...], ...] | None:
    """The dependencies of the fingerprint under which ``module`` was compiled (what
    :meth:`~anywave.compiler.fingerprint.Fingerprint.still_valid` re-checks), for a native
    launcher to check per call; None when there is no exact fingerprint (an uncacheable
    kernel: its plans are re-validated by the Python path on every call)."""
    if getattr(kf, "_warned_unkeyable", False):
        return None
    for fp, _, m in list(getattr(kf, "_memo", {}).values()):
        if m is module:
            if not fp.exact:
                return None
            return tuple((d[0], d[1], d[2], tuple(d[3]), d[4]) for d in fp.deps)
    return None


# ------------------------------------------------------------------ per-kind quick checks

def _quick_numpy(dt: np.dtype, written: bool) -> Any:
    def q(v: Any) -> Any:
        if type(v) is not np.ndarray or v.dtype is not dt:
            return None
        f = v.flags
        if not f.c_contiguous or (written and not f.writeable):
            return None
        return 0, v.__array_interface__["data"][0] if v.size else 0, v.nbytes, v

    return q


def _quick_array(space: Any, dt: np.dtype) -> Any:
    host = space.kind == "host"

    def q(v: Any) -> Any:
        if type(v) is not A.Array or v.space is not space or v.dtype is not dt:
            return None
        return v.base, v.ptr + v.offset, v.nbytes, (v._host_view() if host else v)

    return q


def _quick_torch_cuda(tcls: type, tdt: Any, dev: int, written: bool) -> Any:
    # (any tensor these tests raise on, a sparse CSR one for instance, goes to the full path,
    # which says why it cannot be a buffer)
    def q(v: Any) -> Any:
        if type(v) is not tcls or v.dtype is not tdt:
            return None
        try:
            if v.get_device() != dev or not v.is_contiguous():
                return None
            if written and v.requires_grad:
                return None  # the full path applies torch's in-place rule
            p = v.data_ptr()
        except Exception:  # noqa: BLE001
            return None
        if p & 15:
            return None
        return 0, p, v.nbytes, v

    return q


def _quick_torch_cpu(tcls: type, tdt: Any, dt: np.dtype, written: bool) -> Any:
    # the host view as A.describe makes it (arrays._torch_host_view), by the shorter route
    # .numpy() where NumPy has the dtype itself (not bf16); a tensor .numpy() refuses (a
    # conjugate or negative view, a sparse or MKL-DNN layout) goes to the full path
    native = dt.kind in "biuf" and dt.name != "bfloat16"

    def q(v: Any) -> Any:
        if type(v) is not tcls or v.dtype is not tdt:
            return None
        try:
            if not v.is_cpu or not v.is_contiguous():
                return None
            if written and v.requires_grad:
                return None  # the full path applies torch's in-place rule
            view = v.detach().numpy() if native else A._torch_host_view(v.detach(), dt)
            return 0, v.data_ptr(), view.nbytes, view
        except Exception:  # noqa: BLE001
            return None

    return q


def _quick_generic(kf: Any, p: Any, tname: str, tdev: int) -> Any:
    def q(v: Any) -> Any:
        try:
            m = check_buffer(kf, p, v, tname, tdev)
        except Exception:  # noqa: BLE001 - the full path raises it with context
            return None
        return m.base, m.start, m.nbytes, m.value

    return q


def check_buffer(kf: Any, p: Any, v: Any, tname: str, tdev: int, m: A.Memory | None = None) -> A.Memory:
    """The checked :class:`Memory` of buffer parameter ``p`` = ``v`` for a launch on
    ``tname``:``tdev``.

    Raises:
        LaunchError (a TypeError): wrong kind of object, dtype, non-contiguous, read-only memory
        for a written buffer, a misaligned device address, or memory of another device."""
    bt = p.ann
    if m is None:  # (a DLPack capsule can be read once: callers that described it pass m)
        try:
            m = A.describe(v, f"kernel {kf.name!r}: argument {p.name!r}")
        except A.ArgumentError as e:
            raise LaunchError(f"{e} (it is {bt!r})") from None
    where = f"kernel {kf.name!r}: argument {p.name!r} is {bt!r}"
    want = np.dtype(bt.elem.np_dtype)
    if m.dtype is None or m.dtype != want:
        got = m.dtype if m.dtype is not None else getattr(v, "dtype", "an unknown dtype")
        raise LaunchError(f"{where}: expected dtype {want}, got {got} (convert with .astype({want}) / .to(...))")
    if not m.contiguous:
        raise LaunchError(f"{where} and must be C-contiguous; got a strided view (use np.ascontiguousarray / "
                          ".contiguous())")
    if bt.access & 2 and m.readonly:
        raise LaunchError(f"{where} and is written by the kernel, but the memory is read-only")
    if bt.access & 2:
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(v, torch.Tensor):
            bad = A.torch_write_problem(v)
            if bad is not None:
                raise LaunchError(f"{where} and is written by the kernel, but {bad}")
    if m.kind != "host" and m.start % 16:
        raise LaunchError(f"{where}: device address {m.start:#x} is not 16-byte aligned (spec §4.2); pass a "
                          "freshly allocated or contiguous copy")
    if m.kind != "host":
        takes = A.TARGET_MEMORY.get(tname, ("host", tname))
        if m.kind not in takes or m.device != tdev:
            raise LaunchError(f"{where}: it lives on {_place(m)}, the launch runs on {tname}:{tdev}")
    if m.kind == "host" and m.value is None:
        raise LaunchError(f"{where}: the host memory of this {type(v).__name__} cannot be used")
    return m


def quick_for(kf: Any, p: Any, v: Any, m: A.Memory, tname: str, tdev: int) -> Any:
    """The per-call check of buffer ``p`` for arguments laid out like ``v`` (see
    :class:`CallPlan`): a fast one for NumPy arrays, anywave arrays and CUDA tensors."""
    written = bool(p.ann.access & 2)
    if type(v) is np.ndarray:
        return _quick_numpy(v.dtype, written), ("numpy",)
    if type(v) is A.Array:
        return _quick_array(v.space, v.dtype), ("array", v.space, v.dtype)
    torch = sys.modules.get("torch")
    if torch is not None and type(v) is torch.Tensor and m.kind == "cuda":
        return _quick_torch_cuda(torch.Tensor, v.dtype, m.device, written), ("torch", v.dtype, m.device)
    if torch is not None and type(v) is torch.Tensor and m.kind == "host" and m.dtype is not None and v.is_cpu:
        return _quick_torch_cpu(torch.Tensor, v.dtype, m.dtype, written), ("torch_cpu", v.dtype)
    return _quick_generic(kf, p, tname, tdev), ("generic",)


def launch(kf: Any, args: Sequence[Any], kwargs: Mapping[str, Any], grid: Any, workgroup: Any, target: Any,
           wave_width: Any, check: Any, stream: Any, key: Any) -> Any:
    """The full launch path of :class:`anywave.jit.kernel.KernelFunction` (records a plan under ``key``)."""
    if grid is None:
        raise LaunchError(f"kernel {kf.name!r}: give grid= (workgroups per dimension)")
    workgroup_arg = workgroup
    if workgroup is None:
        workgroup = kf.workgroup
        if workgroup is None:
            raise LaunchError(f"kernel {kf.name!r}: give workgroup= (threads per workgroup)")
    g = _dims3(grid, "grid")
    wg = _dims3(workgroup, "workgroup")
    check_arg = check
    check = env_check() if check is None else bool(check)  # None: the target's default
    bound = kf._bind(args, kwargs)
    module = kf.compile(**{p.name: bound[p.name] for p in kf.params if p.kind == "const" and p.name in bound})
    # the parameters with the kernel's type parameters (if any) replaced by their dtypes
    params = kf.params_for(kf._consts_from(bound)) if kf.type_params else kf.params
    k = module.kernel(kf.name)
    try:
        check_launch_rules(k, g, wg, id_limit=ID_LIMIT_I32, id_type="i32 (aw.global_id)")
    except LaunchValueError:
        raise
    except ValueError as e:
        raise LaunchValueError(str(e)) from None
    # buffers first (they may choose the target), then scalars
    mems: list[tuple[str, A.Memory]] = []
    for p in params:
        if p.kind == "buffer":
            try:
                m = A.describe(bound[p.name], f"kernel {kf.name!r}: argument {p.name!r}")
            except A.ArgumentError as e:
                raise LaunchError(f"{e} (it is {p.ann!r})") from None
            mems.append((p.name, m))
    try:
        tname, tdev = resolve_target(kf.name, target, mems, module, k, wg)
    except A.ArgumentError as e:
        raise LaunchError(str(e)) from None
    values: list[Any] = []
    checked: dict[str, A.Memory] = {}
    described = dict(mems)
    for p in params:
        if p.kind == "const":
            continue
        if p.kind == "buffer":
            m = check_buffer(kf, p, bound[p.name], tname, tdev, described[p.name])
            checked[p.name] = m
            values.append(m.value)
        else:
            values.append(kf._check_arg(p, bound[p.name]))
    try:
        A.check_aliasing([(p.name, checked[p.name], bool(p.ann.access & 2)) for p in params
                          if p.kind == "buffer"], kf.name)
    except A.ArgumentError as e:
        raise LaunchError(str(e)) from None
    cap = _capture.current() if _capture.ACTIVE else None
    if cap is not None and (tname != "cuda" or not dev_only_of(checked) or check):
        why = (f"it runs on target {tname!r}" if tname != "cuda" else
               "check=True waits for the device" if check else
               "an argument is host memory, whose copy would run now, not at replay")
        raise LaunchError(f"kernel {kf.name!r}: cannot be recorded inside aw.graph: {why}; pass device arrays "
                          "(aw.array(..., target='cuda'), CUDA tensors) to launches inside the block")
    wrapper = get_target(tname)
    tgt = wrapper.instance(wave_width, tdev or None)
    if wave_width is None:  # the default-W rule (spec §2.4): never a silently different W
        check_default_wave_width(tname, module, k, tgt.info.wave_width)
    dev_only = dev_only_of(checked)
    options: dict[str, Any] = {}
    cuda_stream: Any = None
    torch_dev: int | None = None
    if getattr(tgt, "streams", False):  # a driver with streams (cuda): its handle of the launch's stream
        if stream is not None:
            cuda_stream = tgt.stream_handle(stream)
        else:
            producer = next((m.stream for m in checked.values() if m.stream is not None), None)
            torch = sys.modules.get("torch")
            if torch is not None and any(type(bound[n]) is torch.Tensor and m.kind == "cuda"
                                         for n, m in checked.items()):
                torch_dev = tdev
            cuda_stream = producer if producer is not None else 0
    else:
        cuda_stream = stream  # (refused by launch_options when given)
    options = launch_options(tgt, tname, f"kernel {kf.name!r}", check=check, stream=cuda_stream, sync=not dev_only)
    names = [a.name for a in k.args]
    if debugprint.has_prints(k):  # aw.print: a fresh host buffer each launch (drive), read after it: no plan
        names.pop()
        key = None
    # the driver's checks of the kernel, geometry and device (once per plan); the arguments,
    # checked above, go to it as they are
    blaunch = bind(tgt, module, k, g, wg, options)
    torch = sys.modules.get("torch")
    if torch is not None:
        written = [bound[p.name] for p in params if p.kind == "buffer" and p.ann.access & 2
                   and isinstance(bound[p.name], torch.Tensor)]
        if written:
            A.bump_versions(written)  # autograd sees the write, as after torch's in-place ops
    result = drive(tgt, module, k, g, wg, dict(zip(names, values, strict=True)), options, blaunch)
    if dev_only and tname != "emulator" and tname in A._SPACE_FACTORIES:
        A.mark_used(A.memory_space(f"{tname}:{tdev}" if tdev else tname))
    if key is not None and len(kf._calls) < 256:
        plan = kf._calls[key] = _make_plan(kf, module, tgt, tname, tdev, g, wg, bound, checked, options, dev_only,
                                           check, cuda_stream, torch_dev, args, blaunch, params)
        if (getattr(plan, "guarded", False) and not kwargs and kf._const_pos == () and cap is None
                and not _capture.ACTIVE):
            kf._fast = ((grid, workgroup_arg, target, wave_width, check_arg, stream), threading.get_ident(), plan)
    return result


def dev_only_of(checked: Mapping[str, A.Memory]) -> bool:
    """Whether every buffer of a launch is device memory (the launch may then be asynchronous)."""
    return all(m.kind != "host" for m in checked.values())


def _make_plan(kf: Any, module: Any, tgt: Any, tname: str, tdev: int, g: tuple[int, int, int],
               wg: tuple[int, int, int], bound: Mapping[str, Any], checked: Mapping[str, A.Memory],
               options: dict[str, Any], dev_only: bool, check: bool, stream: Any, torch_dev: int | None,
               args: Sequence[Any], blaunch: Any = None, params: Sequence[Any] | None = None) -> Any:
    params = kf.params if params is None else params
    pos = {p.name: i for i, p in enumerate(params)}
    specs: list[tuple[Any, ...]] = []
    for p in params:
        if p.kind == "const":
            continue
        i = pos[p.name]
        if i >= len(args):
            return None  # given by keyword: the full path each time
        if p.kind == "buffer":
            fn, how = quick_for(kf, p, bound[p.name], checked[p.name], tname, tdev)
            specs.append((i, p.name, "buffer", fn, bool(p.ann.access & 2), how))
        else:
            t = p.ann
            conv = scalar_conversion(bound[p.name], t)
            if t.is_int:
                lo, hi = _int_range(t)
                specs.append((i, p.name, "scalar", t, (lo, hi), (1 << t.bits) - 1, conv))
            else:
                specs.append((i, p.name, "scalar", t, None, None, conv))
    hook = getattr(tgt, "plan_launcher", None)  # the driver's own launcher (anywave.runtime.driver.Driver)
    if hook is not None and dev_only and not check:
        from anywave.compiler.fingerprint import UNDEFINED

        layout = PlanLayout(specs, len(args), int(stream or 0), torch_dev, _guards_of(kf, module), UNDEFINED)
        fast = hook(module, kf.name, g, wg, layout)
        if fast is not None:
            return fast
    plan = CallPlan(kf, module, tgt, tname, g, wg, specs, options, blaunch)
    return plan.run
