"""A user's ``@aw.kernel`` as a PyTorch operator: :func:`custom_op` (issue 12).

    import anywave as aw, torch
    from anywave.torch import custom_op

    @aw.kernel
    def scale_add(x: aw.In[aw.f32], y: aw.In[aw.f32], out: aw.Out[aw.f32], a: aw.f32, n: aw.i32):
        i = aw.global_id(0)
        if i < n:
            out[i] = a * x[i] + y[i]

    op = custom_op("mylib::scale_add", scale_add,
                   out_shape=lambda x, **_: x.shape,        # shape of `out` from the inputs
                   scalars={"n": lambda x, **_: x.numel()})  # derived, not an op input
    z = op(x, y, 2.0)            # == torch.ops.mylib.scale_add(x, y, 2.0)

What it builds, on ``torch.library`` (PyTorch's own operator registration: ``Library.define``
and ``Library.impl`` for the CPU and CUDA keys, ``register_fake``, ``register_autograd``):

* the schema from the kernel's ABI: op inputs are the kernel's ``In``/``Buffer`` parameters
  (``Tensor``; ``Buffer`` ones are declared mutated, ``Tensor(a!)``), its scalar parameters
  (``int``/``float``) and its compile-time constants without a fixed value (``bool``/``int``/
  ``float``/``str``, defaults kept), in the kernel's order, except those given by ``scalars=``,
  ``constants=`` or ``buffers=``; the outputs are its ``Out`` parameters (``Tensor`` each);
* the real implementation: outputs allocated with ``out_shape`` and the ABI's dtype on the
  inputs' device, non-contiguous inputs made contiguous, then the kernel launched on the
  tensors' memory (zero-copy): CUDA tensors on the ``cuda`` target of their device, on
  PyTorch's current stream (asynchronous, like any PyTorch kernel); CPU tensors on the CPU
  target chosen with :func:`anywave.torch.ops.set_cpu_target` (default ``"host"``: the best
  target on the host CPU for each kernel, the native cpu target where a C compiler is present;
  W = 32), or ``cpu_target=``/``wave_width=`` given here;
* a fake (meta) implementation from the same shape rule and ABI dtypes, so it traces under
  ``torch.compile(fullgraph=True)`` without graph breaks and passes ``torch.library.opcheck``;
* autograd when ``backward=`` is given (``torch.library.register_autograd`` semantics: a
  Python function of ``(ctx, *grads)``, usually calling other anywave ops, with an optional
  ``setup_context(ctx, inputs, output)``); without it, a call whose tensor input requires grad
  is refused (CustomOpError) rather than giving no gradient.

Rules (``out_shape``, ``grid``, ``scalars``, ``buffers``, ``validate``) are called with every
op input by keyword (tensors and numbers), so write them as ``lambda x, **_: ...``; ``grid``
and ``buffers`` also see the outputs.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from anywave.errors import WaveError

__all__ = ["CustomOpError", "custom_op"]


class CustomOpError(WaveError, ValueError):
    """``custom_op`` cannot build an operator from the kernel as asked (the message says
    which parameter and why), or an input does not fit the op."""


_TORCH_DTYPES = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16,
                 "i8": torch.int8, "i16": torch.int16, "i32": torch.int32, "i64": torch.int64, "u8": torch.uint8,
                 "u16": torch.uint16, "u32": torch.uint32, "u64": torch.uint64}


def _schema_type(v: Any) -> str:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "float"
    if isinstance(v, str):
        return "str"
    raise CustomOpError(f"a compile-time constant default {v!r} has no torch schema type (bool, int, float, str)")


def _default_text(v: Any) -> str:
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, str):
        return repr(v).replace("'", '"')
    return repr(v)


def custom_op(name: str, kernel: Any, *, out_shape: Callable[..., Any] | Mapping[str, Callable[..., Any]] | None = None,
              scalars: Mapping[str, Callable[..., Any]] | None = None, constants: Mapping[str, Any] | None = None,
              buffers: Mapping[str, Callable[..., Any]] | None = None, grid: Callable[..., Any] | None = None,
              workgroup: int | Sequence[int] = 64, validate: Callable[..., None] | None = None,
              backward: Callable[..., Any] | None = None, setup_context: Callable[..., None] | None = None,
              cpu_target: str | None = None, wave_width: int | None = None,
              arg_names: Mapping[str, str] | None = None,
              fast_path: Callable[[dict[str, Any], str, int | None], bool] | None = None) -> Any:
    """Register ``kernel`` (an ``@aw.kernel``) as the PyTorch op ``name`` (``"namespace::op"``)
    and return it: the ``torch._ops.OpOverload`` ``torch.ops.namespace.op.default`` (callable;
    what ``torch.library.opcheck`` and ``torch.compile`` take), with attributes ``kernel``,
    ``schema``, ``library`` (the ``torch.library.Library`` holding the registrations) and the
    methods ``register_fake(fn)`` / ``register_autograd(backward, setup_context=None)`` of a
    ``torch.library.CustomOpDef``.
    See the module docstring for the schema and the semantics.

    Args:
        out_shape: shape rule of the outputs: a callable (one output) or a mapping output
            name → callable, called with the op inputs by keyword; returns a shape.
        scalars: kernel scalars derived from the inputs (name → rule), not op inputs.
        constants: fixed values of compile-time constants (not op inputs).
        buffers: kernel buffers derived from inputs and outputs (name → rule returning a
            tensor on the same device), not op inputs (a never-read dummy, a workspace).
        grid: launch grid rule (inputs and outputs by keyword) → int or tuple; default one
            thread per element of the first output (or first input):
            ``ceil(numel / threads per workgroup)``.
        workgroup: threads per workgroup (int or tuple; default 64, a multiple of every W).
        validate: called with the inputs before each launch (and on fake tensors when
            tracing, so it must read only metadata: shape, dtype, device — never
            ``data_ptr()`` or values); raise a clear error there for inputs the kernel cannot take.
        backward: autograd formula, as ``torch.library.register_autograd``. Without it the
            op has no autograd formula: a call with an input that requires grad (grad mode
            on) raises CustomOpError.
        setup_context: saves what ``backward`` needs, as ``torch.library.register_autograd``.
        cpu_target: the target CPU tensors run on (default: the choice of
            :func:`anywave.torch.ops.set_cpu_target`).
        wave_width: the W CPU tensors run at (default: as ``cpu_target``).
        arg_names: op input names for kernel parameters (kernel name → op name) where they
            should differ; rules and ``validate`` see the op names.
        fast_path: ``fast_path(args, target, wave_width) -> bool``, tried before each launch:
            ``args`` maps every kernel parameter name to its value (inputs made contiguous, the
            outputs allocated, scalars and constants filled in); it may do the work itself
            (fill the outputs, e.g. with a faster kernel computing the same bits) and return
            True, or return False for the kernel's own launch. ``target``/``wave_width`` are
            those the kernel would be launched with.

    Raises:
        CustomOpError: a parameter that cannot become part of a schema, a rule for a name
            the kernel does not have, no shape rule for an output, or a name that is not
            ``namespace::op``. RuntimeError (PyTorch's): ``name`` is already defined.
    """
    scalars, constants, buffers = dict(scalars or {}), dict(constants or {}), dict(buffers or {})
    rename = dict(arg_names or {})
    params = kernel.params
    pnames = {p.name for p in params}
    for what, names in (("scalars", scalars), ("constants", constants), ("buffers", buffers),
                        ("arg_names", rename)):
        unknown = [n for n in names if n not in pnames]
        if unknown:
            raise CustomOpError(f"custom_op {name!r}: {what}= names {unknown}, which kernel {kernel.name!r} does not "
                                f"have; its parameters: {kernel.signature()}")
    outs = [p for p in params if p.kind == "buffer" and p.ann.access == 2 and p.name not in buffers]
    if isinstance(out_shape, Mapping):
        shape_rules = dict(out_shape)
    elif out_shape is not None:
        if len(outs) != 1:
            raise CustomOpError(f"custom_op {name!r}: kernel {kernel.name!r} has {len(outs)} outputs "
                                f"{[p.name for p in outs]}; give out_shape as a mapping name -> rule")
        shape_rules = {outs[0].name: out_shape}
    else:
        shape_rules = {}
    missing = [p.name for p in outs if p.name not in shape_rules]
    if missing:
        raise CustomOpError(f"custom_op {name!r}: no out_shape rule for the outputs {missing} of kernel "
                            f"{kernel.name!r} (out_shape=lambda x, **_: x.shape, say)")
    inputs: list[Any] = []
    schema_args: list[str] = []
    mutated: list[str] = []
    for p in params:
        if p.name in scalars or p.name in constants or p.name in buffers or any(p is o for o in outs):
            continue
        on = rename.get(p.name, p.name)
        if p.kind == "buffer":
            if p.ann.access & 2:
                schema_args.append(f"Tensor(a{len(mutated)}!) {on}")
                mutated.append(on)
            else:
                schema_args.append(f"Tensor {on}")
        elif p.kind == "scalar":
            schema_args.append(f"{'int' if p.ann.is_int else 'float'} {on}")
        else:
            if p.default is inspect.Parameter.empty:
                py = getattr(p.ann, "py", None)
                tname = {bool: "bool", int: "int", float: "float", str: "str"}.get(py)
                if tname is None:
                    raise CustomOpError(f"custom_op {name!r}: give constant {p.name!r} of kernel {kernel.name!r} a "
                                        "default or a value in constants= (its type has no torch schema type)")
                schema_args.append(f"{tname} {on}")
            else:
                schema_args.append(f"{_schema_type(p.default)} {on}={_default_text(p.default)}")
        inputs.append(p)
    ret = "()" if not outs else ("Tensor" if len(outs) == 1 else "(" + ", ".join("Tensor" for _ in outs) + ")")
    schema = f"({', '.join(schema_args)}) -> {ret}"
    in_names = [rename.get(p.name, p.name) for p in inputs]
    out_dtypes = {p.name: _TORCH_DTYPES[p.ann.elem.name] for p in outs}
    wg = (int(workgroup),) if isinstance(workgroup, int) else tuple(int(x) for x in workgroup)
    threads = 1
    for x in wg:
        threads *= x
    defaults = {rename.get(p.name, p.name): p.default for p in inputs
                if p.kind == "const" and p.default is not inspect.Parameter.empty}

    def named(args: Sequence[Any]) -> dict[str, Any]:
        d = dict(defaults)
        d.update(zip(in_names, args, strict=False))
        return d

    buffer_inputs = [on for p, on in zip(inputs, in_names, strict=True) if p.kind == "buffer"]

    def device_of(kw: Mapping[str, Any]) -> torch.device:
        # the device of the tensor arguments (CPU when there is none); one loop, no dict: it runs per call
        first = None
        for n in buffer_inputs:
            v = kw.get(n)
            if isinstance(v, torch.Tensor):
                if first is None:
                    first = v.device
                elif v.device != first:
                    where = ", ".join(f"{k} on {t.device}" for k, t in kw.items() if isinstance(t, torch.Tensor))
                    raise CustomOpError(f"{name}: all tensors must be on one device; got {where}")
        return _CPU if first is None else first

    # per-call work is kept to what changes per call (the eager host path of every op, issues 14
    # and 24): names, rules, keys and launch targets are resolved here once; device types are
    # read as the tensors' is_cuda/is_cpu flags (torch.device.type builds a string per read)
    out_rules = [(p.name, shape_rules[p.name], out_dtypes[p.name]) for p in outs]
    out_names = [p.name for p in outs]
    one_out = out_names[0] if len(out_names) == 1 else None
    value_keys = [rename.get(p.name, p.name) for p in params]
    kernel_names = [p.name for p in params]
    buffer_rules = list(buffers.items())
    scalar_rules = list(scalars.items())
    fixed = dict(constants)
    cuda_targets: dict[int | None, str] = {}
    size_types = (torch.Size, tuple)
    tensor_type = torch.Tensor
    like_input = buffer_inputs[0] if buffer_inputs else None

    def cuda_target(dev: torch.device) -> str:
        t = cuda_targets.get(dev.index)
        if t is None:
            t = cuda_targets[dev.index] = f"cuda:{dev.index if dev.index is not None else torch.cuda.current_device()}"
        return t

    def impl(*args: Any) -> Any:
        kw = named(args)
        if validate is not None:
            validate(**kw)
        dev = device_of(kw)
        on_cuda = False
        for n in buffer_inputs:
            v = kw.get(n)
            if isinstance(v, torch.Tensor):
                on_cuda = v.is_cuda
                if not on_cuda and not v.is_cpu:
                    raise CustomOpError(f"{name}: runs on CPU or CUDA tensors, got device {dev}")
                break
        for n in buffer_inputs:
            v = kw.get(n)
            # the kernels index row-major memory, and device buffers must be 16-byte aligned (spec §4.2)
            if isinstance(v, torch.Tensor) and (not v.is_contiguous() or (on_cuda and v.data_ptr() & 15)):
                if n in mutated:
                    raise CustomOpError(f"{name}: {n} is updated in place and must be contiguous (and 16-byte "
                                        "aligned on CUDA)")
                kw[n] = v.contiguous() if not v.is_contiguous() else v.clone()
        if one_out is not None:  # (the shape rules see the inputs only)
            n, rule, dt = out_rules[0]
            shape = rule(**kw)
            src = kw.get(like_input) if like_input is not None else None
            if type(src) is tensor_type and type(shape) in size_types and src.dtype is dt and shape == src.shape:
                # the output is shaped as the (now contiguous) first input: empty_like skips the
                # shape and device parsing of torch.empty (about half its host time)
                kw[n] = torch.empty_like(src)
            else:
                kw[n] = torch.empty(shape if type(shape) in size_types else tuple(shape), dtype=dt, device=dev)
        elif out_rules:
            kw.update({n: torch.empty(tuple(rule(**kw)), dtype=dt, device=dev) for n, rule, dt in out_rules})
        full = kw  # (a fresh dict of this call)
        for n, rule in buffer_rules:
            full[n] = rule(**full)
        for n, rule in scalar_rules:
            full[n] = rule(**full)
        if fixed:
            full.update(fixed)
        first = full[out_names[0]] if out_names else None
        if first is None:
            first = next((v for v in full.values() if isinstance(v, torch.Tensor)), None)
        if grid is not None:
            g = grid(**full)
            gt = (int(g),) if isinstance(g, int) else tuple(int(x) for x in g)
        else:
            gt = ((first.numel() + threads - 1) // threads if first is not None else 1,)
        if all(x > 0 for x in gt):
            if on_cuda:
                target, W = cuda_target(dev), None
            else:
                target, W = _cpu_choice(cpu_target, wave_width)
            values = [full[k] for k in value_keys]
            if fast_path is None or not fast_path(dict(zip(kernel_names, values, strict=True)), target, W):
                # every parameter positionally, constants included: the launch plan cache applies
                kernel(*values, grid=gt, workgroup=wg, target=target, wave_width=W)
        if one_out is not None:
            return full[one_out]
        if not out_names:
            return None
        return tuple(full[n] for n in out_names)

    ns, sep, opname = name.partition("::")
    if not sep or not ns.isidentifier() or not opname.isidentifier():
        raise CustomOpError(f"custom_op name {name!r}: write 'namespace::op' (two Python identifiers)")
    # Library.define + impl (issue 24 item 4): the dispatcher reaches `backend` from C++; the
    # torch.library.custom_op wrapper put a Python autograd kernel in front of every call (~30 us
    # of the 46 us the op cost on the H200). Without backward= there is no autograd kernel at all,
    # so a call that would need one is refused here (custom_op raised at backward instead).
    lib = torch.library.Library(ns, "FRAGMENT")
    lib.define(f"{opname}{schema}")
    tensor_pos = [i for i, p in enumerate(inputs) if p.kind == "buffer"]
    grad_on = torch.is_grad_enabled
    has_autograd = [backward is not None]

    def backend(*args: Any) -> Any:
        if not has_autograd[0]:
            for i in tensor_pos:
                if i < len(args) and getattr(args[i], "requires_grad", False) and grad_on():
                    raise CustomOpError(f"{name}: input {in_names[i]!r} requires grad, but the op was made without "
                                        "backward= (no autograd formula); detach it, run under torch.no_grad(), or "
                                        "give custom_op a backward=")
        return impl(*args)

    lib.impl(opname, backend, "CPU")
    lib.impl(opname, backend, "CUDA")

    def fake(*args: Any) -> Any:
        kw = named(args)
        if validate is not None:
            validate(**kw)
        dev = device_of(kw)
        res = [torch.empty(tuple(shape_rules[p.name](**kw)), dtype=out_dtypes[p.name], device=dev) for p in outs]
        if not res:
            return None
        return res[0] if len(res) == 1 else tuple(res)

    def register_fake(fn: Callable[..., Any]) -> Callable[..., Any]:
        """Replace the fake implementation (as ``CustomOpDef.register_fake``); usable as a decorator."""
        torch.library.register_fake(name, fn, lib=lib)
        return fn

    def register_autograd(bwd: Callable[..., Any], *, setup_context: Callable[..., None] | None = None) -> None:
        """Give the op its autograd formula (as ``CustomOpDef.register_autograd``)."""
        torch.library.register_autograd(name, bwd, setup_context=setup_context, lib=lib)
        has_autograd[0] = True

    torch.library.register_fake(name, fake, lib=lib)
    if backward is not None:
        register_autograd(backward, setup_context=setup_context)
    op = getattr(getattr(torch.ops, ns), opname).default
    op.register_fake = register_fake  # type: ignore[attr-defined]
    op.register_autograd = register_autograd  # type: ignore[attr-defined]
    _LIBRARIES.append(lib)  # the registrations live as long as the Library object
    op.kernel = kernel  # type: ignore[attr-defined]
    op.schema = schema  # type: ignore[attr-defined]
    op.library = lib  # type: ignore[attr-defined]
    return op


_CPU = torch.device("cpu")

#: every Library made by custom_op (a Library's registrations end when it is freed)
_LIBRARIES: list[Any] = []


#: the target CPU tensors run on: (registry name, factory options), set by
#: :func:`anywave.torch.ops.set_cpu_target` (held here, below the ops that read it)
#: (default ``"host"``: per kernel, the best target on the host CPU -- the cpu target, then
#: OpenCL/SYCL/Vulkan on the CPU, then the emulator, :func:`anywave.runtime.targets.serving_name`)
CPU_CHOICE: list[tuple[str, tuple[tuple[str, Any], ...]]] = [("host", ())]


def _cpu_choice(cpu_target: str | None, wave_width: int | None) -> tuple[str, int | None]:
    if cpu_target is not None:
        return cpu_target, wave_width
    name, opts = CPU_CHOICE[0]
    w = dict(opts).get("wave_width")
    return name, wave_width if wave_width is not None else w
