"""Device functions (``@aw.func``): a call is inlined at its call site
(:meth:`anywave.compiler.frontend.Frontend.inline`), its body visited with its own names
(:class:`FuncCtx`, the per-function state this module holds).

Parameters bind as Python does (positional, keyword, defaults); a parameter the body
assigns, or a bool, becomes a variable, others compile-time bindings. A function with an
early ``return`` is wrapped in a one-trip loop (each return is a break); constant returns
whose type is known only at the end are patched then. Recursion and nesting deeper than 16
calls are errors.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from .ir import Op, Value
from .source import FuncSource


@dataclass
class FuncCtx:
    """State of one inlined function body (the kernel itself is the outermost)."""

    src: FuncSource
    consts: dict[str, Any]
    var_values: dict[str, Value] = field(default_factory=dict)
    defined: set[str] = field(default_factory=set)
    assigned_where: dict[str, ast.AST] = field(default_factory=dict)
    #: the run-time loops being translated, innermost last (bindings.LoopFrame)
    loop_frames: list[Any] = field(default_factory=list)
    const_names: set[str] = field(default_factory=set)
    #: names that are compile-time ints while assigned ints (astscan.unrolled_names' ``nested``)
    ct_ints: set[str] = field(default_factory=set)
    #: those of ct_ints bound to an int so far in this translation
    ct_bound: set[str] = field(default_factory=set)
    is_kernel: bool = True
    ret_var: Value | None = None
    ret_const: Any = None
    ret_wrapped: bool = False
    loop_depth: int = 0
    ret_type_node: ast.AST | None = None
    #: constant returns seen before the return type was known: (placeholder op, value, node)
    pending: list[tuple[Op, Any, ast.AST]] = field(default_factory=list)


#: the most ``@aw.func`` calls one kernel may inline in all (each call site expands its callee's
#: body again, so calls that call several others grow exponentially: 9 functions each calling the
#: next 4 times are 4^8 = 65536 expansions, tens of seconds and hundreds of MB). Counted, so
#: the compile fails at once, at the call that goes over, instead of running for minutes
#: (issue 31, item 12). The library's largest kernels inline a few hundred calls.
MAX_INLINED_CALLS = 4096
